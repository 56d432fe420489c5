"""Training callbacks."""
from __future__ import annotations

import logging
import math
from typing import Any

import lightning as L

log = logging.getLogger(__name__)


class NonFiniteLossGuard(L.Callback):
    """Stop training cleanly when the loss becomes NaN or infinite (e.g. a diverging sweep trial).

    The run then ends with its last finite checkpoint and reports its metrics; a sweep goes on.
    """

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None and not math.isfinite(float(loss)):
            log.warning("non-finite training loss %s at epoch %d step %d: stopping this run",
                        float(loss), trainer.current_epoch, trainer.global_step)
            trainer.should_stop = True
