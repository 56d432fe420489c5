"""The element strains of the discrete Cosserat rod (seed 001, eqs. (5)–(7)), computed in one place.

For element i between nodes i and i+1 (rest length l_i, chord ``e_i = p_{i+1} − p_i``):

    x_{L,i} = R_iᵀ e_i,   x_{R,i} = R_{i+1}ᵀ e_i                                   (chord in the node frames)
    Γ_i = ½ (x_{L,i} + x_{R,i}) / l_i − E3                  (``midpoint``: shear/extension at the mid frame)
    Γ_i = A(f_i) ½ (x_{L,i} + x_{R,i}) / l_i − E3            (``geodesic``: at the geodesic mid frame)
    Γ_{i,L} = x_{L,i} / l_i − E3,  Γ_{i,R} = x_{R,i} / l_i − E3   (seed eq. (6), ``strain='nodes'``)
    Q_i = R_iᵀ R_{i+1},   f_i = cay⁻¹(Q_i),   ψ_i = 2 f_i,   κ_i = ψ_i / l_i        (bending/torsion)
    ψ_i = log(Q_i)^∨ = θ_i a_i (``curvature='log'``: :func:`log_curvature`)

(``cay`` of :mod:`flexlearn.lie.cayley`; the reasons for the mid frame are in :mod:`.rod`.)

For a relative rotation Q_i by θ about the unit axis a (f = tan(θ/2) a), the linear mean is
``½ (R_i + R_{i+1}) = R_i M D`` with M the half rotation (θ/2 about a: the geodesic mid frame is ``R_i M``) and
``D = cos(θ/2) (I − a aᵀ) + a aᵀ``: the mean sees the chord shortened by cos(θ/2) across a, so at tens of degrees
per element an element can stretch unseen (a rope wrapped on a cylinder at 40° per element).
``A(f) = I + c(s) (s I − f fᵀ)``, ``s = |f|²``, ``c = 1 / (1 + sqrt(1 + s))`` is D⁻¹: it multiplies the components
across a by sec(θ/2) = sqrt(1 + s) and leaves the one along a (twist) alone, so an unstretched, unsheared arc has
Γ = 0 at any θ (tested). The energy stays a smooth function of the frames and the chord; its forces carry ``A n``
on the chord and ``(l/2) Jᵀ n`` on the bending moment, ``J = ∂(A g)/∂f`` (:mod:`.elastic`, checked against
autograd).

Used by :func:`~flexlearn.physics.cosserat.elastic.internal_forces`,
:func:`~flexlearn.physics.cosserat.elastic.elastic_energy` and
:class:`~flexlearn.physics.cosserat.damping.Damping`; the numba kernel
(:func:`flexlearn.physics.cosserat.compiled.common.element_strain`) evaluates the same expressions per element
(``A`` and ``Jᵀ n`` too) and is tested equal to :func:`strains` to round-off (tests/physics/cosserat/test_strains.py).

Shapes: R (B, N+1, 3, 3) body → world, p (B, N+1, 3) [m], l (B, N) [m], E3 (3,); every strain (B, N, 3).
"""

from __future__ import annotations

from typing import NamedTuple, Tuple

import torch
from torch import Tensor

from flexlearn.lie import so3_cayley_inv

__all__ = ["Strains", "log_curvature", "strains"]


class Strains(NamedTuple):
    """Element strains (B, N, 3) and relative rotations (B, N, 3, 3) of :func:`strains`."""

    xL: Tensor  # R_iᵀ e_i [m]
    xR: Tensor  # R_{i+1}ᵀ e_i [m]
    gL: Tensor  # Γ seen from node i [-]: the mid-frame Γ_i (midpoint) or Γ_{i,L} (nodes)
    gR: Tensor  # Γ seen from node i+1 [-]: the same tensor as gL (midpoint) or Γ_{i,R} (nodes)
    f: Tensor  # cay⁻¹(Q_i) [-]; ψ_i = 2 f, κ_i = 2 f / l_i [1/m]
    Q: Tensor  # R_iᵀ R_{i+1} (B, N, 3, 3)


def geodesic_scale(f: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """``s = |f|²``, ``c(s) = 1 / (1 + sqrt(1 + s))`` and ``c'(s)`` (B, N, 1): the factor of
    ``A(f) = I + c (s I − f fᵀ)`` of the geodesic mid-frame strain (module docstring).

    Args:
        f: (B, N, 3) Cayley coordinates cay⁻¹(Q) [-].

    Returns:
        ``(s, c, dc/ds)``, each (B, N, 1).
    """
    s = (f * f).sum(-1, keepdim=True)
    root = torch.sqrt(1.0 + s)
    c = 1.0 / (1.0 + root)
    return s, c, -0.5 * c * c / root


def geodesic_apply(f: Tensor, g: Tensor) -> Tensor:
    """``A(f) g = g + c (s g − f (f·g))``: the linear-mean frame's view ``g`` of a vector (B, N, 3) seen from
    the geodesic mid frame (it undoes the cos(θ/2) across the bending axis).

    Args:
        f: (B, N, 3) Cayley coordinates cay⁻¹(Q) [-].
        g: (B, N, 3) vectors in the linear-mean frame.

    Returns:
        (B, N, 3) ``A(f) g``.
    """
    s, c, _ = geodesic_scale(f)
    return g + c * (s * g - f * (f * g).sum(-1, keepdim=True))


def geodesic_jacobian(f: Tensor, g: Tensor) -> Tensor:
    """``J = ∂(A(f) g)/∂f = 2 c' (s g − f (f·g)) fᵀ + c (2 g fᵀ − (f·g) I − f gᵀ)`` (B, N, 3, 3).

    Args:
        f: (B, N, 3) Cayley coordinates [-].
        g: (B, N, 3) the linear-mean strain vector ``½ (x_L + x_R) / l``.

    Returns:
        (B, N, 3, 3) J.
    """
    s, c, dc = geodesic_scale(f)
    fg = (f * g).sum(-1, keepdim=True)
    outer = lambda a, b: a.unsqueeze(-1) * b.unsqueeze(-2)  # noqa: E731
    eye = torch.eye(3, dtype=f.dtype, device=f.device)
    return 2.0 * outer(dc * (s * g - f * fg), f) + c.unsqueeze(-1) * (
        2.0 * outer(g, f) - fg.unsqueeze(-1) * eye - outer(f, g)
    )


def geodesic_pullback(f: Tensor, g: Tensor, n: Tensor) -> Tensor:
    """``Jᵀ n`` (:func:`geodesic_jacobian`): what a stress n (B, N, 3) conjugate to ``A(f) g`` exerts on f.

    Args:
        f: (B, N, 3) Cayley coordinates [-].
        g: (B, N, 3) the linear-mean strain vector ``½ (x_L + x_R) / l``.
        n: (B, N, 3) the stress.

    Returns:
        (B, N, 3) ``Jᵀ n``.
    """
    return (n.unsqueeze(-2) @ geodesic_jacobian(f, g)).squeeze(-2)


def log_curvature(f: Tensor) -> Tuple[Tensor, Tensor]:
    """The rotation vector ψ = θ a of Q from its Cayley coordinates f = tan(θ/2) a (``curvature='log'``).

    With its Jacobian with respect to the Cayley curvature's ψ_c = 2 f:

        ψ = α(t) 2 f,   ∂ψ/∂ψ_c = P = α I + (α'(t) / t) f fᵀ,   α = atan(t) / t,   t = |f|

    (series below t = 1e-3). With κ = ψ / l a uniform twist or bend of θ per element is measured exactly at any θ,
    where the Cayley curvature 2 f / l overstates it by tan(θ/2) / (θ/2) (5.4 % at 0.78 rad per element) and its
    moment ∂V/∂θ by 2 tan(θ/2) (1 + tan²(θ/2)) / θ (21 % at 0.75 rad).

    Args:
        f: (…, 3) Cayley coordinates cay⁻¹(Q) [-].

    Returns:
        ``(ψ (…, 3), P (…, 3, 3))``.
    """
    t2 = (f * f).sum(-1, keepdim=True)
    small = t2 < 1e-6  # the series, which (unlike sqrt) is differentiable at f = 0
    safe = torch.sqrt(torch.where(small, torch.ones_like(t2), t2))
    alpha = torch.where(small, 1.0 - t2 / 3.0 + t2 * t2 / 5.0, torch.atan(safe) / safe)
    slope = torch.where(small, -2.0 / 3.0 + 0.8 * t2, (safe / (1.0 + safe * safe) - torch.atan(safe)) / safe**3)
    eye = torch.eye(3, dtype=f.dtype, device=f.device)
    P = alpha.unsqueeze(-1) * eye + slope.unsqueeze(-1) * f.unsqueeze(-1) * f.unsqueeze(-2)
    return 2.0 * alpha * f, P


def strains(R: Tensor, p: Tensor, l: Tensor, e3: Tensor, midpoint: bool, geodesic: bool = False) -> Strains:
    """Strains of every element (module docstring): ``midpoint`` selects Γ at the mid frame (else seed eq. (6)'s
    node strains); l (B, N) are the rest lengths [m], e3 the body tangent E3.

    Args:
        R: Node rotations (body → world), shape (B, N+1, 3, 3).
        p: Node positions [m], shape (B, N+1, 3).
        l: Element rest lengths [m], shape (B, N).
        e3: Body tangent E3, shape (3,).
        midpoint: True for Γ at the mid frame, False for the node strains of seed eq. (6).
        geodesic: with ``midpoint``, Γ at the geodesic mid frame (``A(f) g − E3``) instead of the linear mean.

    Returns:
        The :class:`Strains`.
    """
    RT = R.transpose(-1, -2)
    e = p[:, 1:] - p[:, :-1]  # (B, N, 3)
    ll = l.unsqueeze(-1)
    xL = (RT[:, :-1] @ e.unsqueeze(-1)).squeeze(-1)
    xR = (RT[:, 1:] @ e.unsqueeze(-1)).squeeze(-1)
    Q = RT[:, :-1] @ R[:, 1:]
    f = so3_cayley_inv(Q)
    if midpoint:
        g = 0.5 * (xL + xR) / ll
        gL = (geodesic_apply(f, g) if geodesic else g) - e3
        gR = gL
    else:
        gL = xL / ll - e3
        gR = xR / ll - e3
    return Strains(xL, xR, gL, gR, f, Q)
