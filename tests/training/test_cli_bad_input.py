"""Bad input through the command-line tools: one clear line on stderr, exit status 2, nothing corrupted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flexlearn.config import from_dict
from flexlearn.sensing.streams import RawSweep
from flexlearn.sim.rig import simulate_sweep
from flexlearn.sim.rig_config import RigConfig


def run_app(module: str, root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLEXLEARN_ROOT=str(root))
    return subprocess.run(
        [sys.executable, "-m", f"flexlearn.apps.{module}", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_clean_failure(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("raw") / "sweep"
    simulate_sweep(from_dict(RigConfig, {"n_poses": 60})).save(path)
    return path


def _rewrite(raw_dir: Path, out: Path, **changes) -> Path:
    sweep = RawSweep.load(raw_dir)
    for name, value in changes.items():
        setattr(sweep, name, value(getattr(sweep, name)))
    return sweep.save(out)


def test_field_in_microtesla_is_named_and_previous_output_survives(raw_dir, tmp_path):
    out = tmp_path / "dataset.parquet"
    ok = run_app("process", tmp_path, f"input={raw_dir}", f"output={out}")
    assert ok.returncode == 0, ok.stderr[-2000:]
    before = out.read_bytes()
    bad = _rewrite(raw_dir, tmp_path / "raw_ut", mag=lambda m: m * 1e6)
    proc = run_app("process", tmp_path, f"input={bad}", f"output={out}")
    assert_clean_failure(proc, "field_unit=uT", "mag")
    assert out.read_bytes() == before


def test_sweep_without_coil_off_samples_is_named(raw_dir, tmp_path):
    sweep = RawSweep.load(raw_dir)
    # Keep only the polls taken while the coil was on: no ambient baseline can be fitted anywhere.
    state = np.searchsorted(sweep.coil_t, sweep.mag_t, side="right") - 1
    on = (state >= 0) & sweep.coil_on[np.clip(state, 0, None)]
    sweep.mag_t, sweep.mag = sweep.mag_t[on], sweep.mag[on]
    bad = sweep.save(tmp_path / "raw_no_off")
    proc = run_app("process", tmp_path, f"input={bad}", f"output={tmp_path / 'x.parquet'}")
    assert_clean_failure(proc, "coil-off")
    assert not (tmp_path / "x.parquet").exists()


def test_missing_raw_stream_file_is_named(raw_dir, tmp_path):
    bad = _rewrite(raw_dir, tmp_path / "raw_missing")
    (bad / "accel.parquet").unlink()
    proc = run_app("process", tmp_path, f"input={bad}")
    assert_clean_failure(proc, "accel.parquet")


def test_unknown_processing_key_is_named(raw_dir, tmp_path):
    proc = run_app("process", tmp_path, f"input={raw_dir}", "+processing.settle_tme=0.01")
    assert_clean_failure(proc, "settle_tme")


def test_a_data_path_without_a_recorded_source_is_refused(raw_dir, tmp_path):
    """``flexlearn-train data.path=<my recording>`` without ``data=raw``/``data=dataset`` trained on the simulated
    sweep and ignored the path; it is refused, naming the fix, before anything is simulated or trained."""
    proc = run_app("train", tmp_path, f"data.path={raw_dir}")
    assert_clean_failure(proc, "data.path", "data=raw")
    assert not (tmp_path / ".cache").exists() and not (tmp_path / "checkpoints").exists()


def test_eval_and_export_with_missing_or_corrupt_checkpoint(tmp_path):
    proc = run_app("evaluate", tmp_path, f"ckpt_path={tmp_path / 'none.ckpt'}")
    assert_clean_failure(proc, "none.ckpt", "not found")
    corrupt = tmp_path / "corrupt.ckpt"
    corrupt.write_bytes(b"PK\x03\x04 this is not a checkpoint")
    proc = run_app("export", tmp_path, f"ckpt_path={corrupt}")
    assert_clean_failure(proc, "corrupt.ckpt")
    assert corrupt.read_bytes() == b"PK\x03\x04 this is not a checkpoint"


def test_export_options_the_export_would_not_read_are_refused(tmp_path):
    """``bundle.calibration=<file>`` without ``bundle.enabled=true`` wrote no bundle and ignored the calibration, and
    ``ckpt_path`` with ``target=arm_controller`` was ignored: both are refused by name, nothing written."""
    cal = tmp_path / "calibration.json"
    cal.write_text("{}")
    proc = run_app("export", tmp_path, f"ckpt_path={tmp_path / 'm.ckpt'}", f"bundle.calibration={cal}")
    assert_clean_failure(proc, "bundle.calibration", "bundle.enabled=true")
    proc = run_app("export", tmp_path, "target=arm_controller", f"ckpt_path={tmp_path / 'm.ckpt'}")
    assert_clean_failure(proc, "ckpt_path", "arm_controller")
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").rglob("*.pt"))
