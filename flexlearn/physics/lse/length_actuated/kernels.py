"""Compiled (numba) inverse statics of a length-actuated CPR: platform pose given, rod lengths unknown.

Robot: R = 6 rods, base of rod k clamped at ``g_{k,0}`` (fixed), tip clamped to the platform at
``g_{k,N} = g_ee T_k``, ``T_k = g^loc_k exp(ψ_k ê₃)``. ``ψ_k`` is the tip twist about the rod axis: free
(``twist_free``: a swivel, its conjugate torsional moment is a residual) or held at 0 (full clamp). The
unknowns of one Newton system (one solve per pose) are, per rod, the interior nodes ζ_1 … ζ_{N-1}, the
element slopes β_1 … β_N, ψ_k, and the rod lengths L (6,) (element length h_k = L_k / N). Equations: the LSE
virtual-work residual of every interior node and slope (seed 003, eq. (11), Sec. V-A), the tip torsion (when
free) and the platform wrench balance ``Σ_k Ad_{T_k⁻¹}ᵀ r_{b,k,N} − w_ee = 0`` (body frame; seed Sec. IV-B
second display with δζ_ee replaced by the six lengths).

Tangent, factorisation and solves: :mod:`~flexlearn.physics.lse.length_actuated.condense` (exact element tangents, the
analytic length column, static condensation along each rod, a 6 × 6 system in δL; the same factorisation gives
the sensitivity ``dq/dζ_ee``, six more columns, used by the warm-start predictor). Pose helpers and the cold start:
:mod:`~flexlearn.physics.lse.length_actuated.geometry`; the strain retraction and the nodes rebuilt from element
strains: :mod:`~flexlearn.physics.lse.length_actuated.closure`.

Newton (:func:`pose_newton`) follows the stopping and step rules of
:mod:`flexlearn.physics.lse.newton_policy`, with the factorisation kept while it works (chord steps): a
correction from a kept factorisation is taken only when it lowers the residual; when it lowers it by less than
the factor ``chord_keep`` (default CHORD_KEEP; 0: plain Newton) the next step refactorises, and a rejected one is redone
with a fresh factorisation (which then follows the plain Newton rules). A warm-started pose starts
with a fresh factorisation (:func:`solve_stepped`); without a warm start it carries over from pose to pose.

Warm starts (:func:`solve_stepped`; :mod:`~flexlearn.physics.lse.length_actuated.warm_start`): along a straight
platform path (the last solutions and the new pose on one SE(3) geodesic) the polynomial extrapolation of up to
EXTRAP_POINTS previous solutions in their element strains (``extrapolate``; its first residual ≈ 1e-5 of the load
scale on the CSG path against ≈ 0.08 for the sensitivity predictor); otherwise the sensitivity predictor
(``predict_start``), whose six columns are solved from the latest factorisation only when it is used. Without a warm
start a platform move with the rods left in place stretches them by O(move)·EA, which Newton from there handles
poorly on slender rods. A warm-started step starts Newton with a fresh factorisation: a kept one leaves solutions
only just inside the tolerance, whose errors the next extrapolations amplify (for the same reason a solution the
extrapolation reached without a correction is left out of the history, though never two in a row); after a
sensitivity prediction the kept one is as old as the whole move, and a chord step from it rarely pays for its
residual evaluation (nearest-neighbour chains of random poses in scripts/bench_csg.py: 5.9 → 4.0 corrections per
pose, 1.6× the rate). The residual and its norms: :mod:`~flexlearn.physics.lse.length_actuated.residual`.

Each entry point (:func:`pose_solve`, :func:`pose_path`, :func:`pose_batch`) is one compiled call that allocates
its work arrays once (:func:`pose_workspace`); no Python runs between Newton iterations or poses.

States: (g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,), lengths (R,)); sensitivity (sens_y (R, 12N - 6, 6),
sens_psi (R, 6), sens_l (R, 6), has_sens). SI units.
"""

from __future__ import annotations

import numpy as np

from flexlearn.physics.lse.compiled.elements import refresh_pose_cache
from flexlearn.physics.lse.compiled.linalg import matmul, njit, njit_leaf
from flexlearn.physics.lse.compiled.newton import exp_se3
from flexlearn.physics.lse.length_actuated.closure import retract_strain_into
from flexlearn.physics.lse.length_actuated.condense import (
    pose_factor,
    pose_solve_column,
    pose_tangent,
)
from flexlearn.physics.lse.length_actuated.geometry import (
    ad_inv_t_into,
    cold_state,
    copy_state,
    rel_log,
    tip_poses_into,
)
from flexlearn.physics.lse.length_actuated.residual import largest_rotation, residual_norm, residuals_into, step_norm
from flexlearn.physics.lse.length_actuated.warm_start import ensure_sens, extrapolate, predict_start, push_history
from flexlearn.physics.lse.length_actuated.work import (
    PoseSensitivity,
    current_and_trial,
    current_state,
    pose_workspace,
)
from flexlearn.physics.lse.newton_policy import (
    BACKTRACK_FACTOR,
    CONTINUE,
    CONVERGED,
    FAILED,
    accept_trial,
    residual_verdict,
    step_scale,
    step_verdict,
)

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = [
    "CHORD_KEEP",
    "EXTRAP_POINTS",
    "evaluate_current",
    "load_state",
    "pose_batch",
    "pose_newton",
    "pose_path",
    "pose_solve",
    "refactor",
    "solve_stepped",
]

CHORD_KEEP = 0.05  # default: a kept factorisation is refreshed after a step that lowered the residual less
EXTRAP_POINTS = 7  # default: solutions it extrapolates from at most (polynomial degree EXTRAP_POINTS - 1)


@njit_leaf
def refactor(wk, cur, tip_local, kd, xi0, opts):
    """Tangent and factorisation at the current state; its sensitivity (columns 1 … 6) is solved when first
    needed (:func:`~flexlearn.physics.lse.length_actuated.warm_start.ensure_sens`).

    Args:
        wk: The workspace (:func:`pose_workspace`); its factorisation and flags written.
        cur: The workspace's current slot (element pieces, state, residuals, tip poses).
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        opts: The :class:`~flexlearn.physics.lse.length_actuated.work.PoseNewtonOptions`.

    Returns:
        False when the tangent is singular.
    """
    parts, st, res = cur[0], cur[1], cur[2]
    cw, hel, dres, adt, flags = wk[3], wk[13], wk[14], wk[15], wk[22]
    beta, psi, lengths, twist_free = st[1], st[2], st[3], opts.twist_free
    pose_tangent(beta, lengths, kd, xi0, parts, wk[2], hel, dres, wk[16], wk[17], opts.tiny_t2)
    for k in range(beta.shape[0]):
        ad_inv_t_into(tip_local[k], psi[k], adt[k])
    ok = pose_factor(hel, dres, adt, res, twist_free, cw)
    if ok:
        flags[1], flags[4] = 1, 1
    elif flags[4] == 1:  # the pending columns belonged to the factorisation just overwritten
        flags[1], flags[4] = 0, 0
    flags[0] = 1 if ok else 0
    return ok


@njit_leaf
def _accumulate(acc, dy, dpsi, dl, alpha):
    """This pose's corrections (in the tangent coordinates of the predictor) += α × column 0."""
    for k in range(dy.shape[0]):
        for i in range(dy.shape[1]):
            acc[0][k, i, 0] += alpha * dy[k, i, 0]
        acc[1][k, 0] += alpha * dpsi[k, 0]
        acc[2][k, 0] += alpha * dl[k, 0]


@njit(cache=True)
def _trial(base, g_ee, tip_local, kd, xi0, w_body, opts, wk, cur, trl, alpha):
    """Retract the correction (column 0) scaled by α from the current state into the trial slot and evaluate
    its residual; returns the trial's scaled norm."""
    w, scale, twist_free = opts.w, opts.scale, opts.twist_free
    dy, dpsi, dl = wk[19], wk[20], wk[21]
    tip_new = trl[4]
    for k in range(dpsi.shape[0]):
        wk[17][4, k] = cur[1][2][k] + alpha * dpsi[k, 0]
    tip_poses_into(g_ee, tip_local, wk[17][4], tip_new)
    retract_strain_into(base, cur[1], dy, dpsi, dl, alpha, 0, cur[4], tip_new, cur[0], trl[1], wk[17], wk[29])
    residuals_into(base, g_ee, trl[1], tip_local, kd, xi0, w_body, trl[0], wk[2], trl[2], trl[3], trl[4], wk[18])
    return residual_norm(trl[2], trl[3], w, scale, twist_free)


@njit(cache=True)
def pose_newton(base, g_ee, tip_local, kd, xi0, w_body, opts, wk):
    """Riemannian Newton with kept factorisations (module docstring) at the platform pose ``g_ee`` (4, 4) from
    the current state of the workspace ``wk`` (:func:`pose_workspace`; its residual evaluated here). The solution
    stays the workspace's current state; this pose's corrections are added to ``wk[25]``.

    Args:
        base: Rod base poses (R, 4, 4).
        g_ee: Platform pose (4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        opts: The :class:`~flexlearn.physics.lse.length_actuated.work.PoseNewtonOptions` (tiny_t2: θ² below which the
            tangent uses 2 quadrature points; extrapolation: points of
            :func:`~flexlearn.physics.lse.length_actuated.warm_start.extrapolate`, below EXTRAP_MIN: off).
        wk: The workspace, its current state the start.

    Returns:
        (status 1 converged / 0 failed, corrections applied, factorisations, log length).
    """
    w, scale, tol, max_iter, max_rot = opts.w, opts.scale, opts.tol, opts.max_iter, opts.max_rot
    step_tol, growth, backtracks = opts.step_tol, opts.growth, opts.backtracks
    twist_free, chord_keep = opts.twist_free, opts.chord_keep
    dy, dpsi, dl, flags, log = wk[19], wk[20], wk[21], wk[22], wk[27]
    cur, trl = current_and_trial(wk)
    residuals_into(base, g_ee, cur[1], tip_local, kd, xi0, w_body, cur[0], wk[2], cur[2], cur[3], cur[4], wk[18])
    norm = residual_norm(cur[2], cur[3], w, scale, twist_free)
    first, it, nlog, factors, fresh = norm, 0, 1, 0, False
    log[0] = norm
    while True:
        verdict = residual_verdict(norm, first, it, tol, max_iter)
        if verdict != CONTINUE:
            return (1 if verdict == CONVERGED else 0), it, factors, nlog
        if flags[0] == 0:
            factors += 1
            fresh = True
            if not refactor(wk, cur, tip_local, kd, xi0, opts):
                return 0, it, factors, nlog
        ok = pose_solve_column(wk[3], wk[13], wk[15], cur[2], cur[3], twist_free, 0, dy, dpsi, dl)
        verdict = step_verdict(step_norm(dy, dpsi, dl, cur[1][3], w) if ok else np.inf, step_tol)
        if verdict == FAILED and not fresh:
            flags[0] = 0
            continue
        if verdict == FAILED:
            return 0, it, factors, nlog
        alpha = 1.0 if verdict == CONVERGED else step_scale(largest_rotation(dy, dpsi, dl, cur[1][3], 0), max_rot)
        n_c = _trial(base, g_ee, tip_local, kd, xi0, w_body, opts, wk, cur, trl, alpha)
        if not fresh and not n_c < norm:  # a kept factorisation that no longer helps: refactorise
            flags[0] = 0
            continue
        for _ in range(backtracks if fresh and verdict != CONVERGED else 0):
            if accept_trial(n_c, norm, growth):
                break
            alpha *= BACKTRACK_FACTOR
            n_c = _trial(base, g_ee, tip_local, kd, xi0, w_body, opts, wk, cur, trl, alpha)
        _accumulate(wk[25], dy, dpsi, dl, alpha)
        flags[2] = 1 - flags[2]
        cur, trl = trl, cur
        if verdict == CONVERGED:  # round-off floor: the correction applied, its residual is the last one
            return 1, it + 1, factors, nlog
        if not n_c <= chord_keep * norm:
            flags[0] = 0
        norm = n_c
        fresh = False
        it += 1
        if nlog < log.shape[0]:
            log[nlog] = norm
            nlog += 1


@njit(cache=True)
def evaluate_current(base, g_ee, tip_local, kd, xi0, w_body, wk):
    """Evaluate the residual (and element pieces) of the workspace's current state at ``g_ee``.

    Args:
        base: Rod base poses (R, 4, 4).
        g_ee: Platform pose (4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        wk: The workspace (:func:`pose_workspace`); its current slot written.
    """
    cur, _ = current_and_trial(wk)
    residuals_into(base, g_ee, cur[1], tip_local, kd, xi0, w_body, cur[0], wk[2], cur[2], cur[3], cur[4], wk[18])


@njit(cache=True)
def load_state(base, g_ee, tip_local, kd, xi0, w_body, state, sens, wk):
    """Workspace ← the state (solved at ``g_ee``) and its sensitivity ``sens``; its residual evaluated.

    Args:
        base: Rod base poses (R, 4, 4).
        g_ee: Platform pose (4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        state: Solution (g_int, beta, psi, lengths) at ``g_ee``.
        sens: Its :class:`~flexlearn.physics.lse.length_actuated.work.PoseSensitivity`.
        wk: The workspace (:func:`pose_workspace`), written.
    """
    flags = wk[22]
    flags[:] = 0
    copy_state(state, wk[4])
    if sens.has_sens:
        wk[23][0][:] = sens.sens_y
        wk[23][1][:] = sens.sens_psi
        wk[23][2][:] = sens.sens_l
        flags[1] = 1
    evaluate_current(base, g_ee, tip_local, kd, xi0, w_body, wk)


@njit(cache=True)
def solve_stepped(base, g_from, g_to, tip_local, kd, xi0, w_body, opts, predictor, wk):
    """Solve at ``g_to`` from the workspace's current state (solved at ``g_from``) by adaptive continuation
    along the SE(3) geodesic: the whole step first; a failed step is halved (down to 1/1024 of the way) from the
    last solution, a converged one doubles the next.

    Each step is warm-started when ``predictor``: by extrapolation of the last solutions when they lie on the step's
    line (:func:`~flexlearn.physics.lse.length_actuated.warm_start.extrapolate`), else by the sensitivity
    (:func:`~flexlearn.physics.lse.length_actuated.warm_start.predict_start`; computed at the start when there is
    none); Newton then starts with a fresh factorisation (why: module docstring). The solutions reached (the start's
    included) join the history, except one the extrapolation reached without a correction (never two in a row).

    Args:
        base: Rod base poses (R, 4, 4).
        g_from: Platform pose (4, 4) of the workspace's current state.
        g_to: Platform pose (4, 4) to solve at.
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        opts: The :class:`~flexlearn.physics.lse.length_actuated.work.PoseNewtonOptions`.
        predictor: Warm-start each continuation step.
        wk: The workspace (:func:`pose_workspace`); the solution becomes its current state.

    Returns:
        (status 1 solved / 0 failed, Newton corrections, factorisations).
    """
    max_rot, twist_free = opts.max_rot, opts.twist_free
    flags = wk[22]
    if flags[5] == 0:
        push_history(g_from, wk)
    if predictor and flags[1] == 0:
        cur, _ = current_and_trial(wk)
        refactor(wk, cur, tip_local, kd, xi0, opts)
    copy_state(current_state(wk), wk[6])
    dz = rel_log(g_from, g_to)
    total, factors = 0, 0
    t, dt = 0.0, 1.0
    g_prev = g_from
    acc = wk[25]
    while t < 1.0:
        t_new = min(1.0, t + dt)
        g_i = g_to if t_new == 1.0 else matmul(g_from, exp_se3(dz * t_new))
        predicted, extrapolated = False, predictor and extrapolate(base, g_i, tip_local, opts.extrapolation, wk)
        if predictor and not extrapolated:
            ensure_sens(wk, twist_free)
            if flags[1] == 1:
                predicted = predict_start(base, g_prev, g_i, tip_local, kd, xi0, w_body, max_rot, wk)
        if extrapolated or predicted:
            flags[0] = 0  # a warm start begins with a fresh tangent (docstring)
        if not predicted:
            acc[0][:] = 0.0
            acc[1][:] = 0.0
            acc[2][:] = 0.0
        ok, it, nf, _nlog = pose_newton(base, g_i, tip_local, kd, xi0, w_body, opts, wk)
        total += it
        factors += nf
        if ok == 1:
            if predicted:
                wk[24][0][:] = acc[0]
                wk[24][1][:] = acc[1]
                wk[24][2][:] = acc[2]
            flags[3] = 1 if predicted else 0
            t, g_prev = t_new, g_i
            dt *= 2.0
            if extrapolated and it == 0 and flags[6] == 0:
                flags[6] = 1  # only just inside the tolerance: kept out of the history (once in a row)
            else:
                push_history(g_i, wk)
                flags[6] = 0
            copy_state(current_state(wk), wk[6])
        else:
            dt *= 0.5
            flags[0], flags[3] = 0, 0
            if dt < 1.0 / 1024:
                return 0, total, factors
            copy_state(wk[6], current_state(wk))  # back to the last solution, its sensitivity recomputed
            evaluate_current(base, g_prev, tip_local, kd, xi0, w_body, wk)
            if not refactor(wk, current_and_trial(wk)[0], tip_local, kd, xi0, opts):
                return 0, total, factors
    return 1, total, factors


@njit(cache=True)
def _sens_out(wk, twist_free):
    """The workspace's sensitivity (solved first when pending) as a new :class:`PoseSensitivity`."""
    ensure_sens(wk, twist_free)
    sy, spsi, sl = wk[23]
    return PoseSensitivity(sy.copy(), spsi.copy(), sl.copy(), wk[22][1] == 1)


@njit(cache=True)
def pose_solve(base, g_from, g_to, tip_local, kd, xi0, w_body, state, sens, opts, predictor):
    """One pose ``g_to`` from the solution ``state`` at ``g_from`` (its sensitivity ``sens``) in one compiled call
    (:func:`solve_stepped`).

    Args:
        base: Rod base poses (R, 4, 4).
        g_from: Platform pose (4, 4) of ``state``.
        g_to: Platform pose (4, 4) to solve at.
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        state: Solution (g_int, beta, psi, lengths) at the start pose.
        sens: Its :class:`~flexlearn.physics.lse.length_actuated.work.PoseSensitivity`.
        opts: The :class:`~flexlearn.physics.lse.length_actuated.work.PoseNewtonOptions`.
        predictor: Warm-start each continuation step.

    Returns:
        (status, state at g_to (copies), Newton corrections, factorisations, sensitivity there).
    """
    wk = pose_workspace(state[1].shape[0], state[1].shape[1])
    load_state(base, g_from, tip_local, kd, xi0, w_body, state, sens, wk)
    ok, it, nf = solve_stepped(base, g_from, g_to, tip_local, kd, xi0, w_body, opts, predictor, wk)
    st = current_state(wk)
    return ok, (st[0].copy(), st[1].copy(), st[2].copy(), st[3].copy()), it, nf, _sens_out(wk, opts.twist_free)


@njit(cache=True)
def pose_path(base, g_start, poses, tip_local, kd, xi0, w_body, state, sens, opts, predictor):
    """Solve along a pose path (P, 4, 4) warm-started from the solution ``state`` at ``g_start`` (its
    sensitivity ``sens``), all in one compiled call.

    Args:
        base: Rod base poses (R, 4, 4).
        g_start: Platform pose (4, 4) of ``state``.
        poses: Platform poses along the path (P, 4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        state: Solution (g_int, beta, psi, lengths) at the start pose.
        sens: Its :class:`~flexlearn.physics.lse.length_actuated.work.PoseSensitivity`.
        opts: The :class:`~flexlearn.physics.lse.length_actuated.work.PoseNewtonOptions`.
        predictor: Warm-start each continuation step.

    Returns:
        (solved count, lengths (P, R) [m], psi (P, R) [rad], g_int (P, R, N-1, 4, 4), beta (P, R, N, 6), Newton
        corrections (P,), factorisations (P,), the sensitivity at the last solved pose); the count is short of P
        when a pose failed.
    """
    r, n = state[1].shape[0], state[1].shape[1]
    npose = poses.shape[0]
    out_l, out_psi = np.zeros((npose, r)), np.zeros((npose, r))
    out_gi, out_b = np.zeros((npose, r, max(n - 1, 0), 4, 4)), np.zeros((npose, r, n, 6))
    iters, factors = np.zeros(npose, dtype=np.int64), np.zeros(npose, dtype=np.int64)
    wk = pose_workspace(r, n)
    load_state(base, g_start, tip_local, kd, xi0, w_body, state, sens, wk)
    g_prev = g_start
    for p in range(npose):
        ok, iters[p], factors[p] = solve_stepped(
            base, g_prev, poses[p], tip_local, kd, xi0, w_body, opts, predictor, wk
        )
        if ok == 0:
            return p, out_l, out_psi, out_gi, out_b, iters, factors, _sens_out(wk, opts.twist_free)
        st = current_state(wk)
        out_gi[p], out_b[p], out_psi[p], out_l[p] = st[0], st[1], st[2], st[3]
        g_prev = poses[p]
    return npose, out_l, out_psi, out_gi, out_b, iters, factors, _sens_out(wk, opts.twist_free)


@njit(cache=True)
def pose_batch(base, poses, tip_local, kd, xi0, w_body, g_ref, ref_state, ref_sens, opts):
    """Independent poses (P, 4, 4), each from the reference solution ``ref_state`` at ``g_ref`` (its
    sensitivity ``ref_sens``; computed when missing): the predictor over the whole move, Newton, adaptive
    continuation where that fails; the cold start (:func:`cold_state`) as the last resort.

    Args:
        base: Rod base poses (R, 4, 4).
        poses: Platform poses to solve (P, 4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        g_ref: Platform pose (4, 4) of ``ref_state``.
        ref_state: Reference solution (g_int, beta, psi, lengths).
        ref_sens: Its :class:`~flexlearn.physics.lse.length_actuated.work.PoseSensitivity`.
        opts: The :class:`~flexlearn.physics.lse.length_actuated.work.PoseNewtonOptions`.

    Returns:
        (status (P,), lengths (P, R) [m], psi (P, R) [rad], Newton corrections (P,)).
    """
    r, n = ref_state[1].shape[0], ref_state[1].shape[1]
    npose = poses.shape[0]
    status, iters = np.zeros(npose, dtype=np.int64), np.zeros(npose, dtype=np.int64)
    out_l, out_psi = np.zeros((npose, r)), np.zeros((npose, r))
    wk = pose_workspace(r, n)
    load_state(base, g_ref, tip_local, kd, xi0, w_body, ref_state, ref_sens, wk)
    if wk[22][1] == 0:
        refactor(wk, current_and_trial(wk)[0], tip_local, kd, xi0, opts)
    sens = _sens_out(wk, opts.twist_free)
    for p in range(npose):
        load_state(base, g_ref, tip_local, kd, xi0, w_body, ref_state, sens, wk)
        ok, it, _nf = solve_stepped(base, g_ref, poses[p], tip_local, kd, xi0, w_body, opts, True, wk)
        if ok == 0:
            load_state(base, poses[p], tip_local, kd, xi0, w_body, cold_state(base, poses[p], tip_local, n), sens, wk)
            ok, it2, _nf, _nlog = pose_newton(base, poses[p], tip_local, kd, xi0, w_body, opts, wk)
            it += it2
        st = current_state(wk)
        status[p], out_l[p], out_psi[p], iters[p] = ok, st[3], st[2], it
    return status, out_l, out_psi, iters
