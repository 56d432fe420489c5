"""Small vibrations of a straight Cosserat rod about its rest state: the stiffness matrix assembled in closed
form and the natural frequencies of the clamped rod (behind :meth:`CosseratRod.linear_frequencies
<flexlearn.physics.cosserat.rod.CosseratRod.linear_frequencies>` and ``CosseratRod.accurate_dt``).

At the straight, stress-free rest state (every frame ``R0``, nodes ``l`` apart along ``R0 E3``) the strains
vanish, so the Hessian of the elastic energy ``V = Σ_i l/2 Γᵢᵀ C1 Γᵢ + l/2 κᵢᵀ C2 κᵢ`` is ``Σ_i l (BΓᵀ C1 BΓ +
Bκᵀ C2 Bκ)`` with the strains linearised in the perturbation ``R_a = R0 exp(η_a^)``, ``p_a = p0_a + R0 u_a``
(η body rotation vector, u displacement in the base frame):

    Γᵢ ≈ (u_{i+1} − u_i)/l + ½ E3^ (η_i + η_{i+1})      (mid-frame strain, ``strain='midpoint'``)
    Γ_{i,a} ≈ (u_{i+1} − u_i)/l + E3^ η_a                (node strains, ``strain='nodes'``; weight l/4 each)
    κᵢ ≈ (η_{i+1} − η_i)/l                                (2 cay⁻¹(R_iᵀ R_{i+1}) / l to first order)

The eigenproblem ``K φ = ω² M φ`` (M = diag(J_a, m_a)) does not depend on ``R0``, because the node masses are
isotropic. The same matrix as the autograd Hessian of
:func:`~flexlearn.physics.cosserat.elastic.elastic_energy`, in O(N) instead of 6N backward passes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from flexlearn.lie import so3_exp
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.elastic import elastic_energy


def _hat(v: Tensor) -> Tensor:
    """(3, 3) cross-product matrix v^ of a (3,) vector."""
    z = torch.zeros((), dtype=v.dtype, device=v.device)
    return torch.stack([torch.stack([z, -v[2], v[1]]), torch.stack([v[2], z, -v[0]]), torch.stack([-v[1], v[0], z])])


def element_stiffness(ctx: RodContext) -> Tensor:
    """(B, N, 12, 12) element stiffness matrices at the straight rest state, on the coordinates
    ``(η_i, u_i, η_{i+1}, u_{i+1})`` (rotation vector [rad], displacement [m]) of the element's two nodes.

    Args:
        ctx: the rod's context (:meth:`CosseratRod.context <flexlearn.physics.cosserat.rod.CosseratRod.context>`).

    Returns:
        ``l (BΓᵀ C1 BΓ + Bκᵀ C2 Bκ)`` per element (module docstring) [N/m, N, N m].
    """
    l = ctx.rest_lengths  # (B, N)
    dtype, dev = l.dtype, l.device
    B, N = l.shape
    eye = torch.eye(3, dtype=dtype, device=dev)
    e3 = _hat(ctx.e3.to(dtype))
    zero = torch.zeros(3, 3, dtype=dtype, device=dev)
    inv_l = (1.0 / l).reshape(B, N, 1, 1)
    # d/d(η_i, u_i, η_{i+1}, u_{i+1}) of the strains, (B, N, 3, 12)
    du = torch.cat([zero, -eye, zero, eye], -1) * inv_l
    b_kappa = torch.cat([-eye, zero, eye, zero], -1) * inv_l
    c1 = torch.diag_embed(ctx.shear_stiffness)  # (B, N, 3, 3)
    c2 = torch.diag_embed(ctx.bend_stiffness)
    lw = l.reshape(B, N, 1, 1)
    k = lw * b_kappa.transpose(-1, -2) @ c2 @ b_kappa
    if ctx.midpoint:
        b_gamma = du + 0.5 * torch.cat([e3, zero, e3, zero], -1)
        return k + lw * b_gamma.transpose(-1, -2) @ c1 @ b_gamma
    for rot in (torch.cat([e3, zero, zero, zero], -1), torch.cat([zero, zero, e3, zero], -1)):
        b_gamma = du + rot
        k = k + 0.5 * lw * b_gamma.transpose(-1, -2) @ c1 @ b_gamma
    return k


def stiffness_matrix(ctx: RodContext) -> Tensor:
    """(B, 6(N+1), 6(N+1)) stiffness matrix of the free rod at its straight rest state, node by node on
    ``(η_a, u_a)`` (:func:`element_stiffness` summed over the elements).

    Args:
        ctx: the rod's context.

    Returns:
        K = ∂²V/∂x² [N/m, N, N m].
    """
    ke = element_stiffness(ctx)
    B, N = ke.shape[:2]
    n = 6 * (N + 1)
    K = torch.zeros(B, n, n, dtype=ke.dtype, device=ke.device)
    for i in range(N):  # N additions of one (B, 12, 12) block each
        K[:, 6 * i : 6 * i + 12, 6 * i : 6 * i + 12] += ke[:, i]
    return K


def clamped_frequencies(ctx: RodContext) -> Tensor:
    """(B, 6N) natural angular frequencies [rad/s], ascending, of the rod clamped at node 0 and linearised
    about its straight rest state: ``K φ = ω² M φ`` on the free nodes 1 … N, M = diag(J_a, m_a, m_a, m_a).

    Args:
        ctx: the rod's context (its masses include point masses and loads' masses).

    Returns:
        ω ≥ 0 (negative eigenvalues from round-off clamped to 0).
    """
    K = stiffness_matrix(ctx)[:, 6:, 6:]
    mdiag = torch.cat([ctx.inertia[:, 1:], ctx.mass[:, 1:].unsqueeze(-1).expand(-1, -1, 3)], -1)
    w = mdiag.reshape(K.shape[0], -1).rsqrt()
    A = w.unsqueeze(-1) * K * w.unsqueeze(-2)
    ev = torch.linalg.eigvalsh(0.5 * (A + A.transpose(-1, -2)))
    return ev.clamp_min(0.0).sqrt()


def autograd_frequencies(ctx: RodContext, rotation: Tensor, positions: Tensor) -> Tensor:
    """(B, 6N) the same frequencies as :func:`clamped_frequencies` from the autograd Hessian of
    :func:`~flexlearn.physics.cosserat.elastic.elastic_energy` about the configuration (``rotation`` (B, 3, 3) of
    every node, ``positions`` (B, N+1, 3) [m]): the reference the closed form is checked and timed against
    (6N backward passes per rod).

    Args:
        ctx: the rod's context.
        rotation: the clamp's rotation, per rod.
        positions: the straight rest positions.

    Returns:
        ω ≥ 0 [rad/s], ascending.
    """
    B, n = ctx.batch_size, ctx.n_nodes
    out = []
    for b in range(B):
        R0 = rotation[b].expand(1, n, 3, 3)
        p0 = positions[b : b + 1]

        def energy(x: Tensor, b: int = b, R0: Tensor = R0, p0: Tensor = p0) -> Tensor:
            x = torch.cat([torch.zeros(1, 1, 6, dtype=x.dtype), x.reshape(1, n - 1, 6)], 1)
            return elastic_energy(ctx, R0 @ so3_exp(x[..., :3]), p0 + x[..., 3:])[b]

        K = torch.autograd.functional.hessian(energy, torch.zeros(6 * (n - 1), dtype=torch.float64))
        mdiag = torch.cat([ctx.inertia[b, 1:], ctx.mass[b, 1:].unsqueeze(-1).expand(n - 1, 3)], -1)
        w = mdiag.reshape(-1).rsqrt()
        A = w.unsqueeze(-1) * K * w.unsqueeze(0)
        out.append(torch.linalg.eigvalsh(0.5 * (A + A.T)).clamp_min(0.0).sqrt())
    return torch.stack(out)
