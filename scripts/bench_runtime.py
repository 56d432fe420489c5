#!/usr/bin/env python
"""Latency of the scripted fused estimator (seed 002, III-B4) on one thread, and a soak for flat latency/memory.

    python scripts/bench_runtime.py [--segments 9] [--steps 20000] [--soak 1000000] [--out bench.json]
    python scripts/bench_runtime.py --baseline /tmp/base --steps 2000 --repeats 9   # fused step vs another tree

Measures, on a TorchScript module (script → save → load, as deployed):
* ``fused_step_us_median`` — one `FusedEstimator.forward`: a magnetometer round (N fresh readings, no coil) and an
  attitude sweep (N + 1 quaternions → backbone, tip height, flags); the per-frame work at the sensor rate;
* ``attitude_step_us_median`` and ``mag_round_us_median`` separately; ``correction_us_median`` — one magnetic
  update (direction MLP 3×128 + filter), once per 300 ms in the seed's schedule;
* soak: ``--soak`` steps in blocks; medians of the first and last block and RSS before/after (flat = ratio ≈ 1,
  growth ≈ 0), nested under ``soak`` and flat as ``soak_latency_ratio_last_first``, ``soak_rss_growth_mb``, …;
* ``imu_attitude_step`` — one `flexlearn.sensing.attitude.step.AttitudeStep` call (raw IMU → quaternion) against the
  previous list round-trip wrapping of the same kernels, side by side (``--imu-step``: only this section);
* ``output_record`` — µs per output record of the runner: JSON lines alone and with ``--mcap``, side by side;
* ``binframe_parse_us_median`` — decoding one binary serial frame (`flexlearn.runtime.pikit.serial_frames`). The issue's
full soak is 10⁶ steps (≈ 1 min); tests run a short one.
* ``--formats`` (needs ``executorch``): ``formats`` — per-call latency of every exported module side by side,
  TorchScript / torch.export ``.pt2`` / ExecuTorch ``.pte``, each loaded from its file as deployed (direction model
  on one ΔB, arm-controller step, the bundle estimator driven as the runner drives it (`ProgramBundle`): attitude
  sweep, magnetometer round, fused step, and a coil-pulse cycle of 20 rounds with its magnetic correction): µs per
  call, median over ``--repeats`` blocks of ``--format-steps`` calls, ratios to TorchScript, and the max |Δ| of the
  outputs against TorchScript on the same inputs; ``export_blockers`` — what stops `torch.export` on the
  TorchScript modules (file:line, construct; `flexlearn.runtime.export_diagnosis.export_blockers`).
Prints and writes one JSON object (atomically with ``--out``).

    python scripts/bench_runtime.py --steps 2000 --formats --format-steps 500 --repeats 7 --out formats.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from flexlearn.lie import matrix_to_quat, so3_exp  # noqa: E402
from flexlearn.models.direction_mlp import DirectionMLP  # noqa: E402
from flexlearn.runtime.fusion.estimator import FusedEstimator  # noqa: E402
from flexlearn.runtime.fusion.options import EstimatorSettings  # noqa: E402
from flexlearn.sensing.attitude import kernels as attitude_kernels  # noqa: E402


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _stream(n: int, steps: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Valid curled quaternions (steps, N+1, 4) and fresh magnetometer readings (steps, N, 3) [T]."""
    g = torch.Generator().manual_seed(seed)
    w = 0.3 * torch.rand(steps, n + 1, 3, generator=g, dtype=torch.float64)
    w[:, 0] = 0.0
    q = matrix_to_quat(so3_exp(w))
    m = 3e-5 + 1e-6 * torch.randn(steps, n, 3, generator=g, dtype=torch.float64)
    return q, m


def build(n: int) -> torch.jit.ScriptModule:
    est = FusedEstimator(DirectionMLP(), EstimatorSettings(n_segments=n)).eval()
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(est), buf)
    buf.seek(0)
    mod = torch.jit.load(buf)
    mod.set_reference(torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64).repeat(n + 1, 1))
    return mod


def _time(fn, k: int) -> list[float]:
    out = []
    for i in range(k):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def run(n: int = 9, steps: int = 20000, soak: int = 0, block: int = 50000) -> dict:
    torch.set_num_threads(1)
    mod = build(n)
    q, m = _stream(n, min(steps, 4096))
    k = q.shape[0]
    clock = [0.0]

    def fused(i: int) -> None:
        clock[0] += 0.06
        mod(clock[0], q[i % k], m[i % k], -1)

    def att(i: int) -> None:
        clock[0] += 0.06
        mod.attitude(clock[0], q[i % k])

    def mag(i: int) -> None:
        clock[0] += 0.003
        mod.magnetometer(clock[0], m[i % k], -1)

    db = torch.tensor([1e-5, -2e-5, 9e-5], dtype=torch.float64)

    def corr(i: int) -> None:
        clock[0] += 0.3
        mod.correct(1 + i % n, db, clock[0])

    with torch.inference_mode():
        for _ in range(2):  # warm-up: profiling executor specialises on the first calls
            _time(fused, 2000)
        # fixes everywhere so that the steady state (no NO_FIX evaluation) is measured
        _time(corr, 3 * n)
        res = {
            "segments": n,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "fused_step_us_median": 1e6 * statistics.median(_time(fused, steps)),
            "attitude_step_us_median": 1e6 * statistics.median(_time(att, steps)),
            "mag_round_us_median": 1e6 * statistics.median(_time(mag, steps)),
            "correction_us_median": 1e6 * statistics.median(_time(corr, min(steps, 2000))),
            "fused_step_us_p99": 0.0,
        }
        lat = sorted(_time(fused, steps))
        res["fused_step_us_p99"] = 1e6 * lat[int(0.99 * (len(lat) - 1))]
        if soak > 0:
            rss0 = _rss_mb()
            blocks = []
            done = 0
            while done < soak:
                b = min(block, soak - done)
                blocks.append(1e6 * statistics.median(_time(fused, b)))
                done += b
            res["soak"] = {
                "steps": soak,
                "block": block,
                "first_block_us": blocks[0],
                "last_block_us": blocks[-1],
                "max_block_us": max(blocks),
                "latency_ratio_last_first": blocks[-1] / blocks[0],
                "rss_mb_before": rss0,
                "rss_mb_after": _rss_mb(),
                "rss_growth_mb": _rss_mb() - rss0,
            }
            # the same figures flat, for dashboards and comparisons across runs
            res.update(
                {
                    f"soak_{key}": res["soak"][key]
                    for key in (
                        "steps",
                        "first_block_us",
                        "last_block_us",
                        "max_block_us",
                        "latency_ratio_last_first",
                        "rss_growth_mb",
                    )
                }
            )
        res["finite"] = bool(torch.isfinite(mod.points).all())
    res["binframe_parse_us_median"] = _parse_cost(n, q, m)
    res["output_record"] = _output_cost(mod)
    return res


def _output_cost(mod, records: int = 2000, repeats: int = 5) -> dict:
    """µs per output record written by the runner (`flexlearn.runtime.pikit.outputs.Outputs`): JSON lines alone
    against JSON lines plus ``--mcap`` (Foxglove messages), side by side, medians over ``repeats``; and the MCAP
    file's bytes per record."""
    import tempfile

    from flexlearn.runtime.pikit.outputs import Outputs

    pts, flags = mod.points.clone(), mod.flags.clone()
    per = {"jsonl": [], "jsonl_mcap": []}
    with tempfile.TemporaryDirectory() as d:
        for r in range(repeats):
            for kind in per:
                mcap = os.path.join(d, f"{r}.mcap") if kind == "jsonl_mcap" else None
                out = Outputs(os.devnull, False, False, mcap)
                t0 = time.perf_counter()
                for i in range(records):
                    out.write(0.01 * i, pts, 0.02, flags, 0.0, 0)
                out.close()
                per[kind].append((time.perf_counter() - t0) / records)
        size = os.path.getsize(os.path.join(d, "0.mcap"))
    us = {k: 1e6 * statistics.median(v) for k, v in per.items()}
    return {
        **{f"{k}_us_median": v for k, v in us.items()},
        "ratio": us["jsonl_mcap"] / us["jsonl"],
        "mcap_bytes_per_record": size / records,
    }


def _parse_cost(n: int, q: torch.Tensor, m: torch.Tensor, frames: int = 2000) -> float:
    """µs per decoded frame of the binary serial protocol (one att + one mag frame alternating, fed in 4 KiB
    chunks, `flexlearn.runtime.pikit.serial_frames.FrameParser`): the runner's link overhead per frame."""
    from flexlearn.runtime.pikit.serial_frames import FrameParser, encode_frame

    raw = b"".join(
        encode_frame("att", 0.06 * i, i, q=q[i % q.shape[0]].tolist())
        if i % 2 == 0
        else encode_frame("mag", 0.06 * i, i, m=m[i % m.shape[0]].tolist(), coil=-1)
        for i in range(frames)
    )
    reps = []
    for _ in range(5):
        p = FrameParser()
        t0 = time.perf_counter()
        got = sum(len(p.feed(raw[k : k + 4096])) for k in range(0, len(raw), 4096))
        reps.append((time.perf_counter() - t0) / max(got, 1))
    return 1e6 * statistics.median(reps)


# ------------------------------------------------------------------------------ IMU attitude filter step
class _ListRoundTripStep(torch.nn.Module):
    """The previous `AttitudeStep` wrapping, kept as the baseline: state in a float64 buffer converted to a list
    and back (exactly, by a three-way Veltkamp split: TorchScript's ``torch.tensor(List[float], float64)`` rounds
    through float32) on every call, around the same kernels."""

    def __init__(self, rate_hz: float, use_mag: bool = False) -> None:
        super().__init__()
        from flexlearn.sensing.attitude.offline import initial_state, make_params

        p = make_params(rate_hz)
        self.register_buffer("params", torch.as_tensor(p, dtype=torch.float64))
        self.register_buffer("state", torch.as_tensor(initial_state(p), dtype=torch.float64))
        self.use_mag = bool(use_mag)

    def forward(self, gyr: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
        s: list[float] = self.state.tolist()
        p: list[float] = self.params.tolist()
        g: list[float] = gyr.tolist()
        a: list[float] = acc.tolist()
        attitude_kernels.step(s, p, g[0], g[1], g[2], a[0], a[1], a[2], 0.0, 0.0, 0.0, False)
        q = attitude_kernels.output(s, False)
        self.state.copy_(_veltkamp(s))
        return _veltkamp([q[0], q[1], q[2], q[3]])


def _veltkamp(s: list[float]) -> torch.Tensor:
    hi: list[float] = []
    mid: list[float] = []
    lo: list[float] = []
    for x in s:
        c = 536870913.0 * x
        h = c - (c - x)
        r = x - h
        c2 = 536870913.0 * r
        m = c2 - (c2 - r)
        hi.append(h)
        mid.append(m)
        lo.append(r - m)
    return (torch.tensor(hi, dtype=torch.float64) + torch.tensor(mid, dtype=torch.float64)) + torch.tensor(
        lo, dtype=torch.float64
    )


def run_imu_step(steps: int = 3000, repeats: int = 7) -> dict:
    """``imu_attitude_step``: µs per `AttitudeStep` call (6-axis, scripted → saved → loaded) against the previous
    list round-trip wrapping of the same kernels, side by side (medians over ``repeats`` blocks), and the largest
    angle [rad] between each and the offline numba path over the stream (a rotating, shaken IMU at 200 Hz)."""
    from _timing import time_per_call

    from flexlearn.sensing.attitude.step import AttitudeStep

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(3)
    t = torch.arange(steps, dtype=torch.float64).unsqueeze(1) / 200.0
    gyr = 0.8 * torch.sin(t * torch.tensor([1.1, 0.7, 0.5], dtype=torch.float64)) + 0.003 * torch.randn(
        steps, 3, generator=g, dtype=torch.float64
    )
    acc = torch.tensor([0.0, 0.0, 9.80665], dtype=torch.float64) + 0.5 * torch.randn(
        steps, 3, generator=g, dtype=torch.float64
    )

    def load(m: torch.nn.Module) -> torch.jit.ScriptModule:
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(m), buf)
        buf.seek(0)
        return torch.jit.load(buf)

    mods = {"new": load(AttitudeStep(200.0)), "old": load(_ListRoundTripStep(200.0))}
    res: dict = {"steps": steps, "repeats": repeats}
    for name, m in mods.items():
        tm = time_per_call(lambda k, m=m: m(gyr[k % steps], acc[k % steps]), steps, repeats, warmup=min(500, steps))
        res[f"{name}_us"], res[f"{name}_cpu_us"] = tm["wall_median"], tm["cpu_median"]
    res["speedup_old_over_new"] = res["old_us"] / res["new_us"]
    res["cpu_speedup_old_over_new"] = res["old_cpu_us"] / res["new_cpu_us"]
    from flexlearn.sensing.attitude.offline import run_filter

    ref = torch.as_tensor(run_filter(gyr.numpy(), acc.numpy(), 200.0).quat)
    for name, make in (("new", AttitudeStep), ("old", _ListRoundTripStep)):
        m = load(make(200.0))
        q = torch.stack([m(gyr[k], acc[k]) for k in range(steps)])
        w = (q * ref).sum(-1)  # conj(ref) ⊗ q: scalar w, vector v; angle 2 atan2(|v|, |w|) (no acos round-off)
        v = ref[:, :1] * q[:, 1:] - q[:, :1] * ref[:, 1:] - torch.linalg.cross(ref[:, 1:], q[:, 1:])
        res[f"max_angle_rad_{name}_vs_offline"] = float((2.0 * torch.atan2(v.norm(dim=-1), w.abs())).max())
    return res


# ------------------------------------------------------------------------------ TorchScript / .pt2 / .pte
_SAVE_FUSED = """import sys, torch
sys.path.insert(0, sys.argv[1])
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.fusion.estimator import FusedEstimator
torch.manual_seed(0)
n = int(sys.argv[3])
try:
    from flexlearn.runtime.fusion.options import EstimatorSettings
    est = FusedEstimator(DirectionMLP(), EstimatorSettings(n_segments=n))
except ImportError:  # a tree from before the settings object
    est = FusedEstimator(DirectionMLP(), n_segments=n)
torch.jit.save(torch.jit.script(est.eval()), sys.argv[2])
"""


def run_baseline(root: str, n: int = 9, steps: int = 2000, repeats: int = 9) -> dict:
    """``--baseline <tree>``: the fused step of this tree against the one of another source tree (e.g. ``git worktree
    add /tmp/base HEAD`` before a change), each scripted and saved by a subprocess in its tree (same direction-model
    weights: seed 0), loaded here and timed alternately repeat by repeat (median µs per step, ratio this / baseline)
    on the same stream; ``max_abs_diff`` of points, tip height and flags over it; the same for one magnetic
    correction (``correction_ratio``; ``correction_max_abs_diff`` of the bias state after the same fixes)."""
    import subprocess
    import tempfile

    torch.set_num_threads(1)
    mods = {}
    with tempfile.TemporaryDirectory() as d:
        for name, tree in (("baseline", root), ("this", str(Path(__file__).resolve().parents[1]))):
            path = str(Path(d) / f"{name}.pt")
            subprocess.run([sys.executable, "-c", _SAVE_FUSED, tree, path, str(n)], check=True, cwd=d)
            mods[name] = torch.jit.load(path)
    q, m = _stream(n, min(steps, 4096))
    k = q.shape[0]
    ref = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64).repeat(n + 1, 1)
    outs: dict = {}
    for name, mod in mods.items():
        mod.set_reference(ref)
        outs[name] = [tuple(x.clone() for x in mod(0.06 * (i + 1), q[i % k], m[i % k], -1)) for i in range(k)]
    diff = max(float((a - b).abs().max()) for oa, ob in zip(outs["baseline"], outs["this"]) for a, b in zip(oa, ob))
    times: dict = {name: [] for name in mods}
    clock = {name: 0.06 * (k + 1) for name in mods}
    for _ in range(repeats):
        for name, mod in mods.items():
            t0 = time.thread_time()
            for i in range(steps):
                clock[name] += 0.06
                mod(clock[name], q[i % k], m[i % k], -1)
            times[name].append((time.thread_time() - t0) / steps * 1e6)
    med = {name: statistics.median(v) for name, v in times.items()}
    # the magnetic correction (direction model + bias-model update), same fixes on both: time and state difference
    db = torch.tensor([1e-5, -2e-5, 9e-5], dtype=torch.float64)
    fix_times: dict = {name: [] for name in mods}
    for _ in range(repeats):
        for name, mod in mods.items():
            t0 = time.thread_time()
            for i in range(max(steps // 10, 1)):
                clock[name] += 0.3
                mod.correct(1 + i % n, db, clock[name])
            fix_times[name].append((time.thread_time() - t0) / max(steps // 10, 1) * 1e6)
    fix = {name: statistics.median(v) for name, v in fix_times.items()}
    fix_diff = max(
        float((getattr(mods["baseline"], b) - getattr(mods["this"], b)).abs().max())
        for b in ("bias", "c_bias", "gain", "p_var", "rel_c")
    )
    return {
        "root": root,
        "baseline_fused_step_cpu_us": med["baseline"],
        "fused_step_cpu_us": med["this"],
        "ratio": med["this"] / med["baseline"],
        "max_abs_diff": diff,
        "target_ratio_max": 1.05,
        "baseline_correction_cpu_us": fix["baseline"],
        "correction_cpu_us": fix["this"],
        "correction_ratio": fix["this"] / fix["baseline"],
        "correction_max_abs_diff": fix_diff,
    }


def _side_by_side(calls: dict, steps: int, repeats: int) -> dict:
    """µs per call (median over repeats) of each format's ``fn(k)``, ratios to TorchScript and max |Δ| of the
    outputs (``out(k)`` → tensor) against TorchScript over ``steps`` calls on fresh instances."""
    from _timing import time_per_call

    res: dict = {}
    for fmt, (fn, _) in calls.items():
        res[f"{fmt}_us"] = time_per_call(fn, steps, repeats, warmup=min(200, steps))["wall_median"]
    for fmt in calls:
        if fmt != "torchscript":
            res[f"ratio_{fmt}_torchscript"] = res[f"{fmt}_us"] / res["torchscript_us"]
    outs = {fmt: [out(k) for k in range(steps)] for fmt, (_, out) in calls.items()}
    for fmt in calls:
        if fmt != "torchscript":
            res[f"max_abs_diff_{fmt}"] = max(float((a - b).abs().max()) for a, b in zip(outs["torchscript"], outs[fmt]))
    return res


def _first(x):
    return x[0] if isinstance(x, (list, tuple)) else x


def _direction_model_formats(model, db, d: Path, steps: int, repeats: int) -> dict:
    """Direction model ΔB (1, 3) → unit direction (the estimator's call) as TorchScript, .pt2 and .pte."""
    from flexlearn.runtime import executorch_export as ee
    from flexlearn.runtime import program_loading as pl
    from flexlearn.runtime.export import export_torchscript, load_torchscript

    k_in = db.shape[0]
    ts, _ = load_torchscript(export_torchscript(model, d / "dir.pt", {}))
    pt2_path, pte_path = ee.export_direction_model(model, d / "dir")
    pt2, _ = pl.load_pt2(pt2_path)
    pte = pl.load_pte(pte_path).method("forward")
    return _side_by_side(
        {
            "torchscript": (lambda k: ts(db[k % k_in]), lambda k: ts(db[k % k_in])),
            "pt2": (lambda k: pt2(db[k % k_in]), lambda k: pt2(db[k % k_in])),
            "pte": (lambda k: pte(db[k % k_in]), lambda k: pte(db[k % k_in])[0]),
        },
        steps,
        repeats,
    )


def _arm_controller_formats(cfg, frames, d: Path, steps: int, repeats: int) -> dict:
    """Arm-controller step in the three formats (fresh instances for the parity pass: the state advances)."""
    from flexlearn.runtime import executorch_export as ee
    from flexlearn.runtime import program_loading as pl
    from flexlearn.runtime.arm.controller import ArmController
    from flexlearn.runtime.arm.export import export_arm_controller, load_arm_controller

    k_in = frames.shape[0]
    ts_path = export_arm_controller(ArmController.build(cfg), d / "arm.pt", cfg)
    ee.export_arm_controller_graph(ArmController.build(cfg), cfg, d / "arm")

    def arm(fmt: str):
        if fmt == "torchscript":
            c = load_arm_controller(ts_path)[0]
            return lambda k: c(frames[k % k_in], 1e-3 * k)
        c = pl.load_arm_controller_program(d / f"arm.{fmt}")[0]
        return lambda k: c(frames[k % k_in], 1e-3 * k)

    return _side_by_side(
        {f: (arm(f), (lambda s: lambda k: s(k)[0])(arm(f))) for f in ("torchscript", "pt2", "pte")}, steps, repeats
    )


def _estimator_formats(model, n: int, q, m, d: Path, steps: int, repeats: int) -> dict:
    """Bundle estimator as the runner drives it: attitude sweep, magnetometer round (no coil), fused step, and a
    pulse cycle (10 coil-off rounds, 9 rounds of coil k mod N, the switch-off round with the magnetic correction,
    one attitude sweep), per call, in the three formats."""
    from flexlearn.runtime import executorch_export as ee
    from flexlearn.runtime.deploy import build_bundle, load_bundle
    from flexlearn.runtime.pikit.program_bundle import load_program_bundle

    k_in = q.shape[0]
    ee.export_bundle_programs(build_bundle(model, n), d / "bundle")

    def est(fmt: str, what: str):
        b = load_bundle(d / "bundle.pt")[0] if fmt == "torchscript" else load_program_bundle(d / f"bundle.{fmt}")[0]
        b.set_reference(q[0])
        clock = [0.0]

        def fn(k: int):
            if what == "pulse_cycle":
                for r in range(20):
                    clock[0] += 0.003
                    b.magnetometer(clock[0], m[(20 * k + r) % k_in], -1 if r < 10 or r == 19 else k % n)
            elif what != "attitude":
                clock[0] += 0.003
                b.magnetometer(clock[0], m[k % k_in], -1)
            if what == "magnetometer":
                return torch.zeros(())
            clock[0] += 0.06
            return b.attitude(clock[0], q[k % k_in])[0]

        return fn

    out = {}
    for what in ("attitude", "magnetometer", "fused_step", "pulse_cycle"):
        calls = steps if what != "pulse_cycle" else max(steps // 20, 5)
        out[f"estimator_{what}"] = _side_by_side(
            {f: (est(f, what), est(f, what)) for f in ("torchscript", "pt2", "pte")}, calls, repeats
        )
    return out


def _export_blockers(cfg, frames) -> dict:
    """What stops torch.export on the TorchScript modules (file:line of each data-dependent branch)."""
    from flexlearn.runtime import executorch_export as ee
    from flexlearn.runtime.arm.controller import ArmController
    from flexlearn.runtime.export_diagnosis import export_blockers
    from flexlearn.runtime.fusion.estimator import FusedEstimator
    from flexlearn.runtime.pikit.height_control import HeightPID

    f64 = torch.float64
    e = FusedEstimator(DirectionMLP(hidden=(8,)), EstimatorSettings(n_segments=3))
    t0 = torch.tensor(0.1, dtype=f64)
    q3 = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=f64).repeat(4, 1)
    return {
        "arm_controller": export_blockers(ArmController.build(cfg), (frames[0], t0)),
        "estimator_attitude": export_blockers(ee.MethodOf(e, "attitude"), (t0, q3)),
        "estimator_magnetometer": export_blockers(
            ee.MethodOf(e, "magnetometer"), (t0, torch.full((3, 3), 1e-5, dtype=f64), torch.tensor(-1))
        ),
        "height_pid": export_blockers(
            ee.MethodOf(HeightPID(), "step"), (t0, torch.tensor(0.01, dtype=f64), torch.tensor(0.0, dtype=f64))
        ),
    }


def run_formats(n: int = 9, steps: int = 500, repeats: int = 7) -> dict:
    """The ``formats`` and ``export_blockers`` sections (module docstring); exports into a temporary folder."""
    import math
    import tempfile

    from flexlearn.runtime.arm.config import ArmControllerConfig

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = DirectionMLP().eval()
    q, m = _stream(n, max(steps, 64))
    k_in = q.shape[0]
    db = 3e-5 + 1e-5 * torch.randn(k_in, 1, 3, generator=torch.Generator().manual_seed(1))
    cfg = ArmControllerConfig()
    g = torch.Generator().manual_seed(0)
    frames = torch.zeros(k_in, 5, 6, dtype=torch.float64)
    frames[:, :, 2] = 9.80665
    frames += 0.02 * torch.randn(frames.shape, generator=g, dtype=torch.float64)
    res: dict = {"segments": n, "steps": steps, "repeats": repeats, "threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory() as tmp, torch.inference_mode():
        d = Path(tmp)
        res["direction_model"] = _direction_model_formats(model, db, d, steps, repeats)
        res["arm_controller"] = _arm_controller_formats(cfg, frames, d, steps, repeats)
        res.update(_estimator_formats(model, n, q, m, d, steps, repeats))
        res["export_blockers"] = _export_blockers(cfg, frames)
    res["finite"] = all(
        math.isfinite(v)
        for sec in res.values()
        if isinstance(sec, dict) and "torchscript_us" in sec
        for v in sec.values()
    )
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--segments", type=int, default=9)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--soak", type=int, default=0, help="soak steps (issue: 1000000)")
    ap.add_argument("--block", type=int, default=50000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--formats", action="store_true", help="TorchScript / .pt2 / .pte side by side (executorch)")
    ap.add_argument("--format-steps", type=int, default=500, help="calls per repeat in --formats")
    ap.add_argument("--repeats", type=int, default=7, help="repeats in --formats (medians over them)")
    ap.add_argument("--imu-step", action="store_true", help="only the IMU attitude filter step, new vs previous")
    ap.add_argument("--baseline", default="", help="only the fused step against this source tree, side by side")
    a = ap.parse_args(argv)
    if a.baseline:
        print(
            json.dumps(
                {"fused_step_vs_baseline": run_baseline(a.baseline, a.segments, min(a.steps, 4000), a.repeats)},
                indent=2,
            )
        )
        return 0
    if a.imu_step:
        res = {"imu_attitude_step": run_imu_step(min(a.steps, 3000), a.repeats)}
        print(json.dumps(res, indent=2))
        return 0
    res = run(a.segments, a.steps, a.soak, a.block)
    res["imu_attitude_step"] = run_imu_step(min(a.steps, 3000), a.repeats)
    if a.formats:
        res["formats"] = run_formats(a.segments, a.format_steps, a.repeats)
    text = json.dumps(res, indent=2)
    print(text)
    if a.out is not None:
        from flexlearn.atomic import atomic_path

        with atomic_path(a.out) as tmp:
            Path(tmp).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
