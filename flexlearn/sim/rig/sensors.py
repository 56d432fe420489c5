"""Sensors of the child module: its draws (mount, iron, bias, ambient) and the magnetometer and accelerometer streams.

* Magnetometer: conversions at ``rate`` on a free-running clock, each the mean field over the ``window`` before it
  is ready: m = S·B + h + n, quantised to ``lsb`` and clipped at ``full_scale``; B = R_magᵀ(B_earth(t) + i·B_coil),
  R_mag = R_child·Q (Q: the magnetometer's axes against the IMU's). The master polls every ``poll_period``; a poll
  returns the latest ready conversion, so stale polls repeat bitwise.
* Accelerometer: specific force f = R_childᵀ(a + g ẑ) + bias + noise at ``rate`` (+g up at rest), a the sensor's
  acceleration along the trajectory (central differences of the exact position).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

from flexlearn.sim.modules import PlacedCoil
from flexlearn.sim.numpy_lie import exp_so3
from flexlearn.sim.rig.geometry import UP
from flexlearn.sim.rig.motion import Motion, frames, positions
from flexlearn.sim.rig.schedule import Clocks, Schedule, coil_integral
from flexlearn.sim.rig_config import AmbientConfig, RigConfig

__all__ = ["Sensors", "CoilDrive", "draw_sensors", "mag_stream", "accel_stream", "imu_config", "FD_STEP"]

FD_STEP = 1e-3
"""[s] central-difference step for the sensor acceleration."""


@dataclass
class Sensors:
    """This module's sensor draws (SI units); ``mag_axes`` and the mount include the chips' rotations."""

    mount: np.ndarray  # (3, 3) sensor frame in the child board frame
    hard_iron: np.ndarray  # (3,) [T]
    soft_iron: np.ndarray  # (3, 3)
    accel_bias: np.ndarray  # (3,) [m/s^2]
    earth: np.ndarray  # (3,) [T] world frame
    drift_period: np.ndarray  # (3,) [s]
    drift_phase: np.ndarray  # (3,) [rad]
    mag_axes: np.ndarray = dataclasses.field(default_factory=lambda: np.eye(3))  # Q (3, 3), `flexlearn.sim.modules`
    board_offset: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))  # (3,) [m] module draw δs
    drift_dir: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))  # unit (3,) of the linear trend

    @property
    def mag_gain(self) -> np.ndarray:
        """S Qᵀ (3, 3): accelerometer-frame field → magnetometer reading (gain, soft iron, axes)."""
        return self.soft_iron @ self.mag_axes.T

    def ambient(self, t: np.ndarray, amb: AmbientConfig) -> np.ndarray:
        """Earth field in the world frame (N, 3) [T] with slow sinusoidal drift and a linear trend.

        Args:
            t: times (N,) [s].
            amb: the ambient config (``drift`` amplitude and ``drift_rate``).

        Returns:
            B_earth(t) (N, 3) [T].
        """
        b = self.earth + amb.drift * np.sin(2.0 * math.pi * t[:, None] / self.drift_period + self.drift_phase)
        if amb.drift_rate > 0.0:
            b = b + amb.drift_rate * t[:, None] * self.drift_dir
        return b


def draw_sensors(cfg: RigConfig, rng: np.random.Generator) -> Sensors:
    """This module's sensor draws: mount misalignment, hard and soft iron, accelerometer bias, ambient drift.

    Args:
        cfg: the rig configuration (geometry, magnetometer, accelerometer, ambient).
        rng: generator of the module's sensor stream (fixed draw order).

    Returns:
        The draws.
    """
    axis = rng.normal(size=3)
    mount = exp_so3((cfg.geometry.mount_misalignment * axis / np.linalg.norm(axis))[None])[0]
    e = rng.normal(0.0, cfg.magnetometer.soft_iron, (3, 3))
    amb = cfg.ambient
    earth = amb.magnitude * np.array(
        [
            math.cos(amb.inclination) * math.cos(amb.declination),
            math.cos(amb.inclination) * math.sin(amb.declination),
            -math.sin(amb.inclination),
        ]
    )
    sens = Sensors(
        mount,
        rng.normal(0.0, cfg.magnetometer.hard_iron, 3),
        np.eye(3) + 0.5 * (e + e.T),
        rng.normal(0.0, cfg.accelerometer.bias, 3),
        earth,
        amb.drift_period * rng.uniform(0.5, 1.5, 3),
        rng.uniform(-math.pi, math.pi, 3),
    )
    if amb.drift_rate > 0.0:  # drawn last: a rig without a trend keeps the seed's draws
        d = rng.normal(size=3)
        sens.drift_dir = d / np.linalg.norm(d)
    return sens


@dataclass(frozen=True)
class CoilDrive:
    """The parent coil as driven during the sweep: this module's placed coil, its current and its switchings."""

    coil: PlacedCoil
    current: float  # [A] drive current (set for the nominal design, `coil_current`)
    switch_t: np.ndarray  # (N_c,) [s] switch instants in time order
    switch_on: np.ndarray  # (N_c,) bool, the coil state after each switch


def mag_stream(
    cfg: RigConfig,
    clocks: Clocks,
    motion: Motion,
    sens: Sensors,
    drive: CoilDrive,
    pose: dict[str, np.ndarray],
    rng: np.random.Generator,
    frng: np.random.Generator,
) -> tuple[np.ndarray, dict[str, int]]:
    """Polled magnetometer readings (N_p, 3) [T] and fault counts (noise from ``rng``, faults from ``frng``).

    Args:
        cfg: the rig configuration (magnetometer, acquisition, ambient, faults).
        clocks: the conversion clock and poll instants.
        motion: the sweep's trajectory.
        sens: this module's sensor draws.
        drive: the driven coil and its switchings.
        pose: per hold pose: sensor frame ``r`` (P, 3, 3), position ``pos`` (P, 3) [m], coil field ``b`` (P, 3)
            [T/A].
        rng: generator of the noise.
        frng: generator of the faults (saturation, NaN polls).

    Returns:
        (readings (N_p, 3) [T], counts ``nan_polls``, ``saturated_conversions``, ``conversions``).
    """
    mc = cfg.magnetometer
    switch_on = drive.switch_on.astype(np.float64)
    n_conv = int(clocks.conversion(clocks.poll_t[-1:])[0]) + 1
    t_ready = clocks.c0 + clocks.tc * np.arange(n_conv)
    t_mid = t_ready - 0.5 * mc.window
    r, pos, k, still = frames(motion, t_mid, pose["r"], pose["pos"], sens.mount, cfg)
    field = sens.ambient(t_mid, cfg.ambient)  # world frame
    mean_i = (
        coil_integral(t_ready, drive.switch_t, switch_on, cfg.acquisition.coil_tau)
        - coil_integral(t_ready - mc.window, drive.switch_t, switch_on, cfg.acquisition.coil_tau)
    ) / mc.window
    on = mean_i > 1e-9
    b_coil = np.zeros((n_conv, 3))
    b_coil[on & still] = pose["b"][k[on & still]]
    moving_on = on & ~still
    if moving_on.any():
        b_coil[moving_on] = drive.coil.field(torch.from_numpy(pos[moving_on])).numpy()
    field += (drive.current * np.where(on, mean_i, 0.0))[:, None] * b_coil
    m = np.einsum("ij,nkj,nk->ni", sens.mag_gain, r, field) + sens.hard_iron  # S·Qᵀ·R_childᵀ·B + h
    m += rng.normal(0.0, mc.noise, m.shape)
    sat = frng.uniform(size=n_conv) < cfg.faults.saturation_rate
    axis = frng.integers(0, 3, n_conv)
    sign = np.where(frng.uniform(size=n_conv) < 0.5, -1.0, 1.0)
    m[sat, axis[sat]] = sign[sat] * 2.0 * mc.full_scale
    full = math.floor(mc.full_scale / mc.lsb) * mc.lsb
    m = np.clip(np.round(m / mc.lsb) * mc.lsb, -full, full)
    polls = m[np.maximum(clocks.conversion(clocks.poll_t), 0)]
    nan = frng.uniform(size=polls.shape[0]) < cfg.faults.nan_rate
    polls[nan] = np.nan
    return polls, {"nan_polls": int(nan.sum()), "saturated_conversions": int(sat.sum()), "conversions": n_conv}


def accel_stream(
    cfg: RigConfig,
    sched: Schedule,
    motion: Motion,
    sens: Sensors,
    pose: dict[str, np.ndarray],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Accelerometer sample times (N_a,) [s] and specific force (N_a, 3) [m/s²] in the sensor frame.

    The sensor's acceleration comes from central differences of its position: the IMU's own when
    ``geometry.imu_offset`` places it apart from the magnetometer. Quantised to ``lsb`` and clipped at
    ``full_scale`` when they are set.

    Args:
        cfg: the rig configuration (accelerometer, geometry).
        sched: the schedule (total duration).
        motion: the sweep's trajectory.
        sens: this module's sensor draws (mount, bias, board offset).
        pose: per hold pose: sensor frame ``r`` (P, 3, 3) and position ``pos`` (P, 3) [m].
        rng: generator of the clock phase and noise.

    Returns:
        (t (N_a,) [s], f (N_a, 3) [m/s²]).
    """
    ac = cfg.accelerometer
    period = 1.0 / ac.rate
    t = rng.uniform(0.0, period) + period * np.arange(int(sched.t_total * ac.rate))
    r, pos, _, still = frames(motion, t, pose["r"], pose["pos"], sens.mount, cfg)
    acc = np.zeros((t.size, 3))
    moving = ~still
    if moving.any():
        tm = t[moving]
        imu = imu_config(cfg, sens)
        centre = pos[moving] if imu is cfg else positions(motion, tm, imu)
        x = [positions(motion, tm + d, imu) for d in (-FD_STEP, FD_STEP)]
        acc[moving] = (x[0] - 2.0 * centre + x[1]) / FD_STEP**2
    f_world = acc + ac.gravity * UP
    f = np.einsum("nkj,nk->nj", r, f_world) + sens.accel_bias + rng.normal(0.0, ac.noise, (t.size, 3))
    if ac.lsb > 0.0:
        f = np.round(f / ac.lsb) * ac.lsb
    if ac.full_scale > 0.0:
        f = np.clip(f, -ac.full_scale, ac.full_scale)
    return t, f


def imu_config(cfg: RigConfig, sens: Sensors) -> RigConfig:
    """``cfg`` with the IMU's position on the child board as the sensor offset (``cfg`` itself when the IMU and
    the magnetometer are one chip); the module's board offset ``sens.board_offset`` applies to both chips.

    Args:
        cfg: the rig configuration.
        sens: this module's sensor draws.

    Returns:
        The configuration positioning the IMU.
    """
    g = cfg.geometry
    if g.imu_offset is None:
        return cfg
    s = np.asarray(g.imu_offset) + sens.board_offset
    geometry = dataclasses.replace(g, magnetometer_offset=(float(s[0]), float(s[1]), float(s[2])))
    return dataclasses.replace(cfg, geometry=geometry)
