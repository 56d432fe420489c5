"""`flexlearn-pipeline`: the main job — simulate (cached), process, train, evaluate, export.

A run that diverges fails with one line and exit status 2 and exports nothing (`flexlearn.jobs.train`).
Prints the config tree at the start, progress while training and the test metrics, figures, exports and
run directory (the last line) at the end.
"""
from __future__ import annotations

from omegaconf import DictConfig

from flexlearn.apps.console import describe_files, show_config, show_result
from flexlearn.apps.runner import hydra_app, readable_errors, require_values


@hydra_app("flexlearn-pipeline", "pipeline")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-pipeline"):
        from flexlearn.jobs.train import check_run_config

        require_values(cfg)
        check_run_config(cfg)  # before the config is printed and Lightning is imported
        show_config(cfg, cfg.paths.output_dir)
        from flexlearn.jobs.train import train

        metrics = train(cfg)
    show_result(metrics, cfg.optimized_metric,
                first={"held-out modules": metrics.get("test_module_summary"),
                       "held-out module figures": describe_files(metrics.get("figures_test_module"))},
                figures=describe_files(metrics.get("figures")),
                exports=describe_files(metrics.get("exports")))


if __name__ == "__main__":
    main()
