"""Benchmark: warm-started forward statics of the seed-003 robot along the actuation path, LSE vs shooting.

Prints one JSON object: lse_solves_per_s, shooting_solves_per_s, mean_newton_iters, max_ee_diff_m (largest
end-effector distance between the two solvers along the path), plus the setup. float64. For the one-core
figure run ``OMP_NUM_THREADS=1 python scripts/bench_cpr.py --threads 1``.

Path: seed eq. (39) with the ramp and one period (``--phases`` phase samples, ``--substeps`` warm-start
steps between samples); each solve is warm-started from the previous equilibrium. LSE timing is the median
of ``--repeats`` passes over the path (the machine may be shared); shooting runs one pass. Side by side in
the same run (interleaved passes): the default solver (``backend="auto"``: compiled numba Newton when numba
imports, tangent predictor), the torch path with the fused element kernels (``backend="torch"``,
``torch_fused``), the same without the predictor, and the reference element kernels of ``element.py`` without
the predictor (``backend="reference"``) (``variants``, ``speedup_vs_torch_fused``, ``speedup_vs_reference``).
``--no-shooting`` skips the shooting comparison (minutes per pass) when only the LSE timing is wanted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from flexlearn.physics.lse import CPRModel, actuation_path
from flexlearn.physics.lse.backend import plan
from flexlearn.physics.lse.shooting.forward import ShootingSolver


def _lse_passes(model: CPRModel, loads, dense: torch.Tensor, rest, variants: dict, repeats: int):
    """Warm-started LSE passes along ``dense`` per variant (backend, predictor), interleaved in the same run:
    the default solver (compiled Newton when numba imports), the torch path with fused kernels and the tangent
    predictor, without the predictor, and the reference (flexlearn.lie) element kernels without it.
    Returns ({variant: [seconds per pass]}, {variant: (iterations, (K, 3) end-effector positions [m])})."""

    def lse_pass(backend: str, predictor: bool):
        model.predictor = predictor
        eq = rest
        pos, its = [], []
        t0 = time.perf_counter()
        for th in dense:
            eq = model.solve(th, loads, init=eq, backend=backend)
            its.append(eq.iterations)
            pos.append(eq.position)
        return time.perf_counter() - t0, its, torch.stack(pos).numpy()

    times: dict = {k: [] for k in variants}
    runs = {}
    for _ in range(repeats):
        for name, (backend, pred) in variants.items():
            t, its, pos = lse_pass(backend, pred)
            times[name].append(t)
            runs[name] = (its, pos)
    return times, runs


def _shooting_pass(model: CPRModel, loads, dense: torch.Tensor, steps: int) -> tuple[float, np.ndarray]:
    """Warm-started shooting solves along ``dense``: (seconds, (K, 3) end-effector positions [m])."""
    shoot = ShootingSolver(model, steps=steps)
    sh = shoot.solve(np.zeros(3), loads)
    sh_pos = []
    t0 = time.perf_counter()
    for th in dense:
        sh = shoot.solve(th.numpy(), loads, init=sh)
        sh_pos.append(sh.position)
    return time.perf_counter() - t0, np.stack(sh_pos)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--phases", type=int, default=10)
    ap.add_argument("--substeps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pulley", action="store_true", help="apply the Experiment-II pulley load")
    ap.add_argument("--shooting-steps", type=int, default=40)
    ap.add_argument("--quick", action="store_true", help="default LSE solver only (no side-by-side variants)")
    ap.add_argument("--elements", type=int, default=None, help="LSE elements per rod (default: the config's 4)")
    ap.add_argument("--no-shooting", action="store_true", help="skip the shooting solver (LSE timing only)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    model = CPRModel.from_config(None if args.elements is None else {"rod": {"n_elements": args.elements}})
    loads = model.default_loads(args.pulley)
    _, dense, _ = actuation_path(args.phases, args.substeps)
    rest = model.solve(torch.zeros(3, dtype=torch.float64), loads)

    variants = {
        "default": ("auto", True),
        "torch_fused": ("torch", True),
        "no_predictor": ("torch", False),
        "reference": ("reference", False),
    }
    if args.quick:
        variants = {"default": variants["default"]}
    times, runs = _lse_passes(model, loads, dense, rest, variants, args.repeats)
    model.predictor = True
    default_plan = plan(model, "auto", False)
    iters, positions = runs["default"]
    lse_times = times["default"]
    if args.no_shooting:
        t_shoot, diff = float("nan"), np.full(1, np.nan)
    else:
        t_shoot, sh_pos = _shooting_pass(model, loads, dense, args.shooting_steps)
        diff = np.linalg.norm(positions - sh_pos, axis=-1)

    n = len(dense)
    out = {
        "lse_solves_per_s": n / statistics.median(lse_times),
        "shooting_solves_per_s": n / t_shoot,
        "mean_newton_iters": float(np.mean(iters)),
        "max_newton_iters": int(np.max(iters)),
        "max_ee_diff_m": float(diff.max()),
        "mean_ee_diff_m": float(diff.mean()),
        "n_solves": n,
        "lse_pass_times_s": lse_times,
        "variants": {
            name: {
                "solves_per_s": n / statistics.median(times[name]),
                "mean_newton_iters": float(np.mean(runs[name][0])),
                "max_ee_diff_to_default_m": float(np.linalg.norm(runs[name][1] - positions, axis=-1).max()),
            }
            for name in variants
        },
        "speedup_vs_reference": (
            statistics.median(times["reference"]) / statistics.median(lse_times) if "reference" in times else None
        ),
        "speedup_vs_torch_fused": (
            statistics.median(times["torch_fused"]) / statistics.median(lse_times) if "torch_fused" in times else None
        ),
        "backend": "auto",
        "kernels": "numba" if default_plan.elements == "numba" else "fused",
        "compiled_newton": default_plan.compiled,
        "threads": args.threads,
        "pulley": args.pulley,
        "rods": model.n_rods,
        "elements_per_rod": model.n_elements,
        "shooting_rk4_steps": args.shooting_steps,
        "dtype": "float64",
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
