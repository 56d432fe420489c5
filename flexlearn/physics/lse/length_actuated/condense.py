"""Tangent and condensed linear solve of the inverse-pose-statics Newton system (numba; see
:mod:`flexlearn.physics.lse.length_actuated.kernels` for the unknowns and equations).

Tangent (:func:`pose_tangent`): the exact element tangents
(:func:`~flexlearn.physics.lse.compiled.elements.tangent_nodes_into`, quadrature sized to the element's rotation) and
the analytic length column ∂r/∂L_k (:func:`element_dh_into`).

Factorisation (:func:`pose_factor`), per rod: each element's slopes condensed onto its end nodes, the node chain
eliminated from the prescribed base to the tip (6 × 6 blocks; as
:func:`flexlearn.physics.lse.compiled.condense.condense` for the forward problem), giving the tip's Schur
complement S and the condensed length column b̃_L; the tip torsion row (free twist: ``(S(d + ê₃ δψ) - b̃ -
b̃_L δL)_z = 0``) gives δψ in terms of δL; the six platform-balance rows give a 6 × 6 system in δL, inverted
once. :func:`pose_solve_column` then solves one right-hand side by forward elimination, the 6 × 6 system and
back-substitution: column 0 the Newton correction for the current residual, columns 1 … 6 the sensitivity to a
unit platform twist (the tips moved by ``Ad_{T⁻¹} e_i``). The platform rows are solved in increment form
(``Σ_k Ad_kᵀ δr_tip,k + t_k δψ_k = -r_ee``) so that a factorisation kept from an earlier state (the chord
steps of :func:`~flexlearn.physics.lse.length_actuated.kernels.pose_newton`) still converges to the current equations.

Work arrays come from :func:`condense_workspace` (allocated once per compiled call, no allocation here).
"""

from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.lse.compiled.elements import GT3, GT8, GTW3, GTW8, refresh_pose_cache, tangent_nodes_into
from flexlearn.physics.lse.compiled.linalg import copy1, copy2, gemm6, inv6_into, njit, njit_leaf

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = ["condense_workspace", "element_dh_into", "pose_factor", "pose_solve_column", "pose_tangent"]

_GL2_NODES, _GL2_WEIGHTS = np.polynomial.legendre.leggauss(2)
GT2 = 0.5 * (_GL2_NODES + 1.0)  # 2-point Gauss–Legendre on [0, 1] (nearly straight elements)
GTW2 = 0.25 * (_GL2_NODES + 1.0) * _GL2_WEIGHTS
TINY_ELEMENT_T2 = 0.15**2  # elements turning by less than 0.15 rad: 2 points (term error O(θ⁴) ≲ 5e-4)
SHORT_ELEMENT_T2 = 0.3**2  # below 0.3 rad: 3 points (O(θ⁶)); 8 points above (exact to round-off)


@njit(cache=True)
def condense_workspace(r, n):
    """Work arrays of the factorisation and solves for R rods of N elements (one tuple, allocated once):
    0 H_ββ⁻¹ (R, N, 6, 6), 1 G = H_ββ⁻¹ H_β,node (R, N, 6, 12), 2 lower blocks, 3 D̃⁻¹, 4 D̃⁻¹ U (R, N, 6, 6),
    5 tip Schur complement S (R, 6, 6), 6 H_ββ⁻¹ b_β, 7 D̃⁻¹ b̃ of the length column (R, N, 6), 8 its condensed tip
    side (R, 6), 9 b_k = dψ_k/dL_k (R,), 10 t_k (R, 6), 11 inverse of the 6 × 6 length system, 12 its matrix,
    13 … 15 the same as 6 … 8 for the solved column, 16 a_k (R,), 17 tip motions (R, 6), 18 diagonal blocks
    (N + 1, 6, 6), 19 upper blocks (N, 6, 6), 20 condensed element (12, 12), 21 (6, 6), 22 node sides (N + 1, 6),
    23 (12,), 24 back-substituted nodes (N + 1, 6), 25 (6,) × 3 scratch (3, 6).

    Args:
        r: Number of rods R.
        n: Number of elements per rod N.
    """
    return (
        np.empty((r, n, 6, 6)),
        np.empty((r, n, 6, 12)),
        np.zeros((r, n, 6, 6)),
        np.zeros((r, n, 6, 6)),
        np.zeros((r, n, 6, 6)),
        np.empty((r, 6, 6)),
        np.empty((r, n, 6)),
        np.zeros((r, n, 6)),
        np.empty((r, 6)),
        np.zeros(r),
        np.zeros((r, 6)),
        np.empty((6, 6)),
        np.empty((6, 6)),
        np.empty((r, n, 6)),
        np.zeros((r, n, 6)),
        np.empty((r, 6)),
        np.zeros(r),
        np.zeros((r, 6)),
        np.zeros((n + 1, 6, 6)),
        np.empty((n, 6, 6)),
        np.empty((12, 12)),
        np.empty((6, 6)),
        np.zeros((n + 1, 6)),
        np.empty(12),
        np.zeros((n + 1, 6)),
        np.empty((3, 6)),
    )


@njit_leaf
def element_dh_into(parts, k, e, h, kk, beta, xi0, out, w):
    """∂[r_a; r_b; r_β]/∂h (18,) of element (k, e) at element length h [m] into ``out``, from the pieces of its
    residual pass (:func:`~flexlearn.physics.lse.compiled.elements.element_into`; the twists Ω do not depend on h).
    With ``A = hI - h³/12 ad_β``, ``A' = I - h²/4 ad_β``: ``ξ̄' = -A⁻¹ A' ξ̄``,
    ``μ' = A⁻ᵀ (K(ξ̄ - ξ₀) + hK ξ̄' - A'ᵀ μ)``, ``r_b' = J_r⁻ᵀ μ'``, ``r_a' = -J_l⁻ᵀ μ'``,
    ``r_β' = 3 r_β / h - h³/12 (W̃(μ') ξ̄ + W̃(μ) ξ̄')``. ``w`` (3, 6): scratch.

    Args:
        parts: Element pieces of the residual pass (:func:`~flexlearn.physics.lse.compiled.elements.alloc_parts`).
        k: Rod index.
        e: Element index.
        h: Element length [m].
        kk: Section stiffness diagonal K (6,).
        beta: Strain slope β (6,) [1/m²].
        xi0: Reference strain ξ₀ (6,).
        out: Output (18,), written.
        w: Scratch (3, 6).
    """
    ainv, xb, mu, jri, jli, rbeta = (
        parts[5][k, e],
        parts[6][k, e],
        parts[7][k, e],
        parts[8][k, e],
        parts[9][k, e],
        parts[12][k, e],
    )
    q, c = h * h / 4.0, h**3 / 12.0
    b0, b1, b2, b3, b4, b5 = beta[0], beta[1], beta[2], beta[3], beta[4], beta[5]
    ap, dxi, dmu = w[0], w[1], w[2]
    # A' ξ̄ = ξ̄ - q ad_β ξ̄, ad_β ξ̄ = [β_ω × ξ̄_ω; β_v × ξ̄_ω + β_ω × ξ̄_v]
    ap[0] = xb[0] - q * (b1 * xb[2] - b2 * xb[1])
    ap[1] = xb[1] - q * (b2 * xb[0] - b0 * xb[2])
    ap[2] = xb[2] - q * (b0 * xb[1] - b1 * xb[0])
    ap[3] = xb[3] - q * (b4 * xb[2] - b5 * xb[1] + b1 * xb[5] - b2 * xb[4])
    ap[4] = xb[4] - q * (b5 * xb[0] - b3 * xb[2] + b2 * xb[3] - b0 * xb[5])
    ap[5] = xb[5] - q * (b3 * xb[1] - b4 * xb[0] + b0 * xb[4] - b1 * xb[3])
    for i in range(6):
        acc = 0.0
        for j in range(6):
            acc -= ainv[i, j] * ap[j]
        dxi[i] = acc
    m0, m1, m2, f0, f1, f2 = mu[0], mu[1], mu[2], mu[3], mu[4], mu[5]
    # A'ᵀ μ = μ - q ad_βᵀ μ, ad_βᵀ μ = W̃(μ) β = [m × β_ω + f × β_v; f × β_ω]
    ap[0] = m0 - q * ((m1 * b2 - m2 * b1) + (f1 * b5 - f2 * b4))
    ap[1] = m1 - q * ((m2 * b0 - m0 * b2) + (f2 * b3 - f0 * b5))
    ap[2] = m2 - q * ((m0 * b1 - m1 * b0) + (f0 * b4 - f1 * b3))
    ap[3] = f0 - q * (f1 * b2 - f2 * b1)
    ap[4] = f1 - q * (f2 * b0 - f0 * b2)
    ap[5] = f2 - q * (f0 * b1 - f1 * b0)
    for i in range(6):
        ap[i] = kk[i] * (xb[i] - xi0[i] + h * dxi[i]) - ap[i]
    for i in range(6):
        acc = 0.0
        for j in range(6):
            acc += ainv[j, i] * ap[j]
        dmu[i] = acc
    for i in range(6):
        acc_b, acc_a = 0.0, 0.0
        for j in range(6):
            acc_b += jri[j, i] * dmu[j]
            acc_a += jli[j, i] * dmu[j]
        out[6 + i] = acc_b
        out[i] = -acc_a
    d0, d1, d2, d3, d4, d5 = dmu[0], dmu[1], dmu[2], dmu[3], dmu[4], dmu[5]
    y0, y1, y2, y3, y4, y5 = dxi[0], dxi[1], dxi[2], dxi[3], dxi[4], dxi[5]
    x0, x1, x2, x3, x4, x5 = xb[0], xb[1], xb[2], xb[3], xb[4], xb[5]
    # W̃(a) x = [a_m × x_ω + a_f × x_v; a_f × x_ω] for (a, x) = (μ', ξ̄) and (μ, ξ̄')
    out[12] = 3.0 / h * rbeta[0] - c * (
        (d1 * x2 - d2 * x1) + (d4 * x5 - d5 * x4) + (m1 * y2 - m2 * y1) + (f1 * y5 - f2 * y4)
    )
    out[13] = 3.0 / h * rbeta[1] - c * (
        (d2 * x0 - d0 * x2) + (d5 * x3 - d3 * x5) + (m2 * y0 - m0 * y2) + (f2 * y3 - f0 * y5)
    )
    out[14] = 3.0 / h * rbeta[2] - c * (
        (d0 * x1 - d1 * x0) + (d3 * x4 - d4 * x3) + (m0 * y1 - m1 * y0) + (f0 * y4 - f1 * y3)
    )
    out[15] = 3.0 / h * rbeta[3] - c * ((d4 * x2 - d5 * x1) + (f1 * y2 - f2 * y1))
    out[16] = 3.0 / h * rbeta[4] - c * ((d5 * x0 - d3 * x2) + (f2 * y0 - f0 * y2))
    out[17] = 3.0 / h * rbeta[5] - c * ((d3 * x1 - d4 * x0) + (f0 * y1 - f1 * y0))


@njit_leaf
def pose_tangent(beta, lengths, kd, xi0, parts, ws, hel, dres, dh, w, tiny_t2):
    """Element tangents (R, N, 18, 18) into ``hel`` and the length column ∂r_k/∂L_k (R, 12N, rod layout) into
    ``dres`` (h = L/N: ∂/∂L = ∂/∂h / N), from the pieces ``parts`` of the residual pass at the same state.
    Quadrature of the tangent's integral term sized to the element's rotation θ (2, 3 or 8 points; see
    ``tiny_t2``, e.g. TINY_ELEMENT_T2). dh (18,), w (3, 6): scratch.

    Args:
        beta: Strain slopes (R, N, 6) [1/m²].
        lengths: Rod lengths (R,) [m].
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        parts: Element pieces of the residual pass.
        ws: Element scratch (:func:`~flexlearn.physics.lse.compiled.elements.workspace`).
        hel: Output element tangents (R, N, 18, 18), written.
        dres: Output length column (R, 12N), written.
        dh: Scratch (18,).
        w: Scratch (3, 6).
        tiny_t2: θ² [rad²] below which 2 quadrature points are used.
    """
    r, n = beta.shape[0], beta.shape[1]
    for k in range(r):
        h = lengths[k] / n
        for i in range(12 * n):
            dres[k, i] = 0.0
        for e in range(n):
            t2 = parts[4][k, e]
            gt, gtw = (GT2, GTW2) if t2 < tiny_t2 else ((GT3, GTW3) if t2 < SHORT_ELEMENT_T2 else (GT8, GTW8))
            tangent_nodes_into(parts, k, e, h, kd[k], hel[k, e], ws, gt, gtw)  # one call site: inlined once
            element_dh_into(parts, k, e, h, kd[k], beta[k, e], xi0[k], dh, w)
            o_b = 12 * n - 6 if e == n - 1 else 6 * e
            for i in range(6):
                if e > 0:
                    dres[k, 6 * (e - 1) + i] += dh[i] / n
                dres[k, o_b + i] += dh[6 + i] / n
                dres[k, 6 * (n - 1) + 6 * e + i] = dh[12 + i] / n


@njit_leaf
def _rod_factor(hel_k, hbb_inv, gmat, lo, dinv, xu, s_tip, d, up, hc, tmp):
    """Condense rod k's slopes onto its nodes and eliminate the node chain from the (prescribed) base to the tip
    (as :func:`flexlearn.physics.lse.compiled.condense.condense`, one rod, tip block kept): factors into the
    arrays given, the tip's Schur complement into ``s_tip`` (6, 6); the base columns of G are zero (prescribed
    base). A singular block gives non-finite entries.
    d (N + 1, 6, 6), up (N, 6, 6), hc (12, 12), tmp (6, 6): scratch."""
    n = hel_k.shape[0]
    d[:] = 0.0
    for e in range(n):
        hm = hel_k[e]
        copy2(hm[12:, 12:], tmp)
        inv6_into(tmp, hbb_inv[e])
        if e == 0:  # the base node is prescribed: only its tip-side columns and block are needed
            gmat[e, :, :6] = 0.0
            gemm6(hbb_inv[e], hm[12:, 6:12], gmat[e, :, 6:], 1.0, False)
            copy2(hm[6:12, 6:12], hc[6:, 6:])
            gemm6(hm[6:12, 12:], gmat[e, :, 6:], hc[6:, 6:], -1.0, True)
        else:
            gemm6(hbb_inv[e], hm[12:, :12], gmat[e], 1.0, False)
            copy2(hm[:12, :12], hc)
            gemm6(hm[:12, 12:], gmat[e], hc, -1.0, True)
        for i in range(6):
            for j in range(6):
                if e > 0:
                    d[e, i, j] += hc[i, j]
                    up[e, i, j] = hc[i, 6 + j]
                    lo[e, i, j] = hc[6 + i, j]
                d[e + 1, i, j] += hc[6 + i, 6 + j]
    for j in range(1, n):
        inv6_into(d[j], dinv[j])
        gemm6(dinv[j], up[j], xu[j], 1.0, False)
        gemm6(lo[j], xu[j], d[j + 1], -1.0, True)
    copy2(d[n], s_tip)


@njit_leaf
def _rod_forward(hel_k, sign, rhs, hbb_inv, lo, dinv, gvec, xb, btip, bn, bc):
    """Forward elimination of the right-hand side ``sign · rhs`` (12N,) (rod layout) with the factors of
    :func:`_rod_factor`: ``gvec`` (N, 6) = H_ββ⁻¹ b_β, ``xb`` (N, 6) = D̃⁻¹ b̃, the condensed tip side ``btip``
    (6,). bn (N + 1, 6), bc (12,): scratch."""
    n = hel_k.shape[0]
    bn[0] = 0.0
    for j in range(1, n):
        for i in range(6):
            bn[j, i] = sign * rhs[6 * (j - 1) + i]
    for i in range(6):
        bn[n, i] = sign * rhs[12 * n - 6 + i]
    for e in range(n):
        o = 6 * (n - 1) + 6 * e
        hb = hbb_inv[e]
        for i in range(6):
            acc = 0.0
            for q in range(6):
                acc += hb[i, q] * rhs[o + q]
            gvec[e, i] = sign * acc
        hm = hel_k[e]
        for i in range(12):
            acc = 0.0
            for q in range(6):
                acc += hm[i, 12 + q] * gvec[e, q]
            bc[i] = acc
        for i in range(6):
            if e > 0:
                bn[e, i] -= bc[i]
            bn[e + 1, i] -= bc[6 + i]
    for j in range(1, n):
        for i in range(6):
            acc = 0.0
            for q in range(6):
                acc += dinv[j, i, q] * bn[j, q]
            xb[j, i] = acc
        for i in range(6):
            acc = 0.0
            for q in range(6):
                acc += lo[j, i, q] * xb[j, q]
            bn[j + 1, i] -= acc
    copy1(bn[n], btip)


@njit_leaf
def _rod_back(gmat, xu, xb0, gv0, xbl, gvl, lk, xtip, xs, out):
    """Back-substitution of one column of rod k: nodes and slopes (12N - 6,) into ``out`` from the tip twist
    ``xtip`` (6,), the forward-eliminated sides of the column (``xb0``, ``gv0`` (N, 6)) plus ``lk`` times those
    of the length column (``xbl``, ``gvl``). xs (N + 1, 6): scratch."""
    n = gv0.shape[0]
    xs[0] = 0.0
    copy1(xtip, xs[n])
    for j in range(n - 1, 0, -1):
        for i in range(6):
            acc = xb0[j, i] + lk * xbl[j, i]
            for q in range(6):
                acc -= xu[j, i, q] * xs[j + 1, q]
            xs[j, i] = acc
            out[6 * (j - 1) + i] = acc
    for e in range(n):
        o = 6 * (n - 1) + 6 * e
        for i in range(6):
            acc = gv0[e, i] + lk * gvl[e, i]
            for q in range(6):
                acc -= gmat[e, i, q] * xs[e, q] + gmat[e, i, 6 + q] * xs[e + 1, q]
            out[o + i] = acc


@njit_leaf
def pose_factor(hel, dres, adt, res, twist_free, cw):
    """Factorise the Newton system (module docstring) at the state of the tangent ``hel`` (R, N, 18, 18), the
    length column ``dres`` (R, 12N), ``adt`` = Ad_{T_k⁻¹}ᵀ (R, 6, 6) and the residual ``res`` (R, 12N) there
    (its tip wrenches enter the torsion coupling t_k = -Ad_{T⁻¹}ᵀ ad_{ê₃}ᵀ r_tip) into ``cw``
    (:func:`condense_workspace`). Returns False when a pivot or the length system is singular.

    Args:
        hel: Element tangents (R, N, 18, 18).
        dres: Length column (R, 12N).
        adt: Ad_{T_k⁻¹}ᵀ of each rod (R, 6, 6).
        res: Rod residuals (R, 12N).
        twist_free: Whether the tip twists ψ are unknowns.
        cw: The work arrays of :func:`condense_workspace`, written.

    Returns:
        True when the factorisation is usable.
    """
    r, n = hel.shape[0], hel.shape[1]
    hbb_inv, gmat, lo, dinv, xu, s_tip, gvl, xbl, btl, bk, tk, minv, mat = cw[:13]
    d, up, hc, tmp, bn, bc = cw[18], cw[19], cw[20], cw[21], cw[22], cw[23]
    for k in range(r):
        _rod_factor(hel[k], hbb_inv[k], gmat[k], lo[k], dinv[k], xu[k], s_tip[k], d, up, hc, tmp)
        _rod_forward(hel[k], -1.0, dres[k], hbb_inv[k], lo[k], dinv[k], gvl[k], xbl[k], btl[k], bn, bc)
        s = s_tip[k]
        bk[k] = btl[k, 2] / s[2, 2] if twist_free else 0.0
        rt = res[k, 12 * n - 6 :]
        # column k of the 6 × 6 length system: Ad_{T⁻¹}ᵀ (S ê₃ b - b̃_L) + t_k b
        for i in range(6):
            tk[k, i] = -(adt[k, i, 0] * rt[1] - adt[k, i, 1] * rt[0] + adt[k, i, 3] * rt[4] - adt[k, i, 4] * rt[3])
            acc = 0.0
            for q in range(6):
                acc += adt[k, i, q] * (s[q, 2] * bk[k] - btl[k, q])
            mat[i, k] = acc + tk[k, i] * bk[k]
    for i in range(6):
        for j in range(6):
            tmp[i, j] = mat[i, j]
    inv6_into(tmp, minv)
    ok = True
    for i in range(6):
        for j in range(6):
            if not math.isfinite(minv[i, j]):
                ok = False
    return ok


@njit_leaf
def pose_solve_column(cw, hel, adt, res, res_ee, twist_free, c, dy, dpsi, dl):
    """Solve column ``c`` with the factorisation in ``cw`` (:func:`pose_factor`) into dy (R, 12N - 6, ·),
    dpsi, dl (R, ·): c = 0 the Newton correction for the current residuals ``res`` (R, 12N) and ``res_ee`` (6,)
    (platform balance, increment form), c = 1 + i the sensitivity to a unit platform twist e_i (body frame).

    Args:
        cw: The work arrays factorised by :func:`pose_factor`.
        hel: Element tangents (R, N, 18, 18) that were factorised.
        adt: Ad_{T_k⁻¹}ᵀ of each rod (R, 6, 6).
        res: Rod residuals (R, 12N) (column 0 only).
        res_ee: Platform residual (6,) (column 0 only).
        twist_free: Whether the tip twists ψ are unknowns.
        c: Column index: 0 the Newton correction, 1 … 6 the sensitivity.
        dy: Output node and slope corrections (R, 12N - 6, C), column ``c`` written.
        dpsi: Output tip twist corrections (R, C) [rad], column ``c`` written.
        dl: Output length corrections (R, C) [m], column ``c`` written.
    """
    r, n = hel.shape[0], hel.shape[1]
    hbb_inv, gmat, lo, dinv, xu, s_tip, gvl, xbl, _btl, bk, tk, minv = cw[:12]
    gv0, xb0, bt0, ak, dtip, bn, bc, xs, v = cw[13], cw[14], cw[15], cw[16], cw[17], cw[22], cw[23], cw[24], cw[25]
    alpha, rhs_l, dlv = v[0], v[1], v[2]
    for i in range(6):
        rhs_l[i] = -res_ee[i] if c == 0 else 0.0
    for k in range(r):
        s = s_tip[k]
        if c == 0:
            _rod_forward(hel[k], -1.0, res[k], hbb_inv[k], lo[k], dinv[k], gv0[k], xb0[k], bt0[k], bn, bc)
        else:
            gv0[k] = 0.0
            xb0[k] = 0.0
            bt0[k] = 0.0
        for i in range(6):
            dtip[k, i] = 0.0 if c == 0 else adt[k, c - 1, i]  # prescribed tip twist Ad_{T⁻¹} e_{c-1}
        for i in range(6):
            acc = -bt0[k, i]
            for q in range(6):
                acc += s[i, q] * dtip[k, q]
            alpha[i] = acc  # tip wrench before the twist and length corrections
        ak[k] = -alpha[2] / s[2, 2] if twist_free else 0.0  # torsion row: the whole tip moment about ê₃
        for i in range(6):  # its increment (platform rows in increment form)
            alpha[i] += s[i, 2] * ak[k] - (res[k, 12 * n - 6 + i] if c == 0 else 0.0)
        for i in range(6):
            acc = tk[k, i] * ak[k]
            for q in range(6):
                acc += adt[k, i, q] * alpha[q]
            rhs_l[i] -= acc
    for i in range(6):
        acc = 0.0
        for q in range(6):
            acc += minv[i, q] * rhs_l[q]
        dlv[i] = acc
    for k in range(r):
        lk = dlv[k]
        dl[k, c] = lk
        dpsi[k, c] = ak[k] + bk[k] * lk
        dtip[k, 2] += dpsi[k, c]
        _rod_back(gmat[k], xu[k], xb0[k], gv0[k], xbl[k], gvl[k], lk, dtip[k], xs, dy[k, :, c])
    return math.isfinite(dlv[0])
