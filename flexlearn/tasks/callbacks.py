"""Training callbacks and the error a diverged run ends with."""
from __future__ import annotations

import logging
import math
from typing import Any

import lightning as L

from flexlearn.errors import FlexlearnError

log = logging.getLogger(__name__)


class TrainingDivergedError(FlexlearnError):
    """The loss, the network output or a metric became NaN or infinite: the run failed and exports nothing.

    A single run ends with exit status 2 and this one line; in a multirun the job is recorded as
    ``status: diverged`` in its ``metrics.json`` and reported to the sweeper as +inf (the sweep goes on).
    """


class NonFiniteLossGuard(L.Callback):
    """Fail the run with `TrainingDivergedError` as soon as the training loss is NaN or infinite.

    `flexlearn.tasks.direction.DirectionTask` checks its own loss and raw network output at every step;
    this guard covers any other LightningModule trained through `flexlearn.jobs.train.train`.
    """

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and not math.isfinite(float(loss)):
            raise TrainingDivergedError(
                f"training diverged: loss {float(loss)} at epoch {trainer.current_epoch} step "
                f"{trainer.global_step}; lower task.lr or check the data")
