"""`flexlearn-eval ckpt_path=...`: test metrics and figures of a trained checkpoint.

Prints the config tree at the start and the test metrics, figures and run directory (the last line) at the end.
"""

from __future__ import annotations

from omegaconf import DictConfig

from flexlearn.apps.console import describe_files, show_result
from flexlearn.apps.runner import hydra_app, readable_errors, start_run
from flexlearn.jobs.runs import EVAL_KEYS


@hydra_app("flexlearn-eval", "eval")
def main(cfg: DictConfig) -> None:
    """Evaluate ``cfg.ckpt_path``; print its test metrics, figures and run directory.

    Args:
        cfg: the composed config (flexlearn/conf/eval.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-eval"):
        start_run(cfg, EVAL_KEYS)
        from flexlearn.jobs.evaluate import run_evaluation  # heavy import off the start-up path (torch)

        metrics = run_evaluation(cfg.ckpt_path, cfg)
    show_result(metrics, figures=describe_files(metrics.get("figures")))


if __name__ == "__main__":
    main()
