"""Sweep-rig simulator: raw sensor streams of one joint swept over a spherical cap (seed 002, III-A/B1/B2).

Physical model (SI units; parent frame = world frame, z up, origin at the parent coil's board mid-plane):

* Joint (seed 002, III-B1): fixed-radius spherical pivot without twist at (0, 0, −(``platform_offset`` +
  ``pivot_to_next``)): the parent board sits ``platform_offset`` + ``pivot_to_next`` = 19 mm above the pivot, the
  child board on the sphere of radius ``pivot_radius`` = 10 mm around it. A child direction u ∈ S²
  (u = (0, 0, −1) straight) gives R_rel = exp(rotation_between(e, u)), e = (0, 0, −1), and the child sensor frame
  R_child = R_rel · M with a fixed mount misalignment M. The sensor sits at pivot + pivot_radius·u + R_rel·offset.
  (Placing the sensor 19 mm beyond the pivot and the coil 10 mm above it instead makes the joint nearly
  unobservable from the field direction: for a dipole source the field at the sensor tilts by
  ≈ 1.5·b/(a + b) ≈ 0.98 of the bend, which the sensor frame's own rotation cancels. See `sensor_position`.)
* Coil (seed 002, III-A): `PlanarCoil` in the parent frame, current I scaled so that |B| = ``field_at_neighbour``
  at the straight-pose sensor; first-order current settling i(t) with time constant ``coil_tau`` after each
  switch. Exact for switch intervals ≫ τ (the current at a switch is taken as settled; error e^{−Δt/τ}).
* Magnetometer: conversions at ``rate`` on a free-running clock, each the mean field over the ``window``
  before it is ready: m = S·B + h + n, quantised to ``lsb`` and clipped at ``full_scale``; B = R_childᵀ(B_earth(t)
  + i·B_coil). The master polls every ``poll_period``; a poll returns the latest ready conversion, so stale
  polls repeat bitwise.
* Accelerometer: specific force f = R_childᵀ(a + g ẑ) + bias + noise at ``rate`` (+g up at rest), a the
  sensor's acceleration along the trajectory (central differences of the exact position).
* Module tolerances (`flexlearn.sim.modules`, config block ``module``, docs/modules.md): the sweep's module
  (``module_seed``, −1: ``seed``) has its own pivot radius, joint length, sensor offset, coil offset/tilt and
  magnetometer axes against the accelerometer's; the coil current is set for the nominal design. ``meta['module']``
  records the draw and ``meta['tumble']`` the module's hand-tumble readings (ellipsoid fit, seed 002 III-B3).
* Faulty "non-stationary" poses keep swinging after the move: angle A e^{−τ/T} sin(2πfτ) about an axis ⟂ u
  (smooth onset; fades out during the next move), while the rig reports them stationary.
* Acquisition (seed 002, III-B1/B2): each pose owns a fixed time slot: min-jerk move from the previous pose,
  reported stationary (t_start), hold delay, then coil-off window / 40 ms pulse pairs until the firmware has
  ``min_fresh`` fresh coil-on polls at least ``settle`` after switch-on (≤ ``max_pulses``), a final coil-off
  window (t_end), and idle until the next slot. Fixed slots keep everything vectorised over poses.

Seed notes: the seed's M_e = 2eeᵀ − I (III-B3) maps the label (parent axis in the child frame) to −u under
the no-twist model; the reflection that gives u is I − 2eeᵀ (tests/sim/test_sim_rig.py::test_truth_geometry).
The seed's "near 1 Ω" coil is ≈1.6 Ω with its stated trace (see `flexlearn.sensing.coil`).

Determinism: every random draw comes from a `numpy.random.SeedSequence(cfg.seed)` child stream (targets,
rig error, sensor parameters, timing, noise, faults), so changing a fault rate does not change the targets.
Torch reductions in the Biot–Savart sum may differ in the last bit between thread counts.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

import numpy as np
import torch

import flexlearn
from flexlearn.config import from_dict, to_dict
from flexlearn.lie import rotation_between
from flexlearn.sensing.coil import PlanarCoil
from flexlearn.sensing.streams import RAW_SCHEMA_VERSION, RawSweep
from flexlearn.sim.modules import PlacedCoil, draw_module, tumble_readings
from flexlearn.sim.numpy_lie import exp_so3, single_torch_thread
from flexlearn.sim.rig_config import JointGeometry, RigConfig
from flexlearn.sim.targets import cap_direction, sample_cap_targets

__all__ = ["RigConfig", "simulate_sweep", "child_frame", "sensor_position", "coil_current"]

STRAIGHT = np.array([0.0, 0.0, -1.0])
"""Straight child axis e in the parent frame."""
UP = np.array([0.0, 0.0, 1.0])
_FD_STEP = 1e-3  # [s] central-difference step for the sensor acceleration


def child_frame(u: np.ndarray, mount: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Joint rotation R_rel = exp(rotation_between(e, u)) and sensor frame R_rel·M, both (N, 3, 3).

    ``u`` (N, 3) unit child directions in the parent frame; ``mount`` (3, 3) misalignment M (identity if None).
    """
    e = torch.from_numpy(np.broadcast_to(STRAIGHT, u.shape).copy())
    r_rel = exp_so3(rotation_between(e, torch.from_numpy(np.ascontiguousarray(u, dtype=np.float64))).numpy())
    return r_rel, (r_rel if mount is None else r_rel @ mount)


def sensor_position(u: np.ndarray, r_rel: np.ndarray, cfg: RigConfig) -> np.ndarray:
    """Child magnetometer/IMU position (N, 3) [m] in the parent (coil) frame for directions u (N, 3).

    Reading of seed 002, III-B1 ("pivot radius 10 mm; a 9 mm platform offset (height of sensing
    electronics), and 10 mm before the pivot of the next module"): walking distally from a board, the
    electronics height (9 mm) and the 10 mm to the next pivot put the pivot a = 19 mm below the parent
    board; the child board lies on the pivot's sphere of radius b = 10 mm. With this geometry the field
    direction seen by the child sensor turns by ≈0.5 rad per rad of bend (measured from the coil model);
    with a and b swapped it turns by only 0.02–0.1 rad/rad, and magnetometer noise would be amplified
    10–50× into the joint estimate.
    """
    g = cfg.geometry
    pivot = np.array([0.0, 0.0, -(g.platform_offset + g.pivot_to_next)])
    return pivot + g.pivot_radius * u + r_rel @ np.asarray(g.magnetometer_offset)


def coil_current(coil: PlanarCoil, cfg: RigConfig) -> float:
    """Coil current I [A] giving |B| = ``field_at_neighbour`` at the child sensor in the straight pose."""
    u = STRAIGHT[None]
    pos = sensor_position(u, np.eye(3)[None], cfg)
    b = coil.field(torch.from_numpy(pos)).numpy()
    return float(cfg.acquisition.field_at_neighbour / np.linalg.norm(b))


def _tangent_basis(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal (a, b) ⟂ u (N, 3) each; u must stay away from ±x (true on the cap around −z)."""
    a = np.cross(u, [1.0, 0.0, 0.0])
    a /= np.linalg.norm(a, axis=-1, keepdims=True)
    return a, np.cross(u, a)


def _rotate(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.einsum("nij,nj->ni", exp_so3(w), v)


# ------------------------------------------------------------------------------------------- motion
_SWING_RAMP = 0.05  # [s] smooth onset of a residual swing (keeps velocity and acceleration continuous)


def _smoothstep(x: np.ndarray) -> np.ndarray:
    """Minimum-jerk profile 10x³ − 15x⁴ + 6x⁵ on x clipped to [0, 1] (zero velocity and acceleration at ends)."""
    x = np.clip(x, 0.0, 1.0)
    return x**3 * (10.0 - 15.0 * x + 6.0 * x * x)


@dataclass
class _Motion:
    """Piecewise trajectory of the child direction: min-jerk moves between poses, holds (swinging if faulty)."""

    slot: float
    slot_start: np.ndarray  # (P,) [s]
    move_dur: np.ndarray  # (P,) [s]
    u_prev: np.ndarray  # (P, 3) direction at the start of the move into pose p
    w_move: np.ndarray  # (P, 3) rotation vector from u_prev to u_act
    u_act: np.ndarray  # (P, 3) actual hold direction
    swing_w: np.ndarray  # (P, 3) swing axis × amplitude [rad] (zero unless faulty)
    swing_f: np.ndarray  # (P,) swing frequency [Hz]
    swing_decay: float  # [s] decay time of the residual swing

    def _swing(self, k: np.ndarray, th: np.ndarray) -> np.ndarray:
        """Residual swing angle [rad] of pose k at time th after its reported start (smooth onset)."""
        env = _smoothstep(th / _SWING_RAMP) * np.exp(-th / self.swing_decay)
        return env * np.sin(2.0 * math.pi * self.swing_f[k] * th)

    def direction(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Direction u(t) (N, 3), pose slot index (N,) and mask (N,) of samples held still (no motion).

        Moving: u = exp(s·w) exp((1 − s)·φ_prev(t) a_prev) u_prev with the min-jerk s(τ); a swing of the
        previous pose fades out during the move, so position, velocity and acceleration stay continuous.
        Holding: u = exp(φ(t) a) u_act (φ ≡ 0 unless the pose is a faulty swinging one).
        """
        k = np.clip(np.searchsorted(self.slot_start, t, side="right") - 1, 0, len(self.slot_start) - 1)
        tau = t - self.slot_start[k]
        moving = tau < self.move_dur[k]
        swings = np.any(self.swing_w != 0.0, axis=-1)
        swinging = ~moving & swings[k]
        u = self.u_act[k].copy()
        if moving.any():
            km, tm = k[moving], tau[moving]
            s = _smoothstep(tm / self.move_dur[km])
            base = self.u_prev[km]
            carry = (km > 0) & swings[np.maximum(km - 1, 0)]
            if carry.any():
                kp = km[carry] - 1
                ang = (1.0 - s[carry]) * self._swing(kp, tm[carry] + self.slot - self.move_dur[kp])
                base[carry] = _rotate(ang[:, None] * self.swing_w[kp], base[carry])
            u[moving] = _rotate(s[:, None] * self.w_move[km], base)
        if swinging.any():
            ks = k[swinging]
            u[swinging] = _rotate(
                self._swing(ks, tau[swinging] - self.move_dur[ks])[:, None] * self.swing_w[ks], self.u_act[ks]
            )
        return u, k, ~(moving | swinging)


def _motion(
    cfg: RigConfig, slot: float, move_dur: np.ndarray, u_act: np.ndarray, swing: np.ndarray, rng: np.random.Generator
) -> _Motion:
    p = u_act.shape[0]
    u_prev = np.concatenate([STRAIGHT[None], u_act[:-1]])
    w_move = rotation_between(torch.from_numpy(u_prev), torch.from_numpy(u_act)).numpy()
    a, b = _tangent_basis(u_act)
    psi = rng.uniform(-math.pi, math.pi, p)
    amp = cfg.faults.swing_amplitude * rng.uniform(0.5, 1.5, p) * swing
    swing_w = amp[:, None] * (np.cos(psi)[:, None] * a + np.sin(psi)[:, None] * b)
    swing_f = cfg.faults.swing_frequency * np.asarray(rng.uniform(0.7, 1.3, p))
    return _Motion(slot, np.arange(p) * slot, move_dur, u_prev, w_move, u_act, swing_w, swing_f, cfg.faults.swing_decay)


def _frames(
    motion: _Motion, t: np.ndarray, pose_r: np.ndarray, pose_pos: np.ndarray, mount: np.ndarray, cfg: RigConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sensor frame R_child (N, 3, 3), position (N, 3), pose index (N,) and still mask (N,) at times t."""
    u, k, still = motion.direction(t)
    r = pose_r[k]
    pos = pose_pos[k]
    if (~still).any():
        r_rel, r_child = child_frame(u[~still], mount)
        r[~still] = r_child
        pos[~still] = sensor_position(u[~still], r_rel, cfg)
    return r, pos, k, still


def _positions(motion: _Motion, t: np.ndarray, cfg: RigConfig) -> np.ndarray:
    """Sensor position (N, 3) [m] at times t (the joint rotation is only needed for an off-axis sensor)."""
    u = motion.direction(t)[0]
    offset = np.any(np.asarray(cfg.geometry.magnetometer_offset) != 0.0)
    return sensor_position(u, child_frame(u)[0] if offset else np.zeros((u.shape[0], 3, 3)), cfg)


# ----------------------------------------------------------------------------------------- schedule
@dataclass
class _Clocks:
    """Magnetometer conversion clock (ready at c0 + n·Tc) and the master's poll instants."""

    c0: float
    tc: float
    poll_t: np.ndarray  # (N_p,) [s]
    poll_period: float

    def conversion(self, t: np.ndarray) -> np.ndarray:
        """Index of the latest conversion ready at time t (−1 before the first)."""
        return np.floor((t - self.c0) / self.tc).astype(np.int64)

    def count_fresh(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Number of polls in [a, b] (per row) that return a new conversion (what the firmware counts)."""
        width = int(math.ceil(float(np.max(b - a, initial=0.0)) / self.poll_period)) + 4
        j = np.floor((a - self.poll_t[0]) / self.poll_period).astype(np.int64)[:, None] - 1 + np.arange(width)
        valid = (j >= 1) & (j < len(self.poll_t))
        j = np.clip(j, 1, len(self.poll_t) - 1)
        t = self.poll_t[j]
        fresh = self.conversion(t) != self.conversion(self.poll_t[j - 1])
        inside = (t >= a[:, None]) & (t <= b[:, None])
        return (fresh & inside & valid).sum(axis=1)


@dataclass
class _Schedule:
    """What the rig controller and the coil firmware did, per pose (times [s])."""

    slot: float
    move_dur: np.ndarray  # (P,)
    t_start: np.ndarray  # (P,)
    t_end: np.ndarray  # (P,)
    t_on: np.ndarray  # (P, K), NaN where the pulse was not fired
    t_off: np.ndarray  # (P, K)
    fresh: np.ndarray  # (P,) fresh settled coil-on polls counted by the firmware
    t_total: float


def _slot_length(cfg: RigConfig) -> float:
    acq, longest = cfg.acquisition, max(cfg.acquisition.pulse, 1.25 * cfg.faults.short_pulse)
    per_pulse = acq.off_window + longest + 2 * acq.switch_jitter
    return (
        acq.move_duration
        + acq.move_jitter
        + acq.hold_delay
        + acq.max_pulses * per_pulse
        + acq.off_window
        + 2 * acq.poll_period
    )


def _schedule(cfg: RigConfig, short: np.ndarray, rng: np.random.Generator) -> tuple[_Schedule, _Clocks]:
    """Pose slots, coil pulses (firmware rule of seed 002 III-B1/B2) and the sensor clocks."""
    acq, p, kmax = cfg.acquisition, cfg.n_poses, cfg.acquisition.max_pulses
    slot = _slot_length(cfg)
    t_total = p * slot
    tc = 1.0 / cfg.magnetometer.rate
    c0 = rng.uniform(0.0, tc)
    q0 = c0 + rng.uniform(0.0, acq.poll_period)
    n_poll = int(math.floor((t_total - q0) / acq.poll_period)) + 1
    poll_t = q0 + acq.poll_period * np.arange(n_poll) + rng.uniform(-acq.poll_jitter, acq.poll_jitter, n_poll)
    clocks = _Clocks(c0, tc, poll_t, acq.poll_period)

    move_dur = acq.move_duration + rng.uniform(-acq.move_jitter, acq.move_jitter, p)
    t_start = np.arange(p) * slot + move_dur
    jit = rng.uniform(-acq.switch_jitter, acq.switch_jitter, (p, kmax, 2))
    length = np.where(short[:, None], cfg.faults.short_pulse * rng.uniform(0.75, 1.25, (p, kmax)), acq.pulse)
    t_on = np.full((p, kmax), np.nan)
    t_off = np.full((p, kmax), np.nan)
    fresh = np.zeros(p, dtype=np.int64)
    active = np.ones(p, dtype=bool)
    last_off = t_start.copy()
    cursor = t_start + acq.hold_delay + acq.off_window
    for k in range(kmax):  # the firmware loop: at most max_pulses pulses
        on = cursor + jit[:, k, 0]
        off = on + length[:, k] + jit[:, k, 1]
        t_on[active, k], t_off[active, k] = on[active], off[active]
        fresh += np.where(active, clocks.count_fresh(on + acq.settle, off), 0)
        last_off = np.where(active, off, last_off)
        active &= fresh < acq.min_fresh
        cursor = off + acq.off_window
    t_end = last_off + acq.off_window
    return _Schedule(slot, move_dur, t_start, t_end, t_on, t_off, fresh, t_total), clocks


def _coil_integral(t: np.ndarray, ts: np.ndarray, state: np.ndarray, tau: float) -> np.ndarray:
    """F(t) = ∫_{−∞}^t c(t′) dt′ [s] of the normalised coil current c ∈ [0, 1] (first-order settling).

    After switch k (time ts[k], new state s_k, previous state s_{k−1}): c = s_k + (s_{k−1} − s_k) e^{−(t−t_k)/τ}.
    """
    if ts.size == 0:
        return np.zeros_like(t)
    prev = np.concatenate([[0.0], state[:-1]])

    def partial(k: np.ndarray, d: np.ndarray) -> np.ndarray:
        return state[k] * d + (prev[k] - state[k]) * tau * -np.expm1(-d / tau)

    idx = np.arange(ts.size - 1)
    cum = np.concatenate([[0.0], np.cumsum(partial(idx, np.diff(ts)))])
    k = np.searchsorted(ts, t, side="right") - 1
    kk = np.maximum(k, 0)
    return np.where(k >= 0, cum[kk] + partial(kk, t - ts[kk]), 0.0)


# ------------------------------------------------------------------------------------------ sensors
@dataclass
class _Sensors:
    mount: np.ndarray  # (3, 3) sensor frame in the child board frame
    hard_iron: np.ndarray  # (3,) [T]
    soft_iron: np.ndarray  # (3, 3)
    accel_bias: np.ndarray  # (3,) [m/s^2]
    earth: np.ndarray  # (3,) [T] world frame
    drift_period: np.ndarray  # (3,) [s]
    drift_phase: np.ndarray  # (3,) [rad]
    mag_axes: np.ndarray = dataclasses.field(default_factory=lambda: np.eye(3))  # Q (3, 3), `flexlearn.sim.modules`

    @property
    def mag_gain(self) -> np.ndarray:
        """S Qᵀ (3, 3): accelerometer-frame field → magnetometer reading (gain, soft iron, axes)."""
        return self.soft_iron @ self.mag_axes.T

    def ambient(self, t: np.ndarray, drift: float) -> np.ndarray:
        """Earth field in the world frame (N, 3) [T] with slow sinusoidal drift."""
        return self.earth + drift * np.sin(2.0 * math.pi * t[:, None] / self.drift_period + self.drift_phase)


def _sensors(cfg: RigConfig, rng: np.random.Generator) -> _Sensors:
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
    return _Sensors(
        mount,
        rng.normal(0.0, cfg.magnetometer.hard_iron, 3),
        np.eye(3) + 0.5 * (e + e.T),
        rng.normal(0.0, cfg.accelerometer.bias, 3),
        earth,
        amb.drift_period * rng.uniform(0.5, 1.5, 3),
        rng.uniform(-math.pi, math.pi, 3),
    )


@dataclass(frozen=True)
class _CoilDrive:
    """The parent coil as driven during the sweep: this module's placed coil, its current and its switchings."""

    coil: PlacedCoil
    current: float  # [A] drive current (set for the nominal design, `coil_current`)
    switch_t: np.ndarray  # (N_c,) [s] switch instants in time order
    switch_on: np.ndarray  # (N_c,) bool, the coil state after each switch


def _mag_stream(
    cfg: RigConfig,
    clocks: _Clocks,
    motion: _Motion,
    sens: _Sensors,
    drive: _CoilDrive,
    pose: dict[str, np.ndarray],
    rng: np.random.Generator,
    frng: np.random.Generator,
) -> tuple[np.ndarray, dict[str, int]]:
    """Polled magnetometer readings (N_p, 3) [T] and fault counts (noise from ``rng``, faults from ``frng``)."""
    mc = cfg.magnetometer
    switch_on = drive.switch_on.astype(np.float64)
    n_conv = int(clocks.conversion(clocks.poll_t[-1:])[0]) + 1
    t_ready = clocks.c0 + clocks.tc * np.arange(n_conv)
    t_mid = t_ready - 0.5 * mc.window
    r, pos, k, still = _frames(motion, t_mid, pose["r"], pose["pos"], sens.mount, cfg)
    field = sens.ambient(t_mid, cfg.ambient.drift)  # world frame
    mean_i = (
        _coil_integral(t_ready, drive.switch_t, switch_on, cfg.acquisition.coil_tau)
        - _coil_integral(t_ready - mc.window, drive.switch_t, switch_on, cfg.acquisition.coil_tau)
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


def _accel_stream(
    cfg: RigConfig,
    sched: _Schedule,
    motion: _Motion,
    sens: _Sensors,
    pose: dict[str, np.ndarray],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Accelerometer sample times (N_a,) [s] and specific force (N_a, 3) [m/s²] in the sensor frame."""
    ac = cfg.accelerometer
    period = 1.0 / ac.rate
    t = rng.uniform(0.0, period) + period * np.arange(int(sched.t_total * ac.rate))
    r, pos, _, still = _frames(motion, t, pose["r"], pose["pos"], sens.mount, cfg)
    acc = np.zeros((t.size, 3))
    moving = ~still
    if moving.any():
        tm = t[moving]
        x = [_positions(motion, tm + d, cfg) for d in (-_FD_STEP, _FD_STEP)]
        acc[moving] = (x[0] - 2.0 * pos[moving] + x[1]) / _FD_STEP**2
    f_world = acc + ac.gravity * UP
    f = np.einsum("nkj,nk->nj", r, f_world) + sens.accel_bias + rng.normal(0.0, ac.noise, (t.size, 3))
    return t, f


# --------------------------------------------------------------------------------------------- main
def _perturb(targets: np.ndarray, cfg: RigConfig, rng: np.random.Generator) -> np.ndarray:
    """Actual directions: targets rotated by an RMS ``positioning_error`` ⟂ tilt, clamped to the limit."""
    a, b = _tangent_basis(targets)
    g = rng.normal(0.0, cfg.geometry.positioning_error / math.sqrt(2.0), (targets.shape[0], 2))
    u = _rotate(g[:, :1] * a + g[:, 1:] * b, targets)
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    col = np.arccos(np.clip(-u[:, 2], -1.0, 1.0))
    over = col > cfg.geometry.mechanical_limit
    u[over] = cap_direction(cfg.geometry.mechanical_limit, np.arctan2(u[over, 1], u[over, 0]))
    return u


def _tumble_meta(cfg: RigConfig, sens: _Sensors, draw: Any, rng: np.random.Generator) -> dict[str, Any]:
    """The module's hand-tumble recording (``module.tumble_samples`` readings [T]) for the ellipsoid fit."""
    n = cfg.module.tumble_samples
    mc = cfg.magnetometer
    m = (
        tumble_readings(n, sens.earth, sens.soft_iron, draw.mag_axes, sens.hard_iron, mc.noise, mc.lsb, rng)
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


def _rig_meta(g: JointGeometry, sched: _Schedule) -> dict[str, float]:
    """``meta['rig']``: the nominal joint geometry [m, rad], the pose slot and the sweep duration [s]."""
    return {
        "pivot_to_next": g.pivot_to_next,
        "pivot_radius": g.pivot_radius,
        "platform_offset": g.platform_offset,
        "pivot_spacing": g.pivot_to_next + g.pivot_radius + g.platform_offset,
        "mechanical_limit": g.mechanical_limit,
        "max_colatitude": g.max_colatitude,
        "slot": sched.slot,
        "duration": sched.t_total,
    }


def _coil_meta(cfg: RigConfig, drive: _CoilDrive) -> dict[str, Any]:
    """``meta['coil']``: the coil config, its resistance [Ω], drive current [A] and voltage [V], trace, moment."""
    coil = drive.coil.coil
    resistance = float(coil.resistance())
    return {
        **to_dict(cfg.coil),
        "resistance": resistance,
        "current": drive.current,
        "voltage": drive.current * resistance,
        "trace_length": float(coil.trace_length()),
        "moment_per_ampere": coil.moment().tolist(),
    }


def _sensor_meta(cfg: RigConfig, sens: _Sensors, counts: dict[str, int]) -> dict[str, Any]:
    """``meta['sensors']``: each sensor's config and this module's draws (iron, mount, bias, earth field)."""
    return {
        "magnetometer": {
            **to_dict(cfg.magnetometer),
            "hard_iron": sens.hard_iron.tolist(),
            "soft_iron": sens.soft_iron.tolist(),
            "mount": sens.mount.tolist(),
            "conversions": counts["conversions"],
        },
        "accelerometer": {**to_dict(cfg.accelerometer), "bias": sens.accel_bias.tolist()},
        "ambient": {**to_dict(cfg.ambient), "earth": sens.earth.tolist()},
    }


def simulate_sweep(cfg: Union[RigConfig, Mapping[str, Any], None] = None) -> RawSweep:
    """Simulate a full stationary-pose sweep; deterministic given ``cfg.seed``.

    Args:
        cfg: a `RigConfig`, a plain mapping for ``from_dict(RigConfig, ·)``, or None for the defaults.

    Returns:
        `RawSweep` with mag/accel/coil streams, the pose log (target = commanded direction), ``truth`` (label
        = R_childᵀ ẑ, u = actual direction, db = S·R_childᵀ·I·B_coil in the sensor frame [T]) and ``meta``.
    """
    if cfg is None:
        cfg = RigConfig()
    elif not isinstance(cfg, RigConfig):
        cfg = from_dict(RigConfig, cfg)
    cfg.validate()
    with single_torch_thread():
        return _simulate(cfg)


def _simulate(cfg: RigConfig) -> RawSweep:
    """Body of `simulate_sweep` for a validated config."""
    names = ("targets", "rig", "sensors", "timing", "mag", "accel", "faults", "motion", "module")
    seqs = np.random.SeedSequence(cfg.seed).spawn(len(names))
    module_seed = cfg.seed if cfg.module_seed < 0 else cfg.module_seed
    if module_seed != cfg.seed:  # the module's own draws (sensors, tolerances) come from its seed
        own = np.random.SeedSequence(module_seed).spawn(len(names))
        seqs[2], seqs[8] = own[2], own[8]
    rngs = dict(zip(names, (np.random.default_rng(s) for s in seqs)))
    p, fr = cfg.n_poses, rngs["faults"]
    swing = fr.uniform(size=p) < cfg.faults.swing_rate
    short = fr.uniform(size=p) < cfg.faults.short_pulse_rate

    targets = sample_cap_targets(p, cfg.geometry.max_colatitude, cfg.geometry.n_cells, rngs["targets"])
    u_act = _perturb(targets, cfg, rngs["rig"])
    sens = _sensors(cfg, rngs["sensors"])
    draw = draw_module(cfg.module, rngs["module"])
    sens.mag_axes = draw.mag_axes
    nominal = cfg
    cfg = dataclasses.replace(cfg, geometry=draw.geometry(cfg.geometry))  # this module's joint
    coil = PlacedCoil(PlanarCoil(cfg.coil), draw)
    current = coil_current(coil.coil, nominal)  # drive set for the design
    r_rel, r_child = child_frame(u_act, sens.mount)
    pos = sensor_position(u_act, r_rel, cfg)
    pose = {"r": r_child, "pos": pos, "b": coil.field(torch.from_numpy(pos)).numpy()}

    sched, clocks = _schedule(cfg, short, rngs["timing"])
    motion = _motion(cfg, sched.slot, sched.move_dur, u_act, swing, rngs["motion"])
    fired = np.isfinite(sched.t_on)
    coil_t = np.stack([sched.t_on, sched.t_off], axis=-1)[fired]  # (N_c/2, 2) in time order
    coil_on = np.broadcast_to(np.array([True, False]), coil_t.shape).reshape(-1)
    coil_t = coil_t.reshape(-1)
    drive = _CoilDrive(coil, current, coil_t, coil_on)
    mag, counts = _mag_stream(cfg, clocks, motion, sens, drive, pose, rngs["mag"], fr)
    accel_t, accel = _accel_stream(cfg, sched, motion, sens, pose, rngs["accel"])

    truth = {"pose_id": np.arange(p, dtype=np.int64)}
    db = current * np.einsum("ij,nkj,nk->ni", sens.mag_gain, r_child, pose["b"])
    for name, arr in (("label", r_child[:, 2, :]), ("u", u_act), ("db", db)):  # label = R_childᵀ ẑ
        for i, c in enumerate("xyz"):
            truth[f"{name}_{c}"] = np.ascontiguousarray(arr[:, i])
    meta = {
        "units": META_UNITS,
        "frames": "vectors in the child sensor frame; target/u in the parent frame (z up, straight = -z)",
        "rig": _rig_meta(nominal.geometry, sched),
        "coil": _coil_meta(cfg, drive),
        "module": {"seed": module_seed, "tolerances": to_dict(cfg.module), "draw": draw.as_dict()},
        "tumble": _tumble_meta(cfg, sens, draw, rngs["module"]),
        "sensors": _sensor_meta(cfg, sens, counts),
        "acquisition": to_dict(cfg.acquisition),
        "faults": {
            "swing_poses": np.flatnonzero(swing).tolist(),
            "short_pulse_poses": np.flatnonzero(short).tolist(),
            "nan_polls": counts["nan_polls"],
            "saturated_conversions": counts["saturated_conversions"],
        },
        "firmware_fresh": {"min": int(sched.fresh.min()), "mean": float(sched.fresh.mean())},
        "seed": cfg.seed,
        "config": to_dict(nominal),
        "provenance": {
            "simulator": "flexlearn.sim.rig",
            "version": flexlearn.__version__,
            "raw_schema_version": RAW_SCHEMA_VERSION,
        },
    }
    streams = {
        "mag": {"t": clocks.poll_t, "mag": mag},
        "accel": {"t": accel_t, "accel": accel},  # by `STREAMS`
        "coil": {"t": coil_t, "on": coil_on},
        "poses": {
            "pose_id": np.arange(p, dtype=np.int64),
            "t_start": sched.t_start,
            "t_end": sched.t_end,
            "target": targets,
        },
        "truth": truth,
    }
    return RawSweep(streams=streams, meta=meta)
