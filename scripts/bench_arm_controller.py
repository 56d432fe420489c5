#!/usr/bin/env python
"""Benchmark of the deployable flexible-arm controller (seed 000, eq. (45)); prints one JSON object.

``step_us_median``: one scripted ``ArmController`` step of the default (``moment``) controller (input checks,
IMU estimator with acceleration compensation → joint states, modal coordinates, tip deflections and
curvatures, pose → hub loads from the measured link loads, low-passed → static angle correction → quintic
reference → control law → torque limit), 1 thread, median over repeats of the wall time per step; also the thread CPU
time (robust to other processes on a shared machine), the estimator alone, and the step of the exported
file loaded with plain torch. Target ≤ 150 µs.

    python scripts/bench_arm_controller.py [--repeats 9] [--steps 2000] [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import torch

from _timing import time_per_call  # noqa: E402  (scripts/ is on sys.path when run)
from flexlearn.runtime.arm_controller import ArmController, ArmControllerConfig, export_arm_controller


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = ArmControllerConfig()
    c = torch.jit.script(ArmController.build(cfg))
    g = torch.Generator().manual_seed(0)
    fr = torch.zeros(c.n_imus, 6, dtype=torch.float64)
    fr[:, 2] = 9.80665
    fr = fr + 0.02 * torch.randn(fr.shape, generator=g, dtype=torch.float64)
    acc, gyr = fr[:, :3], fr[:, 3:]
    ctrl = time_per_call(lambda k: c(fr, 1.0 + 1e-3 * k), a.steps, a.repeats)
    est = time_per_call(lambda k: c.estimator.step(acc, gyr), a.steps, a.repeats)
    with tempfile.TemporaryDirectory() as d:
        path = export_arm_controller(ArmController.build(cfg), Path(d) / "arm.pt", cfg)
        loaded = torch.jit.load(str(path))
        exported = time_per_call(lambda k: loaded(fr, 1.0 + 1e-3 * k), a.steps, a.repeats)
    out = {"threads": torch.get_num_threads(), "loadavg": os.getloadavg(), "step_us_median": ctrl["wall_median"],
           "step_us": ctrl, "estimator_step_us": est, "exported_step_us": exported, "target_step_us": 150.0}
    if a.out:
        from flexlearn.atomic import write_json_atomic

        write_json_atomic(a.out, out)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
