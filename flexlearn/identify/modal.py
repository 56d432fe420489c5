"""Flexible link: flexural rigidity EI and payload mass from joint motion and IMU slopes (seed 000, §III).

Forward model (differentiable in EI, M_p and the damping ratio ζ). In the frame rotating with the joint
angle θ(t), the clamped link's deflection ``w(ξ, t) = Σⱼ Φⱼ(ξ) ηⱼ(t)`` (mass-normalised Euler–Bernoulli
modes with tip payload, :class:`~flexlearn.physics.modal.FlexibleLink`) obeys

    η̈ⱼ + 2ζⱼωⱼη̇ⱼ + ωⱼ²ηⱼ = fⱼ(t) = −Γⱼ θ̈ − Λⱼ g cos θ,

with the rotational participation ``Γⱼ = ∫ρA ξ Φⱼ dξ + M_p L Φⱼ(L)`` (seed 000, §III-B) and the
translational one ``Λⱼ = ∫ρA Φⱼ dξ + M_p Φⱼ(L)`` (gravity across the link). Damping is Rayleigh with the
ratio ζ at the first two modes, ``ζⱼ = ζ (ω₁ω₂/ωⱼ + ωⱼ)/(ω₁ + ω₂)``. Starting from the static sag at θ(0),

    ηⱼ(t_k) = fⱼ(0)/ωⱼ² + Δt Σ_{i≤k} hⱼ(t_k − t_i) (fⱼ(t_i) − fⱼ(0)),   hⱼ(t) = e^{−ζⱼωⱼt} sin(ω_dⱼ t)/ω_dⱼ,

a convolution evaluated by FFT (rectangle rule on the sampled forcing; h(0) = 0 makes it the trapezoid
rule). Measured: the IMU slopes ``w′(ξ_k, t)`` (inclination of each IMU relative to the joint) [rad].

Simulated data come from the independent finite-element truth simulator
(:func:`flexlearn.sim.flexible_arm.simulate_flexible_arm`: Hermite-cubic beam, Newmark, Rayleigh
damping) driven by joystick-like quintic moves, plus white noise on the slopes. The noise level default,
2 mrad, is the accelerometer noise of :class:`~flexlearn.sensing.imu.ImuNoiseConfig` over g (the seed
gives no figure). With ``motion='static'`` (the joint held still) the recording is the static sag
only: EI and the payload stay identifiable from the sag's shape, the damping ratio does not, and the
Hessian says so.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.errors import DataError
from flexlearn.identify.params import ParameterSet, config_spec
from flexlearn.physics.modal import FlexibleLink
from flexlearn.replay.to_mcap import arm_to_mcap
from flexlearn.sensing.imu import GRAVITY, ImuNoiseConfig
from flexlearn.sim.flexible_arm import (
    BeamLinkConfig,
    FlexibleArmSimConfig,
    simulate_flexible_arm,
    smooth_random_trajectory,
)

__all__ = ["ModalIdConfig", "JointMotion", "ModalLinkSetup", "ModalLinkProblem", "modal_slopes"]


@dataclasses.dataclass
class ModalIdConfig:
    """Link geometry (known), truth for the simulated recording, noise, fit settings."""

    rho_A: float = 5.37  # kg/m (known)
    length: float = 4.5  # m (known)
    imu_positions: tuple[float, ...] = (0.45, 1.35, 2.25, 3.15, 4.05)  # m
    gravity: float = GRAVITY
    # truth of the simulated recording
    EI: float = 74300.0  # N m²
    tip_mass: float = 20.0  # kg
    damping: float = 0.02
    duration: float = 6.0  # s
    dt: float = 1e-3  # s
    substeps: int = 2
    n_elements: int = 30
    motion: str = "joystick"  # 'joystick' (quintic moves and holds) | 'static' (joint held still)
    move: float = 1.0  # s per joystick move
    hold: float = 1.0  # s hold after each move
    slope_noise: float = ImuNoiseConfig().acc_noise / GRAVITY  # rad
    seed: int = 0
    # a recorded .npz (t [s], theta [rad] (N,), imu_slope [rad] (N, S)) instead of the simulation
    recording: Optional[str] = None
    # fit
    n_modes: int = 3
    init: dict = dataclasses.field(default_factory=lambda: {"EI": 4.0e4, "tip_mass": 8.0, "zeta": 0.05})
    bounds: dict = dataclasses.field(
        default_factory=lambda: {"EI": [1.0e3, 1.0e7], "tip_mass": [1.0e-3, 1.0e3], "zeta": [1.0e-4, 0.5]}
    )

    def validate(self) -> None:
        for k in ("rho_A", "length", "EI", "duration", "dt", "slope_noise"):
            v = getattr(self, k)
            check(math.isfinite(v) and v > 0, f"task.problem.{k}", v, "must be a finite number > 0")
        check(self.tip_mass >= 0, "task.problem.tip_mass", self.tip_mass, "must be >= 0")
        check(
            self.motion in ("joystick", "static"), "task.problem.motion", self.motion, "must be 'joystick' or 'static'"
        )
        check(1 <= self.n_modes <= 8, "task.problem.n_modes", self.n_modes, "must be in 1..8")
        check(
            all(0 < p <= self.length for p in self.imu_positions),
            "task.problem.imu_positions",
            self.imu_positions,
            f"must lie in (0, length = {self.length}]",
        )
        check(
            set(self.init) == {"EI", "tip_mass", "zeta"},
            "task.problem.init",
            dict(self.init),
            "needs exactly the keys EI, tip_mass, zeta",
        )


def _second_derivative(x: np.ndarray, dt: float) -> np.ndarray:
    return np.gradient(np.gradient(x, dt, axis=0), dt, axis=0)


@dataclasses.dataclass(frozen=True)
class JointMotion:
    """The joint motion that drives the link in :func:`modal_slopes`.

    Attributes:
        theta: joint angle θ(t_k) (N,) [rad], uniformly sampled.
        theta_dd: its second derivative θ̈(t_k) (N,) [rad/s²].
        dt: sample period [s].
    """

    theta: Tensor
    theta_dd: Tensor
    dt: float


@dataclasses.dataclass(frozen=True)
class ModalLinkSetup:
    """What :func:`modal_slopes` knows of the link and the model (everything but the identified parameters).

    Attributes:
        rho_A: mass per length [kg/m].
        length: link length L [m].
        imu_positions: IMU positions ξ_k (S,) [m] from the joint.
        n_modes: retained modes.
        gravity: g [m/s²].
    """

    rho_A: float
    length: float
    imu_positions: Tensor
    n_modes: int
    gravity: float


def modal_slopes(EI: Tensor, tip_mass: Tensor, zeta: Tensor, motion: JointMotion, setup: ModalLinkSetup) -> Tensor:
    """IMU slopes w′(ξ_k, t) (N, S) [rad] of the base-driven modal model (module docstring; seed 000, §III).

    Differentiable in EI, the payload and ζ.

    Args:
        EI: flexural rigidity [N m²] (0-d tensor).
        tip_mass: payload mass M_p [kg] (0-d tensor).
        zeta: damping ratio ζ at the first two modes (Rayleigh) (0-d tensor).
        motion: the joint angle and its second derivative (:class:`JointMotion`).
        setup: link mass per length, length, IMU positions, modes and gravity (:class:`ModalLinkSetup`).

    Returns:
        The slopes (N, S) [rad], float64.
    """
    rho_A, length, n_modes = setup.rho_A, setup.length, setup.n_modes
    theta, theta_dd, dt = motion.theta, motion.theta_dd, motion.dt
    link = FlexibleLink(EI, rho_A, length, tip_mass)
    d = link.modal_data(n_modes)
    omega = link.angular_frequencies(n_modes, d["roots"])  # (n,)
    gam = link.participation(n_modes, d)  # (n,)
    x, w = np.polynomial.legendre.leggauss(48)
    xi = torch.as_tensor(0.5 * (x + 1.0) * length, dtype=torch.float64)
    wq = torch.as_tensor(0.5 * w * length, dtype=torch.float64)
    phi_q = link.mode_shapes(xi, n_modes, 0, d)  # (Q, n)
    lam_t = rho_A * (wq[:, None] * phi_q).sum(0) + tip_mass * link.tip_values(n_modes, d)["tip"]
    rows = link.mode_shapes(setup.imu_positions, n_modes, 1, d)  # (S, n)
    w1, w2 = omega[0], omega[1] if n_modes > 1 else omega[0]
    zj = zeta * (w1 * w2 / omega + omega) / (w1 + w2)
    f = -gam * theta_dd[:, None] - lam_t * setup.gravity * torch.cos(theta)[:, None]  # (N, n)
    g = f - f[:1]
    N = theta.shape[0]
    t = torch.arange(N, dtype=torch.float64) * dt
    wd = omega * torch.sqrt(1.0 - zj * zj)
    h = torch.exp(-zj * omega * t[:, None]) * torch.sin(wd * t[:, None]) / wd  # (N, n)
    nfft = 2 * N
    conv = torch.fft.irfft(torch.fft.rfft(h, nfft, dim=0) * torch.fft.rfft(g, nfft, dim=0), nfft, dim=0)[:N]
    eta = f[:1] / omega**2 + dt * conv  # (N, n)
    return eta @ rows.T


class ModalLinkProblem:
    """EI [N m²], payload mass [kg] and damping ratio ζ from θ(t) and IMU slopes (seed 000, §III)."""

    jacobian_mode = "forward"

    def __init__(self, cfg: ModalIdConfig) -> None:
        cfg.validate()
        self.cfg = cfg
        self.simulation: Optional[dict] = None  # the simulator's result when the recording is simulated
        if cfg.recording:
            t, theta, slopes = self._load(cfg.recording)
            self.dt = float(t[1] - t[0])
            truth = {}
        else:
            self.simulation = self._simulate(cfg)
            t, theta, slopes = (self.simulation[k] for k in ("t", "theta_joint", "imu_slope_measured"))
            self.dt = cfg.dt
            truth = {"EI": cfg.EI, "tip_mass": cfg.tip_mass, "zeta": cfg.damping}
        self.theta = torch.as_tensor(theta, dtype=torch.float64)
        self.theta_dd = torch.as_tensor(_second_derivative(theta, self.dt), dtype=torch.float64)
        self.xi = torch.as_tensor(cfg.imu_positions, dtype=torch.float64)
        self.measured = torch.as_tensor(slopes, dtype=torch.float64).reshape(-1)
        self.sigma = cfg.slope_noise
        units = {"EI": "N m^2", "tip_mass": "kg", "zeta": ""}
        specs = [
            config_spec(k, cfg.init[k], cfg.bounds, truth=truth.get(k), unit=units[k])
            for k in ("EI", "tip_mass", "zeta")
        ]
        self.params = ParameterSet(specs)

    @staticmethod
    def _simulate(cfg: ModalIdConfig) -> dict:
        """The finite-element simulator's result, with the joint angle (``theta_joint`` (N,) [rad]) and the noisy
        slopes the fit sees (``imu_slope_measured`` (N, S) [rad])."""
        N = int(round(cfg.duration / cfg.dt))
        t = np.arange(N) * cfg.dt
        if cfg.motion == "static":  # the link at rest at its gravity sag: no dynamics in the recording
            theta = np.full(N, 0.3)
        else:
            theta = smooth_random_trajectory(
                t, 1, seed=cfg.seed, hold=cfg.hold, move=cfg.move, lows=(-0.2,), highs=(0.8,)
            )[:, 0]
        link = BeamLinkConfig(
            EI=cfg.EI,
            rho_A=cfg.rho_A,
            length=cfg.length,
            tip_mass=cfg.tip_mass,
            imu_positions=tuple(cfg.imu_positions),
            n_elements=cfg.n_elements,
            damping=cfg.damping,
        )
        sim = simulate_flexible_arm(
            FlexibleArmSimConfig(links=(link,), dt=cfg.dt, substeps=cfg.substeps, gravity=cfg.gravity, seed=cfg.seed),
            theta[:, None],
        )
        rng = np.random.default_rng(cfg.seed + 7919)
        slopes = sim["imu_slope"][0] + rng.normal(0.0, cfg.slope_noise, sim["imu_slope"][0].shape)
        return {**sim, "t": t, "theta_joint": theta, "imu_slope_measured": slopes}

    def write_recording_mcap(self, path: Path) -> Optional[Path]:
        """The simulated recording as an MCAP file a robotics viewer plays (`flexlearn.replay.to_mcap.arm_to_mcap`:
        the deformed link over time); None for a loaded recording, which holds no shapes.

        Args:
            path: the ``.mcap`` file to write.

        Returns:
            The path written, or None.
        """
        if self.simulation is None:
            return None
        return arm_to_mcap(path, self.simulation, name="link")

    def _load(self, path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p = Path(path)
        if not p.is_file():
            raise DataError(f"recording '{p}': file not found")
        with np.load(p) as z:
            missing = [k for k in ("t", "theta", "imu_slope") if k not in z]
            if missing:
                raise DataError(f"recording '{p}': missing arrays {missing} (need t, theta, imu_slope)")
            t, theta, slopes = (np.asarray(z[k], dtype=np.float64) for k in ("t", "theta", "imu_slope"))
        S = len(self.cfg.imu_positions)
        if theta.ndim != 1 or slopes.shape != (theta.shape[0], S) or t.shape != theta.shape or len(t) < 10:
            raise DataError(
                f"recording '{p}': shapes t {t.shape}, theta {theta.shape}, imu_slope {slopes.shape}; "
                f"need (N,), (N,), (N, {S}) with N >= 10"
            )
        if not (np.isfinite(theta).all() and np.isfinite(slopes).all()):
            raise DataError(f"recording '{p}': theta/imu_slope contain NaN or inf")
        if not np.allclose(np.diff(t), t[1] - t[0], rtol=1e-6) or t[1] <= t[0]:
            raise DataError(f"recording '{p}': field 't' must be uniformly sampled and increasing")
        return t, theta, slopes

    def predict(self, values: Tensor) -> Tensor:
        """IMU slopes of the modal model along the recorded joint motion.

        Args:
            values: (EI [N m²], tip_mass [kg], ζ) (3,).

        Returns:
            The slopes (N·S,) [rad], flattened from (N, S) like ``measured``.
        """
        c = self.cfg
        out = modal_slopes(
            values[0],
            values[1],
            values[2],
            JointMotion(self.theta, self.theta_dd, self.dt),
            ModalLinkSetup(c.rho_A, c.length, self.xi, c.n_modes, c.gravity),
        )
        return out.reshape(-1)
