"""`flexlearn-aggregate dir=<multirun dir>`: one table (CSV, Markdown) and one figure for a multirun."""
from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from flexlearn.apps._runner import hydra_app, readable_errors


@hydra_app("flexlearn-aggregate", "aggregate")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-aggregate"):
        from flexlearn.sweeps.aggregate import aggregate_multirun

        metrics = OmegaConf.to_container(cfg.metrics, resolve=True) or []
        res = aggregate_multirun(cfg.dir, cfg.get("out"), metrics, cfg.get("x"), cfg.get("y"))
    print(f"{res['n_done']}/{res['n_jobs']} jobs -> {res['csv']}, {res['markdown']}, {res['figure']}")


if __name__ == "__main__":
    main()
