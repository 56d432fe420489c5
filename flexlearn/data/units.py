"""Units of a raw sweep: declared by processing keys, checked by magnitude, converted once to SI.

A raw sweep is SI (s, T, m/s²). A logger that wrote milliseconds, microtesla or g is caught here, before any
sample is used:

* times: the median sample spacing Δt of the accelerometer times the IMU's declared output rate f (the
  ``sensor`` parts, `flexlearn.sensing.parts`) is ≈ 1 in seconds; r = median(Δt)·f of about 1e3, 1e6 or 1e9
  means ms, µs or ns. Outside [1/300, 30] the sweep is refused with the key that fixes it
  (``+processing.time_unit=ms``), or with the parts' rate to check when no unit explains r.
* fields and specific force: the median magnitude must fall in ``field_median_bounds`` /
  ``accel_median_bounds``; otherwise the closest common unit is named with its key (``+processing.field_unit=uT``).

With ``time_unit``, ``field_unit`` or ``accel_unit`` set to a non-SI unit the streams are multiplied by the
unit's SI factor (times: every field of unit ``s`` of every stream; fields: ``mag`` and the tumble readings
of ``meta.json`` given in the same unit) and one note says so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from flexlearn.errors import DataError
from flexlearn.sensing.parts import SensorParts
from flexlearn.sensing.streams import STREAMS, RawSweep

G0 = 9.80665
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
FIELD_UNITS = {"T": 1.0, "mT": 1e-3, "gauss": 1e-4, "G": 1e-4, "uT": 1e-6, "µT": 1e-6, "nT": 1e-9}
ACCEL_UNITS = {"m/s^2": 1.0, "g": G0, "mg": G0 * 1e-3}
SPACING_TOLERANCE = 30.0
"""r = median(Δt)·rate must lie in [1/300, 30] for times in seconds (a part may be sampled far faster than its
declared rate, or logged slower); a unit three decades off falls outside."""
FAST_TOLERANCE = 300.0


def _closest(ratio: float, units: dict[str, float], si: float = 1.0) -> str:
    """The unit u (ASCII spelling) for which ``ratio``·u is closest to ``si`` in log scale."""
    ascii_units = [u for u in units if u.isascii()]
    return min(ascii_units, key=lambda u: abs(math.log10(max(ratio, 1e-300) * units[u] / si)))


def _scaled_times(raw: RawSweep, factor: float) -> RawSweep:
    """A copy of ``raw`` with every field of unit ``s`` multiplied by ``factor``."""
    streams = {
        name: {
            f.name: np.asarray(data[f.name], dtype=np.float64) * factor if f.is_time else data[f.name]
            for f in STREAMS[name].fields
        }
        for name, data in raw.streams.items()
    }
    return RawSweep(streams=streams, meta=raw.meta, unregistered=raw.unregistered)


def check_times(raw: RawSweep, parts: SensorParts, time_unit: str) -> list[str]:
    """Refuse times whose sample spacing disagrees with the IMU's declared output rate (see module docstring).

    Args:
        raw: the sweep, times already converted to s.
        parts: the module's sensor parts (``imu.output_rate_hz`` [Hz]).
        time_unit: the declared ``processing.time_unit`` (named in the message).

    Returns:
        Notes (empty when the spacing is as expected).

    Raises:
        DataError: naming the stream, the spacing, the rate and the ``+processing.time_unit=`` that fixes it.
    """
    t = np.asarray(raw.accel_t, dtype=np.float64)
    dt = np.diff(t[np.isfinite(t)])
    dt = dt[dt > 0]
    if dt.size < 2:
        return []
    rate = parts.imu.output_rate_hz
    spacing = float(np.median(dt))
    r = spacing * rate
    if 1.0 / FAST_TOLERANCE <= r <= SPACING_TOLERANCE:
        return []
    written_r = r / TIME_UNITS[time_unit]  # spacing of the numbers as written, times the rate
    guess = _closest(written_r, TIME_UNITS)
    where = (
        f"stream 'accel': field 't' has a median sample spacing of {spacing:.4g} s (times read as {time_unit}), "
        f"{r:.4g}x the period of the IMU's declared output rate {rate:g} Hz (sensor.imu.output_rate_hz)"
    )
    if guess != time_unit and 1.0 / FAST_TOLERANCE <= written_r * TIME_UNITS[guess] <= SPACING_TOLERANCE:
        raise DataError(f"{where}; the times look like {guess}: set +processing.time_unit={guess}")
    raise DataError(
        f"{where}; no time unit explains it: check sensor.imu.output_rate_hz (the parts: sensor/imu=...) "
        "and the recording's clock"
    )


def to_si(raw: RawSweep, units: dict[str, str]) -> tuple[RawSweep, list[str]]:
    """Convert ``raw`` from the declared units to SI.

    Args:
        raw: the sweep.
        units: ``{"time": ..., "field": ..., "accel": ...}``.

    Returns:
        (the converted sweep — ``raw`` itself when everything is SI, notes: one line per conversion).
    """
    notes: list[str] = []
    out = raw
    tf = TIME_UNITS[units["time"]]
    if tf != 1.0:
        out = _scaled_times(out, tf)
        notes.append(f"times converted from {units['time']} to s (processing.time_unit={units['time']})")
    ff = FIELD_UNITS[units["field"]]
    af = ACCEL_UNITS[units["accel"]]
    if ff != 1.0 or af != 1.0:
        if out is raw:
            out = _scaled_times(raw, 1.0)  # a copy: the caller's arrays are never changed
        if ff != 1.0:
            out.streams["mag"] = dict(out.streams["mag"], mag=np.asarray(out.mag, dtype=np.float64) * ff)
            notes.append(f"stream 'mag' converted from {units['field']} to T (processing.field_unit={units['field']})")
        if af != 1.0:
            out.streams["accel"] = dict(out.streams["accel"], accel=np.asarray(out.accel, dtype=np.float64) * af)
            notes.append(
                f"stream 'accel' converted from {units['accel']} to m/s^2 (processing.accel_unit={units['accel']})"
            )
    return out, notes


def unit_hint(median: float, kind: str) -> tuple[str, str]:
    """The unit whose SI value of ``median`` is typical for ``kind``, and the fixing key.

    Args:
        median: a median reading in the declared unit.
        kind: "field" or "accel".

    Returns:
        (the unit, the override that fixes it).
    """
    units, typical, key = (FIELD_UNITS, 5e-5, "field_unit") if kind == "field" else (ACCEL_UNITS, G0, "accel_unit")
    guess = _closest(median, units, typical)
    return guess, f"+processing.{key}={guess}"


def tumble_factor(meta: dict[str, Any], field_unit: str) -> float:
    """SI factor of the tumble readings: their own ``meta['tumble']['units']`` if given, else ``field_unit``.

    Args:
        meta: the sweep's metadata.
        field_unit: the declared field unit.

    Returns:
        The factor.
    """
    tumble = meta.get("tumble") if isinstance(meta, dict) else None
    declared = tumble.get("units") if isinstance(tumble, dict) else None
    return FIELD_UNITS.get(declared, FIELD_UNITS[field_unit]) if isinstance(declared, str) else FIELD_UNITS[field_unit]
