"""What the direction network learns and how it is scored (seed 002, §III-B1).

Loss: ℓ = 1 − f(ΔB)ᵀ â (cosine loss between the predicted and the accelerometer-labelled parent axis).
Metrics on val/test: angular error mean, median, RMS and 95th percentile in degrees, and the fraction of
predictions that were no usable direction (``invalid_fraction``; each scored 180°).

On a dataset of several modules (a ``module`` column) with ``module_maps`` set, every module k gets its own input
map A_k learned with the network (seed 002 III-B3's Aᵢ, `flexlearn.models.joint_modules.ModuleMaps`):
ℓ = mean (1 − f(A_k ΔB)ᵀ â) + (σ_fix² / 2N) Σ_k ‖θ_k / σ_θ‖², N the training rows; val/test rows use their module's
map. The shared network is what is exported; a module it never saw is calibrated with `flexlearn-calibrate`.

A non-finite loss or raw network output during training, or a non-finite validation metric, raises
`TrainingDivergedError` at once: the run fails rather than report or checkpoint a diverged model.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import lightning as L
import torch
from lightning.pytorch.utilities.types import OptimizerLRSchedulerConfig

import flexlearn
from flexlearn.config import check, did_you_mean, is_finite_number
from flexlearn.metrics import angular_error_deg, angular_error_summary, invalid_direction
from flexlearn.models.joint_modules import ModuleMaps, check_map_options
from flexlearn.tasks.callbacks import TrainingDivergedError, epoch_text
from flexlearn.tasks.checkpoints import CHECKPOINT_INFO_KEY
from flexlearn.tasks.direction_model import LEGACY_TARGET, DirectionNet, as_direction_net, build_model, model_spec

TASK_KEYS = ("lr", "weight_decay", "lr_min_factor", "module_maps")
PROGRESS_BAR_KEYS = ("train/loss", "val/ang_err_median_deg")  # shown on the progress bar (terminal runs)


def validate_task_hparams(task: dict[str, Any], max_epochs: Any) -> None:
    """Check the ``task`` group and ``trainer.max_epochs``; `ConfigError` names the key and the value.

    ``lr`` > 0, ``weight_decay`` ≥ 0, ``lr_min_factor`` in [0, 1] (finite numbers), ``max_epochs`` an
    integer ≥ 1; no other ``task`` keys.

    Args:
        task: the ``task`` group (without ``model``, ``max_epochs``, ``n_modules``).
        max_epochs: ``trainer.max_epochs``.

    Raises:
        ConfigError: an unknown key or a bad value.
    """
    unknown = sorted(set(task) - set(TASK_KEYS))
    check(
        not unknown, "task", unknown, f"unknown key(s){did_you_mean(unknown, TASK_KEYS)}; known keys: {list(TASK_KEYS)}"
    )
    if task.get("module_maps") is not None:
        check(
            isinstance(task["module_maps"], dict),
            "task.module_maps",
            task["module_maps"],
            "must be a mapping (kind, prior_rotation_deg, prior_shape, sigma_fix_deg) or null",
        )
        check_map_options(task["module_maps"])
    lr, wd, lmf = task.get("lr", 3e-3), task.get("weight_decay", 1e-5), task.get("lr_min_factor", 0.02)
    check(is_finite_number(lr) and lr > 0, "task.lr", lr, "must be a positive finite number")
    check(is_finite_number(wd) and wd >= 0, "task.weight_decay", wd, "must be a finite number >= 0")
    check(is_finite_number(lmf) and 0 <= lmf <= 1, "task.lr_min_factor", lmf, "must be a number in [0, 1]")
    check(
        isinstance(max_epochs, int) and not isinstance(max_epochs, bool) and max_epochs >= 1,
        "trainer.max_epochs",
        max_epochs,
        "must be an integer >= 1",
    )


def _datamodule(trainer: L.Trainer) -> Any:
    """The trainer's datamodule (an attribute Lightning's data connector sets, not declared on `Trainer`)."""
    return getattr(trainer, "datamodule", None)


def cosine_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean of 1 − predᵀtarget over the batch; pred and target are unit vectors (B, 3).

    Args:
        pred: the predicted unit vectors (B, 3).
        target: the label unit vectors (B, 3).

    Returns:
        The mean loss (a scalar tensor).
    """
    return (1.0 - (pred * target).sum(dim=-1)).mean()


class DirectionTask(L.LightningModule):
    """Trains the direction model the ``model`` group names (its ``_target_``, `flexlearn.tasks.direction_model`)
    with the cosine loss; AdamW with a cosine-annealed learning rate.

    Hyperparameters are plain Python values (saved in the checkpoint, which therefore loads with
    ``torch.load(weights_only=True)``); ``model`` is saved with its ``_target_`` (`LEGACY_TARGET` when it names
    none).
    """

    net: DirectionNet
    module_maps: Optional[ModuleMaps]

    def __init__(
        self,
        model: dict[str, Any],
        lr: float = 3e-3,
        weight_decay: float = 1e-5,
        lr_min_factor: float = 0.02,
        max_epochs: int = 60,
        module_maps: Optional[dict[str, Any]] = None,
        n_modules: int = 0,
    ) -> None:
        super().__init__()
        validate_task_hparams(
            {"lr": lr, "weight_decay": weight_decay, "lr_min_factor": lr_min_factor, "module_maps": module_maps},
            max_epochs,
        )
        model = model_spec(model, default=LEGACY_TARGET)
        maps = None if module_maps is None else check_map_options(module_maps)
        check(
            maps is None or n_modules >= 1,
            "task.module_maps",
            module_maps,
            "needs a dataset of several modules (a 'module' column: data.module_seeds or data.paths)",
        )
        self.save_hyperparameters(  # in the checkpoint; the loggers get the nested run record only (record_run)
            {
                "model": model,
                "lr": lr,
                "weight_decay": weight_decay,
                "lr_min_factor": lr_min_factor,
                "max_epochs": max_epochs,
                "module_maps": maps,
                "n_modules": int(n_modules),
            },
            logger=False,
        )
        self.net = as_direction_net(build_model(model))
        self.module_maps = (
            None
            if maps is None
            else ModuleMaps(int(n_modules), maps["kind"], math.radians(maps["prior_rotation_deg"]), maps["prior_shape"])
        )
        self._prior_weight = 0.0  # σ_fix² / N_train, set when fitting starts
        self._val_err: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._test_err: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._train_loss_sum = torch.zeros(())
        self._train_batches = 0
        self.test_predictions: Optional[torch.Tensor] = None

    @staticmethod
    def validate_hparams(hp: dict[str, Any], where: str = "task") -> dict[str, Any]:
        """The task arguments (``lr``, ``weight_decay``, ``lr_min_factor``, ``module_maps``, ``max_epochs``) checked
        by `validate_task_hparams`, for `flexlearn.config.target_arguments`; ``model`` is checked on its own and
        ``n_modules`` comes from the dataset.

        Args:
            hp: the task's arguments.
            where: the config key of the task, for messages (not read: errors name ``task.<key>``).

        Returns:
            A copy of ``hp``.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        validate_task_hparams(
            {k: v for k, v in hp.items() if k not in ("max_epochs", "n_modules")}, hp.get("max_epochs", 60)
        )
        return dict(hp)

    def forward(self, delta_b: torch.Tensor) -> torch.Tensor:
        """The predicted unit direction of the parent axis for ΔB.

        Args:
            delta_b: the field changes ΔB (..., 3) [T].

        Returns:
            Unit vectors (..., 3); (0, 0, 0) where no direction is usable.
        """
        return self.net(delta_b)

    def on_fit_start(self) -> None:
        dm = _datamodule(self.trainer)
        if dm is None:
            return
        if self.module_maps is not None:
            found, n = dm.n_modules, int(self.hparams["n_modules"])
            check(
                found == n,
                "task.module_maps",
                f"{n} module maps",
                f"the dataset {dm.dataset_path} has {found} "
                "modules; train (or resume) on the modules the maps were made for",
            )
            sigma = math.radians(self.hparams["module_maps"]["sigma_fix_deg"])
            self._prior_weight = sigma**2 / max(1, len(dm.split("train")))
        if not self.trainer.ckpt_path:  # resumed runs keep the fitted normalisation
            self.net.fit_input_normalization(dm.train_delta_b())

    def _inputs(self, batch: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """(ΔB, label) of a batch; ΔB through its rows' module maps when the task has them."""
        delta_b, label = batch[0], batch[1]
        if self.module_maps is not None and len(batch) == 3:
            delta_b = self.module_maps(delta_b, batch[2])
        return delta_b, label

    def epoch_words(self) -> str:
        """'epoch 59/150': this epoch counted from 1, of the planned total (as the progress lines count it)."""
        return epoch_text(self.current_epoch, self.trainer.max_epochs if self._trainer is not None else None)

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        """The batch's cosine loss (plus the module maps' prior term); a non-finite loss or raw output fails the run.

        Args:
            batch: (ΔB (B, 3) [T], labels (B, 3)[, module indices (B,)]).
            batch_idx: the batch's index in the epoch (not read).

        Returns:
            The loss (a scalar tensor).

        Raises:
            TrainingDivergedError: the loss or the raw network output is not finite.
        """
        delta_b, label = self._inputs(batch)
        raw = self.net.raw_output(delta_b)
        loss = cosine_loss(self.net.direction(raw, delta_b), label)
        if self.module_maps is not None:
            loss = loss + self._prior_weight * self.module_maps.prior_term().to(loss.dtype)
        if not bool(torch.isfinite(loss) & torch.isfinite(raw).all()):
            raise TrainingDivergedError(
                f"training diverged in {self.epoch_words()} at step {self.global_step}: non-finite "
                f"{'loss' if not torch.isfinite(loss) else 'network output'} (task.lr = {self.hparams['lr']:g}); "
                "lower task.lr or check the data"
            )
        self._train_loss_sum = self._train_loss_sum + loss.detach()
        self._train_batches += 1
        return loss

    def on_train_epoch_end(self) -> None:
        # Logged once per epoch, not per step: per-step logging costs more than the step itself.
        if self._train_batches:
            self.log("train/loss", self._train_loss_sum / self._train_batches, prog_bar=True)
        self._train_loss_sum = torch.zeros(())
        self._train_batches = 0

    def _eval_step(
        self, batch: tuple[torch.Tensor, ...], store: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        delta_b, label = self._inputs(batch)
        pred = self.net(delta_b)
        store.append((angular_error_deg(pred.double(), label.double()), invalid_direction(pred)))
        return pred

    def validation_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> None:
        """Store the batch's angular errors for the epoch's validation metrics.

        Args:
            batch: (ΔB (B, 3) [T], labels (B, 3)[, module indices (B,)]).
            batch_idx: the batch's index in the epoch (not read).
        """
        self._eval_step(batch, self._val_err)

    def test_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> None:
        """Store the batch's angular errors and predictions for the test metrics.

        Args:
            batch: (ΔB (B, 3) [T], labels (B, 3)[, module indices (B,)]).
            batch_idx: the batch's index in the epoch (not read).
        """
        pred = self._eval_step(batch, self._test_err)
        self._test_preds.append(pred.detach())

    def on_test_epoch_start(self) -> None:
        self._test_preds: list[torch.Tensor] = []

    def _log_errors(self, store: list[tuple[torch.Tensor, torch.Tensor]], prefix: str) -> None:
        """Log the summary of one epoch's errors (invalid predictions count 180°); non-finite ones fail the run."""
        if not store:
            return
        err = torch.cat([e for e, _ in store])
        invalid = torch.cat([i for _, i in store])
        store.clear()
        summary = angular_error_summary(err, prefix=prefix, invalid=invalid)
        loss = 1.0 - torch.cos(torch.deg2rad(err)).mean()
        summary[f"{prefix}loss"] = float(loss)
        bad = sorted(k for k, v in summary.items() if not math.isfinite(v)) + (
            [f"{prefix}n_nonfinite"] if summary[f"{prefix}n_nonfinite"] else []
        )
        if bad:
            raise TrainingDivergedError(
                f"non-finite {prefix.rstrip('/')} metrics {bad} in {self.epoch_words()}; the run is not usable"
            )
        for key, value in summary.items():
            if key.endswith(("_deg", "n_samples", "invalid_fraction", "loss")):
                self.log(key, float(value), prog_bar=key in PROGRESS_BAR_KEYS)

    def on_validation_epoch_end(self) -> None:
        self._log_errors(self._val_err, "val/")

    def on_test_epoch_end(self) -> None:
        self._log_errors(self._test_err, "test/")
        self.test_predictions = torch.cat(self._test_preds) if self._test_preds else None

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Record what the model was trained on, in plain types (loadable with weights_only=True).

        Args:
            checkpoint: the checkpoint dict Lightning saves; the record goes under `CHECKPOINT_INFO_KEY`.
        """
        dm = _datamodule(self.trainer) if self._trainer is not None else None
        csv_logs = [
            lg for lg in (self.trainer.loggers if self._trainer is not None else []) if type(lg).__name__ == "CSVLogger"
        ]
        checkpoint[CHECKPOINT_INFO_KEY] = {
            # absolute: an evaluation from another working directory finds it
            "dataset_path": str(Path(dm.dataset_path).resolve()) if dm is not None else None,
            "metrics_csv": f"{csv_logs[0].log_dir}/metrics.csv" if csv_logs else None,
            "input_units": "T",
            "flexlearn_version": flexlearn.__version__,
        }

    def configure_optimizers(self) -> OptimizerLRSchedulerConfig:
        hp = self.hparams
        groups: list[dict[str, Any]] = [{"params": list(self.net.parameters()), "weight_decay": hp["weight_decay"]}]
        if self.module_maps is not None:
            groups.append({"params": [self.module_maps.theta], "weight_decay": 0.0})
        opt = torch.optim.AdamW(groups, lr=hp["lr"])
        # The epochs of the run: trainer.max_epochs as `TrainingSchedule` set it for the dataset, else the config's.
        epochs = self.trainer.max_epochs if self._trainer is not None and self.trainer.max_epochs else hp["max_epochs"]
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(
            opt, T_max=max(1, int(epochs)), eta_min=hp["lr"] * hp["lr_min_factor"]
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}
