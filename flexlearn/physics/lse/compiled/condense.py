"""Compiled (numba) solve of the CPR Newton system ``K_t δq = -r`` by static condensation along each rod.

The rod-local tangent is block-sparse: element e couples only its end nodes e, e+1 and its own slopes β_e
(seed 003, Sec. V-D, ``K_t = Σ P_{k,e}ᵀ H_{k,e} P_{k,e}``). Per rod:

1. each element's slopes are condensed onto its end nodes,
   ``H̃ = H_nn - H_nβ H_ββ⁻¹ H_βn``, ``b̃_n = b_n - H_nβ H_ββ⁻¹ b_β``;
2. the nodes form a block-tridiagonal chain (6 × 6 blocks), eliminated from the base to the tip (block
   Thomas); the base node is prescribed (δζ₀ = S δθ, zero for the Newton step);
3. the condensed tip block — the platform twist, the projection ``Ad_{(g^loc)⁻¹}`` being already applied to
   the element tangent — is added to the platform's 6 × 6 Schur system with the load stiffness ``K_ee``.

Back-substitution recovers the nodes and slopes. The same system as the dense per-rod elimination of
:meth:`CPRModel._newton_step`, in another elimination order (equal to round-off); O(N) per rod instead of
O(N³). Several right-hand sides at once: column 0 is the Newton step for ``b = -r``, column 1 + m the
sensitivity ``dq/dθ_m = -K_t⁻¹ ∂r/∂θ_m`` (the prescribed base twist moved to the right-hand side).
A singular block gives non-finite entries, which the Newton loop treats as a failed iteration. The factors
(:func:`condense`) are kept apart from the right-hand sides (:func:`condensed_apply`). (Chord steps that
reuse the factors once the residual is small were tried: more iterations, no net gain.) :func:`condense`,
:func:`base_columns` is inlined by numba into its one caller (``inline="always"``); :func:`condense` and
:func:`condensed_apply` are kernels of their own, compiled beside the tangent on a first compile (see the
compile-cost note of :mod:`flexlearn.physics.lse.compiled.newton`).
"""

from __future__ import annotations

import numpy as np

from flexlearn.physics.lse.compiled.linalg import copy2, gemm6, inv6_into, njit, njit_inner

__all__ = ["base_columns", "condense", "condensed_apply", "condensed_solve"]


@njit_inner
def _zero2(a):
    """``a[:] = 0`` (2-D) as a loop (see the compile-cost note of :mod:`flexlearn.physics.lse.compiled.newton`)."""
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = 0.0


@njit_inner
def condense(hel, kee):
    """Factor the Newton system (steps 1-3 of the module docstring) for any right-hand side.

    hel (R, N, 18, 18): element tangents over (δζ_a, δζ_b, δβ) with the tip projection and the nodal load
    stiffness included; kee (6, 6): the platform's load stiffness. Returns the factors
    ``(H_ββ⁻¹ (R, N, 6, 6), H_ββ⁻¹ H_βn (R, N, 6, 12), lower blocks L_j (R, N, 6, 6), D̃_j⁻¹ (R, N, 6, 6),
    D̃_j⁻¹ U_j (R, N, 6, 6), H̃_{1,0} (R, 6, 6), S⁻¹ (6, 6))`` for :func:`condensed_apply`.

    Args:
        hel: Element tangents (R, N, 18, 18).
        kee: Platform load stiffness (6, 6).

    Returns:
        The factors tuple described above.
    """
    r, n = hel.shape[0], hel.shape[1]
    hbb_inv = np.empty((r, n, 6, 6))
    gmat = np.empty((r, n, 6, 12))
    lo = np.zeros((r, n, 6, 6))
    dinv = np.zeros((r, n, 6, 6))
    xu = np.zeros((r, n, 6, 6))
    h10 = np.empty((r, 6, 6))
    s = np.empty((6, 6))
    copy2(kee, s)
    d = np.empty((n + 1, 6, 6))
    up = np.empty((n + 1, 6, 6))
    hc = np.empty((12, 12))
    tmp = np.empty((6, 6))
    for k in range(r):
        for j in range(n + 1):
            _zero2(d[j])
        for e in range(n):
            hm = hel[k, e]
            copy2(hm[12:, 12:], tmp)
            inv6_into(tmp, hbb_inv[k, e])
            gemm6(hbb_inv[k, e], hm[12:, :12], gmat[k, e], 1.0, False)
            copy2(hm[:12, :12], hc)
            gemm6(hm[:12, 12:], gmat[k, e], hc, -1.0, True)
            for i in range(6):
                for j in range(6):
                    if e == 0:
                        h10[k, i, j] = hc[6 + i, j]
                    else:
                        d[e, i, j] += hc[i, j]
                        up[e, i, j] = hc[i, 6 + j]
                        lo[k, e, i, j] = hc[6 + i, j]
                    d[e + 1, i, j] += hc[6 + i, 6 + j]
        for j in range(1, n):
            inv6_into(d[j], dinv[k, j])
            gemm6(dinv[k, j], up[j], xu[k, j], 1.0, False)
            gemm6(lo[k, j], xu[k, j], d[j + 1], -1.0, True)
        for i in range(6):
            for j in range(6):
                s[i, j] += d[n, i, j]
    s_inv = np.empty((6, 6))
    inv6_into(s, s_inv)  # s is overwritten
    return hbb_inv, gmat, lo, dinv, xu, h10, s_inv


@njit_inner
def condensed_apply(hel, factors, res, res_ee, x0):
    """Solve with the factors of :func:`condense`: column 0 for ``b = -r`` (res (R, 12N), res_ee (6,)), column
    c ≥ 1 for the prescribed base twists ``x0[:, :, c]`` (R, 6, C) alone (column 0 of x0 is normally zero).
    Returns ``dy`` (R, 12N - 6, C) and ``dz`` (6, C).

    Args:
        hel: Element tangents (R, N, 18, 18) that were factored.
        factors: The tuple returned by :func:`condense`.
        res: Rod-local residuals (R, 12N).
        res_ee: The platform's own residual (6,).
        x0: Prescribed base twists (R, 6, C).

    Returns:
        ``(dy, dz)``.
    """
    hbb_inv, gmat, lo, dinv, xu, h10, s_inv = factors
    r, n = hel.shape[0], hel.shape[1]
    nc = x0.shape[2]
    ny = 12 * n - 6
    gvec = np.empty((r, n, 6, nc))  # H_ββ⁻¹ b_β
    xb = np.empty((r, n, 6, nc))  # D̃_j⁻¹ b̃_j
    rz = np.zeros((6, nc))
    for i in range(6):
        rz[i, 0] = -res_ee[i]
    bn = np.empty((n + 1, 6, nc))
    bc = np.empty((12, nc))
    bbeta = np.zeros((6, nc))
    for k in range(r):
        for j in range(n + 1):
            _zero2(bn[j])
        for j in range(1, n):
            for i in range(6):
                bn[j, i, 0] = -res[k, 6 * (j - 1) + i]
        for i in range(6):
            bn[n, i, 0] = -res[k, 12 * n - 6 + i]
        for e in range(n):
            for i in range(6):
                bbeta[i, 0] = -res[k, 6 * (n - 1) + 6 * e + i]
            gemm6(hbb_inv[k, e], bbeta, gvec[k, e], 1.0, False)
            gemm6(hel[k, e, :12, 12:], gvec[k, e], bc, -1.0, False)
            if e == 0:  # node 0 prescribed: move H̃_{1,0} x₀ to the right-hand side
                gemm6(h10[k], x0[k], bn[1], -1.0, True)
            for i in range(6):
                for j in range(nc):
                    if e > 0:
                        bn[e, i, j] += bc[i, j]
                    bn[e + 1, i, j] += bc[6 + i, j]
        for j in range(1, n):
            gemm6(dinv[k, j], bn[j], xb[k, j], 1.0, False)
            gemm6(lo[k, j], xb[k, j], bn[j + 1], -1.0, True)
        for i in range(6):
            for j in range(nc):
                rz[i, j] += bn[n, i, j]
    dz = np.empty((6, nc))
    gemm6(s_inv, rz, dz, 1.0, False)
    dy = np.empty((r, ny, nc))
    xs = np.empty((n + 1, 6, nc))
    for k in range(r):
        copy2(x0[k], xs[0])
        copy2(dz, xs[n])
        for j in range(n - 1, 0, -1):
            copy2(xb[k, j], xs[j])
            gemm6(xu[k, j], xs[j + 1], xs[j], -1.0, True)
            copy2(xs[j], dy[k, 6 * (j - 1) : 6 * j])
        for e in range(n):
            o = 6 * (n - 1) + 6 * e
            copy2(gvec[k, e], dy[k, o : o + 6])
            gemm6(gmat[k, e, :, :6], xs[e], dy[k, o : o + 6], -1.0, True)
            gemm6(gmat[k, e, :, 6:], xs[e + 1], dy[k, o : o + 6], -1.0, True)
    return dy, dz


@njit(cache=True, inline="always")
def base_columns(dz0, rod_motor, n_motors):
    """Prescribed base twists (R, 6, 1 + M): column 0 zero (the Newton step), column 1 + m the base twist per
    unit angle ``dz0`` (R, 6) of the rods driven by motor m (the sensitivity dq/dθ_m).

    Args:
        dz0: Body-frame base twist per unit motor angle of each rod (R, 6).
        rod_motor: Motor index of each rod (R,); −1 for a fixed base.
        n_motors: Number of motors M.

    Returns:
        The prescribed base twists (R, 6, 1 + M).
    """
    x0 = np.zeros((dz0.shape[0], 6, 1 + n_motors))
    for k in range(dz0.shape[0]):
        if rod_motor[k] >= 0:
            for i in range(6):
                x0[k, i, 1 + rod_motor[k]] = dz0[k, i]
    return x0


@njit(cache=True)
def condensed_solve(hel, res, res_ee, kee, dz0, rod_motor, n_motors):
    """Solve the Newton system and the motor sensitivity by condensation (see the module docstring).

    hel (R, N, 18, 18) and kee (6, 6) as in :func:`condense`; res (R, 12N): rod-local residuals
    ``[ζ_1 … ζ_{N-1}, β_1 … β_N, ζ_ee]``; res_ee (6,): the platform's own residual; dz0 (R, 6): the base twist
    per unit motor angle of each rod (body frame); rod_motor (R,) (−1: fixed base).
    Returns ``dy`` (R, 12N - 6, 1 + M) and ``dz`` (6, 1 + M).

    Args:
        hel: Element tangents (R, N, 18, 18).
        res: Rod-local residuals (R, 12N).
        res_ee: The platform's own residual (6,).
        kee: Platform load stiffness (6, 6).
        dz0: Base twist per unit motor angle of each rod (R, 6).
        rod_motor: Motor index of each rod (R,); −1 for a fixed base.
        n_motors: Number of motors M.

    Returns:
        ``(dy, dz)``: column 0 the Newton step, column 1 + m the sensitivity to θ_m.
    """
    return condensed_apply(hel, condense(hel, kee), res, res_ee, base_columns(dz0, rod_motor, n_motors))
