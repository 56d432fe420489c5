"""Quality report: coverage, |ΔB| vs bend, noise, drops by reason, differences between sessions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flexlearn.data.report import write_report
from flexlearn.ingest.recording import ingest_recording
from flexlearn.sensing.streams import RawSweep

from .conftest import run_app


@pytest.fixture(scope="module")
def session(recordings, ros_map, tmp_path_factory):
    out = tmp_path_factory.mktemp("session") / "monday"
    ingest_recording(recordings["mcap"], out, ros_map, report={"n_cells": 16})
    return out


def test_ingestion_report_counts_and_noise(session, sim_raw):
    rep = json.loads((session / "report" / "report.json").read_text())["sessions"]["monday"]
    meta = json.loads((session / "ingest.json").read_text())
    assert rep["poses"] == len(sim_raw.pose_id) and rep["kept"] == meta["poses"]["n_kept"]
    assert rep["dropped_poses"] == meta["poses"]["dropped_counts"] and sum(rep["dropped_poses"].values()) > 0
    assert rep["dropped_messages"]["mag"] == {"duplicate": 0, "reordered": 0, "gap": 0}
    # Noise levels recovered from the coil-off samples: the simulator's 0.6 µT per axis and 0.02 m/s².
    assert rep["mag_noise_nT"] == pytest.approx(600.0, rel=0.15)
    assert rep["accel_noise_mps2"] == pytest.approx(sim_raw.meta["sensors"]["accelerometer"]["noise"], rel=0.15)
    # Motion capture present: its directions are ≈ the simulator's 0.3° positioning error away from the targets.
    assert 0.05 < rep["positioning_error_deg_median"] < 1.0
    md = (session / "report" / "report.md").read_text()
    for figure in ("coverage.png", "delta_b_vs_bend.png", "noise.png", "dropped.png"):
        assert f"]({figure})" in md
        assert (session / "report" / figure).read_bytes()[:4] == b"\x89PNG"
    assert "| not_stationary |" in md and "| mag: duplicate |" in md


def test_report_flags_a_session_with_a_weaker_coil(session, sim_raw, ros_map, tmp_path):
    """A second session whose coil field is 20 % weaker shows a 20 % binned |ΔB|(λ) difference."""
    raw = RawSweep.load(session / "raw")
    weak = RawSweep.load(session / "raw")
    ambient = np.median(raw.mag[np.all(np.isfinite(raw.mag), axis=1)], axis=0)
    # Scale the deviation of every poll from the ambient level: ΔB scales by 0.8 (the ambient fit is linear).
    weak.mag = ambient + 0.8 * (raw.mag - ambient)
    weak.save(tmp_path / "tuesday")
    proc = run_app(
        "report",
        tmp_path,
        f"sessions=[{session},{tmp_path / 'tuesday'}]",
        f"output={tmp_path / 'rep'}",
        "options.n_cells=16",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert res["delta_b_difference_from_first"]["monday"] == 0.0
    assert res["delta_b_difference_from_first"]["tuesday"] == pytest.approx(0.2, abs=0.01)
    s = res["sessions"]
    assert s["tuesday"]["delta_b_median_uT"] == pytest.approx(0.8 * s["monday"]["delta_b_median_uT"], rel=0.01)
    assert "tuesday" in (tmp_path / "rep" / "report.md").read_text()


def test_report_of_a_non_session_is_a_clear_error(tmp_path):
    from flexlearn.errors import DataError

    with pytest.raises(DataError, match=f"{tmp_path / 'nope'}: not a session"):
        write_report([tmp_path / "nope"], tmp_path / "rep")
