"""The elastic energy and the internal forces and torques of the discrete Cosserat rod (seed 001, eqs. (5)–(7)).

The model and its strains are described in :mod:`flexlearn.physics.cosserat.rod`; here they are evaluated from a
:class:`~flexlearn.physics.cosserat.context.RodContext` and a configuration:

    V = Σ_i  l_i/2 Γ_iᵀ C1 Γ_i + l_i/2 κ_iᵀ C2 κ_i                      (``strain='midpoint'``)
    V_s = l_i/4 Σ_a Γ_{i,a}ᵀ C1 Γ_{i,a}                                 (``strain='nodes'``, seed eq. (6))

Internal forces/torques = −∂V/∂(p, η) (checked against autograd in the tests):

    f: element i pushes node i by  ½ (R_i + R_{i+1}) C1Γ_i  and node i+1 by the opposite;
    τ_i   += ½ (R_iᵀ e_i) × C1Γ_i + (I + f^ + f fᵀ) m_i,
    τ_{i+1} += ½ (R_{i+1}ᵀ e_i) × C1Γ_i − (I − f^ + f fᵀ) m_i,     f = cay⁻¹(R_iᵀR_{i+1}), m_i = C2 κ_i,

(``2 so3_cayley_jacobian_inv(±f)`` in :mod:`flexlearn.lie`); with ``curvature='log'`` (κ_i = log(Q)^∨ / l_i)
``m_i = P C2 κ_i``, P = ∂ψ/∂(2f) of :func:`~flexlearn.physics.cosserat.strains.log_curvature`. With
``strain='geodesic'``, Γ_i = A(f) g_i − E3 (:mod:`flexlearn.physics.cosserat.strains`): the chord terms above
carry ``A C1Γ_i`` in place of ``C1Γ_i`` and
``m_i = C2 κ_i + (l_i/2) Jᵀ C1Γ_i`` (J = ∂(A g)/∂f). Used by the rod, the integrator and the fused
kernel's start (the kernel's scalar copy is ``flexlearn.physics.cosserat.compiled.lgvi._internal``).

Shapes: R (B, N+1, 3, 3) body → world, p (B, N+1, 3) [m]; forces and torques (B, N+1, 3); strains (B, N, 3).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.strains import geodesic_apply, geodesic_pullback, log_curvature, strains

__all__ = ["InternalForces", "internal_forces", "elastic_energy"]


class InternalForces(NamedTuple):
    """Internal node loads of a configuration and the element strains they came from (:func:`internal_forces`)."""

    force: Tensor  # (B, N+1, 3) world node forces [N]
    torque: Tensor  # (B, N+1, 3) body node torques [N m]
    gL: Tensor  # (B, N, 3) Γ seen from node i [-]
    gR: Tensor  # (B, N, 3) Γ seen from node i+1 [-] (the same tensor as gL for the mid-frame strain)
    f: Tensor  # (B, N, 3) f = cay⁻¹(Q) [-]
    Q: Tensor  # (B, N, 3, 3) relative rotations R_iᵀ R_{i+1}


def internal_forces(
    ctx: RodContext,
    R: Tensor,
    p: Tensor,
    damping_stress: Optional[Tuple[Tensor, Tensor]] = None,
    damping_moment: Optional[Tensor] = None,
) -> InternalForces:
    """Internal node forces (world) and torques (body) = −∂V/∂(p, η) (module docstring), with the strains of
    :func:`~flexlearn.physics.cosserat.strains.strains`.

    Args:
        ctx: the rod's context (rest lengths, stiffnesses, strain model).
        R: (B, N+1, 3, 3) node rotations, body → world.
        p: (B, N+1, 3) node positions [m].
        damping_stress: ``(dn_L, dn_R)`` (B, N, 3) [N] added to C1 Γ seen from either node (damping), or None.
        damping_moment: (B, N, 3) [N m] added to C2 κ (damping), or None.

    Returns:
        :class:`InternalForces`: force, torque, Γ_L, Γ_R, f = cay⁻¹(Q) and Q.
    """
    s = strains(R, p, ctx.rest_lengths, ctx.e3, ctx.midpoint, ctx.geodesic)
    xL, xR, gL, gR, fc, Q = s
    l = ctx.rest_lengths.unsqueeze(-1)
    nL = ctx.shear_stiffness * gL
    pulled: Optional[Tensor] = None
    if ctx.midpoint:
        if damping_stress is not None:
            nL = nL + damping_stress[0]
        if ctx.geodesic:  # Γ = A(f) g − E3: the chord terms see A n, the bending ones also Jᵀ n (l/2 Jᵀ n on m)
            g = 0.5 * (xL + xR) / l
            pulled = 0.5 * l * geodesic_pullback(fc, g, nL)
            nL = geodesic_apply(fc, nL)
        nR = nL
    else:
        nR = ctx.shear_stiffness * gR
        if damping_stress is not None:
            nL = nL + damping_stress[0]
            nR = nR + damping_stress[1]
    fe = 0.5 * ((R[:, :-1] @ nL.unsqueeze(-1)) + (R[:, 1:] @ nR.unsqueeze(-1))).squeeze(-1)
    if ctx.curvature == "log":  # ∂V/∂ψ_c = P C2 κ, κ = ψ / l (strains.log_curvature)
        psi, P = log_curvature(fc)
        mb = (P @ (ctx.bend_stiffness * psi / l).unsqueeze(-1)).squeeze(-1)
    else:
        mb = ctx.bend_stiffness * (2.0 * fc) / l  # C2 κ, ψ = 2 fc
    if damping_moment is not None:
        mb = mb + damping_moment
    if pulled is not None:
        mb = mb + pulled
    fxm = torch.linalg.cross(fc, mb)
    fdm = (fc * mb).sum(-1, keepdim=True) * fc
    ti = 0.5 * torch.linalg.cross(xL, nL) + mb + fxm + fdm
    tj = 0.5 * torch.linalg.cross(xR, nR) - (mb - fxm + fdm)
    zero = torch.zeros_like(fe[:, :1])
    force = torch.cat([fe, zero], 1) - torch.cat([zero, fe], 1)
    torque = torch.cat([ti, zero], 1) + torch.cat([zero, tj], 1)
    return InternalForces(force, torque, gL, gR, fc, Q)


def elastic_energy(ctx: RodContext, R: Tensor, p: Tensor) -> Tensor:
    """The elastic energy V (seed 001, eq. (6) plus the bending term; module docstring).

    Args:
        ctx: the rod's context.
        R: (B, N+1, 3, 3) node rotations, body → world.
        p: (B, N+1, 3) node positions [m].

    Returns:
        (B,) elastic energy [J].
    """
    s = strains(R, p, ctx.rest_lengths, ctx.e3, ctx.midpoint, ctx.geodesic)
    l = ctx.rest_lengths.unsqueeze(-1)
    c1 = ctx.shear_stiffness
    if ctx.midpoint:
        vs = 0.5 * l * s.gL * c1 * s.gL
    else:
        vs = 0.25 * l * (s.gL * c1 * s.gL + s.gR * c1 * s.gR)
    psi = log_curvature(s.f)[0] if ctx.curvature == "log" else 2.0 * s.f
    vb = 0.5 * psi * ctx.bend_stiffness * psi / l
    return (vs + vb).sum((-1, -2))
