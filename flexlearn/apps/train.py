"""`flexlearn-train`: train the direction model; returns the optimised metric for sweepers."""
from __future__ import annotations

import logging

import hydra
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors, sweep_value
from flexlearn.tasks.training import train

log = logging.getLogger(__name__)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train")
def main(cfg: DictConfig) -> float:
    with readable_errors("flexlearn-train"):
        metrics = train(cfg)
    value = float(metrics.get(cfg.optimized_metric, float("nan")))
    if value != value:
        log.warning("%s is NaN for this run; reported to the sweeper as +inf", cfg.optimized_metric)
    print(metrics["output_dir"])
    return sweep_value(value)


if __name__ == "__main__":
    main()
