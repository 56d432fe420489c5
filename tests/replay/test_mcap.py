"""MCAP output read back with the format's own library (`mcap`): records and CRCs, Foxglove schemas (messages
validated against the published JSON schemas), timestamps and content of runner outputs and simulated rods."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

mcap_reader = pytest.importorskip("mcap.reader")
stream_reader = pytest.importorskip("mcap.stream_reader")
jsonschema = pytest.importorskip("jsonschema")

from flexlearn.apps.mcap import main  # noqa: E402
from flexlearn.replay.to_mcap import runner_output_to_mcap, shapes_to_mcap, trajectory_to_mcap  # noqa: E402
from flexlearn.runtime.pikit.foxglove import ShapeRecording, matrix_to_quaternion, quaternion_x_to  # noqa: E402
from flexlearn.runtime.pikit.mcap_file import McapWriter  # noqa: E402


def read_messages(path):
    """[(schema name, schema encoding, topic, message encoding, log_time, decoded JSON)] in file order."""
    with open(path, "rb") as f:
        reader = mcap_reader.make_reader(f)
        out = [
            (s.name, s.encoding, c.topic, c.message_encoding, m.log_time, json.loads(m.data))
            for s, c, m in reader.iter_messages(log_time_order=False)
        ]
        summary = reader.get_summary()
    return out, summary


def schemas_of(path):
    with open(path, "rb") as f:
        return {s.name: json.loads(s.data) for s in mcap_reader.make_reader(f).get_summary().schemas.values()}


def test_writer_records_crcs_and_statistics(tmp_path):
    path = tmp_path / "a.mcap"
    with McapWriter(path) as w:
        sid = w.add_schema("demo.Value", "jsonschema", b'{"type": "object"}')
        a, b = w.add_channel("/a", sid, "json", {"unit": "m"}), w.add_channel("/b", sid)
        for k in range(4):
            w.write_message(a, 5_000 + 10 * k, json.dumps({"k": k}).encode())
        w.write_message(b, 1_000, b"{}")
    kinds = [type(r).__name__ for r in stream_reader.StreamReader(str(path), validate_crcs=True).records]
    assert kinds[0] == "Header" and kinds[-1] == "Footer" and kinds.count("Message") == 5
    assert kinds.index("DataEnd") < kinds.index("Statistics")
    msgs, summary = read_messages(path)
    st = summary.statistics
    assert (st.message_count, st.message_start_time, st.message_end_time) == (5, 1_000, 5_030)
    assert st.channel_message_counts == {a: 4, b: 1}
    assert summary.channels[a].metadata == {"unit": "m"}
    assert [m[5] for m in msgs if m[2] == "/a"] == [{"k": k} for k in range(4)]
    assert not list(tmp_path.glob("*.partial"))


def test_writer_discards_on_error_and_refuses_bad_input(tmp_path):
    path = tmp_path / "b.mcap"
    with pytest.raises(RuntimeError):
        with McapWriter(path) as w:
            w.add_channel("/a", w.add_schema("s", "jsonschema", b"{}"))
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []
    with McapWriter(path) as w:
        with pytest.raises(ValueError, match="channel 7"):
            w.write_message(7, 0, b"")
        c = w.add_channel("/a", w.add_schema("s", "jsonschema", b"{}"))
        with pytest.raises(ValueError, match="log time -1"):
            w.write_message(c, -1, b"")


def test_quaternions():
    rng = np.random.default_rng(3)
    for _ in range(50):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        x, y, z, w = q
        r = np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
            ]
        )
        got = np.array(matrix_to_quaternion(r.tolist()))
        assert min(np.abs(got - q).max(), np.abs(got + q).max()) < 1e-12
        v = rng.normal(size=3)
        qx = quaternion_x_to(v)
        xx, yy, zz, ww = qx
        first_col = [1 - 2 * (yy * yy + zz * zz), 2 * (xx * yy + zz * ww), 2 * (xx * zz - yy * ww)]
        assert np.allclose(first_col, v / np.linalg.norm(v), atol=1e-12)
    assert np.allclose(quaternion_x_to([-2.0, 0, 0]), (0, 0, 1, 0))


def test_shape_messages_follow_the_foxglove_schemas(tmp_path):
    path = tmp_path / "s.mcap"
    with ShapeRecording(path, "rod") as rec:
        rec.backbone(2_500_000_000, [[0, 0, 0], [0, 0, 0.1], [0.01, 0, 0.2]], arrows=[([0, 0, 0.2], [0.02, 0, 0])])
        rec.transforms(2_500_000_000, [("world", "rod/tip", [0.01, 0, 0.2], (0, 0, 0, 1))])
        rec.values("/rod/status", 2_500_000_000, {"h": 0.1, "flags": [0, 2], "bad": float("nan")})
    msgs, _ = read_messages(path)
    schemas = schemas_of(path)
    assert {m[0] for m in msgs} == {"foxglove.SceneUpdate", "foxglove.FrameTransforms", "flexlearn.Values"}
    for name, enc, _topic, menc, t, msg in msgs:
        assert (enc, menc, t) == ("jsonschema", "json", 2_500_000_000)
        jsonschema.validate(msg, schemas[name])
    scene = next(m[5] for m in msgs if m[2] == "/rod/backbone")["entities"][0]
    assert scene["timestamp"] == {"sec": 2, "nsec": 500_000_000}
    assert [[p["x"], p["y"], p["z"]] for p in scene["lines"][0]["points"]] == [[0, 0, 0], [0, 0, 0.1], [0.01, 0, 0.2]]
    assert scene["arrows"][0]["shaft_length"] + scene["arrows"][0]["head_length"] == pytest.approx(0.02)
    status = next(m[5] for m in msgs if m[2] == "/rod/status")
    assert status["bad"] is None and status["flags"] == [0, 2]


def _runner_lines(n=5):
    return [
        {"t": 0.06 * (k + 1), "h": 0.04 + 0.001 * k, "points": [[0, 0, 0], [0, 0.001 * k, 0.02], [0, 0, 0.04]]}
        | {"flags": [0, k % 2]}
        for k in range(n)
    ]


def test_runner_output_json_lines_with_bad_lines(tmp_path):
    rows = _runner_lines()
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, "{not json")
    lines.insert(4, json.dumps({"t": -1.0, "points": [[0, 0, 0]]}))
    lines.append(json.dumps({"t": 9.0, "points": [[0, 0, None]]}))
    out = tmp_path / "poses.jsonl"
    out.write_text("\n".join(lines) + "\n")
    frames = tmp_path / "frames.jsonl"
    frames.write_text(
        json.dumps({"type": "mag", "t": 0.063, "coil": 1, "m": [[1e-5, 0, 0], [0, 1e-5, 0]]})
        + "\n"
        + json.dumps({"type": "att", "t": 0.06, "q": [[1, 0, 0, 0]] * 3})
        + "\nnot a frame\n"
    )
    s = runner_output_to_mcap(out, tmp_path / "o.mcap", "bot", frames)
    assert (s["steps"], s["skipped"], s["first_skipped_line"], s["frames"]) == (5, 3, 3, 2)
    msgs, summary = read_messages(tmp_path / "o.mcap")
    backbone = [m for m in msgs if m[2] == "/bot/backbone"]
    assert [m[4] for m in backbone] == [round(r["t"] * 1e9) for r in rows]
    got = [[[p["x"], p["y"], p["z"]] for p in m[5]["entities"][0]["lines"][0]["points"]] for m in backbone]
    assert got == [r["points"] for r in rows]
    status = [m[5] for m in msgs if m[2] == "/bot/status"]
    assert [st["h"] for st in status] == [r["h"] for r in rows] and status[1]["flags"] == [0, 1]
    inputs = [m for m in msgs if m[2] == "/bot/frames"]
    assert [m[5]["type"] for m in inputs] == ["mag", "att"] and inputs[0][4] == 63_000_000


def test_runner_output_csv(tmp_path):
    rows = _runner_lines(3)
    out = tmp_path / "poses.csv"
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t", "h", "v", "status", "flags_or"] + [f"p{i}{c}" for i in range(3) for c in "xyz"])
        for r in rows:
            w.writerow([r["t"], r["h"], "", 0, 1] + [c for p in r["points"] for c in p])
    s = runner_output_to_mcap(out, tmp_path / "c.mcap")
    assert s["steps"] == 3 and s["skipped"] == 0
    msgs, _ = read_messages(tmp_path / "c.mcap")
    st = [m[5] for m in msgs if m[2] == "/robot/status"]
    assert st[0]["flags_or"] == 1 and st[0]["v"] is None


def test_trajectory_frames_match_the_rotations(tmp_path):
    t = np.linspace(0, 0.1, 4)
    ang = 0.3 * t
    rot = np.zeros((4, 3, 3, 3))
    for k, a in enumerate(ang):
        rot[k, :] = [[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]]
    pos = np.stack([np.stack([np.zeros(3), [0, 0, 0.05], [0, -0.01 * k, 0.1]]) for k in range(4)])
    trajectory_to_mcap(tmp_path / "r.mcap", t, pos, rot, "rod")
    msgs, summary = read_messages(tmp_path / "r.mcap")
    tf = [m[5]["transforms"] for m in msgs if m[2] == "/tf"]
    assert [x["child_frame_id"] for x in tf[0]] == ["rod/base", "rod/tip"]
    q = tf[3][1]["rotation"]
    assert q["x"] == pytest.approx(math.sin(ang[3] / 2)) and q["w"] == pytest.approx(math.cos(ang[3] / 2))
    assert tf[3][1]["translation"] == {"x": 0.0, "y": -0.03, "z": 0.1}
    assert summary.statistics.message_end_time == round(0.1e9)


def test_cli_summary_and_errors(tmp_path, capsys):
    out = tmp_path / "p.jsonl"
    out.write_text("\n".join(json.dumps(r) for r in _runner_lines(2)) + "\n")
    assert main([str(out)]) == 0
    assert (tmp_path / "p.mcap").exists() and "2 steps" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.jsonl" in err[0]
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"t": 1}\n')
    assert main([str(empty), "-o", str(tmp_path / "e.mcap")]) == 2
    assert "nothing to play" in capsys.readouterr().err and not (tmp_path / "e.mcap").exists()


def test_cosserat_run_writes_a_playable_mcap(tmp_path):
    """`flexlearn-cosserat` writes the whole rod: one backbone per recorded step, base and tip frames."""
    import subprocess
    import sys

    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "flexlearn.apps.cosserat", "cosserat=pdms_rotating", "max_duration=0.01"]
    res = subprocess.run(cmd + ["formats=[json]", f"hydra.run.dir={run}"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads((run / "pdms_rotating_tip.json").read_text())
    msgs, summary = read_messages(run / "pdms_rotating.mcap")
    backbone = [m for m in msgs if m[2] == "/pdms_rotating/backbone"]
    assert [m[4] for m in backbone] == [round(t * 1e9) for t in doc["times_s"]]
    tip = backbone[-1][5]["entities"][0]["lines"][0]["points"][-1]
    assert [tip["x"], tip["y"], tip["z"]] == pytest.approx(doc["tip_m"][-1], abs=1e-12)
    tf = [m[5]["transforms"][1] for m in msgs if m[2] == "/tf"]
    assert tf[-1]["translation"] == pytest.approx(dict(zip("xyz", doc["tip_m"][-1])), abs=1e-12)


def test_shapes_of_several_rods_per_frame(tmp_path):
    """shapes_to_mcap: frame k at k·period, one entity per rod and the closed tip polygon, values beside them;
    messages valid against the Foxglove schemas in the file; bad frames, periods and values refused by name."""
    rng = np.random.default_rng(5)
    frames = [rng.normal(size=(3, 4, 3)) for _ in range(2)]
    path = shapes_to_mcap(tmp_path / "s.mcap", frames, "cpr", 0.5, [{"sample": 1}, {"sample": 2}])
    msgs, _ = read_messages(path)
    schemas = schemas_of(path)
    for schema, _, _, _, _, data in msgs:
        if schema.startswith("foxglove."):
            jsonschema.validate(data, schemas[schema])
    scenes = [(t, d["entities"][0]) for s, _, topic, _, t, d in msgs if topic == "/cpr/backbone"]
    assert [(t, e["id"]) for t, e in scenes[:4]] == [
        (0, "cpr/rod0"),
        (0, "cpr/rod1"),
        (0, "cpr/rod2"),
        (0, "cpr/platform"),
    ]
    assert {t for t, _ in scenes} == {0, 500_000_000}
    tips = [[p["x"], p["y"], p["z"]] for p in scenes[3][1]["lines"][0]["points"]]
    np.testing.assert_allclose(tips, np.r_[frames[0][:, -1], frames[0][:1, -1]])
    assert [d["sample"] for s, _, topic, _, t, d in msgs if topic == "/cpr/sample"] == [1, 2]
    with pytest.raises(ValueError, match=r"shapes\[0\]"):
        shapes_to_mcap(tmp_path / "bad.mcap", [np.zeros((3, 4))], "cpr")
    with pytest.raises(ValueError, match="period_s"):
        shapes_to_mcap(tmp_path / "bad.mcap", frames, "cpr", 0.0)
    with pytest.raises(ValueError, match="values"):
        shapes_to_mcap(tmp_path / "bad.mcap", frames, "cpr", 1.0, [{}])


def test_a_simulated_arm_plays_as_one_line_per_deformed_link(tmp_path):
    """`arm_to_mcap`: per written sample, one scene entity per link through its deformed centreline (world x–y,
    z = 0), the joint angles and tip deflections beside it, the end effector on /tf; every message valid against
    the schema stored in the file."""
    from flexlearn.replay.to_mcap import arm_to_mcap
    from flexlearn.sim.flexible_arm import seed_two_link_config, simulate_flexible_arm, smooth_random_trajectory

    cfg = seed_two_link_config()
    t = np.arange(500) * cfg.dt
    sim = simulate_flexible_arm(cfg, smooth_random_trajectory(t, 2, seed=2, hold=0.1, move=0.3))
    path = arm_to_mcap(tmp_path / "arm.mcap", sim, period_s=10 * cfg.dt)
    msgs, summary = read_messages(path)
    schemas = schemas_of(path)
    for topic in ("/arm/backbone", "/arm/state", "/tf"):
        name, _, _, _, _, msg = next(m for m in msgs if m[2] == topic)
        jsonschema.validate(msg, schemas[name])
    scenes = [(m[4], m[5]["entities"][0]) for m in msgs if m[2] == "/arm/backbone"]
    samples = range(0, len(t), 10)
    assert len(scenes) == 2 * len(samples)
    for (log_time, ent), (k, i) in zip(scenes, [(k, i) for k in samples for i in range(2)]):
        assert log_time == round(t[k] * 1e9) and ent["id"] == f"arm/link{i}"
        pts = np.array([[p["x"], p["y"], p["z"]] for p in ent["lines"][0]["points"]])
        assert np.allclose(pts[:, :2], sim["link_shapes"][k, i], atol=1e-15) and not pts[:, 2].any()
    states = [m[5] for m in msgs if m[2] == "/arm/state"]
    assert np.allclose([s["theta"] for s in states], sim["theta"][samples.start :: samples.step])
    tf = [m[5]["transforms"][0] for m in msgs if m[2] == "/tf"]
    assert np.allclose([[f["translation"]["x"], f["translation"]["y"]] for f in tf], sim["ee_pose"][::10, :2])


def test_a_shape_estimate_plays_beside_its_truth(tmp_path):
    """`estimates_to_mcap` on a simulated recording and two of the seed's baselines: per written sample the true
    backbone and each estimate as entities, their errors [mm] as `flexlearn.replay.shapes.errors` computes them."""
    from flexlearn.replay import shapes
    from flexlearn.replay.to_mcap import estimates_to_mcap
    from flexlearn.sim import shape_scenarios
    from flexlearn.sim.robot import RobotConfig, simulate_robot

    rec = simulate_robot(shape_scenarios.scenario("2d_curl", period=4.0, seed=1), 2.0, RobotConfig(seed=3))
    est = {m: shapes.inertial_baseline(rec, m == "accel_quat") for m in ("accel_quat", "accel_only")}
    path = estimates_to_mcap(tmp_path / "shapes.mcap", rec.att_t, rec.points, est, period_s=0.25)
    msgs, _ = read_messages(path)
    schemas = schemas_of(path)
    for topic in ("/robot/backbone", "/robot/errors"):
        name, _, _, _, _, msg = next(m for m in msgs if m[2] == topic)
        jsonschema.validate(msg, schemas[name])
    scenes = [m[5]["entities"][0] for m in msgs if m[2] == "/robot/backbone"]
    errors = [(m[4], m[5]) for m in msgs if m[2] == "/robot/errors"]
    assert [e["id"] for e in scenes[:3]] == ["robot/truth", "robot/accel_quat", "robot/accel_only"]
    assert len(scenes) == 3 * len(errors) and 7 <= len(errors) <= 9  # 2 s every 0.25 s
    times = np.array([t for t, _ in errors]) * 1e-9
    assert np.all(np.diff(times) >= 0.25 - 1e-9)
    k = int(np.abs(rec.att_t - times[-1]).argmin())
    d = 1e3 * np.linalg.norm(est["accel_quat"][k, 1:] - rec.points[k, 1:], axis=-1)
    assert errors[-1][1]["accel_quat/tip_mm"] == pytest.approx(d[-1]) and errors[-1][1]["accel_quat/backbone_mm"] > 0
    truth = np.array([[p["x"], p["y"], p["z"]] for p in scenes[-3]["lines"][0]["points"]])
    assert np.allclose(truth, rec.points[k])
