"""What the direction network learns and how it is scored (seed 002, §III-B1).

Loss: ℓ = 1 − f(ΔB)ᵀ â (cosine loss between the predicted and the accelerometer-labelled parent axis).
Metrics on val/test: angular error mean, median, RMS and 95th percentile in degrees.
"""
from __future__ import annotations

from typing import Any, Optional

import lightning as L
import torch

import flexlearn
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.tasks.checkpoints import CHECKPOINT_INFO_KEY
from flexlearn.tasks.metrics import angular_error_deg, angular_error_summary


def cosine_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean of 1 − predᵀtarget over the batch; pred and target are unit vectors (B, 3)."""
    return (1.0 - (pred * target).sum(dim=-1)).mean()


class DirectionTask(L.LightningModule):
    """Trains `DirectionMLP` with the cosine loss; AdamW with a cosine-annealed learning rate.

    Hyperparameters are plain Python values (saved in the checkpoint, which therefore loads with
    ``torch.load(weights_only=True)``).
    """

    def __init__(self, model: dict[str, Any], lr: float = 3e-3, weight_decay: float = 1e-5,
                 lr_min_factor: float = 0.02, max_epochs: int = 60) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = DirectionMLP(**model)
        self._val_err: list[torch.Tensor] = []
        self._test_err: list[torch.Tensor] = []
        self._train_loss_sum = torch.zeros(())
        self._train_batches = 0
        self.test_predictions: Optional[torch.Tensor] = None

    def forward(self, delta_b: torch.Tensor) -> torch.Tensor:
        return self.net(delta_b)

    def on_fit_start(self) -> None:
        dm = self.trainer.datamodule
        if dm is not None and not self.trainer.ckpt_path:  # resumed runs keep the fitted normalisation
            self.net.fit_input_normalization(dm.train_delta_b())

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        delta_b, label = batch
        loss = cosine_loss(self.net(delta_b), label)
        self._train_loss_sum = self._train_loss_sum + loss.detach()
        self._train_batches += 1
        return loss

    def on_train_epoch_end(self) -> None:
        # Logged once per epoch, not per step: per-step logging costs more than the step itself.
        if self._train_batches:
            self.log("train/loss", self._train_loss_sum / self._train_batches)
        self._train_loss_sum = torch.zeros(())
        self._train_batches = 0

    def _eval_step(self, batch: tuple[torch.Tensor, torch.Tensor], store: list[torch.Tensor]) -> torch.Tensor:
        delta_b, label = batch
        pred = self.net(delta_b)
        store.append(angular_error_deg(pred.double(), label.double()))
        return pred

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._eval_step(batch, self._val_err)

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        pred = self._eval_step(batch, self._test_err)
        self._test_preds.append(pred.detach())

    def on_test_epoch_start(self) -> None:
        self._test_preds: list[torch.Tensor] = []

    def _log_errors(self, store: list[torch.Tensor], prefix: str) -> None:
        if not store:
            return
        err = torch.cat(store)
        store.clear()
        summary = angular_error_summary(err, prefix=prefix)
        loss = 1.0 - torch.cos(torch.deg2rad(err[torch.isfinite(err)])).mean()
        self.log(f"{prefix}loss", loss.float())
        for key, value in summary.items():
            if key.endswith("_deg") or key.endswith("n_samples"):
                self.log(key, float(value))

    def on_validation_epoch_end(self) -> None:
        self._log_errors(self._val_err, "val/")

    def on_test_epoch_end(self) -> None:
        self._log_errors(self._test_err, "test/")
        self.test_predictions = torch.cat(self._test_preds) if self._test_preds else None

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Record what the model was trained on, in plain types (loadable with weights_only=True)."""
        dm = self.trainer.datamodule if self._trainer is not None else None
        csv_logs = [lg for lg in (self.trainer.loggers if self._trainer is not None else [])
                    if type(lg).__name__ == "CSVLogger"]
        checkpoint[CHECKPOINT_INFO_KEY] = {
            "dataset_path": str(dm.dataset_path) if dm is not None else None,
            "metrics_csv": f"{csv_logs[0].log_dir}/metrics.csv" if csv_logs else None,
            "input_units": "T",
            "flexlearn_version": flexlearn.__version__,
        }

    def configure_optimizers(self) -> dict[str, Any]:
        opt = torch.optim.AdamW(self.net.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(
            opt, T_max=max(1, self.hparams.max_epochs), eta_min=self.hparams.lr * self.hparams.lr_min_factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}
