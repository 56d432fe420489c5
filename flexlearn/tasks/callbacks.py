"""Training callbacks (the non-finite loss guard, plain per-epoch progress lines, the progress bar, the best
checkpoint's file name) and the error a diverged run ends with.

One epoch count everywhere a user reads one: "epoch 59/150" is the 59th epoch of the 150 the run plans (1-based,
the planned total after `TrainingSchedule`), in the per-epoch lines (`EpochLines`), on the progress bar
(`EpochBar`) and in the best checkpoint's name (`EpochModelCheckpoint`: ``best-epoch059-of150.ckpt`` holds the weights
after that epoch). Losses are printed in scientific notation (`format_metric`: ``3.00e-05``, never ``0.000``).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Optional, Sequence

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.callbacks.progress.tqdm_progress import convert_inf

from flexlearn.config import check, job_label
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
        """Raise `TrainingDivergedError` when the batch's training loss is NaN or infinite.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
            outputs: what ``training_step`` returned (the loss, or a dict with ``loss``).
            batch: the batch (not read).
            batch_idx: the batch's index in the epoch (not read).

        Raises:
            TrainingDivergedError: the loss is NaN or infinite.
        """
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and not math.isfinite(float(loss)):
            raise TrainingDivergedError(
                f"training diverged: loss {float(loss)} in {epoch_text(trainer.current_epoch, trainer.max_epochs)} at "
                f"step {trainer.global_step}; lower task.lr or check the data"
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
        """Decide whether to print (no progress bar, rank 0); set the line prefix of a multirun job.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
            stage: the trainer's stage (``fit``, ``validate``, ``test``, ``predict``).
        """
        self._active = trainer.progress_bar_callback is None and trainer.is_global_zero
        if self.prefix is None:
            label = job_label()
            self.prefix = f"[{label}] " if label else ""

    def _print(self, text: str) -> None:
        print(f"{self.prefix}{text}", flush=True)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Print the line that starts fitting (model, parameters, epochs, batches per epoch).

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
        """
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
        """Print the previous epoch's line; start this epoch's clock.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
        """
        self._flush(trainer)
        self._t_epoch = time.perf_counter()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Note the epoch that ended and its duration; its line follows (`_flush`).

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
        """
        self._pending = trainer.current_epoch
        self._epochs_done += 1
        self._epoch_s = time.perf_counter() - self._t_epoch

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Print the last epoch's line.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
        """
        self._flush(trainer)

    def _flush(self, trainer: L.Trainer) -> None:
        """Print the line of the epoch that ended last, if not printed yet."""
        if not self._active or self._pending is None:
            return
        epoch, self._pending = self._pending, None
        metrics = trainer.callback_metrics
        parts = [f"{k} {format_metric(k, float(metrics[k]))}" for k in self.keys if k in metrics]
        elapsed = time.perf_counter() - self._t_start
        left = elapsed / max(self._epochs_done, 1) * max((trainer.max_epochs or 0) - epoch - 1, 0)
        self._print(
            epoch_text(epoch, trainer.max_epochs, pad=True)
            + "  "
            + "  ".join(parts)
            + f"  ({self._epoch_s:.1f} s/epoch, {_duration(elapsed)} elapsed, ~{_duration(left)} left)"
        )


def epoch_text(index: int, total: Optional[int], pad: bool = False) -> str:
    """'epoch 59/150': the epoch of 0-based ``index`` counted from 1, of the ``total`` planned (``trainer.max_epochs``;
    '?' when unknown or unbounded). ``pad``: the number right-aligned to the width of the total (aligned lines).

    Args:
        index: the 0-based epoch index.
        total: the planned number of epochs (None: unknown).
        pad: whether to right-align the number.

    Returns:
        The text.
    """
    known = total is not None and 0 < total < 10**9
    number = f"{index + 1:>{len(str(total))}}" if pad and known else str(index + 1)
    return f"epoch {number}/{total if known else '?'}"


def format_metric(name: str, value: float) -> str:
    """A metric as printed on the bar and in the epoch lines: losses (a ``loss`` in the name) in scientific notation
    with 3 significant digits ('3.00e-05'), other quantities with 4 ('0.3871', '12.5').

    Args:
        name: the metric's name.
        value: its value.

    Returns:
        The formatted value (``nan``, ``inf`` as Python prints them).
    """
    if not math.isfinite(value):
        return str(value)
    return f"{value:.2e}" if "loss" in name else f"{value:.4g}"


def _duration(seconds: float) -> str:
    """'42 s', '3.5 min', '1.2 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class TrainingSchedule(L.Callback):
    """A schedule that follows the dataset: epochs for ``target_steps`` optimizer steps, a stop on a validation
    plateau, and a word when a run made too few steps to converge.

    * Epochs: E = min(trainer.max_epochs, ⌈target_steps / S⌉), S the optimizer steps per epoch (the train split
      over the batch size, `flexlearn.data.datamodule.auto_batch_size` unless set); ``trainer.max_epochs`` is the
      cap. Set before the optimizers are built, so a cosine schedule over ``trainer.max_epochs`` spans E.
    * Plateau: training stops once ``monitor`` has not improved by a relative ``min_delta`` for
      max(``min_patience``, ``patience_fraction``·E) epochs.
    * Too few steps: when training ends after fewer than ``min_steps`` optimizer steps, one warning names the
      steps, the batch size and the epochs, and the overrides that give ``target_steps``.

    Args:
        target_steps: optimizer steps a run is scheduled for.
        min_steps: fewer steps than this end with the warning.
        monitor: the validation metric of the plateau (lower is better).
        patience_fraction, min_patience: the plateau's patience, as a fraction of E and at least in epochs.
        min_delta: relative improvement that counts.
    """

    def __init__(
        self,
        target_steps: int = 4000,
        min_steps: int = 1000,
        monitor: str = "val/ang_err_median_deg",
        patience_fraction: float = 0.25,
        min_patience: int = 20,
        min_delta: float = 0.005,
    ) -> None:
        self.target_steps, self.min_steps, self.monitor = int(target_steps), int(min_steps), monitor
        self.patience_fraction, self.min_patience, self.min_delta = patience_fraction, int(min_patience), min_delta
        self.epochs = 0
        self.steps_per_epoch = 0
        self.patience = 0
        self._best = math.inf
        self._since = 0

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Set the epochs (``trainer.fit_loop.max_epochs``) and the patience for fitting; log them.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
            stage: the trainer's stage (``fit``, ``validate``, ``test``, ``predict``).
        """
        dm = getattr(trainer, "datamodule", None)
        if stage != "fit" or dm is None or not hasattr(dm, "train_dataloader"):
            return
        self.steps_per_epoch = max(1, len(dm.train_dataloader()))
        cap = int(trainer.max_epochs or 1)
        self.epochs = min(cap, max(1, -(-self.target_steps // self.steps_per_epoch)))
        trainer.fit_loop.max_epochs = self.epochs
        self.patience = max(self.min_patience, int(self.patience_fraction * self.epochs))
        if trainer.is_global_zero:
            log.info(
                "schedule: %d epochs of %d optimizer steps (batch %s; %d steps planned, trainer.max_epochs=%d the "
                "cap); stop after %d epochs without progress of %s",
                self.epochs,
                self.steps_per_epoch,
                getattr(dm, "batch_size", "?"),
                self.epochs * self.steps_per_epoch,
                cap,
                self.patience,
                self.monitor,
            )

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Count the epochs without improvement of ``monitor``; stop after ``patience`` of them.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
        """
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        value = float(trainer.callback_metrics[self.monitor])
        if value < self._best * (1.0 - self.min_delta):
            self._best, self._since = value, 0
            return
        self._since += 1
        if self.patience and self._since >= self.patience and not trainer.should_stop:
            trainer.should_stop = True
            if trainer.is_global_zero:
                log.info(
                    "stopping after %s: %s has not improved by %.1f%% for %d epochs (best %.4g)",
                    epoch_text(trainer.current_epoch, getattr(trainer, "max_epochs", None)),
                    self.monitor,
                    100 * self.min_delta,
                    self._since,
                    self._best,
                )

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Warn when the run made fewer than ``min_steps`` optimizer steps.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
        """
        steps = int(trainer.global_step)
        if steps >= self.min_steps or not trainer.is_global_zero or not self.steps_per_epoch:
            return
        dm = getattr(trainer, "datamodule", None)
        batch = getattr(dm, "batch_size", None)
        n_train = self.steps_per_epoch * batch if batch else None
        epochs = -(-self.target_steps // self.steps_per_epoch)
        log.warning(
            "this run made only %d optimizer steps (%d per epoch, batch %s, %d epochs; ~%s training rows): the "
            "model is likely under-fitted; for %d steps set trainer.max_epochs=%d (or a smaller data.batch_size)",
            steps,
            self.steps_per_epoch,
            batch,
            trainer.current_epoch,
            n_train,
            self.target_steps,
            epochs,
        )

    def state_dict(self) -> dict[str, Any]:
        return {"best": self._best, "since": self._since}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the plateau's state (best value, epochs since) from a checkpoint.

        Args:
            state_dict: what `state_dict` returned (``best``, ``since``).
        """
        self._best = float(state_dict.get("best", math.inf))
        self._since = int(state_dict.get("since", 0))


def checkpoint_name_fields(epoch_index: int, planned: Optional[int]) -> dict[str, int]:
    """The fields `EpochModelCheckpoint` adds to a file-name template: ``epoch_no`` (the epoch counted from 1) and
    ``epochs`` (the planned total, ``trainer.max_epochs``; 0 when unknown).

    Args:
        epoch_index: Lightning's 0-based epoch index.
        planned: the planned number of epochs (None: unknown).

    Returns:
        ``{epoch_no, epochs}``.
    """
    epochs = planned if planned is not None and 0 < planned < 10**9 else 0
    return {"epoch_no": int(epoch_index) + 1, "epochs": int(epochs)}


class EpochModelCheckpoint(ModelCheckpoint):
    """A ModelCheckpoint whose file-name template may use ``{epoch_no}``, the epoch counted from 1 as the progress
    lines and the bar count it, and ``{epochs}``, the planned total: ``best-epoch{epoch_no:03d}-of{epochs:03d}``
    names the best weights after epoch 59 of 150 ``best-epoch059-of150.ckpt``. ``{epoch}`` stays Lightning's 0-based
    index. The checkpoint's own ``epoch`` entry is Lightning's, unchanged.
    """

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        """Lightning's setup; keep the trainer for the file-name fields.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.
            stage: the trainer's stage (``fit``, ``validate``, ``test``, ``predict``).
        """
        super().setup(trainer, pl_module, stage)
        self._fit_trainer = trainer

    def format_checkpoint_name(
        self,
        metrics: dict[str, Any],
        filename: Optional[str] = None,
        ver: Optional[int] = None,
        prefix: Optional[str] = None,
    ) -> str:
        """Lightning's file name, with ``{epoch_no}`` and ``{epochs}`` filled in.

        Args:
            metrics: the logged metrics (and ``epoch``) the template may name.
            filename: the template (None: the callback's own).
            ver: the version appended as ``-v<ver>`` (None: none).
            prefix: the name's prefix (None: none).

        Returns:
            The checkpoint's file name (in the callback's ``dirpath`` when it is set).
        """
        trainer = getattr(self, "_fit_trainer", None)
        epoch = metrics.get("epoch", trainer.current_epoch if trainer is not None else 0)
        planned = trainer.max_epochs if trainer is not None else None
        fields = checkpoint_name_fields(int(epoch), planned)
        named: dict[str, Any] = {**metrics, **fields}
        return super().format_checkpoint_name(named, filename=filename, ver=ver, prefix=prefix)


class EpochBar(TQDMProgressBar):
    """The training progress bar: 'epoch 59/150' (1-based, of the planned total, as the epoch lines say it) and the
    metrics logged to the bar formatted by `format_metric` (losses as '3.00e-05'); the logger's version is left out.
    """

    def on_train_epoch_start(self, trainer: L.Trainer, *args: Any) -> None:
        """Lightning's own start of an epoch's bar, with our words for the epoch ("epoch 1/4", never "Epoch 0").

        Args:
            trainer: the Lightning trainer.
            *args: the LightningModule, as Lightning passes it (not read).
        """
        if self._leave:
            self.train_progress_bar = self.init_train_tqdm()
        bar = self.train_progress_bar
        bar.set_description(epoch_text(trainer.current_epoch, trainer.max_epochs), refresh=False)
        bar.reset(total=convert_inf(self.total_train_batches))
        bar.initial = 0

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        """Lightning's bar metrics without ``v_num``, numbers formatted by `format_metric`.

        Args:
            trainer: the Lightning trainer.
            pl_module: the LightningModule being trained.

        Returns:
            {name: value or formatted text}.
        """
        items = super().get_metrics(trainer, pl_module)
        items.pop("v_num", None)
        return {
            k: format_metric(k, float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
            for k, v in items.items()
        }


def progress_bar(enabled: bool = True, refresh_rate: int = 1) -> L.Callback:
    """The ``callbacks.progress_bar`` entry: an `EpochBar` when the trainer shows a bar (``enabled``: the trainer's
    ``enable_progress_bar``), else a callback that does nothing (Lightning refuses a bar it was told not to show;
    `EpochLines` prints then).

    Args:
        enabled: whether the trainer shows a progress bar.
        refresh_rate: batches between bar updates.

    Returns:
        The bar, or a plain ``lightning.Callback``.

    Raises:
        ConfigError: ``enabled`` is not true or false, or ``refresh_rate`` not a positive integer.
    """
    check(isinstance(enabled, bool), "callbacks.progress_bar.enabled", enabled, "must be true or false")
    ok_rate = isinstance(refresh_rate, int) and not isinstance(refresh_rate, bool) and refresh_rate >= 1
    check(ok_rate, "callbacks.progress_bar.refresh_rate", refresh_rate, "must be an integer ≥ 1")
    return EpochBar(refresh_rate=refresh_rate) if enabled else L.Callback()
