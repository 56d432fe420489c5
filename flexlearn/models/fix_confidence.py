"""How sure a magnetic fix is: a per-fix σ_m and an out-of-distribution flag from the calibrated coil model.

For a fix with calibrated field x (W ΔB) and the direction model's answer ℓ̂ (e.g. the calibrated MLP), the module's
identified coil model (`flexlearn.models.coil_direction.CoilDirectionModel`) predicts the field direction x̂(ℓ̂)
that ℓ̂ implies. Their angle r = ∠(x, x̂(ℓ̂)) is the residual against the calibrated physics; the field turns by
≈0.5 rad per rad of bend (`flexlearn.sim.rig.sensor_position`), so the answer is off by ≈ r / 0.5. Per fix:

    σ_m = sqrt(σ₀² + (r / k)²),  k = ``field_gain`` (0.5)            [rad]
    flagged = r / k > ``reject`` or bend(ℓ̂) > ``cap`` + ``cap_margin``

σ₀ is the model's error floor where it was trained (its held-out median). A fused estimator can take σ_m as the
per-fix measurement noise and drop flagged fixes; bends past the trained cap are where the MLP extrapolates.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from flexlearn.lie import so3_exp

__all__ = ["fix_confidence"]


def fix_confidence(
    physics: Any,
    delta_b: Tensor,
    pred: Tensor,
    sigma0: float = math.radians(0.4),
    field_gain: float = 0.5,
    reject: float = math.radians(3.0),
    cap: float = math.radians(29.5),
    cap_margin: float = math.radians(5.0),
) -> dict[str, Tensor]:
    """Per-fix {sigma_m (N,) [rad], residual (N,) [rad], bend (N,) [rad], flagged (N,) bool}.

    Args:
        physics: an identified `CoilDirectionModel`.
        delta_b: calibrated fields (N, 3).
        pred: the direction model's parent axes (N, 3) (accelerometer frame).
        sigma0: the model's error floor σ₀ [rad].
        field_gain: k, the field's turn per rad of bend [rad/rad].
        reject: flag when r / k exceeds this [rad].
        cap: the trained bend cap [rad].
        cap_margin: flag when the bend exceeds ``cap + cap_margin`` [rad].

    Returns:
        ``{"sigma_m", "residual", "bend", "flagged"}``, each (N,): σ_m = sqrt(σ₀² + (r / k)²).
    """
    x = delta_b.to(torch.float64)
    x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    p = pred.to(torch.float64)
    with torch.no_grad():
        v = p @ so3_exp(physics.theta[3:6]).T
        xh = physics.field_direction(v)
    r = torch.atan2(torch.linalg.vector_norm(torch.linalg.cross(x, xh, dim=-1), dim=-1), (x * xh).sum(-1))
    bend = torch.acos((p[:, 2] / torch.linalg.vector_norm(p, dim=-1)).clamp(-1.0, 1.0))
    sigma = torch.sqrt(sigma0**2 + (r / field_gain) ** 2)
    flagged = (r / field_gain > reject) | (bend > cap + cap_margin)
    return {"sigma_m": sigma, "residual": r, "bend": bend, "flagged": flagged}
