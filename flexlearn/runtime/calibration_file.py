"""The calibration file `flexlearn-calibrate` writes and the exporter and the Pi runner read (stdlib only).

JSON object, schema ``flexlearn-calibration/1``:

    {"schema": "flexlearn-calibration/1",
     "model_fingerprint": "<sha256 of the direction model's weights>",   # the model it was fitted for
     "n_modules": N,
     "W": (N, 3, 3), "offset": (N, 3) [T], "A": (N, 3, 3),               # receiver i: f(A_i W_i ΔB_i)
     "modules": [{"source": ..., "tumble": {...}, "fit": {...}}, ...]}   # what each module's fit saw

W is the tumble's ellipsoid correction (det 1), offset its hard iron, A the alignment fitted on stationary poses
(seed 002, III-B3; `flexlearn.sensing.module_cal`). `check_calibration` refuses a file of another schema, of
another model or with another module count, naming the file, the field and both values. Copy this file beside
``scripts/pi_runner.py`` on the Pi (``--calibration``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

CALIBRATION_SCHEMA = "flexlearn-calibration/1"
_SHAPES = {"W": (3, 3), "offset": (3,), "A": (3, 3)}


try:  # inside the package: the error joins the flexlearn family (applications print it as one line)
    from flexlearn.errors import ConfigError as _FamilyBase
except ImportError:  # loaded by file path next to scripts/pi_runner.py, without flexlearn (torch only)

    class _FamilyBase(Exception):  # type: ignore[no-redef]
        """Stand-in root of the error family where flexlearn is not installed."""


class CalibrationFileError(_FamilyBase, ValueError):  # type: ignore[valid-type,misc]
    """A calibration file that does not fit the model or the robot it is given to."""


def _shape(value: Any) -> tuple[int, ...]:
    if isinstance(value, list):
        inner = {_shape(v) for v in value}
        return (len(value), *next(iter(inner))) if len(inner) == 1 else (len(value), -1)
    return () if isinstance(value, (int, float)) and not isinstance(value, bool) else (-1,)


def _finite(value: Any) -> bool:
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return math.isfinite(value)


def read_calibration_file(path: str | Path) -> dict[str, Any]:
    """The JSON object of a calibration file; `CalibrationFileError` names the file if unreadable."""
    try:
        cal = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CalibrationFileError(f"calibration file '{path}': not found") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CalibrationFileError(f"calibration file '{path}': not readable JSON ({exc})") from exc
    if not isinstance(cal, dict):
        raise CalibrationFileError(
            f"calibration file '{path}': top level is a {type(cal).__name__}, expected an object"
        )
    return cal


def check_calibration(
    cal: dict[str, Any], n_modules: int, model_fingerprint: Optional[str], where: str = "calibration file"
) -> dict[str, list]:
    """W, offset, A of a ``flexlearn-calibration/1`` object after checking schema, model and module count.

    ``model_fingerprint`` None skips the model check (a bundle exported before fingerprints were recorded).
    """
    schema = cal.get("schema")
    if schema != CALIBRATION_SCHEMA:
        raise CalibrationFileError(f"{where}: field 'schema' = {schema!r}, expected {CALIBRATION_SCHEMA!r}")
    found = cal.get("model_fingerprint")
    if model_fingerprint is not None and found != model_fingerprint:
        raise CalibrationFileError(
            f"{where}: field 'model_fingerprint' = {str(found)[:16]!r}... was fitted for "
            f"another direction model than this one ({model_fingerprint[:16]!r}...); "
            "run flexlearn-calibrate with this model's checkpoint"
        )
    if cal.get("n_modules") != n_modules:
        raise CalibrationFileError(
            f"{where}: field 'n_modules' = {cal.get('n_modules')!r}, but the robot has {n_modules} receivers"
        )
    out: dict[str, list] = {}
    for key, shape in _SHAPES.items():
        value = cal.get(key)
        if not isinstance(value, list) or _shape(value) != (n_modules, *shape):  # (a list: any expected shape)
            raise CalibrationFileError(
                f"{where}: field '{key}' has shape {_shape(value)}, expected {(n_modules, *shape)}"
            )
        if not _finite(value):
            raise CalibrationFileError(f"{where}: field '{key}' holds non-finite values")
        out[key] = value
    return out


def aw_matrices(checked: dict[str, list]) -> list:
    """A_i W_i (N, 3, 3) as nested lists, from the output of `check_calibration`."""
    return [
        [[sum(a[r][k] * w[k][c] for k in range(3)) for c in range(3)] for r in range(3)]
        for a, w in zip(checked["A"], checked["W"])
    ]


def bundle_aw(path: str | Path, n_modules: int, model_fingerprint: Optional[str]) -> list:
    """A_i W_i (N, 3, 3) of a calibration file after `check_calibration` (what ``pi_runner --calibration`` loads)."""
    return aw_matrices(
        check_calibration(read_calibration_file(path), n_modules, model_fingerprint, f"calibration file '{path}'")
    )
