"""The supports of one simulation in tensor form (:class:`HeldNodes`): which directions of which nodes are
held, where they are held at each time, and the reaction each support exerts.

A support (:class:`~flexlearn.physics.cosserat.state.Clamp`, :class:`~flexlearn.physics.cosserat.state.Pin`)
holds a node's position — in every direction, or across a slide direction ``a`` — and, for a clamp, its
frame. In the step k → k+1 (:mod:`flexlearn.physics.cosserat.integrator`) the free update gives p̂^{k+1},
v̂^{k+½} and the kicked body momentum u; the support then replaces the held parts with its pose
(p̄, R̄) at t_{k+1}:

    p^{k+1} = p̂^{k+1} + P (p̄^{k+1} − p̂^{k+1}),   v^{k+½} = (p^{k+1} − p^k) / h,   P = I or I − a aᵀ   (1)
    F = R^kᵀ R̄^{k+1},   u* = (F J_d − J_d Fᵀ)ᵛ / h,   R^{k+1} = R̄^{k+1},   Π^{k+1} = Fᵀ u*            (2)

(u* is the momentum for which the LGVI's rotation equation, seed 001 eq. (13), gives exactly F). The
reaction is what the support adds to the kick, in the world frame:

    λ = m (v^{k+½} − v̂^{k+½}) / h,      μ = R^k (u* − u) / h                                          (3)

At equilibrium λ and μ are minus the sum of the other forces and moments on the node; in motion they include
its inertia. They are the instantaneous forces of the adjacent elements, so they carry the elements' axial and
shear vibrations; with the implicit step at h ω ≫ 1 for those modes the strains (and so the reactions) settle
slowly toward their quasi-static values (a stiff pendulum at h ω_axial ≈ 15: 4 % off after 2 swings; 0.03 % at
h ω_axial ≈ 4). Positions are not affected; a step that resolves the axial mode, or equilibrium, gives exact
reactions. The implicit step (:mod:`flexlearn.physics.cosserat.implicit`) treats the held directions as no
degrees of freedom (:meth:`HeldNodes.dof_projector`). Shapes: B rods, n nodes, S supports, Sr of them clamps.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.state import FREE, Clamp, Pin, Support

Supports = Union[Clamp, Pin, str, None, Sequence[Support]]
"""How a rod is held (``base`` of a simulation): one :class:`~flexlearn.physics.cosserat.state.Clamp` or
:class:`~flexlearn.physics.cosserat.state.Pin` (node 0 unless it names another), a sequence of them (each on its
own node), ``"free"``, or None (clamped at the origin, rod along world z)."""


def support_list(base: Supports) -> List[Support]:
    """The supports of a ``base`` as a list (empty for ``"free"``; None is a :class:`Clamp` at the origin).

    Args:
        base: the rod's supports.

    Returns:
        The list of supports.

    Raises:
        ConfigError: a value that is none of the accepted kinds.
    """
    if base is None:
        return [Clamp()]
    if isinstance(base, (Clamp, Pin)):
        return [base]
    if isinstance(base, str):
        check(base == FREE, "base", base, "must be a Clamp, a Pin, a sequence of them or 'free'")
        return []
    supports = list(base)
    for s in supports:
        check(isinstance(s, (Clamp, Pin)), "base", s, "each support must be a Clamp or a Pin")
    return supports


class HeldTargets(NamedTuple):
    """Where the supports hold their nodes at one time."""

    positions: Tensor  # (B, S, 3) [m]
    rotations: Tensor  # (B, Sr, 3, 3) frames of the clamps (Sr may be 0)


class FreeStep(NamedTuple):
    """The step k → k+1 of every node as if no node were held (B, n, …)."""

    v: Tensor  # v̂^{k+½} [m/s] (world)
    p: Tensor  # p̂^{k+1} [m]
    R: Tensor  # R̂^{k+1}, (B, n, 3, 3)
    pi: Tensor  # Π̂^{k+1} (body) [kg m²/s]
    u: Tensor  # the kicked body momentum u = Π + h τ [kg m²/s]


class HeldStep(NamedTuple):
    """State k+1 after the supports took their nodes (eqs. (1)–(2)) and their reactions (eq. (3))."""

    v: Tensor  # (B, n, 3) v^{k+½} [m/s]
    p: Tensor  # (B, n, 3) p^{k+1} [m]
    R: Tensor  # (B, n, 3, 3) R^{k+1}
    pi: Tensor  # (B, n, 3) Π^{k+1} (body) [kg m²/s]
    reaction: Tensor  # (B, S, 6) world force [N] and moment [N m] of each support


def _vee(a: Tensor) -> Tensor:
    """The vector (…, 3) of a skew-symmetric matrix (…, 3, 3)."""
    return torch.stack([a[..., 2, 1], a[..., 0, 2], a[..., 1, 0]], -1)


class HeldNodes:
    """The supports of one simulation of a rod with ``n_nodes`` nodes, batched over ``batch_size`` rods.

    Args:
        supports: the :class:`~flexlearn.physics.cosserat.state.Clamp` and
            :class:`~flexlearn.physics.cosserat.state.Pin` supports, one per node.
        n_nodes: N + 1.
        batch_size: B.
        dtype: dtype of the tensors.
        device: their device.

    Raises:
        ConfigError: a node index out of range, or two supports on one node.
    """

    def __init__(
        self,
        supports: Sequence[Support],
        n_nodes: int,
        batch_size: int,
        dtype: torch.dtype,
        device: Optional[torch.device] = None,
    ):
        nodes = []
        for s in supports:
            check(-n_nodes <= s.node < n_nodes, "support node", s.node, f"must be in [-{n_nodes}, {n_nodes - 1}]")
            nodes.append(s.node % n_nodes)
        check(len(set(nodes)) == len(nodes), "supports", nodes, "one support per node")
        self.supports = list(supports)
        self.n_nodes, self.batch_size, self.dtype, self.device = n_nodes, batch_size, dtype, device
        self.nodes = nodes
        self.index = torch.tensor(nodes, dtype=torch.long, device=device)
        eye = torch.eye(3, dtype=dtype, device=device)
        projectors = []
        for s in supports:
            a = s.slides_along
            projectors.append(eye if a is None else eye - torch.outer(a, a).to(eye))
        self.projector = torch.stack(projectors) if projectors else eye.new_zeros(0, 3, 3)
        self.clamp_slots = [i for i, s in enumerate(supports) if s.holds_rotation]
        self.clamp_index = self.index[self.clamp_slots]
        self.start_positions: Optional[Tensor] = None  # (B, S, 3), for pins held where they start

    def __len__(self) -> int:
        """S, the number of supports."""
        return len(self.supports)

    def targets(self, t: float) -> HeldTargets:
        """The supports' poses at time ``t`` [s].

        Args:
            t: time [s].

        Returns:
            :class:`HeldTargets`: positions (B, S, 3) [m], clamp frames (B, Sr, 3, 3).
        """
        B, dt, dev = self.batch_size, self.dtype, self.device
        positions, rotations = [], []
        for i, s in enumerate(self.supports):
            if isinstance(s, Clamp):
                rotation, position = s.pose(t, dt, dev)
                rotations.append(rotation.expand(B, 3, 3))
            else:
                pinned = s.pose(t, dt, dev)
                if pinned is None:
                    assert self.start_positions is not None, "place() records where the pins start"
                    pinned = self.start_positions[:, i]
                position = pinned
            positions.append(position.expand(B, 3))
        rot = torch.stack(rotations, 1) if rotations else torch.zeros(B, 0, 3, 3, dtype=dt, device=dev)
        return HeldTargets(torch.stack(positions, 1), rot)

    def place(self, R: Tensor, p: Tensor) -> Tuple[Tensor, Tensor]:
        """The initial state with the held parts at the supports' poses at t = 0 (eq. (1) with p̂ = p).

        Args:
            R: (B, n, 3, 3) initial rotations.
            p: (B, n, 3) initial positions [m].

        Returns:
            ``(R, p)`` with the supports applied.
        """
        self.start_positions = p[:, self.index]
        target = self.targets(0.0)
        held = p[:, self.index]
        moved = held + (self.projector @ (target.positions - held).unsqueeze(-1)).squeeze(-1)
        p = p.index_copy(1, self.index, moved)
        if self.clamp_slots:
            R = R.index_copy(1, self.clamp_index, target.rotations)
        return R, p

    def hold(
        self, state: Tuple[Tensor, Tensor], free: FreeStep, target: HeldTargets, h: float, ctx: RodContext
    ) -> HeldStep:
        """Eqs. (1)–(3): state k+1 with the held parts at ``target``, and the supports' reactions.

        Args:
            state: ``(R^k, p^k)``, (B, n, 3, 3) and (B, n, 3).
            free: the free update of every node (:class:`FreeStep`).
            target: the supports' poses at t_{k+1}.
            h: time step [s].
            ctx: the rod's context (masses, normalised inertias).

        Returns:
            :class:`HeldStep` of every node.
        """
        R, p = state
        idx = self.index
        held = free.p[:, idx]
        moved = held + (self.projector @ (target.positions - held).unsqueeze(-1)).squeeze(-1)
        v_held = (moved - p[:, idx]) / h
        force = ctx.mass[:, idx].unsqueeze(-1) * (v_held - free.v[:, idx]) / h
        moment = torch.zeros_like(force)
        v2, p2 = free.v.index_copy(1, idx, v_held), free.p.index_copy(1, idx, moved)
        R2, pi2 = free.R, free.pi
        if self.clamp_slots:
            ci = self.clamp_index
            Rk = R[:, ci]
            F = Rk.transpose(-1, -2) @ target.rotations
            jd = ctx.jd_normalised[:, ci]
            u_star = ctx.inertia_trace[:, ci].unsqueeze(-1) / h * _vee(F @ jd - jd @ F.transpose(-1, -2))
            mu = (Rk @ ((u_star - free.u[:, ci]) / h).unsqueeze(-1)).squeeze(-1)
            moment = moment.index_copy(1, torch.tensor(self.clamp_slots, device=p.device), mu)
            R2 = R2.index_copy(1, ci, target.rotations)
            pi2 = pi2.index_copy(1, ci, (F.transpose(-1, -2) @ u_star.unsqueeze(-1)).squeeze(-1))
        return HeldStep(v2, p2, R2, pi2, torch.cat([force, moment], -1))

    def zero_held(self, v: Tensor, pi: Tensor) -> Tuple[Tensor, Tensor]:
        """``v`` with its held directions set to 0 and ``pi`` 0 at the clamped nodes (the start of a run).

        Args:
            v: (B, n, 3) velocities [m/s] (world).
            pi: (B, n, 3) body momenta [kg m²/s].

        Returns:
            ``(v, pi)``.
        """
        return self.replace_held(v, torch.zeros_like(v)), self.replace_clamped(pi, torch.zeros_like(pi))

    def replace_held(self, v: Tensor, held_values: Tensor) -> Tensor:
        """``v`` with its held directions taken from ``held_values`` (a held node moves as its support).

        Args:
            v: (B, n, 3) velocities of every node [m/s].
            held_values: (B, n, 3) velocities whose held directions replace those of ``v``.

        Returns:
            (B, n, 3).
        """
        idx = self.index
        rows = v[:, idx] + (self.projector @ (held_values[:, idx] - v[:, idx]).unsqueeze(-1)).squeeze(-1)
        return v.index_copy(1, idx, rows)

    def replace_clamped(self, pi: Tensor, held_pi: Tensor) -> Tensor:
        """``pi`` with the rows of the clamped nodes taken from ``held_pi``.

        Args:
            pi: (B, n, 3) body momenta of every node [kg m²/s].
            held_pi: (B, n, 3) momenta whose clamped rows replace those of ``pi``.

        Returns:
            (B, n, 3).
        """
        if not self.clamp_slots:
            return pi
        return pi.index_copy(1, self.clamp_index, held_pi[:, self.clamp_index])

    def rotation_held(self) -> Tensor:
        """(n,) True at the clamped nodes (their rotation is not solved for)."""
        mask = torch.zeros(self.n_nodes, dtype=torch.bool, device=self.device)
        mask[self.clamp_index] = True
        return mask

    def dof_projector(self) -> Tensor:
        """(n, 6, 6) projector onto the held directions of each node in the implicit step's coordinates
        (η_a, δp_a): I₃ in the rotation block of a clamp, P of eq. (1) in the position block, 0 elsewhere.
        It commutes with M = diag(J_a, m_a I₃), which :func:`~flexlearn.physics.cosserat.implicit.filter_forces`
        relies on."""
        out = torch.zeros(self.n_nodes, 6, 6, dtype=self.dtype, device=self.device)
        for slot, node in enumerate(self.nodes):
            out[node, 3:, 3:] = self.projector[slot]
            if slot in self.clamp_slots:
                out[node, :3, :3] = torch.eye(3, dtype=self.dtype, device=self.device)
        return out


def base_clamp_projector(n_nodes: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """(n, 6, 6) :meth:`HeldNodes.dof_projector` of a rod clamped at node 0 only (the fused kernel's case).

    Args:
        n_nodes: N + 1.
        dtype: dtype of the projector.

    Returns:
        The projector: I₆ at node 0, 0 elsewhere.
    """
    out = torch.zeros(n_nodes, 6, 6, dtype=dtype)
    out[0] = torch.eye(6, dtype=dtype)
    return out
