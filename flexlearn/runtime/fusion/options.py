"""Modes, bias models and noise defaults of the fused estimator (`flexlearn.runtime.fusion.estimator.FusedEstimator`), and
the chain of the MAG_ONLY mode.

Defaults: σ_m = 0.07 rad ("rotation", "heading_walk"), p0 = 3e-4 rad², γ = 0.02 and the "rotation" σ_b = 3e-3 rad/√s
were tuned on the simulator (`flexlearn.sim.shape_scenarios`); the heading models take κ from the seed's drift
figure (0.0065 per rad of travel: with a small σ_b a still robot adds almost no process noise, so the estimate
settles instead of following the magnetic noise; 0 for "rotation", as it was tuned), σ_δ from a 1° mounting
tolerance, σ_b = 3e-4 (not swept) and σ_m = 0.03 rad for "heading" (the white part: IMU noise, direction-model and
timing errors; chosen between 0.03 and 0.07 on trials 0–4).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from flexlearn.lie import rotation_between, so3_exp

FUSION, QUAT_ONLY, MAG_ONLY = 0, 1, 2
HEADING_DRIFT_PER_TRAVEL = 0.0065      # seed 002, III-B4: heading drift ≈ 0.65 % of angular travel
MODES = {"fusion": FUSION, "quat_only": QUAT_ONLY, "mag_only": MAG_ONLY}
BIAS_MODELS = ("heading", "heading_walk", "rotation")


def resolve_options(n_segments: int, mode: str, reference: str, innovation: str, bias_model: str,
                    sigma_b: Optional[float], sigma_m: Optional[float], travel_noise: Optional[float]
                    ) -> Tuple[float, float, float]:
    """Check the string options (ValueError names the key) and fill the noise defaults: (σ_b, σ_m, κ)."""
    if n_segments < 1:
        raise ValueError(f"n_segments = {n_segments}: expected ≥ 1")
    for key, value, allowed in (("innovation", innovation, ("seed", "observable")), ("bias_model", bias_model,
                                BIAS_MODELS), ("reference", reference, ("body", "world")), ("mode", mode, MODES)):
        if value not in allowed:
            raise ValueError(f"{key} = {value!r}: expected one of {sorted(allowed)}")
    heading = bias_model != "rotation"
    sigma_b = (3e-4 if heading else 3e-3) if sigma_b is None else sigma_b
    sigma_m = (0.03 if bias_model == "heading" else 0.07) if sigma_m is None else sigma_m
    travel_noise = (HEADING_DRIFT_PER_TRAVEL if heading else 0.0) if travel_noise is None else travel_noise
    return float(sigma_b), float(sigma_m), float(travel_noise)


def mag_chain(e: Tensor, d_rel: Tensor) -> Tensor:
    """MAG_ONLY directions (N + 1, 3), rows [e, û_1..û_N]: û_i = R_i e, R_i = R_{i−1} exp(rotation_between(e, d_i)),
    R_0 = I, from the latest relative directions d (N, 3) (no-twist joints, quaternions unused)."""
    n = d_rel.shape[0]
    rel = so3_exp(rotation_between(e.expand(n, 3), d_rel))
    r = torch.eye(3, dtype=torch.float64)
    out: List[Tensor] = [e]
    for i in range(n):
        r = torch.matmul(r, rel[i])
        out.append(torch.matmul(r, e))
    return torch.stack(out)
