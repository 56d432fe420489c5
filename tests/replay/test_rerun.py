"""flexlearn's MCAP files as rerun recordings, read back with rerun's own reader: entities, times and values."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

chunk = pytest.importorskip("rerun.chunk")
pytest.importorskip("mcap.reader")

from flexlearn.apps.mcap import main  # noqa: E402
from flexlearn.errors import ConfigError  # noqa: E402
from flexlearn.replay.to_mcap import arm_to_mcap, trajectory_to_mcap  # noqa: E402
from flexlearn.replay.to_rerun import mcap_to_rrd, scalar_items  # noqa: E402


def read_rrd(path):
    """{entity path: {column: values}} of an .rrd file, by rerun's reader (times as seconds)."""
    out: dict = {}
    for ch in chunk.RrdReader(path).store().stream().to_chunks():
        rb = ch.to_record_batch()
        cols = out.setdefault(str(ch.entity_path), {})
        for name in rb.schema.names:
            values = rb.column(rb.schema.names.index(name)).to_pylist()
            if name == "time":
                values = [v.total_seconds() for v in values]
            cols.setdefault(name, []).extend(values)
    return out


def test_a_simulated_rod_converts_to_lines_and_frames_at_its_times(tmp_path):
    t = np.array([0.0, 0.01, 0.02, 0.5])
    pos = np.stack([np.stack([np.zeros(6), 0.01 * k * np.arange(6), -0.02 * np.arange(6)], -1) for k in range(4)])
    rot = np.broadcast_to(np.eye(3), (4, 6, 3, 3))
    mcap = trajectory_to_mcap(tmp_path / "rod.mcap", t, pos, rot, "rod")
    counts = mcap_to_rrd(mcap, tmp_path / "rod.rrd")
    assert counts["entities"] == 4 and counts["transforms"] == 8 and counts["skipped"] == 0
    assert not (tmp_path / "rod.rrd.partial").exists()
    data = read_rrd(tmp_path / "rod.rrd")
    line = data["/rod/backbone/rod"]
    assert np.allclose(line["time"], t)
    assert np.allclose([s[0] for s in line["LineStrips3D:strips"]], pos, atol=1e-7)  # rerun stores float32
    tip = data["/tf/rod/tip"]
    assert np.allclose([v[0] for v in tip["Transform3D:translation"]], pos[:, -1], atol=1e-7) and np.allclose(
        tip["time"], t
    )
    assert "log_time" not in line  # the file's own times only: the same input gives the same recording


def test_an_arm_recording_and_its_values(tmp_path):
    from flexlearn.sim.flexible_arm import seed_two_link_config, simulate_flexible_arm, smooth_random_trajectory

    cfg = seed_two_link_config()
    t = np.arange(200) * cfg.dt
    sim = simulate_flexible_arm(cfg, smooth_random_trajectory(t, 2, seed=4, hold=0.05, move=0.1))
    mcap = arm_to_mcap(tmp_path / "arm.mcap", sim, period_s=20 * cfg.dt)
    mcap_to_rrd(mcap, tmp_path / "arm.rrd")
    data = read_rrd(tmp_path / "arm.rrd")
    strips = np.array([s[0] for s in data["/arm/backbone/arm/link1"]["LineStrips3D:strips"]])
    assert np.allclose(strips[:, :, :2], sim["link_shapes"][::20, 1], atol=1e-6)
    theta1 = data["/arm/state/theta/1"]
    assert np.allclose([v[0] for v in theta1["Scalars:scalars"]], sim["theta"][::20, 1])


def test_values_become_scalars_by_name():
    got = dict(scalar_items({"timestamp": {"sec": 1}, "h": 0.1, "flags": [0, 4], "ok": True, "none": None, "s": "x"}))
    assert got == {"h": 0.1, "flags/0": 0.0, "flags/1": 4.0, "ok": 1.0}


def test_the_command_converts_a_runner_output_and_says_what_is_missing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "poses.jsonl"
    rows = [
        {"t": 0.1 * k, "h": 0.01 * k, "points": [[0, 0, 0], [0, 0.001 * k, -0.02]], "flags": [k % 2]} for k in range(5)
    ]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(out), "--rrd"]) == 0
    assert "poses.rrd" in capsys.readouterr().out
    data = read_rrd(tmp_path / "poses.rrd")
    assert np.allclose(data["/robot/status/h"]["time"], [0.1 * k for k in range(5)])
    assert main([str(tmp_path / "poses.mcap")]) == 2 and "--rrd" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "rerun", None)  # not installed
    with pytest.raises(ConfigError, match=r"flexlearn\[rerun\]"):
        mcap_to_rrd(tmp_path / "poses.mcap", tmp_path / "again.rrd")
    assert main([str(tmp_path / "poses.mcap"), "--rrd"]) == 2 and "pip install" in capsys.readouterr().err
