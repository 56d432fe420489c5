"""Sensor parts of a module as configuration: full-scale range, quantisation step, noise density, output rate.

A module carries one magnetometer (the coil field, seed 002 III-A) and one IMU (the gravity label). The
processing of raw streams (`flexlearn.data.quality`) derives from these parts the saturation limit of each
stream, the quantisation step below which a constant reading is plausible, and the white-noise level a
stationary stream should show. The Hydra group ``conf/sensor`` holds presets (``sensor/magnetometer=...``,
``sensor/imu=...``); `SensorParts.from_config` validates a plain dict of that shape.

Units are SI throughout: tesla for fields, m/s² for specific force, rad/s for angular rate. Datasheets give
gauss (1 G = 1e-4 T), g (9.80665 m/s²) and °/s; the presets carry the converted values.

Noise model: white noise of one-sided density ``noise_density`` [unit/√Hz] seen through the output's
Nyquist band, so one sample's standard deviation is σ = noise_density · √(output_rate_hz / 2). Quantisation
adds lsb/√12 in quadrature.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from flexlearn.errors import ConfigError

UNITS = ("T", "m/s^2", "rad/s")
"""SI unit of each kind of axis: magnetic field, specific force, angular rate."""

MAX_RATE_HZ = 1.0e5
"""Largest output rate a part may declare [Hz] (far above any MEMS part; bounds memory a simulator allocates)."""


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"config '{where}' = {value!r}: expected a finite number")
    return float(value)


def _keys(data: Any, where: str, known: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"config '{where}' = {data!r}: expected a mapping with keys {', '.join(known)}")
    unknown = sorted(set(map(str, data)) - set(known))
    if unknown:
        raise ConfigError(f"config '{where}.{unknown[0]}': unknown key (known: {', '.join(known)})")
    missing = [k for k in known if k not in data]
    if missing:
        raise ConfigError(f"config '{where}.{missing[0]}': missing")
    return data


@dataclass(frozen=True)
class ChipAxis:
    """One measured quantity of a chip (the three axes alike).

    Attributes:
        full_scale: the per-axis magnitude where the output clips [unit]; a reading with |component| at or
            above it is saturated.
        lsb: quantisation step of the output [unit] (the datasheet's sensitivity inverted).
        noise_density: white noise density [unit/√Hz].
        unit: SI unit, one of `UNITS`.
    """

    full_scale: float
    lsb: float
    noise_density: float
    unit: str

    def noise_std(self, rate_hz: float) -> float:
        """Standard deviation of one sample at ``rate_hz`` [unit]: σ = √(nd² · rate/2 + lsb²/12).

        Args:
            rate_hz: output data rate [Hz] (the noise bandwidth is half of it).

        Returns:
            σ [unit] (white noise plus quantisation).
        """
        return math.sqrt(self.noise_density**2 * rate_hz / 2.0 + self.lsb**2 / 12.0)

    @classmethod
    def from_config(cls, data: Any, where: str, unit: str) -> "ChipAxis":
        """Validated axis from a dict; ``unit`` is the one this axis must declare.

        Args:
            data: mapping with ``full_scale``, ``lsb``, ``noise_density`` and ``unit``.
            where: key path used in error messages.
            unit: the SI unit this axis must declare (e.g. "T", "m/s^2", "rad/s").

        Returns:
            The frozen axis.

        Raises:
            ConfigError: unknown/missing key, non-number, non-positive range or step, negative density, wrong
                unit, or a step not below the full scale; the message names ``where.key``.
        """
        d = _keys(data, where, ("full_scale", "lsb", "noise_density", "unit"))
        fs = _number(d["full_scale"], f"{where}.full_scale")
        lsb = _number(d["lsb"], f"{where}.lsb")
        nd = _number(d["noise_density"], f"{where}.noise_density")
        if fs <= 0:
            raise ConfigError(f"config '{where}.full_scale' = {fs!r}: must be > 0 {unit}")
        if lsb <= 0 or lsb >= fs:
            raise ConfigError(f"config '{where}.lsb' = {lsb!r}: must be > 0 and below full_scale = {fs!r} {unit}")
        if nd < 0:
            raise ConfigError(f"config '{where}.noise_density' = {nd!r}: must be >= 0 {unit}/sqrt(Hz)")
        if d["unit"] != unit:
            raise ConfigError(f"config '{where}.unit' = {d['unit']!r}: must be {unit!r} (SI; convert the datasheet)")
        return cls(full_scale=fs, lsb=lsb, noise_density=nd, unit=unit)


def _rate(value: Any, where: str) -> float:
    r = _number(value, where)
    if not 0 < r <= MAX_RATE_HZ:
        raise ConfigError(f"config '{where}' = {r!r}: must be in (0, {MAX_RATE_HZ:g}] Hz")
    return r


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"config '{where}' = {value!r}: expected a non-empty string")
    return value


@dataclass(frozen=True)
class MagnetometerPart:
    """A magnetometer chip at its configured range and output data rate [Hz]."""

    name: str
    field: ChipAxis
    output_rate_hz: float

    @property
    def noise_std(self) -> float:
        """σ of one field sample at the output rate [T]."""
        return self.field.noise_std(self.output_rate_hz)

    @classmethod
    def from_config(cls, data: Any, where: str = "sensor.magnetometer") -> "MagnetometerPart":
        """Validated magnetometer part from a dict.

        Args:
            data: mapping with ``name``, ``field`` (a `ChipAxis` in T) and ``output_rate_hz`` [Hz].
            where: key path used in error messages.

        Returns:
            The frozen part.

        Raises:
            ConfigError: unknown/missing key or invalid value; the message names ``where.key``.
        """
        d = _keys(data, where, ("name", "field", "output_rate_hz"))
        return cls(
            name=_name(d["name"], f"{where}.name"),
            field=ChipAxis.from_config(d["field"], f"{where}.field", "T"),
            output_rate_hz=_rate(d["output_rate_hz"], f"{where}.output_rate_hz"),
        )


@dataclass(frozen=True)
class ImuPart:
    """An IMU chip (accelerometer and gyroscope) at its configured ranges and output data rate [Hz]."""

    name: str
    accel: ChipAxis
    gyro: ChipAxis
    output_rate_hz: float

    @property
    def accel_noise_std(self) -> float:
        """σ of one specific-force sample at the output rate [m/s²]."""
        return self.accel.noise_std(self.output_rate_hz)

    @classmethod
    def from_config(cls, data: Any, where: str = "sensor.imu") -> "ImuPart":
        """Validated IMU part from a dict.

        Args:
            data: mapping with ``name``, ``accel`` (a `ChipAxis` in m/s^2), ``gyro`` (in rad/s) and
                ``output_rate_hz`` [Hz].
            where: key path used in error messages.

        Returns:
            The frozen part.

        Raises:
            ConfigError: unknown/missing key or invalid value; the message names ``where.key``.
        """
        d = _keys(data, where, ("name", "accel", "gyro", "output_rate_hz"))
        return cls(
            name=_name(d["name"], f"{where}.name"),
            accel=ChipAxis.from_config(d["accel"], f"{where}.accel", "m/s^2"),
            gyro=ChipAxis.from_config(d["gyro"], f"{where}.gyro", "rad/s"),
            output_rate_hz=_rate(d["output_rate_hz"], f"{where}.output_rate_hz"),
        )


GRAVITY = 9.80665
GAUSS = 1.0e-4


@dataclass(frozen=True)
class SensorParts:
    """The parts of one module: its magnetometer and its IMU."""

    magnetometer: MagnetometerPart
    imu: ImuPart

    @classmethod
    def from_config(cls, data: Any, where: str = "sensor") -> "SensorParts":
        """Validated parts from a plain dict (or OmegaConf node) ``{magnetometer: {...}, imu: {...}}``.

        Args:
            data: mapping of the ``conf/sensor`` group's shape (a part may be a preset's name, e.g.
                ``{magnetometer: lis3mdl_4g, imu: icm20948}``); None gives `SensorParts.default()`.
            where: key path used in error messages.

        Returns:
            The frozen parts.

        Raises:
            ConfigError: naming the key path and value of the first problem.
        """
        if data is None:
            return cls.default()
        if hasattr(data, "_metadata"):  # an OmegaConf node: resolve to plain containers
            from omegaconf import OmegaConf  # local: keeps omegaconf out of this module's import for plain dicts

            data = OmegaConf.to_container(data, resolve=True)
        d = _keys(data, where, ("magnetometer", "imu"))
        mag, imu = d["magnetometer"], d["imu"]  # a preset's name stands for its values
        return cls(
            magnetometer=MagnetometerPart.from_config(
                _preset_dict("magnetometer", mag, f"{where}.magnetometer") if isinstance(mag, str) else mag,
                f"{where}.magnetometer",
            ),
            imu=ImuPart.from_config(
                _preset_dict("imu", imu, f"{where}.imu") if isinstance(imu, str) else imu, f"{where}.imu"
            ),
        )

    def to_config(self) -> dict[str, Any]:
        """Plain nested dict, the inverse of `from_config` (for metadata and checkpoints)."""
        return asdict(self)

    @classmethod
    def default(cls) -> "SensorParts":
        """The parts `flexlearn.sim.rig` models by default (``conf/sensor/default.yaml``)."""
        return cls.preset("sim_default", "sim_default")

    @classmethod
    def preset(cls, magnetometer: str, imu: str) -> "SensorParts":
        """Parts from the ``conf/sensor`` presets, by file name (e.g. ``preset("lis3mdl_4g", "icm20948")``).

        Args:
            magnetometer: name of a ``conf/sensor/magnetometer`` preset.
            imu: name of a ``conf/sensor/imu`` preset.

        Returns:
            The frozen parts.

        Raises:
            ConfigError: no such preset (the message lists the known ones).
        """
        return cls(
            magnetometer=MagnetometerPart.from_config(_preset_dict("magnetometer", magnetometer)),
            imu=ImuPart.from_config(_preset_dict("imu", imu)),
        )


PRESET_DIR = Path(__file__).resolve().parent.parent / "conf" / "sensor"
"""The ``conf/sensor`` Hydra group: ``magnetometer/<name>.yaml`` and ``imu/<name>.yaml``."""


def preset_names(kind: str) -> list[str]:
    """Names of the presets of ``kind`` ("magnetometer" or "imu"), sorted.

    Args:
        kind: the preset subfolder, "magnetometer" or "imu".

    Returns:
        The preset names (file stems), sorted.
    """
    return sorted(p.stem for p in (PRESET_DIR / kind).glob("*.yaml"))


@functools.lru_cache(maxsize=None)
def _preset_dict(kind: str, name: str, where: str = "") -> dict[str, Any]:
    path = PRESET_DIR / kind / f"{name}.yaml"
    if not name or "/" in name or not path.is_file():
        key = where or f"sensor/{kind}"
        raise ConfigError(f"config '{key}' = {name!r}: no such preset (known: {', '.join(preset_names(kind))})")
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)
