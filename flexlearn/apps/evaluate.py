"""`flexlearn-eval ckpt_path=...`: test metrics and figures of a trained checkpoint.

Prints the config tree at the start and the test metrics, figures and run directory (the last line) at the end.
"""
from __future__ import annotations

from omegaconf import DictConfig

from flexlearn.apps.console import describe_files, show_config, show_result
from flexlearn.apps.runner import hydra_app, readable_errors, require_values


@hydra_app("flexlearn-eval", "eval")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-eval"):
        from flexlearn.jobs.train import EVAL_KEYS, check_run_config

        require_values(cfg)
        check_run_config(cfg, EVAL_KEYS)  # before the config is printed and torch is imported
        show_config(cfg, cfg.paths.output_dir)
        from flexlearn.jobs.evaluate import evaluate_checkpoint

        metrics = evaluate_checkpoint(cfg.ckpt_path, cfg)
    show_result(metrics, figures=describe_files(metrics.get("figures")))


if __name__ == "__main__":
    main()
