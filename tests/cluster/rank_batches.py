"""A Lightning callback for the cluster tests: which training samples each rank saw in the first epoch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning as L


class RecordBatches(L.Callback):
    """Write ``<out>/rank<r>.json``: the labels (rounded to 6 digits, one triple per sample) of every training batch
    rank ``r`` received in epoch 0; they identify the samples."""

    def __init__(self, out: str) -> None:
        self.out = Path(out)
        self.seen: list[list[float]] = []

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if trainer.current_epoch == 0:
            self.seen += [[round(float(v), 6) for v in row] for row in batch[1].tolist()]

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: Any) -> None:
        if trainer.current_epoch == 0:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(self.seen))
