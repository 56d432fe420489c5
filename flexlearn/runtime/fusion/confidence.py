# mypy: disable-error-code="empty-body"
# (a TorchScript interface method is declared with a bare `pass` body, and TorchScript reads `# type:` comments)
"""Per-fix magnetic noise σ_m and rejection for the fused estimator (`flexlearn.runtime.fusion.estimator`), torch only.

The fused estimator's magnetic update weighs a fix by the direction noise σ_m (seed 002, III-B4: K = P(P + σ_m²)⁻¹).
A confidence source maps one fix to (σ_m² [rad²], reject): it sees the calibrated field x = A W ΔB (3,) [T], the
direction model's answer f (3,) (parent axis in the child sensor frame, +ẑ when straight) and the joint's bend
predicted by the quaternions, β_q [rad] (angle of the corrected relative child direction from straight; < 0 when
unknown, as in ``mode="mag_only"``). Sources are submodules behind the `FixConfidence` interface, so the scripted
estimator (and the bundle on the Pi) calls whichever one it was built with:

* `ConstantConfidence` — σ_m² fixed, nothing rejected: the estimator as it always was (bitwise).
* `BendConfidence` — the direction model is an MLP trained to a bend cap β_c (seed 002: 25–30°; the simulated
  rig's 29.5°), and past the cap its error grows (seed 002: 31.7° p95 on the robot where joints bent past it).
  With β = max(β_f, β_q), β_f = ∠(f, ẑ) (an MLP that saturates at the cap underestimates its own bend, which the
  quaternions do not):

      σ_m² = σ₀² + (g · max(β − β_c, 0))²,   reject if β > β_c + m  or  |x| ∉ [x_min, x_max] (bounds 0: off)

  with σ₀ the estimator's constant σ_m, g the error growth per radian of bend past the cap and m the margin past
  which a fix is dropped. The field-magnitude bounds catch fields the model never saw (a foreign magnet, a coil
  fault, a receiver pushed off its joint); set them from the training data's |x| range.

`flexlearn.models.fix_confidence` also scores a fix by its residual against the module's identified coil model
(Biot–Savart); that needs the coil model in the bundle and is offline only for now.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Tuple, cast

import torch
from torch import Tensor, nn

from flexlearn.runtime.fusion.options import EstimatorSettingsError

CONFIDENCE_KINDS = ("constant", "bend")
_BEND_KEYS = {
    "kind": None,
    "cap": "a finite angle > 0 [rad]",
    "growth": "a finite value >= 0 [rad per rad]",
    "margin": "a finite angle > 0 [rad] or null (no rejection by bend)",
    "field_min": "a finite field >= 0 [T] (0: off)",
    "field_max": "a finite field >= 0 [T] (0: off)",
}


@torch.jit.interface
class FixConfidence(nn.Module):  # noqa: D101 (a TorchScript interface: methods only; see the module docstring)
    def forward(self, field: Tensor, direction: Tensor, bend_quat: float) -> Tuple[float, bool]:
        """(σ_m² [rad²], reject) of one fix: calibrated field (3,) [T], model output (3,), quaternion bend [rad].

        Args:
            field: calibrated field of the fix (3,) [T].
            direction: the direction model's output (3,).
            bend_quat: the joint's bend from the quaternions [rad].

        Returns:
            ``(σ_m² [rad²], reject)``.
        """
        pass


class ConstantConfidence(nn.Module):
    """σ_m² = ``sigma_m2`` for every fix, none rejected (the estimator's default)."""

    def __init__(self, sigma_m2: float) -> None:
        super().__init__()
        self.sigma_m2 = float(sigma_m2)

    def forward(self, field: Tensor, direction: Tensor, bend_quat: float) -> Tuple[float, bool]:
        """σ_m² = ``sigma_m2``, never rejected.

        Args:
            field: calibrated field of the fix (3,) [T].
            direction: the direction model's output (3,).
            bend_quat: the joint's bend from the quaternions [rad].

        Returns:
            ``(σ_m² [rad²], reject)``.
        """
        return self.sigma_m2, False


class BendConfidence(nn.Module):
    """σ_m grows with the bend past the trained cap; fixes far past it or with an unseen |field| are rejected.

    Args: sigma_m2: σ₀² [rad²]; cap: β_c [rad]; growth: g [rad/rad]; margin: m [rad] (None: no bend rejection);
    field_min, field_max: |x| bounds [T] (0: off). See the module docstring for the equation.
    """

    def __init__(
        self,
        sigma_m2: float,
        cap: float = math.radians(29.5),
        growth: float = 0.2,
        margin: Optional[float] = None,
        field_min: float = 0.0,
        field_max: float = 0.0,
    ) -> None:
        super().__init__()
        self.sigma_m2 = float(sigma_m2)
        self.cap, self.growth = float(cap), float(growth)
        self.reject_above = math.inf if margin is None else float(cap) + float(margin)
        self.field_min, self.field_max = float(field_min), float(field_max)

    def forward(self, field: Tensor, direction: Tensor, bend_quat: float) -> Tuple[float, bool]:
        """σ_m² grown past the cap by the larger of the output's and the quaternions' bend; reject by bend and |field|.

        Args:
            field: calibrated field of the fix (3,) [T].
            direction: the direction model's output (3,).
            bend_quat: the joint's bend from the quaternions [rad].

        Returns:
            ``(σ_m² [rad²], reject)``.
        """
        nf = float(torch.linalg.vector_norm(direction))
        bend = math.acos(max(-1.0, min(1.0, float(direction[2]) / max(nf, 1e-12))))
        bend = max(bend, bend_quat)
        over = max(bend - self.cap, 0.0)
        s2 = self.sigma_m2 + (self.growth * over) ** 2
        mag = float(torch.linalg.vector_norm(field))
        reject = (
            bend > self.reject_above
            or (self.field_min > 0.0 and mag < self.field_min)
            or (self.field_max > 0.0 and mag > self.field_max)
        )
        return s2, reject


def quat_bend(r_par: Tensor, u_child: Tensor, e: Tensor) -> float:
    """β_q = ∠(R_parᵀ û_child, e) [rad]: the joint's bend from the (corrected) parent rotation and child direction.

    Args:
        r_par: corrected parent rotation (3, 3).
        u_child: child direction û_child (3,).
        e: the straight direction (3,).

    Returns:
        β_q [rad].
    """
    c = float(torch.dot(torch.matmul(r_par.transpose(0, 1), u_child), e))
    return math.acos(max(-1.0, min(1.0, c)))


def confidence_error(settings: Any) -> Optional[str]:
    """Why ``settings`` (None or a mapping ``{"kind": "bend", ...}``) is not a valid confidence option, or None.

    Args:
        settings: the confidence option: None, or a mapping with ``kind`` ("bend" or "constant") and, for
            "bend", the `BendConfidence` arguments.

    Returns:
        The reason as a short message, or None when ``settings`` is valid.
    """
    if settings is None:
        return None
    if not isinstance(settings, Mapping):
        return "must be null or a mapping with 'kind' in ['bend', 'constant']"
    kind = settings.get("kind")
    if kind not in CONFIDENCE_KINDS:
        return f"'kind' = {kind!r}: expected one of {list(CONFIDENCE_KINDS)}"
    allowed = _BEND_KEYS if kind == "bend" else {"kind": None}
    bad = sorted(set(settings) - set(allowed))
    if bad:
        return f"unknown key(s) {bad} for kind {kind!r}; allowed: {sorted(allowed)}"
    for key, value in settings.items():
        if key == "kind" or (key == "margin" and value is None):
            continue
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and (value > 0 if key in ("cap", "margin") else value >= 0)
        )
        if not ok:
            return f"'{key}' = {value!r}: must be {allowed[key]}"
    return None


def build_confidence(settings: Optional[Mapping[str, Any]], sigma_m2: float) -> FixConfidence:
    """The confidence submodule for ``settings``.

    Typed as the interface it implements (TorchScript checks the methods when the estimator is scripted).

    Args:
        settings: the confidence settings (``kind`` and the `BendConfidence` arguments); None: `ConstantConfidence`.
        sigma_m2: σ₀², the per-fix variance [rad²].

    Returns:
        The submodule.

    Raises:
        EstimatorSettingsError: (a ValueError) naming a bad key.
    """
    err = confidence_error(settings)
    if err is not None:
        raise EstimatorSettingsError(f"confidence: {err}")
    if settings is None or settings["kind"] == "constant":
        return cast(FixConfidence, ConstantConfidence(sigma_m2))
    return cast(FixConfidence, BendConfidence(sigma_m2, **{k: v for k, v in settings.items() if k != "kind"}))
