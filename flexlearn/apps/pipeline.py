"""`flexlearn-pipeline`: the main job — simulate (cached), process, train, evaluate, export.

A run that diverges fails with one line and exit status 2 and exports nothing (`flexlearn.jobs.train`).
Prints the config tree at the start, progress while training and the test metrics, figures, exports and
run directory (the last line) at the end.
"""

from __future__ import annotations

from omegaconf import DictConfig

from flexlearn.apps.console import describe_files, show_result
from flexlearn.apps.runner import check_before_training, hydra_app, readable_errors, start_run


@hydra_app("flexlearn-pipeline", "pipeline")
def main(cfg: DictConfig) -> None:
    """Run the main job of the composed ``pipeline`` config; print its metrics, figures, exports and run directory.

    Args:
        cfg: the composed config (flexlearn/conf/pipeline.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-pipeline"):
        start_run(cfg, checks=check_before_training)
        from flexlearn.jobs.train import run_training  # heavy import off the start-up path (torch, Lightning)

        metrics = run_training(cfg)
    show_result(
        metrics,
        cfg.optimized_metric,
        first={
            "held-out modules": metrics.get("test_module_summary"),
            "held-out module figures": describe_files(metrics.get("figures_test_module")),
        },
        figures=describe_files(metrics.get("figures")),
        exports=describe_files(metrics.get("exports")),
    )


if __name__ == "__main__":
    main()
