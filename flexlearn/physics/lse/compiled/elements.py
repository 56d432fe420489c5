"""Compiled (numba) linear-strain-element kernels: residual and exact tangent of all elements in one call each.

The same discrete equations as :func:`flexlearn.physics.lse.fused.element_residual` and
:func:`~flexlearn.physics.lse.fused.element_tangent_fused` (seed 003, eqs. (9), (11), Sec. V-A/V-D; tested
equal to round-off in tests/physics/lse/test_lse_compiled.py), written element by element in scalar code on
float64 numpy arrays, so that one call replaces the few hundred small tensor ops of the torch kernels.
Used by `CPRModel` with ``backend="auto"`` or ``"numba"`` where nothing needs gradients (see
:mod:`flexlearn.physics.lse.backend` and :meth:`AssemblyMixin.residual`); ``HAVE_NUMBA`` is False when numba
cannot be imported, and the model then stays on the torch kernels.

Shapes: elements flattened to E: poses ga, gb (E, 4, 4), β, K-diagonal, ξ₀ (E, 6), h (E,). The relative
rotation of an element must stay below π.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flexlearn.numba_cache import refresh_numba_cache
from flexlearn.physics.lse.compiled.linalg import (
    ad_into,
    copy1,
    copy2,
    cross_into,
    gemm,
    gemm6,
    hat_into,
    mm3_acc,
    njit,
    njit_inner,
    njit_inner_leaf,
    wbar_into,
)
from flexlearn.physics.lse.fused import GL_NODES, GL_WEIGHTS, SERIES, THRESHOLDS

# The compiled solver modules call (and inline) the kernels of this file, and numba freezes the global
# series table and thresholds (built at import from flexlearn.lie.tables / thresholds, see fused.py) into
# the machine code: one cache fingerprint over all these sources (paths relative to this directory). The
# inverse pose statics' kernels call these and are a group of their own on top (POSE_CACHE_SOURCES, refreshed by
# `refresh_pose_cache` when a pose module is imported): editing a pose file recompiles only the pose kernels.
CACHE_SOURCES = (
    "../fused",
    "elements",
    "linalg",
    "condense",
    "newton",
    "../newton_policy",
    "../../../lie/tables",
    "../../../lie/thresholds",
)
POSE_CACHE_SOURCES = (
    "../length_actuated/kernels",
    "../length_actuated/geometry",
    "../length_actuated/closure",
    "../length_actuated/residual",
    "../length_actuated/warm_start",
    "../length_actuated/condense",
    "../length_actuated/work",
    "../length_actuated/fit",
    "../length_actuated/batch",
)
refresh_numba_cache(Path(__file__).parent, CACHE_SOURCES, "lse_kernels")


def refresh_pose_cache() -> None:
    """Drop the pose kernels' cache when a pose source or a forward kernel source changed (idempotent)."""
    refresh_numba_cache(Path(__file__).parent, POSE_CACHE_SOURCES, "lse_pose", depends=CACHE_SOURCES)


__all__ = [
    "CACHE_SOURCES",
    "GT3",
    "GT8",
    "GTW3",
    "GTW8",
    "POSE_CACHE_SOURCES",
    "alloc_parts",
    "coefficients_into",
    "coefficients_nb",
    "element_into",
    "element_residual_nb",
    "element_tangent_nb",
    "exp_se3_into",
    "refresh_pose_cache",
    "tangent_into",
    "tangent_nodes_into",
    "workspace",
]

_SER = np.ascontiguousarray(SERIES)
_THR = np.ascontiguousarray(THRESHOLDS)
GT8 = 0.5 * (GL_NODES + 1.0)  # 8-point Gauss–Legendre nodes on [0, 1]
GTW8 = 0.25 * (GL_NODES + 1.0) * GL_WEIGHTS  # t · w on [0, 1]
_GL3_NODES, _GL3_WEIGHTS = np.polynomial.legendre.leggauss(3)
GT3 = 0.5 * (_GL3_NODES + 1.0)  # the same with 3 points (short elements, see tangent_into)
GTW3 = 0.25 * (_GL3_NODES + 1.0) * _GL3_WEIGHTS


@njit_inner
def coefficients_into(t2, out):
    """[A, B, C, E, F, D] of θ² into ``out`` (6,) (see :func:`flexlearn.physics.lse.fused.coefficients`).

    Args:
        t2: The squared rotation angle θ² [rad²].
        out: Output (6,), written.
    """
    th = np.sqrt(t2)
    s, c = 0.0, 1.0
    if t2 >= _THR[0]:  # the smallest threshold: some closed form is used
        s, c = np.sin(th), np.cos(th)
    for i in range(6):
        if t2 < _THR[i]:
            acc = 0.0
            pw = 1.0
            for j in range(_SER.shape[0]):
                acc += pw * _SER[j, i]
                pw *= t2
            out[i] = acc
        else:
            if i == 0:
                out[i] = s / th
            elif i == 1:
                out[i] = (1.0 - c) / t2
            elif i == 2:
                out[i] = (th - s) / (t2 * th)
            elif i == 3:
                out[i] = (t2 + 2.0 * c - 2.0) / (2.0 * t2 * t2)
            elif i == 4:
                out[i] = (2.0 * th - 3.0 * s + th * c) / (2.0 * t2 * t2 * th)
            else:
                out[i] = (1.0 - th * s / (2.0 * (1.0 - c))) / t2


@njit(cache=True)
def coefficients_nb(t2):
    """[A, B, C, E, F, D] of θ² (6,) (allocating form of :func:`coefficients_into`).

    Args:
        t2: The squared rotation angle θ² [rad²].

    Returns:
        The new coefficient array (6,).
    """
    out = np.empty(6)
    coefficients_into(t2, out)
    return out


@njit_inner
def exp_se3_into(xi, out, co):
    """SE(3) exponential of [φ; ρ] into ``out`` (4, 4) without allocation
    (:func:`flexlearn.physics.lse.compiled.newton.exp_se3` allocates); co (6,).

    Args:
        xi: Twist [φ; ρ] (6,).
        out: Output pose (4, 4), written.
        co: Scratch (6,) for the coefficients of θ².
    """
    p0, p1, p2 = xi[0], xi[1], xi[2]
    coefficients_into(p0 * p0 + p1 * p1 + p2 * p2, co)
    a, b, c = co[0], co[1], co[2]
    # R = I + a φ^ + b φ^², t = ρ + b φ×ρ + c φ×(φ×ρ)
    out[0, 0] = 1.0 - b * (p1 * p1 + p2 * p2)
    out[1, 1] = 1.0 - b * (p0 * p0 + p2 * p2)
    out[2, 2] = 1.0 - b * (p0 * p0 + p1 * p1)
    out[0, 1] = -a * p2 + b * p0 * p1
    out[1, 0] = a * p2 + b * p0 * p1
    out[0, 2] = a * p1 + b * p0 * p2
    out[2, 0] = -a * p1 + b * p0 * p2
    out[1, 2] = -a * p0 + b * p1 * p2
    out[2, 1] = a * p0 + b * p1 * p2
    r0, r1, r2 = xi[3], xi[4], xi[5]
    u0, u1, u2 = p1 * r2 - p2 * r1, p2 * r0 - p0 * r2, p0 * r1 - p1 * r0
    v0, v1, v2 = p1 * u2 - p2 * u1, p2 * u0 - p0 * u2, p0 * u1 - p1 * u0
    out[0, 3] = r0 + b * u0 + c * v0
    out[1, 3] = r1 + b * u1 + c * v1
    out[2, 3] = r2 + b * u2 + c * v2
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0


@njit(cache=True)
def workspace():
    """Scratch arrays of the element kernels (allocated once per call of a batch kernel):
    co (6,), w3 (12, 3), w33 (8, 3, 3), w66 (8, 6, 6), w618 (6, 6, 18)."""
    return np.empty(6), np.empty((12, 3)), np.empty((8, 3, 3)), np.empty((8, 6, 6)), np.empty((6, 6, 18))


@njit(cache=True)
def alloc_parts(r, n):
    """Storage (R, N, …) of the per-element pieces that a residual pass hands to the tangent: rr (3, 3), pr,
    φ, ρ (3,), θ² (), A⁻¹ (6, 6), ξ̄, μ (6,), J_r⁻¹, J_l⁻¹ (6, 6), r_a, r_b, r_β (6,).

    Args:
        r: Number of rods R.
        n: Number of elements per rod N.

    Returns:
        The tuple of the 13 uninitialised arrays, in the order above.
    """
    return (
        np.empty((r, n, 3, 3)),
        np.empty((r, n, 3)),
        np.empty((r, n, 3)),
        np.empty((r, n, 3)),
        np.empty((r, n)),
        np.empty((r, n, 6, 6)),
        np.empty((r, n, 6)),
        np.empty((r, n, 6)),
        np.empty((r, n, 6, 6)),
        np.empty((r, n, 6, 6)),
        np.empty((r, n, 6)),
        np.empty((r, n, 6)),
        np.empty((r, n, 6)),
    )


@njit(cache=True, inline="always")
def _relative_log_into(ga, gb, rr, pr, phi, rho, co, w3):
    """Relative pose ``(rr, pr) = g_a⁻¹ g_b`` and its log ``Ω = [φ; ρ]`` into the arrays given; returns θ² = |φ|²
    (``co`` (6,) receives the coefficients of θ², :func:`coefficients_into`). No allocation."""
    for i in range(3):
        acc = 0.0
        for q in range(3):
            acc += ga[q, i] * (gb[q, 3] - ga[q, 3])
        pr[i] = acc
        for j in range(3):
            rr[i, j] = ga[0, i] * gb[0, j] + ga[1, i] * gb[1, j] + ga[2, i] * gb[2, j]
    v = w3[0]
    v[0] = 0.5 * (rr[2, 1] - rr[1, 2])
    v[1] = 0.5 * (rr[0, 2] - rr[2, 0])
    v[2] = 0.5 * (rr[1, 0] - rr[0, 1])
    cth = 0.5 * (rr[0, 0] + rr[1, 1] + rr[2, 2] - 1.0)
    s2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2]
    t2 = 0.0
    if s2 > 0:
        theta = np.arctan2(np.sqrt(s2), cth)
        t2 = theta * theta
    coefficients_into(t2, co)
    for i in range(3):
        phi[i] = v[i] / co[0]
    pxr, ppxr = w3[1], w3[2]
    cross_into(phi, pr, pxr)
    cross_into(phi, pxr, ppxr)
    for i in range(3):
        rho[i] = pr[i] - 0.5 * pxr[i] + co[5] * ppxr[i]
    return t2


@njit(cache=True, inline="always")
def _jacobians_inv_into(phi, rho, t2, co, jri, jli, w3, w33):
    """``J_r⁻¹(Ω) = [[J₃, 0], [-J₃ Q_r J₃, J₃]]``, ``J₃ = I + φ^/2 + D φ^²``, ``Q_r = S - k^`` (Barfoot's
    Q(-φ, -ρ)), and ``J_l⁻¹ = J_r⁻¹ - ad_Ω`` (6, 6) into jri, jli; ``co``: coefficients of θ². No allocation."""
    d = co[5]
    ph, jr3, q_r, tmp = w33[0], w33[1], w33[2], w33[3]
    hat_into(phi, ph)
    pp = phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2]
    for i in range(3):
        for j in range(3):
            jr3[i, j] = 0.5 * ph[i, j] + d * phi[i] * phi[j]
        jr3[i, i] += 1.0 - d * pp
    cq, eq, fq = co[2], co[3], co[4]
    m = phi[0] * rho[0] + phi[1] * rho[1] + phi[2] * rho[2]
    kv, u = w3[3], w3[4]
    cross_into(phi, rho, u)
    cross_into(phi, u, kv)
    for i in range(3):
        kv[i] = 0.5 * rho[i] + ((eq - cq) * m) * phi[i] + eq * kv[i]
    hat_into(kv, q_r)
    for i in range(3):
        for j in range(3):
            q_r[i, j] = cq * (rho[i] * phi[j] + rho[j] * phi[i]) - 2.0 * fq * m * phi[i] * phi[j] - q_r[i, j]
        q_r[i, i] += 2.0 * m * (fq * t2 - cq)
    gemm(q_r, jr3, tmp, 1.0, False)
    for i in range(3):
        for j in range(3):
            jri[i, j], jri[i, 3 + j], jri[3 + i, 3 + j] = jr3[i, j], 0.0, jr3[i, j]
    gemm(jr3, tmp, jri[3:, :3], -1.0, False)
    hat_into(rho, tmp)
    for i in range(3):
        for j in range(3):
            jli[i, j] = jri[i, j] - ph[i, j]
            jli[i, 3 + j] = 0.0
            jli[3 + i, j] = jri[3 + i, j] - tmp[i, j]
            jli[3 + i, 3 + j] = jri[3 + i, 3 + j] - ph[i, j]


@njit(cache=True, inline="always")
def _strain_map_inv_into(beta, h, c, ainv, binv, tmp):
    """``A⁻¹`` (6, 6) of ``A = hI - c ad_β`` (c = h³/12, β = [ω; v]) in closed form into ``ainv``: A is block
    lower-triangular, ``[[B, 0], [-c v^, B]]`` with ``B = hI - c ω^``, so ``A⁻¹ = [[B⁻¹, 0], [c B⁻¹ v^ B⁻¹,
    B⁻¹]]`` and ``B⁻¹ = (h² I + h c ω^ + c² ω ωᵀ) / (h (h² + c² |ω|²))`` (ω^² = ω ωᵀ - |ω|² I). binv, tmp: (3, 3)
    scratch. No allocation."""
    w0, w1, w2 = beta[0], beta[1], beta[2]
    den = 1.0 / (h * (h * h + c * c * (w0 * w0 + w1 * w1 + w2 * w2)))
    hc, cc, hh = h * c, c * c, h * h
    binv[0, 0], binv[0, 1], binv[0, 2] = hh + cc * w0 * w0, -hc * w2 + cc * w0 * w1, hc * w1 + cc * w0 * w2
    binv[1, 0], binv[1, 1], binv[1, 2] = hc * w2 + cc * w1 * w0, hh + cc * w1 * w1, -hc * w0 + cc * w1 * w2
    binv[2, 0], binv[2, 1], binv[2, 2] = -hc * w1 + cc * w2 * w0, hc * w0 + cc * w2 * w1, hh + cc * w2 * w2
    for i in range(3):
        for j in range(3):
            binv[i, j] *= den
    v0, v1, v2 = beta[3], beta[4], beta[5]
    for j in range(3):  # tmp = c v^ B⁻¹
        tmp[0, j] = c * (v1 * binv[2, j] - v2 * binv[1, j])
        tmp[1, j] = c * (v2 * binv[0, j] - v0 * binv[2, j])
        tmp[2, j] = c * (v0 * binv[1, j] - v1 * binv[0, j])
    for i in range(3):
        for j in range(3):
            ainv[i, j] = binv[i, j]
            ainv[i, 3 + j] = 0.0
            ainv[3 + i, 3 + j] = binv[i, j]
            ainv[3 + i, j] = binv[i, 0] * tmp[0, j] + binv[i, 1] * tmp[1, j] + binv[i, 2] * tmp[2, j]


@njit_inner_leaf
def element_into(ga, gb, beta, h, k, xi0, parts, r, e, ws):
    """One element's residual (seed eq. (11), Sec. V-A; see :func:`flexlearn.physics.lse.fused.element_residual`)
    written into ``parts[·][r, e]`` (:func:`alloc_parts`): relative pose ``(rr, pr) = g_a⁻¹ g_b``, its log
    ``Ω = [φ; ρ]`` (θ² = |φ|²), ``A⁻¹ = (hI - h³/12 ad_β)⁻¹`` (closed form, :func:`_strain_map_inv_into`),
    ``ξ̄ = A⁻¹ Ω``, ``μ = A⁻ᵀ h K (ξ̄ - ξ₀)``,
    ``J_r⁻¹(Ω)``, ``J_l⁻¹ = J_r⁻¹ - ad_Ω``, ``r_a = -J_l⁻ᵀ μ``, ``r_b = J_r⁻ᵀ μ``,
    ``r_β = h³/12 (K β - W̃(μ) ξ̄)``. ws: :func:`workspace`. No allocation.

    Args:
        ga: Start-node pose (4, 4) [m].
        gb: End-node pose (4, 4) [m].
        beta: Strain slope β (6,) [1/m²].
        h: Element length [m].
        k: Diagonal of the section stiffness K (6,).
        xi0: Reference strain ξ₀ (6,).
        parts: Per-element storage (:func:`alloc_parts`), written at ``[r, e]``.
        r: Rod index into ``parts``.
        e: Element index into ``parts``.
        ws: Scratch arrays (:func:`workspace`).
    """
    rr, pr, phi, rho = parts[0][r, e], parts[1][r, e], parts[2][r, e], parts[3][r, e]
    ainv, xibar, mu, jri = parts[5][r, e], parts[6][r, e], parts[7][r, e], parts[8][r, e]
    jli, r_a, r_b, r_beta = parts[9][r, e], parts[10][r, e], parts[11][r, e], parts[12][r, e]
    co, w3, w33 = ws[0], ws[1], ws[2]
    t2 = _relative_log_into(ga, gb, rr, pr, phi, rho, co, w3)
    parts[4][r, e] = t2
    c = h**3 / 12.0
    _strain_map_inv_into(beta, h, c, ainv, w33[0], w33[1])
    for i in range(6):
        acc = 0.0
        for j in range(3):
            acc += ainv[i, j] * phi[j] + ainv[i, 3 + j] * rho[j]
        xibar[i] = acc
    for i in range(6):
        acc = 0.0
        for j in range(6):
            acc += ainv[j, i] * (h * k[j] * (xibar[j] - xi0[j]))
        mu[i] = acc
    _jacobians_inv_into(phi, rho, t2, co, jri, jli, w3, w33)
    for i in range(6):
        acc_b = 0.0
        acc_a = 0.0
        for j in range(6):
            acc_b += jri[j, i] * mu[j]
            acc_a += jli[j, i] * mu[j]
        r_b[i] = acc_b
        r_a[i] = -acc_a
    # W̃(μ) ξ̄ = [μ_m × ξ̄_ω + μ_f × ξ̄_v; μ_f × ξ̄_ω]
    a1, a2, a3 = w3[5], w3[6], w3[7]
    cross_into(mu[:3], xibar[:3], a1)
    cross_into(mu[3:], xibar[3:], a2)
    cross_into(mu[3:], xibar[:3], a3)
    for i in range(3):
        r_beta[i] = c * (k[i] * beta[i] - a1[i] - a2[i])
        r_beta[3 + i] = c * (k[3 + i] * beta[3 + i] - a3[i])


@njit(cache=True, inline="always")
def _quadrature_q_into(phi, rho, t2, r_b, q, ws, gt, gtw):
    """``∫₀¹ t W̃(Ad_{exp(-tΩ)}ᵀ r_b) J_l(tΩ) dt`` (6, 6) into ``q``; Gauss–Legendre on the nodes ``gt`` with the
    weights ``gtw`` (t · w). No allocation."""
    co, w3, w33 = ws[0], ws[1], ws[2]
    top, nfj_sum, ph, ph2, jl, ql, nf, nm = w33[0], w33[1], w33[2], w33[3], w33[4], w33[5], w33[6], w33[7]
    u, uu, p_t, x, px, ppx, nu, pxr, pppr, kv = w3[0], w3[1], w3[2], w3[3], w3[4], w3[5], w3[6], w3[7], w3[8], w3[9]
    top[:] = 0.0
    nfj_sum[:] = 0.0
    cross_into(phi, rho, u)
    cross_into(phi, u, uu)
    m, f = r_b[:3], r_b[3:]
    hat_into(phi, ph)
    gemm(ph, ph, ph2, 1.0, False)
    pr = phi[0] * rho[0] + phi[1] * rho[1] + phi[2] * rho[2]
    cross_into(phi, rho, pxr)
    cross_into(phi, pxr, pppr)
    for i in range(gt.shape[0]):
        t = gt[i]
        w = gtw[i]
        t2i = t2 * t * t
        coefficients_into(t2i, co)
        a, b, c = co[0], co[1], co[2]
        for j in range(3):
            p_t[j] = -t * rho[j] + (b * t * t) * u[j] - (c * t**3) * uu[j]
        cross_into(p_t, f, x)
        for j in range(3):
            x[j] = m[j] - x[j]
        # R_tᵀ y = y + A t φ×y + B t² φ×(φ×y) for y = x (→ ν_m) and y = f (→ ν_f)
        cross_into(phi, x, px)
        cross_into(phi, px, ppx)
        for j in range(3):
            nu[j] = x[j] + (a * t) * px[j] + (b * t * t) * ppx[j]
        hat_into(nu, nm)
        cross_into(phi, f, px)
        cross_into(phi, px, ppx)
        for j in range(3):
            nu[j] = f[j] + (a * t) * px[j] + (b * t * t) * ppx[j]
        hat_into(nu, nf)
        for j in range(3):
            for l in range(3):
                jl[j, l] = (b * t) * ph[j, l] + (c * t * t) * ph2[j, l]
            jl[j, j] += 1.0
        # Barfoot's Q(tφ, tρ) = hat(k) + S with the scalings by t written out
        cq, eq, fq = co[2], co[3], co[4]
        mq = t * t * pr
        for j in range(3):
            kv[j] = 0.5 * t * rho[j] + ((eq - cq) * mq * t) * phi[j] + (eq * t**3) * pppr[j]
        hat_into(kv, ql)
        for j in range(3):
            for l in range(3):
                ql[j, l] += (cq * t * t) * (rho[j] * phi[l] + rho[l] * phi[j]) - (2.0 * fq * mq * t * t) * phi[j] * phi[
                    l
                ]
            ql[j, j] += 2.0 * mq * (fq * t2i - cq)
        mm3_acc(nm, jl, w, top)
        mm3_acc(nf, ql, w, top)
        mm3_acc(nf, jl, w, nfj_sum)
    for j in range(3):
        for l in range(3):
            q[j, l], q[j, 3 + l], q[3 + j, l], q[3 + j, 3 + l] = top[j, l], nfj_sum[j, l], nfj_sum[j, l], 0.0


@njit_inner_leaf
def tangent_into(parts, r, e, he, ke, oe, ws):
    """Exact element tangent (18, 18) into ``oe`` from the pieces of its residual pass (:func:`element_into`):
    ``∂[r_a; r_b; r_β]/∂(δζ_a, δζ_b, δβ)`` (seed Sec. V-D; see
    :func:`flexlearn.physics.lse.fused.element_tangent_fused`). ws: :func:`workspace`. No allocation. The
    tangent's one non-elementary term by 8-point Gauss–Legendre (:func:`tangent_nodes_into`).

    Args:
        parts: Per-element pieces of the residual pass (:func:`alloc_parts`).
        r: Rod index into ``parts``.
        e: Element index into ``parts``.
        he: Element length h [m].
        ke: Diagonal of the section stiffness K (6,).
        oe: Output tangent (18, 18), written.
        ws: Scratch arrays (:func:`workspace`).
    """
    tangent_nodes_into(parts, r, e, he, ke, oe, ws, GT8, GTW8)


@njit_inner_leaf
def tangent_nodes_into(parts, r, e, he, ke, oe, ws, gt, gtw):
    """:func:`tangent_into` with the quadrature term on the Gauss–Legendre nodes ``gt`` (on [0, 1]) with the
    weights ``gtw`` (t · w): 8 points are exact to round-off at any element rotation < π; :data:`GT3`,
    :data:`GTW3` (3 points) suit elements that turn by a small angle θ (error O(θ⁶) in that term).

    Args:
        parts: Per-element pieces of the residual pass (:func:`alloc_parts`).
        r: Rod index into ``parts``.
        e: Element index into ``parts``.
        he: Element length h [m].
        ke: Diagonal of the section stiffness K (6,).
        oe: Output tangent (18, 18), written.
        ws: Scratch arrays (:func:`workspace`).
        gt: Quadrature nodes on [0, 1].
        gtw: Quadrature weights times the nodes (t · w).
    """
    rr, pr, phi, rho, t2 = parts[0][r, e], parts[1][r, e], parts[2][r, e], parts[3][r, e], parts[4][r, e]
    ainv, xibar, mu, jri = parts[5][r, e], parts[6][r, e], parts[7][r, e], parts[8][r, e]
    jli, r_a, r_b = parts[9][r, e], parts[10][r, e], parts[11][r, e]
    w66, w618, w33 = ws[3], ws[4], ws[2]
    c = he**3 / 12.0
    q, ad_xi, wmu, wra, adr, adn = w66[1], w66[2], w66[3], w66[4], w66[5], w66[6]
    cat, b, d_mu, inner, d_rb = w618[0], w618[1], w618[2], w618[3], w618[4]
    _quadrature_q_into(phi, rho, t2, r_b, q, ws, gt, gtw)
    ad_into(xibar, ad_xi)
    # ∂ξ̄ = A⁻¹ [-J_l⁻¹, J_r⁻¹, -h³/12 ad_ξ̄] (6, 18)
    for i in range(6):
        for j in range(6):
            cat[i, j] = -jli[i, j]
            cat[i, 6 + j] = jri[i, j]
            cat[i, 12 + j] = -c * ad_xi[i, j]
    gemm6(ainv, cat, b, 1.0, False)
    # ∂μ = A⁻ᵀ h K ∂ξ̄ (+ h³/12 A⁻ᵀ W̃(μ) on the β columns)
    for i in range(6):
        for j in range(18):
            cat[i, j] = he * ke[i] * b[i, j]
    gemm6(ainv, cat, d_mu, 1.0, False, True)
    wbar_into(mu, wmu)
    gemm6(ainv, wmu, d_mu[:, 12:], c, True, True)
    # ∂r_b = J_r⁻ᵀ (∂μ + Q [-J_l⁻¹, J_r⁻¹, 0])
    copy2(d_mu, inner)
    gemm6(q, jli, inner[:, :6], -1.0, True)
    gemm6(q, jri, inner[:, 6:12], 1.0, True)
    gemm6(jri, inner, d_rb, 1.0, False, True)
    # ∂r_a = -W̃(r_a) [-I, Ad_{g_rel}, 0] - Ad_{g_rel}⁻ᵀ-like block [[rr, p^ rr], [0, rr]] ∂r_b
    x = w33[0]
    hat_into(pr, w33[1])
    gemm(w33[1], rr, x, 1.0, False)
    for i in range(3):
        for j in range(3):
            adr[i, j], adr[i, 3 + j], adr[3 + i, j], adr[3 + i, 3 + j] = rr[i, j], 0.0, x[i, j], rr[i, j]
            adn[i, j], adn[i, 3 + j], adn[3 + i, j], adn[3 + i, 3 + j] = rr[i, j], x[i, j], 0.0, rr[i, j]
    wbar_into(r_a, wra)
    for i in range(6):
        for j in range(6):
            oe[i, j] = wra[i, j]
            oe[i, 12 + j] = 0.0
    gemm6(wra, adr, oe[:6, 6:12], -1.0, False)
    gemm6(adn, d_rb, oe[:6], -1.0, True)
    copy2(d_rb, oe[6:12])
    # ∂r_β = -h³/12 (ad_ξ̄ᵀ ∂μ + W̃(μ) ∂ξ̄) + h³/12 K on the β block
    gemm6(ad_xi, d_mu, oe[12:], -c, False, True)
    gemm6(wmu, b, oe[12:], -c, True)
    for i in range(6):
        oe[12 + i, 12 + i] += c * ke[i]


@njit(cache=True)
def element_residual_nb(ga, gb, beta, h, k, xi0):
    """Element residuals ``[r_a; r_b; r_β]`` (E, 18) of all elements (seed eq. (11), Sec. V-A).

    Args:
        ga: Start-node poses (E, 4, 4) [m].
        gb: End-node poses (E, 4, 4) [m].
        beta: Strain slopes β (E, 6) [1/m²].
        h: Element lengths (E,) [m].
        k: Diagonal of the section stiffness K (E, 6).
        xi0: Reference strains ξ₀ (E, 6).

    Returns:
        The residuals (E, 18).
    """
    n_el = ga.shape[0]
    parts = alloc_parts(1, n_el)
    ws = workspace()
    out = np.empty((n_el, 18))
    for e in range(n_el):
        element_into(ga[e], gb[e], beta[e], h[e], k[e], xi0[e], parts, 0, e, ws)
        copy1(parts[10][0, e], out[e, :6])
        copy1(parts[11][0, e], out[e, 6:12])
        copy1(parts[12][0, e], out[e, 12:])
    return out


@njit(cache=True)
def element_tangent_nb(ga, gb, beta, h, k, xi0):
    """Exact element tangents H (E, 18, 18) = ∂[r_a; r_b; r_β]/∂(δζ_a, δζ_b, δβ) (seed Sec. V-D; see
    :func:`flexlearn.physics.lse.fused.element_tangent_fused`).

    Args:
        ga: Start-node poses (E, 4, 4) [m].
        gb: End-node poses (E, 4, 4) [m].
        beta: Strain slopes β (E, 6) [1/m²].
        h: Element lengths (E,) [m].
        k: Diagonal of the section stiffness K (E, 6).
        xi0: Reference strains ξ₀ (E, 6).

    Returns:
        The tangents (E, 18, 18).
    """
    n_el = ga.shape[0]
    parts = alloc_parts(1, n_el)
    ws = workspace()
    out = np.empty((n_el, 18, 18))
    for e in range(n_el):
        element_into(ga[e], gb[e], beta[e], h[e], k[e], xi0[e], parts, 0, e, ws)
        tangent_into(parts, 0, e, h[e], k[e], out[e], ws)
    return out
