"""Condensed linear solve of the inverse-pose-statics Newton system (numba; see
:mod:`flexlearn.physics.lse.pose_kernels` for the unknowns and equations).

Per rod: each element's slopes condensed onto its end nodes, the node chain eliminated from the prescribed
base to the tip (6 × 6 blocks; as :func:`flexlearn.physics.lse.compiled_condense.condense` for the forward
problem), giving the tip's Schur complement S and condensed right-hand sides for the Newton residual and the
length column ∂r/∂L; the tip torsion row (free twist: ``(S(d + ê₃ δψ) - b̃ - b̃_L δL)_z = 0``) gives δψ in
terms of δL; the six platform-balance rows give a 6 × 6 system in δL; back-substitution recovers nodes and
slopes. Columns 1 … 6 are the sensitivity to a unit platform twist (the tips moved by ``Ad_{T⁻¹} e_i``).
"""
from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.lse.compiled import _gemm6, _inv6_into, njit, refresh_pose_cache

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = ["pose_system"]

@njit(cache=True)
def _rod_factor(hel_k, hbb_inv, gmat, lo, dinv, xu, s_tip):
    """Condense rod k's slopes onto its nodes and eliminate the node chain from the (prescribed) base to the tip
    (as :func:`flexlearn.physics.lse.compiled_condense.condense`, one rod, tip block kept): factors into the
    arrays given, the tip's Schur complement into ``s_tip`` (6, 6). A singular block gives non-finite entries."""
    n = hel_k.shape[0]
    d = np.zeros((n + 1, 6, 6))
    up = np.empty((n + 1, 6, 6))
    hc = np.empty((12, 12))
    tmp = np.empty((6, 6))
    for e in range(n):
        hm = hel_k[e]
        tmp[:, :] = hm[12:, 12:]
        _inv6_into(tmp, hbb_inv[e])
        _gemm6(hbb_inv[e], hm[12:, :12], gmat[e], 1.0, False)
        hc[:, :] = hm[:12, :12]
        _gemm6(hm[:12, 12:], gmat[e], hc, -1.0, True)
        for i in range(6):
            for j in range(6):
                if e > 0:
                    d[e, i, j] += hc[i, j]
                    up[e, i, j] = hc[i, 6 + j]
                    lo[e, i, j] = hc[6 + i, j]
                d[e + 1, i, j] += hc[6 + i, 6 + j]
    for j in range(1, n):
        _inv6_into(d[j], dinv[j])
        _gemm6(dinv[j], up[j], xu[j], 1.0, False)
        _gemm6(lo[j], xu[j], d[j + 1], -1.0, True)
    s_tip[:, :] = d[n]

@njit(cache=True)
def _rod_forward(hel_k, rhs, hbb_inv, lo, dinv, gvec, xb, btip):
    """Forward elimination of right-hand sides ``rhs`` (12N, C) (rod layout, minus the residual columns) with the
    factors of :func:`_rod_factor`: ``gvec`` (N, 6, C) = H_ββ⁻¹ b_β, ``xb`` (N, 6, C) = D̃⁻¹ b̃, the condensed tip
    right-hand side into ``btip`` (6, C)."""
    n = hel_k.shape[0]
    nc = rhs.shape[1]
    bn = np.zeros((n + 1, 6, nc))
    bc = np.empty((12, nc))
    for j in range(1, n):
        bn[j] = rhs[6 * (j - 1):6 * j]
    bn[n] = rhs[12 * n - 6:]
    for e in range(n):
        o = 6 * (n - 1) + 6 * e
        _gemm6(hbb_inv[e], rhs[o:o + 6], gvec[e], 1.0, False)
        _gemm6(hel_k[e, :12, 12:], gvec[e], bc, -1.0, False)
        for i in range(6):
            for j in range(nc):
                if e > 0:
                    bn[e, i, j] += bc[i, j]
                bn[e + 1, i, j] += bc[6 + i, j]
    for j in range(1, n):
        _gemm6(dinv[j], bn[j], xb[j], 1.0, False)
        _gemm6(lo[j], xb[j], bn[j + 1], -1.0, True)
    btip[:, :] = bn[n]

@njit(cache=True)
def _rod_back(gmat, xu, xb, gvec, xtip, out):
    """Back-substitution of one column: nodes and slopes (12N - 6,) of a rod into ``out`` from the tip twist
    ``xtip`` (6,) and the forward-eliminated right-hand side ``xb``, ``gvec`` (N, 6) of that column."""
    n = gvec.shape[0]
    xs = np.zeros((n + 1, 6))
    xs[n] = xtip
    for j in range(n - 1, 0, -1):
        for i in range(6):
            acc = xb[j, i]
            for q in range(6):
                acc -= xu[j, i, q] * xs[j + 1, q]
            xs[j, i] = acc
            out[6 * (j - 1) + i] = acc
    for e in range(n):
        o = 6 * (n - 1) + 6 * e
        for i in range(6):
            acc = gvec[e, i]
            for q in range(6):
                acc -= gmat[e, i, q] * xs[e, q] + gmat[e, i, 6 + q] * xs[e + 1, q]
            out[o + i] = acc

@njit(cache=True, inline="always")
def dtip_col(adt, k, i, c):
    """Tip twist (body frame) of rod k for column c: 0 for the Newton step, (Ad_{T⁻¹} e_{c-1})_i otherwise."""
    return 0.0 if c == 0 else adt[k, c - 1, i]

@njit(cache=True)
def pose_system(hel, res, dres, adt, w_body, twist_free, dy, dpsi, dl, nc):
    """Solve the condensed Newton system (module docstring) for ``nc`` (1 or 7) columns: 0 the Newton step for
    ``-r`` (res (R, 12N), platform load w_body (6,)), 1 + i the sensitivity to a unit platform twist e_i (body
    frame). dres (R, 12N): ∂r/∂L_k. Outputs dy (R, 12N - 6, ≥ nc), dpsi (R, ≥ nc), dl (R, ≥ nc). Returns False
    when singular."""
    r, n = hel.shape[0], hel.shape[1]
    hbb_inv = np.empty((r, n, 6, 6))
    gmat = np.empty((r, n, 6, 12))
    lo = np.zeros((r, n, 6, 6))
    dinv = np.zeros((r, n, 6, 6))
    xu = np.zeros((r, n, 6, 6))
    s_tip = np.empty((r, 6, 6))
    gvec = np.empty((r, n, 6, 2))
    xb = np.zeros((r, n, 6, 2))
    btip = np.empty((r, 6, 2))
    rhs = np.empty((12 * n, 2))
    alpha = np.empty((r, 6, nc))
    a = np.zeros((r, nc))
    b = np.zeros(r)
    mat = np.empty((6, 6))
    rhs_l = np.zeros((6, nc))
    for i in range(6):
        rhs_l[i, 0] = w_body[i]
    dtip = np.empty((6, 7))
    for k in range(r):
        _rod_factor(hel[k], hbb_inv[k], gmat[k], lo[k], dinv[k], xu[k], s_tip[k])
        for i in range(12 * n):
            rhs[i, 0] = -res[k, i]
            rhs[i, 1] = -dres[k, i]
        _rod_forward(hel[k], rhs, hbb_inv[k], lo[k], dinv[k], gvec[k], xb[k], btip[k])
        s = s_tip[k]
        # prescribed tip twists: none for the Newton step, Ad_{T⁻¹} e_i for column 1 + i
        for i in range(6):
            dtip[i, 0] = 0.0
            for c in range(6):
                dtip[i, 1 + c] = adt[k, c, i]
        for c in range(nc):
            for i in range(6):
                acc = -btip[k, i, 0] if c == 0 else 0.0
                for q in range(6):
                    acc += s[i, q] * dtip[q, c]
                alpha[k, i, c] = acc            # tip residual before the twist and length corrections
        if twist_free:
            b[k] = btip[k, 2, 1] / s[2, 2]
            for c in range(nc):
                a[k, c] = -alpha[k, 2, c] / s[2, 2]
                for i in range(6):
                    alpha[k, i, c] += s[i, 2] * a[k, c]
        # column k of the 6 × 6 length system: Ad_{T⁻¹}ᵀ (S ê₃ b - b̃_L) + t_k b, t_k = -Ad_{T⁻¹}ᵀ ad_{ê₃}ᵀ r_tip
        rt = res[k, 12 * n - 6:]
        beta_k = np.empty(6)
        tw = np.array([rt[1], -rt[0], 0.0, rt[4], -rt[3], 0.0])
        for i in range(6):
            beta_k[i] = s[i, 2] * b[k] - btip[k, i, 1]
        for i in range(6):
            acc = 0.0
            acc_t = 0.0
            for q in range(6):
                acc += adt[k, i, q] * beta_k[q]
                acc_t -= adt[k, i, q] * tw[q]
            mat[i, k] = acc + (acc_t * b[k] if twist_free else 0.0)
            for c in range(nc):
                acc_c = 0.0
                for q in range(6):
                    acc_c += adt[k, i, q] * alpha[k, q, c]
                rhs_l[i, c] -= acc_c + (acc_t * a[k, c] if twist_free else 0.0)
    minv = np.empty((6, 6))
    _inv6_into(mat, minv)
    dl_all = np.empty((6, nc))
    _gemm6(minv, rhs_l, dl_all, 1.0, False)
    xcol = np.empty((n, 6))
    gcol = np.empty((n, 6))
    xtip = np.empty(6)
    for k in range(r):
        for c in range(nc):
            lk = dl_all[k, c]
            dl[k, c] = lk
            dpsi[k, c] = a[k, c] + b[k] * lk
            for i in range(6):
                xtip[i] = dtip_col(adt, k, i, c)
            xtip[2] += dpsi[k, c]
            for e in range(n):
                for i in range(6):
                    xcol[e, i] = xb[k, e, i, 1] * lk + (xb[k, e, i, 0] if c == 0 else 0.0)
                    gcol[e, i] = gvec[k, e, i, 1] * lk + (gvec[k, e, i, 0] if c == 0 else 0.0)
            _rod_back(gmat[k], xu[k], xcol, gcol, xtip, dy[k, :, c])
    ok = True
    for i in range(6):
        if not math.isfinite(dl_all[i, 0]):
            ok = False
    return ok
