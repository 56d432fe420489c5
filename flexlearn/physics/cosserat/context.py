"""The per-simulation context of a Cosserat rod, :class:`RodContext`: element rest lengths and stiffnesses,
lumped node masses and inertias (including load point masses, seed 001, Remark 1) and the normalised inertia
matrices of the Cayley–Newton solve. It is the ``ctx`` argument every load (``apply``, ``potential``) and
damping model receives; :meth:`CosseratRod.context <flexlearn.physics.cosserat.rod.CosseratRod.context>`
builds it from the rod's buffers (differentiable functions of them)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch
from torch import Tensor

from flexlearn.physics.cosserat.state import E3


@dataclasses.dataclass
class RodContext:
    """Per-simulation quantities of a rod of N elements and N+1 nodes, batched over B rods (SI units).

    Build it with :meth:`RodContext.from_masses` (or :meth:`CosseratRod.context
    <flexlearn.physics.cosserat.rod.CosseratRod.context>`), which derives the Newton normalisations.

    Attributes:
        strain: ``'midpoint'``, ``'geodesic'`` (shear strain at the element mid frame, :mod:`.strains`) or
            ``'nodes'`` (seed 001, eq. (6)).
        rest_lengths: (B, N) element rest lengths l_i [m].
        shear_stiffness: (B, N, 3) C1 = (k G A, k G A, E A) [N], shear and extension (seed 001, Table 2).
        bend_stiffness: (B, N, 3) C2 = (E I1, E I2, G J_t) [N m²], bending and torsion.
        node_lengths: (B, N+1) length each node represents [m]: l/2 at the ends, l inside.
        mass: (B, N+1) lumped node masses m_a [kg] (rod, point masses and loads' masses).
        inertia: (B, N+1, 3) principal rotational inertias J_a [kg m²] (body frame).
        inertia_trace: (B, N+1) tr J_a [kg m²], the per-node normalisation of the Newton solve.
        jd_normalised: (B, N+1, 3, 3) J_d = ½ tr(J) I − J divided by tr J (diagonal).
        j_normalised: (B, N+1, 3) the diagonal of J = tr(J_d) I − J_d divided by tr J.
        e3: (3,) the body tangent E3 (the rest direction of the rod axis in the node frame).
        batch_size: B.
        n_nodes: N+1.
        curvature: ``'cayley'`` (κ = 2 cay⁻¹(Q) / l, seed 001) or ``'log'`` (κ = log(Q)^∨ / l,
            :func:`~flexlearn.physics.cosserat.strains.log_curvature`).
        element_mass: (B, N) the rod's own mass of each element ρ A l_i [kg] (None: not known).
        consistent_mass: the implicit step's translational mass is the consistent one (``implicit_mass=
            'consistent'``, :meth:`translational_momentum`); False: the lumped ``mass``.
        implicit_step: h [s] of the implicit step (0 for the LGVI): contact laws add its numerical damping
            (eq. (5) of :mod:`~flexlearn.physics.cosserat.implicit`).
    """

    strain: str
    rest_lengths: Tensor
    shear_stiffness: Tensor
    bend_stiffness: Tensor
    node_lengths: Tensor
    mass: Tensor
    inertia: Tensor
    inertia_trace: Tensor
    jd_normalised: Tensor
    j_normalised: Tensor
    e3: Tensor
    batch_size: int
    n_nodes: int
    curvature: str = "cayley"
    element_mass: Optional[Tensor] = None
    consistent_mass: bool = False
    implicit_step: float = 0.0

    @property
    def midpoint(self) -> bool:
        """True for a mid-frame shear strain (``strain`` 'midpoint' or 'geodesic')."""
        return self.strain in ("midpoint", "geodesic")

    @property
    def geodesic(self) -> bool:
        """True for the shear strain at the geodesic mid frame (``strain == 'geodesic'``)."""
        return self.strain == "geodesic"

    @property
    def mass_coupling(self) -> Optional[Tensor]:
        """(B, N) the consistent mass's coupling of each element's two nodes, ρ A l_i / 6 [kg]; None when the
        translational mass is the lumped one."""
        if not self.consistent_mass or self.element_mass is None:
            return None
        return self.element_mass / 6.0

    def translational_momentum(self, v: Tensor) -> Tensor:
        """(B, n, 3) ``M v`` [kg m/s] of node velocities ``v`` (B, n, 3): ``m_a v_a`` with the lumped mass; with the
        consistent one each element also adds ``c (v_b − v_a)`` to node a and ``c (v_a − v_b)`` to node b, c =
        ρ A l / 6, so that an element's ½ vᵀ M v is ½ ∫ ρ A |v(s)|² ds of the linearly interpolated velocity.
        Column sums are the lumped masses: Σ_a (M v)_a = Σ_a m_a v_a for every v.

        Args:
            v: (B, n, 3) node velocities [m/s].

        Returns:
            (B, n, 3) the node momenta.
        """
        out = self.mass.unsqueeze(-1) * v
        coupling = self.mass_coupling
        if coupling is None:
            return out
        d = coupling.unsqueeze(-1) * (v[:, 1:] - v[:, :-1])  # (B, N, 3)
        return out + torch.nn.functional.pad(d, (0, 0, 0, 1)) - torch.nn.functional.pad(d, (0, 0, 1, 0))

    @classmethod
    def from_masses(
        cls,
        strain: str,
        rest_lengths: Tensor,
        stiffness: tuple[Tensor, Tensor],
        node_lengths: Tensor,
        mass: Tensor,
        inertia: Tensor,
        element_mass: Optional[Tensor] = None,
    ) -> RodContext:
        """The context of the given element and node quantities, with the Newton normalisations derived.

        Args:
            strain: ``'midpoint'``, ``'geodesic'`` or ``'nodes'``.
            rest_lengths: (B, N) element rest lengths [m].
            stiffness: ``(C1, C2)``, each (B, N, 3): shear/extension [N] and bending/torsion [N m²] stiffness.
            node_lengths: (B, N+1) lumped node lengths [m].
            mass: (B, N+1) node masses [kg].
            inertia: (B, N+1, 3) principal node inertias [kg m²] (body frame).
            element_mass: (B, N) the rod's own element masses ρ A l_i [kg] (for the consistent mass).

        Returns:
            The :class:`RodContext`.
        """
        batch_size, n_nodes = mass.shape[0], mass.shape[1]
        jd = 0.5 * inertia.sum(-1, keepdim=True) - inertia  # J_d = ½ tr(J) I − J (diagonal)
        scale = inertia.sum(-1)  # per-node normalisation of the Newton solve
        return cls(
            strain=strain,
            rest_lengths=rest_lengths,
            shear_stiffness=stiffness[0],
            bend_stiffness=stiffness[1],
            node_lengths=node_lengths,
            mass=mass,
            inertia=inertia,
            inertia_trace=scale,
            jd_normalised=torch.diag_embed(jd / scale.unsqueeze(-1)),
            j_normalised=inertia / scale.unsqueeze(-1),  # J = tr(J_d) I − J_d, normalised, diagonal
            e3=torch.tensor(E3, dtype=mass.dtype, device=mass.device),
            batch_size=batch_size,
            n_nodes=n_nodes,
            element_mass=element_mass,
        )
