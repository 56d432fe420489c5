"""Settings, modes, bias models and noise defaults of the fused estimator
(`flexlearn.runtime.fusion.estimator.FusedEstimator`), and the chain of the MAG_ONLY mode.

Defaults: σ_m = 0.07 rad ("rotation", "heading_walk"), p0 = 3e-4 rad², γ = 0.02 and the "rotation" σ_b = 3e-3 rad/√s
were tuned on the simulator (`flexlearn.sim.shape_scenarios`); the heading models take κ from the seed's drift
figure (0.0065 per rad of travel: with a small σ_b a still robot adds almost no process noise, so the estimate
settles instead of following the magnetic noise; 0 for "rotation", as it was tuned), σ_δ from a 1° mounting
tolerance, σ_b = 3e-4 (not swept) and σ_m = 0.03 rad for "heading" (the white part: IMU noise, direction-model and
timing errors; chosen between 0.03 and 0.07 on trials 0–4).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, List, Mapping, NamedTuple, Optional

import torch
from torch import Tensor

from flexlearn.errors import ConfigError
from flexlearn.lie import rotation_between, so3_exp

__all__ = [
    "FUSION",
    "QUAT_ONLY",
    "MAG_ONLY",
    "MODES",
    "BIAS_MODELS",
    "HEADING_DRIFT_PER_TRAVEL",
    "EstimatorSettings",
    "EstimatorSettingsError",
    "NoiseLevels",
    "resolve_noise",
    "mag_chain",
]

FUSION, QUAT_ONLY, MAG_ONLY = 0, 1, 2
HEADING_DRIFT_PER_TRAVEL = 0.0065  # seed 002, III-B4: heading drift ≈ 0.65 % of angular travel
MODES = {"fusion": FUSION, "quat_only": QUAT_ONLY, "mag_only": MAG_ONLY}
BIAS_MODELS = ("heading", "heading_walk", "rotation")


class EstimatorSettingsError(ConfigError, ValueError):
    """A setting of the fused estimator or of one of its parts is out of range (a ValueError for API callers)."""


@dataclasses.dataclass(frozen=True)
class EstimatorSettings:
    """Settings of the fused estimator (`flexlearn.runtime.fusion.estimator.FusedEstimator`); units s, T, m, rad.

    Args:
        n_segments: N joints (N + 1 modules including the base).
        length: pivot spacing L [m] (seed: 0.029).
        sigma_b: bias random walk σ_b [rad/√s] (None: 3e-4 for the heading models, 3e-3 for "rotation").
        sigma_m: magnetic direction noise σ_m [rad] (None: 0.03 for "heading", 0.07 otherwise).
        p0: initial bias variance [rad²] (small with reference="body": the initial heading cancels exactly).
        twist_damping: γ ∈ [0, 1], extra fraction of b's component along u^q removed per update (keep small).
        settle: coil-on samples within ``settle`` [s] of switch-on are discarded.
        min_fresh: fresh samples a pulse needs.
        full_scale: |reading| [T] at or above which a conversion is saturated and dropped.
        stale_after: a module with no valid quaternion for this long [s] is flagged STALE_QUAT.
        fix_timeout: a segment without a magnetic fix for this long [s] is flagged NO_FIX.
        mode: "fusion", "quat_only" or "mag_only".
        reference: "body" (default): R_i = R(q_i⁰)ᵀ R(q_i); "world": R_i = R(q_i) R(q_i⁰)ᵀ, the seed's literal form.
        innovation: "seed" (default, y = Log(u^q → u^m) − b) or "observable" (y = Log(û → u^m)).
        travel_noise: κ, extra process noise P += (κ Δφ)² for the module's angular travel Δφ [rad] since its last
            fix (drift ∝ angular travel, seed III-B4; travel summed between coil activations; None: 0.0065 for the
            heading models, 0 for "rotation"). For "heading", κ is the prior std of the drift rate ρ_k.
        bias_model: "heading" (default: module headings and drift rates, `HeadingDriftFilter`), "heading_walk" (one
            random-walk heading correction per joint) or "rotation" (the seed's 3-D rotation bias b_i with twist
            damping); see `flexlearn.runtime.fusion.estimator`. For "heading", σ_b is the heading random walk.
        gate: χ² gate of the "heading" model in standard deviations (0: none; a joint's second consecutive
            outlier is accepted).
        sigma_align: σ_δ, prior std per axis of each receiver's residual misalignment [rad] ("heading" only).
        clock_jump: the outlier-time rule of `flexlearn.runtime.pikit.time_base` [s] (outliers are dropped, TIME_ORDER).
        clock_confirm: agreeing outliers that establish a new time base (a resync keeps the state and flags
            CLOCK_RESYNC).
        confidence: per-fix σ_m and rejection (`flexlearn.runtime.fusion.confidence`; e.g. ``{"kind": "bend"}``);
            None: the constant σ_m. Rejected fixes are flagged MAG_REJECTED | LOW_CONFIDENCE.
    """

    n_segments: int = 9
    length: float = 0.029
    sigma_b: Optional[float] = None
    sigma_m: Optional[float] = None
    p0: float = 3e-4
    twist_damping: float = 0.02
    settle: float = 0.010
    min_fresh: int = 2
    full_scale: float = 1.3e-3
    stale_after: float = 0.5
    fix_timeout: float = 10.0
    mode: str = "fusion"
    reference: str = "body"
    innovation: str = "seed"
    travel_noise: Optional[float] = None
    bias_model: str = "heading"
    gate: float = 3.0
    sigma_align: float = math.sqrt(2.0) * math.radians(1.0)
    clock_jump: float = 2.0
    clock_confirm: int = 3
    confidence: Optional[Mapping[str, Any]] = None


class NoiseLevels(NamedTuple):
    """The noise settings with their defaults filled in (`resolve_noise`)."""

    sigma_b: float  # bias random walk σ_b [rad/√s]
    sigma_m: float  # magnetic direction noise σ_m [rad]
    travel_noise: float  # κ [per rad of travel]


def resolve_noise(settings: EstimatorSettings) -> NoiseLevels:
    """Check the string options and fill the noise defaults.

    Args:
        settings: the estimator's settings.

    Returns:
        σ_b, σ_m and κ, with the defaults of the module docstring where ``settings`` leaves them None.

    Raises:
        EstimatorSettingsError: n_segments < 1, or a string option not among its choices (the message names it).
    """
    if settings.n_segments < 1:
        raise EstimatorSettingsError(f"n_segments = {settings.n_segments}: expected ≥ 1")
    for key, allowed in (
        ("innovation", ("seed", "observable")),
        ("bias_model", BIAS_MODELS),
        ("reference", ("body", "world")),
        ("mode", MODES),
    ):
        value = getattr(settings, key)
        if value not in allowed:
            raise EstimatorSettingsError(f"{key} = {value!r}: expected one of {sorted(allowed)}")
    heading = settings.bias_model != "rotation"
    sigma_b = (3e-4 if heading else 3e-3) if settings.sigma_b is None else settings.sigma_b
    sigma_m = (0.03 if settings.bias_model == "heading" else 0.07) if settings.sigma_m is None else settings.sigma_m
    kappa = (HEADING_DRIFT_PER_TRAVEL if heading else 0.0) if settings.travel_noise is None else settings.travel_noise
    return NoiseLevels(float(sigma_b), float(sigma_m), float(kappa))


def mag_chain(e: Tensor, d_rel: Tensor) -> Tensor:
    """MAG_ONLY directions: û_i = R_i e, R_i = R_{i−1} exp(rotation_between(e, d_i)), R_0 = I (no-twist joints).

    Args:
        e: the straight direction e (3,).
        d_rel: the latest relative directions d (N, 3) (quaternions unused).

    Returns:
        (N + 1, 3), rows [e, û_1..û_N].
    """
    n = d_rel.shape[0]
    rel = so3_exp(rotation_between(e.expand(n, 3), d_rel))
    r = torch.eye(3, dtype=torch.float64)
    out: List[Tensor] = [e]
    for i in range(n):
        r = torch.matmul(r, rel[i])
        out.append(torch.matmul(r, e))
    return torch.stack(out)
