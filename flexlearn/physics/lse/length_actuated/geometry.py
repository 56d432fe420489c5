"""Pose helpers of the inverse pose statics (numba, no allocation where marked): SE(3) logarithm, pose products,
the tip poses ``g_ee g^loc_k exp(ψ_k ê₃)`` and their wrench transforms ``Ad_{T⁻¹}ᵀ``, the storage and weighted
combination of solutions, the weights of the polynomial extrapolation along a straight platform path, and the cold
start (clamped–clamped Hermite rods). The strain retraction and the nodes rebuilt from element strains are in
:mod:`flexlearn.physics.lse.length_actuated.closure`. See :mod:`flexlearn.physics.lse.length_actuated.kernels`.
Poses (4, 4), twists [φ; ρ] (6,) [rad; m]; SI units.
"""

from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.lse.compiled.elements import coefficients_into, refresh_pose_cache
from flexlearn.physics.lse.compiled.linalg import matmul, njit, njit_leaf, pose_mul_into

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = [
    "EXTRAP_REACH",
    "LINE_TOL",
    "NODE_GAP",
    "ad_inv_t_into",
    "cold_state",
    "combine_solutions_into",
    "copy_state",
    "line_weights",
    "log_se3_into",
    "record_solution_into",
    "rel_log",
    "rel_pose_into",
    "tip_poses",
    "tip_poses_into",
]

LINE_TOL = 1e-6  # relative distance from the line below which stored platform poses count as on it
EXTRAP_REACH = 2.0  # extrapolation at most this many times the nearest stored distance from the latest pose
NODE_GAP = 0.25  # stored poses closer than this fraction of the move to a later one are not used


@njit_leaf
def tip_poses_into(g_ee, tip_local, psi, out):
    """Tip node poses (R, 4, 4) ``g_ee g^loc_k exp(ψ_k ê₃)`` into ``out``. No allocation.

    Args:
        g_ee: Platform pose (4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4).
        psi: Tip twists ψ (R,) [rad].
        out: Output (R, 4, 4), written.
    """
    for k in range(tip_local.shape[0]):
        t = out[k]
        pose_mul_into(g_ee, tip_local[k], t)
        c, s = math.cos(psi[k]), math.sin(psi[k])
        for i in range(3):
            a, b = t[i, 0], t[i, 1]
            t[i, 0] = c * a + s * b
            t[i, 1] = -s * a + c * b


@njit(cache=True)
def tip_poses(g_ee, tip_local, psi):
    """Tip node poses (R, 4, 4) ``g_ee g^loc_k exp(ψ_k ê₃)``.

    Args:
        g_ee: Platform pose (4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4).
        psi: Tip twists ψ (R,) [rad].

    Returns:
        The tip poses (R, 4, 4).
    """
    out = np.empty((tip_local.shape[0], 4, 4))
    tip_poses_into(g_ee, tip_local, psi, out)
    return out


@njit_leaf
def ad_inv_t_into(tip_local, psi, out):
    """Ad_{T⁻¹}ᵀ (6, 6) of T = g^loc exp(ψ ê₃) into ``out`` (maps a tip-frame wrench to the platform frame).

    Args:
        tip_local: Platform attachment g^loc (4, 4).
        psi: Tip twist ψ [rad].
        out: Output (6, 6), written.
    """
    c, s = math.cos(psi), math.sin(psi)
    # Ad_T = [[R, 0], [p^ R, R]] ([ω; v] order) and Ad_{T⁻¹}ᵀ = Ad_T⁻ᵀ = [[R, p^ R], [0, R]]; R into both
    # diagonal blocks first (no scratch), then p^ R from them
    for i in range(3):
        a, b = tip_local[i, 0], tip_local[i, 1]
        out[i, 0], out[i, 1], out[i, 2] = c * a + s * b, -s * a + c * b, tip_local[i, 2]
        for j in range(3):
            out[3 + i, 3 + j] = out[i, j]
            out[3 + i, j] = 0.0
    p0, p1, p2 = tip_local[0, 3], tip_local[1, 3], tip_local[2, 3]
    for j in range(3):
        out[0, 3 + j] = -p2 * out[1, j] + p1 * out[2, j]
        out[1, 3 + j] = p2 * out[0, j] - p0 * out[2, j]
        out[2, 3 + j] = -p1 * out[0, j] + p0 * out[1, j]


@njit_leaf
def log_se3_into(g, out, co):
    """SE(3) logarithm [φ; ρ] of a pose (4, 4) (rotation angle < π) into ``out`` (6,); ``co`` (6,) receives the
    coefficients of θ² (:func:`~flexlearn.physics.lse.compiled.elements._coefficients_into`). No allocation.
    ``φ = vee(R - Rᵀ) / (2 A)``, ``ρ = p - φ×p / 2 + D φ×(φ×p)``.

    Args:
        g: Pose (4, 4).
        out: Output twist (6,), written.
        co: Scratch (6,).
    """
    v0, v1, v2 = 0.5 * (g[2, 1] - g[1, 2]), 0.5 * (g[0, 2] - g[2, 0]), 0.5 * (g[1, 0] - g[0, 1])
    cth = 0.5 * (g[0, 0] + g[1, 1] + g[2, 2] - 1.0)
    s2 = v0 * v0 + v1 * v1 + v2 * v2
    t2 = 0.0
    if s2 > 0:
        th = math.atan2(math.sqrt(s2), cth)
        t2 = th * th
    coefficients_into(t2, co)
    f0, f1, f2 = v0 / co[0], v1 / co[0], v2 / co[0]
    p0, p1, p2 = g[0, 3], g[1, 3], g[2, 3]
    u0, u1, u2 = f1 * p2 - f2 * p1, f2 * p0 - f0 * p2, f0 * p1 - f1 * p0
    d = co[5]
    out[0], out[1], out[2] = f0, f1, f2
    out[3] = p0 - 0.5 * u0 + d * (f1 * u2 - f2 * u1)
    out[4] = p1 - 0.5 * u1 + d * (f2 * u0 - f0 * u2)
    out[5] = p2 - 0.5 * u2 + d * (f0 * u1 - f1 * u0)


@njit_leaf
def rel_pose_into(a, b, out):
    """Out = a⁻¹ b for poses (4, 4) (``out`` must not alias ``a`` or ``b``). No allocation.

    Args:
        a: Pose (4, 4).
        b: Pose (4, 4).
        out: Output pose (4, 4), written.
    """
    for i in range(3):
        acc = 0.0
        for q in range(3):
            acc += a[q, i] * (b[q, 3] - a[q, 3])
        out[i, 3] = acc
        for j in range(3):
            out[i, j] = a[0, i] * b[0, j] + a[1, i] * b[1, j] + a[2, i] * b[2, j]
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0


@njit(cache=True)
def rel_log(a, b):
    """log(a⁻¹ b) = [φ; ρ] (6,) of two poses (4, 4) (relative rotation < π); the allocating form of
    :func:`rel_pose_into` and :func:`log_se3_into`.

    Args:
        a: Pose (4, 4).
        b: Pose (4, 4).

    Returns:
        The twist [φ; ρ] (6,) [rad; m].
    """
    rel, out = np.empty((4, 4)), np.empty(6)
    rel_pose_into(a, b, rel)
    log_se3_into(rel, out, np.empty(6))
    return out


@njit(cache=True)
def _rotation_between(a, b):
    """Smallest rotation (3, 3) taking the unit vector a to the unit vector b (a·b > -1)."""
    v = np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])
    c = a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
    vh = np.zeros((3, 3))
    vh[0, 1], vh[0, 2], vh[1, 0], vh[1, 2], vh[2, 0], vh[2, 1] = -v[2], v[1], v[2], -v[0], -v[1], v[0]
    return np.eye(3) + vh + matmul(vh, vh) / (1.0 + c)


@njit(cache=True)
def cold_state(base, g_ee, tip_local, n):
    """Start without a previous solution: each rod on the cubic Hermite curve from its base to its tip with the
    clamped tangents (the small-deflection shape of a clamped–clamped rod), frames turned from the base frame
    by the smallest rotation onto the curve tangent, β = 0, ψ = 0, L = the curve's length.

    Args:
        base: Rod base poses (R, 4, 4).
        g_ee: Platform pose (4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4).
        n: Number of elements per rod N.

    Returns:
        The state (g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,) [rad], lengths (R,) [m]).
    """
    r = base.shape[0]
    psi = np.zeros(r)
    tip = tip_poses(g_ee, tip_local, psi)
    g_int = np.zeros((r, max(n - 1, 0), 4, 4))
    lengths = np.empty(r)
    for k in range(r):
        pa, ta = base[k, :3, 3], base[k, :3, 2]
        pb, tb = tip[k, :3, 3], tip[k, :3, 2]
        d = pb - pa
        c = math.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
        m = 64
        total = 0.0
        for i in range(m + 1):  # Simpson's rule for the arc length
            t = i / m
            dp = (
                (6 * t * t - 6 * t) * pa
                + (3 * t * t - 4 * t + 1) * c * ta
                + (6 * t - 6 * t * t) * pb
                + (3 * t * t - 2 * t) * c * tb
            )
            wgt = 1.0 if (i == 0 or i == m) else (4.0 if i % 2 == 1 else 2.0)
            total += wgt * math.sqrt(dp[0] ** 2 + dp[1] ** 2 + dp[2] ** 2)
        lengths[k] = total / (3 * m)
        for j in range(1, n):
            t = j / n
            p = (
                (2 * t**3 - 3 * t * t + 1) * pa
                + (t**3 - 2 * t * t + t) * c * ta
                + (3 * t * t - 2 * t**3) * pb
                + (t**3 - t * t) * c * tb
            )
            dp = (
                (6 * t * t - 6 * t) * pa
                + (3 * t * t - 4 * t + 1) * c * ta
                + (6 * t - 6 * t * t) * pb
                + (3 * t * t - 2 * t) * c * tb
            )
            tau = dp / math.sqrt(dp[0] ** 2 + dp[1] ** 2 + dp[2] ** 2)
            g_int[k, j - 1, :3, :3] = matmul(_rotation_between(ta.copy(), tau), base[k, :3, :3].copy())
            g_int[k, j - 1, :3, 3] = p
            g_int[k, j - 1, 3, 3] = 1.0
    return g_int, np.zeros((r, n, 6)), psi, lengths


@njit_leaf
def record_solution_into(parts, state, om, be, psi, lengths):
    """A solution's element twists Ω = [φ; ρ] (from ``parts``, the pieces of its residual pass), slopes β, tip
    twists ψ and lengths L into ``om``, ``be``, ``psi``, ``lengths``. No allocation.

    Args:
        parts: Element pieces of the solution's residual pass
            (:func:`~flexlearn.physics.lse.compiled.elements.alloc_parts`).
        state: The solution (g_int, beta, psi, lengths), as :func:`copy_state`.
        om: Output element twists Ω (R, N, 6) [rad; m], written.
        be: Output slopes β (R, N, 6), written.
        psi: Output tip twists ψ (R,) [rad], written.
        lengths: Output rod lengths L (R,) [m], written.
    """
    r, n = be.shape[0], be.shape[1]
    for k in range(r):
        for e in range(n):
            for j in range(3):
                om[k, e, j] = parts[2][k, e, j]
                om[k, e, 3 + j] = parts[3][k, e, j]
            for j in range(6):
                be[k, e, j] = state[1][k, e, j]
        psi[k] = state[2][k]
        lengths[k] = state[3][k]


@njit_leaf
def combine_solutions_into(w, which, count, om_store, be_store, psi_store, len_store, om, be, psi, lengths):
    """``Σ_i w[i] x[which[i]]`` over i < count of stored solutions into ``om``, ``be``, ``psi``, ``lengths``,
    summed in the order i = 0 … count-1 for every entry. No allocation.

    Args:
        w: Weights (≥ count,).
        which: Storage slot of the i-th solution (≥ count,).
        count: Number of solutions combined.
        om_store: Stored element twists Ω (S, R, N, 6).
        be_store: Stored slopes β (S, R, N, 6).
        psi_store: Stored tip twists ψ (S, R) [rad].
        len_store: Stored rod lengths L (S, R) [m].
        om: Output Ω (R, N, 6), written.
        be: Output β (R, N, 6), written.
        psi: Output ψ (R,), written.
        lengths: Output L (R,), written.
    """
    r, n = be.shape[0], be.shape[1]
    for k in range(r):
        psi[k], lengths[k] = 0.0, 0.0
        for e in range(n):
            for j in range(6):
                om[k, e, j], be[k, e, j] = 0.0, 0.0
    for i in range(count):
        wi, s = w[i], which[i]
        for k in range(r):
            psi[k] += wi * psi_store[s, k]
            lengths[k] += wi * len_store[s, k]
            for e in range(n):
                for j in range(6):
                    om[k, e, j] += wi * om_store[s, k, e, j]
                    be[k, e, j] += wi * be_store[s, k, e, j]


@njit(cache=True)
def copy_state(src, dst):
    """Dst ← src for states (g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,), lengths (R,)).

    Args:
        src: The state copied.
        dst: The state written (same shapes).
    """
    dst[0][:] = src[0]
    dst[1][:] = src[1]
    dst[2][:] = src[2]
    dst[3][:] = src[3]


@njit(cache=True)
def line_weights(poses, m, g_new, s, w, max_points):
    """Lagrange weights (m,) into ``w`` that extrapolate values stored at the poses ``poses[:m]`` (latest first)
    to ``g_new`` along one SE(3) geodesic: ``u_i = log(g_0⁻¹ g_i)`` parallel to ``u = log(g_0⁻¹ g_new)`` (within
    LINE_TOL, relative), s_i = u_i·u/|u| their positions on it (into ``s``), ``w_i = Π_{j≠i} (|u| - s_j)/(s_i -
    s_j)`` over the latest ``max_points`` stored poses that lie on the line (the scan stops at the first one off
    it) at distinct positions (an older pose closer than NODE_GAP |u| to a chosen one is left out, weight 0).

    Args:
        poses: Stored platform poses (H, 4, 4), latest first.
        m: Number of stored poses.
        g_new: Platform pose (4, 4) to extrapolate to.
        s: Output positions on the line (≥ m,).
        w: Output weights (≥ m,).
        max_points: Most points used.

    Returns:
        The number of points used (0 when fewer than 2, or when g_new lies farther from g_0 than EXTRAP_REACH × the
        nearest chosen distance).
    """
    rel, vec = np.empty((4, 4)), np.empty((3, 6))
    ut, ui, co = vec[0], vec[1], vec[2]
    rel_pose_into(poses[0], g_new, rel)
    log_se3_into(rel, ut, co)
    nt = 0.0
    for j in range(6):
        nt += ut[j] * ut[j]
    nt = math.sqrt(nt)
    w[:m] = 0.0
    if nt == 0.0 or m < 2 or max_points < 2:
        return 0
    chosen = np.zeros(m, dtype=np.bool_)
    s[0], chosen[0] = 0.0, True
    used, near = 1, np.inf
    for i in range(1, m):
        if used == max_points:
            break
        rel_pose_into(poses[0], poses[i], rel)
        log_se3_into(rel, ui, co)
        si = 0.0
        for j in range(6):
            si += ui[j] * ut[j]
        si /= nt
        off = 0.0
        for j in range(6):
            off += (ui[j] - (si / nt) * ut[j]) ** 2
        if math.sqrt(off) > LINE_TOL * (nt + abs(si)):
            break
        s[i] = si
        chosen[i] = True
        for j in range(i):
            if chosen[j] and abs(si - s[j]) < NODE_GAP * nt:
                chosen[i] = False
        if chosen[i]:
            used += 1
            near = min(near, abs(si))
    if used < 2 or not nt <= EXTRAP_REACH * near:
        return 0
    for i in range(m):
        if chosen[i]:
            acc = 1.0
            for j in range(m):
                if j != i and chosen[j]:
                    acc *= (nt - s[j]) / (s[i] - s[j])
            w[i] = acc
    return used
