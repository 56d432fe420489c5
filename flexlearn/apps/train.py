"""`flexlearn-train`: train the direction model; returns the optimised metric for sweepers.

The value returned to a sweeper is the best checkpoint's ``optimized_metric`` (``best_score`` in ``metrics.json``),
not the last epoch's. ``flexlearn-train resume=<run dir>`` (or ``ckpt_path=<run's checkpoints>/last.ckpt``)
continues an interrupted run in its own directory with its saved overrides (yours on top, e.g. a larger
``trainer.max_epochs``). Ctrl-C or SIGTERM stops at the end of the epoch, writes ``status: interrupted`` and
prints the resume command (exit status 130 or 143); a second one stops at once.

A single run that diverges (non-finite loss, network output or metric) fails with one line and exit
status 2. In a multirun the diverged job is recorded (``status: diverged`` in its ``metrics.json``),
logged and reported to the sweeper as +inf, so the sweep goes on.

Prints the resolved config as a tree at the start (``config_tree.txt``), progress while training (a progress
bar on a terminal, one line per epoch otherwise) and the test metrics at the end, then the run directory.
"""

from __future__ import annotations

import logging
import math

from omegaconf import DictConfig

from flexlearn.apps.console import show_result
from flexlearn.apps.runner import (
    check_before_training,
    hydra_app,
    readable_errors,
    start_run,
    sweep_value,
    threads_per_parallel_job,
)
from flexlearn.config import in_multirun

log = logging.getLogger(__name__)


@hydra_app("flexlearn-train", "train")
def main(cfg: DictConfig) -> float:
    """Train one run of the composed ``train`` config; return its optimised metric (+inf if it diverged).

    Args:
        cfg: the composed config (flexlearn/conf/train.yaml with the command's overrides).

    Returns:
        The best checkpoint's ``optimized_metric`` (+inf when non-finite or when the job diverged in a multirun).
    """
    with readable_errors("flexlearn-train"):
        start_run(cfg, checks=check_before_training)
        threads_per_parallel_job()
        # heavy imports off the start-up path (torch, Lightning)
        from flexlearn.jobs.train import run_training
        from flexlearn.tasks.callbacks import TrainingDivergedError

        try:
            metrics = run_training(cfg)
        except TrainingDivergedError as exc:
            if not in_multirun():
                raise
            log.error("flexlearn-train: this job failed: %s; reported to the sweeper as +inf", exc)
            return math.inf
    value = float(metrics.get("best_score", metrics.get(cfg.optimized_metric, float("nan"))))
    if value != value:
        log.warning("%s is NaN for this run; reported to the sweeper as +inf", cfg.optimized_metric)
    show_result(
        metrics,
        cfg.optimized_metric,
        recording=f"{metrics['mcap']} (Foxglove: open the file; the link moves on /link/backbone)"
        if metrics.get("mcap")
        else None,
    )
    return sweep_value(value)


if __name__ == "__main__":
    main()
