"""Hand-made `RawSweep`s with known answers for the processing tests.

`make_sweep` lays out P poses in time: each hold window [t_start, t_start + hold] is followed by a gap in
which the joint "moves". The ambient field drifts linearly over the whole sweep, the coil adds a constant
ΔB (per pose) whenever it is on, and the accelerometer reads g·label exactly, so that processing must
recover ΔB and the label to rounding error.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from flexlearn.sensing.parts import ChipAxis, ImuPart, MagnetometerPart, SensorParts
from flexlearn.sensing.streams import RawSweep

G = 9.81
AMBIENT0 = np.array([2.0e-5, -1.0e-5, 4.0e-5])  # [T]
DRIFT = np.array([1.0e-6, -2.0e-6, 5.0e-7])  # [T/s]
# The parts of these noise-free sweeps: no noise, so bit-identical readings are no sign of a stuck sensor.
QUIET_PARTS = SensorParts(
    magnetometer=MagnetometerPart("quiet", ChipAxis(1300e-6, 1e-12, 0.0, "T"), 90.0),
    imu=ImuPart("quiet", ChipAxis(8 * 9.80665, 1e-9, 0.0, "m/s^2"), ChipAxis(34.9, 1e-9, 0.0, "rad/s"), 100.0),
)


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def make_sweep(
    n_poses: int = 4,
    *,
    hold: float = 0.5,
    gap: float = 0.1,
    mag_dt: float = 0.002,
    accel_dt: float = 0.01,
    pulses: Sequence[tuple[float, float]] = ((0.15, 0.19), (0.30, 0.34)),
    delta_b: Optional[np.ndarray] = None,
    label: Optional[np.ndarray] = None,
    drift: np.ndarray = DRIFT,
    truth: bool = True,
    seed: int = 0,
) -> RawSweep:
    """A sweep of ``n_poses`` poses; ``pulses`` are (on, off) times [s] relative to each window start.

    delta_b: (P, 3) [T] true coil field per pose (default: random, |ΔB| = 100 µT).
    label: (P, 3) unit label per pose (default: random, within 60° of +z).
    drift: (3,) [T/s] linear drift of the ambient field over the sweep.
    """
    rng = np.random.default_rng(seed)
    if delta_b is None:
        delta_b = 1e-4 * unit(rng.normal(size=(n_poses, 3)))
    if label is None:
        label = unit(rng.normal(scale=0.5, size=(n_poses, 3)) + [0.0, 0.0, 1.0])
    period = hold + gap
    t_start = np.arange(n_poses) * period + gap
    t_end = t_start + hold
    t_total = n_poses * period + gap
    on = np.array([[t0 + a for a, _ in pulses] for t0 in t_start]).ravel()
    off = np.array([[t0 + b for _, b in pulses] for t0 in t_start]).ravel()
    coil_t = np.sort(np.concatenate([on, off]))
    coil_on = np.isin(coil_t, on)

    mag_t = np.arange(0.0, t_total, mag_dt)
    mag = AMBIENT0 + np.asarray(drift) * mag_t[:, None]
    k = np.searchsorted(on, mag_t, side="right") - 1
    coil = (k >= 0) & (mag_t <= off[np.maximum(k, 0)])
    mag[coil] += delta_b[k[coil] // len(pulses)]

    accel_t = np.arange(0.0, t_total, accel_dt)
    accel = np.tile([0.0, 0.0, G], (accel_t.shape[0], 1))
    pose_of = np.searchsorted(t_start, accel_t, side="right") - 1
    inside = (pose_of >= 0) & (accel_t <= t_end[np.maximum(pose_of, 0)])
    accel[inside] = G * label[pose_of[inside]]

    pose_id = np.arange(100, 100 + n_poses, dtype=np.int64)
    target = unit(label * [-1.0, -1.0, 1.0])  # any unit vector will do for processing
    truth_d = None
    if truth:
        truth_d = {
            "pose_id": pose_id,
            **{f"label_{a}": label[:, i] for i, a in enumerate("xyz")},
            **{f"u_{a}": target[:, i] for i, a in enumerate("xyz")},
            **{f"db_{a}": delta_b[:, i] for i, a in enumerate("xyz")},
        }
    return RawSweep(
        mag_t=mag_t,
        mag=mag,
        accel_t=accel_t,
        accel=accel,
        coil_t=coil_t,
        coil_on=coil_on,
        pose_id=pose_id,
        pose_t_start=t_start,
        pose_t_end=t_end,
        target=target,
        meta={
            "rig": {"pivot_spacing_m": 0.029},
            "provenance": {"generator": "streams_factory"},
            "sensor": QUIET_PARTS.to_config(),
        },
        truth=truth_d,
    )


def insert_polls(raw: RawSweep, t: Sequence[float], m: np.ndarray) -> RawSweep:
    """A copy of ``raw`` with extra mag polls at times ``t`` (values ``m`` (K, 3) [T]) merged in time order.

    An inserted poll at a time equal to an existing one comes right after it.
    """
    t_all = np.concatenate([raw.mag_t, np.asarray(t, dtype=np.float64)])
    m_all = np.concatenate([raw.mag, np.asarray(m, dtype=np.float64).reshape(-1, 3)])
    order = np.argsort(t_all, kind="stable")
    return dataclasses.replace(raw, mag_t=t_all[order], mag=m_all[order])


def poll_index(raw: RawSweep, t: float) -> int:
    """Index of the last poll at or before time ``t``."""
    return int(np.searchsorted(raw.mag_t, t, side="right") - 1)
