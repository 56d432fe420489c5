"""Fused linear-strain-element kernels: residual and exact tangent of a batch of elements in few tensor ops.

Same mathematics as :func:`flexlearn.physics.lse.element.element_forces` and
:func:`~flexlearn.physics.lse.element.element_tangent` (seed 003, Sec. III-V; tested equal to round-off),
written for speed on small batches (the robot's 24 elements), where the cost is the number of tensor ops,
not their size:

* every trigonometric coefficient of SO(3)/SE(3) (A = sin θ/θ, B = (1-cos θ)/θ², C = (θ-sin θ)/θ³,
  E = (θ²+2cos θ-2)/(2θ⁴), F = (2θ-3sin θ+θcos θ)/(2θ⁵), D = (1-(θ/2)cot(θ/2))/θ²) is evaluated for all six
  at once (:func:`coefficients`): one power table of θ² times a constant (15, 6) matrix of series
  coefficients, one vector of closed forms, one ``where`` (the safe-where pattern of :mod:`flexlearn.lie`:
  finite values and gradients at θ = 0, thresholds of :mod:`flexlearn.lie.thresholds`);
* hat, ad and W̃ maps are one product with a constant (k, 9|36) matrix;
* the SE(3) Jacobians use Barfoot's closed-form Q block (eq. (7.86)), expanded as in
  :func:`flexlearn.lie.se3_q_matrix`; the exact tangent's quadrature term (8-point Gauss–Legendre of
  ``t W̃(Ad_{exp(-tΩ)}ᵀ r_b) J_l(tΩ)``) is batched over all nodes and elements;
* the residual pass keeps what the tangent needs (:class:`ElementCache`), so a tangent is only formed when
  Newton needs one.

Shapes: leading element batch ``(...)``; poses (..., 4, 4), β, K-diagonal, ξ₀ (..., 6), h (...). float64.
The relative rotation of an element must stay below π (the log's axis comes from the skew part).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

from flexlearn.lie.tables import taylor_coefficients, threshold_table

__all__ = [
    "GL_NODES",
    "GL_WEIGHTS",
    "SERIES",
    "THRESHOLDS",
    "coefficients",
    "hat",
    "ad",
    "wbar_map",
    "se3_exp_fused",
    "ElementCache",
    "element_residual",
    "element_tangent_fused",
]

_N_SERIES = 15
GL_NODES, GL_WEIGHTS = np.polynomial.legendre.leggauss(8)  # 8-point Gauss–Legendre on [-1, 1]


# columns [A, B, C, E, F, D]: their series and thresholds from flexlearn.lie.tables (float64 values; B has no
# threshold of its own in flexlearn.lie and uses A's)
_COLUMNS = ("sinc", "cosc", "sinc3", "cosc2", "sinc5", "cotc")
_THRESHOLD_OF = ("sinc", "sinc", "sinc3", "cosc2", "sinc5", "cotc")
# (15, 6) Taylor coefficients in θ² (exact rationals rounded to float64)
SERIES = np.array([taylor_coefficients(name, _N_SERIES) for name in _COLUMNS]).T.copy()
# θ² below which the series is used, per coefficient
THRESHOLDS = np.array([threshold_table(torch.float64)[name] for name in _THRESHOLD_OF])


def _const(a: np.ndarray, ref: Tensor) -> Tensor:
    return torch.as_tensor(a, dtype=ref.dtype, device=ref.device)


def coefficients(t2: Tensor) -> Tensor:
    """``[A, B, C, E, F, D]`` (..., 6) of θ² = t2 (...): see the module docstring; θ < 2π.

    Args:
        t2: Squared rotation angles θ² (...) [rad²].

    Returns:
        The coefficients (..., 6).
    """
    small = t2[..., None] < _const(THRESHOLDS, t2)
    tc = torch.where(small, torch.ones_like(small, dtype=t2.dtype), t2[..., None])  # safe θ² per coefficient
    th = torch.sqrt(tc)
    s, c = torch.sin(th), torch.cos(th)
    sa, sb, sc, se, sf, sd = s.unbind(-1)
    ca, cb, cc, ce, cf, cd = c.unbind(-1)
    ta, tb, tcc, te, tf, td = tc.unbind(-1)
    ha, hb, hc, he, hf, hd = th.unbind(-1)
    closed = torch.stack(
        [
            sa / ha,
            (1.0 - cb) / tb,
            (hc - sc) / (tcc * hc),
            (te + 2.0 * ce - 2.0) / (2.0 * te * te),
            (2.0 * hf - 3.0 * sf + hf * cf) / (2.0 * tf * tf * hf),
            (1.0 - hd * sd / (2.0 * (1.0 - cd))) / td,
        ],
        -1,
    )
    powers = torch.cumprod(
        torch.cat([torch.ones_like(t2)[..., None], t2[..., None].expand(t2.shape + (_N_SERIES - 1,))], -1), -1
    )
    series = powers @ _const(SERIES, t2)
    return torch.where(small, series, closed)


def _map(n_in: int, n_out: int, entries: list[tuple[int, int, float]]) -> np.ndarray:
    m = np.zeros((n_in, n_out))
    for i, j, v in entries:
        m[i, j] = v
    return m


# hat(v) (3 → 9, row-major): [[0,-z,y],[z,0,-x],[-y,x,0]]
_HAT = [(2, 1, -1.0), (1, 2, 1.0), (2, 3, 1.0), (0, 5, -1.0), (1, 6, -1.0), (0, 7, 1.0)]
_HAT9 = _map(3, 9, _HAT)


def _block_map(blocks: list[tuple[int, int, int]]) -> np.ndarray:
    """6-vector → 6×6 map with hat(x[src:src+3]) placed at block (row, col)."""
    ent = []
    for src, br, bc in blocks:
        for i, j, v in _HAT:
            r, c = divmod(j, 3)
            ent.append((src + i, (3 * br + r) * 6 + 3 * bc + c, v))
    return _map(6, 36, ent)


_AD36 = _block_map([(0, 0, 0), (3, 1, 0), (0, 1, 1)])  # ad_ξ = [[ω^, 0], [v^, ω^]]
_WBAR36 = _block_map([(0, 0, 0), (3, 0, 1), (3, 1, 0)])  # W̃(w) = [[m^, f^], [f^, 0]]


def hat(v: Tensor) -> Tensor:
    """so(3) hat (..., 3) → (..., 3, 3), one product.

    Args:
        v: Vectors (..., 3).

    Returns:
        Skew matrices (..., 3, 3).
    """
    return (v @ _const(_HAT9, v)).reshape(v.shape[:-1] + (3, 3))


def ad(x: Tensor) -> Tensor:
    """``ad_ξ`` (..., 6) → (..., 6, 6) (seed 003, App. A).

    Args:
        x: Twists ξ = [ω; v] (..., 6).

    Returns:
        ad_ξ (..., 6, 6).
    """
    return (x @ _const(_AD36, x)).reshape(x.shape[:-1] + (6, 6))


def wbar_map(w: Tensor) -> Tensor:
    """``W̃(w)`` (..., 6, 6) with ``ad_aᵀ w = W̃(w) a`` for a wrench w = [m; f].

    Args:
        w: Wrenches [m; f] (..., 6).

    Returns:
        W̃(w) (..., 6, 6).
    """
    return (w @ _const(_WBAR36, w)).reshape(w.shape[:-1] + (6, 6))


def se3_exp_fused(xi: Tensor) -> Tensor:
    """SE(3) exponential (..., 6) → (..., 4, 4): ``R = I + AΦ + BΦ²``, ``p = (I + BΦ + CΦ²) ρ`` (same values as
    :func:`flexlearn.lie.se3_exp` to round-off, fewer ops).

    Args:
        xi: Twists [φ; ρ] (..., 6).

    Returns:
        Poses (..., 4, 4).
    """
    phi, rho = xi[..., :3], xi[..., 3:]
    co = coefficients((phi * phi).sum(-1))
    ph = hat(phi)
    ph2 = ph @ ph
    eye3 = torch.eye(3, dtype=xi.dtype, device=xi.device)
    rot = eye3 + co[..., 0, None, None] * ph + co[..., 1, None, None] * ph2
    u = torch.linalg.cross(phi, rho)
    p = rho + co[..., 1:2] * u + co[..., 2:3] * torch.linalg.cross(phi, u)
    bottom = torch.zeros(xi.shape[:-1] + (1, 4), dtype=xi.dtype, device=xi.device)
    bottom[..., 0, 3] = 1.0
    return torch.cat([torch.cat([rot, p[..., None]], -1), bottom], -2)


def _blocks(a: Tensor, b: Optional[Tensor], c: Optional[Tensor], d: Tensor) -> Tensor:
    """[[a, b], [c, d]] (..., 6, 6) from 3×3 blocks (None = 0)."""
    z = torch.zeros_like(a)
    return torch.cat([torch.cat([a, z if b is None else b], -1), torch.cat([z if c is None else c, d], -1)], -2)


def _mv(m: Tensor, v: Tensor) -> Tensor:
    return (m @ v.unsqueeze(-1)).squeeze(-1)


class ElementCache(NamedTuple):
    """What the residual pass computed and the tangent reuses (all batched over elements)."""

    rr: Tensor
    pr: Tensor
    phi: Tensor
    rho: Tensor
    t2: Tensor  # noqa: E702  relative pose, Ω = [φ; ρ]
    ainv: Tensor
    xibar: Tensor
    mu: Tensor  # noqa: E702
    jri: Tensor
    jli: Tensor
    r_a: Tensor
    r_b: Tensor  # noqa: E702
    h: Tensor
    k: Tensor  # noqa: E702


def _q_parts(phi: Tensor, rho: Tensor, t2: Tensor, co: Tensor) -> tuple[Tensor, Tensor]:
    """Barfoot's Q(φ, ρ) = hat(k) + S (see :func:`flexlearn.lie.se3_q_matrix`): returns (k (..., 3), S (..., 3, 3))."""
    c, e, f = co[..., 2], co[..., 3], co[..., 4]
    m = (phi * rho).sum(-1)
    kv = (
        0.5 * rho
        + ((e - c) * m)[..., None] * phi
        + e[..., None] * torch.linalg.cross(phi, torch.linalg.cross(phi, rho))
    )
    outer = rho[..., :, None] * phi[..., None, :]
    eye = torch.eye(3, dtype=phi.dtype, device=phi.device)
    s = (
        c[..., None, None] * (outer + outer.transpose(-1, -2))
        - (2.0 * f * m)[..., None, None] * (phi[..., :, None] * phi[..., None, :])
        + (2.0 * m * (f * t2 - c))[..., None, None] * eye
    )
    return kv, s


def element_residual(
    ga: Tensor, gb: Tensor, beta: Tensor, h: Tensor, k: Tensor, xi0: Tensor
) -> tuple[Tensor, ElementCache]:
    """Element residual ``[r_a; r_b; r_β]`` (..., 18) and the cache for :func:`element_tangent_fused`.

    ``Ω = Log(g_a⁻¹ g_b)``, ``ξ̄ = A⁻¹ Ω`` (seed eq. (9)), ``μ = A⁻ᵀ h K (ξ̄ - ξ₀)``, ``r_b = J_r⁻ᵀ(Ω) μ``,
    ``r_a = -J_l⁻ᵀ(Ω) μ``, ``r_β = -(h³/12) ad_ξ̄ᵀ μ + (h³/12) K β`` (seed eq. (11), Sec. V-A).

    Args:
        ga: Start-node poses (..., 4, 4) [m].
        gb: End-node poses (..., 4, 4) [m].
        beta: Strain slopes β (..., 6) [1/m²].
        h: Element lengths (...) [m].
        k: Diagonal of the section stiffness K (..., 6) (:func:`section_stiffness`).
        xi0: Reference strain ξ₀ (..., 6).

    Returns:
        ``(residual (..., 18), cache)``.
    """
    ra_t = ga[..., :3, :3].transpose(-1, -2)
    rr = ra_t @ gb[..., :3, :3]
    pr = _mv(ra_t, gb[..., :3, 3] - ga[..., :3, 3])
    v = 0.5 * (rr[..., [2, 0, 1], [1, 2, 0]] - rr[..., [1, 2, 0], [2, 0, 1]])  # sin θ · axis
    cth = 0.5 * (rr.diagonal(0, -2, -1).sum(-1) - 1.0)
    s2 = (v * v).sum(-1)
    pos = s2 > 0
    theta = torch.atan2(torch.sqrt(torch.where(pos, s2, torch.ones_like(s2))), cth)
    t2 = torch.where(pos, theta * theta, torch.zeros_like(s2))
    co = coefficients(t2)
    phi = v / co[..., :1]
    d = co[..., 5:6]
    pxr = torch.linalg.cross(phi, pr)
    rho = pr - 0.5 * pxr + d * torch.linalg.cross(phi, pxr)  # J_l⁻¹(φ) p
    omega = torch.cat([phi, rho], -1)
    eye3 = torch.eye(3, dtype=ga.dtype, device=ga.device)
    hh = h[..., None]
    c = hh**3 / 12.0
    amat = hh[..., None] * torch.eye(6, dtype=ga.dtype, device=ga.device) - c[..., None] * ad(beta)
    ainv = torch.linalg.inv(amat)
    xibar = _mv(ainv, omega)
    mu = _mv(ainv.transpose(-1, -2), hh * k * (xibar - xi0))
    ph = hat(phi)
    jr3 = eye3 + 0.5 * ph + d[..., None] * (ph @ ph)  # J_r⁻¹(φ)
    kv, s = _q_parts(phi, rho, t2, co)
    q_r = s - hat(kv)  # Q(-φ, -ρ)
    jri = _blocks(jr3, None, -(jr3 @ q_r @ jr3), jr3)
    jli = jri - ad(omega)
    r_b = _mv(jri.transpose(-1, -2), mu)
    r_a = -_mv(jli.transpose(-1, -2), mu)
    r_beta = c * (k * beta - _mv(wbar_map(mu), xibar))
    cache = ElementCache(rr, pr, phi, rho, t2, ainv, xibar, mu, jri, jli, r_a, r_b, h, k)
    return torch.cat([r_a, r_b, r_beta], -1), cache


def _quadrature_q(cache: ElementCache) -> Tensor:
    """``Q = ∫₀¹ t W̃(Ad_{exp(-tΩ)}ᵀ r_b) J_l(tΩ) dt`` (..., 6, 6) by 8-point Gauss–Legendre (see
    :func:`flexlearn.physics.lse.element.element_tangent`)."""
    phi, rho, r_b = cache.phi, cache.rho, cache.r_b
    ref = phi
    t = _const(0.5 * (GL_NODES + 1.0), ref)  # (8,)
    tw = _const(0.25 * (GL_NODES + 1.0) * GL_WEIGHTS, ref)  # t · w on [0, 1]
    t2 = cache.t2[..., None] * (t * t)  # (..., 8)
    co = coefficients(t2)
    a, b, c = co[..., 0], co[..., 1], co[..., 2]
    u = torch.linalg.cross(phi, rho)
    uu = torch.linalg.cross(phi, u)
    tt = t[:, None]
    # exp(-tΩ) = (R_t, p_t): p_t = -(I - B tΦ + C t²Φ²) tρ
    p_t = -tt * rho[..., None, :] + (b * t * t)[..., None] * u[..., None, :] - (c * t**3)[..., None] * uu[..., None, :]
    m, f = r_b[..., None, :3], r_b[..., None, 3:]
    x = m - torch.linalg.cross(p_t, f.expand_as(p_t))
    ph = phi[..., None, :].expand_as(p_t)

    def rt_t(y: Tensor) -> Tensor:  # R_tᵀ y = y + A tφ×y + B t² φ×(φ×y)
        py = torch.linalg.cross(ph, y)
        return y + (a * t)[..., None] * py + (b * t * t)[..., None] * torch.linalg.cross(ph, py)

    nu_m, nu_f = rt_t(x), rt_t(f.expand_as(p_t))
    phm = hat(phi)[..., None, :, :]
    eye3 = torch.eye(3, dtype=ref.dtype, device=ref.device)
    jl = eye3 + (b * t)[..., None, None] * phm + (c * t * t)[..., None, None] * (phm @ phm)  # J_l(tφ)
    kv, s = _q_parts(tt * phi[..., None, :], tt * rho[..., None, :], t2, co)
    ql = hat(kv) + s
    nf = hat(nu_f)
    nfj = nf @ jl
    top = hat(nu_m) @ jl + nf @ ql
    w = tw[:, None, None]
    return _blocks((w * top).sum(-3), (w * nfj).sum(-3), (w * nfj).sum(-3), torch.zeros_like(top[..., 0, :, :]))


def element_tangent_fused(cache: ElementCache, beta: Tensor) -> Tensor:
    """Exact element tangent H (..., 18, 18) = ∂[r_a; r_b; r_β]/∂(δζ_a, δζ_b, δβ) (seed Sec. V-D, derived; see
    :func:`flexlearn.physics.lse.element.element_tangent` for the derivation).

    Args:
        cache: The :class:`ElementCache` of :func:`element_residual`.
        beta: Strain slopes β (..., 6) [1/m²].

    Returns:
        H (..., 18, 18).
    """
    ainv, xibar, mu, jri, jli, r_a, h, k = (
        cache.ainv,
        cache.xibar,
        cache.mu,
        cache.jri,
        cache.jli,
        cache.r_a,
        cache.h,
        cache.k,
    )
    ref = mu
    eye6 = torch.eye(6, dtype=ref.dtype, device=ref.device).expand(jri.shape)
    zero = torch.zeros_like(jri)
    hh = h[..., None, None]
    c = hh**3 / 12.0
    q = _quadrature_q(cache)
    ainv_t = ainv.transpose(-1, -2)
    ad_xi = ad(xibar)
    b = ainv @ torch.cat([-jli, jri, -c * ad_xi], -1)
    wmu = wbar_map(mu)
    kdiag = torch.diag_embed(k)
    d_mu = ainv_t @ (hh * k[..., :, None] * b) + torch.cat([zero, zero, c * (ainv_t @ wmu)], -1)
    d_rb = jri.transpose(-1, -2) @ (torch.cat([q @ -jli, q @ jri, zero], -1) + d_mu)
    rr, pr = cache.rr, cache.pr
    x = hat(pr) @ rr
    ad_rel = _blocks(rr, None, x, rr)  # Ad_{exp Ω}
    ad_neg_t = _blocks(rr, x, None, rr)  # Ad_{exp(-Ω)}ᵀ
    d_ra = -wbar_map(r_a) @ torch.cat([-eye6, ad_rel, zero], -1) - ad_neg_t @ d_rb
    d_rbeta = -c * (ad_xi.transpose(-1, -2) @ d_mu + wmu @ b) + torch.cat([zero, zero, c * kdiag], -1)
    return torch.cat([d_ra, d_rb, d_rbeta], -2)
