"""Training callbacks (the non-finite loss guard, plain per-epoch progress lines) and the error a diverged run
ends with."""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Optional, Sequence

import lightning as L

from flexlearn.config import job_label
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

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and not math.isfinite(float(loss)):
            raise TrainingDivergedError(
                f"training diverged: loss {float(loss)} at epoch {trainer.current_epoch} step "
                f"{trainer.global_step}; lower task.lr or check the data"
            )


class EpochLines(L.Callback):
    """Plain progress for logs: a line when fitting starts and one line per epoch on stdout (metrics, time per
    epoch, time left), printed only when no progress bar is shown (stdout is not a terminal, or a multirun job;
    ``trainer.enable_progress_bar``). Lines of a multirun job start with ``[job <n>]``.

    ``keys``: the metrics shown, those absent skipped (default: the training loss and the validation loss,
    median and p95 error). Each epoch's line is printed when the next epoch starts (or training ends): the
    training loss of an epoch is logged after the callbacks' ``on_train_epoch_end``.
    """

    DEFAULT_KEYS = ("train/loss", "val/loss", "val/ang_err_median_deg", "val/ang_err_p95_deg")

    def __init__(self, keys: Sequence[str] = DEFAULT_KEYS, prefix: Optional[str] = None) -> None:
        self.keys = tuple(keys)
        self.prefix = prefix
        self._active = False
        self._pending: Optional[int] = None
        self._t_start = 0.0
        self._t_epoch = 0.0
        self._epochs_done = 0
        self._epoch_s = 0.0

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._active = trainer.progress_bar_callback is None and trainer.is_global_zero
        if self.prefix is None:
            label = job_label()
            self.prefix = f"[{label}] " if label else ""

    def _print(self, text: str) -> None:
        print(f"{self.prefix}{text}", flush=True)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._active:
            return
        n_params = sum(p.numel() for p in pl_module.parameters())
        self._print(
            f"training {type(pl_module).__name__} ({n_params:,} parameters) for up to "
            f"{trainer.max_epochs} epochs from epoch {trainer.current_epoch + 1}, "
            f"{trainer.num_training_batches} batches per epoch"
        )
        self._t_start = time.perf_counter()
        self._epochs_done = 0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._flush(trainer)
        self._t_epoch = time.perf_counter()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._pending = trainer.current_epoch
        self._epochs_done += 1
        self._epoch_s = time.perf_counter() - self._t_epoch

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._flush(trainer)

    def _flush(self, trainer: L.Trainer) -> None:
        """Print the line of the epoch that ended last, if not printed yet."""
        if not self._active or self._pending is None:
            return
        epoch, self._pending = self._pending, None
        metrics = trainer.callback_metrics
        parts = [f"{k} {float(metrics[k]):.4g}" for k in self.keys if k in metrics]
        elapsed = time.perf_counter() - self._t_start
        left = elapsed / max(self._epochs_done, 1) * max((trainer.max_epochs or 0) - epoch - 1, 0)
        width = len(str(trainer.max_epochs))
        self._print(
            f"epoch {epoch + 1:>{width}}/{trainer.max_epochs}  "
            + "  ".join(parts)
            + f"  ({self._epoch_s:.1f} s/epoch, {_duration(elapsed)} elapsed, ~{_duration(left)} left)"
        )


def _duration(seconds: float) -> str:
    """'42 s', '3.5 min', '1.2 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
