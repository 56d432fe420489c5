"""The calibration file `flexlearn-calibrate` writes and the exporter and the Pi runner read (stdlib only).

JSON object, schema ``flexlearn-calibration/1``:

    {"schema": "flexlearn-calibration/1",
     "model_fingerprint": "<sha256 of the direction model's weights>",   # the model it was fitted for
     "n_modules": N,
     "W": (N, 3, 3), "offset": (N, 3) [T], "A": (N, 3, 3),               # receiver i: f(A_i W_i ΔB_i)
     "modules": [{"source": ..., "tumble": {...}, "fit": {...}}, ...]}   # what each module's fit saw

W is the tumble's ellipsoid correction (det 1), offset its hard iron, A the alignment fitted on stationary poses
(seed 002, III-B3; `flexlearn.sensing.module_cal`). `check_calibration` refuses a file of another schema, of
another model or with another module count, naming the file, the field and both values, and `check_physics` one
whose matrices are not what the fits produce: W symmetric positive definite with det W = 1 (within `DET_TOL`) and
eigenvalues in [`W_EIG_MIN`, `W_EIG_MAX`] (a mirror, det −1, or 1e200·I is refused), A a proper rotation
(AᵀA = I within `ROT_TOL`, det A = +1) or, where the file declares ``"alignment": "stretch"``, a proper linear map
whose singular values lie in [`STRETCH_MIN`, `STRETCH_MAX`], and |offset| ≤ `OFFSET_MAX` per axis. The Pi kit
carries this module (``pikit``); standard library only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

from .family import ConfigError as _FamilyBase  # flexlearn's error family inside flexlearn

CALIBRATION_SCHEMA = "flexlearn-calibration/1"
_SHAPES = {"W": (3, 3), "offset": (3,), "A": (3, 3)}
SYM_TOL = 1e-6  # |W − Wᵀ| / max|W|
DET_TOL = 1e-3  # |det W − 1|
W_EIG_MIN, W_EIG_MAX = 0.1, 10.0  # eigenvalues of W (a soft-iron distortion of more than 10× is not a sensor)
ROT_TOL = 1e-6  # max |AᵀA − I| of a rotation
STRETCH_MIN, STRETCH_MAX = 0.5, 2.0  # singular values of a declared stretch A
OFFSET_MAX = 0.01  # |hard-iron offset| per axis [T] (10 mT: beyond any receiver's range)


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
    """The JSON object of a calibration file; `CalibrationFileError` names the file if unreadable.

    Args:
        path: the calibration file.

    Returns:
        Its top-level JSON object.

    Raises:
        CalibrationFileError: the file is missing, not readable JSON, or not a JSON object.
    """
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

    Args:
        cal: the parsed calibration object.
        n_modules: N receivers of the robot.
        model_fingerprint: the direction model's fingerprint (None: not checked).
        where: the file (or config path) errors name.

    Returns:
        ``{"W": (N, 3, 3), "offset": (N, 3) [T], "A": (N, 3, 3)}`` as nested lists.

    Raises:
        CalibrationFileError: another schema, model or module count, a wrong shape, non-finite values, or
            matrices that fail `check_physics`.
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
    check_physics(out, where, alignment_is_stretch(cal, where))
    return out


def _det3(m: list) -> float:
    """Det of a 3×3 nested list (cofactor expansion along the first row)."""
    return (
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    )


def _positive_definite(m: list, shift: float = 0.0) -> bool:
    """Whether the symmetric 3×3 ``m`` − ``shift`` I is positive definite (Cholesky: every pivot > 0)."""
    a = [[m[r][c] - (shift if r == c else 0.0) for c in range(3)] for r in range(3)]
    low = [[0.0] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(i + 1):
            s = a[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            if i == j:
                if not s > 0.0:
                    return False
                low[i][i] = math.sqrt(s)
            else:
                low[i][j] = s / low[j][j]
    return True


def _gram(a: list) -> list:
    """AᵀA of a 3×3 nested list."""
    return [[sum(a[k][r] * a[k][c] for k in range(3)) for c in range(3)] for r in range(3)]


def _w_problem(w: list) -> Optional[str]:
    scale = max(abs(x) for row in w for x in row)
    if scale > 1e6:
        return f"has entries up to {scale:.3g}; a soft-iron correction has det 1 and entries of order 1"
    if any(abs(w[r][c] - w[c][r]) > SYM_TOL * max(scale, 1e-300) for r in range(3) for c in range(r)):
        return "is not symmetric"
    det = _det3(w)
    if not _positive_definite(w):
        return f"is not positive definite (det {det:.6g}; a mirror or a degenerate fit)"
    if abs(det - 1.0) > DET_TOL:
        return f"has det {det:.6g}, expected 1 (within {DET_TOL:g}): the correction must keep the field's magnitude"
    if not (_positive_definite(w, W_EIG_MIN) and _positive_definite([[-x for x in row] for row in w], -W_EIG_MAX)):
        return f"has eigenvalues outside [{W_EIG_MIN:g}, {W_EIG_MAX:g}]"
    return None


def _a_problem(a: list, stretch: bool) -> Optional[str]:
    if max(abs(x) for row in a for x in row) > 1e6:
        return "has entries beyond 1e6"
    det = _det3(a)
    if not det > 0.0:
        return f"has det {det:.6g}: not a proper {'map' if stretch else 'rotation'} (a mirror or a degenerate fit)"
    g = _gram(a)
    if stretch:
        lo, hi = STRETCH_MIN**2, STRETCH_MAX**2
        if not (_positive_definite(g, lo) and _positive_definite([[-x for x in row] for row in g], -hi)):
            return f"has singular values outside the declared stretch [{STRETCH_MIN:g}, {STRETCH_MAX:g}]"
        return None
    err = max(abs(g[r][c] - (1.0 if r == c else 0.0)) for r in range(3) for c in range(3))
    if err > ROT_TOL:
        return (
            f'is not a rotation (max |AᵀA − I| = {err:.3g} > {ROT_TOL:g}); declare "alignment": "stretch" '
            "for a fitted linear map"
        )
    return None


def check_physics(values: dict, where: str = "calibration file", stretch: bool = False) -> None:
    """Refuse matrices that no calibration fit produces (module docstring); fields absent from ``values`` pass.

    Args:
        values: ``W`` (N, 3, 3), ``A`` (N, 3, 3), ``offset`` (N, 3) [T] as nested lists of finite numbers.
        where: the file (or config path) errors name.
        stretch: A may be a proper linear map (``"alignment": "stretch"``), not only a rotation.

    Raises:
        CalibrationFileError: naming the file, the field, the receiver and the value's problem.
    """
    for i, w in enumerate(values.get("W") or []):
        problem = _w_problem(w)
        if problem:
            raise CalibrationFileError(f"{where}: field 'W' of receiver {i + 1} = {w} {problem}")
    for i, a in enumerate(values.get("A") or []):
        problem = _a_problem(a, stretch)
        if problem:
            raise CalibrationFileError(f"{where}: field 'A' of receiver {i + 1} = {a} {problem}")
    for i, o in enumerate(values.get("offset") or []):
        if max(abs(x) for x in o) > OFFSET_MAX:
            raise CalibrationFileError(
                f"{where}: field 'offset' of receiver {i + 1} = {o} exceeds {OFFSET_MAX:g} T per axis"
            )


def alignment_is_stretch(cal: dict, where: str = "calibration file") -> bool:
    """Whether ``cal`` declares ``"alignment": "stretch"`` (absent or ``"rotation"``: A must be a rotation).

    Args:
        cal: the calibration object.
        where: the file (or config path) errors name.

    Returns:
        True for ``"stretch"``, False for ``"rotation"`` or no field.

    Raises:
        CalibrationFileError: any other ``alignment`` value.
    """
    kind = cal.get("alignment", "rotation")
    if kind not in ("rotation", "stretch"):
        raise CalibrationFileError(f"{where}: field 'alignment' = {kind!r}, expected 'rotation' or 'stretch'")
    return kind == "stretch"


def aw_matrices(checked: dict[str, list]) -> list:
    """A_i W_i (N, 3, 3) as nested lists, from the output of `check_calibration`.

    Args:
        checked: the output of `check_calibration` (``A`` and ``W``, each (N, 3, 3)).

    Returns:
        The products A_i W_i (N, 3, 3).
    """
    return [
        [[sum(a[r][k] * w[k][c] for k in range(3)) for c in range(3)] for r in range(3)]
        for a, w in zip(checked["A"], checked["W"])
    ]


def bundle_aw(path: str | Path, n_modules: int, model_fingerprint: Optional[str]) -> list:
    """A_i W_i (N, 3, 3) of a calibration file after `check_calibration` (what ``pi_runner --calibration`` loads).

    Args:
        path: the calibration file.
        n_modules: N receivers of the robot.
        model_fingerprint: the direction model's fingerprint (None: not checked).

    Returns:
        The products A_i W_i (N, 3, 3) as nested lists.

    Raises:
        CalibrationFileError: an unreadable or non-matching file (`read_calibration_file`, `check_calibration`).
    """
    return aw_matrices(
        check_calibration(read_calibration_file(path), n_modules, model_fingerprint, f"calibration file '{path}'")
    )
