"""The parent coil of a rig: the seed's two-layer board (`flexlearn.sensing.coil.PlanarCoil`) or a multilayer stack.

A board of L copper layers (L even) at equal spacing through the thickness h, wound in series: layer i sits at
z_i = h/2 − i·h/(L − 1). Layers k and L−1−k (k = 0 … L/2−1) form one two-layer spiral of the seed's layout with
separation h_k = h (L − 1 − 2k)/(L − 1), so the stack's field, resistance, trace length and moment are the sums
over its L/2 pairs (the short inner vias between pairs are neglected, as the seed's via is).
"""

from __future__ import annotations

import dataclasses
from typing import Union

import torch

from flexlearn.sensing.coil import CoilConfig, PlanarCoil

__all__ = ["StackedCoil", "build_coil"]


class StackedCoil:
    """L/2 concentric two-layer spirals in series (see the module docstring); the `PlanarCoil` interface."""

    def __init__(self, cfg: CoilConfig, layers: int) -> None:
        h = cfg.board_thickness
        self.layers = layers
        self.pairs = [
            PlanarCoil(dataclasses.replace(cfg, board_thickness=h * (layers - 1 - 2 * k) / (layers - 1)))
            for k in range(layers // 2)
        ]

    def field(self, points: torch.Tensor, current: Union[float, torch.Tensor] = 1.0) -> torch.Tensor:
        """Flux density [T] (..., 3) at ``points`` (..., 3) [m] in the coil frame for ``current`` [A].

        Args:
            points: field points (..., 3) [m] in the coil frame.
            current: coil current [A].

        Returns:
            B (..., 3) [T], the sum over the layer pairs.
        """
        return sum((p.field(points, current) for p in self.pairs[1:]), self.pairs[0].field(points, current))

    def trace_length(self) -> torch.Tensor:
        """Copper trace length [m] of all layers."""
        return sum((p.trace_length() for p in self.pairs[1:]), self.pairs[0].trace_length())

    def resistance(self) -> torch.Tensor:
        """DC resistance [Ω] of the series stack."""
        return sum((p.resistance() for p in self.pairs[1:]), self.pairs[0].resistance())

    def moment(self, current: Union[float, torch.Tensor] = 1.0) -> torch.Tensor:
        """Magnetic dipole moment (3,) [A·m²] in the coil frame.

        Args:
            current: coil current [A].

        Returns:
            m (3,) [A·m²], the sum over the layer pairs.
        """
        return sum((p.moment(current) for p in self.pairs[1:]), self.pairs[0].moment(current))


def build_coil(cfg: CoilConfig, layers: int = 2) -> Union[PlanarCoil, StackedCoil]:
    """The coil of ``layers`` copper layers: the seed's `PlanarCoil` for 2, else a `StackedCoil`.

    Args:
        cfg: the spiral's geometry and material (``board_thickness`` is the whole stack's).
        layers: number of copper layers (even).

    Returns:
        The coil model.
    """
    return PlanarCoil(cfg) if layers == 2 else StackedCoil(cfg, layers)
