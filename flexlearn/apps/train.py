"""`flexlearn-train`: train the direction model; returns the optimised metric for sweepers.

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
from flexlearn.apps.runner import hydra_app, readable_errors, start_run, sweep_value, threads_per_parallel_job
from flexlearn.config import in_multirun

log = logging.getLogger(__name__)


@hydra_app("flexlearn-train", "train")
def main(cfg: DictConfig) -> float:
    """Train one run of the composed ``train`` config; return its optimised metric (+inf if it diverged)."""
    with readable_errors("flexlearn-train"):
        start_run(cfg)
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
    value = float(metrics.get(cfg.optimized_metric, float("nan")))
    if value != value:
        log.warning("%s is NaN for this run; reported to the sweeper as +inf", cfg.optimized_metric)
    show_result(metrics, cfg.optimized_metric)
    return sweep_value(value)


if __name__ == "__main__":
    main()
