"""Pose helpers of the inverse pose statics (numba, no allocation where marked): SE(3) exponential and
logarithm, pose products, the tip poses ``g_ee g^loc_k exp(ψ_k ê₃)`` and their wrench transforms, the strain
retraction of a Newton correction, the nodes rebuilt from element strains and closed onto the tips by the
element rotations and rod lengths (stretch and shear held), the weights of the polynomial
extrapolation along a straight platform path, and the cold start (clamped–clamped Hermite rods). See
:mod:`flexlearn.physics.lse.length_actuated.kernels`. SI units.
"""

from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.lse.compiled.elements import coefficients_into, exp_se3_into, refresh_pose_cache
from flexlearn.physics.lse.compiled.linalg import gemm, hat_into, inv6_into, matmul, njit, njit_leaf, pose_mul_into

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = [
    "CLOSURE_PASSES",
    "CLOSURE_TOL",
    "EXTRAP_REACH",
    "LINE_TOL",
    "NODE_GAP",
    "ad_inv_t_into",
    "cold_state",
    "combine_solutions_into",
    "copy_state",
    "line_weights",
    "log_se3_into",
    "rebuild_nodes_into",
    "record_solution_into",
    "rel_log",
    "rel_pose_into",
    "retract_strain_into",
    "tip_poses",
    "tip_poses_into",
]

LINE_TOL = 1e-6  # relative distance from the line below which stored platform poses count as on it
EXTRAP_REACH = 2.0  # extrapolation at most this many times the nearest stored distance from the latest pose
NODE_GAP = 0.25  # stored poses closer than this fraction of the move to a later one are not used
CLOSURE_TOL = 1e-13  # chain-to-tip mismatch (rad, and m per m of rod) below which the nodes are closed rigidly
CLOSURE_PASSES = 3  # closures by strain per rebuild (each leaves ≈ |Ω_rot|³/15 of the mismatch: J_r's series cut)


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
    by the smallest rotation onto the curve tangent, β = 0, ψ = 0, L = the curve's length. Returns
    (g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,), lengths (R,)).

    Args:
        base: Rod base poses (R, 4, 4).
        g_ee: Platform pose (4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4).
        n: Number of elements per rod N.
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
    twists ψ and lengths L into ``om``, ``be`` (R, N, 6), ``psi``, ``lengths`` (R,)."""
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
    """``Σ_i w[i] x[which[i]]`` over i < count of stored solutions (Ω, β (S, R, N, 6); ψ, L (S, R)) into ``om``,
    ``be`` (R, N, 6), ``psi``, ``lengths`` (R,), summed in the order i = 0 … count-1 for every entry."""
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
    """Dst ← src for states (g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,), lengths (R,))."""
    dst[0][:] = src[0]
    dst[1][:] = src[1]
    dst[2][:] = src[2]
    dst[3][:] = src[3]


@njit(cache=True)
def retract_strain_into(base, state, dy, dpsi, dl, alpha, col, tip_old, tip_new, parts, out, scratch, omega):
    """Strain retraction of the correction α (dy, dpsi, dl)[..., col] from ``state`` into ``out`` (states as
    :func:`copy_state`): each element's relative pose changed by the linearised
    ``δΩ_j = -J_l⁻¹(Ω_j) δζ_{j-1} + J_r⁻¹(Ω_j) δζ_j`` (Ω, J_r⁻¹, J_l⁻¹ from ``parts`` of the residual at ``state``;
    δζ_N = log(tip_old⁻¹ tip_new)) into ``omega`` (R, N, 6), the nodes rebuilt from it by
    :func:`rebuild_nodes_into` (as :meth:`CPRModel._retract` with ``retraction="strain"``, which closes the
    chain rigidly; here the closure keeps the element stretch and shear): unlike ``g ⊕ αδζ`` node by node it does
    not stretch the nearly inextensible rods by O(|δζ|²)·EA. β, ψ are updated linearly, L linearly plus the
    closure's length change. scratch (5, 6): rows 0 … 3 used."""
    beta, psi, lengths = state[1], state[2], state[3]
    _gi, be, ps, ln = out
    r, n = beta.shape[0], beta.shape[1]
    dprev, dnext, co = scratch[0], scratch[1], scratch[3]
    rel = np.empty((4, 4))
    for k in range(r):
        for i in range(6):
            dprev[i] = 0.0
        for e in range(n):
            if e < n - 1:
                for i in range(6):
                    dnext[i] = alpha * dy[k, 6 * e + i, col]
            else:
                rel_pose_into(tip_old[k], tip_new[k], rel)
                log_se3_into(rel, dnext, co)
            jri, jli, phi, rho = parts[8][k, e], parts[9][k, e], parts[2][k, e], parts[3][k, e]
            for i in range(6):
                acc = phi[i] if i < 3 else rho[i - 3]
                for q in range(6):
                    acc += jri[i, q] * dnext[q] - jli[i, q] * dprev[q]
                omega[k, e, i] = acc
            for i in range(6):
                dprev[i] = dnext[i]
        for e in range(n):
            for i in range(6):
                be[k, e, i] = beta[k, e, i] + alpha * dy[k, 6 * (n - 1) + 6 * e + i, col]
        ps[k] = psi[k] + alpha * dpsi[k, col]
        ln[k] = lengths[k] + alpha * dl[k, col]
    rebuild_nodes_into(base, omega, tip_new, out[0], scratch, ln)


@njit_leaf
def _chain_into(base_k, omega_k, gi_k, g, step, g_next, co):
    """``g_j = g_{j-1} exp(Ω_j^)`` from ``base_k`` (4, 4) over the element twists ``omega_k`` (N, 6): interior nodes
    into ``gi_k`` (N-1, 4, 4), the end into ``g``. step, g_next (4, 4), co (6,): scratch. No allocation."""
    n = omega_k.shape[0]
    for i in range(4):
        for j in range(4):
            g[i, j] = base_k[i, j]
    for e in range(n):
        exp_se3_into(omega_k[e], step, co)
        pose_mul_into(g, step, g_next)
        for i in range(3):
            for j in range(4):
                g[i, j] = g_next[i, j]
        if e < n - 1:
            for i in range(4):
                for j in range(4):
                    gi_k[e, i, j] = g[i, j]


@njit_leaf
def _jr_blocks_into(omega_e, m):
    """Right Jacobian of the SE(3) exponential at Ω = [w; u], ``J_r = I − ad/2 + ad²/6 − ad³/24`` (the rest is
    O(|w|³|Ω|)), ad = [[ŵ, 0], [û, ŵ]]: its diagonal block T into m[2] and lower-left block B into m[3];
    m (8, 3, 3) rows 0, 1, 4 … 7 scratch (ŵ, û, powers and products). No allocation."""
    w, u, t, b, w2, uw, wu, x = m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]
    hat_into(omega_e[:3], w)
    hat_into(omega_e[3:], u)
    gemm(w, w, w2, 1.0, False)
    gemm(w2, w, x, 1.0, False)  # ŵ³
    for i in range(3):
        for j in range(3):
            t[i, j] = (1.0 if i == j else 0.0) - 0.5 * w[i, j] + w2[i, j] / 6.0 - x[i, j] / 24.0
    gemm(u, w, uw, 1.0, False)
    gemm(w, u, wu, 1.0, False)
    for i in range(3):
        for j in range(3):
            b[i, j] = -0.5 * u[i, j] + (uw[i, j] + wu[i, j]) / 6.0
    gemm(uw, w, b, -1.0 / 24.0, True)  # − (û ŵ² + ŵ û ŵ + ŵ² û) / 24
    gemm(w, uw, b, -1.0 / 24.0, True)
    gemm(w, wu, b, -1.0 / 24.0, True)


@njit(cache=True, inline="always")
def _closure_blocks_into(omega_k, gi_k, g_end, length, blocks, a, xi, m):
    """The linearised closure of :func:`_closure_by_strain`, element by element: ``M_j`` (the rotation columns)
    and the length column of each element into ``blocks[j]`` (6, 4), and ``Σ_j M_j M_jᵀ`` into the upper triangle
    of ``a`` (6, 6). xi (6,), m (8, 3, 3): scratch. No allocation; inlined into its one caller."""
    n = omega_k.shape[0]
    rx, t, bl = m[0], m[2], m[3]
    for i in range(6):
        for j in range(6):
            a[i, j] = 0.0
    for e in range(n):
        node = gi_k[e] if e < n - 1 else g_end
        _jr_blocks_into(omega_k[e], m)  # T, B into m[2], m[3]; m[0], m[1] free again
        for i in range(3):  # X = g_N⁻¹ g_j: R_x into m[0], p_x into xi[:3]
            for j in range(3):
                rx[i, j] = g_end[0, i] * node[0, j] + g_end[1, i] * node[1, j] + g_end[2, i] * node[2, j]
            xi[i] = (
                g_end[0, i] * (node[0, 3] - g_end[0, 3])
                + g_end[1, i] * (node[1, 3] - g_end[1, 3])
                + g_end[2, i] * (node[2, 3] - g_end[2, 3])
            )
        for i in range(3):
            for c in range(3):  # M_j = [R_x T; p̂_x R_x T + R_x B]
                top, bot = 0.0, 0.0
                for q in range(3):
                    top += rx[i, q] * t[q, c]
                    bot += rx[i, q] * bl[q, c]
                blocks[e, i, c], blocks[e, 3 + i, c] = top, bot
            blocks[e, i, 3] = 0.0  # length column [0; R_x T u / L]
        for q in range(3):
            xi[3 + q] = (t[q, 0] * omega_k[e, 3] + t[q, 1] * omega_k[e, 4] + t[q, 2] * omega_k[e, 5]) / length
        for i in range(3):
            blocks[e, 3 + i, 3] = rx[i, 0] * xi[3] + rx[i, 1] * xi[4] + rx[i, 2] * xi[5]
        for c in range(3):
            t0, t1, t2 = blocks[e, 0, c], blocks[e, 1, c], blocks[e, 2, c]
            blocks[e, 3, c] += xi[1] * t2 - xi[2] * t1
            blocks[e, 4, c] += xi[2] * t0 - xi[0] * t2
            blocks[e, 5, c] += xi[0] * t1 - xi[1] * t0
        for i in range(6):
            for j in range(i, 6):
                a[i, j] += (
                    blocks[e, i, 0] * blocks[e, j, 0]
                    + blocks[e, i, 1] * blocks[e, j, 1]
                    + blocks[e, i, 2] * blocks[e, j, 2]
                )


@njit_leaf
def _closure_by_strain(omega_k, gi_k, g_end, tip_k, length, blocks, a, ainv, rel, xi, co, m):
    """Close the chain onto its tip by its soft unknowns: the least change of the element rotations ``δφ_j`` and
    of the rod length (``δL`` weighted as a rotation of δL/h), the element stretch and shear ν_j = Ω_j,trans / h
    held, such that the end moves by ``ξ = log(g_N⁻¹ tip)``: linearised, ``Σ_j Ad_{g_N⁻¹ g_j} J_r(Ω_j) δΩ_j = ξ``
    with ``δΩ_j = [δφ_j; δL/L Ω_j,trans]`` (:func:`_jr_blocks_into`, :func:`_closure_blocks_into`), solved as ``δφ_j =
    M_jᵀ λ``, ``δL = h² cᵀ λ``, ``(Σ M_j M_jᵀ + h² c cᵀ) λ = ξ``. ``omega_k`` is updated in place; returns (True, δL),
    or (False, 0) with ``omega_k`` unchanged when the mismatch is below CLOSURE_TOL (rotation-matrix entries,
    translation / L), with a single element, or when the system is singular. blocks (N + 1, 6, 4), a, ainv (6, 6),
    rel (4, 4), xi, co (6,), m (8, 3, 3): scratch. No allocation."""
    n = omega_k.shape[0]
    if 3 * n + 1 < 6:  # one element: 4 unknowns cannot close 6 constraints (spread rigidly instead)
        return False, 0.0
    rel_pose_into(g_end, tip_k, rel)
    big = 0.0
    for i in range(3):
        big = max(big, abs(tip_k[i, 3] - g_end[i, 3]) / length)
        for j in range(3):
            big = max(big, abs(rel[i, j] - (1.0 if i == j else 0.0)))
    if big <= CLOSURE_TOL:
        return False, 0.0
    h2 = (length / n) ** 2
    _closure_blocks_into(omega_k, gi_k, g_end, length, blocks, a, xi, m)
    col = blocks[n, :, 0]  # c = Σ_j (length columns)
    for i in range(6):
        acc = 0.0
        for e in range(n):
            acc += blocks[e, i, 3]
        col[i] = acc
    for i in range(6):
        for j in range(i, 6):
            a[i, j] += h2 * col[i] * col[j]
            a[j, i] = a[i, j]
    inv6_into(a, ainv)
    if not ainv[0, 0] == ainv[0, 0]:  # singular (NaN from inv6_into): leave it to the rigid spread
        return False, 0.0
    log_se3_into(rel, xi, co)
    lam = co  # λ = A⁻¹ ξ into co (the log's coefficients are no longer needed)
    for i in range(6):
        acc = 0.0
        for j in range(6):
            acc += ainv[i, j] * xi[j]
        lam[i] = acc
    dl = 0.0
    for j in range(6):
        dl += h2 * col[j] * lam[j]
    for e in range(n):
        for c in range(3):
            acc = 0.0
            for j in range(6):
                acc += blocks[e, j, c] * lam[j]
            omega_k[e, c] += acc
        for i in range(3):
            omega_k[e, 3 + i] *= 1.0 + dl / length
    return True, dl


@njit(cache=True)
def rebuild_nodes_into(base, omega, tip, gi, scratch, lengths):
    """Interior nodes (R, N-1, 4, 4) into ``gi`` from the element relative poses ``omega`` (R, N, 6), closed onto
    the tip poses ``tip`` (R, 4, 4), with the rod lengths ``lengths`` (R,) (unknowns of the inverse problem)
    updated. The chain ``g_j = g_{j-1} exp(Ω_j^)`` from the base misses its tip by O(|δζ|²) after a linearised
    step; spread as a rigid correction (below) that mismatch stretches and shears the elements, which EA turns
    into force residuals far above the tolerance even at 1e-8 m. So first :func:`_closure_by_strain` takes it up
    by the element rotations and the length, with every element's stretch and shear held (``omega`` updated
    in place), and the chain is rebuilt, up to CLOSURE_PASSES times while the mismatch is above CLOSURE_TOL
    (each pass leaves ≈ |Ω_rot|³/15 of it, from the cut series of J_r). What remains is spread as the fraction j/N of
    the rigid correction: rotations ``exp(j/N δφ) = exp(δφ/N)^j`` (one exponential per rod), ``δφ = log(R_tip R_Nᵀ)``,
    translations ``j/N δp``, with the lengths taking its mean stretch ``L += Σ_j t_j·δp / N`` (t_j the mean of
    the element's end-node axes). scratch (5, 6): rows 2, 3.

    Args:
        base: Rod base poses (R, 4, 4).
        omega: Element relative twists Ω (R, N, 6); updated in place.
        tip: Tip poses (R, 4, 4).
        gi: Output interior nodes (R, N-1, 4, 4), written.
        scratch: Scratch (5, 6).
        lengths: Rod lengths (R,) [m], updated.
    """
    r, n = omega.shape[0], omega.shape[1]
    om, co = scratch[2], scratch[3]
    step, g, g_next, turn = np.empty((4, 4)), np.empty((4, 4)), np.empty((4, 4)), np.empty((3, 3))
    blocks, a, ainv, xi = np.empty((n + 1, 6, 4)), np.empty((6, 6)), np.empty((6, 6)), np.empty(6)
    mats = np.empty((8, 3, 3))
    for k in range(r):
        _chain_into(base[k], omega[k], gi[k], g, step, g_next, co)
        for _ in range(CLOSURE_PASSES):
            applied, dl = _closure_by_strain(
                omega[k], gi[k], g, tip[k], lengths[k], blocks, a, ainv, step, xi, co, mats
            )
            if not applied:
                break
            lengths[k] += dl
            _chain_into(base[k], omega[k], gi[k], g, step, g_next, co)
        for i in range(3):  # g_next ← (R_tip R_Nᵀ, 0): the closure rotation
            for j in range(3):
                g_next[i, j] = tip[k, i, 0] * g[j, 0] + tip[k, i, 1] * g[j, 1] + tip[k, i, 2] * g[j, 2]
            g_next[i, 3] = 0.0
        log_se3_into(g_next, om, co)
        for i in range(3):
            om[i] /= n
            om[3 + i] = 0.0
        exp_se3_into(om, step, co)  # exp(δφ / N)
        for i in range(3):
            for j in range(3):
                turn[i, j] = 1.0 if i == j else 0.0
        for j in range(1, n):
            frac = j / n
            for i in range(3):  # turn ← exp(δφ/N) turn = exp(j/N δφ)
                t0, t1, t2 = turn[0, i], turn[1, i], turn[2, i]
                for q in range(3):
                    g_next[q, i] = step[q, 0] * t0 + step[q, 1] * t1 + step[q, 2] * t2
            for i in range(3):
                for q in range(3):
                    turn[i, q] = g_next[i, q]
            node = gi[k, j - 1]
            for q in range(3):
                c0, c1, c2 = node[0, q], node[1, q], node[2, q]
                for i in range(3):
                    node[i, q] = turn[i, 0] * c0 + turn[i, 1] * c1 + turn[i, 2] * c2
            for i in range(3):
                node[i, 3] += frac * (tip[k, i, 3] - g[i, 3])
        stretch = 0.0  # Σ_j t_j·δp with t_j = (z_{j-1} + z_j)/2: ends once, interior nodes twice
        for i in range(3):
            axes = 0.5 * (base[k, i, 2] + tip[k, i, 2])
            for j in range(1, n):
                axes += gi[k, j - 1, i, 2]
            stretch += axes * (tip[k, i, 3] - g[i, 3])
        lengths[k] += stretch / n


@njit(cache=True)
def line_weights(poses, m, g_new, s, w, max_points):
    """Lagrange weights (m,) into ``w`` that extrapolate values stored at the poses ``poses[:m]`` (latest first)
    to ``g_new`` along one SE(3) geodesic: ``u_i = log(g_0⁻¹ g_i)`` parallel to ``u = log(g_0⁻¹ g_new)`` (within
    LINE_TOL, relative), s_i = u_i·u/|u| their positions on it (into ``s``), ``w_i = Π_{j≠i} (|u| - s_j)/(s_i -
    s_j)`` over the latest ``max_points`` stored poses that lie on the line (the scan stops at the first one off
    it) at distinct positions (an older pose closer than NODE_GAP |u| to a chosen one is left out, weight 0).
    Returns the number of points used (0 when fewer than 2, or when g_new lies farther from g_0 than
    EXTRAP_REACH × the nearest chosen distance).

    Args:
        poses: Stored platform poses (H, 4, 4), latest first.
        m: Number of stored poses.
        g_new: Platform pose (4, 4) to extrapolate to.
        s: Output positions on the line (≥ m,).
        w: Output weights (≥ m,).
        max_points: Most points used.
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
