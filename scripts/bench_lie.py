"""Benchmark flexlearn.lie: per-call time of exp/log/Ad on SO(3) and SE(3), eager vs TorchScript,
batch 1 and 10 000, side by side with PyPose when it is installed (optional). Prints JSON.

    python scripts/bench_lie.py [--repeats 15] [--threads 1] [--dtype float64] [--batches 1 10000]

Times are medians over ``--repeats`` timings of a loop of calls (the loop length adapts so that one
timing takes ≈ 20 ms), in microseconds per call. PyPose works on its own representations (SO3 as a
quaternion (x, y, z, w), se3 as [ρ; φ], Ad applied to a vector); each PyPose row takes the same
data (reordered to PyPose's layout outside the timed call) and returns the same object as the
flexlearn row of that name, conversions to and from matrices included, and says what was timed
("what"). flexlearn has no quaternion-valued SE(3), so PyPose's se3_Ad_apply starts from [t, q].
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Callable

import torch

import flexlearn.lie as L


def _apply_so3_adjoint(R: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Ad_R x = R x on SO(3)."""
    return (R @ x.unsqueeze(-1)).squeeze(-1)


def _apply_se3_adjoint(T: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Ad_T x (6-vector) through the 6×6 matrix."""
    return (L.se3_adjoint(T) @ x.unsqueeze(-1)).squeeze(-1)


def time_call(fn: Callable, args: tuple, repeats: int, target_s: float = 0.02) -> float:
    """Median seconds per call of fn(*args)."""
    for _ in range(5):  # warm-up (TorchScript profiling executor optimises after a few runs)
        fn(*args)
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        dt = time.perf_counter() - t0
        if dt >= target_s or n >= 1 << 16:
            break
        n *= 2
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def inputs(batch: int, dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(batch, 3, generator=g, dtype=dtype)
    w = w / w.norm(dim=-1, keepdim=True) * torch.rand(batch, 1, generator=g, dtype=dtype) * 3.0
    xi = torch.cat([w, torch.randn(batch, 3, generator=g, dtype=dtype)], -1)
    return {
        "w": w,
        "R": L.so3_exp(w),
        "q": L.quat_exp(w),
        "xi": xi,
        "T": L.se3_exp(xi),
        "x3": torch.randn(batch, 3, generator=g, dtype=dtype),
        "x6": torch.randn(batch, 6, generator=g, dtype=dtype),
    }


OPS: dict[str, tuple[Callable, tuple[str, ...]]] = {
    "so3_exp": (L.so3_exp, ("w",)),
    "so3_log": (L.so3_log, ("R",)),
    "quat_exp": (L.quat_exp, ("w",)),
    "quat_log": (L.quat_log, ("q",)),
    "so3_Ad_apply": (_apply_so3_adjoint, ("R", "x3")),
    "se3_exp": (L.se3_exp, ("xi",)),
    "se3_log": (L.se3_log, ("T",)),
    "se3_adjoint": (L.se3_adjoint, ("T",)),
    "se3_Ad_apply": (_apply_se3_adjoint, ("T", "x6")),
}


def pypose_ops(inp: dict[str, torch.Tensor]):
    """PyPose equivalents (same inputs and outputs as the flexlearn op of that name), or None."""
    try:
        import pypose as pp  # optional: the comparison is skipped without it
    except ImportError:
        return None, None
    w, xi = inp["w"], inp["xi"]
    q = inp["q"]
    SO3 = pp.SO3(torch.cat([q[:, 1:], q[:, :1]], -1))  # PyPose stores (x, y, z, w)
    se3 = pp.se3(torch.cat([xi[:, 3:], xi[:, :3]], -1))  # PyPose orders twists [ρ; φ]
    SE3 = se3.Exp()
    ops = {
        "so3_exp": (lambda a: pp.so3(a).Exp().matrix(), (w,), "so3(w).Exp().matrix()"),
        "so3_log": (lambda R: pp.mat2SO3(R, check=False).Log(), (inp["R"],), "mat2SO3(R, check=False).Log()"),
        "quat_exp": (lambda a: pp.so3(a).Exp(), (w,), "so3(w).Exp()"),
        "quat_log": (lambda a: a.Log(), (SO3,), "SO3(q).Log()"),
        "so3_Ad_apply": (lambda a, b: a.Adj(b), (SO3, pp.so3(inp["x3"])), "SO3(q).Adj(so3)"),
        "se3_exp": (lambda a: pp.se3(a).Exp().matrix(), (se3.tensor(),), "se3(xi).Exp().matrix()"),
        "se3_log": (lambda T: pp.mat2SE3(T, check=False).Log(), (inp["T"],), "mat2SE3(T, check=False).Log()"),
        "se3_Ad_apply": (lambda a, b: a.Adj(b), (SE3, pp.se3(inp["x6"])), "SE3([t, q]).Adj(se3)"),
    }
    return ops, pp.__version__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 10000])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)

    scripted = {name: torch.jit.script(fn) for name, (fn, _) in OPS.items()}
    results = []
    pp_version = None
    for batch in args.batches:
        inp = inputs(batch, dtype)
        for name, (fn, keys) in OPS.items():
            a = tuple(inp[k] for k in keys)
            torch.testing.assert_close(scripted[name](*a), fn(*a), rtol=0, atol=0)
            for mode, f in [("eager", fn), ("script", scripted[name])]:
                results.append(
                    {
                        "op": name,
                        "batch": batch,
                        "impl": f"flexlearn.{mode}",
                        "us_per_call": round(1e6 * time_call(f, a, args.repeats), 2),
                    }
                )
        pp_ops, pp_version = pypose_ops(inp)
        if pp_ops is not None:
            for name, (f, a, what) in pp_ops.items():
                results.append(
                    {
                        "op": name,
                        "batch": batch,
                        "impl": "pypose.eager",
                        "what": what,
                        "us_per_call": round(1e6 * time_call(f, a, args.repeats), 2),
                    }
                )
    meta = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "dtype": args.dtype,
        "repeats": args.repeats,
        "statistic": "median",
        "unit": "microseconds per call",
        "pypose": pp_version,
    }
    print(json.dumps({"meta": meta, "results": results}, indent=1))


if __name__ == "__main__":
    main()
