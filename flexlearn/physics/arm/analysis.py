"""Small-motion analysis of the flexible-arm plant: natural frequencies about a rest configuration."""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor

from flexlearn.physics.arm.lagrangian import FlexibleArmPlant

__all__ = ["linearized_frequencies"]


def linearized_frequencies(plant: FlexibleArmPlant, q0: Tensor, locked: Sequence[int] = ()) -> Tensor:
    """Natural frequencies [Hz] of the plant linearised about the rest configuration q0.

    With the coordinates in ``locked`` held fixed: ``det(K_lin − ω² M) = 0`` with ``M = ∂²T/∂q̇²`` and
    ``K_lin = ∂²V/∂q²`` both by autodiff.

    Args:
        plant: the plant.
        q0: rest configuration (N,).
        locked: indices of the coordinates held fixed.

    Returns:
        The frequencies [Hz], sorted ascending; zero-stiffness directions give 0.
    """
    q = q0.reshape(1, -1).to(torch.float64)
    M = plant.mass_matrix(q)[0]
    K = plant._hess_v(q)[0]
    free = [j for j in range(plant.N) if j not in set(locked)]
    Mf, Kf = M[free][:, free], K[free][:, free]
    Lc = torch.linalg.cholesky(Mf)
    Li = torch.linalg.inv(Lc)
    ev = torch.linalg.eigvalsh(Li @ Kf @ Li.T)
    return torch.sqrt(torch.clamp(ev, min=0.0)) / (2 * math.pi)
