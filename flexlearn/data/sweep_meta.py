"""The fields of a raw sweep's ``meta.json`` that processing reads, typed and validated before use.

``tumble`` (the module's hand-tumble readings for the soft-iron fit, seed 002 III-B3): an object whose
``mag`` is a list of rows of three finite numbers [``units``, default T]; ``sensor``: the module's parts
(`flexlearn.sensing.parts.SensorParts`); ``rig.max_colatitude`` [rad]: the sweep's cap, in (0, π/2]; ``units``:
an object of strings. Every problem found is one line of the `DataError`, each naming the file and the field.
"""

from __future__ import annotations

import math
from typing import Any, Optional, TypeGuard

from flexlearn.data.units import FIELD_UNITS
from flexlearn.errors import ConfigError, DataError
from flexlearn.sensing.parts import SensorParts

MAX_PROBLEMS = 20
"""Problems listed per file at most (the count of the others follows)."""


def _is_number(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _tumble_problems(tumble: Any, where: str) -> list[str]:
    if not isinstance(tumble, dict):
        return [f"{where}: field 'tumble' = {tumble!r:.60}: expected an object with 'mag' (rows of 3 numbers)"]
    out: list[str] = []
    units = tumble.get("units", "T")
    if units not in FIELD_UNITS:
        out.append(f"{where}: field 'tumble.units' = {units!r:.40}: expected one of {', '.join(FIELD_UNITS)}")
    mag = tumble.get("mag", [])
    if not isinstance(mag, list):
        return [*out, f"{where}: field 'tumble.mag' = {mag!r:.60}: expected a list of rows of 3 numbers"]
    for i, row in enumerate(mag):
        if not isinstance(row, list) or len(row) != 3:
            n = len(row) if isinstance(row, list) else "not a list"
            out.append(f"{where}: field 'tumble.mag' row {i} = {row!r:.60}: expected 3 numbers (got {n})")
            continue
        for j, v in enumerate(row):
            if not _is_number(v):
                out.append(f"{where}: field 'tumble.mag' row {i} value {j} = {v!r:.40}: expected a finite number [T]")
    return out


def meta_problems(meta: Any, where: str) -> list[str]:
    """One line per problem of the fields above in ``meta``; empty when fine.

    Args:
        meta: the object read from ``where``.
        where: the file named in each line.

    Returns:
        The problems.
    """
    if not isinstance(meta, dict):
        return [f"{where}: expected a JSON object, got {type(meta).__name__}"]
    out: list[str] = []
    if "tumble" in meta and meta["tumble"] is not None:
        out += _tumble_problems(meta["tumble"], where)
    if meta.get("sensor") is not None:
        try:
            SensorParts.from_config(meta["sensor"], "sensor")
        except ConfigError as exc:
            out.append(f"{where}: field {str(exc).removeprefix('config ')}")
    rig = meta.get("rig")
    if rig is not None and not isinstance(rig, dict):
        out.append(f"{where}: field 'rig' = {rig!r:.60}: expected an object")
    elif isinstance(rig, dict) and "max_colatitude" in rig:
        cap = rig["max_colatitude"]
        if not (_is_number(cap) and 0 < cap <= math.pi / 2):
            out.append(f"{where}: field 'rig.max_colatitude' = {cap!r:.40}: expected a number in (0, pi/2] rad")
    units = meta.get("units")
    if units is not None and not (isinstance(units, dict) and all(isinstance(v, str) for v in units.values())):
        out.append(f"{where}: field 'units' = {units!r:.60}: expected an object of unit strings")
    return out


def check_meta(meta: Any, where: str = "meta.json") -> None:
    """Raise `DataError` listing every problem of ``meta`` (one line each, at most `MAX_PROBLEMS`).

    Args:
        meta: the object read from ``where``.
        where: the file named in each line.

    Raises:
        DataError: listing the problems.
    """
    problems = meta_problems(meta, where)
    if problems:
        more = len(problems) - MAX_PROBLEMS
        lines = problems[:MAX_PROBLEMS] + ([f"{where}: ... and {more} more problems"] if more > 0 else [])
        raise DataError("\n".join(lines))


def sweep_parts(meta: Any) -> Optional[SensorParts]:
    """The parts a sweep declares in ``meta['sensor']`` (validated by `check_meta`), or None.

    Args:
        meta: the sweep's ``meta.json`` content (anything but a dict: None).

    Returns:
        The declared `SensorParts`, or None when ``meta`` has no 'sensor'.
    """
    if isinstance(meta, dict) and meta.get("sensor") is not None:
        return SensorParts.from_config(meta["sensor"], "meta.json 'sensor'")
    return None


def sweep_cap(meta: Any) -> Optional[float]:
    """The sweep's own cap ``meta['rig']['max_colatitude']`` [rad], or None when the sweep does not say.

    Args:
        meta: the sweep's ``meta.json`` content.

    Returns:
        The cap [rad], or None when absent, not a number or outside (0, π/2].
    """
    rig = meta.get("rig") if isinstance(meta, dict) else None
    cap = rig.get("max_colatitude") if isinstance(rig, dict) else None
    return float(cap) if _is_number(cap) and 0 < cap <= math.pi / 2 else None
