"""`flexlearn-simulate`: write a simulated sweep-rig recording as raw streams."""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.config import from_dict
from flexlearn.sim.rig import RigConfig, simulate_sweep


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="simulate")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-simulate"):
        rig = from_dict(RigConfig, cfg.sim, "sim")
        path = simulate_sweep(rig).save(cfg.output)
    print(path)


if __name__ == "__main__":
    main()
