"""Per-pose cost budget of the batched CSG target (≥ 10× the C++ rate over 1,000 independent poses, one core).

What one batched pose costs, from the pieces of our LSE inverse statics (8 elements per rod, the count the
≤ 0.1 mm agreement needs), against the budget 1 / (10 × C++ rate):

- ``kernel_us``: median time per call [µs] of the compiled kernels at the path's start solution: residual
  (all 48 elements and the platform balance), element tangents, condensation (factorisation), one correction
  column, a trial (strain retraction + residual + norm), the six sensitivity columns.
- ``chain``: the batch as :meth:`PoseStatics.solve_batch` solves it (nearest-neighbour chain, each pose from the
  previous solution by the sensitivity predictor, then Newton): corrections and factorisations per pose and the
  measured µs per pose.
- ``chord``: the same chain with no tangent at the pose itself: the predictor, then chord corrections with the
  factorisation of the previous solution (the freshest one a scheme without a tangent per pose can have):
  corrections per pose (``--max-chord`` at most; a pose that needs more counts as failed).
- ``predictor``: scaled first residuals (tolerance 1e-6) of the sensitivity predictor and of local polynomial
  fits (degree 1–3) in the platform position to the K nearest solved poses: how far from converged a start is.
- ``floor_us``: per-pose cost of each scheme from these counts and kernel times, and the same divided by 8,
  the float64 lanes of AVX-512, as if every kernel were vectorised across poses at perfect efficiency.

    OMP_NUM_THREADS=1 python scripts/bench_csg_budget.py --cpp-solves-per-s 7969

``--cpp-solves-per-s``: the fastest C++ variant's rate measured in the same run of ``scripts/bench_csg.py`` on
this machine (the budget is a ratio against it). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_csg  # noqa: E402  (scripts/ on sys.path above)

from flexlearn.physics.lse.length_actuated import kernels as pk  # noqa: E402
from flexlearn.physics.lse.length_actuated.condense import pose_factor, pose_solve_column, pose_tangent  # noqa: E402
from flexlearn.physics.lse.length_actuated.fit import fit_neighbours, fit_start_into, fit_workspace  # noqa: E402
from flexlearn.physics.lse.length_actuated.geometry import rel_log, tip_poses  # noqa: E402
from flexlearn.physics.lse.length_actuated.residual import largest_rotation, residual_norm  # noqa: E402
from flexlearn.physics.lse.length_actuated.statics import nearest_neighbour_order  # noqa: E402
from flexlearn.physics.lse.length_actuated.warm_start import ensure_sens, predict_start  # noqa: E402
from flexlearn.physics.lse.length_actuated.work import current_and_trial, pose_workspace  # noqa: E402
from flexlearn.physics.lse.newton_policy import step_scale  # noqa: E402

SIMD_LANES = 8  # float64 lanes of one AVX-512 register


@njit
def _time_kernel(which, reps, base, g, tip_local, kd, xi0, w_body, opts, wk):
    """Run kernel ``which`` (0 residual, 1 tangent, 2 factorisation, 3 column, 4 trial, 5 six sensitivity
    columns) ``reps`` times on the workspace's current state."""
    dy, dpsi, dl = wk[19], wk[20], wk[21]
    for _ in range(reps):
        cur, trl = current_and_trial(wk)
        st = cur[1]
        if which == 0:
            pk.evaluate_current(base, g, tip_local, kd, xi0, w_body, wk)
        elif which == 1:
            pose_tangent(st[1], st[3], kd, xi0, cur[0], wk[2], wk[13], wk[14], wk[16], wk[17], opts.tiny_t2)
        elif which == 2:
            pose_factor(wk[13], wk[14], wk[15], cur[2], opts.twist_free, wk[3])
        elif which == 3:
            pose_solve_column(wk[3], wk[13], wk[15], cur[2], cur[3], opts.twist_free, 0, dy, dpsi, dl)
        elif which == 4:
            pk._trial(base, g, tip_local, kd, xi0, w_body, opts, wk, cur, trl, 0.0)
        else:
            for c in range(1, 7):
                pose_solve_column(wk[3], wk[13], wk[15], cur[2], cur[3], opts.twist_free, c, dy, dpsi, dl)


KERNELS = ("residual", "tangent", "factorisation", "column", "trial", "sensitivity_6_columns")


def kernel_costs(ps, st, repeats: int, reps: int = 2000) -> dict:
    """Median µs per call of each kernel (:data:`KERNELS`) over ``repeats`` timings of ``reps`` calls."""
    wk = pose_workspace(ps.base.shape[0], ps.n_elements)
    opts = ps.kernel_options
    pk.load_state(ps.base, st.g_ee, ps.tip_local, ps.kd, ps.xi0, ps.w_body, st.kernel_state(), st.sens, wk)
    pk.refactor(wk, current_and_trial(wk)[0], ps.tip_local, ps.kd, ps.xi0, opts)
    out = {}
    for which, name in enumerate(KERNELS):
        args = (ps.base, st.g_ee, ps.tip_local, ps.kd, ps.xi0, ps.w_body, opts, wk)
        _time_kernel(which, 10, *args)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            _time_kernel(which, reps, *args)
            times.append((time.perf_counter() - t) / reps * 1e6)
        out[name] = float(np.median(times))
    return out


@njit
def _chord_chain(base, g_start, poses, tip_local, kd, xi0, w_body, opts, wk, max_chord, steps, first):
    """The chain of ``poses`` from the solution loaded in ``wk`` (at ``g_start``): per pose the sensitivity
    predictor from the previous solution, its scaled residual into ``first[p]``, then chord corrections with the
    previous solution's factorisation, their count into ``steps[p]`` (max_chord + 1: not converged within
    max_chord, or a step that did not lower the residual; Newton with fresh tangents then finishes the pose,
    uncounted; steps are scaled to the largest nodal rotation as in Newton). The next pose starts from the
    solution with a fresh factorisation (uncounted). Returns the poses done (short of P when one failed)."""
    w, scale, tol, max_rot, twist_free = opts.w, opts.scale, opts.tol, opts.max_rot, opts.twist_free
    dy, dpsi, dl, flags = wk[19], wk[20], wk[21], wk[22]
    g_prev = g_start
    for p in range(poses.shape[0]):
        g = poses[p]
        flags[3] = 0  # first-order predictor only
        ensure_sens(wk, twist_free)
        if not predict_start(base, g_prev, g, tip_local, kd, xi0, w_body, max_rot, wk):
            return p
        pk.evaluate_current(base, g, tip_local, kd, xi0, w_body, wk)
        cur, trl = current_and_trial(wk)
        norm = residual_norm(cur[2], cur[3], w, scale, twist_free)
        first[p] = norm
        k = 0
        while norm > tol and k < max_chord:
            if not pose_solve_column(wk[3], wk[13], wk[15], cur[2], cur[3], twist_free, 0, dy, dpsi, dl):
                break
            alpha = step_scale(largest_rotation(dy, dpsi, dl, cur[1][3], 0), max_rot)
            n_c = pk._trial(base, g, tip_local, kd, xi0, w_body, opts, wk, cur, trl, alpha)
            if not n_c < norm:  # the chord step no longer helps: the pose fails (as Newton's rule)
                break
            flags[2] = 1 - flags[2]
            cur, trl = current_and_trial(wk)
            norm = n_c
            k += 1
        steps[p] = k if norm <= tol else max_chord + 1
        if norm > tol or not np.isfinite(norm):
            flags[0] = 0
            ok, _it, _nf, _nl = pk.pose_newton(base, g, tip_local, kd, xi0, w_body, opts, wk)
            if ok == 0:
                return p
        cur, _ = current_and_trial(wk)
        if not pk.refactor(wk, cur, tip_local, kd, xi0, opts):
            return p + 1
        g_prev = g
    return poses.shape[0]


def batch_poses(n: int, seed: int = 0) -> np.ndarray:
    """The batch of ``scripts/bench_csg.py`` (its :func:`~bench_csg.batched`): positions random in the path's box."""
    rng = np.random.default_rng(seed)
    pts = np.stack([rng.uniform(-0.01, 0.01, n), rng.uniform(0.02, 0.12, n), rng.uniform(0.48, 0.58, n)], 1)
    return np.array([bench_csg._pose(p) for p in pts])


def _per_pose_us(solve, count: int, repeats: int) -> tuple[float, object]:
    """Median µs per pose of ``solve()`` over ``repeats`` calls (after one untimed call), and its last result."""
    out = solve()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = solve()
        times.append((time.perf_counter() - t0) / count * 1e6)
    return float(np.median(times)), out


def batches_and_chord(ps, st, poses: np.ndarray, max_chord: int, repeats: int) -> dict:
    """``batch`` (the batch solver: fit starts), ``chain_only`` (``fit=False``) and ``chord`` (module docstring)."""
    order = nearest_neighbour_order(poses[:, :3, 3], st.g_ee[:3, 3])  # one orientation: the solver's order
    out = {}
    for name, fit in (("batch", True), ("chain_only", False)):
        us, res = _per_pose_us(lambda f=fit: ps.solve_batch(poses, st, fit=f), len(poses), repeats)
        out[name] = {
            "poses": len(poses),
            "converged": int(res.converged.sum()),
            "us_per_pose": us,
            "corrections_per_pose": float(res.iterations.mean()),
            "fit_started": int(res.fit_started.sum()),
        }
    wk = pose_workspace(ps.base.shape[0], ps.n_elements)
    opts = ps.kernel_options
    pk.load_state(ps.base, st.g_ee, ps.tip_local, ps.kd, ps.xi0, ps.w_body, st.kernel_state(), st.sens, wk)
    pk.refactor(wk, current_and_trial(wk)[0], ps.tip_local, ps.kd, ps.xi0, opts)
    steps, first = np.zeros(len(poses), dtype=np.int64), np.full(len(poses), np.nan)
    done = _chord_chain(
        ps.base, st.g_ee, poses[order], ps.tip_local, ps.kd, ps.xi0, ps.w_body, opts, wk, max_chord, steps, first
    )
    ok = steps[:done] <= max_chord
    out["chord"] = {
        "poses": int(done),
        "max_chord": max_chord,
        "converged": int(ok.sum()),
        "corrections_per_converged_pose": float(steps[:done][ok].mean()) if ok.any() else None,
        "median_corrections": float(np.median(steps[:done])),
    }
    out["first_residual_median"] = {"sensitivity_predictor": float(np.nanmedian(first[:done]))}
    out["solutions"] = (order, ps.solve_path(poses[order], st))
    return out


def _element_logs(ps, poses: np.ndarray, path) -> np.ndarray:
    """Element relative logs Ω (P, R, N, 6) of solved states (nodes: base, interior, tips)."""
    r, n = ps.base.shape[0], ps.n_elements
    om = np.zeros((len(poses), r, n, 6))
    for p in range(len(poses)):
        tips = tip_poses(poses[p], ps.tip_local, path.psi[p])
        for k in range(r):
            nodes = [ps.base[k], *path.g_int[p, k], tips[k]]
            for e in range(n):
                om[p, k, e] = rel_log(nodes[e], nodes[e + 1])
    return om


@njit
def _time_fit(reps, with_start, fw, count, poses, base, tip_local, state, tip, omega, scratch, scale):
    """The batch fit at poses[count + i] over the first count + i stored solutions, i < reps: its weights, and
    with ``with_start`` its start (timed from outside; returns the neighbour counts' sum)."""
    total = 0
    for i in range(reps):
        k = fit_neighbours(fw, count + i, poses[count + i], scale)
        if k > 0 and with_start:
            fit_start_into(fw, k, base, poses[count + i], tip_local, state, tip, omega, scratch)
        total += k
    return total


def fit_residuals(ps, st, poses: np.ndarray, path, skip: int, count: int) -> tuple[float, dict]:
    """The batch fit (:mod:`flexlearn.physics.lse.length_actuated.fit`) at poses ``skip … skip+count`` of the chain from
    the solutions before each: median scaled first residual, and µs per pose of its weights and of its start."""
    r, n = ps.base.shape[0], ps.n_elements
    scale = float(np.linalg.norm(ps.tip_local[:, :3, 3], axis=1).mean())  # as PoseStatics.solve_batch
    fw = fit_workspace(len(poses), r, n)
    fw[0][:], fw[1][:], fw[2][:], fw[3][:], fw[4][:] = (
        poses,
        _element_logs(ps, poses, path),
        path.beta,
        path.psi,
        path.lengths,
    )
    wk = pose_workspace(r, n)
    opts = ps.kernel_options
    norms = []
    for p in range(skip, min(skip + count, len(poses))):
        k = fit_neighbours(fw, p, poses[p], scale)
        guess = (np.zeros((r, n - 1, 4, 4)), np.zeros((r, n, 6)), np.zeros(r), np.zeros(r))
        fit_start_into(
            fw, k, ps.base, poses[p], ps.tip_local, guess, np.zeros((r, 4, 4)), np.zeros((r, n, 6)), np.zeros((5, 6))
        )
        pk.load_state(ps.base, poses[p], ps.tip_local, ps.kd, ps.xi0, ps.w_body, guess, st.sens, wk)
        cur, _ = current_and_trial(wk)
        norms.append(residual_norm(cur[2], cur[3], opts.w, opts.scale, opts.twist_free))
    reps = min(count, len(poses) - skip)
    args = (
        fw,
        skip,
        poses,
        ps.base,
        ps.tip_local,
        guess,
        np.zeros((r, 4, 4)),
        np.zeros((r, n, 6)),
        np.zeros((5, 6)),
        scale,
    )
    cost = {}
    for name, with_start in (("fit_weights", False), ("fit_weights_and_start", True)):
        _time_fit(2, with_start, *args)
        t = time.perf_counter()
        _time_fit(reps, with_start, *args)
        cost[name] = (time.perf_counter() - t) / reps * 1e6
    return float(np.median(norms)), cost


def floors(k: dict, res: dict, budget: float) -> dict:
    """µs per pose of each scheme from the kernel times ``k`` and the measured counts in ``res``, and the same
    at SIMD_LANES lanes of perfect efficiency."""
    step = k["column"] + k["trial"]  # one correction: column solve, retraction, residual
    sens_predictor = k["sensitivity_6_columns"] + k["trial"] - k["residual"]  # the columns, one retraction
    chord = res["chord"]["corrections_per_converged_pose"]
    schemes = {
        "batch_measured": res["batch"]["us_per_pose"],
        "chain_only_measured": res["chain_only"]["us_per_pose"],
        "fit_then_one_newton_correction": k["fit_weights_and_start"]
        + k["residual"]
        + k["tangent"]
        + k["factorisation"]
        + step,
        "sensitivity_then_chord_from_previous_factorisation": (
            sens_predictor + k["residual"] + step * chord if chord is not None else None
        ),
        "one_residual_only": k["residual"],
    }
    out = {"budget_us_per_pose": budget, "simd_lanes": SIMD_LANES}
    for name, us in schemes.items():
        if us is not None:
            out[name] = {
                "us": us,
                "us_at_simd_lanes": us / SIMD_LANES,
                "within_budget_at_simd_lanes": us / SIMD_LANES <= budget,
            }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cpp-solves-per-s",
        type=float,
        required=True,
        help="fastest C++ variant's rate from scripts/bench_csg.py on this machine",
    )
    ap.add_argument("--elements", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-chord", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0, help="seed of the batch's random poses")
    a = ap.parse_args(argv)
    if not a.cpp_solves_per_s > 0:
        ap.error(f"--cpp-solves-per-s must be a positive rate (got {a.cpp_solves_per_s})")
    for name in ("elements", "batch", "repeats", "max_chord"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1 (got {getattr(a, name)})")
    lse = bench_csg.lse_run(a.elements, 1, 1e-6)
    ps, st = lse["ps"], lse["start"]
    budget = 1e6 / (10.0 * a.cpp_solves_per_s)
    out: dict = {
        "elements": a.elements,
        "cpp_solves_per_s": a.cpp_solves_per_s,
        "target_solves_per_s": 10.0 * a.cpp_solves_per_s,
        "kernel_us": kernel_costs(ps, st, a.repeats),
    }
    poses = batch_poses(a.batch, a.seed)
    res = batches_and_chord(ps, st, poses, a.max_chord, a.repeats)
    order, path = res.pop("solutions")
    res["first_residual_median"]["batch_fit"], fit_cost = fit_residuals(
        ps, st, poses[order], path, skip=min(200, a.batch // 2), count=200
    )
    out["kernel_us"].update(fit_cost)
    out.update(res)
    out["tol"] = ps.tol
    out["floor_us"] = floors(out["kernel_us"], res, budget)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
