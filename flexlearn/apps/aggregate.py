"""`flexlearn-aggregate dir=<multirun dir>`: one table (CSV, Markdown) and one figure for a multirun."""
from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.sweeps.aggregate import aggregate_multirun


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="aggregate")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-aggregate"):
        metrics = OmegaConf.to_container(cfg.metrics, resolve=True) or []
        res = aggregate_multirun(cfg.dir, cfg.get("out"), metrics, cfg.get("x"), cfg.get("y"))
    print(f"{res['n_done']}/{res['n_jobs']} jobs -> {res['csv']}, {res['markdown']}, {res['figure']}")


if __name__ == "__main__":
    main()
