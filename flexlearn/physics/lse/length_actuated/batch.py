"""Compiled batch of independent inverse-statics poses, each warm-started from the solutions found before it.

The poses are visited in the order given (:meth:`PoseStatics.solve_batch` gives a greedy nearest-neighbour order,
:func:`visiting_order`). The latest STORE_MAX solutions are kept for the fits.
Once MAX_NEIGHBOURS solutions are stored, a pose starts from the local polynomial fit of its nearest solutions
(:mod:`flexlearn.physics.lse.length_actuated.fit`) and Newton
(:func:`~flexlearn.physics.lse.length_actuated.kernels.pose_newton`, a fresh tangent first) finishes it; before that, or
when the fit is unavailable or Newton fails from it, the pose is solved from the previous solution by the path step
(sensitivity predictor, adaptive continuation: :func:`~flexlearn.physics.lse.length_actuated.kernels.solve_stepped`). A
pose that fails both is marked and the next one starts again from the last solution. Each solution is judged by the same
residual tolerance whatever its start.
"""

from __future__ import annotations

import numpy as np

from flexlearn.physics.lse.compiled.elements import refresh_pose_cache
from flexlearn.physics.lse.compiled.linalg import njit
from flexlearn.physics.lse.length_actuated.fit import fit_neighbours, fit_start_into, fit_workspace, store_solution
from flexlearn.physics.lse.length_actuated.geometry import copy_state
from flexlearn.physics.lse.length_actuated.kernels import evaluate_current, load_state, pose_newton, solve_stepped
from flexlearn.physics.lse.length_actuated.work import current_and_trial, current_state, empty_state, pose_workspace

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = ["STORE_MAX", "pose_batch_chain", "visiting_order"]

STORE_MAX = 2048  # solutions kept for the fits (the latest; memory and search bounded for large batches)


@njit(cache=True)
def visiting_order(points, start):
    """Greedy nearest-neighbour order (P,) of ``points`` (P, D) from ``start`` (D,), Euclidean; O(P² D).

    Args:
        points: Points (P, D).
        start: Starting point (D,).

    Returns:
        Indices into ``points`` (P,), int64.
    """
    npt, dim = points.shape
    left = np.ones(npt, dtype=np.bool_)
    order = np.empty(npt, dtype=np.int64)
    cur = start.copy()
    for i in range(npt):
        best, j = np.inf, -1
        for q in range(npt):
            if left[q]:
                d = 0.0
                for c in range(dim):
                    d += (points[q, c] - cur[c]) ** 2
                if d < best or j < 0:
                    best, j = d, q
        order[i], left[j] = j, False
        for c in range(dim):
            cur[c] = points[j, c]
    return order


@njit(cache=True)
def _restore(base, g, tip_local, kd, xi0, w_body, saved, wk):
    """The workspace back to the solution ``saved`` at ``g``: residual evaluated, no factorisation, sensitivity
    or history (the next path step refactorises)."""
    copy_state(saved, current_state(wk))
    evaluate_current(base, g, tip_local, kd, xi0, w_body, wk)
    flags = wk[22]
    flags[0], flags[1], flags[3], flags[4], flags[5], flags[6] = 0, 0, 0, 0, 0, 0


@njit(cache=True)
def _from_fit(base, g, tip_local, kd, xi0, w_body, opts, wk, fw, count, lbar):
    """Newton at ``g`` from the fit of the stored solutions; (status, corrections), status -1 without a fit."""
    k = fit_neighbours(fw, count, g, lbar)
    if k == 0:
        return -1, 0
    _, trl = current_and_trial(wk)
    fit_start_into(fw, k, base, g, tip_local, trl[1], trl[4], wk[29], wk[17])
    flags = wk[22]
    flags[2] = 1 - flags[2]
    flags[0], flags[1], flags[3], flags[4] = 0, 0, 0, 0  # a fresh tangent; the old sensitivity is not of here
    acc = wk[25]
    acc[0][:] = 0.0
    acc[1][:] = 0.0
    acc[2][:] = 0.0
    ok, it, _nf, _nlog = pose_newton(base, g, tip_local, kd, xi0, w_body, opts, wk)
    return ok, it


@njit(cache=True)
def pose_batch_chain(base, g_start, poses, tip_local, kd, xi0, w_body, state, sens, opts, predictor, use_fit, lbar):
    """Independent poses (P, 4, 4) in the given order from the solution ``state`` at ``g_start`` (its sensitivity
    ``sens``): the fit start when ``use_fit`` and enough solutions are stored (``lbar`` [m]: the rotation scale
    of its neighbour distances), else the path step from the previous solution, warm-started when ``predictor``
    (module docstring). Returns
    (status (P,), lengths (P, R), psi (P, R), Newton corrections (P,), poses started from the fit (P,) bool).

    Args:
        base: Rod base poses (R, 4, 4).
        g_start: Platform pose (4, 4) of ``state``.
        poses: Platform poses to solve (P, 4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        state: Solution (g_int, beta, psi, lengths) at the ``g_start``.
        sens: Its :class:`~flexlearn.physics.lse.length_actuated.work.PoseSensitivity`.
        opts: The :class:`~flexlearn.physics.lse.length_actuated.work.PoseNewtonOptions`.
        predictor: Warm-start each path step.
        use_fit: Start from the neighbours' fit when available.
        lbar: Rotation scale [m] of the neighbour distances.
    """
    r, n = state[1].shape[0], state[1].shape[1]
    npose = poses.shape[0]
    status, iters = np.zeros(npose, dtype=np.int64), np.zeros(npose, dtype=np.int64)
    fitted = np.zeros(npose, dtype=np.bool_)
    out_l, out_psi = np.zeros((npose, r)), np.zeros((npose, r))
    wk = pose_workspace(r, n)
    capacity = max(1, min(npose, STORE_MAX))
    fw = fit_workspace(capacity, r, n)
    saved = empty_state(r, n)
    load_state(base, g_start, tip_local, kd, xi0, w_body, state, sens, wk)
    copy_state(state, saved)
    g_last = g_start
    stored = 0
    for p in range(npose):
        g = poses[p]
        ok, it = -1, 0
        if use_fit:
            ok, it = _from_fit(base, g, tip_local, kd, xi0, w_body, opts, wk, fw, min(stored, capacity), lbar)
            fitted[p] = ok == 1
            if ok == 0:
                _restore(base, g_last, tip_local, kd, xi0, w_body, saved, wk)
        if ok != 1:
            ok, it2, _nf = solve_stepped(base, g_last, g, tip_local, kd, xi0, w_body, opts, predictor, wk)
            it += it2
        iters[p] = it
        if ok != 1:
            _restore(base, g_last, tip_local, kd, xi0, w_body, saved, wk)
            continue
        cur, _ = current_and_trial(wk)
        st = cur[1]
        status[p], out_l[p], out_psi[p] = 1, st[3], st[2]
        if fitted[p]:
            wk[22][5], wk[22][6] = 0, 0  # the path history restarts from this solution
        store_solution(fw, stored % capacity, g, cur[0], st)
        stored += 1
        copy_state(st, saved)
        g_last = g
    return status, out_l, out_psi, iters, fitted
