"""Compiled (numba) Riemannian Newton iterations of the CPR statics, for forward solves without gradients.

The same discrete equations and control flow as :meth:`CPRModel._newton` with the nodal retraction
(closed chains; seed 003, Sec. V): rod-local residual ``r = Σ P_{k,e}ᵀ r_{k,e} - Σ D_iᵀ F_i`` and tangent
``K_t = Σ P_{k,e}ᵀ H_{k,e} P_{k,e}`` + load stiffness (:mod:`flexlearn.physics.lse.assembly`, elements from
:mod:`flexlearn.physics.lse.compiled.elements`; the residual pass keeps the element pieces the tangent reuses), the
solve by condensation along each rod onto the platform twist with the sensitivity ``dq/dθ = -K_t⁻¹ ∂r/∂θ``
(:mod:`flexlearn.physics.lse.compiled.condense`; the system of :meth:`CPRModel._newton_step`), the rotation step cap,
the relaxed residual-growth backtracking and the stopping rules (scaled residual ∞-norm below ``tol`` or a
step below ``step_tol``; failure on ``max_iter``, non-finite or 1e3-fold growth, or no progress after 6
iterations), all from :mod:`flexlearn.physics.lse.newton_policy` (shared with the torch driver). Projections P
are applied block-wise (identity blocks and ``Ad_{(g^loc)⁻¹}`` at the platform).

Used by `CPRModel` when :func:`flexlearn.physics.lse.backend.eligible` allows it (numba imports, the retraction is
nodal, no gradient is needed) and ``backend`` is ``"auto"`` or ``"numba"`` (through
:mod:`flexlearn.physics.lse.compiled.problem`); otherwise the torch path runs. Float64 numpy
arrays throughout.

Compile cost (the first call; cached on disk afterwards): numba compiles each kernel that a kernel calls as a
library of its own and links it, with everything it calls, into the caller, where LLVM optimises it and emits its
machine code again, so code k calls deep is processed k + 1 times. Hence (scripts/bench_lse_compile.py measures
the effect):

* the four large pieces of a Newton iteration, ``residual_pass``, ``tangent_pass`` and the condensation
  (:mod:`flexlearn.physics.lse.compiled.condense`), are kernels of their own that do not call one another, so that
  a first compile builds them on two processes at once (:mod:`flexlearn.physics.lse.compiled.prebuild`) and
  ``newton_iterations`` then links them from numba's cache (inlined into ``newton_iterations``, they compiled ≈ 1.6×
  longer on two CPUs, and ≈ 8 % shorter on one, before the element kernels lost their reference counting);
* single-use small code is inlined by numba (``inline="always"``): ``_base_twists`` here, ``base_columns`` and
  the single-use pieces of the element kernels (relative log, Jacobians, quadrature term of
  :mod:`flexlearn.physics.lse.compiled.elements`);
* the small helpers used at many sites (products, hat maps, 6 × 6 inverses, coefficient series) are plain kernels
  compiled once per argument type that LLVM inlines, without the CPython and C wrappers that only a call from
  Python needs (:func:`~flexlearn.physics.lse.compiled.linalg.njit_inner`);
* no kernel assigns an array to an array slice (``copy1``/``copy2`` loops instead): numba would link its
  shape-mismatch error, with the string formatting of its message, into every such kernel.
"""

from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.lse.compiled.condense import (
    base_columns,
    condense,
    condensed_apply,
)
from flexlearn.physics.lse.compiled.elements import (
    GT8,
    GTW8,
    alloc_parts,
    element_into,
    exp_se3_into,
    tangent_nodes_into,
    workspace,
)
from flexlearn.physics.lse.compiled.linalg import (
    copy2,
    gemm6,
    hat_into,
    njit,
    njit_inner,
    pose_mul_into,
    rot_t_mv_into,
)
from flexlearn.physics.lse.newton_policy import (
    BACKTRACK_FACTOR,
    CONVERGED,
    FAILED,
    accept_trial,
    residual_verdict,
    step_scale,
    step_verdict,
)

__all__ = ["base_poses", "exp_se3", "newton_iterations", "predict_state", "residual_pass", "tangent_pass"]


@njit_inner
def exp_se3(xi):
    """SE(3) exponential (4, 4) of a twist [φ; ρ] (as :func:`flexlearn.physics.lse.fused.se3_exp_fused`).

    Args:
        xi: Twist [φ; ρ] (6,).

    Returns:
        The new pose (4, 4).
    """
    out = np.empty((4, 4))
    exp_se3_into(xi, out, np.empty(6))
    return out


@njit_inner
def _nodes(base, g_ee, g_int, tip_local):
    r, n1 = g_int.shape[0], g_int.shape[1]
    nodes = np.empty((r, n1 + 2, 4, 4))
    for k in range(r):
        copy2(base[k], nodes[k, 0])
        for j in range(n1):
            copy2(g_int[k, j], nodes[k, j + 1])
        pose_mul_into(g_ee, tip_local[k], nodes[k, n1 + 1])
    return nodes


@njit_inner
def _body_loads(nodes, wn):
    """Body wrenches [Rᵀ m; Rᵀ f] (R, N+1, 6) of the world nodal loads."""
    out = np.empty(wn.shape)
    for k in range(wn.shape[0]):
        for j in range(wn.shape[1]):
            rot_t_mv_into(nodes[k, j], wn[k, j, :3], out[k, j, :3])
            rot_t_mv_into(nodes[k, j], wn[k, j, 3:], out[k, j, 3:])
    return out


@njit_inner
def _add_block(res, k, idx, adinv, v, n, sign):
    """res[k, block idx] += T_idxᵀ (sign · v) for the rod-local block of node idx (1..N) or β_e (idx = -1 - e)."""
    nl = 12 * n
    if idx == n:
        for i in range(6):
            acc = 0.0
            for j in range(6):
                acc += adinv[k, j, i] * (sign * v[j])
            res[k, nl - 6 + i] += acc
        return
    off = 6 * (n - 1) + 6 * (-1 - idx) if idx < 0 else 6 * (idx - 1)
    if idx != 0:
        for i in range(6):
            res[k, off + i] += sign * v[i]


@njit_inner
def residual_pass(base, g_ee, g_int, beta, tip_local, adinv, h, kd, xi0, wn, we, pul_pos, tension, has_pul):
    """Rod-local residuals (R, 12N) ``Σ P_{k,e}ᵀ r_{k,e} - Σ D_iᵀ F_i`` and the platform's (6,) at the state
    (g_ee, g_int, beta) with the rod bases ``base`` (R, 4, 4); world nodal loads ``wn`` (R, N+1, 6), platform
    wrench ``we`` (6,), pulley at ``pul_pos`` (3,) pulling with ``tension`` [N] when ``has_pul``. Returns (res,
    res_ee, nodes, body loads, platform moment me and force fe (3,), ∂f/∂p (3, 3), element pieces for the
    tangent).

    Args:
        base: Rod base poses (R, 4, 4).
        g_ee: Platform pose (4, 4).
        g_int: Interior nodal poses (R, N-1, 4, 4).
        beta: Strain slopes (R, N, 6) [1/m²].
        tip_local: Platform attachment of each rod (R, 4, 4), platform frame.
        adinv: Tip projections Ad_{(g^loc)⁻¹} (R, 6, 6).
        h: Element length of each rod (R,) [m].
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        wn: World nodal loads [moment; force] (R, N+1, 6).
        we: World platform wrench [moment; force] (6,).
        pul_pos: Pulley position (3,) [m].
        tension: Pulley tension [N].
        has_pul: Whether the pulley load is applied.
    """
    r, n = beta.shape[0], beta.shape[1]
    nodes = _nodes(base, g_ee, g_int, tip_local)
    res = np.zeros((r, 12 * n))
    parts = alloc_parts(r, n)
    ws = workspace()
    for k in range(r):
        for e in range(n):
            element_into(nodes[k, e], nodes[k, e + 1], beta[k, e], h[k], kd[k], xi0[k], parts, k, e, ws)
            _add_block(res, k, e, adinv, parts[10][k, e], n, 1.0)
            _add_block(res, k, e + 1, adinv, parts[11][k, e], n, 1.0)
            _add_block(res, k, -1 - e, adinv, parts[12][k, e], n, 1.0)
    body = _body_loads(nodes, wn)
    for k in range(r):
        for j in range(1, n + 1):
            _add_block(res, k, j, adinv, body[k, j], n, -1.0)
    # platform: body-frame moment me and force fe of the world wrench we (+ the pulley's pull), dfdp = ∂f/∂p
    fw = np.empty(3)
    dfdp = np.zeros((3, 3))
    for i in range(3):
        fw[i] = we[3 + i]
    if has_pul:
        u = np.empty(3)
        for i in range(3):
            u[i] = pul_pos[i] - g_ee[i, 3]
        dist = np.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
        for i in range(3):
            u[i] = u[i] / dist
            fw[i] = fw[i] + tension * u[i]
        for i in range(3):
            for j in range(3):
                dfdp[i, j] = (tension / dist) * (u[i] * u[j] - (1.0 if i == j else 0.0))
    me = np.empty(3)
    fe = np.empty(3)
    rot_t_mv_into(g_ee, we[:3], me)
    rot_t_mv_into(g_ee, fw, fe)
    res_ee = np.empty(6)
    for i in range(3):
        res_ee[i], res_ee[3 + i] = -me[i], -fe[i]
    return res, res_ee, nodes, body, me, fe, dfdp, parts


@njit_inner
def _scaled_norm(res, res_ee, w, ny, scale):
    """Scaled residual ∞-norm; ∞ when an entry is not finite (``max`` skips a NaN: a diverged state must not
    read as converged)."""
    out, total = 0.0, 0.0
    for k in range(res.shape[0]):
        for i in range(ny):
            v = abs(res[k, i] * w[i])
            out, total = max(out, v), total + v
    for i in range(6):
        acc = res_ee[i]
        for k in range(res.shape[0]):
            acc += res[k, ny + i]
        v = abs(acc * w[ny + i])
        out, total = max(out, v), total + v
    return out / scale if math.isfinite(total) else math.inf


@njit_inner
def tangent_pass(parts, adinv, h, kd, body, me, fe, dfdp, g_ee, has_pul):
    """Element tangents (R, N, 18, 18) with the nodal load stiffness ``-[[m̂, 0], [f̂, 0]]`` of node e+1 on
    each element's (ζ_b, ζ_b) block and the tip projection ``Ad_{(g^loc)⁻¹}`` on the last element's ζ_b
    rows and columns; the platform's load stiffness K_ee (6, 6) (see :meth:`AssemblyMixin.tangent`).

    Args:
        parts: Element pieces of :func:`residual_pass`.
        adinv: Tip projections Ad_{(g^loc)⁻¹} (R, 6, 6).
        h: Element length of each rod (R,) [m].
        kd: Section stiffness diagonal of each rod (R, 6).
        body: Body nodal loads (R, N+1, 6) of :func:`residual_pass`.
        me: Platform body moment (3,) [N·m].
        fe: Platform body force (3,) [N].
        dfdp: Pulley force derivative ∂f/∂p (3, 3) [N/m].
        g_ee: Platform pose (4, 4).
        has_pul: Whether the pulley load is applied.

    Returns:
        ``(hel, kee)``.
    """
    r, n = parts[4].shape[0], parts[4].shape[1]
    hel = np.empty((r, n, 18, 18))
    ws = workspace()
    hm, hf, tmp = ws[2][0], ws[2][1], ws[3][0]
    for k in range(r):
        for e in range(n):
            he = hel[k, e]
            tangent_nodes_into(parts, k, e, h[k], kd[k], he, ws, GT8, GTW8)  # tangent_into, one compile level less
            hat_into(body[k, e + 1, :3], hm)
            hat_into(body[k, e + 1, 3:], hf)
            for i in range(3):
                for j in range(3):
                    he[6 + i, 6 + j] -= hm[i, j]
                    he[9 + i, 6 + j] -= hf[i, j]
        # the tip block's rows and columns: Tᵀ H, H T (last element)
        ad = adinv[k]
        hl = hel[k, n - 1]
        for cb in range(3):
            copy2(hl[6:12, 6 * cb : 6 * cb + 6], tmp)
            gemm6(ad, tmp, hl[6:12, 6 * cb : 6 * cb + 6], 1.0, False, True)
        for rb in range(3):
            copy2(hl[6 * rb : 6 * rb + 6, 6:12], tmp)
            gemm6(tmp, ad, hl[6 * rb : 6 * rb + 6, 6:12], 1.0, False)
    kee = np.zeros((6, 6))
    hat_into(me, hm)
    hat_into(fe, hf)
    for i in range(3):
        for j in range(3):
            kee[i, j] = -hm[i, j]
            kee[3 + i, j] = -hf[i, j]
    if has_pul:  # - Rᵀ (∂f/∂p) R on the position block
        for i in range(3):
            for j in range(3):
                tmp[i, j] = g_ee[0, i] * dfdp[0, j] + g_ee[1, i] * dfdp[1, j] + g_ee[2, i] * dfdp[2, j]
        for i in range(3):
            for j in range(3):
                kee[3 + i, 3 + j] -= tmp[i, 0] * g_ee[0, j] + tmp[i, 1] * g_ee[1, j] + tmp[i, 2] * g_ee[2, j]
    return hel, kee


@njit(cache=True, inline="always")
def _base_twists(base, s_world):
    """Base twist per unit motor angle ``δζ₀ = Ad_{g₀⁻¹} S`` (R, 6) of every rod (body frame of its base pose
    ``base`` (R, 4, 4))."""
    r = base.shape[0]
    dz0 = np.empty((r, 6))
    v = np.empty(3)
    for k in range(r):
        g, sw = base[k], s_world[k]
        v[0] = sw[3] - (g[1, 3] * sw[2] - g[2, 3] * sw[1])  # v - p × ω
        v[1] = sw[4] - (g[2, 3] * sw[0] - g[0, 3] * sw[2])
        v[2] = sw[5] - (g[0, 3] * sw[1] - g[1, 3] * sw[0])
        rot_t_mv_into(g, sw[:3], dz0[k, :3])
        rot_t_mv_into(g, v, dz0[k, 3:])
    return dz0


@njit_inner
def _retract(g_ee, g_int, beta, dy, dz, alpha):
    """Nodal retraction ``g ← g exp(α δζ^)``, ``β ← β + α δβ`` (seed Sec. V-E)."""
    r, n1 = g_int.shape[0], g_int.shape[1]
    n = n1 + 1
    g_int_new = np.empty(g_int.shape)
    beta_new = np.empty(beta.shape)
    xi, co, step = np.empty(6), np.empty(6), np.empty((4, 4))
    for k in range(r):
        for j in range(n1):
            for i in range(6):
                xi[i] = alpha * dy[k, 6 * j + i]
            exp_se3_into(xi, step, co)
            pose_mul_into(g_int[k, j], step, g_int_new[k, j])
        for e in range(n):
            for i in range(6):
                beta_new[k, e, i] = beta[k, e, i] + alpha * dy[k, 6 * n1 + 6 * e + i]
    for i in range(6):
        xi[i] = alpha * dz[i]
    exp_se3_into(xi, step, co)
    g_ee_new = np.empty((4, 4))
    pose_mul_into(g_ee, step, g_ee_new)
    return g_ee_new, g_int_new, beta_new


# fmt: off
# long: 73 lines of code; its docstring documents all 26 parameters
@njit(cache=True)
def newton_iterations(base, g_ee, g_int, beta, tip_local, adinv, h, kd, xi0, wn, we, pul_pos, tension, has_pul, s_world,
                      rod_motor, n_motors, w, scale, tol, max_iter, max_rot, step_tol, growth, backtracks, log):
    # fmt: on  (the kernel's 26 arguments on two lines, not one per line)
    """Returns (status: 1 converged / 0 failed, g_ee, g_int, beta, nodes, iterations, log length, sens_y,
    sens_z, has_sens).

    The residual is evaluated at one place of the loop: first for the
    starting state, then for each trial step ``q ⊕ α δq``; a trial is taken when the relaxed test accepts it or
    when it is the last of ``backtracks + 1`` (α halved in between), as in :meth:`CPRModel._newton`.

    Args:
        base: Rod base poses (R, 4, 4).
        g_ee: Platform pose (4, 4).
        g_int: Interior nodal poses (R, N-1, 4, 4).
        beta: Strain slopes (R, N, 6) [1/m²].
        tip_local: Platform attachment of each rod (R, 4, 4), platform frame.
        adinv: Tip projections Ad_{(g^loc)⁻¹} (R, 6, 6).
        h: Element length of each rod (R,) [m].
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        wn: World nodal loads [moment; force] (R, N+1, 6).
        we: World platform wrench [moment; force] (6,).
        pul_pos: Pulley position (3,) [m].
        tension: Pulley tension [N].
        has_pul: Whether the pulley load is applied.
        s_world: World twist of each rod's motor (R, 6) (zeros for fixed rods).
        rod_motor: Motor index of each rod (R,); −1 for a fixed base.
        n_motors: Number of motors M.
        w: Residual weights (12N,).
        scale: Residual scale [N·m] of the scaled norm.
        tol: Tolerance on the scaled residual ∞-norm.
        max_iter: Iteration limit.
        max_rot: Cap on a nodal rotation increment [rad].
        step_tol: Tolerance on the weighted step ∞-norm.
        growth: Residual growth factor the relaxed backtracking test accepts.
        backtracks: Most step halvings per iteration.
        log: Output buffer (≥ max_iter + 2,) for the scaled residual norms.
    """
    r, n = beta.shape[0], beta.shape[1]
    ny = 12 * n - 6
    nlog = 0
    it = 0
    norm = 0.0
    first = 0.0
    sens_y = np.zeros((r, ny, n_motors))
    sens_z = np.zeros((6, n_motors))
    has_sens = False
    x0 = base_columns(_base_twists(base, s_world), rod_motor, n_motors)  # [Newton step | dq/dθ]
    dy = np.zeros((r, ny))
    dz = np.zeros(6)
    alpha = 1.0
    c_ee, c_int, c_beta = g_ee, g_int, beta  # the state whose residual is evaluated next
    trial = -1  # -1: the starting state, else the halvings of the trial step
    while True:
        res, res_ee, nodes, body, me, fe, dfdp, parts = residual_pass(
            base, c_ee, c_int, c_beta, tip_local, adinv, h, kd, xi0, wn, we, pul_pos, tension, has_pul
        )
        n_c = _scaled_norm(res, res_ee, w, ny, scale)
        if trial >= 0 and trial < backtracks and not accept_trial(n_c, norm, growth):
            alpha *= BACKTRACK_FACTOR
            trial += 1
            c_ee, c_int, c_beta = _retract(g_ee, g_int, beta, dy, dz, alpha)
            continue
        if trial < 0:
            first = n_c
        else:
            it += 1
        g_ee, g_int, beta, norm = c_ee, c_int, c_beta, n_c
        log[nlog] = norm
        nlog += 1
        verdict = residual_verdict(norm, first, it, tol, max_iter)
        if verdict == CONVERGED:
            break
        if verdict == FAILED:
            return 0, g_ee, g_int, beta, nodes, it, nlog, sens_y, sens_z, has_sens
        hel, kee = tangent_pass(parts, adinv, h, kd, body, me, fe, dfdp, g_ee, has_pul)
        dy_all, dz_all = condensed_apply(hel, condense(hel, kee), res, res_ee, x0)
        for k in range(r):
            for i in range(ny):
                dy[k, i] = dy_all[k, i, 0]
                for j in range(n_motors):
                    sens_y[k, i, j] = dy_all[k, i, 1 + j]
        for i in range(6):
            dz[i] = dz_all[i, 0]
            for j in range(n_motors):
                sens_z[i, j] = dz_all[i, 1 + j]
        has_sens = True
        step = 0.0
        for k in range(r):
            for i in range(ny):
                step = max(step, abs(dy[k, i] / w[i]))
        for i in range(6):
            step = max(step, abs(dz[i] / w[ny + i]))
        verdict = step_verdict(step, step_tol)
        if verdict == FAILED:
            return 0, g_ee, g_int, beta, nodes, it, nlog, sens_y, sens_z, False
        if verdict == CONVERGED:  # round-off floor: apply the correction, no new residual
            g_ee, g_int, beta = _retract(g_ee, g_int, beta, dy, dz, 1.0)
            nodes = _nodes(base, g_ee, g_int, tip_local)
            return 1, g_ee, g_int, beta, nodes, it, nlog, sens_y, sens_z, has_sens
        big = math.sqrt(dz[0] ** 2 + dz[1] ** 2 + dz[2] ** 2)
        for k in range(r):
            for j in range(n - 1):
                big = max(big, math.sqrt(dy[k, 6 * j] ** 2 + dy[k, 6 * j + 1] ** 2 + dy[k, 6 * j + 2] ** 2))
        alpha = step_scale(big, max_rot)
        trial = 0
        c_ee, c_int, c_beta = _retract(g_ee, g_int, beta, dy, dz, alpha)
    return 1, g_ee, g_int, beta, nodes, it, nlog, sens_y, sens_z, has_sens


@njit(cache=True)
def predict_state(g_ee, g_int, beta, sens_y, sens_z, dth, max_rot):
    """First-order warm-start predictor ``q ⊕ (dq/dθ) Δθ`` (see :meth:`CPRModel._predict`); returns the state
    unchanged when a node would rotate by more than ``max_rot`` [rad].

    Args:
        g_ee: Platform pose (4, 4).
        g_int: Interior nodal poses (R, N-1, 4, 4).
        beta: Strain slopes (R, N, 6) [1/m²].
        sens_y: Sensitivity dy/dθ (R, 12N - 6, M).
        sens_z: Sensitivity dz/dθ (6, M).
        dth: Motor angle change Δθ (M,) [rad].
        max_rot: Rotation cap [rad].

    Returns:
        ``(g_ee, g_int, beta)``, new arrays or the inputs.
    """
    r, ny, m = sens_y.shape
    n1 = g_int.shape[1]
    dy = np.zeros((r, ny))
    dz = np.zeros(6)
    for k in range(r):
        for i in range(ny):
            acc = 0.0
            for j in range(m):
                acc += sens_y[k, i, j] * dth[j]
            dy[k, i] = acc
    for i in range(6):
        acc = 0.0
        for j in range(m):
            acc += sens_z[i, j] * dth[j]
        dz[i] = acc
    big = math.sqrt(dz[0] ** 2 + dz[1] ** 2 + dz[2] ** 2)
    for k in range(r):
        for j in range(n1):
            big = max(big, math.sqrt(dy[k, 6 * j] ** 2 + dy[k, 6 * j + 1] ** 2 + dy[k, 6 * j + 2] ** 2))
    if not big <= max_rot:
        return g_ee, g_int, beta
    return _retract(g_ee, g_int, beta, dy, dz, 1.0)


@njit(cache=True)
def base_poses(base0, s_world, rod_motor, theta):
    """Rod base poses (R, 4, 4) ``g_{k,0} = exp(θ_m S_m^) g⁰_{k,0}`` (seed Sec. IV-B); fixed rods keep g⁰.

    Args:
        base0: Base poses at θ = 0 (R, 4, 4).
        s_world: World twist of each rod's motor (R, 6).
        rod_motor: Motor index of each rod (R,); −1 for a fixed base.
        theta: Motor angles (M,) [rad].

    Returns:
        The new base poses (R, 4, 4).
    """
    out = np.empty(base0.shape)
    xi, co, step = np.empty(6), np.empty(6), np.empty((4, 4))
    for k in range(base0.shape[0]):
        if rod_motor[k] >= 0:
            for i in range(6):
                xi[i] = theta[rod_motor[k]] * s_world[k, i]
            exp_se3_into(xi, step, co)
            pose_mul_into(step, base0[k], out[k])
        else:
            copy2(base0[k], out[k])
    return out
