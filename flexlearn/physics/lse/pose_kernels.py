"""Compiled (numba) inverse statics of a length-actuated CPR: platform pose given, rod lengths unknown.

Robot: R = 6 rods, base of rod k clamped at ``g_{k,0}`` (fixed), tip clamped to the platform at
``g_{k,N} = g_ee T_k``, ``T_k = g^loc_k exp(ψ_k ê₃)``. ``ψ_k`` is the tip twist about the rod axis: free
(``twist_free``: a swivel, its conjugate torsional moment is a residual) or held at 0 (full clamp). The
unknowns of one Newton system (one solve per pose) are, per rod, the interior nodes ζ_1 … ζ_{N-1}, the
element slopes β_1 … β_N, ψ_k, and the rod lengths L (6,) (element length h_k = L_k / N). Equations: the LSE
virtual-work residual of every interior node and slope (seed 003, eq. (11), Sec. V-A), the tip torsion (when
free) and the platform wrench balance ``Σ_k Ad_{T_k⁻¹}ᵀ r_{b,k,N} − w_ee = 0`` (body frame; seed Sec. IV-B
second display with δζ_ee replaced by the six lengths).

Tangent: the exact element tangents (:func:`~flexlearn.physics.lse.compiled.tangent_into`) for the nodes,
slopes and ψ; the length column ∂r/∂L_k by a forward difference of rod k's residual (relative step
``FD_LENGTH``: the column is exact to ≈ 1e-7 relative, so Newton stays quadratic down to that factor).
Linear solve by static condensation along each rod (slopes onto nodes, node chain from the base to the tip:
:mod:`flexlearn.physics.lse.compiled_condense` does the same for the forward problem), the torsion row, then a
6 × 6 system in δL. The same factorisation gives the sensitivity ``dq/dζ_ee`` (six more tip-motion columns),
used as the first-order warm-start predictor along a pose path. Pose helpers and the cold start live in
:mod:`~flexlearn.physics.lse.pose_geometry`, the condensed solve in :mod:`~flexlearn.physics.lse.pose_condense`.

State arrays: g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,), lengths (R,). SI units.
"""
from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.lse.compiled import (
    _GT,
    _GTW,
    GT3,
    GTW3,
    _exp_into,
    _mm,
    alloc_parts,
    element_into,
    njit,
    refresh_pose_cache,
    tangent_nodes_into,
    workspace,
)
from flexlearn.physics.lse.compiled_solver import _exp
from flexlearn.physics.lse.newton_policy import (
    BACKTRACK_FACTOR,
    CONVERGED,
    FAILED,
    accept_trial,
    residual_verdict,
    step_scale,
    step_verdict,
)
from flexlearn.physics.lse.pose_condense import pose_system
from flexlearn.physics.lse.pose_geometry import (
    _ad_inv_t,
    _inv_pose,
    _log_se3,
    _pose_mul_into,
    _so3_log,
    cold_state,
    tip_poses,
)

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = [
    "FD_LENGTH",
    "alloc_parts",
    "cold_state",
    "pose_batch",
    "pose_newton",
    "pose_path",
    "predict_pose",
    "sensitivity",
    "tip_poses",
]

FD_LENGTH = 1e-7    # relative forward-difference step of the length column
SHORT_ELEMENT_T2 = 0.3 ** 2   # elements turning by less than 0.3 rad: 3-point quadrature in the tangent


@njit(cache=True)
def _rod_residual(k, base, g_int, beta, tip, length, kd, xi0, parts, ws, out):
    """Rod k's residual (12N,) ``[ζ_1 … ζ_{N-1}, β_1 … β_N, tip wrench r_b]`` at length ``length`` into ``out``;
    the element pieces go to ``parts[·][k, e]`` (:func:`~flexlearn.physics.lse.compiled.alloc_parts`)."""
    n = beta.shape[1]
    h = length / n
    out[:] = 0.0
    for e in range(n):
        ga = base[k] if e == 0 else g_int[k, e - 1]
        gb = tip[k] if e == n - 1 else g_int[k, e]
        element_into(ga, gb, beta[k, e], h, kd[k], xi0[k], parts, k, e, ws)
        ra, rb, rbeta = parts[10][k, e], parts[11][k, e], parts[12][k, e]
        o_b = 12 * n - 6 if e == n - 1 else 6 * e
        for i in range(6):
            if e > 0:
                out[6 * (e - 1) + i] += ra[i]
            out[o_b + i] += rb[i]
            out[6 * (n - 1) + 6 * e + i] = rbeta[i]


@njit(cache=True)
def _residuals(base, g_ee, g_int, beta, psi, lengths, tip_local, kd, xi0, w_body, parts, ws):
    """All rod residuals (R, 12N), the platform residual ``Σ Ad_{T_k⁻¹}ᵀ r_{b,k} − w_body`` (6,), tip poses."""
    r, n = beta.shape[0], beta.shape[1]
    tip = tip_poses(g_ee, tip_local, psi)
    res = np.empty((r, 12 * n))
    res_ee = -w_body.copy()
    adt = np.empty((6, 6))
    for k in range(r):
        _rod_residual(k, base, g_int, beta, tip, lengths[k], kd, xi0, parts, ws, res[k])
        _ad_inv_t(tip_local[k], psi[k], adt)
        for i in range(6):
            acc = 0.0
            for j in range(6):
                acc += adt[i, j] * res[k, 12 * n - 6 + j]
            res_ee[i] += acc
    return res, res_ee, tip


@njit(cache=True)
def _norm(res, res_ee, w, scale, twist_free):
    """Scaled residual ∞-norm: entries in N·m by the weights w (12N,) ([1, L] per node, 1/L² per β), over
    ``scale``; the rows solved for: interior nodes, slopes, tip torsion (when free), platform balance."""
    n12 = res.shape[1]
    ny = n12 - 6
    out = 0.0
    for k in range(res.shape[0]):
        for i in range(ny):
            out = max(out, abs(res[k, i] * w[i]))
        if twist_free:
            out = max(out, abs(res[k, ny + 2] * w[ny + 2]))
    for i in range(6):
        out = max(out, abs(res_ee[i] * w[ny + i]))
    return out / scale


@njit(cache=True)
def _length_column(base, g_int, beta, tip, lengths, kd, xi0, res, parts, ws, dres):
    """∂r_k/∂L_k (R, 12N) by a forward difference of each rod's residual (relative step FD_LENGTH)."""
    tmp = np.empty(res.shape[1])
    for k in range(res.shape[0]):
        dlen = FD_LENGTH * lengths[k]
        _rod_residual(k, base, g_int, beta, tip, lengths[k] + dlen, kd, xi0, parts, ws, tmp)
        for i in range(res.shape[1]):
            dres[k, i] = (tmp[i] - res[k, i]) / dlen


@njit(cache=True)
def _update_linear_parts(be, ps, ln, dy, dpsi, dl, alpha, col):
    """In place: slopes β (R, N, 6), tip twists ψ (R,) and lengths L (R,) ← · + α δ· (column ``col``)."""
    r, n = be.shape[0], be.shape[1]
    for k in range(r):
        for e in range(n):
            for i in range(6):
                be[k, e, i] += alpha * dy[k, 6 * (n - 1) + 6 * e + i, col]
        ps[k] += alpha * dpsi[k, col]
        ln[k] += alpha * dl[k, col]


@njit(cache=True)
def _retract(g_int, beta, psi, lengths, dy, dpsi, dl, alpha, col):
    """``g ← g exp(α δζ^)`` on the interior nodes, ``β, ψ, L ← · + α δ·`` (column ``col`` of the corrections)."""
    r, n = beta.shape[0], beta.shape[1]
    gi = g_int.copy()
    be = beta.copy()
    ps = psi.copy()
    ln = lengths.copy()
    x = np.empty(6)
    for k in range(r):
        for j in range(n - 1):
            for i in range(6):
                x[i] = alpha * dy[k, 6 * j + i, col]
            gi[k, j] = _mm(g_int[k, j], _exp(x))
    _update_linear_parts(be, ps, ln, dy, dpsi, dl, alpha, col)
    return gi, be, ps, ln


@njit(cache=True)
def _retract_strain(base, g_int, beta, psi, lengths, dy, dpsi, dl, alpha, col, tip_old, tip_new, parts):
    """Strain retraction: the interior nodes rebuilt from the base, ``g_j = g_{j-1} exp((Ω_j + α δΩ_j)^)`` with
    the linearised change of each element's relative pose ``δΩ_j = -J_l⁻¹(Ω_j) δζ_{j-1} + J_r⁻¹(Ω_j) δζ_j``
    (Ω, J_r⁻¹, J_l⁻¹ from ``parts`` of the residual at the current state; δζ_N = log(tip_old⁻¹ tip_new)), then
    the closure mismatch to the new tip spread along the rod as the fraction j/N of the rigid correction
    (as :meth:`CPRModel._retract` with ``retraction="strain"``): unlike ``g ⊕ αδζ`` node by node it does not
    stretch the nearly inextensible rods by O(|δζ|²)·EA. β, ψ, L are updated linearly. Returns the new state."""
    r, n = beta.shape[0], beta.shape[1]
    gi = g_int.copy()
    be = beta.copy()
    ps = psi.copy()
    ln = lengths.copy()
    dprev = np.zeros(6)
    dnext = np.zeros(6)
    om = np.empty(6)
    co = np.empty(6)
    step = np.empty((4, 4))
    g = np.empty((4, 4))
    g_next = np.empty((4, 4))
    for k in range(r):
        g[:, :] = base[k]
        dprev[:] = 0.0
        for e in range(n):
            if e < n - 1:
                for i in range(6):
                    dnext[i] = alpha * dy[k, 6 * e + i, col]
            else:
                dnext[:] = _log_se3(_mm(_inv_pose(tip_old[k]), tip_new[k]))
            jri, jli = parts[8][k, e], parts[9][k, e]
            for i in range(6):
                acc = parts[2][k, e][i] if i < 3 else parts[3][k, e][i - 3]
                for q in range(6):
                    acc += jri[i, q] * dnext[q] - jli[i, q] * dprev[q]
                om[i] = acc
            _exp_into(om, step, co)
            _pose_mul_into(g, step, g_next)
            g[:, :] = g_next
            if e < n - 1:
                gi[k, e] = g
            dprev[:] = dnext
        dp = tip_new[k, :3, 3] - g[:3, 3]
        dphi = _so3_log(_mm(tip_new[k, :3, :3].copy(), g[:3, :3].T.copy()))
        for j in range(1, n):
            frac = j / n
            for i in range(3):
                om[i] = frac * dphi[i]
                om[3 + i] = 0.0
            _exp_into(om, step, co)
            _pose_mul_into(step, gi[k, j - 1], g_next)
            for i in range(3):
                for q in range(3):
                    gi[k, j - 1, i, q] = g_next[i, q]
                gi[k, j - 1, i, 3] += frac * dp[i]
    _update_linear_parts(be, ps, ln, dy, dpsi, dl, alpha, col)
    return gi, be, ps, ln


@njit(cache=True)
def _largest_rotation(dy, dpsi, dl, lengths, col):
    """Largest nodal rotation [rad] (and tip twist, relative length change) of a correction column."""
    r = dy.shape[0]
    n1 = (dy.shape[1] - 6 * ((dy.shape[1] + 6) // 12)) // 6
    big = 0.0
    for k in range(r):
        big = max(big, abs(dpsi[k, col]), abs(dl[k, col]) / lengths[k])
        for j in range(n1):
            big = max(big, math.sqrt(dy[k, 6 * j, col] ** 2 + dy[k, 6 * j + 1, col] ** 2 + dy[k, 6 * j + 2, col] ** 2))
    return big


@njit(cache=True)
def _step_norm(dy, dpsi, dl, lengths, w):
    """Weighted ∞-norm of the Newton correction: rotations [rad], translations / L, slopes × L², δL / L."""
    out = 0.0
    for k in range(dy.shape[0]):
        for i in range(dy.shape[1]):
            out = max(out, abs(dy[k, i, 0] / w[i]))
        out = max(out, abs(dpsi[k, 0]), abs(dl[k, 0]) / lengths[k])
    return out


@njit(cache=True)
def _linear_step(base, g_int, beta, psi, lengths, tip, tip_local, kd, xi0, w_body, twist_free, res, parts, ws, hel,
                 dres, adt, dy, dpsi, dl, nc):
    """Tangent (element tangents from ``parts`` of the residual ``res``, the length column) and the condensed
    solve (:func:`~flexlearn.physics.lse.pose_condense.pose_system`) into dy, dpsi, dl (column 0: Newton step, 1 + i < nc: d/dζ_ee,i). False:
    singular."""
    r, n = beta.shape[0], beta.shape[1]
    for k in range(r):
        h = lengths[k] / n
        for e in range(n):
            short = parts[4][k, e] < SHORT_ELEMENT_T2   # quadrature sized to the element's rotation
            gt, gtw = (GT3, GTW3) if short else (_GT, _GTW)
            tangent_nodes_into(parts, k, e, h, kd[k], hel[k, e], ws, gt, gtw)   # one call site: inlined once
        _ad_inv_t(tip_local[k], psi[k], adt[k])
    _length_column(base, g_int, beta, tip, lengths, kd, xi0, res, parts, ws, dres)
    return pose_system(hel, res, dres, adt, w_body, twist_free, dy, dpsi, dl, nc)


@njit(cache=True)
def sensitivity(base, g_ee, tip_local, kd, xi0, w_body, state, twist_free, sens_y, sens_psi, sens_l):
    """The predictor's sensitivity d(ζ, β; ψ; L)/dζ_ee at a solved ``state`` (one tangent and solve) into sens_y
    (R, 12N - 6, 6), sens_psi, sens_l (R, 6); returns (True when finite, the element pieces at ``state``)."""
    g_int, beta, psi, lengths = state
    r, n = beta.shape[0], beta.shape[1]
    parts = alloc_parts(r, n)
    ws = workspace()
    res, _res_ee, tip = _residuals(base, g_ee, g_int, beta, psi, lengths, tip_local, kd, xi0, w_body, parts, ws)
    dy = np.empty((r, 12 * n - 6, 7))
    dpsi = np.empty((r, 7))
    dl = np.empty((r, 7))
    ok = _linear_step(base, g_int, beta, psi, lengths, tip, tip_local, kd, xi0, w_body, twist_free, res, parts, ws,
                      np.empty((r, n, 18, 18)), np.empty((r, 12 * n)), np.empty((r, 6, 6)), dy, dpsi, dl, 7)
    sens_y[:] = dy[:, :, 1:]
    sens_psi[:] = dpsi[:, 1:]
    sens_l[:] = dl[:, 1:]
    # the tangent pass left the pieces of the residual at ``state`` in place except those the length column
    # perturbed; recompute them for the predictor's retraction
    _residuals(base, g_ee, g_int, beta, psi, lengths, tip_local, kd, xi0, w_body, parts, ws)
    return ok, parts


@njit(cache=True)
def pose_newton(base, g_ee, tip_local, kd, xi0, w_body, g_int, beta, psi, lengths, w, scale, tol, max_iter,
                max_rot, step_tol, growth, backtracks, twist_free, sens_y, sens_psi, sens_l, log):
    """Riemannian Newton for one platform pose ``g_ee`` (4, 4) from the state (g_int, beta, psi, lengths); the
    stopping and step rules of :mod:`flexlearn.physics.lse.newton_policy`. Writes the last factorisation's
    sensitivity d(ζ, β; ψ; L)/dζ_ee into sens_y (R, 12N - 6, 6), sens_psi (R, 6), sens_l (R, 6) and the scaled
    residual norms into ``log``. Returns (status 1 converged / 0 failed, g_int, beta, psi, lengths, iterations,
    log length, has_sens, the element pieces of the last residual (for the predictor's retraction))."""
    r, n = beta.shape[0], beta.shape[1]
    ny = 12 * n - 6
    parts = alloc_parts(r, n)
    parts_c = alloc_parts(r, n)
    ws = workspace()
    res, res_ee, tip = _residuals(base, g_ee, g_int, beta, psi, lengths, tip_local, kd, xi0, w_body, parts, ws)
    norm = _norm(res, res_ee, w, scale, twist_free)
    log[0] = norm
    nlog = 1
    first = norm
    it = 0
    has_sens = False
    hel = np.empty((r, n, 18, 18))
    dres = np.empty((r, 12 * n))
    adt = np.empty((r, 6, 6))
    dy = np.empty((r, ny, 7))
    dpsi = np.empty((r, 7))
    dl = np.empty((r, 7))
    while True:
        verdict = residual_verdict(norm, first, it, tol, max_iter)
        if verdict == CONVERGED:
            return 1, g_int, beta, psi, lengths, it, nlog, has_sens, parts
        if verdict == FAILED:
            return 0, g_int, beta, psi, lengths, it, nlog, has_sens, parts
        # the sensitivity (six more columns) from every factorisation: the predictor wants the last one (near
        # equilibrium; at a predicted start the axial-force errors skew the geometric stiffness: measured 3
        # instead of 2 Newton iterations per pose on the CSG path with the first factorisation's)
        nc = 7
        ok = _linear_step(base, g_int, beta, psi, lengths, tip, tip_local, kd, xi0, w_body, twist_free, res, parts, ws,
                          hel, dres, adt, dy, dpsi, dl, nc)
        step = _step_norm(dy, dpsi, dl, lengths, w) if ok else np.inf
        verdict = step_verdict(step, step_tol)
        if verdict == FAILED:
            return 0, g_int, beta, psi, lengths, it, nlog, has_sens, parts
        if nc == 7:
            sens_y[:] = dy[:, :, 1:]
            sens_psi[:] = dpsi[:, 1:]
            sens_l[:] = dl[:, 1:]
            has_sens = True
        if verdict == CONVERGED:  # round-off floor: apply the correction, no new residual
            g_int, beta, psi, lengths = _retract(g_int, beta, psi, lengths, dy, dpsi, dl, 1.0, 0)
            return 1, g_int, beta, psi, lengths, it, nlog, has_sens, parts
        alpha = step_scale(_largest_rotation(dy, dpsi, dl, lengths, 0), max_rot)
        for _ in range(backtracks + 1):
            tip_new = tip_poses(g_ee, tip_local, psi + alpha * dpsi[:, 0])
            c_int, c_beta, c_psi, c_len = _retract_strain(base, g_int, beta, psi, lengths, dy, dpsi, dl, alpha, 0,
                                                          tip, tip_new, parts)
            res_c, res_ee_c, tip_c = _residuals(base, g_ee, c_int, c_beta, c_psi, c_len, tip_local, kd, xi0,
                                                w_body, parts_c, ws)
            n_c = _norm(res_c, res_ee_c, w, scale, twist_free)
            if accept_trial(n_c, norm, growth):
                break
            alpha *= BACKTRACK_FACTOR
        g_int, beta, psi, lengths = c_int, c_beta, c_psi, c_len
        res, res_ee, tip, norm = res_c, res_ee_c, tip_c, n_c
        parts, parts_c = parts_c, parts
        it += 1
        if nlog < log.shape[0]:
            log[nlog] = norm
            nlog += 1


@njit(cache=True)
def predict_pose(base, g_old, g_new, tip_local, g_int, beta, psi, lengths, sens_y, sens_psi, sens_l, parts, max_rot):
    """First-order warm start for the platform move ``g_old → g_new``: ``q ⊕ (dq/dζ_ee) dz``, dz = log(g_old⁻¹
    g_new), by the strain retraction (``parts``: the element pieces at the old solution); the state unchanged
    when a node would turn by more than ``max_rot`` [rad]."""
    dz = _log_se3(_mm(_inv_pose(g_old), g_new))
    r, ny = sens_y.shape[0], sens_y.shape[1]
    dy = np.zeros((r, ny, 1))
    dpsi = np.zeros((r, 1))
    dl = np.zeros((r, 1))
    for k in range(r):
        for c in range(6):
            for i in range(ny):
                dy[k, i, 0] += sens_y[k, i, c] * dz[c]
            dpsi[k, 0] += sens_psi[k, c] * dz[c]
            dl[k, 0] += sens_l[k, c] * dz[c]
    if not _largest_rotation(dy, dpsi, dl, lengths, 0) <= max_rot:
        return g_int, beta, psi, lengths
    return _retract_strain(base, g_int, beta, psi, lengths, dy, dpsi, dl, 1.0, 0, tip_poses(g_old, tip_local, psi),
                           tip_poses(g_new, tip_local, psi + dpsi[:, 0]), parts)


@njit(cache=True)
def _solve_stepped(base, g_from, g_to, tip_local, kd, xi0, w_body, state, w, scale, tol, max_iter, max_rot,
                   step_tol, growth, backtracks, twist_free, predictor, sens, log):
    """Solve at ``g_to`` from the solution ``state`` at ``g_from`` by adaptive continuation along the SE(3)
    geodesic: the whole step first; a failed step is halved (down to 1/1024 of the way), a converged one
    doubles the next. Each step is warm-started by the first-order predictor when ``predictor`` (the
    sensitivity computed at ``state`` when ``sens`` has none): a platform move with the rods left in place
    stretches them by O(move)·EA, which Newton from there handles poorly on slender rods. ``sens``: (sens_y,
    sens_psi, sens_l, has_sens, element pieces at ``state``), updated in place. Returns (status, state, total
    Newton iterations, has_sens, element pieces at the returned state)."""
    sens_y, sens_psi, sens_l, has_sens, parts = sens
    if predictor and not has_sens:
        has_sens, parts = sensitivity(base, g_from, tip_local, kd, xi0, w_body, state, twist_free, sens_y, sens_psi,
                                      sens_l)
    sy, spsi, sl = sens_y.copy(), sens_psi.copy(), sens_l.copy()
    dz = _log_se3(_mm(_inv_pose(g_from), g_to))
    total = 0
    t, dt = 0.0, 1.0
    cur = state
    g_prev = g_from
    while t < 1.0:
        t_new = min(1.0, t + dt)
        g_i = _mm(g_from, _exp(dz * t_new))
        g_int, beta, psi, lengths = cur
        if predictor and has_sens:
            g_int, beta, psi, lengths = predict_pose(base, g_prev, g_i, tip_local, g_int, beta, psi, lengths,
                                                     sens_y, sens_psi, sens_l, parts, max_rot)
        ok, g_int, beta, psi, lengths, it, _nlog, hs_new, parts_new = pose_newton(
            base, g_i, tip_local, kd, xi0, w_body, g_int, beta, psi, lengths, w, scale, tol, max_iter, max_rot,
            step_tol, growth, backtracks, twist_free, sy, spsi, sl, log)
        total += it
        if ok == 1:
            cur = (g_int, beta, psi, lengths)
            parts = parts_new
            if hs_new:
                sens_y[:] = sy
                sens_psi[:] = spsi
                sens_l[:] = sl
                has_sens = True
            t = t_new
            g_prev = g_i
            dt *= 2.0
        else:
            dt *= 0.5
            if dt < 1.0 / 1024:
                return 0, state, total, has_sens, parts
    return 1, cur, total, has_sens, parts


@njit(cache=True)
def pose_path(base, g_start, poses, tip_local, kd, xi0, w_body, g_int, beta, psi, lengths, sens, w, scale, tol,
              max_iter, max_rot, step_tol, growth, backtracks, twist_free, predictor):
    """Solve along a pose path (P, 4, 4) warm-started from the solution (g_int, beta, psi, lengths) at
    ``g_start`` (``sens``: its predictor data, as :func:`_solve_stepped`), all in one compiled call. Returns (solved count, lengths (P, R), psi (P, R), g_int (P, R, N-1,
    4, 4), beta (P, R, N, 6), Newton iterations (P,)); the count is short of P when a pose failed."""
    r, n = beta.shape[0], beta.shape[1]
    npose = poses.shape[0]
    out_l = np.zeros((npose, r))
    out_psi = np.zeros((npose, r))
    out_gi = np.zeros((npose, r, n - 1, 4, 4))
    out_b = np.zeros((npose, r, n, 6))
    iters = np.zeros(npose, dtype=np.int64)
    log = np.empty(max_iter + 2)
    state = (g_int, beta, psi, lengths)
    g_prev = g_start
    for p in range(npose):
        ok, state, it, hs, parts = _solve_stepped(base, g_prev, poses[p], tip_local, kd, xi0, w_body, state, w, scale,
                                                  tol, max_iter, max_rot, step_tol, growth, backtracks, twist_free,
                                                  predictor, sens, log)
        if ok == 0:
            return p, out_l, out_psi, out_gi, out_b, iters
        sens = (sens[0], sens[1], sens[2], hs, parts)
        out_gi[p], out_b[p], out_psi[p], out_l[p] = state
        iters[p] = it
        g_prev = poses[p]
    return npose, out_l, out_psi, out_gi, out_b, iters


@njit(cache=True)
def pose_batch(base, poses, tip_local, kd, xi0, w_body, g_ref, ref_state, ref_sens, w, scale, tol, max_iter, max_rot,
               step_tol, growth, backtracks, twist_free):
    """Independent poses (P, 4, 4), each from the reference solution ``ref_state`` at ``g_ref`` (its predictor
    data ``ref_sens``, as :func:`_solve_stepped`): the first-order predictor over the whole move, Newton, and
    adaptive continuation where that fails; the cold start (:func:`cold_state`) as the last resort. Returns
    (status (P,), lengths (P, R), psi (P, R), Newton iterations (P,))."""
    r, n = ref_state[1].shape[0], ref_state[1].shape[1]
    npose = poses.shape[0]
    status = np.zeros(npose, dtype=np.int64)
    out_l = np.zeros((npose, r))
    out_psi = np.zeros((npose, r))
    iters = np.zeros(npose, dtype=np.int64)
    sy, spsi, sl, hs, parts = ref_sens
    if not hs:
        hs, parts = sensitivity(base, g_ref, tip_local, kd, xi0, w_body, ref_state, twist_free, sy, spsi, sl)
    log = np.empty(max_iter + 2)
    for p in range(npose):
        ok, st, it, _hs, _parts = _solve_stepped(base, g_ref, poses[p], tip_local, kd, xi0, w_body, ref_state, w,
                                                 scale, tol, max_iter, max_rot, step_tol, growth, backtracks,
                                                 twist_free, True, (sy.copy(), spsi.copy(), sl.copy(), hs, parts), log)
        g_int, beta, psi, lengths = st
        if ok == 0:
            g_int, beta, psi, lengths = cold_state(base, poses[p], tip_local, n)
            ok, g_int, beta, psi, lengths, it2, _nlog, _hs, _parts = pose_newton(
                base, poses[p], tip_local, kd, xi0, w_body, g_int, beta, psi, lengths, w, scale, tol, max_iter,
                max_rot, step_tol, growth, backtracks, twist_free, sy.copy(), spsi.copy(), sl.copy(), log)
            it += it2
        status[p] = ok
        out_l[p] = lengths
        out_psi[p] = psi
        iters[p] = it
    return status, out_l, out_psi, iters
