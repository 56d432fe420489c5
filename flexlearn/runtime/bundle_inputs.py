"""Checks of what a deploy bundle (`flexlearn.runtime.deploy`) is built from, at the edge: settings and calibration.

Settings overrides of `FusedEstimator` and `HeightPID` are checked key by key (`check_settings` with the rules
`ESTIMATOR_RULES`, `CONTROLLER_RULES`, `CLOCK_RULES`: key → (accepts(value), requirement with its unit)). The
calibration (`load_calibration`) is a dict or a JSON file with per-receiver W, A (N, 3, 3) and offset (N, 3) [T]:
finite, W SPD with det 1, A a rotation (or the declared stretch), bounded offsets; a ``flexlearn-calibration/1``
file must name the model it was fitted for by `model_fingerprint` (SHA-256 of its weights). Every failure is a
`BundleConfigError` naming the config key or file and field, and the value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import torch
from torch import Tensor, nn

from flexlearn.errors import ConfigError
from flexlearn.runtime.fusion.confidence import confidence_error
from flexlearn.runtime.pikit.calibration_file import (
    CalibrationFileError,
    alignment_is_stretch,
    check_calibration,
    check_physics,
)

__all__ = [
    "BundleConfigError",
    "CLOCK_RULES",
    "CONTROLLER_RULES",
    "ESTIMATOR_RULES",
    "check_settings",
    "is_number",
    "load_calibration",
    "model_fingerprint",
]


class BundleConfigError(ConfigError, ValueError):
    """A bundle option or the calibration is unknown, malformed or out of range (a ValueError for API callers)."""


def is_number(v: Any) -> bool:
    """A real number, not a bool.

    Args:
        v: the value.

    Returns:
        True for an int or float that is not a bool.
    """
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _rule(test: Callable[[float], bool], requirement: str, optional: bool = False) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: (optional and v is None) or (is_number(v) and math.isfinite(v) and test(v))), requirement


# the clock-restart rule shared by both modules (flexlearn.runtime.pikit.time_base)
CLOCK_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "clock_jump": _rule(lambda v: v > 0, "must be a finite time > 0 [s]"),
    "clock_confirm": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 2,
        "must be an integer >= 2 [frames]",
    ),
}
# HeightPID settings (flexlearn.runtime.pikit.height_control): key -> (accepts(value), requirement)
CONTROLLER_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "target": _rule(lambda v: True, "must be a finite tip height [m]"),
    "kp": _rule(lambda v: v >= 0, "must be a finite gain >= 0 [1/s]"),
    "ki": _rule(lambda v: v >= 0, "must be a finite gain >= 0 [1/s^2]"),
    "kd": _rule(lambda v: v >= 0, "must be a finite gain >= 0 [-]"),
    "tau_d": _rule(lambda v: v > 0, "must be a finite time constant > 0 [s]"),
    "i_band": _rule(lambda v: v >= 0, "must be a finite band >= 0 [m]"),
    "v_max": _rule(lambda v: v > 0, "must be a finite speed limit > 0 [m/s]"),
    "a_max": _rule(lambda v: v > 0, "must be a finite acceleration limit > 0 [m/s^2]"),
    "settle": _rule(lambda v: v > 0, "must be a finite settling time > 0 [s]"),
    "reject_above": _rule(lambda v: v >= 0, "must be a finite height >= 0 [m]"),
    **CLOCK_RULES,
}
# FusedEstimator settings with numeric ranges (flexlearn.runtime.fusion.estimator; the string options are checked there)
ESTIMATOR_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "sigma_b": _rule(lambda v: v > 0, "must be null or a finite noise > 0 [rad/sqrt(s)]", optional=True),
    "sigma_m": _rule(lambda v: v > 0, "must be null or a finite noise > 0 [rad]", optional=True),
    "p0": _rule(lambda v: v > 0, "must be a finite variance > 0 [rad^2]"),
    "twist_damping": _rule(lambda v: 0 <= v <= 1, "must be a fraction in [0, 1]"),
    "settle": _rule(lambda v: v >= 0, "must be a finite time >= 0 [s]"),
    "min_fresh": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "must be an integer >= 1"),
    "full_scale": _rule(lambda v: v > 0, "must be a finite field > 0 [T]"),
    "stale_after": _rule(lambda v: v > 0, "must be a finite time > 0 [s]"),
    "fix_timeout": _rule(lambda v: v > 0, "must be a finite time > 0 [s]"),
    "travel_noise": _rule(lambda v: v >= 0, "must be null or a finite value >= 0 [per rad]", optional=True),
    "gate": _rule(lambda v: v >= 0, "must be a finite gate >= 0 [standard deviations] (0: none)"),
    "sigma_align": _rule(lambda v: v > 0, "must be a finite angle > 0 [rad]"),
    "confidence": (
        lambda v: confidence_error(v) is None,
        "must be null (constant sigma_m) or a per-fix confidence "
        "source (flexlearn.runtime.fusion.confidence): {reason}",
    ),
    **CLOCK_RULES,
}


def check_settings(
    cls: type,
    kwargs: Optional[Mapping[str, Any]],
    where: str,
    reserved: tuple[str, ...],
    rules: Mapping[str, tuple[Callable[[Any], bool], str]],
) -> dict[str, Any]:
    """Reject unknown or reserved keys and out-of-range values; errors name ``where.key`` and the value.

    Args:
        cls: the settings dataclass whose fields are the allowed keys.
        kwargs: the given settings.
        where: the config path named in errors.
        reserved: fields set by the bundle itself (not accepted here).
        rules: key → (accepts(value), requirement).

    Returns:
        The settings as a dict.

    Raises:
        BundleConfigError: an unknown or reserved key, or a value out of range.
    """
    kwargs = dict(kwargs or {})
    allowed = {field.name for field in dataclasses.fields(cls)} - set(reserved)
    bad = sorted(set(kwargs) - allowed)
    if bad:
        raise BundleConfigError(f"config '{where}': unknown key(s) {bad}; allowed: {sorted(allowed)}")
    for key, value in kwargs.items():
        if key in rules and not rules[key][0](value):
            requirement = rules[key][1].replace("{reason}", str(confidence_error(value)))
            raise BundleConfigError(f"config '{where}.{key}' = {value!r}: {requirement}")
    return kwargs


def _calibration_source(calibration: Any, where: str) -> tuple[dict[str, Any], Callable[[str], str]]:
    """(calibration dict, field-name formatter); a file is read and parsed here, errors name it."""
    if not isinstance(calibration, (str, Path)):
        cal = calibration

        def name(field: str) -> str:
            return f"config '{where}.calibration.{field}'"
    else:
        src = Path(calibration)

        def name(field: str) -> str:
            return f"calibration file '{src}', field '{field}'"

        try:
            cal = json.loads(src.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise BundleConfigError(f"calibration file '{src}': not found") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise BundleConfigError(f"calibration file '{src}': unreadable ({exc})") from exc
        except ValueError as exc:
            raise BundleConfigError(f"calibration file '{src}': not valid JSON ({exc})") from exc
        if not isinstance(cal, dict):
            raise BundleConfigError(
                f"calibration file '{src}': top level is a {type(cal).__name__}, expected a "
                f"JSON object with 'W' (N, 3, 3), optional 'A' (N, 3, 3) and 'offset' (N, 3)"
            )
    if not isinstance(cal, Mapping):
        raise BundleConfigError(f"config '{where}.calibration' = {cal!r}: expected a mapping or a JSON file path")
    return dict(cal), name


def model_fingerprint(model: nn.Module) -> str:
    """SHA-256 (hex) of a model's weights and buffers (names, dtypes, shapes, bytes), the identity a calibration
    file records (`flexlearn.runtime.pikit.calibration_file`).

    Args:
        model: the model whose ``state_dict`` is hashed.

    Returns:
        The hex digest.
    """
    h = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        t = value.detach().cpu().contiguous()
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
    return h.hexdigest()


def load_calibration(
    calibration: Optional[Mapping[str, Any] | str | Path],
    n_segments: int,
    where: str = "bundle",
    fingerprint: Optional[str] = None,
) -> tuple[Optional[Tensor], Optional[Tensor], dict[str, Any]]:
    """(W, A, the rest) of a calibration dict or JSON file: W, A (N, 3, 3) and offset (N, 3), finite [-, -, T].

    ``"identity"`` (or None) is no calibration. An object with a ``schema`` field must be a
    ``flexlearn-calibration/1`` file (`flexlearn-calibrate`) for the model of ``fingerprint`` and ``n_segments``
    receivers; one without is a hand-written W/A/offset set (no model check).

    Args:
        calibration: a mapping, a JSON file path, ``"identity"`` or None.
        n_segments: N receivers (the shapes expected).
        where: the config path errors name (``<where>.calibration.<field>``).
        fingerprint: `model_fingerprint` of the model a calibration file must be for (None: not checked).

    Returns:
        ``(W, A, rest)``: W, A (N, 3, 3) float64 (None: absent), the other fields as given (``offset``, ...).

    Raises:
        BundleConfigError: an unreadable file, a malformed field, or values that fail the physics checks.
    """
    if calibration is None or (isinstance(calibration, str) and calibration == "identity"):
        return None, None, {"source": "identity"}
    cal, name = _calibration_source(calibration, where)
    if "schema" in cal:
        try:
            check_calibration(cal, n_segments, fingerprint, name("schema").rsplit(", field", 1)[0])
        except CalibrationFileError as exc:
            raise BundleConfigError(str(exc)) from exc
        cal = {k: v for k, v in cal.items() if k not in ("schema",)}
    arrays: dict[str, Tensor] = {}
    for field, shape in (("W", (n_segments, 3, 3)), ("A", (n_segments, 3, 3)), ("offset", (n_segments, 3))):
        if field not in cal:
            continue
        try:
            arrays[field] = torch.tensor(cal[field], dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise BundleConfigError(f"{name(field)}: not a numeric array ({exc})") from exc
        if tuple(arrays[field].shape) != shape:
            raise BundleConfigError(f"{name(field)}: shape {tuple(arrays[field].shape)}, expected {shape}")
        if not bool(torch.isfinite(arrays[field]).all()):
            raise BundleConfigError(f"{name(field)}: values must be finite")
    where_file = name("W").rsplit(", field", 1)[0].replace(".W'", "'")
    try:  # W SPD with det 1, A a rotation (or the declared stretch), bounded offsets
        check_physics({k: v.tolist() for k, v in arrays.items()}, where_file, alignment_is_stretch(cal, where_file))
    except CalibrationFileError as exc:
        raise BundleConfigError(str(exc)) from exc
    return arrays.get("W"), arrays.get("A"), {k: v for k, v in cal.items() if k not in ("W", "A")}
