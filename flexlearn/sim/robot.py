"""Nine-module continuum-robot simulator: ground-truth backbone + the raw streams of seed 002 (III-A, III-B2, IV).

Kinematics (SI units, world z up, base fixed, straight = hanging along e = −ẑ): module k = 0..N (0 = base) has
rotation R_k, R_0 = I, R_k = R_{k−1} exp([β_k]×) exp(τ_k [e]×) with a bend β_k ⟂ e (spherical pivot, seed III-B1)
and an axial twist τ_k (zero except in manual manipulation). Joint k's child direction u_k = R_k e. Pivot
points (the estimator's backbone, seed III-B4): p_0 = 0, p_k = p_{k−1} + L s_k u_k with L = 29 mm and a length
scale s_k ≤ 1 (< 1 only under obstacle compression, which breaks the estimator's fixed-length assumption).
The joint/coil geometry between module k−1 (coil) and k (receiver) is the rig's (`flexlearn.sim.rig`):
`sensor_position`, `coil_current`, `PlanarCoil` and the rig's sensor-model config blocks are reused, and every joint
draws its own module tolerances (config block ``module``, `flexlearn.sim.modules`, docs/modules.md) from the
hardware stream: pivot radius, joint length, sensor offset, coil offset/tilt, magnetometer axes.

Sensors (per module, sensor frame = R_k M_k with a mount misalignment M_k):
* IMU game rotation vector (III-A): q_k = quat(H_k(t) R_k M_k), H_k = Rz(ψ_k), ψ_k = ψ_k0 (arbitrary, uniform in
  ±``initial_heading``) + d_k·(angular travel of module k) with |d_k| ≈ ``heading_drift`` (0.65 %), plus rotation
  noise. Read sequentially within each attitude sweep (``sweep_period`` = 60 ms ≈ 16.7 Hz, module k at
  t + k·``module_read``), stamped with the sweep time.
* Accelerometer: f = (R_k M_k)ᵀ(a_k + g ẑ) + bias + noise, a_k the board acceleration (central differences).
* Magnetometer of module k ≥ 1: free-running 90 Hz conversions, each the mean over its window; reading
  m = S_k B_s + h_k + noise, quantised and clipped (rig `MagnetometerConfig`), B_s = (R_k M_k)ᵀ B_earth(t) +
  i(t) (R_rel,k M_k)ᵀ B_coil(pos_k) with the parent coil's field. Acquisition (III-B2): every ``pair_period`` =
  300 ms the coil of module (n mod N) fires for 40 ms; the master polls all receivers every ``mag_round`` = 3 ms
  from ``pre_window`` before the pulse to ``post_window`` after it (stale polls repeat the last conversion
  bitwise). Each segment thus gets a fix every N·300 ms ≈ 2.7 s. Simplifications: the coil current is a square
  pulse (τ ≈ 1 ms ≪ the 5 ms window is neglected); only the parent coil's field is simulated at a receiver (the
  estimator collects baselines only while no coil fires, so farther coils do not enter).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Union

import numpy as np
import torch

from flexlearn.config import check, from_dict
from flexlearn.lie import rotation_between
from flexlearn.sensing.coil import CoilConfig, PlanarCoil
from flexlearn.sim.modules import PlacedCoil, draw_module
from flexlearn.sim.numpy_lie import exp_so3, log_so3, quat_of, single_torch_thread
from flexlearn.sim.rig import coil_current, sensor_position
from flexlearn.sim.rig_config import (
    AccelerometerConfig,
    AcquisitionConfig,
    AmbientConfig,
    JointGeometry,
    MagnetometerConfig,
    ModuleTolerances,
    RigConfig,
    validate_sensor_blocks,
)

__all__ = ["RobotConfig", "RobotRecording", "JointMotion", "simulate_robot", "forward_kinematics", "rig_pairs"]

E = np.array([0.0, 0.0, -1.0])
UP = np.array([0.0, 0.0, 1.0])


@dataclass
class RobotBlock:
    """Robot-level parameters (SI units)."""

    n_segments: int = 9
    length: float = 0.029  # pivot spacing L [m]
    sweep_period: float = 0.060  # attitude sweep [s] (16.7 Hz)
    module_read: float = 0.0052  # per-module read offset within a sweep [s]
    pair_period: float = 0.300  # one coil pulse every T_pair [s]
    mag_round: float = 0.003  # magnetometer poll round during bursts [s]
    pre_window: float = 0.060  # coil-off polling before a pulse (baseline) [s]
    post_window: float = 0.012  # polling after a pulse [s]
    initial_heading: float = math.pi  # IMU initial heading uniform in ±this [rad]
    heading_drift: float = 0.0065  # heading drift per rad of angular travel
    quat_noise: float = math.radians(0.2)  # IMU orientation noise (per axis) [rad]
    mount_misalignment: float = math.radians(1.0)

    def validate(self, where: str = "robot") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        check(self.n_segments >= 1, f"{where}.n_segments", self.n_segments, "must be >= 1")
        for k in ("length", "sweep_period", "module_read", "pair_period", "mag_round"):
            check(getattr(self, k) > 0, f"{where}.{k}", getattr(self, k), "must be > 0")
        for k in ("pre_window", "post_window", "initial_heading", "heading_drift", "quat_noise", "mount_misalignment"):
            check(getattr(self, k) >= 0, f"{where}.{k}", getattr(self, k), "must be >= 0")


@dataclass
class RobotConfig:
    """Everything `simulate_robot` needs besides the motion; sensor blocks are the rig's."""

    seed: int = 0
    hardware_seed: int = -1  # mounts, soft/hard iron, biases, drift rates, calibration data; −1: ``seed``
    robot: RobotBlock = field(default_factory=RobotBlock)
    coil: CoilConfig = field(default_factory=CoilConfig)
    geometry: JointGeometry = field(default_factory=JointGeometry)
    magnetometer: MagnetometerConfig = field(default_factory=MagnetometerConfig)
    accelerometer: AccelerometerConfig = field(default_factory=AccelerometerConfig)
    ambient: AmbientConfig = field(default_factory=AmbientConfig)
    acquisition: AcquisitionConfig = field(default_factory=AcquisitionConfig)
    module: ModuleTolerances = field(default_factory=ModuleTolerances)  # each joint draws its own module

    def validate(self) -> None:
        """Check every block (errors name ``block.key``); the sensor blocks as the rig does.

        The shared sensor blocks and their poll-period constraint go through
        `flexlearn.sim.rig_config.validate_sensor_blocks`, the same check as `RigConfig.validate`.

        Raises:
            ConfigError: a value is out of range; the message names its key path.
        """
        check(self.seed >= 0, "seed", self.seed, "must be >= 0")
        check(self.hardware_seed >= -1, "hardware_seed", self.hardware_seed, "must be >= -1")
        self.robot.validate("robot")
        validate_sensor_blocks(self)
        self.module.validate("module")

    def rig(self) -> RigConfig:
        """The rig config with the same geometry/coil/sensor blocks (for `coil_current`, `sensor_position`)."""
        return RigConfig(
            coil=self.coil,
            geometry=self.geometry,
            magnetometer=self.magnetometer,
            accelerometer=self.accelerometer,
            ambient=self.ambient,
            acquisition=self.acquisition,
        )


JointMotion = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""t (T,) [s] → (bend β (T, N, 3) ⟂ e [rad], twist τ (T, N) [rad], length scale s (T, N))."""


@dataclass
class RobotRecording:
    """Raw streams + ground truth of one run. Shapes: K attitude sweeps, M magnetometer rounds, N segments.

    ``att_t`` (K,) [s]; ``quats`` (K, N+1, 4); ``accel`` (K, N+1, 3) [m/s²]; ``mag_t`` (M,); ``mags`` (M, N, 3) [T]
    (row j = receiver module j+1); ``coil`` (M,) firing module or −1; truth at ``att_t``: ``points`` (K, N+1, 3)
    [m], ``u`` (K, N, 3), ``rot`` (K, N+1, 3, 3); ``cal`` (N, C, 3) [T] ambient readings of each receiver rotated
    through all orientations (for `fit_ellipsoid`); ``meta`` sensor parameters.
    """

    att_t: np.ndarray
    quats: np.ndarray
    accel: np.ndarray
    mag_t: np.ndarray
    mags: np.ndarray
    coil: np.ndarray
    points: np.ndarray
    u: np.ndarray
    rot: np.ndarray
    cal: np.ndarray
    meta: dict[str, Any]

    @property
    def height(self) -> np.ndarray:
        """True tip height above straight, h = Σ L s_k (1 + u_k,z) = p_N,z + N L (K,) [m] (seed III-C)."""
        return self.points[:, -1, 2] + self.meta["n_segments"] * self.meta["length"]

    def frames(self) -> list[tuple[float, str, int]]:
        """Time-ordered event list (t, "att" | "mag", index) for replaying the streams."""
        ev = [(float(t), "att", i) for i, t in enumerate(self.att_t)] + [
            (float(t), "mag", i) for i, t in enumerate(self.mag_t)
        ]
        ev.sort(key=lambda x: (x[0], x[1] == "att"))
        return ev


def forward_kinematics(
    bend: np.ndarray, twist: np.ndarray, scale: np.ndarray, length: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Module rotations R (T, N+1, 3, 3), relative rotations (T, N, 3, 3), directions u (T, N, 3), pivots (T, N+1, 3).

    R_k = R_{k−1} exp([β_k]×) exp(τ_k [e]×), u_k = R_k e, p_k = p_{k−1} + L s_k u_k (seed 002, III-B1/B4).

    Args:
        bend: bend rotation vectors β (T, N, 3) [rad], ⟂ e.
        twist: twist angles τ (T, N) [rad].
        scale: length scales s (T, N) of the segments.
        length: nominal pivot spacing L [m].

    Returns:
        (R, relative rotations, u, pivots [m]); the base module is R = I at the origin.
    """
    t_n, n = twist.shape
    rel = exp_so3(bend) @ exp_so3(twist[..., None] * E)
    rot = np.empty((t_n, n + 1, 3, 3))
    rot[:, 0] = np.eye(3)
    for k in range(n):
        rot[:, k + 1] = rot[:, k] @ rel[:, k]
    u = rot[:, 1:] @ E
    pts = np.concatenate([np.zeros((t_n, 1, 3)), np.cumsum(length * scale[..., None] * u, axis=1)], axis=1)
    return rot, rel, u, pts


def rig_pairs(
    n: int, max_colatitude: float, cfg: Optional[RobotConfig] = None, seed: int = 0, noise: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Noise-free (or noisy) rig training pairs: ΔB (n, 3) [T] in the child frame and the label R_relᵀ ẑ (n, 3).

    Directions uniform on the cap cos λ ~ U[cos λ_max, 1] (seed 002, III-B1); no mount error or soft iron, so a
    model fitted on them matches a calibrated, aligned receiver. Uses the rig's geometry, coil and current.

    Args:
        n: number of pairs.
        max_colatitude: cap half-angle λ_max [rad].
        cfg: the robot configuration (its rig blocks); None: the default `RobotConfig`.
        seed: seed of the directions and the noise.
        noise: field noise standard deviation per axis [T].

    Returns:
        (ΔB (n, 3) [T], label (n, 3)).
    """
    cfg = cfg or RobotConfig()
    rcfg = cfg.rig()
    g = np.random.default_rng(seed)
    c = g.uniform(math.cos(max_colatitude), 1.0, n)
    az = g.uniform(-math.pi, math.pi, n)
    s = np.sqrt(1 - c * c)
    u = np.stack([s * np.cos(az), s * np.sin(az), -c], -1)
    r_rel = exp_so3(rotation_between(torch.from_numpy(np.broadcast_to(E, u.shape).copy()), torch.from_numpy(u)).numpy())
    coil = PlanarCoil(cfg.coil)
    cur = coil_current(coil, rcfg)
    b = cur * coil.field(torch.from_numpy(sensor_position(u, r_rel, rcfg))).numpy()
    db = np.einsum("nkj,nk->nj", r_rel, b) + g.normal(0.0, noise, (n, 3))
    return db, r_rel[:, 2, :]


def _mag_schedule(cfg: RobotConfig, duration: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Poll times (M,), firing coil per poll (M,), pulse on/off times (P,) each."""
    rb = cfg.robot
    n_p = int(math.floor((duration - rb.pre_window - cfg.acquisition.pulse - rb.post_window) / rb.pair_period))
    t_on = rb.pre_window + rb.pair_period * np.arange(max(n_p, 0))
    t_off = t_on + cfg.acquisition.pulse
    polls, coils = [], []
    for k, (a, b) in enumerate(zip(t_on, t_off)):
        tt = np.arange(a - rb.pre_window, b + rb.post_window, rb.mag_round)
        polls.append(tt)
        coils.append(np.where((tt >= a) & (tt < b), k % rb.n_segments, -1))
    if not polls:
        return np.zeros(0), np.zeros(0, dtype=np.int64), t_on, t_off
    return np.concatenate(polls), np.concatenate(coils).astype(np.int64), t_on, t_off


def simulate_robot(
    motion: JointMotion, duration: float, cfg: Union[RobotConfig, Mapping[str, Any], None] = None, n_cal: int = 400
) -> RobotRecording:
    """Simulate ``duration`` [s] of ``motion`` (see `JointMotion`); deterministic given ``cfg.seed``.

    The robot must start straight (the reference quaternions q⁰ are the first sweep, seed III-B3).

    Args:
        motion: joint motion t → (bend, twist, length scale) (`JointMotion`).
        duration: simulated time [s].
        cfg: the configuration, or a plain mapping of it; None: the default `RobotConfig`.
        n_cal: readings per receiver of the calibration tumble.

    Returns:
        The raw streams and ground truth.

    Raises:
        ConfigError: ``cfg`` has an unknown key or a value out of range.
    """
    if cfg is None:
        cfg = RobotConfig()
    elif not isinstance(cfg, RobotConfig):
        cfg = from_dict(RobotConfig, cfg)
    cfg.validate()
    with single_torch_thread():
        return _simulate(motion, duration, cfg, n_cal)


@dataclass
class RobotHardware:
    """One robot's fixed draws (hardware stream): module tolerances, mounts, heading drift, magnetometer and
    accelerometer errors, ambient-field drift, magnetometer conversion phases. Shapes: N joints, N+1 modules."""

    draws: list  # (N,) `flexlearn.sim.modules` tolerance draw per joint
    mount: np.ndarray  # (N+1, 3, 3) mount misalignment M_k
    psi0: np.ndarray  # (N+1,) initial heading [rad]
    drift: np.ndarray  # (N+1,) heading drift per radian of travel
    soft: np.ndarray  # (N, 3, 3) soft-iron matrix S_k
    hard: np.ndarray  # (N, 3) hard-iron offset [T]
    acc_bias: np.ndarray  # (N+1, 3) accelerometer bias [m/s^2]
    earth: np.ndarray  # (3,) ambient field [T]
    drift_period: np.ndarray  # (3,) ambient drift periods [s]
    drift_phase: np.ndarray  # (3,) ambient drift phases [rad]
    c0: np.ndarray  # (N,) first conversion instant of each magnetometer [s]

    def ambient(self, t: np.ndarray, drift: float) -> np.ndarray:
        """(T, 3) ambient field [T] at times t (T,): B_earth + drift·sin(2πt/T_i + φ_i).

        Args:
            t: times (T,) [s].
            drift: drift amplitude per axis [T].

        Returns:
            The field (T, 3) [T].
        """
        return self.earth + drift * np.sin(2 * math.pi * t[:, None] / self.drift_period + self.drift_phase)


def _draw_hardware(cfg: RobotConfig, pr: np.random.Generator, modules: np.random.Generator) -> RobotHardware:
    """The robot's hardware draws, in the stream order every recording of seed/hardware_seed relies on."""
    rb, mc, ac, amb = cfg.robot, cfg.magnetometer, cfg.accelerometer, cfg.ambient
    n = rb.n_segments
    # joint j (coil of module j−1, receiver j): its own tolerance draw (`flexlearn.sim.modules`)
    draws = [draw_module(cfg.module, modules) for _ in range(n)]
    axis = pr.normal(size=(n + 1, 3))
    mount = exp_so3(rb.mount_misalignment * (axis / np.linalg.norm(axis, axis=-1, keepdims=True)))
    psi0 = pr.uniform(-rb.initial_heading, rb.initial_heading, n + 1)
    drift = rb.heading_drift * pr.choice([-1.0, 1.0], n + 1) * pr.uniform(0.5, 1.5, n + 1)
    e_soft = pr.normal(0.0, mc.soft_iron, (n, 3, 3))
    soft = np.eye(3) + 0.5 * (e_soft + np.swapaxes(e_soft, 1, 2))
    hard = pr.normal(0.0, mc.hard_iron, (n, 3))
    acc_bias = pr.normal(0.0, ac.bias, (n + 1, 3))
    earth = amb.magnitude * np.array(
        [
            math.cos(amb.inclination) * math.cos(amb.declination),
            math.cos(amb.inclination) * math.sin(amb.declination),
            -math.sin(amb.inclination),
        ]
    )
    drift_period = amb.drift_period * pr.uniform(0.5, 1.5, 3)
    drift_phase = pr.uniform(-math.pi, math.pi, 3)
    c0 = pr.uniform(0.0, 1.0 / mc.rate, n)
    return RobotHardware(draws, mount, psi0, drift, soft, hard, acc_bias, earth, drift_period, drift_phase, c0)


def _attitude_streams(
    kin: Callable,
    hw: RobotHardware,
    cfg: RobotConfig,
    duration: float,
    rng_imu: np.random.Generator,
    rng_acc: np.random.Generator,
) -> dict[str, np.ndarray]:
    """Game rotation vectors and accelerometer samples of every attitude sweep (see the module docstring).

    Returns att_t (K,), quats (K, N+1, 4), accel (K, N+1, 3) [m/s^2] and the truth rot (K, N+1, 3, 3),
    u (K, N+1, 3), points (K, N+1, 3) [m] at the sweep times."""
    rb, ac = cfg.robot, cfg.accelerometer
    n = rb.n_segments
    att_t = np.arange(0.0, duration, rb.sweep_period)
    k_n = att_t.size
    offs = rb.module_read * np.arange(n + 1)
    ts = (att_t[:, None] + offs[None]).reshape(-1)  # (K·(N+1),) read instants
    rot_s = kin(ts)[0].reshape(k_n, n + 1, n + 1, 3, 3)
    rot_read = rot_s[:, np.arange(n + 1), np.arange(n + 1)]  # module k at its own instant
    # angular travel of each module → heading drift
    step = np.linalg.norm(log_so3(np.swapaxes(rot_read[:-1], -1, -2) @ rot_read[1:]), axis=-1)
    travel = np.concatenate([np.zeros((1, n + 1)), np.cumsum(step, axis=0)])
    heading = exp_so3((hw.psi0 + hw.drift * travel)[..., None] * UP)
    noise = exp_so3(rng_imu.normal(0.0, rb.quat_noise, (k_n, n + 1, 3)))
    quats = quat_of(heading @ rot_read @ hw.mount @ noise)
    # accelerometers: board k at pivot_k + r u_k (k ≥ 1), base board fixed; central differences
    pivot_radius = cfg.geometry.pivot_radius

    def boards(t: np.ndarray) -> np.ndarray:
        _, _, u, pts = kin(t)
        return np.concatenate([np.zeros((t.size, 1, 3)), pts[:, :-1] + pivot_radius * u], axis=1)

    h = 1e-3
    acc = (boards(att_t - h) - 2 * boards(att_t) + boards(att_t + h)) / h**2
    rot_t, _, u_t, pts_t = kin(att_t)
    f = (
        np.einsum("tkij,tki->tkj", rot_t @ hw.mount, acc + ac.gravity * UP)
        + hw.acc_bias
        + rng_acc.normal(0, ac.noise, (k_n, n + 1, 3))
    )
    return {"att_t": att_t, "quats": quats, "accel": f, "rot": rot_t, "u": u_t, "points": pts_t}


def _conversion_on_fraction(t_ready: np.ndarray, window: float, t_on: np.ndarray, t_off: np.ndarray) -> np.ndarray:
    """(C,) fraction of each conversion window [t_ready − window, t_ready] during which the coil is on."""
    lo, hi = t_ready - window, t_ready
    frac = np.zeros(t_ready.size)
    for a, b in zip(t_on, t_off):
        frac += np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0.0, None) / window
    return frac


def _magnetometer_streams(
    kin: Callable, hw: RobotHardware, cfg: RobotConfig, duration: float, rng_mag: np.random.Generator
) -> dict[str, Any]:
    """Polled magnetometer readings of every receiver (see the module docstring): poll times (M,), firing coil
    per poll (M,), readings (M, N, 3) [T], coil current [A], pulse count and the clipping full scale [T]."""
    rb, mc = cfg.robot, cfg.magnetometer
    n = rb.n_segments
    poll_t, coil_of_poll, t_on, t_off = _mag_schedule(cfg, duration)
    tc = 1.0 / mc.rate
    rcfg = cfg.rig()
    coil = PlanarCoil(cfg.coil)
    current = coil_current(coil, rcfg)
    mags = np.zeros((poll_t.size, n, 3))
    joint_cfg = [dataclasses.replace(rcfg, geometry=d.geometry(rcfg.geometry)) for d in hw.draws]
    full = math.floor(mc.full_scale / mc.lsb) * mc.lsb
    for j in range(n):  # receiver module j + 1
        idx = np.floor((poll_t - hw.c0[j]) / tc).astype(np.int64)  # latest conversion per poll
        conv = np.unique(idx)
        t_ready = hw.c0[j] + tc * conv
        t_mid = t_ready - 0.5 * mc.window
        rot, rel, _, _ = kin(t_mid)
        r_s = rot[:, j + 1] @ hw.mount[j + 1]
        field_s = np.einsum("tij,ti->tj", r_s, hw.ambient(t_mid, cfg.ambient.drift))
        # coil j fires in pulses k ≡ j (mod N): on-fraction of each conversion window
        mine = (np.arange(t_on.size) % n) == j
        frac = _conversion_on_fraction(t_ready, mc.window, t_on[mine], t_off[mine])
        on = frac > 0
        if on.any():
            d = rel[on, j] @ E
            pos = sensor_position(d, rel[on, j], joint_cfg[j])
            b_par = current * PlacedCoil(coil, hw.draws[j]).field(torch.from_numpy(pos)).numpy()
            field_s[on] += frac[on, None] * np.einsum("tij,ti->tj", rel[on, j] @ hw.mount[j + 1], b_par)
        m = (
            field_s @ (hw.soft[j] @ hw.draws[j].mag_axes.T).T
            + hw.hard[j]
            + rng_mag.normal(0.0, mc.noise, field_s.shape)
        )
        m = np.clip(np.round(m / mc.lsb) * mc.lsb, -full, full)
        mags[:, j] = m[np.searchsorted(conv, idx)]
    return {
        "mag_t": poll_t,
        "coil": coil_of_poll,
        "mags": mags,
        "current": current,
        "pulses": int(t_on.size),
        "full_scale": full,
    }


def _calibration_recording(hw: RobotHardware, noise: float, n_cal: int, rng_cal: np.random.Generator) -> np.ndarray:
    """(N, n_cal, 3) readings [T] of each receiver rotated through all orientations in the ambient field."""
    n = hw.soft.shape[0]
    dirs = rng_cal.normal(size=(n, n_cal, 3))
    dirs *= np.linalg.norm(hw.earth) / np.linalg.norm(dirs, axis=-1, keepdims=True)
    gain = hw.soft @ np.swapaxes(np.stack([d.mag_axes for d in hw.draws]), 1, 2)  # S_j Q_jᵀ
    return np.einsum("nij,ncj->nci", gain, dirs) + hw.hard[:, None] + rng_cal.normal(0.0, noise, dirs.shape)


def _simulate(motion: JointMotion, duration: float, cfg: RobotConfig, n_cal: int) -> RobotRecording:
    """The whole recording: hardware draws, attitude sweeps, magnetometer polls, calibration tumbles."""
    rb = cfg.robot
    rng = {
        k: np.random.default_rng(s)
        for k, s in zip(("imu", "mag", "acc", "params", "cal", "modules"), np.random.SeedSequence(cfg.seed).spawn(6))
    }
    if cfg.hardware_seed >= 0:  # the same robot (hardware draws) with fresh noise and motion
        hw_seeds = np.random.SeedSequence(cfg.hardware_seed).spawn(6)
        rng["params"], rng["cal"], rng["modules"] = (np.random.default_rng(hw_seeds[k]) for k in (3, 4, 5))
    hw = _draw_hardware(cfg, rng["params"], rng["modules"])

    def kin(t: np.ndarray):
        return forward_kinematics(*motion(t), rb.length)

    att = _attitude_streams(kin, hw, cfg, duration, rng["imu"], rng["acc"])
    mag = _magnetometer_streams(kin, hw, cfg, duration, rng["mag"])
    cal = _calibration_recording(hw, cfg.magnetometer.noise, n_cal, rng["cal"])
    meta = {
        "n_segments": rb.n_segments,
        "length": rb.length,
        "duration": duration,
        "current": mag["current"],
        "soft_iron": hw.soft,
        "hard_iron": hw.hard,
        "mount": hw.mount,
        "heading0": hw.psi0,
        "heading_drift": hw.drift,
        "accel_bias": hw.acc_bias,
        "pulses": mag["pulses"],
        "gravity": cfg.accelerometer.gravity,
        "full_scale": mag["full_scale"],
        "seed": cfg.seed,
        "hardware_seed": cfg.hardware_seed,
        "modules": [d.as_dict() for d in hw.draws],
    }
    return RobotRecording(
        att_t=att["att_t"],
        quats=att["quats"],
        accel=att["accel"],
        mag_t=mag["mag_t"],
        mags=mag["mags"],
        coil=mag["coil"],
        points=att["points"],
        u=att["u"],
        rot=att["rot"],
        cal=cal,
        meta=meta,
    )


# ------------------------------------------------------------------------------ tendon-driven planar robot
@dataclass
class TendonConfig:
    """Planar single-tendon robot with a spool (for the height-hold loop, seed 002 III-C / V-B2). SI units."""

    n_segments: int = 8  # the seed's height hold used 8 modules
    length: float = 0.029
    tendon_offset: float = 0.020  # tendon distance from the axis r_t [m] (50 mm disks)
    joint_stiffness: float = 0.30  # K [N·m/rad]
    tendon_stiffness: float = 2000.0  # k_t [N/m]
    slack: float = 0.003  # tendon slack before it pulls [m]
    module_mass: float = 0.020  # [kg], at the board (pivot + 10 mm along u)
    board_offset: float = 0.010
    time_constant: float = 0.25  # joint relaxation τ [s]
    gravity: float = 9.80665
    substep: float = 0.002  # integration step [s]


class TendonRobot:
    """Quasi-static joints with first-order relaxation: τ θ̇_k = (T r_t − M_g,k(θ))/K − θ_k.

    Tendon tension T = k_t max(0, ℓ − slack − r_t Σθ) for spool take-up ℓ [m]; M_g,k the gravity moment about
    joint k of the distal modules and the tip load (planar, bending in x–z; φ_k = Σ_{j≤k} θ_j, u_k = (sin φ_k, 0,
    −cos φ_k)). Tip height h = L Σ (1 − cos φ_k) (seed III-C). ``tip_load`` [kg] can change at any time.
    """

    def __init__(self, cfg: Optional[TendonConfig] = None) -> None:
        self.cfg = cfg or TendonConfig()
        self.theta = np.zeros(self.cfg.n_segments)
        self.spool = 0.0
        self.tip_load = 0.0

    def directions(self, theta: Optional[np.ndarray] = None) -> np.ndarray:
        """Segment directions u_k = (sin φ_k, 0, −cos φ_k), φ_k = Σ_{j≤k} θ_j.

        Args:
            theta: joint angles (N,) [rad]; None: the current state.

        Returns:
            Unit directions (N, 3).
        """
        phi = np.cumsum(self.theta if theta is None else theta)
        return np.stack([np.sin(phi), np.zeros_like(phi), -np.cos(phi)], -1)

    def _rate(self, theta: np.ndarray) -> np.ndarray:
        c = self.cfg
        u = self.directions(theta)
        piv = np.concatenate([np.zeros((1, 3)), np.cumsum(c.length * u, 0)])
        xm = piv[:-1, 0] + c.board_offset * u[:, 0]
        w = np.full(c.n_segments, c.module_mass)
        moment = (
            np.array(
                [
                    np.sum(w[k:] * (xm[k:] - piv[k, 0])) + self.tip_load * (piv[-1, 0] - piv[k, 0])
                    for k in range(c.n_segments)
                ]
            )
            * c.gravity
        )
        tension = c.tendon_stiffness * max(0.0, self.spool - c.slack - c.tendon_offset * float(theta.sum()))
        return ((tension * c.tendon_offset - moment) / c.joint_stiffness - theta) / c.time_constant

    def advance(self, dt: float, spool_velocity: float) -> None:
        """Integrate dt [s] with the spool at ``spool_velocity`` [m/s] (ideal velocity-controlled servo).

        Args:
            dt: time step [s], split into substeps of at most ``cfg.substep``.
            spool_velocity: spool take-up rate [m/s].
        """
        n = max(1, int(math.ceil(dt / self.cfg.substep)))
        h = dt / n
        for _ in range(n):
            self.spool += spool_velocity * h
            self.theta = self.theta + h * self._rate(self.theta)

    def height(self) -> float:
        return float(self.cfg.length * np.sum(1.0 - np.cos(np.cumsum(self.theta))))

    def rotations(self) -> np.ndarray:
        """Module rotations (N+1, 3, 3), base first: R_k = exp(−φ_k ŷ) so that R_k e = u_k."""
        phi = np.concatenate([[0.0], np.cumsum(self.theta)])
        return exp_so3(-phi[:, None] * np.array([0.0, 1.0, 0.0]))
