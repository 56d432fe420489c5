"""torch.export (.pt2) and ExecuTorch (.pte) artefacts of the direction model, the flexible-arm controller and the
robot bundle's fused estimator: parity with the TorchScript / eager modules over recorded frame streams with faults
(NaN frames, saturated readings, lost frames, bad and restarted clocks, missing fixes), manifests, the Pi runner on
every format, the constructs that stop `torch.export` on the TorchScript modules, and an aarch64 emulator smoke
test. Tests that run ExecuTorch skip without it (``pip install .[deploy]``)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from flexlearn.runtime import executorch_export as ee
from flexlearn.runtime import program_loading as pl
from flexlearn.runtime.arm.config import ArmControllerConfig
from flexlearn.runtime.arm.controller import ArmController
from flexlearn.runtime.arm.graph import ArmControllerGraph
from flexlearn.runtime.export_diagnosis import diagnose_export, export_blockers
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.graph import FusedEstimatorGraph
from flexlearn.runtime.fusion.options import EstimatorSettings
from flexlearn.runtime.pikit.manifest import UntrustedArtifactError, manifest_path
from flexlearn.runtime.pte_lowering import export_program, to_pte_bytes
from flexlearn.sim.arm_fault_stream import arm_fault_stream, static_arm_frame

F64 = torch.float64
ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-6
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def et():
    return pytest.importorskip("executorch")


def _load_runner():
    spec = importlib.util.spec_from_file_location("pi_runner", ROOT / "scripts" / "pi_runner.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------------------------ frame streams
def _arm_frame(theta=(0.2, -0.6), noise=0.02, seed=0):
    return static_arm_frame(theta, noise, seed)


def arm_stream(steps: int = 1600):
    """IMU frames through the rest period (gyro calibration, t < 1 s) into the motion, with lost frames, NaN and
    inf samples, saturated accelerometers and gyros, and NaN times."""
    return arm_fault_stream(steps)


def estimator_stream(rec):
    """(kind, t, payload, coil) of a recording with faults: module 9 without reference, NaN / non-unit / all-NaN
    quaternion rows, a module silent for 1 s, outlier, NaN and out-of-order times, a master clock restart, NaN
    and saturated magnetometer rows, repeated conversions, thinned (rejected) pulses and 4 s without fixes."""
    rng = np.random.default_rng(5)
    quats, mags = torch.from_numpy(rec.quats), torch.from_numpy(rec.mags)
    q0 = quats[0].clone()
    q0[9] = math.nan
    yield "ref", 0.0, q0, None
    shift, prev = 0.0, None
    for t, kind, i in rec.frames():
        if 5.0 < t < 9.0 and kind == "mag":
            continue
        shift = -10.5 if t > 11.0 else 0.0
        tt, r = t + shift, rng.random()
        if kind == "att":
            q = quats[i].clone()
            if 2.0 < t < 3.0:
                q[4] = math.nan
            if r < 0.04:
                q[int(rng.integers(0, 10))] = math.nan
            elif r < 0.08:
                q[int(rng.integers(0, 10))] *= 1.3
            elif r < 0.09:
                q[:] = math.nan
            elif r < 0.10:
                tt = 1e9
            elif r < 0.11:
                tt = math.nan
            yield "att", tt, q, None
        else:
            if 3.0 < t < 4.0 and rec.coil[i] >= 0 and r < 0.7:
                continue
            m = mags[i].clone()
            if r < 0.03:
                m[int(rng.integers(0, 9))] = math.nan
            elif r < 0.06:
                m[int(rng.integers(0, 9))] = 2e-3
            elif r < 0.08 and prev is not None:
                m = prev.clone()
            elif r < 0.085:
                tt -= 0.5
            prev = m
            yield "mag", tt, m, int(rec.coil[i])


def run_estimator(frames, set_reference, attitude, magnetometer, tensors: bool):
    """Outputs of every attitude (points, h, flags) and magnetometer (applied) call, in order."""
    out = []

    def first(x):
        return x[0] if isinstance(x, (list, tuple)) else x

    with torch.inference_mode():
        for kind, t, x, coil in frames:
            tt = torch.tensor(t, dtype=F64) if tensors else t
            if kind == "ref":
                set_reference(x)
            elif kind == "att":
                p, h, f = attitude(tt, x)[:3]
                out.append((p.clone(), h.clone(), f.clone()))
            else:
                out.append((first(magnetometer(tt, x, torch.tensor(coil) if tensors else coil)).clone(),))
    return out


def compare_estimator(ref, got):
    """Max |Δ| of points and heights [m]; flags and corrections must be identical."""
    assert len(ref) == len(got)
    worst = 0.0
    for a, b in zip(ref, got):
        if len(a) == 1:
            assert torch.equal(a[0], b[0])
        else:
            assert torch.equal(a[2], b[2])
            worst = max(worst, float((a[0] - b[0]).abs().max()), float((a[1] - b[1]).abs()))
    return worst


@pytest.fixture(scope="module")
def est_kw(curl_recording):
    from flexlearn.replay.shapes import soft_iron

    return dict(soft_iron=soft_iron(curl_recording), full_scale=curl_recording.meta["full_scale"], fix_timeout=2.0)


def _estimator(model, n_segments, soft_iron=None, **settings):
    return FusedEstimator(model, EstimatorSettings(n_segments=n_segments, **settings), soft_iron=soft_iron)


@pytest.fixture(scope="module")
def est_reference(direction_model, curl_recording, est_kw):
    frames = list(estimator_stream(curl_recording))
    est = _estimator(direction_model, 9, **est_kw)
    return frames, run_estimator(frames, est.set_reference, est.attitude, est.magnetometer, tensors=False)


def _bundle(direction_model, est_kw):
    from flexlearn.runtime.deploy import build_bundle

    return build_bundle(
        direction_model,
        9,
        soft_iron=est_kw["soft_iron"],
        estimator={k: v for k, v in est_kw.items() if k != "soft_iron"},
    )


@pytest.fixture(scope="module")
def pt2_bundle_files(direction_model, est_kw, tmp_path_factory):
    """The TorchScript bundle and its `torch.export` program set (torch alone: no ExecuTorch needed)."""
    from flexlearn.runtime.deploy import bundle_artifact
    from flexlearn.runtime.export import write_artifacts

    bundle = _bundle(direction_model, est_kw)
    ts = bundle_artifact(bundle, tmp_path_factory.mktemp("bundle") / "bundle.pt", {"note": "test"})
    paths = write_artifacts([ts, ee.pt2_bundle_artifact(bundle, ts)])
    return {p.suffix: p for p in paths}


@pytest.fixture(scope="module")
def bundle_files(direction_model, est_kw, tmp_path_factory, et):
    """The three formats of one bundle, written as one export set (ExecuTorch needed)."""
    bundle = _bundle(direction_model, est_kw)
    paths = ee.export_bundle_programs(bundle, tmp_path_factory.mktemp("bundle") / "bundle", {"note": "test"})
    return {p.suffix: p for p in paths}


def _bundle_files(request, suffix):
    """The files of the format ``suffix`` needs (ExecuTorch only for ``.pte``)."""
    if suffix == ".pte":
        return request.getfixturevalue("bundle_files")
    return request.getfixturevalue("pt2_bundle_files")


# ------------------------------------------------------------------------------------------ blockers
def test_export_blockers_of_the_torchscript_modules_are_named(direction_model):
    """The TorchScript modules stop torch.export at data-dependent Python control flow; the diagnosis names file,
    line and construct. The direction model exports as is."""
    arm = diagnose_export(ArmController.build(), (_arm_frame(), torch.tensor(0.0, dtype=F64)))
    assert not arm["exportable"] and arm["where"].startswith("flexlearn/")
    assert "math.isfinite(t)" in arm["code"] or "float(torch.linalg.vector_norm" in arm["code"]
    assert arm["error"] in ("GuardOnDataDependentSymNode", "UserError")
    est = _estimator(direction_model, 3)
    q = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64).repeat(4, 1)
    att = diagnose_export(ee.MethodOf(est, "attitude"), (torch.tensor(0.1, dtype=F64), q))
    assert not att["exportable"] and att["where"].startswith("flexlearn/runtime/fusion/estimator.py:")
    assert "self.t_att" in att["code"]
    mag = diagnose_export(
        ee.MethodOf(est, "magnetometer"),
        (torch.tensor(0.1, dtype=F64), torch.full((3, 3), 1e-5, dtype=F64), torch.tensor(-1)),
    )
    assert not mag["exportable"] and "self.t_mag" in mag["code"]
    mag_args = (torch.tensor(0.1, dtype=F64), torch.full((3, 3), 1e-5, dtype=F64), torch.tensor(-1))
    sites = export_blockers(ee.MethodOf(est, "magnetometer"), mag_args)
    assert len(sites) >= 3 and any("bool(good.all())" in b["code"] for b in sites)
    assert all(b["where"].startswith("flexlearn/runtime/") for b in sites)
    assert diagnose_export(direction_model, (torch.randn(2, 3) * 1e-4,)) == {"exportable": True}


def test_graph_twins_refuse_what_they_do_not_cover(direction_model):
    with pytest.raises(ValueError, match="bias_model"):
        FusedEstimatorGraph.from_estimator(_estimator(direction_model, 3, bias_model="rotation"))
    with pytest.raises(ValueError, match="mode"):
        FusedEstimatorGraph.from_estimator(_estimator(direction_model, 3, mode="quat_only"))


# ------------------------------------------------------------------------------------------ direction model
def _db_stream(n: int = 400) -> torch.Tensor:
    """Rig fields ΔB (n, 3) float32 [T] of held-out poses with NaN, inf, zero and saturated rows."""
    from flexlearn.sim.robot import rig_pairs

    db = torch.from_numpy(rig_pairs(n, math.radians(30.0), seed=123)[0]).float()
    db[::37] = math.nan
    db[5::41, 1] = math.inf
    db[7::43] = 0.0
    db[9::47] *= 1e4
    return db


def test_direction_model_parity_manifests_and_reproducibility(direction_model, tmp_path, et):
    db = _db_stream()
    paths = ee.export_direction_model(direction_model, tmp_path / "direction")
    assert [p.suffix for p in paths] == [".pt2", ".pte"] and all(manifest_path(p).is_file() for p in paths)
    ref = torch.cat([direction_model(db[i : i + 1]).detach() for i in range(len(db))])
    pt2, meta = pl.load_pt2(paths[0])
    prog = pl.load_pte(paths[1])
    fwd = prog.method("forward")
    got2 = pt2(db)
    got3 = torch.cat([fwd(db[i : i + 1])[0] for i in range(len(db))])
    assert meta["kind"] == prog.metadata["kind"] == "direction_model"
    for got in (got2, got3):
        assert float((got - ref).abs().max()) < TOL
        assert torch.equal(got.norm(dim=-1) > 0.5, ref.norm(dim=-1) > 0.5)  # the zero rows are the same rows
    assert int((ref.norm(dim=-1) == 0).sum()) >= 20
    first = paths[1].read_bytes()
    ee.export_direction_model(direction_model, tmp_path / "direction")
    assert paths[1].read_bytes() == first  # byte-reproducible
    data = bytearray(first)
    data[-1] ^= 1
    paths[1].write_bytes(bytes(data))
    with pytest.raises(UntrustedArtifactError, match="SHA-256"):
        pl.load_pte(paths[1])
    manifest_path(paths[1]).unlink()
    with pytest.raises(UntrustedArtifactError, match="no manifest"):
        pl.load_pte(paths[1])
    manifest_path(paths[0]).unlink()
    with pytest.raises(UntrustedArtifactError, match="no manifest"):
        pl.load_pt2(paths[0])
    assert isinstance(pl.load_pt2(paths[0], trust_unverified=True)[0], torch.nn.Module)


def test_float64_sums_keep_float64_precision_in_executorch(et):
    """ExecuTorch 1.5.1's portable sum over a dimension accumulates float64 in float32 (relative error ~1e-8);
    `to_pte_bytes` lowers it (and mv, which decomposes into it) so that float64 stays float64."""

    class Sums(torch.nn.Module):
        def forward(self, a: torch.Tensor, x: torch.Tensor):
            return a.sum(1), torch.mv(a, x), (a * 0.1).sum(0)

    a = torch.tensor([[0.1, 0.7, 1.3], [2.9, 0.33, 1.7]], dtype=F64)
    x = torch.tensor([0.3, 1.1, -0.7], dtype=F64)
    prog = pl.PteProgram(to_pte_bytes({"forward": export_program(Sums(), (a, x))}, {}), "sums")
    for got, want in zip(prog.method("forward")(a, x), Sums()(a, x)):
        assert got.dtype == F64 and float(((got - want) / want).abs().max()) < 1e-14


# ------------------------------------------------------------------------------------------ arm controller
def _run_arm(step, cfg, stream):
    return [tuple(x.clone() for x in step(fr, t)) for fr, t in stream]


@pytest.mark.parametrize("tau_max", [(20000.0, 5000.0), (3250.0, 640.0)])
def test_arm_graph_equals_the_scripted_controller_bit_for_bit(tau_max):
    """The restructured step gives the scripted controller's torques, state and fault codes exactly, through the
    gyro calibration, the load filter, the torque limit and every fault of the stream."""
    cfg = ArmControllerConfig(tau_max=tau_max)
    ref = torch.jit.script(ArmController.build(cfg))
    graph = ArmControllerGraph(ArmController.build(cfg))
    step = pl.ArmControllerStepper(graph, graph.n_imus)
    codes = set()
    for fr, t in arm_stream():
        a, b = ref(fr, t), step(fr, t)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and int(a[2]) == int(b[2])
        codes.add(int(a[2]))
    assert int(ref.fault_count) == int(graph.fault_count) and int(ref.steps) == int(graph.steps)
    assert codes >= ({0, 1, 2, 4, 32} | ({8} if tau_max[0] < 1e4 else set()))  # torque limit on, then off


def test_arm_controller_programs_match_within_tolerance(tmp_path, et):
    cfg = dataclasses.replace(ArmControllerConfig(), tau_max=(3250.0, 640.0))
    paths = ee.export_arm_controller_graph(ArmController.build(cfg), cfg, tmp_path / "arm")
    assert all(manifest_path(p).is_file() for p in paths)
    ref = _run_arm(torch.jit.script(ArmController.build(cfg)), cfg, arm_stream())
    for path in paths:
        step, meta = pl.load_arm_controller_program(path)
        assert meta["config"]["tau_max"] == [3250.0, 640.0] and meta["state_layout"]["hub_load"] == [18, 20]
        got = _run_arm(step, cfg, arm_stream())
        worst = 0.0
        for a, b in zip(ref, got):
            assert int(a[2]) == int(b[2])
            worst = max(worst, float((a[0] - b[0]).abs().max()), float((a[1] - b[1]).abs().max()))
        assert worst < TOL, (path.suffix, worst)
    with pytest.raises(Exception, match="kind"):
        pl.load_arm_controller_program(next(iter(ee.export_direction_model(torch.nn.Linear(3, 3), tmp_path / "lin"))))


# ------------------------------------------------------------------------------------------ fused estimator
def test_estimator_graph_equals_the_estimator(direction_model, est_kw, est_reference):
    """Eager twin against `FusedEstimator` over the faulty stream: same flags and corrections, points to 1e-12 m."""
    frames, ref = est_reference
    graph = FusedEstimatorGraph.from_estimator(_estimator(direction_model, 9, **est_kw))
    got = run_estimator(frames, graph.set_reference, graph.attitude, graph.magnetometer, tensors=True)
    assert compare_estimator(ref, got) < 1e-12
    from flexlearn.runtime.fusion.flags import decode_flags

    bits = 0
    for out in ref:
        if len(out) == 3:
            for v in out[2].tolist():
                bits |= v
    assert set(decode_flags(bits)) >= {
        "bad_quat",
        "stale_quat",
        "bad_mag",
        "repeated_mag",
        "time_order",
        "no_fix",
        "no_reference",
        "clock_resync",
    }  # the stream's faults are seen
    assert sum(int(out[0].sum()) for out in ref if len(out) == 1) > 20  # magnetic corrections applied


@pytest.mark.parametrize("suffix", [".pt2", ".pte"])
def test_bundle_programs_match_the_estimator(request, est_reference, suffix):
    """The exported estimator as the runner drives it (`ProgramBundle`: a round, then the correction only when a
    pulse ended) against `FusedEstimator`: same flags and corrections, points and heights to 1e-6 m."""
    from flexlearn.runtime.pikit.program_bundle import load_program_bundle

    frames, ref = est_reference
    bundle, meta = load_program_bundle(_bundle_files(request, suffix)[suffix])
    assert meta["n_segments"] == 9 and meta["note"] == "test" and sorted(meta["methods"]) == sorted(pl.BUNDLE_METHODS)
    got = run_estimator(frames, bundle.set_reference, bundle.attitude, bundle.magnetometer, tensors=False)
    assert compare_estimator(ref, got) < TOL


@pytest.mark.parametrize("suffix", [".pte", ".pt2"])
def test_pi_runner_gives_the_torchscript_outputs_for_every_format(request, curl_recording, tmp_path, suffix):
    """The runner on the program bundle and on the TorchScript bundle written with it: same records (points, h,
    flags, spool command and status) for a log with bad lines and null readings, control on."""
    from flexlearn.replay.frames import write_frames_jsonl

    log = tmp_path / "frames.jsonl"
    write_frames_jsonl(curl_recording, log)
    lines = log.read_text().splitlines()
    for k in range(10, len(lines), 97):
        fr = json.loads(lines[k])
        fr["q" if fr["type"] == "att" else "m"][1] = None
        lines[k] = json.dumps(fr)
    lines.insert(3, "not json")
    lines[1:1] = [json.dumps({"type": "target", "t": 0.0, "h": 0.01})]
    lines += [json.dumps({"type": "spool", "t": 0.5 + 0.3 * k, "pos": 0.001 * k}) for k in range(30)]
    log.write_text("\n".join(lines) + "\n")
    runner = _load_runner()
    outs = {}
    bundle_files = _bundle_files(request, suffix)
    for path in (bundle_files[".pt"], bundle_files[suffix]):
        out = tmp_path / f"out{path.suffix}.jsonl"
        counts = runner.run(str(path), open(log, "rb"), out=str(out), control=True)
        assert counts["bad"] == 1 and counts["corrections"] > 10
        outs[path.suffix] = [json.loads(x) for x in out.read_text().splitlines()]
    a, b = outs[".pt"], outs[suffix]
    assert len(a) == len(b) == curl_recording.att_t.size
    # The runner prints points with 6 decimals: two within TOL of each other can round one unit (1e-6) apart.
    printed = 1e-6 + TOL
    for x, y in zip(a, b):
        assert x["flags"] == y["flags"] and x["status"] == y["status"]
        assert np.abs(np.asarray(x["points"]) - np.asarray(y["points"])).max() < printed
        assert abs(x["h"] - y["h"]) < TOL and abs(x["v"] - y["v"]) < TOL


def test_pi_runner_refuses_a_program_without_manifest(bundle_files, tmp_path, capsys):
    bad = tmp_path / "copy.pte"
    shutil.copy(bundle_files[".pte"], bad)
    log = tmp_path / "f.jsonl"
    log.write_text("")
    rc = _load_runner().main([str(bad), "--log", str(log)])
    assert rc == 2 and "no manifest" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ aarch64 emulator
SMOKE = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import pi_runner
for path in sys.argv[2:]:
    counts = pi_runner.run(path, open(sys.argv[1] + "/frames.jsonl", "rb"), out=path + ".out.jsonl")
    print(json.dumps({"path": path, "att": counts["att"], "machine": __import__("platform").machine()}))
"""


def test_artefacts_run_under_an_aarch64_emulator(request, curl_recording, tmp_path):
    """The Pi is aarch64: run the runner on the .pte and .pt bundles under qemu-aarch64 with an aarch64 Python
    that has requirements-pi.txt installed (``FLEXLEARN_AARCH64_PYTHON``; ``FLEXLEARN_AARCH64_SYSROOT`` for
    ``-L``); both give the same records."""
    qemu = shutil.which("qemu-aarch64")
    py = os.environ.get("FLEXLEARN_AARCH64_PYTHON")
    if qemu is None:
        pytest.skip("qemu-aarch64 not installed (apt-get install qemu-user)")
    if not py:
        pytest.skip(
            "no aarch64 Python with torch 2.13 + executorch 1.5: set FLEXLEARN_AARCH64_PYTHON (an arm64 "
            "root filesystem with requirements-pi.txt installed; see docs/raspberry_pi.md)"
        )
    bundle_files = request.getfixturevalue("bundle_files")
    from flexlearn.replay.frames import write_frames_jsonl

    work = tmp_path / "pi"
    work.mkdir()
    shutil.copytree(ROOT / "flexlearn" / "runtime" / "pikit", work / "pikit")  # the runtime package, as in a kit
    shutil.copy(ROOT / "scripts" / "pi_runner.py", work / "pi_runner.py")
    files = []
    for suffix in (".pt", ".pte"):
        for src in (bundle_files[suffix], manifest_path(bundle_files[suffix])):
            shutil.copy(src, work / src.name)
        files.append(str(work / bundle_files[suffix].name))
    write_frames_jsonl(curl_recording, work / "frames.jsonl")
    (work / "smoke.py").write_text(SMOKE)
    cmd = (
        [qemu]
        + (["-L", os.environ["FLEXLEARN_AARCH64_SYSROOT"]] if os.environ.get("FLEXLEARN_AARCH64_SYSROOT") else [])
        + [py, str(work / "smoke.py"), str(work), *files]
    )
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env={**os.environ, "PYTHONNOUSERSITE": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert [r["machine"] for r in rows] == ["aarch64", "aarch64"]
    outs = [[json.loads(x) for x in Path(f + ".out.jsonl").read_text().splitlines()] for f in files]
    for x, y in zip(*outs):
        assert x["flags"] == y["flags"] and np.abs(np.asarray(x["points"]) - np.asarray(y["points"])).max() < TOL
