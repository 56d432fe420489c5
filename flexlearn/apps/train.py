"""`flexlearn-train`: train the direction model; returns the optimised metric for sweepers.

A single run that diverges (non-finite loss, network output or metric) fails with one line and exit
status 2. In a multirun the diverged job is recorded (``status: diverged`` in its ``metrics.json``),
logged and reported to the sweeper as +inf, so the sweep goes on.
"""
from __future__ import annotations

import logging
import math

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors, sweep_value
from flexlearn.tasks.callbacks import TrainingDivergedError
from flexlearn.jobs.train import train

log = logging.getLogger(__name__)


def _in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def main(cfg: DictConfig) -> float:
    with readable_errors("flexlearn-train"):
        try:
            metrics = train(cfg)
        except TrainingDivergedError as exc:
            if not _in_multirun():
                raise
            log.error("flexlearn-train: this job failed: %s; reported to the sweeper as +inf", exc)
            return math.inf
    value = float(metrics.get(cfg.optimized_metric, float("nan")))
    if value != value:
        log.warning("%s is NaN for this run; reported to the sweeper as +inf", cfg.optimized_metric)
    print(metrics["output_dir"])
    return sweep_value(value)


if __name__ == "__main__":
    main()
