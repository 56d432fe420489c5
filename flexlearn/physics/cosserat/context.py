"""Per-simulation derived quantities of a :class:`~flexlearn.physics.cosserat.rod.CosseratRod`: element
rest lengths and stiffnesses, lumped node masses and inertias (including load point masses, seed 001,
Remark 1) and the normalised inertia matrices of the Cayley–Newton solve."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import torch

from flexlearn.physics.cosserat.state import _E3

if TYPE_CHECKING:  # pragma: no cover
    from flexlearn.physics.cosserat.rod import CosseratRod


class _Ctx:
    """Per-simulation derived quantities (differentiable functions of the rod's buffers)."""

    def __init__(self, rod: "CosseratRod", loads: Sequence[Any], dtype):
        self.strain = rod.strain
        device = rod.length.device
        n = rod.n_nodes
        B = rod.batch_size
        l = rod.rest_lengths().to(dtype)                          # (B, N)
        self.l = l
        self.C1, self.C2 = rod.stiffness()
        self.C1, self.C2 = self.C1.to(dtype), self.C2.to(dtype)
        lumped = rod.lumped_lengths().to(dtype)                  # (B, n)
        self.lumped = lumped
        mass = rod.mass_per_length().to(dtype).unsqueeze(-1) * lumped + rod.point_mass.to(dtype)
        inertia = rod.inertia_per_length().to(dtype).unsqueeze(-2) * lumped.unsqueeze(-1) + rod.point_inertia.to(dtype)
        for load in loads:
            for node, m, jd in load.point_masses(n):
                onehot = torch.zeros(n, dtype=dtype, device=device)
                onehot[node] = 1.0
                mass = mass + m.to(onehot).reshape(-1, 1) * onehot
                inertia = inertia + jd.to(onehot).reshape(-1, 1, 3) * onehot.unsqueeze(-1)
        self.mass = mass.expand(B, n)
        self.inertia = inertia.expand(B, n, 3)                   # principal J (body)
        jd = 0.5 * self.inertia.sum(-1, keepdim=True) - self.inertia   # J_d = ½ tr(J) I − J (diagonal)
        self.scale = self.inertia.sum(-1)                        # per-node normalisation of the Newton solve
        self.jd_n = torch.diag_embed(jd / self.scale.unsqueeze(-1))
        self.j_n = self.inertia / self.scale.unsqueeze(-1)      # J = tr(J_d) I − J_d, normalised, diagonal
        self.e3 = torch.tensor(_E3, dtype=dtype, device=device)
        self.B, self.n = B, n
