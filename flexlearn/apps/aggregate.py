"""`flexlearn-aggregate dir=<multirun dir>`: one table and one figure for a multirun, and its best run.

The table is CSV and Markdown; the best run's directory, checkpoint and metrics are printed
(`flexlearn.sweeps.aggregate.best_run_lines`); for an Optuna sweep (``optimization_results.yaml`` in the directory)
also the study's optimisation history and parameter importances (``optuna_history.png``, ``optuna_importance.png``;
:mod:`flexlearn.viz.optuna_figures`)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors
from flexlearn.sweeps.aggregate import aggregate_multirun, best_run_lines


@hydra_app("flexlearn-aggregate", "aggregate")
def main(cfg: DictConfig) -> None:
    """Aggregate the multirun ``cfg.dir``; print its best run and the files written.

    Args:
        cfg: the composed config (flexlearn/conf/aggregate.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-aggregate"):
        metrics = [cfg.metrics] if isinstance(cfg.metrics, str) else [str(m) for m in cfg.metrics or []]
        res = aggregate_multirun(cfg.dir, cfg.get("out"), metrics, cfg.get("x"), cfg.get("y"))
        files = [res["csv"], res["markdown"], res["figure"]]
        if (Path(cfg.dir) / "optimization_results.yaml").is_file() and res["y"]:
            from flexlearn.viz.optuna_figures import write_optuna_figures  # heavy import off the start-up path

            files += write_optuna_figures(cfg.dir, res["rows"], res["y"], cfg.get("out") or cfg.dir)
    print("\n".join(best_run_lines(res)))
    print(f"{res['n_done']}/{res['n_jobs']} jobs -> " + ", ".join(str(f) for f in files if f))


if __name__ == "__main__":
    main()
