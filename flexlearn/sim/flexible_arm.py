"""High-fidelity truth simulator of planar flexible arms with distributed IMUs (seed 000, §VI-B, §VI-C).

Independent of the reduced modal model (:mod:`flexlearn.physics.modal`): each link is a finite-element
Euler–Bernoulli beam (Hermite-cubic elements, consistent mass, tip mass and rotary inertia lumped at the
tip node), clamped to its joint, in a frame that rotates with the prescribed absolute base angle Θ(t)
(the hydraulic joint is treated as position-controlled: θ(t) is imposed). In the rotating frame

    M q̈ + C q̇ + K q = −M u_rot Θ̈ − M u_tr (a_base · n + g cos Θ),

where ``u_rot`` is the rigid rotation field (ξ on deflections, 1 on slopes), ``u_tr`` the rigid
translation field, ``n`` the link normal and ``a_base`` the acceleration of the link's base point
(zero for link 1; the deformed tip of link 1 for link 2). Rayleigh damping gives ``damping`` at the first
two FE modes. Integration: Newmark average acceleration (unconditionally stable) with ``substeps``
per output sample. The initial state is the static gravity sag at Θ(0).

Two-link arm: one-way coupling. Link 1 carries link 2 (+ actuator + payload) as a rigid tip body
(``tip_mass``, ``tip_inertia`` of link 1); link 2 is driven by the motion of link 1's deformed tip
(absolute base angle Θ₂ = θ₁ + w₁′(L₁) + θ₂, base acceleration from link 1's FE state). Neglected:
axial shortening, centrifugal stiffening, the reaction of link 2's vibration on link 1.

Sensors: IMU k at ξ_k on link i has absolute inclination ψ = Θ_i + w_i′(ξ_k); its accelerometer measures
the specific force ``R(ψ)ᵀ (p̈ − g)`` (p̈ by central differences of the simulated positions) and its gyro
``ψ̇`` about x, both mapped into the sensor frame by its mounting and corrupted by constant biases and
white noise (:class:`ImuNoiseConfig`), then clipped at the sensor range.

Conventions: world x horizontal, y up (the seed's y_EE, z_EE); SI units; sensor axes as in
:mod:`flexlearn.sensing.imu` (x = joint axis, y along the link, z normal).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np

from flexlearn.config import check
from flexlearn.sensing.imu import GRAVITY as G0
from flexlearn.sensing.imu import ImuNoiseConfig
from flexlearn.sim.errors import SimConfigError

__all__ = [
    "BeamLinkConfig",
    "ImuNoiseConfig",
    "FlexibleArmSimConfig",
    "FEBeam",
    "simulate_flexible_arm",
    "seed_single_link_config",
    "seed_two_link_config",
    "seed_single_link_trajectory",
    "smooth_random_trajectory",
]


@dataclasses.dataclass
class BeamLinkConfig:
    """One flexible link: EI [N m²], rho_A [kg/m], length [m], tip_mass [kg], tip_inertia [kg m²],
    imu_positions [m] along the link, mount_angles [rad] per IMU, n_elements, damping ratio."""

    EI: float = 74300.0
    rho_A: float = 5.37
    length: float = 4.5
    tip_mass: float = 20.0
    tip_inertia: float = 0.0
    imu_positions: tuple[float, ...] = (0.45, 1.35, 2.25, 3.15, 4.05)
    mount_angles: tuple[float, ...] = ()
    n_elements: int = 30
    damping: float = 0.02

    def validate(self) -> None:
        for k in ("EI", "rho_A", "length"):
            v = getattr(self, k)
            check(math.isfinite(v) and v > 0, f"link.{k}", v, "must be a finite number > 0")
        for k in ("tip_mass", "tip_inertia"):
            v = getattr(self, k)
            check(math.isfinite(v) and v >= 0, f"link.{k}", v, "must be a finite number >= 0")
        check(
            all(0.0 < p <= self.length for p in self.imu_positions),
            "link.imu_positions",
            self.imu_positions,
            f"must lie in (0, L = {self.length}]",
        )
        check(
            len(self.mount_angles) in (0, len(self.imu_positions)),
            "link.mount_angles",
            self.mount_angles,
            "must be empty or one per IMU",
        )
        check(self.n_elements >= 4, "link.n_elements", self.n_elements, "must be >= 4")
        check(0 <= self.damping < 1, "link.damping", self.damping, "must be in [0, 1)")


@dataclasses.dataclass
class FlexibleArmSimConfig:
    """A planar serial arm of 1 or 2 flexible links."""

    links: tuple[BeamLinkConfig, ...] = (BeamLinkConfig(),)
    noise: ImuNoiseConfig = dataclasses.field(default_factory=ImuNoiseConfig)
    dt: float = 1e-3
    substeps: int = 2
    gravity: float = G0
    seed: int = 0

    def validate(self) -> None:
        check(1 <= len(self.links) <= 2, "sim.links", len(self.links), "1 or 2 links are supported")
        for ln in self.links:
            ln.validate()
        self.noise.validate()
        check(math.isfinite(self.dt) and 0 < self.dt <= 0.01, "sim.dt", self.dt, "must be in (0, 0.01] s")
        check(self.substeps >= 1, "sim.substeps", self.substeps, "must be >= 1")
        check(self.gravity >= 0, "sim.gravity", self.gravity, "must be >= 0")


class FEBeam:
    """Hermite-cubic FE cantilever (clamped at node 0) with tip mass/inertia; numpy float64.

    DOFs (w₁, w₁′, …, w_N, w_N′). Provides M, K, C, the rigid fields and interpolation rows.
    """

    def __init__(self, cfg: BeamLinkConfig) -> None:
        self.cfg = cfg
        n, L = cfg.n_elements, cfg.length
        h = L / n
        self.h = h
        EI, rA = cfg.EI, cfg.rho_A
        k = (
            EI
            / h**3
            * np.array(
                [
                    [12, 6 * h, -12, 6 * h],
                    [6 * h, 4 * h * h, -6 * h, 2 * h * h],
                    [-12, -6 * h, 12, -6 * h],
                    [6 * h, 2 * h * h, -6 * h, 4 * h * h],
                ]
            )
        )
        m = (
            rA
            * h
            / 420
            * np.array(
                [
                    [156, 22 * h, 54, -13 * h],
                    [22 * h, 4 * h * h, 13 * h, -3 * h * h],
                    [54, 13 * h, 156, -22 * h],
                    [-13 * h, -3 * h * h, -22 * h, 4 * h * h],
                ]
            )
        )
        N = 2 * (n + 1)
        K = np.zeros((N, N))
        M = np.zeros((N, N))
        for e in range(n):
            sl = slice(2 * e, 2 * e + 4)
            K[sl, sl] += k
            M[sl, sl] += m
        M[-2, -2] += cfg.tip_mass
        M[-1, -1] += cfg.tip_inertia
        self.K, self.M = K[2:, 2:], M[2:, 2:]
        self.ndof = N - 2
        x = np.repeat(np.linspace(h, L, n), 2)
        self.u_rot = np.where(np.arange(self.ndof) % 2 == 0, x, 1.0)
        self.u_tr = np.where(np.arange(self.ndof) % 2 == 0, 1.0, 0.0)
        w2, _ = np.linalg.eig(np.linalg.solve(self.M, self.K))
        w = np.sqrt(np.sort(w2.real))
        self.omega = w
        z = cfg.damping
        if z > 0:
            a = 2 * z * w[0] * w[1] / (w[0] + w[1])
            b = 2 * z / (w[0] + w[1])
        else:
            a = b = 0.0
        self.C = a * self.M + b * self.K

    def rows(self, xi: Sequence[float], derivative: int) -> np.ndarray:
        """Interpolation rows (P, ndof): d^k w/dξ^k at positions ξ from the nodal DOFs.

        Args:
            xi: positions ξ [m] along the link (P,).
            derivative: order k of the derivative: 0 (deflection), 1 (slope) or 2 (curvature).

        Returns:
            (P, ndof) rows of the Hermite shape functions.

        Raises:
            SimConfigError: ``derivative`` is not 0, 1 or 2 (a `ConfigError` and a `ValueError`).
        """
        positions = np.asarray(xi, dtype=np.float64)
        h, n = self.h, self.cfg.n_elements
        R = np.zeros((len(positions), self.ndof + 2))
        for p, x in enumerate(positions):
            e = min(int(x / h), n - 1)
            s = (x - e * h) / h
            if derivative == 0:
                Nv = [1 - 3 * s**2 + 2 * s**3, h * (s - 2 * s**2 + s**3), 3 * s**2 - 2 * s**3, h * (-(s**2) + s**3)]
            elif derivative == 1:
                Nv = [(-6 * s + 6 * s**2) / h, 1 - 4 * s + 3 * s**2, (6 * s - 6 * s**2) / h, -2 * s + 3 * s**2]
            elif derivative == 2:
                Nv = [(-6 + 12 * s) / h**2, (-4 + 6 * s) / h, (6 - 12 * s) / h**2, (-2 + 6 * s) / h]
            else:
                raise SimConfigError(f"derivative = {derivative!r}: must be 0, 1 or 2")
            R[p, 2 * e : 2 * e + 4] = Nv
        return R[:, 2:]

    def static(self, load_acc: float) -> np.ndarray:
        """Static deflection under a uniform transverse acceleration load ``−load_acc`` [m/s²].

        Args:
            load_acc: transverse acceleration [m/s²] (e.g. gravity); the load acts along ``−load_acc``.

        Returns:
            The free DOFs (w₁, w₁′, …, w_N, w_N′) [m, rad].
        """
        return np.linalg.solve(self.K, -load_acc * (self.M @ self.u_tr))


class _Newmark:
    def __init__(self, beam: FEBeam, dt: float) -> None:
        self.b = beam
        self.dt = dt
        beta, gam = 0.25, 0.5
        self.c0 = 1 / (beta * dt * dt)
        self.c1 = gam / (beta * dt)
        self.c2 = 1 / (beta * dt)
        self.c3 = 1 / (2 * beta) - 1
        self.c4 = gam / beta - 1
        self.c5 = dt * (gam / (2 * beta) - 1)
        self.gam = gam
        Keff = beam.K + self.c1 * beam.C + self.c0 * beam.M
        self.Kinv = np.linalg.inv(Keff)
        self.Mr = beam.M @ beam.u_rot
        self.Mt = beam.M @ beam.u_tr

    def force(self, Thdd: float, trans: float) -> np.ndarray:
        return -self.Mr * Thdd - self.Mt * trans

    def step(self, q, v, a, F):
        b = self.b
        rhs = F + b.M @ (self.c0 * q + self.c2 * v + self.c3 * a) + b.C @ (self.c1 * q + self.c4 * v + self.c5 * a)
        qn = self.Kinv @ rhs
        an = self.c0 * (qn - q) - self.c2 * v - self.c3 * a
        vn = v + self.dt * ((1 - self.gam) * a + self.gam * an)
        return qn, vn, an


def _prescribed_motion(cfg: FlexibleArmSimConfig, theta, theta_dd) -> tuple:
    """Checked joint angles θ (N, n), rates θ̇ (differences) and accelerations θ̈ (given or second differences)."""
    th = np.asarray(theta, dtype=np.float64)
    if th.ndim == 1:
        th = th[:, None]
    N, n = th.shape
    check(n == len(cfg.links), "sim.theta", th.shape, f"needs one column per link ({len(cfg.links)})")
    check(bool(np.isfinite(th).all()) and N >= 3, "sim.theta", th.shape, "must be finite with >= 3 samples")
    dt = cfg.dt
    if theta_dd is None:
        thdd = np.gradient(np.gradient(th, dt, axis=0), dt, axis=0)
    else:
        thdd = np.asarray(theta_dd, dtype=np.float64).reshape(N, n)
    return th, np.gradient(th, dt, axis=0), thdd


def _substep(
    cfg: FlexibleArmSimConfig,
    beams: list,
    steppers: list,
    tip_rows: list,
    states: list,
    th_k: np.ndarray,
    thd_k: np.ndarray,
    thdd_k: np.ndarray,
) -> None:
    """One Newmark substep of every link (in place on ``states``), link by link: link i is forced by its absolute
    base angle Θ, Θ̈ and the base acceleration from link i−1's deformed tip (one-way coupling)."""
    n, g = len(beams), cfg.gravity
    base_acc = np.zeros(2)
    Theta = 0.0
    Thetadd = 0.0
    for i, (b, stp) in enumerate(zip(beams, steppers)):
        Theta = Theta + th_k[i]
        Thetadd = Thetadd + thdd_k[i]
        nrm = np.array([-math.sin(Theta), math.cos(Theta)])
        F = stp.force(Thetadd, float(base_acc @ nrm) + g * math.cos(Theta))
        q, v, a = states[i]
        q, v, a = stp.step(q, v, a, F)
        states[i] = [q, v, a]
        if i + 1 < n:
            # tip kinematics of link i in its rotating frame (for the next link's base)
            L = b.cfg.length
            w, wd, wdd = (float(tip_rows[i][0] @ x) for x in (q, v, a))
            sl, sld, sldd = (float(tip_rows[i][1] @ x) for x in (q, v, a))
            Thd = float(np.sum(thd_k[: i + 1])) + sum(float(tip_rows[j][1] @ states[j][1]) for j in range(i))
            loc = np.array([-Thetadd * w - Thd**2 * L - 2 * Thd * wd, Thetadd * L - Thd**2 * w + wdd])
            c, s_ = math.cos(Theta), math.sin(Theta)
            base_acc = base_acc + np.array([c * loc[0] - s_ * loc[1], s_ * loc[0] + c * loc[1]])
            Theta = Theta + sl
            Thetadd = Thetadd + sldd


def _integrate(
    cfg: FlexibleArmSimConfig, beams: list, tip_rows: list, th: np.ndarray, thd: np.ndarray, thdd: np.ndarray
) -> tuple[list, list]:
    """FE states of every link at the samples, from the static sag at Θ(0): (q (N, ndof), q̇ (N, ndof)) per link;
    ``cfg.substeps`` Newmark steps per sample with θ, θ̇, θ̈ interpolated linearly between samples."""
    N, n = th.shape
    sub = cfg.substeps
    steppers = [_Newmark(b, cfg.dt / sub) for b in beams]
    states = []
    Theta0 = 0.0
    for i, b in enumerate(beams):
        Theta0 = Theta0 + th[0, i]
        q0 = b.static(cfg.gravity * math.cos(Theta0))
        states.append([q0, np.zeros(b.ndof), np.zeros(b.ndof)])
        Theta0 = Theta0 + float(tip_rows[i][1] @ q0)
    out_q = [np.empty((N, b.ndof)) for b in beams]
    out_v = [np.empty((N, b.ndof)) for b in beams]
    for k in range(N):
        if k > 0:
            for s in range(1, sub + 1):
                frac = s / sub
                _substep(
                    cfg,
                    beams,
                    steppers,
                    tip_rows,
                    states,
                    th[k - 1] + frac * (th[k] - th[k - 1]),
                    thd[k - 1] + frac * (thd[k] - thd[k - 1]),
                    thdd[k - 1] + frac * (thdd[k] - thdd[k - 1]),
                )
        for i in range(n):
            out_q[i][k], out_v[i][k] = states[i][0], states[i][1]
    return out_q, out_v


SHAPE_STATIONS = 11
"""Points per link of ``link_shapes`` (base to tip, evenly spaced)."""


def _kinematics(
    beams: list, tip_rows: list, out_q: list, out_v: list, th: np.ndarray, thd: np.ndarray, res: dict
) -> None:
    """Link tips, base angles, end-effector pose, link shapes and IMU inclinations, rates, positions and slopes
    into ``res``."""
    N, n = th.shape
    imu_rows = [(b.rows(b.cfg.imu_positions, 0), b.rows(b.cfg.imu_positions, 1)) for b in beams]
    shapes = []
    tip_w, tip_s = res["tip_deflection"], res["tip_slope"]
    base_angle = np.zeros((N, n))
    link_tips = np.zeros((N, n, 2))
    Theta = np.zeros(N)
    P = np.zeros((N, 2))
    imu_angle, imu_rate, imu_pos, imu_slope = [], [], [], []
    Thd = np.zeros(N)
    for i in range(n):
        b = beams[i]
        Theta = Theta + th[:, i]
        Thd = Thd + thd[:, i]
        base_angle[:, i] = Theta
        c, s_ = np.cos(Theta), np.sin(Theta)
        R0, R1 = imu_rows[i]
        wI = out_q[i] @ R0.T  # (N, S_i)
        sI = out_q[i] @ R1.T
        sdI = out_v[i] @ R1.T
        xi = np.asarray(b.cfg.imu_positions)
        px = P[:, :1] + c[:, None] * xi - s_[:, None] * wI
        py = P[:, 1:] + s_[:, None] * xi + c[:, None] * wI
        imu_pos.append(np.stack([px, py], -1))
        imu_angle.append(Theta[:, None] + sI)
        imu_rate.append(Thd[:, None] + sdI)
        imu_slope.append(sI)
        L = b.cfg.length
        xs = np.linspace(0.0, L, SHAPE_STATIONS)
        ws = out_q[i] @ b.rows(xs, 0).T  # (N, K) deflections at the stations
        shapes.append(
            np.stack([P[:, :1] + c[:, None] * xs - s_[:, None] * ws, P[:, 1:] + s_[:, None] * xs + c[:, None] * ws], -1)
        )
        P = P + np.stack([c * L - s_ * tip_w[:, i], s_ * L + c * tip_w[:, i]], 1)
        link_tips[:, i] = P
        Theta = Theta + tip_s[:, i]
        Thd = Thd + out_v[i] @ tip_rows[i][1]
    res["ee_pose"] = np.concatenate([P, Theta[:, None]], 1)
    res["link_tips"] = link_tips
    res["link_shapes"] = np.stack(shapes, 1)  # (N, n, K, 2)
    res["base_angle"] = base_angle
    res["imu_slope"] = imu_slope
    res["imu_angle"], res["imu_rate"] = np.concatenate(imu_angle, 1), np.concatenate(imu_rate, 1)
    res["imu_position"] = np.concatenate(imu_pos, 1)  # (N, S, 2)


def _imu_readings(cfg: FlexibleArmSimConfig, res: dict) -> None:
    """Sensor-frame readings into ``res``: specific force ``R(ψ)ᵀ (p̈ − g)`` (p̈ by central differences) and
    gyro ψ̇, through the mounting, with constant biases, white noise and clipping at the ranges."""
    dt, g = cfg.dt, cfg.gravity
    ang, rate, pos = res["imu_angle"], res["imu_rate"], res["imu_position"]
    acc_w = np.gradient(np.gradient(pos, dt, axis=0), dt, axis=0)  # world acceleration (N, S, 2)
    f_w = acc_w + np.array([0.0, g])  # specific force p̈ − g_vec, g_vec = (0, −g)
    c, s_ = np.cos(ang), np.sin(ang)
    fy = c * f_w[..., 0] + s_ * f_w[..., 1]  # components in the IMU frame: y along, z normal
    fz = -s_ * f_w[..., 0] + c * f_w[..., 1]
    S = ang.shape[1]
    acc_link = np.stack([np.zeros_like(fy), fy, fz], -1)
    gyr_link = np.stack([rate, np.zeros_like(rate), np.zeros_like(rate)], -1)
    mounts = np.concatenate(
        [np.asarray(ln.mount_angles if ln.mount_angles else [0.0] * len(ln.imu_positions)) for ln in cfg.links]
    )
    cm, sm = np.cos(mounts), np.sin(mounts)
    # sensor = R_x(γ)ᵀ link
    Mt = np.zeros((S, 3, 3))
    Mt[:, 0, 0] = 1
    Mt[:, 1, 1], Mt[:, 1, 2], Mt[:, 2, 1], Mt[:, 2, 2] = cm, sm, -sm, cm
    acc_s = np.einsum("sij,nsj->nsi", Mt, acc_link)
    gyr_s = np.einsum("sij,nsj->nsi", Mt, gyr_link)
    rng = np.random.default_rng(cfg.seed)
    nz = cfg.noise
    ba = rng.normal(0, nz.acc_bias, (S, 3))
    bg = rng.normal(0, nz.gyr_bias, (S, 3))
    res["acc_clean"], res["gyr_clean"] = acc_s, gyr_s
    res["acc"] = np.clip(acc_s + ba + rng.normal(0, nz.acc_noise, acc_s.shape), -nz.acc_range, nz.acc_range)
    res["gyr"] = np.clip(gyr_s + bg + rng.normal(0, nz.gyr_noise, gyr_s.shape), -nz.gyr_range, nz.gyr_range)
    res["imu_bias_acc"], res["imu_bias_gyr"] = ba, bg


def simulate_flexible_arm(cfg: FlexibleArmSimConfig, theta, theta_dd=None) -> dict:
    """Simulate the arm for prescribed joint angles θ (N, n) [rad] sampled at ``cfg.dt``.

    ``theta_dd`` (N, n) [rad/s²]: joint accelerations (default: second differences of θ). Returns numpy
    arrays: ``t`` (N,), ``theta`` (N, n), ``tip_deflection``, ``tip_slope``, ``base_curvature`` (N, n),
    ``imu_slope`` list per link (N, S_i) [rad] (w′ at the IMUs), ``imu_angle`` (N, S) absolute IMU
    inclinations, ``acc`` (N, S, 3), ``gyr`` (N, S, 3) noisy sensor-frame readings, ``acc_clean``,
    ``gyr_clean``, ``ee_pose`` (N, 3) [x, y, angle], ``link_tips`` (N, n, 2), ``link_shapes`` (N, n, K, 2) [m]
    (`SHAPE_STATIONS` points along each deformed link, base to tip, world x and y), ``imu_bias_acc/gyr``.

    Args:
        cfg: the arm, its IMU noise, time step and seed (validated here).
        theta: prescribed joint angles (N, n) [rad].
        theta_dd: joint accelerations (N, n) [rad/s²]; None: second differences of θ.

    Returns:
        The dict of numpy arrays listed above (plus ``fe_frequencies_hz``, the first 4 per link).
    """
    cfg.validate()
    th, thd, thdd = _prescribed_motion(cfg, theta, theta_dd)
    N, n = th.shape
    beams = [FEBeam(ln) for ln in cfg.links]
    tip_rows = [(b.rows([b.cfg.length], 0)[0], b.rows([b.cfg.length], 1)[0]) for b in beams]
    out_q, out_v = _integrate(cfg, beams, tip_rows, th, thd, thdd)
    res: dict = {"t": np.arange(N) * cfg.dt, "theta": th}
    res["tip_deflection"] = np.stack([out_q[i] @ tip_rows[i][0] for i in range(n)], 1)
    res["tip_slope"] = np.stack([out_q[i] @ tip_rows[i][1] for i in range(n)], 1)
    res["base_curvature"] = np.stack([out_q[i] @ b.rows([0.0], 2)[0] for i, b in enumerate(beams)], 1)
    _kinematics(beams, tip_rows, out_q, out_v, th, thd, res)
    _imu_readings(cfg, res)
    res["fe_frequencies_hz"] = [b.omega[:4] / (2 * math.pi) for b in beams]
    return res


def seed_single_link_config(payload: float = 20.0, **kw) -> FlexibleArmSimConfig:
    """The seed's SLFM (§VI-B): EI = 74300 N m², ρA = 5.37 kg/m, L = 4.5 m, 5 IMUs at segment centres.

    Args:
        payload: tip mass [kg].
        **kw: further fields of `FlexibleArmSimConfig` (noise, dt, substeps, gravity, seed).

    Returns:
        The configuration.
    """
    link = BeamLinkConfig(tip_mass=payload)
    return FlexibleArmSimConfig(links=(link,), **kw)


def seed_two_link_config(
    payload1: float = 30.0, payload2: float = 10.0, tip_inertia1: Optional[float] = None, **kw
) -> FlexibleArmSimConfig:
    """The seed's DLFM (§VI-C): L₁ = 4.5 m, L₂ = 3.55 m, same profile, 4 IMUs per link at segment centres.

    Link 1 carries ≈ 30 kg (link 2 + actuator + payload); its rotary inertia about the tip defaults to
    that of a 3.55 m bar of 5.37 kg/m plus the 10 kg payload at its end, both about link 1's tip, scaled
    by 0.25 as the arm's second link is folded back most of the time (an assumption; the seed gives none).

    Args:
        payload1: tip mass of link 1 [kg].
        payload2: tip mass (payload) of link 2 [kg].
        tip_inertia1: rotary inertia of link 1's tip mass [kg·m²]; None: the estimate above.
        **kw: further fields of `FlexibleArmSimConfig` (noise, dt, substeps, gravity, seed).

    Returns:
        The configuration.
    """
    L1, L2 = 4.5, 3.55
    if tip_inertia1 is None:
        tip_inertia1 = 0.25 * (5.37 * L2**3 / 3 + payload2 * L2**2)
    l1 = BeamLinkConfig(
        length=L1,
        tip_mass=payload1,
        tip_inertia=tip_inertia1,
        imu_positions=tuple(L1 * (k + 0.5) / 4 for k in range(4)),
    )
    l2 = BeamLinkConfig(length=L2, tip_mass=payload2, imu_positions=tuple(L2 * (k + 0.5) / 4 for k in range(4)))
    return FlexibleArmSimConfig(links=(l1, l2), **kw)


def seed_single_link_trajectory(
    t: np.ndarray, theta_bar: float = 0.2, amplitude: float = 0.25, omega_tr: float = 2 * math.pi * 0.25
) -> tuple[np.ndarray, np.ndarray]:
    """θ_d(t) = θ̄ − A cos(Ω_tr t) (seed 000, §VI-B) and its second derivative; values not given in the
    seed (θ̄ = 0.2 rad, A = 0.25 rad, Ω_tr = 2π·0.25 rad/s are our choice).

    Args:
        t: times (N,) [s].
        theta_bar: mean angle θ̄ [rad].
        amplitude: amplitude A [rad].
        omega_tr: angular frequency Ω_tr [rad/s].

    Returns:
        (θ_d (N,) [rad], θ̈_d (N,) [rad/s²]).
    """
    th = theta_bar - amplitude * np.cos(omega_tr * t)
    thdd = amplitude * omega_tr**2 * np.cos(omega_tr * t)
    return th, thdd


def smooth_random_trajectory(
    t: np.ndarray,
    n: int,
    seed: int = 0,
    hold: float = 2.0,
    move: float = 3.0,
    lows: Sequence[float] = (-0.2, -1.2),
    highs: Sequence[float] = (0.8, 0.3),
) -> np.ndarray:
    """Joystick-like motion (seed 000, §VI-C): quintic moves between random joint targets, each followed
    by a hold; (N, n) [rad].

    Args:
        t: sample times (N,) [s], increasing.
        n: number of joints.
        seed: seed of the random targets.
        hold: hold time after each move [s].
        move: duration of each move [s].
        lows: lower target bound per joint [rad] (at least n values).
        highs: upper target bound per joint [rad] (at least n values).

    Returns:
        The joint angles (N, n) [rad], starting at the middle of the bounds.
    """
    rng = np.random.default_rng(seed)
    N = len(t)
    out = np.zeros((N, n))
    cur = np.array([(lows[i] + highs[i]) / 2 for i in range(n)])
    t0 = 0.0
    k = 0
    while k < N:
        tgt = np.array([rng.uniform(lows[i], highs[i]) for i in range(n)])
        seg_end = t0 + move + hold
        while k < N and t[k] < seg_end:
            sig = min(1.0, max(0.0, (t[k] - t0) / move))
            out[k] = cur + (tgt - cur) * (10 * sig**3 - 15 * sig**4 + 6 * sig**5)
            k += 1
        cur, t0 = tgt, seg_end
    return out
