"""The magnetic-field-to-direction network of seed 002, §III-B1.

f(ΔB) maps the parent coil's field at the child magnetometer, ΔB in tesla in the child sensor frame,
to the parent axis as a unit vector in the same frame. The input normalisation is part of the model
(seed 002: "f ... includes input normalization, which removes multiplicative field-amplitude
variation"), so it travels with the exported file:

    x = ΔB / max(‖ΔB‖, ε)                 (amplitude removed: units and coil current drop out)
    z = (x − μ) / σ                       (per-axis standardisation fitted on the training split)
    f = normalize(MLP(z))                 (unit-vector output)

The module is scriptable (`torch.jit.script`) and exportable with `torch.export`.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

_ACTIVATIONS = {"silu": nn.SiLU, "tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


class DirectionMLP(nn.Module):
    """ΔB (..., 3) [T] → unit direction (..., 3). Hidden widths and activation are configurable."""

    def __init__(self, hidden: Sequence[int] = (128, 128, 128), activation: str = "silu",
                 amplitude_eps: float = 1e-12) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"model.activation = {activation!r}: expected one of {sorted(_ACTIVATIONS)}")
        if len(hidden) == 0 or any(int(h) <= 0 for h in hidden):
            raise ValueError(f"model.hidden = {list(hidden)!r}: expected one or more positive widths")
        layers: list[nn.Module] = []
        width = 3
        for h in hidden:
            layers += [nn.Linear(width, int(h)), _ACTIVATIONS[activation]()]
            width = int(h)
        layers.append(nn.Linear(width, 3))
        self.net = nn.Sequential(*layers)
        self.amplitude_eps = float(amplitude_eps)
        self.register_buffer("input_mean", torch.zeros(3))
        self.register_buffer("input_std", torch.ones(3))

    @staticmethod
    def unit_field(delta_b: torch.Tensor, eps: float) -> torch.Tensor:
        """ΔB / max(‖ΔB‖, eps): the amplitude-free field direction, shape (..., 3)."""
        return delta_b / torch.linalg.vector_norm(delta_b, dim=-1, keepdim=True).clamp_min(eps)

    @torch.jit.ignore
    def fit_input_normalization(self, delta_b: torch.Tensor) -> None:
        """Set μ, σ from training fields (N, 3); σ is floored to keep the scaling finite."""
        x = self.unit_field(delta_b.to(self.input_mean.dtype), self.amplitude_eps)
        self.input_mean.copy_(x.mean(dim=0))
        self.input_std.copy_(x.std(dim=0).clamp_min(1e-6))

    def forward(self, delta_b: torch.Tensor) -> torch.Tensor:
        x = self.unit_field(delta_b.to(self.input_mean.dtype), self.amplitude_eps)
        y = self.net((x - self.input_mean) / self.input_std)
        return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True).clamp_min(1e-12)
