"""Faults of training runs: a collapsed or diverged model, resume after the best epoch, a stale raw-data
cache, degenerate datasets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import lightning as L
import numpy as np
import pytest

from flexlearn.config import from_dict
from flexlearn.data.dataset import DirectionDataset
from flexlearn.errors import DataError, FlexlearnError
from flexlearn.jobs.train import train
from flexlearn.sim.rig import simulate_sweep
from flexlearn.sim.rig_config import RigConfig

SMALL = ["data.sim.n_poses=400", "data.batch_size=64"]


def test_collapsed_model_scores_180_degrees_not_0(compose_cfg):
    """Lr = 1e4 collapses the network to a zero output; that must score the maximal error, not 0°."""
    metrics = train(compose_cfg("train", SMALL + ["trainer.max_epochs=2", "task.lr=1e4"]))
    for split in ("val", "test"):
        assert metrics[f"{split}/ang_err_median_deg"] == 180.0
        assert metrics[f"{split}/invalid_fraction"] == 1.0


def test_diverged_pipeline_fails_and_exports_nothing(compose_cfg):
    cfg = compose_cfg("pipeline", SMALL + ["trainer.max_epochs=2", "task.lr=1e30"])
    with pytest.raises(FlexlearnError, match="diverged"):
        train(cfg)
    out = Path(cfg.paths.output_dir)
    assert not (out / "export").exists()
    written = json.loads((out / "metrics.json").read_text())
    assert written["status"] == "diverged" and "diverged" in written["error"]


def test_input_overflowing_float32_is_refused(compose_cfg, tmp_path, trained_run):
    """ΔB scaled by 1e303 is finite in float64 but not in float32: a DataError, not a NaN model."""
    ds = DirectionDataset.load(trained_run["metrics"]["dataset_path"])
    ds.delta_b = ds.delta_b * 1e303
    path = ds.save(tmp_path / "huge.parquet")
    with pytest.raises(DataError, match="huge.parquet"):
        train(compose_cfg("pipeline", ["data=dataset", f"data.path={path}", "trainer.max_epochs=1"]))
    assert not (tmp_path / "out" / "export").exists()


class Crash(Exception):
    pass


class CrashAtEpochStart(L.Callback):
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, *args) -> None:
        if trainer.current_epoch == self.epoch:
            raise Crash


def test_resume_after_the_best_epoch_reproduces_the_uninterrupted_run(compose_cfg):
    """Best epoch 0 (the monitor is maximised), crash when epoch 2 starts, resume from last.ckpt in a new run."""
    overrides = SMALL + ["trainer.max_epochs=3", "callbacks.model_checkpoint.mode=max"]
    full = train(compose_cfg("train", overrides, out="full"))
    assert Path(full["best_ckpt"]).name == "best-epoch001-of003.ckpt"  # the premise: best epoch before the crash
    cfg = compose_cfg("train", overrides, out="crashed")
    with pytest.raises(Crash):
        train(cfg, extra_callbacks=[CrashAtEpochStart(2)])
    last = Path(cfg.paths.checkpoint_dir) / "last.ckpt"
    resumed = train(compose_cfg("train", overrides + [f"ckpt_path={last}"], out="resumed"))
    for key in ("test/ang_err_median_deg", "test/ang_err_p95_deg", "val/ang_err_median_deg", "train/loss"):
        assert resumed[key] == pytest.approx(full[key], rel=1e-5, abs=1e-7), key
    assert Path(resumed["best_ckpt"]).name == "best-epoch001-of003.ckpt"


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("raw")
    return tuple(simulate_sweep(from_dict(RigConfig, {"n_poses": 60, "seed": s})).save(root / f"s{s}") for s in (0, 1))


def _replace_dir(dst: Path, src: Path) -> None:
    for p in dst.iterdir():
        p.unlink()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())


def test_raw_dataset_cache_follows_the_recording_content(two_sweeps, tmp_path):
    from flexlearn.data.processing_config import ProcessingConfig
    from flexlearn.data.sources import DataConfig, prepare_dataset, process_raw

    raw = tmp_path / "recording"
    raw.mkdir()
    _replace_dir(raw, two_sweeps[0])
    data = from_dict(DataConfig, {"source": "raw", "path": str(raw)}, "data")
    first = DirectionDataset.load(prepare_dataset(data, tmp_path / "cache"))
    _replace_dir(raw, two_sweeps[1])  # the same directory now holds another recording
    second = DirectionDataset.load(prepare_dataset(data, tmp_path / "cache"))
    direct = DirectionDataset.load(process_raw(raw, ProcessingConfig(), tmp_path / "direct.parquet"))
    np.testing.assert_array_equal(second.delta_b, direct.delta_b)
    assert not np.array_equal(first.delta_b, second.delta_b)


def test_raw_fingerprint_reads_bytes_not_sizes_and_times(two_sweeps, tmp_path):
    from flexlearn.data.sources import raw_fingerprint

    raw = tmp_path / "r"
    raw.mkdir()
    _replace_dir(raw, two_sweeps[0])
    before = raw_fingerprint(raw)
    meta = raw / "meta.json"
    st = meta.stat()
    text = meta.read_text()
    i = next(i for i, c in enumerate(text) if c.isdigit() and c != "9")
    meta.write_text(text[:i] + str(int(text[i]) + 1) + text[i + 1 :])  # same size
    os.utime(meta, ns=(st.st_atime_ns, st.st_mtime_ns))  # same modification time
    assert meta.stat().st_size == st.st_size and meta.stat().st_mtime_ns == st.st_mtime_ns
    assert raw_fingerprint(raw) != before


def _degenerate(source: Path, which: str) -> DirectionDataset:
    ds = DirectionDataset.load(source)
    rows = {
        "empty": np.array([], dtype=int),
        "one_row": np.array([0]),
        "no_train": np.flatnonzero(ds.split != "train"),
        "train_only": np.flatnonzero(ds.split == "train"),
    }[which]
    return ds.take(rows)


@pytest.mark.parametrize(
    "which,split", [("empty", "train"), ("one_row", None), ("no_train", "train"), ("train_only", "val")]
)
def test_degenerate_dataset_is_refused_naming_file_and_split(compose_cfg, trained_run, tmp_path, which, split):
    path = _degenerate(Path(trained_run["metrics"]["dataset_path"]), which).save(tmp_path / f"{which}.parquet")
    cfg = compose_cfg("train", ["data=dataset", f"data.path={path}", "trainer.max_epochs=1"])
    with pytest.raises(DataError, match=f"{which}.parquet") as info:
        train(cfg)
    assert (f"split '{split}'" if split else "split '") in str(info.value)
    assert not (Path(cfg.paths.output_dir) / "metrics.json").exists()
