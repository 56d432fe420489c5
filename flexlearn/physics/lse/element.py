"""Linear strain element (LSE): Magnus map, mean-strain Jacobians, energy, residual and exact tangent.

Seed 003 (Xun et al., "Constraint-free static modeling of continuum parallel robot"), Sec. III-IV-V.
The seed's displayed equations are numbered here by their order in the text, checked against the two
cross-references the text makes ("the moments in (5)", "differentiate (9)"); the actuation law is the
seed's own eq. (39).

Conventions (docs/architecture.md): twists/strains ``ξ = [κ; ε]`` (angular first; κ in rad/m, ε dimensionless),
wrenches ``[moment; force]``, poses (..., 4, 4), right perturbations ``g ⊕ δζ = g exp(δζ^)``.
The rod's material tangent is the body **z** axis: a straight unstretched rod has ``ξ₀ = [0,0,0, 0,0,1]``
and the section stiffness is ``K = diag(EI₁, EI₂, GJ, GA, GA, EA)`` (:func:`section_stiffness`).

Every function is batched over a leading element axis (any leading shape broadcasts), float64 in
practice, and differentiable by autograd (used to check the closed forms).

Element kinematics (one element of length h [m] with end poses g_a, g_b and slope β [1/m²]):

* strain field ``ξ(s) = ξ̄ + (s - h/2) β`` (seed eq. (3));
* 4th-order Magnus map ``g_a⁻¹ g_b = exp(Ω^)``, ``Ω = (h I - h³/12 ad_β) ξ̄`` (seed eqs. (4)-(8));
* inverse map ``ξ̄ = A⁻¹ Log(g_a⁻¹ g_b)``, ``A = h I - h³/12 ad_β`` (seed eq. (9));
* linearisation ``δξ̄ = J₁ δζ_a + J₂ δζ_b + J₃ δβ`` (seed eq. (10)), here in closed form
  ``J₁ = -A⁻¹ J_l⁻¹(Ω)``, ``J₂ = A⁻¹ J_r⁻¹(Ω)``, ``J₃ = -(h³/12) A⁻¹ ad_ξ̄`` (the seed does not print them);
* energy ``U = ½ h Δᵀ K Δ + h³/24 βᵀ K β``, ``Δ = ξ̄ - ξ₀`` (seed Sec. V-A, first display), and its
  variation ``δU = h Δᵀ K δξ̄ + h³/12 βᵀ K δβ`` (second display).

Notes on the seed (also in the report): the Magnus commutator sign of eqs. (5)-(8) is the correct one for
``g' = g ξ^`` (right-invariant form; for ``Y' = A Y`` it flips); eq. (9) is exact only up to the Magnus
truncation, i.e. the element's strain field reproduces g_a⁻¹ g_b to O(h⁵ |β| |ξ̄|²) (tested); the seed's
element tangent H of Sec. V-D is not printed: the one below is derived here and checked against autograd.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from flexlearn.lie import (
    se3_ad,
    se3_adjoint,
    se3_exp,
    se3_inverse,
    se3_left_jacobian,
    se3_left_jacobian_inv,
    se3_log,
    se3_right_jacobian_inv,
    so3_hat,
)
from flexlearn.physics.lse.errors import StaticsInputError

__all__ = [
    "section_properties",
    "section_stiffness",
    "magnus_omega",
    "mean_strain",
    "strain_jacobians",
    "element_energy",
    "ElementState",
    "element_forces",
    "element_tangent",
    "wbar",
]

_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(8)
_GL_T = 0.5 * (_GL_NODES + 1.0)  # nodes on [0, 1]
_GL_W = 0.5 * _GL_WEIGHTS


def section_properties(shape: str, dims: tuple[float, ...]) -> tuple[float, float, float, float]:
    """Area and second moments of a cross-section: ``(A [m²], I₁ [m⁴], I₂ [m⁴], J [m⁴])``.

    shape ``"circle"``: dims = (radius,); ``"rectangle"``: dims = (width along body x, height along body y).
    I₁ is about body x, I₂ about body y; J is the torsion constant (polar moment for the circle, the
    Saint-Venant series approximation ``J ≈ a b³ (1/3 - 0.21 (b/a)(1 - b⁴/(12 a⁴)))`` (a ≥ b) for the
    rectangle, Roark's formula). Raises StaticsInputError (a ValueError) for another shape.

    Args:
        shape: ``"circle"`` or ``"rectangle"``.
        dims: (radius,) or (width, height) [m].

    Returns:
        ``(A, I₁, I₂, J)``.

    Raises:
        StaticsInputError: An unknown shape.
    """
    if shape == "circle":
        (r,) = dims
        area = math.pi * r * r
        i = math.pi * r**4 / 4.0
        return area, i, i, 2.0 * i
    if shape == "rectangle":
        w, t = dims
        area = w * t
        i1 = w * t**3 / 12.0  # about x: height t along y
        i2 = t * w**3 / 12.0
        a, b = max(w, t), min(w, t)
        j = a * b**3 * (1.0 / 3.0 - 0.21 * (b / a) * (1.0 - b**4 / (12.0 * a**4)))
        return area, i1, i2, j
    raise StaticsInputError(f"unknown section shape {shape!r} (expected 'circle' or 'rectangle')")


def section_stiffness(
    youngs_modulus: Tensor, shear_modulus: Tensor, area: Tensor, i1: Tensor, i2: Tensor, j: Tensor
) -> Tensor:
    """Diagonal of the section stiffness K (..., 6) = ``[EI₁, EI₂, GJ, GA, GA, EA]``.

    Units: N·m² for the angular entries (κ in rad/m), N for the linear ones. The issue writes
    ``K = diag(GJ, EI₁, EI₂, EA, GA, GA)``, i.e. a rod whose tangent is body x; flexlearn's rods lie along
    body z (the cantilever helper's "+z at rest"), so the same entries are permuted accordingly. No shear
    correction factor (the issue's GA).

    Args:
        youngs_modulus: Young's modulus E [Pa].
        shear_modulus: Shear modulus G [Pa].
        area: Section area A [m²].
        i1: Second moment about body x [m⁴].
        i2: Second moment about body y [m⁴].
        j: Torsion constant [m⁴].

    Returns:
        The broadcast diagonal (..., 6).
    """
    e, g = youngs_modulus, shear_modulus
    return torch.stack(torch.broadcast_tensors(e * i1, e * i2, g * j, g * area, g * area, e * area), -1)


def _eye6(ref: Tensor) -> Tensor:
    return torch.eye(6, dtype=ref.dtype, device=ref.device)


def magnus_omega(xibar: Tensor, beta: Tensor, h: Tensor) -> Tensor:
    """``Ω(h) = (h I - h³/12 ad_β) ξ̄`` (..., 6), seed eq. (8): g_a⁻¹ g_b ≈ exp(Ω^). h [m] (...).

    Args:
        xibar: Mean strain ξ̄ (..., 6).
        beta: Strain slope β (..., 6) [1/m²].
        h: Element length (...) [m].

    Returns:
        Ω (..., 6).
    """
    h = h[..., None]
    return h * xibar - (h**3 / 12.0) * (se3_ad(beta) @ xibar.unsqueeze(-1)).squeeze(-1)


def _a_matrix(beta: Tensor, h: Tensor) -> Tensor:
    """``A = h I - h³/12 ad_β`` (..., 6, 6), seed eq. (9)."""
    hh = h[..., None, None]
    return hh * _eye6(beta) - (hh**3 / 12.0) * se3_ad(beta)


def mean_strain(ga: Tensor, gb: Tensor, beta: Tensor, h: Tensor) -> Tensor:
    """``ξ̄ = A⁻¹ Log(g_a⁻¹ g_b)`` (..., 6), seed eq. (9). Requires the relative rotation angle < π.

    Args:
        ga: Start-node poses (..., 4, 4) [m].
        gb: End-node poses (..., 4, 4) [m].
        beta: Strain slopes β (..., 6) [1/m²].
        h: Element lengths (...) [m].

    Returns:
        ξ̄ (..., 6).
    """
    omega = se3_log(se3_inverse(ga) @ gb)
    return torch.linalg.solve(_a_matrix(beta, h), omega.unsqueeze(-1)).squeeze(-1)


def strain_jacobians(ga: Tensor, gb: Tensor, beta: Tensor, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(J₁, J₂, J₃)`` (..., 6, 6) of seed eq. (10) under right perturbations (closed form).

    ``J₁ = -A⁻¹ J_l⁻¹(Ω)``, ``J₂ = A⁻¹ J_r⁻¹(Ω)``, ``J₃ = -(h³/12) A⁻¹ ad_ξ̄`` with Ω = Log(g_a⁻¹ g_b):
    from ``δΩ = -J_l⁻¹(Ω) δζ_a + J_r⁻¹(Ω) δζ_b`` and ``δA ξ̄ = (h³/12) ad_ξ̄ δβ``.

    Args:
        ga: Start-node poses (..., 4, 4) [m].
        gb: End-node poses (..., 4, 4) [m].
        beta: Strain slopes β (..., 6) [1/m²].
        h: Element lengths (...) [m].

    Returns:
        ``(J₁, J₂, J₃)``.
    """
    omega = se3_log(se3_inverse(ga) @ gb)
    a = _a_matrix(beta, h)
    xibar = torch.linalg.solve(a, omega.unsqueeze(-1)).squeeze(-1)
    c = (h**3 / 12.0)[..., None, None]
    rhs = torch.cat([-se3_left_jacobian_inv(omega), se3_right_jacobian_inv(omega), -c * se3_ad(xibar)], -1)
    j = torch.linalg.solve(a, rhs)
    return j[..., :6], j[..., 6:12], j[..., 12:]


def element_energy(ga: Tensor, gb: Tensor, beta: Tensor, h: Tensor, k: Tensor, xi0: Tensor) -> Tensor:
    """Strain energy [J] (...) ``U = ½ h Δᵀ K Δ + h³/24 βᵀ K β``, Δ = ξ̄ - ξ₀ (seed Sec. V-A, first display).

    k: diagonal of K (..., 6); xi0: reference strain (..., 6). The β term is the exact integral of the
    linear strain field's energy over the element (∫ (s - h/2)² ds = h³/12).

    Args:
        ga: Start-node poses (..., 4, 4) [m].
        gb: End-node poses (..., 4, 4) [m].
        beta: Strain slopes β (..., 6) [1/m²].
        h: Element lengths (...) [m].
        k: Diagonal of the section stiffness K (..., 6) (:func:`section_stiffness`).
        xi0: Reference strain ξ₀ (..., 6).

    Returns:
        U (...) [J].
    """
    d = mean_strain(ga, gb, beta, h) - xi0
    return 0.5 * h * (d * k * d).sum(-1) + h**3 / 24.0 * (beta * k * beta).sum(-1)


def wbar(w: Tensor) -> Tensor:
    """``W̃(w) = [[m^, f^], [f^, 0]]`` (..., 6, 6) for a wrench w = [m; f], so that ``ad_aᵀ w = W̃(w) a``.

    Args:
        w: Wrench [m; f] (..., 6).

    Returns:
        W̃(w) (..., 6, 6).
    """
    m = so3_hat(w[..., :3])
    f = so3_hat(w[..., 3:])
    top = torch.cat([m, f], -1)
    return torch.cat([top, torch.cat([f, torch.zeros_like(f)], -1)], -2)


class ElementState(NamedTuple):
    """Intermediate quantities of a batch of elements (all (..., 6) or (..., 6, 6))."""

    omega: Tensor  # Log(g_a⁻¹ g_b)
    a: Tensor  # A = h I - h³/12 ad_β
    xibar: Tensor  # mean strain
    mu: Tensor  # A⁻ᵀ h K Δ: the force conjugate to Ω
    jri: Tensor  # J_r⁻¹(Ω)
    jli: Tensor  # J_l⁻¹(Ω)
    r_a: Tensor  # ∂U/∂ζ_a
    r_b: Tensor  # ∂U/∂ζ_b
    r_beta: Tensor  # ∂U/∂β


def element_forces(ga: Tensor, gb: Tensor, beta: Tensor, h: Tensor, k: Tensor, xi0: Tensor) -> ElementState:
    """Element residual (gradient of U w.r.t. right perturbations of g_a, g_b and w.r.t. β).

    ``r = Bᵀ h K Δ + [0; 0; h³/12 K β]`` with B = [J₁ J₂ J₃] (seed eq. (11) and Sec. V-A second display), in
    the efficient form ``μ = A⁻ᵀ h K Δ``, ``r_b = J_r⁻ᵀ μ`` [N·m; N] (the body wrench the element exerts on
    node b, with the sign of ∂U), ``r_a = -J_l⁻ᵀ μ = -Ad_{exp(-Ω)}ᵀ r_b``, and
    ``r_β = -(h³/12) ad_ξ̄ᵀ μ + (h³/12) K β``.

    Args:
        ga: Start-node poses (..., 4, 4) [m].
        gb: End-node poses (..., 4, 4) [m].
        beta: Strain slopes β (..., 6) [1/m²].
        h: Element lengths (...) [m].
        k: Diagonal of the section stiffness K (..., 6) (:func:`section_stiffness`).
        xi0: Reference strain ξ₀ (..., 6).

    Returns:
        The :class:`ElementState` (residual parts and what the tangent reuses).
    """
    omega = se3_log(se3_inverse(ga) @ gb)
    a = _a_matrix(beta, h)
    xibar = torch.linalg.solve(a, omega.unsqueeze(-1)).squeeze(-1)
    hh = h[..., None]
    sigma = hh * k * (xibar - xi0)
    mu = torch.linalg.solve(a.transpose(-1, -2), sigma.unsqueeze(-1)).squeeze(-1)
    jri = se3_right_jacobian_inv(omega)
    jli = jri - se3_ad(omega)  # J_l⁻¹ - J_r⁻¹ = 2 B₁ ad_Ω = -ad_Ω (the Bernoulli series have no other odd terms)
    r_b = (jri.transpose(-1, -2) @ mu.unsqueeze(-1)).squeeze(-1)
    r_a = -(jli.transpose(-1, -2) @ mu.unsqueeze(-1)).squeeze(-1)
    c = hh**3 / 12.0
    r_beta = -c * (wbar(mu) @ xibar.unsqueeze(-1)).squeeze(-1) + c * k * beta
    return ElementState(omega, a, xibar, mu, jri, jli, r_a, r_b, r_beta)


def element_tangent(st: ElementState, beta: Tensor, h: Tensor, k: Tensor) -> Tensor:
    """Exact element tangent H (..., 18, 18) = ∂r/∂x, x = (δζ_a, δζ_b, δβ) (seed Sec. V-D, ``δγ = H δx``).

    Derivative of the residual field of :func:`element_forces` along right perturbations of the nodes
    (symmetric at equilibrium; slightly non-symmetric away from it, which keeps Newton quadratic). The
    only non-elementary term is the derivative of ``J_r⁻ᵀ(Ω) μ`` w.r.t. Ω, written with
    ``J_r(Ω) = ∫₀¹ Ad_{exp(-tΩ)} dt`` as ``J_r⁻ᵀ Q``, ``Q = ∫₀¹ t W̃(Ad_{exp(-tΩ)}ᵀ r_b) J_l(tΩ) dt``,
    evaluated by 8-point Gauss–Legendre quadrature (error < 1e-15 relative for |Ω_angular| ≤ π: the
    integrand is a trigonometric polynomial of frequency ≤ |Ω_angular|). Not printed in the seed.

    Args:
        st: The :class:`ElementState` of :func:`element_forces`.
        beta: Strain slopes β (..., 6) [1/m²].
        h: Element lengths (...) [m].
        k: Diagonal of the section stiffness K (..., 6).

    Returns:
        H (..., 18, 18).
    """
    omega, a, xibar, mu, jri, jli, r_a, r_b, _ = st
    dtype, device = omega.dtype, omega.device
    batch = omega.shape[:-1]
    t = torch.as_tensor(_GL_T, dtype=dtype, device=device)
    w = torch.as_tensor(_GL_W, dtype=dtype, device=device)
    tom = t[:, None] * omega.unsqueeze(-2)  # (..., 8, 6)
    ad_neg = se3_adjoint(se3_exp(-tom))  # Ad_{exp(-tΩ)}
    jl_t = se3_left_jacobian(tom)
    nu_t = (ad_neg.transpose(-1, -2) @ r_b.unsqueeze(-2).unsqueeze(-1)).squeeze(-1)
    q = ((t * w)[:, None, None] * (wbar(nu_t) @ jl_t)).sum(-3)  # (..., 6, 6)

    eye = _eye6(omega)
    zero = torch.zeros(batch + (6, 6), dtype=dtype, device=device)
    hh = h[..., None, None]
    c = hh**3 / 12.0
    kk = torch.diag_embed(k.expand(batch + (6,)))
    ainv_t = torch.linalg.inv(a).transpose(-1, -2)  # A⁻ᵀ
    # dΩ = Dz dζ; B = A⁻¹ [Dz, -c ad_ξ̄]
    d_omega = torch.cat([-jli, jri, zero], -1)  # (..., 6, 18)
    b = ainv_t.transpose(-1, -2) @ torch.cat([-jli, jri, -c * se3_ad(xibar)], -1)
    wmu = wbar(mu)
    d_mu = ainv_t @ (hh * kk) @ b + torch.cat([zero, zero, c * (ainv_t @ wmu)], -1)
    d_rb = jri.transpose(-1, -2) @ (q @ d_omega + d_mu)
    ad_exp = se3_adjoint(se3_exp(omega))  # Ad_{exp Ω}
    jl_domega = torch.cat([-eye.expand(batch + (6, 6)), ad_exp, zero], -1)  # J_l(Ω) dΩ
    ad_exp_neg_t = se3_adjoint(se3_exp(-omega)).transpose(-1, -2)  # Ad_{exp(-Ω)}ᵀ
    d_ra = -wbar(r_a) @ jl_domega - ad_exp_neg_t @ d_rb
    d_rbeta = -c * (se3_ad(xibar).transpose(-1, -2) @ d_mu + wmu @ b) + torch.cat([zero, zero, c * kk], -1)
    return torch.cat([d_ra, d_rb, d_rbeta], -2)
