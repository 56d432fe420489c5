"""Benchmark ``CosseratRod.accurate_dt``: the closed-form stiffness matrix and the cache against the autograd Hessian
it replaced, in the same process, at N = 10, 20, 40 (and any ``--n``). Prints JSON.

    python scripts/bench_accurate_dt.py [--n 10 20 40] [--repeats 5]

Per N: ``autograd_s`` (the former computation: the autograd Hessian of the elastic energy, 6N backward passes,
then the same eigenproblem and :func:`~flexlearn.physics.cosserat.implicit.accuracy_dt`), ``closed_form_s`` (a
first call on a new rod: :func:`~flexlearn.physics.cosserat.modes.clamped_frequencies`), ``cached_s`` (a repeated
call), each the minimum over ``--repeats``; ``speedup_first`` and ``speedup_cached`` are the ratios of autograd
to the other two; ``dt_rel_diff`` the relative difference of the two steps (round-off). The rod is PyElastica's
cantilever (L = 1 m, r = 0.02 m, E = 1e6 Pa, G = E/3, ρ = 1000 kg/m³).
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from flexlearn.physics.cosserat import Clamp, CosseratRod, Material
from flexlearn.physics.cosserat.implicit import accuracy_dt
from flexlearn.physics.cosserat.modes import autograd_frequencies


def _rod(n: int) -> CosseratRod:
    return CosseratRod.circular(1.0, 0.02, Material(1000.0, 1e6, shear_modulus=1e6 / 3), n)


def _autograd_dt(rod: CosseratRod) -> float:
    """The former accurate_dt: autograd Hessian, eigenvalues, the step of the 4th mode at rtol 1e-3."""
    st = rod.straight_state(Clamp())
    ctx = rod.context((), torch.float64)
    omega = autograd_frequencies(ctx, st.rotations[:, 0], st.positions)[0]
    return accuracy_dt(float(omega[3]), 1e-3, 0.25)


def _best(fn, repeats: int) -> tuple[float, float]:
    """(fastest wall time [s] of ``fn()``, its value)."""
    best, value = float("inf"), 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10, 20, 40], help="elements per rod")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    report: dict = {"machine": platform.processor() or platform.machine(), "torch": torch.__version__, "cases": {}}
    for n in args.n:
        t_auto, dt_auto = _best(lambda n=n: _autograd_dt(_rod(n)), args.repeats)
        t_first, dt_new = _best(lambda n=n: _rod(n).accurate_dt(), args.repeats)
        rod = _rod(n)
        rod.accurate_dt()
        t_cached, _ = _best(rod.accurate_dt, args.repeats)
        report["cases"][f"N={n}"] = {
            "autograd_s": t_auto,
            "closed_form_s": t_first,
            "cached_s": t_cached,
            "speedup_first": t_auto / t_first,
            "speedup_cached": t_auto / t_cached,
            "dt": dt_new,
            "dt_rel_diff": abs(dt_new - dt_auto) / dt_auto,
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
