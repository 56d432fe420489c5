#!/usr/bin/env python
"""Latency of the scripted fused estimator (seed 002, III-B4) on one thread, and a soak for flat latency/memory.

    python scripts/bench_runtime.py [--segments 9] [--steps 20000] [--soak 1000000] [--out bench.json]

Measures, on a TorchScript module (script → save → load, as deployed):
* ``fused_step_us_median`` — one `FusedEstimator.forward`: a magnetometer round (N fresh readings, no coil) and an
  attitude sweep (N + 1 quaternions → backbone, tip height, flags); the per-frame work at the sensor rate;
* ``attitude_step_us_median`` and ``mag_round_us_median`` separately; ``correction_us_median`` — one magnetic
  update (direction MLP 3×128 + filter), once per 300 ms in the seed's schedule;
* soak: ``--soak`` steps in blocks; medians of the first and last block and RSS before/after (flat = ratio ≈ 1,
  growth ≈ 0), nested under ``soak`` and flat as ``soak_latency_ratio_last_first``, ``soak_rss_growth_mb``, …;
* ``binframe_parse_us_median`` — decoding one binary serial frame (`flexlearn.runtime.serial_frames`). The issue's full soak is 10⁶ steps (≈ 1 min); tests run a short one.
Prints and writes one JSON object (atomically with ``--out``).
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

from flexlearn.lie import matrix_to_quat, so3_exp  # noqa: E402
from flexlearn.models.direction_mlp import DirectionMLP  # noqa: E402
from flexlearn.runtime.fusion import FusedEstimator  # noqa: E402


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
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
    est = FusedEstimator(DirectionMLP(), n_segments=n).eval()
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
        for _ in range(2):                           # warm-up: profiling executor specialises on the first calls
            _time(fused, 2000)
        # fixes everywhere so that the steady state (no NO_FIX evaluation) is measured
        _time(corr, 3 * n)
        res = {"segments": n, "threads": torch.get_num_threads(), "torch": torch.__version__,
               "fused_step_us_median": 1e6 * statistics.median(_time(fused, steps)),
               "attitude_step_us_median": 1e6 * statistics.median(_time(att, steps)),
               "mag_round_us_median": 1e6 * statistics.median(_time(mag, steps)),
               "correction_us_median": 1e6 * statistics.median(_time(corr, min(steps, 2000))),
               "fused_step_us_p99": 0.0}
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
            res["soak"] = {"steps": soak, "block": block, "first_block_us": blocks[0], "last_block_us": blocks[-1],
                           "max_block_us": max(blocks), "latency_ratio_last_first": blocks[-1] / blocks[0],
                           "rss_mb_before": rss0, "rss_mb_after": _rss_mb(), "rss_growth_mb": _rss_mb() - rss0}
            # the same figures flat, for dashboards and comparisons across runs
            res.update({f"soak_{key}": res["soak"][key] for key in
                        ("steps", "first_block_us", "last_block_us", "max_block_us", "latency_ratio_last_first",
                         "rss_growth_mb")})
        res["finite"] = bool(torch.isfinite(mod.points).all())
    res["binframe_parse_us_median"] = _parse_cost(n, q, m)
    return res


def _parse_cost(n: int, q: torch.Tensor, m: torch.Tensor, frames: int = 2000) -> float:
    """µs per decoded frame of the binary serial protocol (one att + one mag frame alternating, fed in 4 KiB
    chunks, `flexlearn.runtime.serial_frames.FrameParser`): the runner's link overhead per frame."""
    from flexlearn.runtime.serial_frames import FrameParser, encode_frame

    raw = b"".join(encode_frame("att", 0.06 * i, i, q=q[i % q.shape[0]].tolist()) if i % 2 == 0 else
                   encode_frame("mag", 0.06 * i, i, m=m[i % m.shape[0]].tolist(), coil=-1) for i in range(frames))
    reps = []
    for _ in range(5):
        p = FrameParser()
        t0 = time.perf_counter()
        got = sum(len(p.feed(raw[k:k + 4096])) for k in range(0, len(raw), 4096))
        reps.append((time.perf_counter() - t0) / max(got, 1))
    return 1e6 * statistics.median(reps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--segments", type=int, default=9)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--soak", type=int, default=0, help="soak steps (issue: 1000000)")
    ap.add_argument("--block", type=int, default=50000)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    res = run(a.segments, a.steps, a.soak, a.block)
    text = json.dumps(res, indent=2)
    print(text)
    if a.out is not None:
        from flexlearn.atomic import atomic_path
        with atomic_path(a.out) as tmp:
            Path(tmp).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
