"""Residual of the inverse pose statics and the norms Newton judges it and its corrections by (numba).

Per rod k (R rods of N elements), the LSE virtual-work residual (seed 003, eq. (11), Sec. V-A) ``r_k`` (12N,)
``[ζ_1 … ζ_{N-1}, β_1 … β_N, tip wrench r_b]`` [N m, N], and the platform wrench balance (body frame)

    r_ee = Σ_k Ad_{T_k⁻¹}ᵀ r_{b,k} − w_ee   (6,),   T_k = g^loc_k exp(ψ_k ê₃),

with the scaled ∞-norms of :func:`residual_norm` (residual) and :func:`step_norm` (correction) and the largest
nodal rotation of a correction (:func:`largest_rotation`) [rad]. Used by
:mod:`flexlearn.physics.lse.length_actuated.kernels`; part of the pose kernels' cache group
(:data:`flexlearn.physics.lse.compiled.elements.POSE_CACHE_SOURCES`). SI units.
"""

from __future__ import annotations

import math

from flexlearn.physics.lse.compiled.elements import element_into, refresh_pose_cache
from flexlearn.physics.lse.compiled.linalg import njit_leaf
from flexlearn.physics.lse.length_actuated.geometry import ad_inv_t_into, tip_poses_into

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = ["largest_rotation", "residual_norm", "residuals_into", "step_norm"]


@njit_leaf
def residuals_into(base, g_ee, state, tip_local, kd, xi0, w_body, parts, ws, res, res_ee, tip, adt):
    """Rod residuals (R, 12N) ``[ζ_1 … ζ_{N-1}, β_1 … β_N, tip wrench r_b]`` per rod, the platform residual
    ``Σ Ad_{T⁻¹}ᵀ r_b − w_body`` (6,) and the tip poses into res, res_ee, tip; element pieces into ``parts``.

    Args:
        base: Rod base poses (R, 4, 4).
        g_ee: Platform pose (4, 4).
        state: The state (g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,) [rad], lengths (R,) [m]).
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6).
        xi0: Reference strain of each rod (R, 6).
        w_body: External platform wrench [moment; force] (6,), body frame.
        parts: Element pieces (:func:`~flexlearn.physics.lse.compiled.elements.alloc_parts`), written.
        ws: Element scratch (:func:`~flexlearn.physics.lse.compiled.elements.workspace`).
        res: Output rod residuals (R, 12N), written.
        res_ee: Output platform residual (6,), written.
        tip: Output tip poses (R, 4, 4), written.
        adt: Scratch (6, 6).
    """
    g_int, beta, psi, lengths = state
    r, n = beta.shape[0], beta.shape[1]
    tip_poses_into(g_ee, tip_local, psi, tip)
    for i in range(6):
        res_ee[i] = -w_body[i]
    for k in range(r):
        h = lengths[k] / n
        out = res[k]
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
        ad_inv_t_into(tip_local[k], psi[k], adt)
        for i in range(6):
            acc = 0.0
            for j in range(6):
                acc += adt[i, j] * out[12 * n - 6 + j]
            res_ee[i] += acc


@njit_leaf
def residual_norm(res, res_ee, w, scale, twist_free):
    """Scaled residual ∞-norm: entries in N·m by the weights w (12N,) ([1, L] per node, 1/L² per β), over
    ``scale``; the rows solved for: interior nodes, slopes, tip torsion (when free), platform balance.

    Args:
        res: Rod residuals (R, 12N).
        res_ee: Platform residual (6,).
        w: Row weights (12N,).
        scale: Load scale the norm is divided by [N m].
        twist_free: The tip torsion is a residual row.

    Returns:
        The norm; inf when a residual is not finite.
    """
    ny = res.shape[1] - 6
    out, total = 0.0, 0.0
    for k in range(res.shape[0]):
        for i in range(ny):
            v = abs(res[k, i] * w[i])
            out, total = max(out, v), total + v
        if twist_free:
            v = abs(res[k, ny + 2] * w[ny + 2])
            out, total = max(out, v), total + v
    for i in range(6):
        v = abs(res_ee[i] * w[ny + i])
        out, total = max(out, v), total + v
    return out / scale if math.isfinite(total) else math.inf  # max skips NaN: a diverged state is not converged


@njit_leaf
def largest_rotation(dy, dpsi, dl, lengths, col):
    """Largest nodal rotation [rad] (and tip twist, relative length change) of a correction column.

    Args:
        dy: Corrections of the interior nodes and slopes (R, 12N - 6, C).
        dpsi: Corrections of the tip twists (R, C) [rad].
        dl: Corrections of the rod lengths (R, C) [m].
        lengths: Rod lengths (R,) [m].
        col: The column.

    Returns:
        The largest of the three [rad].
    """
    r = dy.shape[0]
    n1 = (dy.shape[1] - 6 * ((dy.shape[1] + 6) // 12)) // 6
    big = 0.0
    for k in range(r):
        big = max(big, abs(dpsi[k, col]), abs(dl[k, col]) / lengths[k])
        for j in range(n1):
            big = max(big, math.sqrt(dy[k, 6 * j, col] ** 2 + dy[k, 6 * j + 1, col] ** 2 + dy[k, 6 * j + 2, col] ** 2))
    return big


@njit_leaf
def step_norm(dy, dpsi, dl, lengths, w):
    """Weighted ∞-norm of the Newton correction (column 0): rotations [rad], translations / L, slopes × L², δL / L.

    Args:
        dy: Corrections of the interior nodes and slopes (R, 12N - 6, C).
        dpsi: Corrections of the tip twists (R, C) [rad].
        dl: Corrections of the rod lengths (R, C) [m].
        lengths: Rod lengths (R,) [m].
        w: Row weights (12N,) of the residual (the correction is divided by them).

    Returns:
        The norm; inf when a correction is not finite.
    """
    out, total = 0.0, 0.0
    for k in range(dy.shape[0]):
        for i in range(dy.shape[1]):
            v = abs(dy[k, i, 0] / w[i])
            out, total = max(out, v), total + v
        v = max(abs(dpsi[k, 0]), abs(dl[k, 0]) / lengths[k])
        out, total = max(out, v), total + abs(dpsi[k, 0]) + abs(dl[k, 0])
    return out if math.isfinite(total) else math.inf
