"""The coverage report counts against each sweep's own cap, not a fixed 29.5°."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from flexlearn.data.report import write_report
from flexlearn.data.sessions import bend_angle_deg, load_session, session_cap_deg
from tests.data.streams_factory import make_sweep


def _saved(tmp_path, name, cap=None, n=6):
    raw = make_sweep(n, seed=4)
    meta = dict(raw.meta)
    if cap is not None:
        meta["rig"] = {**meta["rig"], "max_colatitude": math.radians(cap)}
    dataclasses.replace(raw, meta=meta).save(tmp_path / name)
    return tmp_path / name


def test_the_cap_comes_from_the_sweep_or_its_commanded_bends(tmp_path):
    s40 = load_session(_saved(tmp_path, "s40", cap=40.0))
    assert session_cap_deg(s40) == (pytest.approx(40.0), "meta.json rig.max_colatitude")
    bare = load_session(_saved(tmp_path, "bare"))
    cap, source = session_cap_deg(bare)
    largest = float(bend_angle_deg(bare.raw.target).max())
    assert source == "largest commanded bend" and largest <= cap < largest + 0.1 + 1e-9


def test_report_uses_each_sessions_cap_unless_one_is_given(tmp_path):
    a, b = _saved(tmp_path, "a", cap=40.0), _saved(tmp_path, "b", cap=20.0)
    res = write_report([a, b], tmp_path / "report")
    caps = {n: s["cap_deg"] for n, s in res["sessions"].items()}
    assert caps == {"a": pytest.approx(40.0), "b": pytest.approx(20.0)}
    assert res["bin_edges_deg"][-1] >= 40.0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "a (cap 40.0°, meta.json rig.max_colatitude)" in text
    res = write_report([a], tmp_path / "report2", max_colatitude_deg=29.5)
    assert res["sessions"]["a"]["cap_deg"] == 29.5 and res["sessions"]["a"]["cap_source"] == "option"
    assert np.isfinite(res["sessions"]["a"]["delta_b_median_uT"])
