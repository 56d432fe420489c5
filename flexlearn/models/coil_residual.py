"""Physics-informed direction model with a learned residual: identified coil model + a small network for what the
coil model misses.

`CoilDirectionModel` predicts the calibrated field direction x̂(v; θ) at the sensor for a joint direction v. A real
module differs from any coil model (trace geometry, leads, copper and iron nearby) in a way that is the same for
every module of one design; `CoilResidualModel` adds a small network r(v) to the forward model,

    x̂(v) = (x̂_coil(v; θ) + r(v)) / ‖x̂_coil(v; θ) + r(v)‖,   r: (v_x / v_z, v_y / v_z) ↦ ℝ³ (2-32-32-3, tanh),

learned once on a training module (`fit_residual`: θ identified on its calibration poses, then r on all its train
poses by minimising Σ ∠(x̂(v_n), x_n)², v_n from the accelerometer label) and kept for every other module, whose θ
is identified with r in place. Inversion per fix is `CoilDirectionModel.forward` through the corrected field. r takes
only the joint direction, so it extrapolates past the trained cap as smoothly as tanh layers do, while the coil
model carries the physics there.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor, nn

from flexlearn.lie import so3_exp
from flexlearn.models.coil_direction import CoilDirectionModel, angle_between

__all__ = ["CoilResidualModel", "fit_residual"]


class CoilResidualModel(CoilDirectionModel):
    """`CoilDirectionModel` whose field direction carries a learned residual r(v) (module docstring)."""

    def __init__(self, *args: Any, width: int = 32, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        hidden = [nn.Linear(2, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh()]
        head = nn.Linear(width, 3)
        self.residual = nn.Sequential(*hidden, head).double()  # .double() converts head in place
        nn.init.zeros_(head.weight)
        nn.init.zeros_(head.bias)  # starts as the coil model itself

    def field_direction(self, v: Tensor, theta: Optional[Tensor] = None) -> Tensor:
        """Unit calibrated field (N, 3) for joint parent axes v (N, 3): coil model + r(v), renormalised.

        Args:
            v: joint parent axes (N, 3) in the child board frame.
            theta: the coil model's 16 parameters; None: the identified ``self.theta``.

        Returns:
            The unit field direction (N, 3).
        """
        x = super().field_direction(v, theta) + self.residual(v[..., :2] / v[..., 2:3] / math.tan(math.radians(30)))
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def fit_residual(
    model: CoilResidualModel, delta_b: Any, label: Any, steps: int = 400, lr: float = 3e-3
) -> dict[str, float]:
    """Fit r (θ fixed) to a module's poses by Adam on the mean squared angle between x̂(v_n) and x_n.

    Args:
        model: the model; only its residual r learns.
        delta_b: calibrated fields ΔB (N, 3).
        label: the poses' labels (N, 3).
        steps: Adam steps.
        lr: Adam learning rate.

    Returns:
        The median angle [deg] before and after: ``{"median_residual_deg_before", "median_residual_deg_after"}``.
    """
    x = torch.as_tensor(np.asarray(delta_b), dtype=torch.float64)
    x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    v = torch.as_tensor(np.asarray(label), dtype=torch.float64) @ so3_exp(model.theta[3:6]).T
    with torch.no_grad():
        coil = CoilDirectionModel.field_direction(model, v)  # fixed: only r learns
    scaled = v[:, :2] / v[:, 2:3] / math.tan(math.radians(30))

    def angles() -> Tensor:
        y = coil + model.residual(scaled)
        return angle_between(y / torch.linalg.vector_norm(y, dim=-1, keepdim=True), x)

    opt = torch.optim.Adam(model.residual.parameters(), lr=lr)
    with torch.enable_grad():
        before = float(angles().median())
        for _ in range(steps):
            opt.zero_grad()
            loss = (angles() ** 2).mean()
            loss.backward()
            opt.step()
    with torch.no_grad():
        after = float(angles().median())
    return {"median_residual_deg_before": math.degrees(before), "median_residual_deg_after": math.degrees(after)}
