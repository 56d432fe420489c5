"""The implicit Cosserat step (``scheme='implicit'`` of :meth:`CosseratRod.simulate
<flexlearn.physics.cosserat.rod.CosseratRod.simulate>`): the torch reference of its equations.

The LGVI (:mod:`flexlearn.physics.cosserat.integrator`, seed 001 eqs. (7)–(13)) kicks the momenta with the
node forces ``F = (τ_a, f_a)`` of state k (body torques, world forces; ``−∂V/∂(η_a, p_a)`` plus loads). Its
step is bounded by the stiffest modes (axial waves, the shear–rotation mode of one node: ``2/ω_max``). The
implicit variant kicks with the *filtered* forces

    F̃ = M (M + β h² K)⁻¹ F,      M = diag(J_a, m_a I₃)  (6 per node),                              (1)

K the Gauss–Newton tangent stiffness of the elastic energy at state k in the coordinates (η_a, δp_a) of the
right perturbation ``R_a exp(η_a^)``, ``p_a + δp_a`` (the same as :meth:`CosseratRod.linear_frequencies`):

    K = Σ_i l_i (∂Γ_i)ᵀ C1 (∂Γ_i) + l_i (∂κ_i)ᵀ C2 (∂κ_i),                                       (2)
    ∂Γ_i = [x_L^, −S, x_R^, S] / (2 l_i),  S = (R_i + R_{i+1})ᵀ        (mid-frame strain, rod.py),
    ∂κ_i = [−(I − f^ + f fᵀ), 0, I + f^ + f fᵀ, 0] / l_i,   f = cay⁻¹(R_iᵀ R_{i+1}),

columns (η_i, δp_i, η_{i+1}, δp_{i+1}); the seed's node strains (``strain='nodes'``) use ``∂Γ_{i,L} =
[x_L^, −R_iᵀ, 0, R_iᵀ]/l_i`` and ``∂Γ_{i,R} = [0, −R_{i+1}ᵀ, x_R^, R_{i+1}ᵀ]/l_i`` with weight l_i/2 each.
(``δx_L = x_L^ η_i`` for ``x_L = R_iᵀ e_i``; ``∂f/∂η_{i+1} = ½(I + f^ + ffᵀ)`` is the inverse Cayley
Jacobian whose transpose gives the torques of rod.py.) K is block-tridiagonal (6×6 blocks) and positive
semi-definite: the geometric (stress) part of the Hessian is left out, so ``M + β h² K`` is always positive
definite. Directions held by a support (:mod:`~flexlearn.physics.cosserat.supports`; H the projector onto them,
P = I − H, block-diagonal and commuting with M) are no degrees of freedom: (1) is solved as
``(P (M + β h² K) P + H M) x = P F``, ``F̃ = M x + H F`` — the free directions filtered, the held ones left as
they are (the support replaces them).

Properties (tested in tests/physics/cosserat/test_implicit.py):

* For a linear rod (small strains, K constant) the two-step form of (1) is ``(M + β h² K)(q^{k+1} − 2q^k +
  q^{k−1}) = −h² K q^k``, Newmark's rule; for β ≥ ¼ every mode has |λ| = 1 at any h (unconditionally
  stable, no numerical dissipation), with the relative frequency error ``−(β − 1/12)(hω)²/2`` (second order;
  −(hω)²/12 at β = ¼). The step is therefore chosen by accuracy: :func:`accuracy_dt`. Loads, magnets and
  damping stay explicit; so does the geometric stiffness: see :data:`DEFAULT_BETA` for the margin β > ¼ buys.
* Both momenta of a free rod are kept: translations and rigid rotations ξ are in the null space of the
  Gauss–Newton K (strains are invariant), so ``ξᵀ M (M + βh²K)⁻¹ = ξᵀ`` and ``ξᵀ F̃ = ξᵀ F``.
* The filter is linear in F and changes nothing at equilibrium (F = 0): static solutions are those of the LGVI.
* Velocities. In Newmark's terms (γ = ½) the mean of the half-step velocities ``ṽ_k = (v^{k−½} + v^{k+½})/2``
  is related to the velocity of the state by

      (M + β h² K) ṽ_k = M v_k                                                                    (3)

  (from ``(M + βh²K) v^{k±½} = M v_k ± h/2 F_k``). A run therefore starts from ``ṽ_0`` of (3) — the
  leapfrog's ``ṽ_0 = v_0`` would put a displacement ``h v_0`` into modes the step does not resolve, whose
  potential energy then grows as (hω)² — and reports ``v_k = M⁻¹ (M + β h² K) ṽ_k`` (records, callbacks,
  the final state). For a linear rod ``½ v_kᵀ M v_k + ½ q_kᵀ K q_k + ½ h² (β − ¼) a_kᵀ M a_k`` (a = M⁻¹F)
  is then conserved exactly (Newmark, γ = ½): the physical energy itself at β = ¼ (tested to 1e-12).

Numerical damping (``implicit_dissipation`` ζ ≥ 0, default 0): a stiffness-proportional force ``−c K v̄`` with
``c = ζ h``, trapezoidal in the half-step velocities (``v̄ = (v^{k−½} + v^{k+½})/2``), i.e.

    (M + (β + ζ/2) h² K) ã = F − ζ h K v^{k−½},       v^{k+½} = v^{k−½} + h ã                    (4)

(ω for the rotations). Mode ω gets the damping ratio ``ζ hω/2``: modes the step does not resolve (hω ≫ 1)
are removed within a few steps, resolved ones barely touched (mode 1 of the benchmark's polymer rod at
h = 1 ms: 3e-4 per radian at ζ = 0.01). It is energy-decaying (cK ≥ 0) and restores stability where
explicit stiffness (large deflections, magnets) pushes the unresolved modes at β = ¼ over the edge.

Contact (:mod:`~flexlearn.physics.cosserat.contact`, :mod:`~flexlearn.physics.cosserat.rod_contact`) enters the
matrix too, node by node, fully implicitly: with the penalty k, its damping c and friction,

    (M + β h² K + h C_c) ã = F,   C_c = (c + h k) n nᵀ + μ f_n / sqrt(|v_t|² + ε²) (I − n nᵀ),          (5)

where the contact acts (``PenaltyContact.pair_damping``), F holding the contact forces of state k with the numerical
damping h k added to c (``f_n = max(k δ − (c + h k) v_n, 0)``). An obstacle's point adds its ``h J C Jᵀ`` bounded by
blocks on its nodes (``PenaltyContact.filter_blocks``); a rod–rod pair adds it exactly (:class:`PairCoupling`: the
Woodbury update of the rods' own matrices in :func:`filter_forces`), since node blocks would resist the two rods
moving together. For a contact spring of frequency ω this is the
recursion ``(m + h c + h² k)(q⁺ − 2q + q⁻) = −h² k q − h (c + h k)(q − q⁻)``: with c = 0 both roots have
``|λ|² = 1 / (1 + (hω)²)``, zero as hω → ∞, so a penalty far stiffer than the step resolves settles instead of
ringing at the Nyquist frequency (Newmark's β = ¼ would keep |λ| = 1 there, and a unilateral spring that rings gains
energy); contact vibrations the step resolves get the damping ratio ≈ hω/2. Friction is backward Euler in the
slip velocity: it stops a sliding node without reversing it, at any ε. The velocities of eq. (3) keep the
elastic K (a node in contact is nearly at rest).

Translational mass (``implicit_mass``): M's position part is the lumped ``m_a I₃`` by default; the consistent mass
of the linearly interpolated centreline (``'consistent'``) is, per element of mass m_e = ρ A l,

    M_e = m_e / 6 [[2, 1], [1, 2]] ⊗ I₃    (the lumped one: m_e / 2 [[1, 0], [0, 1]] ⊗ I₃),              (6)

block-tridiagonal like K, so it costs the step nothing. Its kinetic energy is that of rigid links: a stiff rod on
a pin swings with ρ A L³ / 3 instead of the lumped ρ A L³ / 3 (1 + 1 / (2 N²)), and the first mode of a hanging
cable at 20 elements is off by 1.3e-4 instead of 9.1e-4 (converged step). Its column sums are the lumped masses,
so (M v) sums to the same linear momentum, a uniform field (gravity) accelerates every node alike, and the
momenta of a free rod are kept: the kick solves ``(M + β h² K) Δv = h F``, the state carries ``F̃ = M_L Δv / h``
(M_L lumped) as before. The supports' reactions are those of the lumped mass (exact at rest).

The numba kernel (:mod:`flexlearn.physics.cosserat.compiled.implicit`) solves (1) by a block-tridiagonal
Cholesky factorisation; this module assembles the dense matrix and calls ``torch.linalg.solve``
(differentiable; the reference the kernel is tested against). Not in the seed.

Shapes: R (B, n, 3, 3), p, f, τ (B, n, 3); K (B, 6n, 6n). SI units.
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from flexlearn.lie import so3_hat
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.errors import ArgumentError
from flexlearn.physics.cosserat.strains import geodesic_apply, geodesic_jacobian, log_curvature, strains

__all__ = [
    "DEFAULT_BETA",
    "ForceFilter",
    "PairCoupling",
    "element_stiffness",
    "tangent_stiffness",
    "filter_forces",
    "filter_velocities",
    "unfilter_velocities",
    "accuracy_dt",
    "frequency_error",
]

DEFAULT_BETA = 0.25
"""β of eq. (1) by default: Newmark's average acceleration, which for a linear rod conserves the physical
energy exactly (with the velocities of eq. (3)) and has the smallest frequency error. It puts the modes the
step does not resolve at λ → −1, the edge of stability, so that explicit stiffness (loads, magnets, the
geometric stiffness left out of K) can make a large step unstable: β > ¼ tolerates explicit stiffness up to
(4β − 1) of the implicit one per mode (measured: a soft rod bent to large deflection under gravity runs at
20–100× the LGVI limit with β = 0.3 and fails at ¼; a tip magnet in a 15 mT field runs at 20× with 0.3,
fails at 10× with ¼). The price of β > ¼: the conserved quantity of a linear rod becomes
``E + ½ h² (β − ¼) aᵀ M a`` (a = M⁻¹F), so the physical energy of modes the step does not resolve may
exceed its initial value by the factor ``1 + (β − ¼)(hω)²`` (bounded, no growth); and the frequency error
grows to −(β − 1/12)(hω)²/2."""


class PairCoupling(NamedTuple):
    """Contact points whose matrix ``h J C Jᵀ`` of eq. (5) joins nodes of different rods, or far apart on one (rod–rod
    pairs), taken into the step exactly (:func:`filter_forces`: a low-rank update of the rods' own matrices)."""

    nodes: Tensor  # (P, S) int64: each point's nodes in the flattened nodes (B n)
    weights: Tensor  # (P, S): their shares w of the point's force (J = w ⊗ I₃)
    matrix: Tensor  # (P, 3, 3) h C [kg] of each point, its scale included


class ForceFilter(NamedTuple):
    """The implicit step's force filter of eq. (1) (with the numerical damping of eq. (4)) for one simulation."""

    beta_h2: float  # β h² [s²]; β h² + h c/2 when damping_c > 0
    held: Optional[Tensor]  # (n, 6, 6) projector onto held directions (supports.HeldNodes.dof_projector), or None
    damping_c: float = 0.0  # c = ζ h [s] of the numerical damping (0: none)
    contact: Optional[Tensor] = None  # (B, n, 3, 3) h C_c of the contacts on their nodes (eq. (5)), or None
    pairs: Optional[PairCoupling] = None  # the contact points that couple nodes (eq. (5) exactly), or None


def _jacobians(ctx: RodContext, R: Tensor, p: Tensor) -> List[Tuple[Tensor, Tensor, Tensor]]:
    """``[(weight (B, N, 1, 1), ∂strain (B, N, 3, 12), stiffness (B, N, 3))]`` of eq. (2)."""
    s = strains(R, p, ctx.rest_lengths, ctx.e3, ctx.midpoint, ctx.geodesic)
    l = ctx.rest_lengths[..., None, None]
    RiT, RjT = R[:, :-1].transpose(-1, -2), R[:, 1:].transpose(-1, -2)
    z = torch.zeros_like(RiT)
    eye = torch.eye(3, dtype=R.dtype, device=R.device).expand_as(RiT)
    hf = so3_hat(s.f)
    ap = eye + hf + s.f.unsqueeze(-1) * s.f.unsqueeze(-2)
    bend = torch.cat([-ap.transpose(-1, -2), z, ap, z], -1) / l  # ∂(2f / l): the Cayley curvature's
    out = [(l, log_curvature(s.f)[1] @ bend if ctx.curvature == "log" else bend, ctx.bend_stiffness)]
    xl, xr = so3_hat(s.xL), so3_hat(s.xR)
    c1 = ctx.shear_stiffness
    if ctx.midpoint:
        S = RiT + RjT
        shear = torch.cat([xl, -S, xr, S], -1) / (2.0 * l)
        if ctx.geodesic:  # ∂(A(f) g) = A ∂g + J ∂f, ∂f = (l/2) ∂κ
            g = 0.5 * (s.xL + s.xR) / ctx.rest_lengths.unsqueeze(-1)
            shear = geodesic_apply(s.f.unsqueeze(-2), shear.transpose(-1, -2)).transpose(-1, -2)
            shear = shear + geodesic_jacobian(s.f, g) @ (0.5 * l * bend)
        out.append((l, shear, c1))
    else:
        out.append((0.5 * l, torch.cat([xl, -RiT, z, RiT], -1) / l, c1))
        out.append((0.5 * l, torch.cat([z, -RjT, xr, RjT], -1) / l, c1))
    return out


def element_stiffness(ctx: RodContext, R: Tensor, p: Tensor) -> Tensor:
    """Gauss–Newton stiffness of every element, eq. (2), in (η_i, δp_i, η_{i+1}, δp_{i+1}).

    Args:
        ctx: the rod's context.
        R: (B, n, 3, 3) node rotations, body → world.
        p: (B, n, 3) node positions [m].

    Returns:
        (B, N, 12, 12) element stiffness matrices.
    """
    ke: Optional[Tensor] = None
    for w, G, C in _jacobians(ctx, R, p):
        term = w * (G.transpose(-1, -2) @ (C.unsqueeze(-1) * G))
        ke = term if ke is None else ke + term
    assert ke is not None, "_jacobians gives one or two terms per element"
    return ke


def tangent_stiffness(ctx: RodContext, R: Tensor, p: Tensor) -> Tensor:
    """The dense K of eq. (2) for all nodes (node a: rows 6a … 6a+5 = (η_a, δp_a)).

    Args:
        ctx: the rod's context.
        R: (B, n, 3, 3) node rotations, body → world.
        p: (B, n, 3) node positions [m].

    Returns:
        (B, 6n, 6n) tangent stiffness.
    """
    ke = element_stiffness(ctx, R, p)
    B, N = ke.shape[0], ke.shape[1]
    K = torch.zeros(B, 6 * (N + 1), 6 * (N + 1), dtype=ke.dtype, device=ke.device)
    for i in range(N):
        K[:, 6 * i : 6 * i + 12, 6 * i : 6 * i + 12] += ke[:, i]
    return K


def filter_forces(
    ctx: RodContext,
    R: Tensor,
    p: Tensor,
    f: Tensor,
    tau: Tensor,
    step: ForceFilter,
    velocities: Optional[Tuple[Tensor, Tensor]] = None,
) -> Tuple[Tensor, Tensor]:
    """Eq. (1): the filtered world forces and body torques ``(f̃, τ̃)``.

    The directions ``step.held`` projects onto are left as they are (a support prescribes them).
    ``step.damping_c`` = c [s] > 0 adds the numerical damping force ``−c K (ω, v)`` of the half-step
    ``velocities`` (eq. (4); the caller passes β h² + h c / 2 as ``step.beta_h2``).

    Args:
        ctx: the rod's context.
        R: (B, n, 3, 3) node rotations, body → world.
        p: (B, n, 3) node positions [m].
        f: (B, n, 3) world node forces [N].
        tau: (B, n, 3) body node torques [N m].
        step: β h² [s²], the held directions and the numerical damping c [s].
        velocities: ``(v, ω)`` (B, n, 3) half-step velocities [m/s, rad/s]; needed when ``step.damping_c`` > 0.

    Returns:
        ``(f̃, τ̃)``, each (B, n, 3).

    Raises:
        ArgumentError: ``step.damping_c`` > 0 without ``velocities``.
    """
    B, n = ctx.batch_size, ctx.n_nodes
    mvec = _mass_vector(ctx)
    K = tangent_stiffness(ctx, R, p)
    A = step.beta_h2 * K + mass_matrix(ctx)
    if step.contact is not None:
        A = A + _position_blocks(step.contact)
    F0 = F = torch.cat([tau, f], -1).reshape(B, 6 * n)
    if step.damping_c > 0.0:
        if velocities is None:
            raise ArgumentError("filter_forces: damping_c > 0 needs the half-step velocities (v, w)")
        v, w = velocities
        x = _free(torch.cat([w, v], -1).reshape(B, 6 * n), step.held)
        F = F - step.damping_c * (K @ x.unsqueeze(-1)).squeeze(-1)
    if step.held is None:
        out = mvec * _coupled_solve(A, F, step.pairs, None)
    else:
        H = torch.block_diag(*step.held.unbind(0))
        P = torch.eye(6 * n, dtype=H.dtype, device=H.device) - H
        out = mvec * _coupled_solve(P @ A @ P + mvec.unsqueeze(-1) * H, F @ P, step.pairs, P) + F0 @ H
    out = out.reshape(B, n, 6)
    return out[..., 3:], out[..., :3]


def _coupled_solve(A: Tensor, F: Tensor, pairs: Optional[PairCoupling], free: Optional[Tensor]) -> Tensor:
    """``x`` of ``(A + U Ĉ Uᵀ) x = F`` for all rods at once: A (B, 6n, 6n) the rods' own matrices, F (B, 6n), U the
    coupled points' node weights on the position rows (projected by ``free`` (6n, 6n) = I − H where supports hold
    directions), Ĉ = diag(h C) of the points (Woodbury: ``x = x₀ − Z Ĉ (I + Uᵀ Z Ĉ)⁻¹ Uᵀ x₀``, ``x₀ = A⁻¹ F``,
    ``Z = A⁻¹ U``; 3 extra right-hand sides and a 3 × 3 block per point). Without pairs: ``A⁻¹ F``."""
    if pairs is None or pairs.nodes.shape[0] == 0:
        return torch.linalg.solve(A, F.unsqueeze(-1)).squeeze(-1)
    B, n, count = F.shape[0], F.shape[1] // 6, pairs.nodes.shape[0]
    share = F.new_zeros(count, B * n)
    rows = torch.arange(count, device=F.device).repeat_interleave(pairs.nodes.shape[1])
    share = share.index_put((rows, pairs.nodes.reshape(-1)), pairs.weights.reshape(-1), accumulate=True)
    eye = torch.eye(3, dtype=F.dtype, device=F.device)
    U = F.new_zeros(B * n, 6, count, 3)
    U[:, 3:] = share.T[:, None, :, None] * eye[None, :, None, :]
    U = U.reshape(B, 6 * n, 3 * count)
    if free is not None:
        U = free @ U
    solved = torch.linalg.solve(A, torch.cat([F.unsqueeze(-1), U], -1))
    x0, Z = solved[..., 0], solved[..., 1:]
    C = torch.block_diag(*pairs.matrix.unbind(0))
    Ut = U.transpose(-1, -2)
    small = torch.eye(3 * count, dtype=F.dtype, device=F.device) + (Ut @ Z).sum(0) @ C
    u = torch.linalg.solve(small, (Ut @ x0.unsqueeze(-1)).sum(0))
    return x0 - (Z @ (C @ u)).squeeze(-1)


def mass_matrix(ctx: RodContext) -> Tensor:
    """The (B, 6n, 6n) mass matrix of eq. (1) in the (η_a, δp_a) order of K: diag(J_a, m_a I₃), plus, with the
    consistent translational mass (eq. (6)), each element's coupling c = ρ A l / 6 on its nodes' positions
    (``−c`` on both diagonals, ``+c`` between them).

    Args:
        ctx: the rod's context.

    Returns:
        (B, 6n, 6n) M.
    """
    M = torch.diag_embed(_mass_vector(ctx))
    coupling = ctx.mass_coupling
    if coupling is None:
        return M
    pad = torch.nn.functional.pad
    T = torch.diag_embed(-pad(coupling, (0, 1)) - pad(coupling, (1, 0))) + torch.diag_embed(coupling, 1)
    T = T + torch.diag_embed(coupling, -1)  # (B, n, n), each element's ρ A l / 6 [[−1, 1], [1, −1]]
    B, n = ctx.batch_size, ctx.n_nodes
    blocks = torch.zeros(B, n, 6, n, 6, dtype=T.dtype, device=T.device)
    for axis in range(3, 6):
        blocks[:, :, axis, :, axis] = T
    return M + blocks.reshape(B, 6 * n, 6 * n)


def _position_blocks(blocks: Tensor) -> Tensor:
    """The dense (B, 6n, 6n) matrix with the (B, n, 3, 3) ``blocks`` on the position rows of each node."""
    B, n = blocks.shape[0], blocks.shape[1]
    node = torch.zeros(B, n, 6, 6, dtype=blocks.dtype, device=blocks.device)
    node[..., 3:, 3:] = blocks
    dense = torch.zeros(B, n, 6, n, 6, dtype=blocks.dtype, device=blocks.device)
    at = torch.arange(n, device=blocks.device)
    dense[:, at, :, at, :] = node.transpose(0, 1)
    return dense.reshape(B, 6 * n, 6 * n)


def _free(x: Tensor, held: Optional[Tensor]) -> Tensor:
    """``x`` (B, 6n) with its held directions removed (``P x``; unchanged without supports)."""
    if held is None:
        return x
    B, n = x.shape[0], held.shape[0]
    return x - (held @ x.reshape(B, n, 6).unsqueeze(-1)).reshape(B, 6 * n)


def _mass_vector(ctx: RodContext) -> Tensor:
    """(B, 6n) diagonal of M = diag(J_a, m_a I₃) in the (η_a, δp_a) order of K."""
    B, n = ctx.batch_size, ctx.n_nodes
    return torch.cat([ctx.inertia, ctx.mass.unsqueeze(-1).expand(B, n, 3)], -1).reshape(B, 6 * n)


def filter_velocities(
    ctx: RodContext, R: Tensor, p: Tensor, v: Tensor, w: Tensor, beta_h2: float, held: Optional[Tensor]
) -> Tuple[Tensor, Tensor]:
    """The scheme's velocity variable at an integer step, ``ṽ = (M + β h² K)⁻¹ M v`` (eq. (3)): the start of a run.

    Args:
        ctx: the rod's context.
        R: (B, n, 3, 3) node rotations, body → world.
        p: (B, n, 3) node positions [m].
        v: (B, n, 3) world velocities of the state [m/s].
        w: (B, n, 3) body angular velocities [rad/s].
        beta_h2: β h² [s²].
        held: (n, 6, 6) projector onto the held directions (left as they are), or None.

    Returns:
        ``(ṽ, ω̃)``, each (B, n, 3).
    """
    f, tau = filter_forces(ctx, R, p, ctx.translational_momentum(v), ctx.inertia * w, ForceFilter(beta_h2, held))
    return f / ctx.mass.unsqueeze(-1), tau / ctx.inertia


def unfilter_velocities(
    ctx: RodContext, R: Tensor, p: Tensor, v: Tensor, w: Tensor, beta_h2: float, held: Optional[Tensor]
) -> Tuple[Tensor, Tensor]:
    """The inverse of :func:`filter_velocities`, ``v = M⁻¹ (M + β h² K) ṽ``: the velocities of a state from
    the scheme's mean of the half-step velocities (records, callbacks, the final state).

    Args:
        ctx: the rod's context.
        R: (B, n, 3, 3) node rotations, body → world.
        p: (B, n, 3) node positions [m].
        v: (B, n, 3) the scheme's mean half-step velocities ṽ [m/s] (world).
        w: (B, n, 3) … and angular velocities ω̃ [rad/s] (body).
        beta_h2: β h² [s²].
        held: (n, 6, 6) projector onto the held directions (left as they are), or None.

    Returns:
        ``(v, ω)`` of the state, each (B, n, 3).
    """
    B, n = ctx.batch_size, ctx.n_nodes
    x = _free(torch.cat([w, v], -1).reshape(B, 6 * n), held)
    kx = (tangent_stiffness(ctx, R, p) @ x.unsqueeze(-1)).squeeze(-1)
    if ctx.mass_coupling is None:
        dx = _free(beta_h2 * kx / _mass_vector(ctx), held).reshape(B, n, 6)
    else:  # M⁻¹ in the free directions: (P M P + H diag(M)) dx = P βh² K x
        M = mass_matrix(ctx)
        if held is not None:
            H = torch.block_diag(*held.unbind(0))
            P = torch.eye(6 * n, dtype=H.dtype, device=H.device) - H
            M = P @ M @ P + _mass_vector(ctx).unsqueeze(-1) * H
        dx = torch.linalg.solve(M, _free(beta_h2 * kx, held).unsqueeze(-1)).reshape(B, n, 6)
    return v + dx[..., 3:], w + dx[..., :3]


def frequency_error(h_omega: float, beta: float = DEFAULT_BETA) -> float:
    """Relative frequency error ``ω_h/ω − 1`` of the implicit step for a linear mode of frequency ω at step
    h (exact for the two-step recursion: ``2 − 2 cos(ω_h h) = (hω)² / (1 + β (hω)²)``).

    Args:
        h_omega: h ω [-].
        beta: β of eq. (1).

    Returns:
        The relative frequency error (negative: the step slows the mode down).
    """
    x2 = float(h_omega) ** 2
    s = x2 / (1.0 + beta * x2)
    return math.acos(1.0 - 0.5 * s) / float(h_omega) - 1.0


def accuracy_dt(omega: float, rtol: float, beta: float = DEFAULT_BETA) -> float:
    """The step [s] at which the highest mode of interest (angular frequency ``omega`` [rad/s]) is computed
    with relative frequency error ``rtol`` (phase error ``rtol · ω t`` after t): the root of
    :func:`frequency_error` = −rtol, ≈ √(2 rtol / (β − 1/12)) / ω (√(12 rtol)/ω at β = ¼). Lower modes
    are more accurate (the error falls as ω²); modes above ``omega`` are slowed down but stay bounded.

    Args:
        omega: the highest angular frequency of interest [rad/s].
        rtol: relative frequency error in (0, 0.1).
        beta: β of eq. (1).

    Returns:
        The step [s].

    Raises:
        ArgumentError: ``omega`` or ``rtol`` out of range (a ``ValueError``).
    """
    if not (omega > 0 and math.isfinite(omega)):
        raise ArgumentError(f"omega = {omega!r}: must be a finite angular frequency > 0 [rad/s]")
    if not (0 < rtol < 0.1):
        raise ArgumentError(f"rtol = {rtol!r}: must be in (0, 0.1)")
    x = math.sqrt(2.0 * rtol / (beta - 1.0 / 12.0))
    for _ in range(30):  # Newton on frequency_error(x) = −rtol (x = h ω)
        e = frequency_error(x, beta) + rtol
        d = (frequency_error(x * (1 + 1e-6), beta) - frequency_error(x, beta)) / (x * 1e-6)
        x -= e / d
    return x / omega
