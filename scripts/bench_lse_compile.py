"""Benchmark: cold compile time of the LSE forward-statics kernels and the solve speed, this tree against another.

Prints one JSON object. For each tree (``--base``, e.g. an export of the last commit: ``git archive HEAD | tar -x -C
/tmp/base``, and this checkout) and each of ``--repeats`` rounds (the order of the trees alternates), a fresh
process with an empty ``NUMBA_CACHE_DIR`` imports :mod:`flexlearn.physics.lse` and runs the ``lse`` warm-up of
``flexlearn-warmup`` (:data:`flexlearn.apps.kernels.GROUPS`), which compiles exactly what ``flexlearn-cpr`` loads:
``compile_s`` is the warm-up's wall time (import excluded), ``compile_cpu_s`` its CPU time with the forked
compile helper's (:mod:`flexlearn.physics.lse.compiled.prebuild`), ``process_s`` the whole process. Then, with the
kernels cached, processes alternating between the trees solve ``flexlearn-cpr``'s two experiments (default robot,
``--substeps`` warm-start steps, 10 phases; no shooting baseline) ``--passes`` times each: ``solve_ms`` is the
median wall time of one warm-started solve, ``solve_cpu_ms`` its CPU time (steadier on a shared machine);
``--repeats 0`` compiles without timing it (solve speed only). Every solve's end-effector pose, nodes and slopes
are compared between the trees (``bitwise_equal``, ``max_abs_diff``). Ratios are new / base (``compile_ratio``
< 1: faster compile) and base / new (``solve_speed_ratio``, ``solve_cpu_speed_ratio`` > 1: faster solves).
Single-threaded (``OMP_NUM_THREADS=1``); the machine may be shared: compare the ratios of one run, not absolute
times across runs.

    OMP_NUM_THREADS=1 python scripts/bench_lse_compile.py --base /tmp/base --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child_compile() -> None:
    t0 = time.perf_counter()
    import flexlearn.physics.lse  # noqa: F401  (lazy: the child times this import)
    from flexlearn.apps.kernels import (
        GROUPS,
    )  # lazy: the child times its own imports; the parent imports no tree's flexlearn

    t1 = time.perf_counter()
    c1 = _cpu_s()
    GROUPS["lse"].warm()
    print(json.dumps({"import_s": t1 - t0, "compile_s": time.perf_counter() - t1, "compile_cpu_s": _cpu_s() - c1}))


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the compile's forked helper)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _child_solve(passes: int, substeps: int, out: str) -> None:
    import numpy as np  # lazy: the child times its own imports; the parent imports no tree's flexlearn
    import torch  # lazy: the child times its own imports; the parent imports no tree's flexlearn
    from omegaconf import OmegaConf  # lazy: the child times its own imports; the parent imports no tree's flexlearn

    from flexlearn.config import (
        to_plain_dict,
    )  # lazy: the child times its own imports; the parent imports no tree's flexlearn
    from flexlearn.physics.lse import (
        CPRModel,
    )  # lazy: the child times its own imports; the parent imports no tree's flexlearn
    from flexlearn.physics.lse.inverse import (
        actuation_path,
    )  # lazy: the child times its own imports; the parent imports no tree's flexlearn

    cfg = to_plain_dict(OmegaConf.load(ROOT / "flexlearn" / "conf" / "cpr" / "default.yaml"), "cpr")
    model = CPRModel.from_config(cfg)
    dense = actuation_path(10, substeps)[1]
    times, cpu, states = [], [], []
    for p in range(passes):
        for pulley in (False, True):
            loads = model.default_loads(pulley)
            eq = model.solve(torch.zeros(dense.shape[-1], dtype=torch.float64), loads)
            t0, c0 = time.perf_counter(), time.process_time()
            for th in dense:
                eq = model.solve(th, loads, init=eq)
                if p == 0:
                    states.append(
                        np.concatenate(
                            [eq.g_ee.reshape(-1).numpy(), eq.nodes.reshape(-1).numpy(), eq.beta.reshape(-1).numpy()]
                        )
                    )
            times.append((time.perf_counter() - t0) / len(dense))
            cpu.append((time.process_time() - c0) / len(dense))
    np.save(out, np.stack(states))
    print(json.dumps({"solve_ms": [1e3 * t for t in times], "solve_cpu_ms": [1e3 * t for t in cpu]}))


def _run(tree: Path, args: list[str], cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=cache, OMP_NUM_THREADS="1")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args],
        env=env,
        cwd=str(tree),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child in {tree} failed:\n{proc.stderr[-3000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["process_s"] = time.perf_counter() - t0
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="the other tree (a checkout or export; required)")
    ap.add_argument("--repeats", type=int, default=2, help="cold compiles per tree (alternating)")
    ap.add_argument("--passes", type=int, default=3, help="passes over the path per solve process")
    ap.add_argument("--solve-rounds", type=int, default=2, help="solve processes per tree (alternating)")
    ap.add_argument("--substeps", type=int, default=8)
    ap.add_argument("--child", choices=("compile", "solve"))
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if a.child == "compile":
        return _child_compile()
    if a.child == "solve":
        return _child_solve(a.passes, a.substeps, a.out)
    if a.base is None:
        ap.error("--base is required")
    trees = {"base": a.base.resolve(), "new": ROOT}
    tmp = Path(tempfile.mkdtemp(prefix="bench_lse_compile_"))
    caches = {}
    compile_s: dict = {k: [] for k in trees}
    compile_cpu_s: dict = {k: [] for k in trees}
    process_s: dict = {k: [] for k in trees}
    for r in range(a.repeats):
        for name in ("base", "new") if r % 2 == 0 else ("new", "base"):
            caches[name] = tempfile.mkdtemp(dir=tmp)
            res = _run(trees[name], ["--child", "compile"], caches[name])
            compile_s[name].append(res["compile_s"])
            compile_cpu_s[name].append(res["compile_cpu_s"])
            process_s[name].append(res["process_s"])
    for name, tree in trees.items():  # --repeats 0: compile (unmeasured) for the solve processes
        if name not in caches:
            caches[name] = tempfile.mkdtemp(dir=tmp)
            _run(tree, ["--child", "compile"], caches[name])
    solve_ms: dict = {k: [] for k in trees}
    solve_cpu: dict = {k: [] for k in trees}
    for r in range(a.solve_rounds):
        for name in ("base", "new") if r % 2 == 0 else ("new", "base"):
            res = _run(
                trees[name],
                [
                    "--child",
                    "solve",
                    "--passes",
                    str(a.passes),
                    "--substeps",
                    str(a.substeps),
                    "--out",
                    str(tmp / f"{name}.npy"),
                ],
                caches[name],
            )
            solve_ms[name].extend(res["solve_ms"])
            solve_cpu[name].extend(res["solve_cpu_ms"])
    import numpy as np  # lazy: the children time their imports, numpy among them

    sb, sn = np.load(tmp / "base.npy"), np.load(tmp / "new.npy")
    same_shape = sb.shape == sn.shape
    med = {k: statistics.median(v) for k, v in solve_ms.items()}
    cpu_med = {k: statistics.median(v) for k, v in solve_cpu.items()}
    cmed = {k: statistics.median(v) for k, v in compile_s.items() if v}
    print(
        json.dumps(
            {
                "compile_s": compile_s,
                "compile_cpu_s": compile_cpu_s,
                "process_s": process_s,
                "compile_median_s": cmed,
                "compile_ratio": cmed["new"] / cmed["base"] if cmed else None,
                "solve_ms_median": med,
                "solve_speed_ratio": med["base"] / med["new"],
                "solve_cpu_ms_median": cpu_med,
                "solve_cpu_speed_ratio": cpu_med["base"] / cpu_med["new"],
                "solves_compared": int(sb.shape[0]) if same_shape else None,
                "bitwise_equal": bool(same_shape and np.array_equal(sb, sn)),
                "max_abs_diff": float(np.abs(sb - sn).max()) if same_shape else None,
                "setup": {
                    "base": str(trees["base"]),
                    "substeps": a.substeps,
                    "passes": a.passes,
                    "solve_rounds": a.solve_rounds,
                    "threads": 1,
                },
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
