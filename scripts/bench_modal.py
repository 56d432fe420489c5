#!/usr/bin/env python
"""Benchmarks of the flexible-link code (seed 000): prints one JSON object.

* ``estimator_step_us``: one runtime step of the two-link reduced-model estimator
  (5 IMUs → acceleration compensation → complementary filters → joint states → modal coordinates →
  end-effector pose), TorchScript, 1 thread (also without the elastic / without any compensation); median over
  repeats of the wall time and of the thread CPU time (the latter is robust to other processes on a shared
  machine). Target ≤ 100 µs.
* ``mode_grid_s``: the 50 × 50 mode-count grids of Fig. 6 (both scenarios), target ≤ 10 s each.
* ``reference_20_adds_us``: a scripted loop of 20 scalar adds, to normalise for machine load.

Usage: ``python scripts/bench_modal.py [--repeats 9] [--steps 2000] [--skip-grid]``
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from _timing import time_per_call  # noqa: E402  (scripts/ is on sys.path when run)

from flexlearn.physics.modal import (
    EstimatorOptions,
    FlexibleArmEstimator,
    FlexibleLink,
    ModeSelectionConfig,
    select_modes,
)


def _ref(x: torch.Tensor) -> torch.Tensor:
    for _ in range(20):
        x = x + 1.0
    return x


def _time(fn, args, steps: int, repeats: int) -> dict:
    return time_per_call(lambda k: fn(*args), steps, repeats)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--skip-grid", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    links = [FlexibleLink(74300.0, 5.37, 4.5, 30.0), FlexibleLink(74300.0, 5.37, 3.55, 10.0)]
    pos = [[0.5625, 3.9375], [0.44375, 1.33125, 3.10625]]  # IMUs 1, 4 | 5, 6, 8 of the seed's DLFM
    est = torch.jit.script(FlexibleArmEstimator.build(links, pos, [1, 2]))
    g = torch.Generator().manual_seed(0)
    acc = torch.tensor([[0.0, 0.0, 9.81]] * 5, dtype=torch.float64) + 0.05 * torch.randn(
        5, 3, generator=g, dtype=torch.float64
    )
    gyr = 0.01 * torch.randn(5, 3, generator=g, dtype=torch.float64)
    ref = torch.jit.script(_ref)
    out = {
        "threads": torch.get_num_threads(),
        "loadavg": os.getloadavg(),
        "estimator_step_us": _time(est.step, (acc, gyr), a.steps, a.repeats),
        "estimator_forward_us": _time(est, (acc, gyr), a.steps, a.repeats),
        "estimator_step_rigid_compensation_only_us": _time(
            torch.jit.script(FlexibleArmEstimator.build(links, pos, [1, 2], EstimatorOptions(elastic=False))).step,
            (acc, gyr),
            a.steps,
            a.repeats,
        ),
        "estimator_step_no_compensation_us": _time(
            torch.jit.script(FlexibleArmEstimator.build(links, pos, [1, 2], EstimatorOptions(compensate=False))).step,
            (acc, gyr),
            a.steps,
            a.repeats,
        ),
        "reference_20_adds_us": _time(ref, (torch.zeros(5, dtype=torch.float64),), a.steps, a.repeats),
        "target_step_us": 100.0,
    }
    if not a.skip_grid:
        cfg = ModeSelectionConfig()
        EI = torch.logspace(4, 6, 50, dtype=torch.float64)
        rA = torch.linspace(1.0, 20.0, 50, dtype=torch.float64)
        L = torch.linspace(1.0, 8.0, 50, dtype=torch.float64)
        M = torch.linspace(0.0, 60.0, 50, dtype=torch.float64)
        t0 = time.perf_counter()
        select_modes(FlexibleLink(EI[:, None], rA[None, :], 4.5, 20.0), cfg)
        t1 = time.perf_counter()
        select_modes(FlexibleLink(74300.0, 5.37, L[:, None], M[None, :]), cfg)
        t2 = time.perf_counter()
        out["mode_grid_s"] = {"EI_x_rhoA": t1 - t0, "L_x_Mp": t2 - t1, "target_s": 10.0}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
