"""Strain retraction of the inverse pose statics and the nodes rebuilt from element strains (numba).

A Newton correction changes each element's relative twist Ω_j = [φ; ρ] (6,) [rad; m] by the linearised
``δΩ_j = -J_l⁻¹(Ω_j) δζ_{j-1} + J_r⁻¹(Ω_j) δζ_j`` (:func:`retract_strain_into`); the nodes follow from the chain
``g_j = g_{j-1} exp(Ω_j^)`` from the base (4, 4), closed onto the tip pose by the element rotations and the rod length
(element stretch and shear held; :func:`rebuild_nodes_into`), the rest spread rigidly. Shapes: R rods of N elements;
interior nodes (R, N-1, 4, 4), twists (R, N, 6), lengths (R,) [m]. Part of the pose kernels' cache group
(:data:`flexlearn.physics.lse.compiled.elements.POSE_CACHE_SOURCES`). SI units.
"""

from __future__ import annotations

import numpy as np

from flexlearn.physics.lse.compiled.elements import exp_se3_into, refresh_pose_cache
from flexlearn.physics.lse.compiled.linalg import gemm, hat_into, inv6_into, njit, njit_leaf, pose_mul_into
from flexlearn.physics.lse.length_actuated.geometry import log_se3_into, rel_pose_into

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = ["CLOSURE_PASSES", "CLOSURE_TOL", "rebuild_nodes_into", "retract_strain_into"]

CLOSURE_TOL = 1e-13  # chain-to-tip mismatch (rad, and m per m of rod) below which the nodes are closed rigidly
CLOSURE_PASSES = 3  # closures by strain per rebuild (each leaves ≈ |Ω_rot|³/15 of the mismatch: J_r's series cut)


@njit(cache=True)
def retract_strain_into(base, state, dy, dpsi, dl, alpha, col, tip_old, tip_new, parts, out, scratch, omega):
    """Strain retraction of the correction α (dy, dpsi, dl)[..., col] from ``state`` into ``out``.

    Each element's relative pose is changed by the linearised ``δΩ_j = -J_l⁻¹(Ω_j) δζ_{j-1} + J_r⁻¹(Ω_j) δζ_j``
    (Ω, J_r⁻¹, J_l⁻¹ from ``parts`` of the residual at ``state``; δζ_N = log(tip_old⁻¹ tip_new)) into ``omega``, the
    nodes rebuilt from it by :func:`rebuild_nodes_into` (as :meth:`CPRModel.retract` with ``retraction="strain"``,
    which closes the chain rigidly; here the closure keeps the element stretch and shear): unlike ``g ⊕ αδζ`` node by
    node it does not stretch the nearly inextensible rods by O(|δζ|²)·EA. β, ψ are updated linearly, L linearly plus
    the closure's length change.

    Args:
        base: Rod base poses (R, 4, 4).
        state: The state (g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,), lengths (R,)) corrected, as
            :func:`~flexlearn.physics.lse.length_actuated.geometry.copy_state`.
        dy: Corrections of the interior nodes and slopes (R, 12N - 6, C).
        dpsi: Corrections of the tip twists (R, C) [rad].
        dl: Corrections of the rod lengths (R, C) [m].
        alpha: Step scale α.
        col: The column of dy, dpsi, dl applied.
        tip_old: Tip poses (R, 4, 4) of ``state``.
        tip_new: Tip poses (R, 4, 4) after the step.
        parts: Element pieces of the residual at ``state``
            (:func:`~flexlearn.physics.lse.compiled.elements.alloc_parts`).
        out: The corrected state, written (same layout as ``state``).
        scratch: Scratch (5, 6): rows 0 … 3 used.
        omega: Element twists Ω (R, N, 6), written.
    """
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
