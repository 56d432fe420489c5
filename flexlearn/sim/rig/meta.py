"""What a simulated sweep records about itself (``RawSweep.meta``): units, rig, coil, sensors, the hand tumble."""

from __future__ import annotations

from typing import Any

import numpy as np

from flexlearn.config import to_dict
from flexlearn.sim.modules import tumble_readings
from flexlearn.sim.rig.schedule import Schedule
from flexlearn.sim.rig.sensors import CoilDrive, Sensors
from flexlearn.sim.rig_config import JointGeometry, RigConfig

__all__ = ["META_UNITS", "tumble_meta", "rig_meta", "coil_meta", "sensor_meta"]


def tumble_meta(cfg: RigConfig, sens: Sensors, rng: np.random.Generator) -> dict[str, Any]:
    """The module's hand-tumble recording (``module.tumble_samples`` readings [T]) for the ellipsoid fit.

    Args:
        cfg: the rig configuration (``module.tumble_samples`` and the magnetometer's noise and lsb).
        sens: this module's sensor draws (earth field, iron, axes).
        rng: generator of the tumble's orientations and noise.

    Returns:
        The JSON-ready record: readings ``mag`` (n, 3) as lists, their unit and frame.
    """
    n = cfg.module.tumble_samples
    mc = cfg.magnetometer
    m = (
        tumble_readings(n, sens.earth, sens.soft_iron, sens.mag_axes, sens.hard_iron, mc.noise, mc.lsb, rng)
        if n
        else np.zeros((0, 3))
    )
    return {
        "mag": m.tolist(),
        "units": "T",
        "frame": "magnetometer",
        "what": "readings while the module is tumbled by hand in the ambient field (seed 002, III-B3)",
    }


META_UNITS = {
    "time": "s",
    "mag": "T",
    "accel": "m/s^2",
    "length": "m",
    "angle": "rad",
    "current": "A",
    "resistance": "ohm",
    "voltage": "V",
}
"""Units of the sweep's streams and ``meta`` entries (``meta['units']``)."""


def rig_meta(g: JointGeometry, sched: Schedule) -> dict[str, Any]:
    """``meta['rig']``: the nominal joint geometry [m, rad], the pose slot and the sweep duration [s].

    Args:
        g: the nominal joint geometry.
        sched: the sweep's schedule (slot length and total duration).

    Returns:
        The JSON-ready dict.
    """
    return {
        "pivot_to_next": g.pivot_to_next,
        "pivot_radius": g.pivot_radius,
        "platform_offset": g.platform_offset,
        "pivot_spacing": g.pivot_to_next + g.pivot_radius + g.platform_offset,
        "mechanical_limit": g.mechanical_limit,
        "max_colatitude": g.max_colatitude,
        "joint": g.joint,
        "slot": sched.slot,
        "duration": sched.t_total,
    }


def coil_meta(cfg: RigConfig, drive: CoilDrive) -> dict[str, Any]:
    """``meta['coil']``: the coil config and layer count, its resistance [Ω], drive current [A] and voltage [V],
    trace length [m] and moment [A·m² per A].

    Args:
        cfg: the rig configuration (``coil`` and ``coil_layers``).
        drive: the driven coil (its model and current).

    Returns:
        The JSON-ready dict.
    """
    coil = drive.coil.coil
    resistance = float(coil.resistance())
    return {
        **to_dict(cfg.coil),
        "layers": cfg.coil_layers,
        "resistance": resistance,
        "current": drive.current,
        "voltage": drive.current * resistance,
        "trace_length": float(coil.trace_length()),
        "moment_per_ampere": coil.moment().tolist(),
    }


def sensor_meta(cfg: RigConfig, sens: Sensors, counts: dict[str, int]) -> dict[str, Any]:
    """``meta['sensors']``: each sensor's config (after the parts, `RigConfig.with_parts`), the parts and this
    module's draws (iron, IMU mount M, magnetometer axes Q against the IMU's, bias, earth field).

    Args:
        cfg: the rig configuration, parts applied.
        sens: this module's sensor draws.
        counts: the magnetometer stream's counts; ``conversions`` is recorded.

    Returns:
        The JSON-ready dict.
    """
    return {
        "parts": cfg.parts,
        "magnetometer": {
            **to_dict(cfg.magnetometer),
            "hard_iron": sens.hard_iron.tolist(),
            "soft_iron": sens.soft_iron.tolist(),
            "mount": sens.mount.tolist(),
            "axes": sens.mag_axes.tolist(),
            "conversions": counts["conversions"],
        },
        "accelerometer": {**to_dict(cfg.accelerometer), "bias": sens.accel_bias.tolist()},
        "ambient": {**to_dict(cfg.ambient), "earth": sens.earth.tolist()},
    }
