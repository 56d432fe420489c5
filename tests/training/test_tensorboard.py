"""The TensorBoard logger (``logger=tensorboard``): its event files, read back with TensorBoard's own reader,
hold the same per-epoch metrics as the CSV log written beside them, and the run's nested hyperparameters."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
import yaml

from flexlearn.jobs.train import train

REPO = Path(__file__).resolve().parents[2]
TINY = ["data.sim.n_poses=400", "trainer.max_epochs=3", "data.batch_size=64", "logger=tensorboard"]


def _csv_column(path: Path, key: str) -> list[float]:
    with path.open() as f:
        return [float(row[key]) for row in csv.DictReader(f) if row.get(key)]


def test_tensorboard_events_hold_the_epoch_metrics_of_the_csv_log(compose_cfg):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    cfg = compose_cfg("train", TINY)
    train(cfg)
    out = Path(cfg.paths.output_dir)
    events = sorted((out / "tensorboard").rglob("events.out.tfevents.*"))
    assert events, f"no TensorBoard event file under {out / 'tensorboard'}"
    acc = event_accumulator.EventAccumulator(str(events[0].parent))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for key in ("train/loss", "val/loss", "val/ang_err_median_deg"):
        assert key in tags, (key, sorted(tags))
        logged = [e.value for e in acc.Scalars(key)]
        from_csv = _csv_column(out / "csv" / "metrics.csv", key)
        assert len(logged) == len(from_csv) == 3, (key, logged, from_csv)  # one value per epoch
        assert logged == pytest.approx(from_csv, rel=1e-6), key
    assert "hp_metric" not in tags  # no placeholder metric
    hparams = yaml.safe_load((out / "tensorboard" / "hparams.yaml").read_text())
    assert hparams["trainer"]["max_epochs"] == 3 and hparams["data"]["sim"]["n_poses"] == 400  # nested only:
    assert "lr" not in hparams and hparams["task"]["lr"] > 0  # the task's flat copy is not logged beside it
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # run from a checkout: the commit and whether tracked files differ from it
        assert hparams["run"]["source"]["commit"] == head.stdout.strip()
        assert isinstance(hparams["run"]["source"]["dirty"], bool)


def test_tensorboard_logger_without_the_package_names_the_install(compose_cfg, monkeypatch):
    """Without tensorboard (and tensorboardX) the run stops before training with a line naming the entry."""
    import lightning.fabric.loggers.tensorboard as fabric_tb
    import lightning.pytorch.loggers.tensorboard as tb

    from flexlearn.errors import ConfigError

    monkeypatch.setattr(tb, "_TENSORBOARD_AVAILABLE", False)
    monkeypatch.setattr(tb, "_TENSORBOARDX_AVAILABLE", False, raising=False)
    monkeypatch.setattr(fabric_tb, "_TENSORBOARD_AVAILABLE", False, raising=False)
    monkeypatch.setattr(fabric_tb, "_TENSORBOARDX_AVAILABLE", False, raising=False)
    cfg = compose_cfg("train", TINY)
    with pytest.raises(ConfigError, match=r"logger\.tensorboard.*tensorboard"):
        train(cfg)
    assert not (Path(cfg.paths.output_dir) / "tensorboard").exists()
