#!/usr/bin/env python
"""Latency of the Pi runner's first seconds with and without the warm-up (JSON on stdout).

A nine-module robot bundle (direction MLP 48-48) runs a simulated 60 s ``3d_curl`` stream frame by frame as
``pi_runner.py`` drives it (one torch thread, controller on). Each variant runs in a fresh process (TorchScript's
profiling state starts cold), once without warm-up and once with the runner's warm-up (`pikit.runner.warm_up` on a
synthetic stream, as outside a kit). Per variant: p99 of the attitude step (sweep + controller) over the first 10 s
of the stream and over the rest (the steady state), and their ratio; the target is ``first_10s_p99 / steady_p99``
≤ 2 with the warm-up.

    python scripts/bench_warmup.py [--seconds 60] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIRST = 10.0  # [s] of stream time that count as "the first seconds"


def _p99(xs: list) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else float("nan")


def child(bundle: str, frames: str, warm: bool) -> dict:
    """One variant in this (fresh) process: per-frame attitude latencies split at `FIRST`."""
    import torch

    from flexlearn.runtime.pikit import frame_checks, frame_lines, runner

    torch.set_num_threads(1)
    t_load = time.perf_counter()
    module, meta, n = runner.load_checked(bundle)
    warm_s = runner.warm_up(module, list(runner.synthetic_frames(n)), True) if warm else 0.0
    load_s = time.perf_counter() - t_load
    with open(frames, "rb") as f:
        typed = list(frame_checks.typed(frame_lines.read_lines(f), n))
    rec = runner.FrameRunner(module, runner.Recorder(), control=True, quiet=True)
    samples: list = []
    add = rec.lat.add
    rec.lat.add = lambda x: (samples.append(x), add(x))  # type: ignore[method-assign]
    t_att = [fr["t"] for fr in typed if fr["type"] == "att"]
    with torch.inference_mode():
        rec.process(typed)
    t0 = t_att[0]
    first = [x for t, x in zip(t_att, samples) if t - t0 < FIRST]
    rest = [x for t, x in zip(t_att, samples) if t - t0 >= FIRST]
    return {
        "first_10s_p99_us": 1e6 * _p99(first),
        "first_frame_us": 1e6 * samples[0],
        "steady_p99_us": 1e6 * _p99(rest),
        "ratio": _p99(first) / _p99(rest),
        "warmup_s": warm_s,
        "load_and_warmup_s": load_s,
        "frames": len(samples),
    }


def build(folder: Path, seconds: float) -> tuple[str, str]:
    """The bundle (with its manifest) and the frame stream."""
    import torch

    from flexlearn.models.direction_mlp import DirectionMLP
    from flexlearn.replay.frames import write_frames_jsonl
    from flexlearn.runtime.deploy import BundleOptions, export_deploy_bundle
    from flexlearn.sim.robot import simulate_robot
    from flexlearn.sim.shape_scenarios import scenario

    torch.manual_seed(0)
    bundle = folder / "bundle.pt"
    export_deploy_bundle(DirectionMLP(hidden=(48, 48)), bundle, BundleOptions(n_segments=9, calibration="identity"))
    write_frames_jsonl(simulate_robot(scenario("3d_curl", period=12.0), seconds), folder / "frames.jsonl")
    return str(bundle), str(folder / "frames.jsonl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="stream length [s] (default 60)")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per variant (default 3; median kept)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], a.child[1], a.child[2] == "warm")))
        return
    with tempfile.TemporaryDirectory() as tmp:
        bundle, frames = build(Path(tmp), a.seconds)
        out: dict = {"stream_s": a.seconds, "first_s": FIRST, "repeats": a.repeats}
        for variant in ("cold", "warm"):
            runs = []
            for _ in range(a.repeats):
                cmd = [sys.executable, __file__, "--child", bundle, frames, variant]
                runs.append(json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout))
            runs.sort(key=lambda r: r["ratio"])
            out[variant] = runs[len(runs) // 2]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
