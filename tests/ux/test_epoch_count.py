"""One epoch count everywhere a user reads one: the best checkpoint's file name, the per-epoch lines and the progress
bar all say "epoch 2/4" for the second of four epochs, and losses read as 3.00e-05, never 0.000."""

from __future__ import annotations

import re
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from torch.utils.data import DataLoader, TensorDataset

from flexlearn.config import instantiate_group
from flexlearn.jobs.compare import RunRecord
from flexlearn.tasks.callbacks import (
    EpochBar,
    EpochLines,
    EpochModelCheckpoint,
    epoch_text,
    format_metric,
    progress_bar,
)

CALLBACKS_YAML = Path(__file__).resolve().parents[2] / "flexlearn" / "conf" / "callbacks" / "default.yaml"
VAL = [3.0, 1.0, 2.0, 2.5]  # the monitored value per epoch: the best is the second epoch of four
LOSS = 3e-5


class _Toy(L.LightningModule):
    """A model whose training loss is 3e-5 and whose validation metric follows `VAL`, epoch by epoch."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch, batch_idx):
        loss = self.w.sum() * 0.0 + LOSS
        self.log("train/loss", loss, prog_bar=True, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val/metric", VAL[self.current_epoch], prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(4, 1)), batch_size=2)

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.zeros(2, 1)), batch_size=2)


def _fit(tmp_path: Path, bar: bool) -> tuple[L.Trainer, EpochModelCheckpoint]:
    template = yaml.safe_load(CALLBACKS_YAML.read_text())["model_checkpoint"]["filename"]
    ckpt = EpochModelCheckpoint(
        dirpath=tmp_path / "ckpt", filename=template, monitor="val/metric", mode="min", auto_insert_metric_name=False
    )
    callbacks: list[L.Callback] = [ckpt, progress_bar(enabled=bar), EpochLines(keys=("train/loss", "val/metric"))]
    trainer = L.Trainer(
        max_epochs=len(VAL),
        callbacks=callbacks,
        logger=False,
        enable_progress_bar=bar,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(_Toy())
    return trainer, ckpt


def test_words_and_numbers():
    assert epoch_text(58, 150) == "epoch 59/150" and epoch_text(0, 150, pad=True) == "epoch   1/150"
    assert epoch_text(3, None) == "epoch 4/?" and epoch_text(3, -1) == "epoch 4/?"
    assert format_metric("train/loss", 3e-5) == "3.00e-05" and format_metric("val/loss", 0.25) == "2.50e-01"
    assert format_metric("val/ang_err_median_deg", 0.38712) == "0.3871" and format_metric("x", float("nan")) == "nan"


def test_file_name_and_lines_count_the_same_epochs(tmp_path, capsys):
    trainer, ckpt = _fit(tmp_path, bar=False)
    out = capsys.readouterr().out
    best = Path(ckpt.best_model_path)
    assert best.name == "best-epoch002-of004.ckpt"  # the second of four epochs, as the lines say
    stored = torch.load(best, map_location="cpu", weights_only=True)
    assert stored["epoch"] == 1  # Lightning's own 0-based index inside the file is unchanged
    lines = {m[1]: m[2] for m in re.finditer(r"^epoch (\d+)/4  (.*)$", out, re.M)}
    assert sorted(lines) == ["1", "2", "3", "4"]
    assert "val/metric 1 " in lines["2"] + " " and "train/loss 3.00e-05" in lines["2"]
    assert RunRecord(tmp_path, metrics={"best_ckpt": str(best)}).best_epoch == 2


def test_the_bar_counts_from_one_of_the_planned_total(tmp_path, capsys):
    trainer, _ = _fit(tmp_path, bar=True)
    assert isinstance(trainer.progress_bar_callback, EpochBar)
    text = capsys.readouterr()
    shown = text.out + text.err
    assert "epoch 4/4" in shown and "epoch 0" not in shown and "Epoch" not in shown
    assert "train/loss=3.00e-05" in shown and "0.000" not in shown and "v_num" not in shown
    assert not re.search(r"^epoch \d+/4  ", shown, re.M)  # with a bar, no epoch lines


@pytest.mark.parametrize("bar", [True, False])
def test_the_callbacks_group_follows_the_trainer(compose_cfg, bar):
    cfg = compose_cfg("train", [f"trainer.enable_progress_bar={str(bar).lower()}"])
    made = instantiate_group(cfg.callbacks, "callbacks")
    assert sum(isinstance(c, EpochBar) for c in made) == int(bar)
    (ckpt,) = [c for c in made if isinstance(c, EpochModelCheckpoint)]
    assert ckpt.filename == "best-epoch{epoch_no:03d}-of{epochs:03d}"
    none = compose_cfg("train", ["callbacks=none", f"trainer.enable_progress_bar={str(bar).lower()}"])
    made = instantiate_group(none.callbacks, "callbacks")  # an identification's group: the bar, nothing else
    assert len(made) == 1 and isinstance(made[0], EpochBar) == bar


@pytest.mark.parametrize(
    ("name", "epoch"),
    [
        ("best-epoch059-of150.ckpt", 59),  # counted from 1
        ("best-epoch058.ckpt", 59),  # written before: Lightning's 0-based index
        ("best-epoch000.ckpt", 1),
        ("epoch=7-step=80.ckpt", 8),  # Lightning's default name, 0-based
        ("last.ckpt", None),
    ],
)
def test_the_comparison_reads_old_and_new_names(tmp_path, name, epoch):
    assert RunRecord(tmp_path, metrics={"best_ckpt": f"/c/{name}"}).best_epoch == epoch


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("callbacks.progress_bar.enabled=maybe", "callbacks.progress_bar.enabled"),
        ("callbacks.progress_bar.refresh_rate=0", "callbacks.progress_bar.refresh_rate"),
    ],
)
def test_a_bad_bar_setting_names_its_key(compose_cfg, override, key):
    from flexlearn.errors import ConfigError

    cfg = compose_cfg("train", [override])
    with pytest.raises(ConfigError, match=re.escape(f"config '{key}' = ")):
        instantiate_group(cfg.callbacks, "callbacks")


def test_a_diverged_run_names_the_epoch_as_the_lines_do():
    from types import SimpleNamespace

    from flexlearn.tasks.callbacks import NonFiniteLossGuard, TrainingDivergedError

    trainer = SimpleNamespace(current_epoch=58, max_epochs=150, global_step=7)
    with pytest.raises(TrainingDivergedError, match=r"loss nan in epoch 59/150 at step 7;"):
        NonFiniteLossGuard().on_train_batch_end(trainer, None, {"loss": torch.tensor(float("nan"))}, None, 0)  # type: ignore[arg-type]
