"""A callback that signals its own process during training, as Ctrl-C or a scheduler's SIGTERM would."""

from __future__ import annotations

import os

import lightning as L


class SignalAt(L.Callback):
    """Send ``signum`` to this process ``times`` times at the start of batch ``batch`` of epoch ``epoch``."""

    def __init__(self, epoch: int = 1, signum: int = 2, times: int = 1, batch: int = 1) -> None:
        self.epoch, self.signum, self.times, self.batch = epoch, signum, times, batch

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: object, idx: int) -> None:
        if trainer.current_epoch == self.epoch and idx == self.batch:
            for _ in range(self.times):
                os.kill(os.getpid(), self.signum)
