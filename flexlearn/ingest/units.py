"""Units of recorded streams: the ``unit`` / ``scale`` keys of a topic or serial stream, their conversion to SI, and
the plausibility checks that catch a wrong unit before any other check does.

Every value a recording holds in a unit other than SI is converted once, at ingestion: ``value_SI = value · f``
with ``f = UNITS[si][unit] · scale`` (``unit`` names the unit of the numbers, e.g. ``uT``; ``scale`` an extra
factor, e.g. the size of one count in that unit). A conversion (f ≠ 1) is said in one log line.

Checks, on the converted values (a failed check is a `DataError` naming the ``key=value`` that fixes it):

* fields [T]: median |m| within ``ProcessingConfig.field_median_bounds`` (1 µT … 1 mT by default);
* specific force [m/s²]: median |a| within ``ProcessingConfig.accel_median_bounds`` (8 … 12, ≈ g at rest);
* angular rate [rad/s]: the 99th percentile of |ω| below `MAX_RATE` (35 rad/s ≈ 2000 °/s, the largest gyro range);
* positions [m]: median |p| below `MAX_POSITION` (20 m; millimetres read as metres are beyond it);
* times: the median sample spacing of a continuous stream against its declared rate (``rate_hz``, within a
  factor `RATE_TOLERANCE`) or, without one and for a magnetometer, accelerometer or gyro (`SENSOR_UNITS`), against
  plausible sensor rates (`PERIOD_BOUNDS`): a mismatch by a power of 1000 is a wrong time unit
  (``time_unit=ms``), anything else a wrong ``rate_hz``.

Where a wrong unit is refused, the unit that brings the median into range is guessed (the one that puts the
`LOW_QUANTILE` percentile of |value| closest, on a log scale, to `TYPICAL`: the ambient field of the coil-off polls,
g) and named as the override, e.g. ``ingest.serial.streams.mag.unit=mT``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from flexlearn.config import check

G0 = 9.80665  # standard gravity [m/s²]
UNITS: dict[str, dict[str, float]] = {  # SI unit -> unit name -> factor to SI; the first spelling is the one named
    "T": {"T": 1.0, "mT": 1e-3, "uT": 1e-6, "µT": 1e-6, "nT": 1e-9, "G": 1e-4, "gauss": 1e-4, "mG": 1e-7},
    "m/s^2": {"m/s2": 1.0, "m/s^2": 1.0, "g": G0, "mg": G0 * 1e-3},  # m/s2: a command-line override cannot hold ^
    "rad/s": {"rad/s": 1.0, "deg/s": math.pi / 180.0, "mrad/s": 1e-3},
    "m": {"m": 1.0, "cm": 1e-2, "mm": 1e-3},
}
TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
TYPICAL = {"T": 50e-6, "m/s^2": G0}  # the magnitude a unit guess aims at: the ambient field, g
LOW_QUANTILE = 20.0  # percentile of |value| compared with TYPICAL (coil-off polls: the ambient field alone)
MAX_RATE = 35.0  # rad/s: above every gyro's full-scale range (2000 °/s)
MAX_POSITION = 20.0  # m
RATE_TOLERANCE = 2.0  # declared vs measured sample rate
PERIOD_BOUNDS = (2e-5, 0.5)  # s: plausible sample spacing of a sensor stream without a declared rate (50 kHz…2 Hz)
SENSOR_UNITS = ("T", "m/s^2", "rad/s")  # streams of these (magnetometer, accelerometer, gyro) have PERIOD_BOUNDS
WHAT = {"T": "field", "m/s^2": "specific force", "rad/s": "angular rate", "m": "position"}


@dataclass(frozen=True)
class UnitSetting:
    """The unit keys of one recorded quantity.

    Attributes:
        where: config key of the stream, e.g. ``ingest.topics.mag`` or ``ingest.serial.streams.accel``.
        si: the SI unit the quantity is stored in (``T``, ``m/s^2``, ``rad/s``, ``m``; another unit: scale only).
        unit: the unit of the numbers (a key of ``UNITS[si]``; empty: ``si``).
        scale: extra factor.
        unit_key, scale_key: the key names under ``where`` (``unit``/``scale``; ``rate_unit``/``rate_scale``
            for the rate of an IMU topic).
    """

    where: str
    si: str
    unit: str = ""
    scale: float = 1.0
    unit_key: str = "unit"
    scale_key: str = "scale"

    def validate(self) -> None:
        """A unit name the quantity does not know, or a scale that is not positive and finite: `ConfigError`."""
        if self.unit:
            known = list(UNITS.get(self.si, {}))
            check(
                self.unit in known,
                f"{self.where}.{self.unit_key}",
                self.unit,
                f"expected one of {known} (the quantity is stored in {self.si})"
                if known
                else f"this quantity ({self.si}) has no unit names; use {self.scale_key} (a factor to {self.si})",
            )
        check(
            math.isfinite(self.scale) and self.scale > 0,
            f"{self.where}.{self.scale_key}",
            self.scale,
            "must be a positive finite number",
        )

    @property
    def factor(self) -> float:
        """Factor from the recorded numbers to SI."""
        return UNITS.get(self.si, {}).get(self.unit or self.si, 1.0) * self.scale

    def describe(self) -> str:
        """How the numbers are read, e.g. ``unit=uT`` or ``scale=1e-06``."""
        parts = [f"{self.unit_key}={self.unit}"] if self.unit else []
        return " ".join(parts + ([f"{self.scale_key}={self.scale:g}"] if self.scale != 1.0 else [])) or "SI"

    def note(self, name: str) -> Optional[str]:
        """The one line saying a conversion happens, or None (factor 1).

        Args:
            name: the column or stream the line names.

        Returns:
            The line, or None when the factor is 1.
        """
        if self.factor == 1.0:
            return None
        what = WHAT.get(self.si, "values")
        return f"{name}: {what} read as {self.describe()}, converted to {self.si} (×{self.factor:.6g})"

    def fix(self, factor: float) -> str:
        """The ``key=value`` override that makes the total factor (recorded numbers -> SI) ``factor``: a unit name
        where one fits and the scale is 1, else the scale.

        Args:
            factor: the wanted total factor from the recorded numbers to SI.

        Returns:
            The override, e.g. ``ingest.topics.mag.unit=uT``.
        """
        if self.scale == 1.0:
            for name, f in UNITS.get(self.si, {}).items():
                if math.isclose(f, factor, rel_tol=1e-9):
                    return f"{self.where}.{self.unit_key}={name}"
        unit_factor = UNITS.get(self.si, {}).get(self.unit or self.si, 1.0)
        return f"{self.where}.{self.scale_key}={factor / unit_factor:.6g}"


def _guess(setting: UnitSetting, raw_median: float, raw_low: float, bounds: tuple[float, float]) -> Optional[float]:
    """The factor of a unit that puts ``raw_median`` (in the recorded numbers) inside ``bounds`` and ``raw_low`` (a
    low quantile: the ambient field, where a coil adds to it) closest to the typical magnitude on a log scale; None
    when no unit does."""
    typical = TYPICAL.get(setting.si, math.sqrt(bounds[0] * bounds[1]))
    fits = [
        (abs(math.log(max(raw_low, 1e-300) * f / typical)), f)
        for f in dict.fromkeys(UNITS.get(setting.si, {}).values())
        if bounds[0] <= raw_median * f <= bounds[1]
    ]
    return min(fits)[1] if fits else None


def _norms(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    v = v.reshape(v.shape[0], -1)
    return np.linalg.norm(v[np.isfinite(v).all(axis=1)], axis=1)


def _median_norm(values: np.ndarray) -> Optional[float]:
    n = _norms(values)
    return float(np.median(n)) if n.size else None


def magnitude_problem(
    values: np.ndarray, setting: UnitSetting, source: str, bounds: Optional[tuple[float, float]] = None
) -> Optional[str]:
    """Why the SI ``values`` (N, k) cannot be in the unit ``setting`` says, with the fixing override; or None.

    Args:
        values: the converted values (N, k), NaN rows ignored.
        setting: how they were read.
        source: the file and topic (or record kind), for the message.
        bounds: plausible median |value| [SI] for fields and specific force (``ProcessingConfig``'s bounds).
    """
    si, what = setting.si, WHAT.get(setting.si, "value")
    if si in ("T", "m/s^2"):
        med = _median_norm(values)
        if med is None or bounds is None or bounds[0] <= med <= bounds[1]:
            return None
        low = float(np.percentile(_norms(values), LOW_QUANTILE))
        guess = _guess(setting, med / setting.factor, low / setting.factor, bounds)
        hint = (
            f"the values look like {_unit_name(si, guess)}: set {setting.fix(guess)}"
            if guess
            else f"check {setting.where}.{setting.unit_key}"
        )
        return (
            f"{source}: median |{what}| {med:.4g} {si} (read as {setting.describe()}) is outside the plausible "
            f"[{bounds[0]:.3g}, {bounds[1]:.3g}] {si}; {hint}"
        )
    if si == "rad/s":
        v = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        n = np.linalg.norm(v[np.isfinite(v).all(axis=1)], axis=1)
        if n.size and float(np.percentile(n, 99)) > MAX_RATE:
            p99 = float(np.percentile(n, 99))
            return (
                f"{source}: 99th percentile of |{what}| {p99:.4g} rad/s (read as {setting.describe()}) is above "
                f"{MAX_RATE} rad/s (2000 °/s); the values look like deg/s: set "
                f"{setting.fix(UNITS['rad/s']['deg/s'])}"
            )
    if si == "m":
        med = _median_norm(values)
        if med is not None and med > MAX_POSITION:
            return (
                f"{source}: median |{what}| {med:.4g} m (read as {setting.describe()}) is above {MAX_POSITION} m; "
                f"the values look like mm: set {setting.fix(1e-3)}"
            )
    return None


def _unit_name(si: str, factor: float) -> str:
    return next(n for n, f in UNITS[si].items() if math.isclose(f, factor, rel_tol=1e-9))


def median_period(t: np.ndarray) -> Optional[float]:
    """Median spacing of the distinct sample times ``t`` (any unit), or None with fewer than two.

    Args:
        t: sample times (N,); non-finite ones are ignored.

    Returns:
        The median spacing, in the unit of ``t``, or None.
    """
    u = np.unique(np.asarray(t, dtype=np.float64)[np.isfinite(t)])
    return float(np.median(np.diff(u))) if u.size > 1 else None


@dataclass(frozen=True)
class TimeSetting:
    """How the times of a continuous stream are read and what rate it declares.

    Attributes:
        rate_key: config key of the declared sample rate, e.g. ``ingest.serial.streams.mag.rate_hz``.
        rate_hz: declared rate [Hz]; 0: none declared.
        unit_key: config key of the time unit (``ingest.serial.time_unit``), or empty where times are fixed (rosbag2
            stamps are nanoseconds).
        unit: the time unit (a key of `TIME_UNITS`).
    """

    rate_key: str
    rate_hz: float = 0.0
    unit_key: str = ""
    unit: str = "s"


def spacing_problem(t: np.ndarray, setting: TimeSetting, source: str) -> Optional[str]:
    """Why the sample times ``t`` do not fit the declared or a plausible rate, with the fixing override; or None.

    A mismatch by a power of 1000 names the time unit.

    Args:
        t: sample times (in ``setting.unit``).
        setting: the declared rate and time unit.
        source: the stream's source named in the message.

    Returns:
        The problem, or None.
    """
    period = median_period(t)
    if period is None or period <= 0:
        return None
    f = TIME_UNITS[setting.unit]
    period_s = period * f
    if setting.rate_hz > 0:
        ratio = period_s * setting.rate_hz
        if 1.0 / RATE_TOLERANCE <= ratio <= RATE_TOLERANCE:
            return None
        expected = 1.0 / setting.rate_hz
    else:
        if not setting.unit_key or PERIOD_BOUNDS[0] <= period_s <= PERIOD_BOUNDS[1]:
            return None
        expected = 0.01  # 100 Hz: the guess aims at a common sensor rate
    head = f"{source}: samples every {period:.6g} {setting.unit} (median spacing) = {1.0 / period_s:.6g} Hz, " + (
        f"but {setting.rate_key} = {setting.rate_hz:g}" if setting.rate_hz > 0 else "not a plausible sensor rate"
    )
    if setting.unit_key:
        want = f * expected / period_s  # the unit factor that makes the spacing the expected one
        near = min(TIME_UNITS.items(), key=lambda kv: abs(math.log(kv[1] / want)))
        if near[0] != setting.unit and abs(math.log10(near[1] / want)) < math.log10(RATE_TOLERANCE) + (
            0.0 if setting.rate_hz > 0 else 1.5
        ):
            return f"{head}; the times look like {near[0]}: set {setting.unit_key}={near[0]}"
    if setting.rate_hz > 0:
        return f"{head}; set {setting.rate_key}={1.0 / period_s:.4g} (the measured rate) or check the time stamps"
    return f"{head}; declare the sensor's rate with {setting.rate_key}=<Hz> or check {setting.unit_key}"
