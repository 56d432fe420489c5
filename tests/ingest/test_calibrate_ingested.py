"""An ingested recording of a new module calibrates with the documented command: its tumble (from the recording)
gives W; without a tumble the refusal names what works, and ``require_tumble=false`` gives W = identity."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from flexlearn.data.dataset import DirectionDataset
from flexlearn.errors import DataError
from flexlearn.ingest import topic_map
from flexlearn.ingest.recording import ingest_recording
from flexlearn.sim.rig import simulate_sweep

from .loggers import Logger, write_bag, write_csv


@pytest.fixture(scope="module")
def module_recordings(tmp_path_factory):
    """A new module (seed 31, 150 poses) recorded by another logger: an MCAP bag with its tumble topic and a CSV
    dump without a tumble, each ingested with the shipped maps and default settings."""
    root = tmp_path_factory.mktemp("ingested_modules")
    raw = simulate_sweep({"n_poses": 150, "seed": 31})
    bag = write_bag(raw, root / "m31_bag", "mcap")
    dump = write_csv(raw, root / "m31.csv", Logger(field_per_tesla=1e6, accel_per_si=1 / 9.80665, tumble=False))
    with_tumble = ingest_recording(bag, root / "m31", topic_map("rig_ros2_bool"), report=False).output
    without = ingest_recording(dump, root / "m31_no_tumble", topic_map("serial"), report=False).output
    return {"with": with_tumble, "without": without}


def _calibrate(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.calibrate", *args, f"hydra.run.dir={cwd / 'h'}"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_an_ingested_recording_calibrates_with_the_documented_command(trained_run, module_recordings, tmp_path):
    ckpt = trained_run["metrics"]["best_ckpt"]
    out = tmp_path / "cal.json"
    r = _calibrate(f"ckpt_path={ckpt}", f"inputs=[{module_recordings['with']}]", f"output={out}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(out.read_text())
    ds = DirectionDataset.load(module_recordings["with"] / "dataset.parquet")
    np.testing.assert_allclose(doc["W"][0], ds.meta["calibration"]["W"], rtol=0, atol=0)
    assert doc["modules"][0]["tumble"]["coverage"] >= 0.7 and doc["modules"][0]["fit"]["n_poses"] >= 12


def test_a_recording_without_tumble_names_the_fix_and_require_tumble_false_gives_identity(
    trained_run, module_recordings, compose_cfg, tmp_path
):
    from flexlearn.jobs.calibrate import calibrate

    ckpt = trained_run["metrics"]["best_ckpt"]
    base = [f"ckpt_path={ckpt}", f"inputs=[{module_recordings['without']}]", f"output={tmp_path / 'cal.json'}"]
    with pytest.raises(DataError, match=r"no tumble calibration.*ingest.tumble_recording.*require_tumble=false"):
        calibrate(compose_cfg("calibrate", base))
    # the override the old message advised is accepted for an ingested directory now, and still names the way out
    with pytest.raises(DataError, match=r"require_tumble=false \(W = identity\)"):
        calibrate(compose_cfg("calibrate", [*base, "+processing.soft_iron=tumble"]))
    assert not (tmp_path / "cal.json").exists()
    summary = calibrate(compose_cfg("calibrate", [*base, "require_tumble=false"]))
    doc = json.loads((tmp_path / "cal.json").read_text())
    assert summary["n_modules"] == 1 and doc["W"][0] == np.eye(3).tolist() and doc["offset"][0] == [0.0] * 3


def test_processing_overrides_reprocess_an_ingested_directory(trained_run, module_recordings, compose_cfg, tmp_path):
    """``+processing.…`` on an ingested directory processes its raw/ again (the ingestion's settings, overridden)."""
    from flexlearn.jobs.calibrate import calibrate, module_dataset

    ds = module_dataset(module_recordings["with"], {"settle_time": 0.02})
    assert ds.meta["processing"]["settle_time"] == 0.02 and ds.meta["calibration"] is not None
    cfg = compose_cfg(
        "calibrate",
        [
            f"ckpt_path={trained_run['metrics']['best_ckpt']}",
            f"inputs=[{module_recordings['with']}]",
            "+processing.soft_iron=none",
            f"output={tmp_path / 'cal.json'}",
        ],
    )
    with pytest.raises(DataError, match=r"trained on tumble-corrected fields.*processing.soft_iron=tumble"):
        calibrate(cfg)
