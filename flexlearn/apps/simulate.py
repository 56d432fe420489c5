"""`flexlearn-simulate`: write a simulated sweep-rig recording as raw streams."""
from __future__ import annotations

from omegaconf import DictConfig

from flexlearn.apps._runner import hydra_app, readable_errors
from flexlearn.config import from_dict


@hydra_app("flexlearn-simulate", "simulate")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-simulate"):
        from flexlearn.sim.rig import RigConfig, simulate_sweep

        rig = from_dict(RigConfig, cfg.sim, "sim")
        path = simulate_sweep(rig).save(cfg.output)
    print(path)


if __name__ == "__main__":
    main()
