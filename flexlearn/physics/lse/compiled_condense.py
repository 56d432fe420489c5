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
A singular block gives non-finite entries, which the Newton loop treats as a failed iteration.
"""
from __future__ import annotations

import numpy as np

from flexlearn.physics.lse.compiled import _gemm6, _inv6, _inv6_into, njit

__all__ = ["condensed_solve"]


@njit(cache=True)
def condensed_solve(hel, res, res_ee, kee, dz0, rod_motor, n_motors):
    """Solve the Newton system and the motor sensitivity by condensation (see the module docstring).

    hel (R, N, 18, 18): element tangents over (δζ_a, δζ_b, δβ) with the tip projection and the nodal load
    stiffness included; res (R, 12N): rod-local residuals ``[ζ_1 … ζ_{N-1}, β_1 … β_N, ζ_ee]``; res_ee (6,)
    and kee (6, 6): the platform's own residual and load stiffness; dz0 (R, 6): the base twist per unit motor
    angle of each rod (body frame); rod_motor (R,) (−1: fixed base).
    Returns ``dy`` (R, 12N - 6, 1 + M) and ``dz`` (6, 1 + M).
    """
    r, n = hel.shape[0], hel.shape[1]
    nc = 1 + n_motors
    ny = 12 * n - 6
    gmat = np.empty((r, n, 6, 12))      # H_ββ⁻¹ H_βn per element
    gvec = np.empty((r, n, 6, nc))      # H_ββ⁻¹ b_β
    xu = np.empty((r, n, 6, 6))         # D̃_j⁻¹ U_j (j = 1 … N-1)
    xb = np.empty((r, n, 6, nc))        # D̃_j⁻¹ b̃_j
    x0 = np.zeros((r, 6, nc))           # prescribed base twists
    s = kee.copy()
    rz = np.zeros((6, nc))
    for i in range(6):
        rz[i, 0] = -res_ee[i]
    d = np.empty((n + 1, 6, 6))
    up = np.empty((n + 1, 6, 6))
    lo = np.empty((n + 1, 6, 6))
    bn = np.empty((n + 1, 6, nc))
    hc = np.empty((12, 12))
    bc = np.empty((12, nc))
    bbeta = np.zeros((6, nc))
    hbb_inv = np.empty((6, 6))
    dinv = np.empty((6, 6))
    tmp = np.empty((6, 6))
    for k in range(r):
        if rod_motor[k] >= 0:
            for i in range(6):
                x0[k, i, 1 + rod_motor[k]] = dz0[k, i]
        d[:] = 0.0
        bn[:] = 0.0
        for j in range(1, n):
            for i in range(6):
                bn[j, i, 0] = -res[k, 6 * (j - 1) + i]
        for i in range(6):
            bn[n, i, 0] = -res[k, 12 * n - 6 + i]
        for e in range(n):
            hm = hel[k, e]
            tmp[:, :] = hm[12:, 12:]
            _inv6_into(tmp, hbb_inv)
            for i in range(6):
                bbeta[i, 0] = -res[k, 6 * (n - 1) + 6 * e + i]
            _gemm6(hbb_inv, hm[12:, :12], gmat[k, e], 1.0, False)
            _gemm6(hbb_inv, bbeta, gvec[k, e], 1.0, False)
            hc[:, :] = hm[:12, :12]
            _gemm6(hm[:12, 12:], gmat[k, e], hc, -1.0, True)
            _gemm6(hm[:12, 12:], gvec[k, e], bc, -1.0, False)
            if e == 0:  # node 0 prescribed: move H̃_{1,0} x₀ to the right-hand side
                _gemm6(hc[6:, :6], x0[k], bn[1], -1.0, True)
            for i in range(6):
                for j in range(6):
                    if e > 0:
                        d[e, i, j] += hc[i, j]
                        up[e, i, j] = hc[i, 6 + j]
                        lo[e, i, j] = hc[6 + i, j]
                    d[e + 1, i, j] += hc[6 + i, 6 + j]
                for j in range(nc):
                    if e > 0:
                        bn[e, i, j] += bc[i, j]
                    bn[e + 1, i, j] += bc[6 + i, j]
        for j in range(1, n):
            _inv6_into(d[j], dinv)
            _gemm6(dinv, up[j], xu[k, j], 1.0, False)
            _gemm6(dinv, bn[j], xb[k, j], 1.0, False)
            _gemm6(lo[j], xu[k, j], d[j + 1], -1.0, True)
            _gemm6(lo[j], xb[k, j], bn[j + 1], -1.0, True)
        s += d[n]
        rz += bn[n]
    dz = np.empty((6, nc))
    _gemm6(_inv6(s), rz, dz, 1.0, False)
    dy = np.empty((r, ny, nc))
    xs = np.empty((n + 1, 6, nc))
    for k in range(r):
        xs[0] = x0[k]
        xs[n] = dz
        for j in range(n - 1, 0, -1):
            xs[j] = xb[k, j]
            _gemm6(xu[k, j], xs[j + 1], xs[j], -1.0, True)
            dy[k, 6 * (j - 1):6 * j] = xs[j]
        for e in range(n):
            o = 6 * (n - 1) + 6 * e
            dy[k, o:o + 6] = gvec[k, e]
            _gemm6(gmat[k, e, :, :6], xs[e], dy[k, o:o + 6], -1.0, True)
            _gemm6(gmat[k, e, :, 6:], xs[e + 1], dy[k, o:o + 6], -1.0, True)
    return dy, dz
