#!/usr/bin/env python
"""Benchmark of the deployable flexible-arm controller (seed 000, eq. (45)); prints one JSON object.

``step_us_median``: one scripted ``ArmController`` step of the default (``moment``) controller (input checks,
IMU estimator with acceleration compensation → joint states, modal coordinates, tip deflections and
curvatures, pose → hub loads from the measured link loads, low-passed → static angle correction → quintic
reference → control law → torque limit), 1 thread, median over repeats of the wall time per step; also the thread CPU
time (robust to other processes on a shared machine), the estimator alone, and the step of the exported
file loaded with plain torch. A 1 kHz loop needs well under 1 ms per step; changes are judged by the ratio to
the previous step (``--baseline``), since absolute times differ 2–4× between machines.

``--baseline <checkout>``: the controller of another source tree (e.g. ``git worktree add /tmp/arm_base HEAD``
before a change) is scripted and saved by a subprocess in that tree, loaded here with plain torch and timed in
this process, alternating with this tree's controller repeat by repeat; ``baseline`` in the JSON holds both
medians, ``ratio_cpu``/``ratio_wall`` (this tree / baseline, < 1 is faster) and the largest torque and state
differences over a 1,600-step stream with lost frames, NaN/inf samples, saturated sensors and NaN times
(``parity_*``, `flexlearn.sim.arm_fault_stream`; fault codes must agree: ``code_mismatches``).

    python scripts/bench_arm_controller.py [--repeats 9] [--steps 2000] [--baseline /tmp/arm_base] [--out r.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from _timing import time_per_call  # noqa: E402  (scripts/ is on sys.path when run)

from flexlearn.runtime.arm.config import ArmControllerConfig
from flexlearn.runtime.arm.controller import ArmController
from flexlearn.runtime.arm.export import export_arm_controller
from flexlearn.sim.arm_fault_stream import arm_fault_stream, static_arm_frame

_SAVE = """import sys, torch
sys.path.insert(0, sys.argv[1])
from flexlearn.runtime.arm.config import ArmControllerConfig
from flexlearn.runtime.arm.controller import ArmController
torch.jit.save(torch.jit.script(ArmController.build(ArmControllerConfig())), sys.argv[2])
"""


def _alternating(fns: dict, steps: int, repeats: int) -> dict:
    """Median µs per call of each ``fn(k)``, the callables timed in turn within each repeat."""
    for fn in fns.values():
        for k in range(min(500, steps)):
            fn(k)
    wall: dict = {k: [] for k in fns}
    cpu: dict = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.thread_time()
            for k in range(steps):
                fn(k)
            wall[name].append((time.perf_counter() - t0) / steps * 1e6)
            cpu[name].append((time.thread_time() - c0) / steps * 1e6)
    return {k: {"wall_median": statistics.median(wall[k]), "cpu_median": statistics.median(cpu[k])} for k in fns}


def compare_baseline(root: str, steps: int, repeats: int) -> dict:
    """This tree's scripted controller against the one of the source tree ``root`` (module docstring)."""
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "base.pt")
        subprocess.run([sys.executable, "-c", _SAVE, root, path], check=True, cwd=d)
        base = torch.jit.load(path)
    new = torch.jit.script(ArmController.build(ArmControllerConfig()))
    dtau = dstate = 0.0
    mismatches = 0
    for fr, t in arm_fault_stream():
        a, b = base(fr, t), new(fr, t)
        dtau = max(dtau, float((a[0] - b[0]).abs().max()))
        dstate = max(dstate, float((a[1] - b[1]).abs().max()))
        mismatches += int(int(a[2]) != int(b[2]))
    base.reset()
    new.reset()
    fr = static_arm_frame()
    res = _alternating(
        {"baseline": lambda k: base(fr, 1.0 + 1e-3 * k), "this": lambda k: new(fr, 1.0 + 1e-3 * k)}, steps, repeats
    )
    return {
        "root": root,
        "baseline_step_us": res["baseline"],
        "step_us": res["this"],
        "ratio_cpu": res["this"]["cpu_median"] / res["baseline"]["cpu_median"],
        "ratio_wall": res["this"]["wall_median"] / res["baseline"]["wall_median"],
        "parity_max_abs_torque": dtau,
        "parity_max_abs_state": dstate,
        "code_mismatches": mismatches,
        "target_ratio": 0.4,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--baseline", default="", help="source tree of the controller to compare with (same run)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = ArmControllerConfig()
    c = torch.jit.script(ArmController.build(cfg))
    fr = static_arm_frame()
    acc, gyr = fr[:, :3], fr[:, 3:]
    ctrl = time_per_call(lambda k: c(fr, 1.0 + 1e-3 * k), a.steps, a.repeats)
    est = time_per_call(lambda k: c.estimator.step(acc, gyr), a.steps, a.repeats)
    with tempfile.TemporaryDirectory() as d:
        path = export_arm_controller(ArmController.build(cfg), Path(d) / "arm.pt", cfg)
        loaded = torch.jit.load(str(path))
        exported = time_per_call(lambda k: loaded(fr, 1.0 + 1e-3 * k), a.steps, a.repeats)
    out = {
        "threads": torch.get_num_threads(),
        "loadavg": os.getloadavg(),
        "step_us_median": ctrl["wall_median"],
        "step_us": ctrl,
        "estimator_step_us": est,
        "exported_step_us": exported,
        "target_step_us": 150.0,
    }
    if a.baseline:
        out["baseline"] = compare_baseline(a.baseline, a.steps, a.repeats)
    if a.out:
        from flexlearn.atomic import write_json_atomic

        write_json_atomic(a.out, out)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
