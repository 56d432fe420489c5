"""Value types of the CPR statics solver: loads, the equilibrium it returns, motor twists (its errors:
:mod:`flexlearn.physics.lse.errors`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import Tensor


@dataclass
class Loads:
    """External loads (all optional, world frame, SI).

    ee_wrench: (6,) [moment N·m; force N] applied at the platform frame origin.
    node_wrenches: (R, N+1, 6) dead [moment; force] at the rod nodes (base nodes are clamped: ignored).
    pulley_position: (3,) [m] and pulley_tension [N]: a force of constant magnitude on the platform origin,
        pointing from the platform to the pulley (seed Sec. VI-D, Experiment II).
    gravity: when True the robot's gravity (rods, lumped at the nodes, and platform mass) is applied.
    """

    ee_wrench: Optional[Tensor] = None
    node_wrenches: Optional[Tensor] = None
    pulley_position: Optional[Tensor] = None
    pulley_tension: Optional[Tensor] = None
    gravity: bool = True
    gravity_scale: float = 1.0

    def scaled(self, lam: float) -> "Loads":
        """The same loads multiplied by λ (continuation).

        Args:
            lam: The factor λ (gravity through ``gravity_scale``; the pulley position is kept).

        Returns:
            A new `Loads`.
        """
        f = lambda t: None if t is None else lam * t  # noqa: E731
        return Loads(
            f(self.ee_wrench),
            f(self.node_wrenches),
            self.pulley_position,
            f(self.pulley_tension),
            self.gravity,
            self.gravity_scale * lam,
        )

    def magnitude(self, length: float) -> float:
        """|applied moments| + |applied forces| · length [N·m] (gravity not included): the load part of the
        residual scale of `CPRModel.solve`.

        Args:
            length: Lever arm for the forces [m] (a rod length).

        Returns:
            The load scale [N·m].
        """
        mag = 0.0
        if self.ee_wrench is not None:
            w = self.ee_wrench.detach()
            mag += float(w[:3].norm()) + float(w[3:].norm()) * length
        if self.pulley_tension is not None:
            mag += float(self.pulley_tension.detach()) * length
        if self.node_wrenches is not None:
            w = self.node_wrenches.detach()
            mag += float(w[..., :3].norm(dim=-1).sum()) + float(w[..., 3:].norm(dim=-1).sum()) * length
        return mag

    def tensors(self) -> list[Tensor]:
        return [
            t for t in (self.ee_wrench, self.node_wrenches, self.pulley_position, self.pulley_tension) if t is not None
        ]


@dataclass(frozen=True)
class Stability:
    """Stability of an equilibrium: the tangent stiffness of the total potential energy reduced to the
    constraint manifold (:meth:`CPRModel.stability <flexlearn.physics.lse.solver.SolverMixin.stability>`).

    The solver's unknowns already parametrise the manifold (interior node twists ζ and strain slopes β of every
    rod, one shared platform twist: the closure constraints hold by construction), so the reduced stiffness is
    the assembled tangent ``K_t`` in those coordinates with the slopes condensed out (``K_nn − K_nβ K_ββ⁻¹
    K_βn``), scaled to N·m (rotations in rad, translations over the mean rod length L) and divided by
    max(EI/L). At an equilibrium of conservative loads K_t is symmetric (``asymmetry`` reports
    ‖K − Kᵀ‖/‖K‖); the equilibrium is a strict local minimum of the energy, i.e. stable, when every
    eigenvalue is positive.

    Attributes:
        min_eigenvalue: the smallest eigenvalue of the reduced, scaled stiffness [-] (relative to EI/L).
        stable: ``min_eigenvalue > -tol`` (``tol`` = 1e-9 of :meth:`CPRModel.stability`).
        mode: (R·6(N−1) + 6,) its unit eigenvector in the scaled node unknowns [ζ of rod 1 … rod R; ζ_ee]
            (rotations [rad], translations / L): the buckling mode at a bifurcation.
        asymmetry: ‖K − Kᵀ‖_F / ‖K‖_F of the scaled tangent [-] (round-off for conservative loads).
    """

    min_eigenvalue: float
    stable: bool
    mode: Tensor = field(repr=False, compare=False)
    asymmetry: float = 0.0


@dataclass
class Equilibrium:
    """A converged equilibrium (differentiable w.r.t. motor angles, loads and stiffness; see `CPRModel.solve`).

    g_ee (4, 4): platform pose; nodes (R, N+1, 4, 4): all nodal poses; beta (R, N, 6): strain slopes [1/m²].
    iterations: Newton iterations; residual_log: scaled residual norm before each iteration and at the end.
    stability: the :class:`Stability` of the equilibrium (smallest eigenvalue of the reduced tangent stiffness,
    stable or not); None only where the solve was told not to compute it.
    """

    g_ee: Tensor
    nodes: Tensor
    beta: Tensor
    theta: Tensor
    iterations: int
    residual_log: list[float] = field(default_factory=list)
    # (dy/dθ (R, ny, M), dz/dθ (6, M)) at (about) this equilibrium, for the warm-start predictor; or None
    sensitivity: Optional[tuple] = field(default=None, repr=False, compare=False)
    stability: Optional[Stability] = None

    @property
    def position(self) -> Tensor:
        """End-effector position (3,) [m]."""
        return self.g_ee[:3, 3]

    def detach(self) -> "Equilibrium":
        return Equilibrium(
            self.g_ee.detach(),
            self.nodes.detach(),
            self.beta.detach(),
            self.theta.detach(),
            self.iterations,
            list(self.residual_log),
            self.sensitivity,
            self.stability,
        )


def motor_twist(axis: Tensor, pivot: Tensor) -> Tensor:
    """Spatial twist (..., 6) ``[a; c × a]`` of a rotation about the unit axis a through the point c.

    G(θ) = exp(θ S^) with S = [a; -a × c] = [a; c × a] (world frame); ``δζ_{k,0} = Ad_{g_{k,0}⁻¹} S δθ``
    is the seed's ``S_k(θ_m) δθ_m`` (Sec. IV-B).

    Args:
        axis: Unit rotation axis a (..., 3).
        pivot: A point c on the axis (..., 3) [m].

    Returns:
        The twist (..., 6), [angular; linear].
    """
    return torch.cat([axis, torch.linalg.cross(pivot, axis)], -1)
