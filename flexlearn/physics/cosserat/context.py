"""The per-simulation context of a Cosserat rod, :class:`RodContext`: element rest lengths and stiffnesses,
lumped node masses and inertias (including load point masses, seed 001, Remark 1) and the normalised inertia
matrices of the Cayley–Newton solve. It is the ``ctx`` argument every load (``apply``, ``potential``) and
damping model receives; :meth:`CosseratRod.context <flexlearn.physics.cosserat.rod.CosseratRod.context>`
builds it from the rod's buffers (differentiable functions of them)."""

from __future__ import annotations

import dataclasses

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
    implicit_step: float = 0.0

    @property
    def midpoint(self) -> bool:
        """True for a mid-frame shear strain (``strain`` 'midpoint' or 'geodesic')."""
        return self.strain in ("midpoint", "geodesic")

    @property
    def geodesic(self) -> bool:
        """True for the shear strain at the geodesic mid frame (``strain == 'geodesic'``)."""
        return self.strain == "geodesic"

    @classmethod
    def from_masses(
        cls,
        strain: str,
        rest_lengths: Tensor,
        stiffness: tuple[Tensor, Tensor],
        node_lengths: Tensor,
        mass: Tensor,
        inertia: Tensor,
    ) -> RodContext:
        """The context of the given element and node quantities, with the Newton normalisations derived.

        Args:
            strain: ``'midpoint'``, ``'geodesic'`` or ``'nodes'``.
            rest_lengths: (B, N) element rest lengths [m].
            stiffness: ``(C1, C2)``, each (B, N, 3): shear/extension [N] and bending/torsion [N m²] stiffness.
            node_lengths: (B, N+1) lumped node lengths [m].
            mass: (B, N+1) node masses [kg].
            inertia: (B, N+1, 3) principal node inertias [kg m²] (body frame).

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
        )
