"""CSG inverse-statics benchmark: J. Till's C++ reference (ContinuumRobotExamples, 01_Statics/03_CSG_IK_Speedup)
against our LSE inverse pose statics on the same robot and task, in one run.

C++: variants 2, 3 and 5 compiled with g++ -O3 and Eigen into a temporary directory and run unchanged (their
printed "Solution rate"); the two headers the anchor's Library/ lacks (eigenmatrixtypes.h: Eigen include and
``using namespace Eigen``; numericaldifferentiation.h: the forward-difference Jacobian of the library's
non-analytic Levenberg–Marquardt) are written here. For the shapes, a copy of variant 5 with M = 200 and the
solution printed after every solve (outside the timed loop; no other change) gives the reference rod
lengths and base wrenches along the 200-pose path; the rods are integrated from them with the reference's own
RK4 (N = 40 points) in numpy.

LSE: ``flexlearn/conf/cpr/csg.yaml`` (geometry, material, loads from the same sources), cold start at
p_E = (0, 0, 0.4), then (0, 0.02, 0.48), then the reference's path (±1 mm in y and z per solve, 100 out,
100 back), warm-started, one compiled call for the path; repeated ``--repeats`` times (median); the same path by
plain Newton (``chord_keep=0``, 3-point tangents: a fresh factorisation every step) as the same-run baseline
of the solver options (``--no-plain`` skips it). Batched: 1,000
independent poses (random in the path's box, ``--batch-seed``; median of 3 passes) by
:meth:`PoseStatics.solve_batch` (nearest-neighbour chain from the start solution, each pose started from the fit
of its solved neighbours), one core, and beside it the same chain with every pose started from the previous
solution (``batched_chain_only_*``, ``fit=False``); the same poses solved by the reference (variant 5's solver, each
warm-started from the previous solution as in its own loop) in their given order and in our chain's order, with
its rate, failures and how many of its solutions are ours (``cpp_batch_*``: the shooting problem has several
equilibria here, and from a far warm start it finds others). Shooting baseline: :func:`shoot_pose` on the first
``--shooting`` path poses (warm-started).

    OMP_NUM_THREADS=1 python scripts/bench_csg.py --anchor ../shared/anchors/till_csg_ik_speedup

``--baseline TREE`` (a checkout of an earlier version, e.g. ``git archive HEAD | tar -x -C /tmp/base``): the LSE
path and batch rates of that tree's solver and of this one, each in a child process importing its tree's
``flexlearn``, alternated ``--baseline-rounds`` times (medians), with the ratio and the largest difference of
their path lengths in ``baseline``.

Rates side by side: the C++ variants (one run each) and the LSE path (median of ``--repeats`` passes) are timed
alternately ``--rounds`` times; ``lse_vs_cpp`` is the median over rounds of the LSE rate over the fastest variant's
in the same round (``lse_vs_cpp_rounds`` lists them), so that a burst of load from another process falls on one
round rather than on one side of the ratio.

Prints JSON. Skips the C++ part (with the reason) without g++ or Eigen.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

EIGEN_DIRS = ("/usr/include/eigen3", "/usr/local/include/eigen3")
SHIM_TYPES = (
    "#ifndef EIGENMATRIXTYPES_H\n#define EIGENMATRIXTYPES_H\n#include <Eigen/Dense>\nusing namespace Eigen;\n#endif\n"
)
SHIM_DIFF = """#ifndef NUMERICALDIFFERENTIATION_H
#define NUMERICALDIFFERENTIATION_H
#include "eigenmatrixtypes.h"
namespace ContinuumRobotLibrary{
typedef VectorXd(ObjFunc)(VectorXd);
template<ObjFunc f>
inline void getJacobian(MatrixXd& J, VectorXd& y, VectorXd& r, double incr_scale = 1e-8, double incr_floor = 1e-11){
    for(int i = 0; i < y.size(); i++){
        double temp = y(i);
        double scaled = temp*incr_scale;
        double incr = (scaled > incr_floor || scaled < -incr_floor) ? scaled : incr_floor;
        y(i) += incr;
        J.col(i) = (f(y) - r) / incr;
        y(i) = temp;
    }
}
}
#endif
"""
DUMP_FN = """static void dump_solution(const Vector3d& p, const VectorXd& y){
    std::printf("SOL %.17g %.17g %.17g", p(0), p(1), p(2));
    for(int i = 0; i < y.size(); i++) std::printf(" %.17g", y(i));
    std::printf("\\n");
}
int main(int, char**){"""
SOLVE = "guess = solveLevenbergMarquardt<shootingFunction, jacobianFunction>(guess, 1e-6, 500, 1e-4, 0.5);"
# variant 5's timed loop, made to solve the platform positions listed in argv[1] (x y z per line) in that order,
# each warm-started from the previous solution as the reference's own loop does (its first residual reuses the
# previous solve's integration); a solve that exceeds the iteration limit is counted and the next one starts
# from the last solution; argv[2] (any) prints, after the timing, each pose's failure flag, position and solution
BATCH_LOOP = (
    """    std::vector<Vector3d> targets;
    { std::ifstream in(argv[1]); double x, y_, z; while(in >> x >> y_ >> z) targets.push_back(Vector3d(x, y_, z)); }
    const int M = int(targets.size());
    MatrixXd sols(36, M);
    std::vector<int> failed(M, 0);
    int failures = 0;
    bool fresh = false;
    std::clock_t start = std::clock();
    for(int i = 0; i < M; i++){
        integrate = fresh;
        fresh = false;
        pE = targets[i];
        try{
            """
    + SOLVE
    + """
        }catch(...){
            failures++;
            failed[i] = 1;
            fresh = true;
        }
        sols.col(i) = guess;
    }
    double duration = ( std::clock() - start ) / double(CLOCKS_PER_SEC);
    std::printf("Solution rate: %.17gHz\\nFailures: %d\\n", M/duration, failures);
    if(argc > 2) for(int i = 0; i < M; i++){
        std::printf("SOL %d %.17g %.17g %.17g", failed[i], targets[i](0), targets[i](1), targets[i](2));
        for(int k = 0; k < 36; k++) std::printf(" %.17g", sols(k, i));
        std::printf("\\n");
    }
    return 0;
}
"""
)


def _compile(src: Path, out: Path, inc: list[Path]) -> str:
    cmd = ["g++", "-O3", "-march=native", "-DNDEBUG", "-std=c++17", *[f"-I{p}" for p in inc], str(src), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return "" if r.returncode == 0 else r.stderr[-2000:]


def build_cpp(anchor: Path, work: Path, rates_too: bool = True) -> dict:
    """Compile variants 2, 3, 5 (``rates_too``) into ``work`` and run the shape dump: the executables, compiler
    errors and the reference solutions."""
    if shutil.which("g++") is None:
        return {"skipped": "g++ not found"}
    eigen = next((Path(d) for d in EIGEN_DIRS if (Path(d) / "Eigen" / "Dense").is_file()), None)
    if eigen is None:
        return {"skipped": "Eigen not found (apt install libeigen3-dev)"}
    shim = work / "shim"
    shim.mkdir()
    (shim / "eigenmatrixtypes.h").write_text(SHIM_TYPES)
    (shim / "numericaldifferentiation.h").write_text(SHIM_DIFF)
    inc = [shim, anchor / "Library", eigen]
    exes, errors = {}, {}
    for v in (2, 3, 5) if rates_too else ():
        exe = work / f"cpp{v}"
        err = _compile(anchor / f"Cpp_{v}" / "main.cpp", exe, inc)
        if err:
            errors[f"cpp{v}"] = err
        else:
            exes[f"cpp{v}"] = exe
    src = (anchor / "Cpp_5" / "main.cpp").read_text()
    dump = src.replace("const int M = 50000;", "const int M = 200;").replace("int main(int, char**){", DUMP_FN)
    dump = dump.replace(SOLVE, SOLVE + " dump_solution(pE, guess);")
    (work / "dump.cpp").write_text(dump)
    err = _compile(work / "dump.cpp", work / "dump", inc)
    sols = []
    if not err:
        out = subprocess.run([str(work / "dump")], capture_output=True, text=True, timeout=600, check=False).stdout
        sols = [np.array([float(x) for x in line.split()[1:]]) for line in out.splitlines() if line.startswith("SOL")]
    else:
        errors["dump"] = err
    head = src.split("//Benchmark speed test")[0]
    batch = "#include <fstream>\n#include <vector>\n" + head.replace(
        "int main(int, char**){", "int main(int argc, char** argv){"
    )
    (work / "batch.cpp").write_text(batch + BATCH_LOOP)
    err = _compile(work / "batch.cpp", work / "batch", inc)
    if err:
        errors["batch"] = err
    return {"exes": exes, "errors": errors, "solutions": sols, "batch_exe": None if err else work / "batch"}


def _printed_rate(out: str) -> float | None:
    """The "Solution rate" [solves/s] a reference executable printed (None when it printed none)."""
    m = re.search(r"Solution rate:\s*([0-9.eE+-]+)", out)
    return float(m.group(1)) if m else None


def cpp_rates(exes: dict) -> dict:
    """One run of each compiled variant: its printed "Solution rate" [solves/s] (None when it printed none)."""
    rates = {}
    for name, exe in exes.items():
        out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, check=False).stdout
        rates[name] = _printed_rate(out)
    return rates


def cpp_batch(exe: Path, points: np.ndarray, work: Path) -> dict:
    """The reference (variant 5's solver) on the platform positions ``points`` (P, 3), in the given order, each
    warm-started from the previous solution: its solves/s, failures (iteration limit), the per-pose failure
    flags (P,) and solutions (P, 36: base forces and moments, then the six lengths); ``error`` instead of the last
    two when it did not finish or printed too few."""
    listing = work / "batch_points.txt"
    np.savetxt(listing, points, fmt="%.17g")
    limit = 60 + 0.2 * len(points)  # s: ≈ 13× the slowest rate seen (66/s, poses in random order)
    try:
        out = subprocess.run(
            [str(exe), str(listing), "dump"], capture_output=True, text=True, timeout=limit, check=False
        ).stdout
    except subprocess.TimeoutExpired:
        return {"solves_per_s": None, "failures": None, "error": f"not finished within {limit:.0f} s"}
    fails = re.search(r"Failures:\s*(\d+)", out)
    res: dict = {"solves_per_s": _printed_rate(out), "failures": int(fails.group(1)) if fails else None}
    rows = [line.split() for line in out.splitlines() if line.startswith("SOL")]
    if len(rows) != len(points) or any(len(row) != 41 for row in rows):
        res["error"] = f"printed {len(rows)} solutions for {len(points)} poses"
        return res
    res["failed"] = np.array([row[1] == "1" for row in rows], dtype=bool)
    res["solutions"] = np.array([[float(x) for x in row[5:]] for row in rows])
    return res


def rounds_vs_cpp(lse: dict, exes: dict, rounds: int, repeats: int) -> dict:
    """C++ variants and the LSE path timed alternately ``rounds`` times in this process, so that a burst of load
    from elsewhere falls on one round of both rather than on one side: per-variant and LSE medians, and the
    median over rounds of LSE / fastest variant of the same round."""
    per_round, lse_rates, ratios = [], [], []
    for _ in range(rounds):
        rates = {k: v for k, v in cpp_rates(exes).items() if v}
        rate = _path_rate(lse["ps"], lse["poses"], lse["start"], repeats)[0]
        per_round.append(rates)
        lse_rates.append(rate)
        if rates:
            ratios.append(rate / max(rates.values()))
    names = sorted({k for r in per_round for k in r})
    medians = {k: float(np.median([r[k] for r in per_round if k in r])) for k in names}
    out = {
        "rounds": rounds,
        "lse_solves_per_s": float(np.median(lse_rates)),
        "lse_rounds_solves_per_s": lse_rates,
        "cpp_variant_solves_per_s": medians,
    }
    if ratios:
        out["cpp_solves_per_s"] = max(medians.values())
        out["lse_vs_cpp"] = float(np.median(ratios))
        out["lse_vs_cpp_rounds"] = ratios
    return out


def _hat(w):
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])


def cpp_rod_points(p0: np.ndarray, n0, m0xy, length: float, kd: np.ndarray, n_pts: int = 40) -> np.ndarray:
    """The reference's rod from its base values: RK4 with N = 40 points, R(0) = I (as its cosseratRodOde / ode4)."""
    kse_inv = 1.0 / kd[3:]
    kbt_inv = 1.0 / kd[:3]

    def f(y):
        R = y[3:12].reshape(3, 3, order="F")
        n, m = y[12:15], y[15:18]
        v = kse_inv * (R.T @ n)
        v[2] += 1.0
        u = kbt_inv * (R.T @ m)
        ps = R @ v
        return np.concatenate([ps, (R @ _hat(u)).reshape(-1, order="F"), np.zeros(3), -np.cross(ps, n)])

    y = np.concatenate([p0, np.eye(3).reshape(-1, order="F"), n0, m0xy, [0.0]])
    ds = length / (n_pts - 1)
    pts = [y[:3].copy()]
    for _ in range(n_pts - 1):
        k1 = f(y)
        k2 = f(y + ds / 2 * k1)
        k3 = f(y + ds / 2 * k2)
        k4 = f(y + ds * k3)
        y = y + ds / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        pts.append(y[:3].copy())
    return np.array(pts)


def path_poses() -> np.ndarray:
    """The reference's 200 platform poses: from (0, 0.02, 0.48), +1 mm in y and z 100 times, then back; level."""
    p = np.array([0.0, 0.02, 0.48])
    out = []
    for i in range(200):
        p = p + (0.001 if i % 200 < 100 else -0.001) * np.array([0.0, 1.0, 1.0])
        g = np.eye(4)
        g[:3, 3] = p
        out.append(g)
    return np.array(out)


def _pose(p) -> np.ndarray:
    g = np.eye(4)
    g[:3, 3] = p
    return g


def _rate(solve, count: int, repeats: int):
    """Median solves/s of ``repeats`` calls of ``solve()`` that each solve ``count`` poses, and the last result.
    Callers make one untimed call first: the first passes of a process run up to ≈ 30 % slower (first touch of
    the work arrays, which the allocator serves from fresh pages until it adapts), and the C++ reference
    allocates nothing per solve."""
    times, res = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        res = solve()
        times.append(time.perf_counter() - t)
    return count / float(np.median(times)), res


def _path_rate(ps, poses, start, repeats: int):
    """:func:`_rate` of the warm-started path."""
    return _rate(lambda: ps.solve_path(poses, start), len(poses), repeats)


def lse_run(n_elements: int, repeats: int, tol: float, plain: bool = False) -> dict:
    """The LSE path (default solver: kept factorisations, sized quadrature) and, with ``plain``, the same path by
    plain Newton (a fresh 3-point tangent every step) in the same process, just before."""
    from omegaconf import OmegaConf  # lazy: --baseline child (older tree)

    from flexlearn.physics.lse import CPRModel  # lazy: --baseline child (older tree)

    cfg = OmegaConf.load(Path(__file__).resolve().parents[1] / "flexlearn/conf/cpr/csg.yaml")
    cfg.rod.n_elements = n_elements
    model = CPRModel.from_config(cfg)
    ps = model.pose_statics(tol=tol)
    t0 = time.perf_counter()
    st0 = ps.solve(_pose([0, 0, 0.4]))
    st1 = ps.solve(_pose([0, 0.02, 0.48]), st0)
    poses = path_poses()
    ps.solve_path(poses[:2], st1)  # compile (or load) the path kernel
    first = time.perf_counter() - t0
    ps.solve_path(poses, st1)  # untimed warm-up pass (see _rate)
    out = {"model": model, "ps": ps, "start": st1, "poses": poses, "first_call_s": first, "kd": ps.kd[0]}
    if plain:
        ps_plain = model.pose_statics(tol=tol, chord_keep=0.0, tiny_rotation=0.0)
        ps_plain.solve_path(poses, st1)
        out["plain_solves_per_s"], res_plain = _path_rate(ps_plain, poses, st1, repeats)
        out["plain_iters"] = float(res_plain.iterations.mean())
    out["solves_per_s"], out["path"] = _path_rate(ps, poses, st1, repeats)
    if plain:
        out["plain_max_length_diff_m"] = float(np.abs(res_plain.lengths - out["path"].lengths).max())
    return out


def compare(lse: dict, sols: list, n_elements: int) -> dict:
    """Rod shapes (equal fractions of arc length) and lengths vs the reference, over the path poses."""
    if len(sols) < 202:
        return {}
    ps, path, poses = lse["ps"], lse["path"], lse["poses"]
    p0 = ps.base[:, :3, 3]
    k = max(1, int(np.ceil(39 / n_elements)))
    shape, dlen, closure = 0.0, 0.0, 0.0
    for i in range(200):
        sol = sols[2 + i]
        assert np.allclose(sol[:3], poses[i][:3, 3], atol=1e-9)
        y = sol[3:]
        pts = ps.rod_points(poses[i], path.g_int[i], path.beta[i], path.psi[i], path.lengths[i], 39 * k)
        for r in range(6):
            ref = cpp_rod_points(p0[r], y[5 * r : 5 * r + 3], y[5 * r + 3 : 5 * r + 5], y[30 + r], lse["kd"])
            ours = pts[r][np.round(np.linspace(0, pts.shape[1] - 1, 40)).astype(int)]
            target = poses[i][:3, 3] + ps.tip_local[r, :3, 3]
            closure = max(closure, float(np.linalg.norm(ref[-1] - target)))
            shape = max(shape, float(np.linalg.norm(ours - ref, axis=1).max()))
            dlen = max(dlen, abs(float(path.lengths[i][r]) - y[30 + r]))
    return {"max_shape_diff_m": shape, "max_length_diff_m": dlen, "cpp_max_tip_closure_m": closure}


def shooting(lse: dict, count: int, sols: list) -> dict:
    """Our shooting baseline (:func:`shoot_pose`, RK4 with the reference's 39 steps, finite-difference Newton to a
    sum of squares ≤ 1e-12) warm-started along the first ``count`` path poses; lengths vs the LSE path (and the
    reference when its solutions are there)."""
    from flexlearn.physics.lse.shooting import pose as shooting_pose  # lazy: --baseline child (older tree)

    model = lse["model"]
    base, att, kd = model.base_pose0.numpy(), model.tip_local.numpy(), model.stiffness().numpy()
    x, _, _ = shooting_pose.shoot_pose(base, att, _pose([0, 0, 0.4]), kd)
    x, _, _ = shooting_pose.shoot_pose(
        base, att, _pose([0, 0.02, 0.48]), kd, x, shooting_pose.ShootingSettings(tol=1e-12)
    )
    t = time.perf_counter()
    diff, diff_cpp = 0.0, 0.0
    for i in range(count):
        x, lengths, _ = shooting_pose.shoot_pose(
            base, att, lse["poses"][i], kd, x, shooting_pose.ShootingSettings(tol=1e-12)
        )
        diff = max(diff, float(np.abs(lengths - lse["path"].lengths[i]).max()))
        if len(sols) >= 202:
            diff_cpp = max(diff_cpp, float(np.abs(lengths - sols[2 + i][3 + 30 :]).max()))
    out = {"shooting_solves_per_s": count / (time.perf_counter() - t), "shooting_vs_lse_max_length_diff_m": diff}
    if len(sols) >= 202:
        out["shooting_vs_cpp_max_length_diff_m"] = diff_cpp
    return out


def batched(
    lse: dict, n: int, seed: int = 0, repeats: int = 3, cpp_exe: Path | None = None, work: Path | None = None
) -> dict:
    """``n`` random poses in the path's box solved by :meth:`PoseStatics.solve_batch`; the rate is the median of
    ``repeats`` passes (one pass is ≈ 1 s, so a burst of load would decide a single one). With ``cpp_exe`` (the
    reference's batch build, :func:`build_cpp`) also the reference on the same poses (:func:`batched_vs_cpp`;
    its files in ``work``)."""
    rng = np.random.default_rng(seed)
    # the reference path's neighbourhood: y, z from its range (0.02 … 0.12, 0.48 … 0.58 m), x within ±1 cm
    pts = np.stack([rng.uniform(-0.01, 0.01, n), rng.uniform(0.02, 0.12, n), rng.uniform(0.48, 0.58, n)], 1)
    poses = np.array([_pose(p) for p in pts])
    ps = lse["ps"]
    ps.solve_batch(poses, lse["start"])  # compile (or load) and an untimed warm-up pass (see _rate)
    rate, out = _rate(lambda: ps.solve_batch(poses, lse["start"]), n, repeats)
    res = {
        "batched_solves_per_s": rate,
        "batched_converged": int(out.converged.sum()),
        "batched_poses": n,
        "batched_seed": seed,
        "batched_mean_newton_iters": float(out.iterations.mean()),
    }
    if "fit" not in inspect.signature(ps.solve_batch).parameters:  # an earlier tree (--baseline)
        return res
    ps.solve_batch(poses, lse["start"], fit=False)
    rate_chain, chain = _rate(lambda: ps.solve_batch(poses, lse["start"], fit=False), n, repeats)
    both = out.converged & chain.converged
    res.update(
        {
            "batched_fit_started": int(out.fit_started.sum()),
            "batched_chain_only_solves_per_s": rate_chain,
            "batched_chain_only_converged": int(chain.converged.sum()),
            "batched_chain_only_mean_newton_iters": float(chain.iterations.mean()),
            "batched_vs_chain_only": rate / rate_chain,
            "batched_vs_chain_only_max_length_diff_m": float(np.abs(out.lengths - chain.lengths)[both].max())
            if both.any()
            else None,
        }
    )
    if cpp_exe is not None and work is not None:
        res.update(batched_vs_cpp(cpp_exe, pts, out, rate, lse["start"].g_ee[:3, 3], work))
    return res


def batched_vs_cpp(exe: Path, pts: np.ndarray, ours, rate: float, start: np.ndarray, work: Path) -> dict:
    """The reference on the batch's poses (:func:`cpp_batch`), in their given (random) order and in the
    nearest-neighbour order our batch solver visits them (``ours``: our :class:`BatchResult`, ``rate`` its
    solves/s, ``start`` the chain's start position): its rate, our rate over it, its failures, and of the poses
    where both converged, how many it solved to our equilibrium (all six lengths within 0.1 mm) and how many to
    another one (a length more than 1 mm off: the shooting problem has several solutions here, e.g. with one rod
    much longer), and the median length difference [m]."""
    from flexlearn.physics.lse.length_actuated import statics  # lazy: --baseline child (older tree)

    res: dict = {}
    for name, order in (("given_order", np.arange(len(pts))), ("chain", statics.nearest_neighbour_order(pts, start))):
        ref = cpp_batch(exe, pts[order], work)
        key = f"cpp_batch_{name}"
        res[f"{key}_solves_per_s"] = ref["solves_per_s"]
        if ref["solves_per_s"]:
            res[f"batched_vs_{key}"] = rate / ref["solves_per_s"]
        res[f"{key}_failures"] = ref["failures"]
        if "error" in ref:
            res[f"{key}_error"] = ref["error"]
            continue
        both = ~ref["failed"] & ours.converged[order]
        diff = np.abs(ours.lengths[order] - ref["solutions"][:, 30:]).max(1)
        res[f"{key}_same_equilibrium"] = int((both & (diff <= 1e-4)).sum())
        res[f"{key}_other_equilibrium"] = int((both & (diff > 1e-3)).sum())
        if both.any():
            res[f"{key}_median_length_diff_m"] = float(np.median(diff[both]))
    return res


def rate_child(elements: int, repeats: int, tol: float, batch: int, out: Path) -> None:
    """Child of ``--baseline``: path and batch rates of the ``flexlearn`` on PYTHONPATH; path lengths into ``out``
    (.npy); the rates as one JSON line."""
    lse = lse_run(elements, repeats, tol)
    np.save(out, lse["path"].lengths)
    res = {
        "lse_solves_per_s": lse["solves_per_s"],
        "mean_newton_iters": float(lse["path"].iterations.mean()),
        "mean_factorisations": float(lse["path"].factorisations.mean()),
    }
    if batch > 0:
        res.update(batched(lse, batch))
    print(json.dumps(res))


def baseline(tree: Path, elements: int, repeats: int, tol: float, batch: int, rounds: int) -> dict:
    """Rates of the solver in ``tree`` and in this checkout, each in its own child process, alternated ``rounds``
    times; medians, ratios (this / baseline) and the largest difference of their path lengths [m]."""
    here = Path(__file__).resolve().parents[1]
    runs: dict = {"baseline": [], "this": []}
    with tempfile.TemporaryDirectory(prefix="bench_csg_base_") as tmp:
        for i in range(rounds):
            for name, root in (("baseline", tree.resolve()), ("this", here)):
                env = dict(os.environ, PYTHONPATH=str(root))
                out = Path(tmp) / f"{name}{i}.npy"
                cmd = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--rate-child",
                    str(out),
                    "--anchor",
                    ".",
                    "--elements",
                    str(elements),
                    "--repeats",
                    str(repeats),
                    "--tol",
                    str(tol),
                    "--batch",
                    str(batch),
                ]
                r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(root), check=False)
                if r.returncode != 0:
                    return {"error": f"{name} child failed: {r.stderr[-2000:]}"}
                runs[name].append((json.loads(r.stdout.strip().splitlines()[-1]), np.load(out)))
    res: dict = {"tree": str(tree), "rounds": rounds}
    for key in ("lse_solves_per_s", "batched_solves_per_s", "mean_newton_iters", "mean_factorisations"):
        for name, results in runs.items():
            vals = [r[0][key] for r in results if key in r[0]]
            if vals:
                res[f"{name}_{key}"] = float(np.median(vals))
    res["lse_vs_baseline"] = res["this_lse_solves_per_s"] / res["baseline_lse_solves_per_s"]
    if "this_batched_solves_per_s" in res:
        res["batched_vs_baseline"] = res["this_batched_solves_per_s"] / res["baseline_batched_solves_per_s"]
    res["max_length_diff_vs_baseline_m"] = float(np.abs(runs["this"][-1][1] - runs["baseline"][-1][1]).max())
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--anchor", required=True, type=Path, help="folder with Cpp_2, Cpp_3, Cpp_5 and Library/")
    ap.add_argument("--elements", type=int, default=8, help="LSE elements per rod")
    ap.add_argument("--repeats", type=int, default=25, help="LSE path passes per timing (median)")
    ap.add_argument("--rounds", type=int, default=3, help="alternated C++ / LSE timings (medians)")
    ap.add_argument("--tol", type=float, default=1e-6, help="LSE scaled residual tolerance")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--batch-seed", type=int, default=0, help="seed of the batch's random poses")
    ap.add_argument("--shooting", type=int, default=10, help="path poses solved by the shooting baseline")
    ap.add_argument("--no-cpp", action="store_true")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain-Newton LSE run (same-run baseline)")
    ap.add_argument("--shapes-only", action="store_true", help="C++: only the reference solutions, no rates")
    ap.add_argument("--baseline", type=Path, help="tree of an earlier version: its LSE rates beside this one's")
    ap.add_argument("--baseline-rounds", type=int, default=3, help="alternated child runs per tree (medians)")
    ap.add_argument("--rate-child", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    for name in ("repeats", "rounds", "baseline_rounds", "elements"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1 (got {getattr(a, name)})")
    if a.rate_child is None and not a.no_cpp:
        need = ["Library", "Cpp_5/main.cpp"] + ([] if a.shapes_only else ["Cpp_2/main.cpp", "Cpp_3/main.cpp"])
        missing = [n for n in need if not (a.anchor / n).exists()]
        if missing:
            ap.error(
                f"--anchor {a.anchor}: missing {', '.join(missing)} (the folder of the C++ benchmark's sources, "
                "with Cpp_2, Cpp_3, Cpp_5 and Library/; or --no-cpp)"
            )
    if a.rate_child is not None:
        rate_child(a.elements, a.repeats, a.tol, a.batch, a.rate_child)
        return 0
    out: dict = {"elements": a.elements, "tol": a.tol}
    with tempfile.TemporaryDirectory(prefix="bench_csg_") as tmp:
        cpp: dict = {"skipped": "--no-cpp"} if a.no_cpp else build_cpp(a.anchor.resolve(), Path(tmp), not a.shapes_only)
        lse = lse_run(a.elements, a.repeats, a.tol, plain=not a.no_plain)
        out["lse_solves_per_s"] = lse["solves_per_s"]
        out["lse_first_call_s"] = lse["first_call_s"]
        it = lse["path"].iterations
        out["mean_newton_iters"], out["max_newton_iters"] = float(it.mean()), int(it.max())
        out["mean_factorisations"] = float(lse["path"].factorisations.mean())
        if "plain_solves_per_s" in lse:
            out["lse_plain_newton_solves_per_s"] = lse["plain_solves_per_s"]
            out["lse_plain_newton_iters"] = lse["plain_iters"]
            out["lse_vs_plain_newton"] = lse["solves_per_s"] / lse["plain_solves_per_s"]
            out["lse_vs_plain_newton_max_length_diff_m"] = lse["plain_max_length_diff_m"]
        if "skipped" in cpp:
            out["cpp_skipped"] = cpp["skipped"]
        else:
            out["cpp_errors"] = cpp["errors"]
            if cpp["exes"]:
                out.update(rounds_vs_cpp(lse, cpp["exes"], a.rounds, a.repeats))
            out.update(compare(lse, cpp["solutions"], a.elements))
        if a.shooting > 0:
            out.update(shooting(lse, a.shooting, [] if "skipped" in cpp else cpp["solutions"]))
        if a.batch > 0:
            out.update(batched(lse, a.batch, seed=a.batch_seed, cpp_exe=cpp.get("batch_exe"), work=Path(tmp)))
            if "cpp_solves_per_s" in out:
                out["batched_vs_cpp"] = out["batched_solves_per_s"] / out["cpp_solves_per_s"]
    if a.baseline is not None:
        out["baseline"] = baseline(a.baseline, a.elements, a.repeats, a.tol, a.batch, a.baseline_rounds)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
