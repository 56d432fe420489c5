"""Deployment bundle (estimator + controller + model + calibration) and the torch-only Pi runner."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from flexlearn.replay import frames
from flexlearn.replay import shapes as rs
from flexlearn.runtime.deploy import build_bundle, export_bundle, load_bundle
from flexlearn.runtime.pikit.manifest import manifest_path, manifest_record
from flexlearn.sensing.magcal import fit_ellipsoid
from flexlearn.sim import shape_scenarios as scenarios
from flexlearn.sim.robot import simulate_robot

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def short_rec():
    return simulate_robot(scenarios.scenario("2d_curl", period=6.0), 6.0)


@pytest.fixture(scope="module")
def bundle_file(tmp_path_factory, direction_model, short_rec):
    w = torch.stack([fit_ellipsoid(short_rec.cal[j])[0] for j in range(9)])
    b = build_bundle(direction_model, 9, soft_iron=w, estimator={"full_scale": short_rec.meta["full_scale"]})
    path = tmp_path_factory.mktemp("bundle") / "bundle.pt"
    export_bundle(b, path, {"note": "test"}, {"quality": "synthetic"})
    manifest_path(path).write_text(json.dumps(manifest_record(path, "torchscript")))  # pi_runner verifies it
    return path, b


def test_bundle_roundtrip_matches_eager(bundle_file, short_rec):
    path, eager = bundle_file
    loaded, meta = load_bundle(path)
    assert meta["n_segments"] == 9 and meta["schema_version"] == 1 and meta["torch_version"] == torch.__version__
    assert len(meta["calibration"]["aw"]) == 9 and meta["note"] == "test"
    a = rs.replay(short_rec, eager)
    b = rs.replay(short_rec, loaded)
    assert np.abs(a - b).max() < 1e-9  # [m]; TorchScript may reorder float ops
    assert rs.errors(b, short_rec)["backbone_rmse_mm"] < 6.0
    v, status = loaded.control(100.0, 0.0)
    assert isinstance(v, float) and status in (0, 1, 2, 3)


def test_bundle_schema_mismatch(tmp_path, bundle_file):
    path, _ = bundle_file
    extra = {"metadata.json": ""}
    m = torch.jit.load(str(path), _extra_files=extra)
    meta = json.loads(extra["metadata.json"])
    meta["schema_version"] = 99
    bad = tmp_path / "bad.pt"
    torch.jit.save(m, str(bad), _extra_files={"metadata.json": json.dumps(meta)})
    with pytest.raises(ValueError, match="schema_version"):
        load_bundle(bad)


def test_pi_runner_replays_log(tmp_path, bundle_file, short_rec):
    path, _ = bundle_file
    log = tmp_path / "frames.jsonl"
    frames.write_frames_jsonl(short_rec, log)
    lines = log.read_text().splitlines()
    lines.insert(5, "not json")
    bad = json.loads(lines[10])
    if bad["type"] == "att":
        bad["q"][3] = [None, None, None, None]
    else:
        bad["m"][2] = [None, 1e-5, None]
    lines[10] = json.dumps(bad)
    lines.append(json.dumps({"type": "spool", "t": 1e3, "pos": 0.0}))
    log.write_text("\n".join(lines) + "\n")
    runner = _load_script("pi_runner")
    out = tmp_path / "poses.jsonl"
    counts = runner.run(str(path), open(log), out=str(out), control=True)
    assert counts["bad"] == 1 and counts["att"] == short_rec.att_t.size and counts["corrections"] > 0
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == short_rec.att_t.size
    assert all(np.isfinite(np.asarray(r["points"])).all() and np.isfinite(r["h"]) for r in recs)
    csv = tmp_path / "poses.csv"
    runner.run(str(path), open(log), out=str(csv), csv=True)
    assert csv.read_text().splitlines()[0].startswith("t,h,v,status,flags_or,p0x")


def _mcap_messages(path):
    """{topic: [(log_time, decoded JSON)]} of an MCAP file, read with the format's own library."""
    reader = pytest.importorskip("mcap.reader")
    out: dict = {}
    with open(path, "rb") as f:
        for _, channel, message in reader.make_reader(f).iter_messages(log_time_order=False):
            out.setdefault(channel.topic, []).append((message.log_time, json.loads(message.data)))
    return out


def test_pi_runner_writes_the_run_as_mcap_while_it_runs(tmp_path, bundle_file, short_rec, capsys):
    """``--mcap``: the runner's outputs as Foxglove messages, the same as converting its ``--out`` afterwards
    (``flexlearn-mcap``), in full precision; an output that is an input is refused before anything is written."""
    from flexlearn.replay.to_mcap import runner_output_to_mcap

    path, _ = bundle_file
    log = tmp_path / "frames.jsonl"
    frames.write_frames_jsonl(short_rec, log)
    runner = _load_script("pi_runner")
    out, live = tmp_path / "poses.jsonl", tmp_path / "live.mcap"
    argv = [str(path), "--log", str(log), "--out", str(out), "--mcap", str(live), "--control", "--no-warmup"]
    assert runner.main(argv) == 0
    assert live.is_file() and not (tmp_path / "live.mcap.partial").exists()
    runner_output_to_mcap(out, tmp_path / "after.mcap")
    got, want = _mcap_messages(live), _mcap_messages(tmp_path / "after.mcap")
    assert sorted(got) == sorted(want) == ["/robot/backbone", "/robot/status"]
    assert len(got["/robot/backbone"]) == short_rec.att_t.size
    for topic in got:
        assert [t for t, _ in got[topic]] == [t for t, _ in want[topic]]
    for (_, a), (_, b) in zip(got["/robot/status"], want["/robot/status"]):
        assert a["flags"] == b["flags"] and a["status"] == b["status"]
        assert a["h"] == pytest.approx(b["h"], abs=1e-12) and a["v"] == pytest.approx(b["v"], abs=1e-12)
    pts = lambda m: [[p["x"], p["y"], p["z"]] for p in m["entities"][0]["lines"][0]["points"]]  # noqa: E731
    worst = max(
        float(np.abs(np.subtract(pts(a), pts(b))).max())
        for (_, a), (_, b) in zip(got["/robot/backbone"], want["/robot/backbone"])
    )
    assert 0 < worst <= 5e-7  # the JSON lines round to 1 µm; the live file keeps full precision
    capsys.readouterr()
    assert runner.main([str(path), "--log", str(log), "--mcap", str(log)]) == 2
    assert "--mcap" in capsys.readouterr().err and log.stat().st_size > 0


def test_bench_runtime_short():
    bench = _load_script("bench_runtime")
    threads = torch.get_num_threads()
    res = bench.run(n=9, steps=300, soak=2000, block=1000)
    torch.set_num_threads(threads)
    assert res["threads"] == 1 and res["finite"]
    assert res["fused_step_us_median"] > 0  # the figure itself is reported by the script, not asserted
    assert res["soak"]["steps"] == 2000 and res["soak"]["rss_growth_mb"] < 50
    assert res["soak_steps"] == 2000 and res["soak_rss_growth_mb"] == res["soak"]["rss_growth_mb"]
    assert res["soak_latency_ratio_last_first"] > 0 and res["binframe_parse_us_median"] > 0


def test_export_deploy_bundle_validates(tmp_path, direction_model):
    from flexlearn.runtime.deploy import BundleOptions, export_deploy_bundle

    with pytest.raises(ValueError, match="sigma_q"):
        export_deploy_bundle(direction_model, tmp_path / "a.pt", BundleOptions(estimator={"sigma_q": 1.0}))
    with pytest.raises(ValueError, match="calibration.W"):
        export_deploy_bundle(
            direction_model, tmp_path / "a.pt", BundleOptions(n_segments=8, calibration={"W": np.eye(3).tolist()})
        )
    cal = {"W": np.broadcast_to(np.eye(3), (8, 3, 3)).tolist(), "offset": np.zeros((8, 3)).tolist()}
    options = BundleOptions(n_segments=8, calibration=cal, controller={"target": 0.03})
    path = export_deploy_bundle(direction_model, tmp_path / "b.pt", options, metadata={"checkpoint": "x.ckpt"})
    m, meta = load_bundle(path)
    assert meta["n_segments"] == 8 and meta["controller"]["target"] == 0.03 and meta["checkpoint"] == "x.ckpt"
    assert meta["calibration"]["offset"] == cal["offset"]


def test_export_from_trained_checkpoint(tmp_path, trained_run):
    """The CLI path: checkpoint of `flexlearn.jobs.train.train` → bundle → runs on a straight frame."""
    from flexlearn.runtime.deploy import export_deploy_bundle
    from flexlearn.tasks.checkpoints import load_direction_model

    ckpts = sorted(Path(trained_run["root"]).rglob("*.ckpt"))
    assert ckpts
    model, info = load_direction_model(ckpts[-1])
    path = export_deploy_bundle(model, tmp_path / "bundle.pt", metadata={"checkpoint": str(ckpts[-1])})
    m, meta = load_bundle(path)
    q = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64).repeat(10, 1)
    m.set_reference(q)
    pts, h, flags = m.attitude(0.1, q)
    assert float(h) == 0.0 and torch.isfinite(pts).all()
    assert bool(m.estimator.correct(1, torch.tensor([1e-5, 2e-5, 9e-5], dtype=torch.float64), 0.2))
