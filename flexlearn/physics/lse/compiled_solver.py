"""Compiled (numba) Riemannian Newton iterations of the CPR statics, for forward solves without gradients.

The same discrete equations and control flow as :meth:`CPRModel._newton` with the nodal retraction
(closed chains; seed 003, Sec. V): rod-local residual ``r = Σ P_{k,e}ᵀ r_{k,e} - Σ D_iᵀ F_i`` and tangent
``K_t = Σ P_{k,e}ᵀ H_{k,e} P_{k,e}`` + load stiffness (:mod:`flexlearn.physics.lse.assembly`, elements from
:mod:`flexlearn.physics.lse.compiled`), per-rod condensation onto the platform twist and the 6 × 6 Schur
solve with the sensitivity ``dq/dθ = -K_t⁻¹ ∂r/∂θ`` (:meth:`CPRModel._newton_step`), the rotation step cap,
the relaxed residual-growth backtracking and the stopping rules (scaled residual ∞-norm below ``tol`` or a
step below ``step_tol``; failure on ``max_iter``, non-finite or 1e3-fold growth, or no progress after 6
iterations). Projections P are applied block-wise (identity blocks and ``Ad_{(g^loc)⁻¹}`` at the platform).

Used by `CPRModel` when ``kernels == "numba"``, numba imports, the retraction is nodal and no gradient is
needed (:func:`newton_compiled`); otherwise the torch path runs. Float64 numpy arrays throughout.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from flexlearn.physics.lse.compiled import (HAVE_NUMBA, _blocks, _coefficients, _cross, _element, _hat, _mm,
                                            _mv, element_tangent_nb, njit)
from flexlearn.physics.lse.state import motor_twist

__all__ = ["HAVE_NUMBA", "newton_compiled", "retract_compiled"]


@njit(cache=True)
def _exp(xi):
    """SE(3) exponential (4, 4) of a twist [φ; ρ] (as :func:`flexlearn.physics.lse.fused.se3_exp_fused`)."""
    phi, rho = xi[:3], xi[3:]
    co = _coefficients(phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2])
    ph = _hat(phi)
    out = np.zeros((4, 4))
    out[:3, :3] = np.eye(3) + co[0] * ph + co[1] * _mm(ph, ph)
    u = _cross(phi, rho)
    out[:3, 3] = rho + co[1] * u + co[2] * _cross(phi, u)
    out[3, 3] = 1.0
    return out


@njit(cache=True)
def _nodes(base, g_ee, g_int, tip_local):
    r, n1 = g_int.shape[0], g_int.shape[1]
    nodes = np.empty((r, n1 + 2, 4, 4))
    for k in range(r):
        nodes[k, 0] = base[k]
        for j in range(n1):
            nodes[k, j + 1] = g_int[k, j]
        nodes[k, n1 + 1] = _mm(g_ee, tip_local[k])
    return nodes


@njit(cache=True)
def _body_loads(nodes, wn):
    """Body wrenches [Rᵀ m; Rᵀ f] (R, N+1, 6) of the world nodal loads."""
    out = np.empty(wn.shape)
    for k in range(wn.shape[0]):
        for j in range(wn.shape[1]):
            rt = nodes[k, j, :3, :3].T.copy()
            out[k, j, :3] = _mv(rt, wn[k, j, :3].copy())
            out[k, j, 3:] = _mv(rt, wn[k, j, 3:].copy())
    return out


@njit(cache=True)
def _add_block(res, k, idx, adinv, v, n):
    """res[k, block idx] += T_idxᵀ v for the rod-local block of node idx (1..N) or β_e (idx = -1 - e)."""
    nl = 12 * n
    if idx == n:
        for i in range(6):
            acc = 0.0
            for j in range(6):
                acc += adinv[k, j, i] * v[j]
            res[k, nl - 6 + i] += acc
        return
    off = 6 * (n - 1) + 6 * (-1 - idx) if idx < 0 else 6 * (idx - 1)
    if idx != 0:
        for i in range(6):
            res[k, off + i] += v[i]


@njit(cache=True)
def _residual(base, g_ee, g_int, beta, tip_local, adinv, h, kd, xi0, wn, we, pul_pos, tension, has_pul):
    r, n = beta.shape[0], beta.shape[1]
    nodes = _nodes(base, g_ee, g_int, tip_local)
    res = np.zeros((r, 12 * n))
    for k in range(r):
        for e in range(n):
            parts = _element(nodes[k, e], nodes[k, e + 1], beta[k, e], h[k], kd[k], xi0[k])
            _add_block(res, k, e, adinv, parts[10], n)
            _add_block(res, k, e + 1, adinv, parts[11], n)
            _add_block(res, k, -1 - e, adinv, parts[12], n)
    body = _body_loads(nodes, wn)
    for k in range(r):
        for j in range(1, n + 1):
            _add_block(res, k, j, adinv, -body[k, j], n)
    re_t = g_ee[:3, :3].T.copy()
    me = _mv(re_t, we[:3].copy())
    fw = we[3:].copy()
    dfdp = np.zeros((3, 3))
    if has_pul:
        d = pul_pos - g_ee[:3, 3]
        dist = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
        u = d / dist
        fw = fw + tension * u
        for i in range(3):
            for j in range(3):
                dfdp[i, j] = (tension / dist) * (u[i] * u[j] - (1.0 if i == j else 0.0))
    fe = _mv(re_t, fw)
    res_ee = -np.concatenate((me, fe))
    return res, res_ee, nodes, body, me, fe, dfdp


@njit(cache=True)
def _scaled_norm(res, res_ee, w, ny, scale):
    out = 0.0
    for k in range(res.shape[0]):
        for i in range(ny):
            out = max(out, abs(res[k, i] * w[i]))
    for i in range(6):
        acc = res_ee[i]
        for k in range(res.shape[0]):
            acc += res[k, ny + i]
        out = max(out, abs(acc * w[ny + i]))
    return out / scale


@njit(cache=True)
def _offset(block, n):
    """Rod-local offset of a block: node idx (1..N) or β_e (idx = -1 - e); -1: no unknown (base node)."""
    if block < 0:
        return 6 * (n - 1) + 6 * (-1 - block)
    if block == n:
        return 12 * n - 6
    if block > 0:
        return 6 * (block - 1)
    return -1


@njit(cache=True)
def _tangent(nodes, beta, tip_local, adinv, h, kd, xi0, body, me, fe, dfdp, g_ee, has_pul, s_world,
             rod_motor, n_motors):
    """K_t (R, 12N, 12N), K_ee (6, 6), ∂r/∂θ (R, 12N, M) (see :meth:`AssemblyMixin._tangent`); the
    projections are identity blocks except ``Ad_{(g^loc)⁻¹}`` at the tip node (block N)."""
    r, n = beta.shape[0], beta.shape[1]
    nl = 12 * n
    kt = np.zeros((r, nl, nl))
    drdth = np.zeros((r, nl, n_motors))
    z3 = np.zeros((3, 3))
    for k in range(r):
        hm = element_tangent_nb(nodes[k, :-1].copy(), nodes[k, 1:].copy(), beta[k].copy(),
                                np.full(n, h[k]), np.repeat(kd[k], n).reshape(6, n).T.copy(),
                                np.repeat(xi0[k], n).reshape(6, n).T.copy())
        ad = adinv[k].copy()
        ad_t = ad.T.copy()
        # the tip block's rows and columns: Tᵀ H, H T (element N-1 only)
        e = n - 1
        hl = hm[e].copy()
        hl[6:12] = _mm(ad_t, hm[e, 6:12].copy())
        hl[:, 6:12] = _mm(hl[:, 6:12].copy(), ad)
        hm[e] = hl
        for e in range(n):
            hm[e, 6:12, 6:12] -= _blocks(_hat(body[k, e + 1, :3].copy()), z3, _hat(body[k, e + 1, 3:].copy()), z3) \
                if e < n - 1 else _mm(_mm(ad_t, _blocks(_hat(body[k, n, :3].copy()), z3,
                                                        _hat(body[k, n, 3:].copy()), z3)), ad)
            blocks = (e, e + 1, -1 - e)
            for bi in range(3):
                oi = _offset(blocks[bi], n)
                if oi < 0:
                    continue
                for bj in range(3):
                    oj = _offset(blocks[bj], n)
                    if oj < 0:
                        continue
                    for i in range(6):
                        for j in range(6):
                            kt[k, oi + i, oj + j] += hm[e, 6 * bi + i, 6 * bj + j]
            if e == 0 and rod_motor[k] >= 0:
                rb = nodes[k, 0, :3, :3].T.copy()
                pb = nodes[k, 0, :3, 3].copy()
                sw = s_world[k]
                dz0 = np.concatenate((_mv(rb, sw[:3].copy()), _mv(rb, sw[3:] - _cross(pb, sw[:3].copy()))))
                for bi in range(1, 3):
                    oi = _offset(blocks[bi], n)
                    drdth[k, oi:oi + 6, rod_motor[k]] += _mv(hm[e, 6 * bi:6 * bi + 6, :6].copy(), dz0)
    kee = -_blocks(_hat(me), z3, _hat(fe), z3)
    if has_pul:
        rot = g_ee[:3, :3].copy()
        kee[3:, 3:] -= _mm(_mm(rot.T.copy(), dfdp), rot)
    return kt, kee, drdth


@njit(cache=True)
def _newton_step(res, kt, res_ee, kee, drdth, ny):
    """Condensed solve of K_t δq = -r and the sensitivity (see :meth:`CPRModel._newton_step`)."""
    r, nl = res.shape[0], res.shape[1]
    m = drdth.shape[2]
    nc = 1 + m
    s = kee.copy()
    rz = np.zeros((6, nc))
    rz[:, 0] += res_ee
    xs = np.empty((r, ny, 6 + nc))
    for k in range(r):
        rhs = np.empty((ny, 6 + nc))
        rhs[:, :6] = kt[k, :ny, ny:]
        rhs[:, 6] = res[k, :ny]
        rhs[:, 7:] = drdth[k, :ny]
        x = np.linalg.solve(kt[k, :ny, :ny].copy(), rhs)
        xs[k] = x
        kzy = kt[k, ny:, :ny].copy()
        s += kt[k, ny:, ny:] - _mm(kzy, x[:, :6].copy())
        rz[:, 0] += res[k, ny:]
        rz[:, 1:] += drdth[k, ny:]
        rz -= _mm(kzy, x[:, 6:].copy())
    dz = -np.linalg.solve(s, rz)
    dy = np.empty((r, ny, nc))
    for k in range(r):
        dy[k] = -(xs[k, :, 6:] + _mm(xs[k, :, :6].copy(), dz))
    return dy, dz


@njit(cache=True)
def _retract(g_ee, g_int, beta, dy, dz, alpha):
    """Nodal retraction ``g ← g exp(α δζ^)``, ``β ← β + α δβ`` (seed Sec. V-E)."""
    r, n1 = g_int.shape[0], g_int.shape[1]
    n = n1 + 1
    g_int_new = np.empty(g_int.shape)
    beta_new = np.empty(beta.shape)
    for k in range(r):
        for j in range(n1):
            g_int_new[k, j] = _mm(g_int[k, j].copy(), _exp(alpha * dy[k, 6 * j:6 * j + 6]))
        for e in range(n):
            beta_new[k, e] = beta[k, e] + alpha * dy[k, 6 * n1 + 6 * e:6 * n1 + 6 * e + 6]
    return _mm(g_ee, _exp(alpha * dz)), g_int_new, beta_new


@njit(cache=True)
def _newton(base, g_ee, g_int, beta, tip_local, adinv, h, kd, xi0, wn, we, pul_pos, tension, has_pul,
            s_world, rod_motor, n_motors, w, scale, tol, max_iter, max_rot, step_tol, growth, backtracks, log):
    """Returns (status: 1 converged / 0 failed, g_ee, g_int, beta, iterations, log length, sens_y, sens_z,
    has_sens)."""
    r, n = beta.shape[0], beta.shape[1]
    ny = 12 * n - 6
    res, res_ee, nodes, body, me, fe, dfdp = _residual(base, g_ee, g_int, beta, tip_local, adinv, h, kd, xi0,
                                                      wn, we, pul_pos, tension, has_pul)
    norm = _scaled_norm(res, res_ee, w, ny, scale)
    nlog = 0
    log[nlog] = norm
    nlog += 1
    first = norm
    it = 0
    sens_y = np.zeros((r, ny, n_motors))
    sens_z = np.zeros((6, n_motors))
    has_sens = False
    while norm > tol:
        if it >= max_iter or not np.isfinite(norm) or norm > 1e3 * max(first, 10.0) or (it >= 6 and norm > first):
            return 0, g_ee, g_int, beta, it, nlog, sens_y, sens_z, has_sens
        kt, kee, drdth = _tangent(nodes, beta, tip_local, adinv, h, kd, xi0, body, me, fe, dfdp, g_ee,
                                  has_pul, s_world, rod_motor, n_motors)
        dy_all, dz_all = _newton_step(res, kt, res_ee, kee, drdth, ny)
        dy = dy_all[:, :, 0].copy()
        dz = dz_all[:, 0].copy()
        sens_y = dy_all[:, :, 1:].copy()
        sens_z = dz_all[:, 1:].copy()
        has_sens = True
        step = 0.0
        for k in range(r):
            for i in range(ny):
                step = max(step, abs(dy[k, i] / w[i]))
        for i in range(6):
            step = max(step, abs(dz[i] / w[ny + i]))
        if step < step_tol:
            return 1, g_ee, g_int, beta, it, nlog, sens_y, sens_z, has_sens
        big = math.sqrt(dz[0] ** 2 + dz[1] ** 2 + dz[2] ** 2)
        for k in range(r):
            for j in range(n - 1):
                big = max(big, math.sqrt(dy[k, 6 * j] ** 2 + dy[k, 6 * j + 1] ** 2 + dy[k, 6 * j + 2] ** 2))
        if not np.isfinite(big):
            return 0, g_ee, g_int, beta, it, nlog, sens_y, sens_z, has_sens
        alpha = 1.0 if big <= max_rot else max_rot / big
        for _ in range(backtracks + 1):
            c_ee, c_int, c_beta = _retract(g_ee, g_int, beta, dy, dz, alpha)
            res_c, res_ee_c, nodes_c, body_c, me_c, fe_c, dfdp_c = _residual(
                base, c_ee, c_int, c_beta, tip_local, adinv, h, kd, xi0, wn, we, pul_pos, tension, has_pul)
            n_c = _scaled_norm(res_c, res_ee_c, w, ny, scale)
            if n_c <= growth * norm:
                break
            alpha *= 0.5
        g_ee, g_int, beta = c_ee, c_int, c_beta
        res, res_ee, nodes, body, me, fe, dfdp, norm = res_c, res_ee_c, nodes_c, body_c, me_c, fe_c, dfdp_c, n_c
        it += 1
        log[nlog] = norm
        nlog += 1
    return 1, g_ee, g_int, beta, it, nlog, sens_y, sens_z, has_sens


def _np(t) -> np.ndarray:
    return t.detach().to(torch.float64).contiguous().numpy()


def newton_compiled(model, th, loads, state, scale, tol, max_iter, max_rot, log, step_tol=1e-13):
    """Drop-in for :meth:`CPRModel._newton` (no gradients, nodal retraction): returns (converged, state,
    iterations, None, sensitivity or None)."""
    g_ee, g_int, beta = state
    r, n = model.n_rods, model.n_elements
    base = model._bases_cached(th)
    nodes0 = model._all_nodes(th, g_ee, g_int)
    wn = model._loads_on_nodes(nodes0, loads)
    we = model._ee_load(g_ee, loads)
    has_pul = loads.pulley_position is not None and loads.pulley_tension is not None
    pul_pos = _np(loads.pulley_position) if has_pul else np.zeros(3)
    tension = float(loads.pulley_tension) if has_pul else 0.0
    m = model.motor_axis.shape[0]
    if m > 0:
        s_world = _np(motor_twist(model.motor_axis, model.motor_pivot)[model.rod_motor.clamp_min(0)])
    else:
        s_world = np.zeros((r, 6))
    adinv = _np(model.proj_nodes[:, n, :, 12 * n - 6:])
    buf = np.zeros(max_iter + 2)
    ok, ge, gi, be, it, nlog, sy, sz, has_sens = _newton(
        _np(base), _np(g_ee), _np(g_int), _np(beta), _np(model.tip_local), adinv, _np(model.lengths / n),
        _np(model.stiffness()), _np(model.xi0), _np(wn), _np(we), pul_pos, tension, has_pul, s_world,
        model.rod_motor.numpy().astype(np.int64), m, _np(model._w), float(scale), float(tol), int(max_iter),
        float(max_rot), float(step_tol), float(model.growth), int(model.backtracks), buf)
    log.extend(buf[:nlog].tolist())
    sens = (torch.from_numpy(sy), torch.from_numpy(sz)) if has_sens else None
    new_state = (torch.from_numpy(np.ascontiguousarray(ge)), torch.from_numpy(np.ascontiguousarray(gi)),
                 torch.from_numpy(np.ascontiguousarray(be)))
    return bool(ok), new_state, int(it), None, sens


def retract_compiled(g_ee, g_int, beta, dy, dz, alpha: float = 1.0):
    """Nodal retraction of :meth:`CPRModel._retract` (``retraction == "nodal"``) on torch tensors, compiled."""
    ge, gi, be = _retract(_np(g_ee), _np(g_int), _np(beta), _np(dy), _np(dz), float(alpha))
    return torch.from_numpy(ge), torch.from_numpy(gi), torch.from_numpy(be)
