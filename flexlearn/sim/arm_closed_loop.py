"""Closed-loop simulation of the two-link flexible manipulator with distributed IMUs (seed 000, §V, §VI-D).

* :func:`imu_frames`: noisy, biased, saturating IMU frames ``(B, S, 6)`` = [specific force (3) m/s² | rate (3)
  rad/s] in link frames (x joint axis, y along, z normal; :mod:`flexlearn.sensing.imu` conventions) generated
  from the plant state (:class:`~flexlearn.physics.arm.FlexibleArmPlant`), never from a model the controller
  shares.
* :func:`simulate_closed_loop`: a batch of arms, each with its own controller callable, at 1 kHz; the
  controller sees only its IMU frame (and, for the encoder-fed baseline, quantised encoder angles).

Control timing: at ``t_k`` the IMUs sample the state ``x_k`` (accelerations with the torque applied just
before ``t_k``), the controller computes ``u_k``, which is held (zero-order hold, through the optional
actuator lag) over ``[t_k, t_k + dt)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.arm import FlexibleArmPlant
from flexlearn.sensing.imu import ImuNoiseConfig

__all__ = ["ImuArray", "ImuNoiseConfig", "LoopSettings", "imu_frames", "simulate_closed_loop", "encoder_quantize"]


@dataclass(frozen=True)
class ImuArray:
    """The IMUs on the arm: where they sit and how they err (seed 000, §V).

    Attributes:
        positions: per link, the IMU positions ξ [m] along the link from its joint (link by link; S IMUs in
            all, ordered as `FlexibleArmPlant.imu` orders them).
        noise: white noise, bias and saturation of the readings; None for exact readings.
    """

    positions: Sequence[Sequence[float]]
    noise: Optional[ImuNoiseConfig] = None

    @property
    def count(self) -> int:
        """S, the number of IMUs over all links."""
        return sum(len(p) for p in self.positions)


@dataclass(frozen=True)
class LoopSettings:
    """Timing of the control loop and the encoder model of `simulate_closed_loop`.

    Attributes:
        dt: control and integration step [s] (1 kHz by default).
        encoder_bits: resolution of the absolute joint encoders (seed 000, §VI-C: 18 bits).
        encoder_rate_tau: time constant [s] of the first-order low-pass on the encoder difference rates.
        iters: Newton iterations of the plant's implicit-midpoint step (`FlexibleArmPlant.step`; 1: linearly
            implicit).
    """

    dt: float = 1e-3
    encoder_bits: int = 18
    encoder_rate_tau: float = 0.005
    iters: int = 1


def imu_frames(
    plant: FlexibleArmPlant,
    q: Tensor,
    qd: Tensor,
    qdd: Tensor,
    imus: ImuArray,
    bias: Optional[Tensor] = None,
    generator: Optional[torch.Generator] = None,
    rows: Optional[list] = None,
) -> Tensor:
    """IMU frames (B, S, 6) from the plant state: exact readings plus bias and white noise, clipped at the ranges.

    The exact readings are `FlexibleArmPlant.imu`'s; a saturated accelerometer reads its range.

    Args:
        plant: the truth model.
        q: generalised coordinates (B, N).
        qd: their rates (B, N).
        qdd: their accelerations (B, N).
        imus: IMU positions and noise model (``imus.noise`` None: exact readings, no bias either).
        bias: (B, S, 6) constant bias per IMU and axis [m/s² | rad/s], or None.
        generator: torch generator of the white noise.
        rows: precomputed `FlexibleArmPlant.imu_rows` of ``imus.positions`` (None: computed here).

    Returns:
        (B, S, 6) frames: specific force (3) [m/s²] | angular rate (3) [rad/s] in the link frames.
    """
    acc, gyr = plant.imu(q, qd, qdd, imus.positions, rows)
    fr = torch.cat([acc, gyr], -1)
    noise = imus.noise
    if noise is None:
        return fr
    std = torch.tensor([noise.acc_noise] * 3 + [noise.gyr_noise] * 3, dtype=fr.dtype)
    fr = fr + torch.randn(fr.shape, generator=generator, dtype=fr.dtype) * std
    if bias is not None:
        fr = fr + bias
    lim = torch.tensor([noise.acc_range] * 3 + [noise.gyr_range] * 3, dtype=fr.dtype)
    return torch.maximum(torch.minimum(fr, lim), -lim)


def encoder_quantize(theta: Tensor, bits: int = 18) -> Tensor:
    """Absolute encoder reading: θ rounded to 2π/2^bits (seed 000, §VI-C: 18-bit SICK AFM60A).

    Args:
        theta: joint angles [rad], any shape.
        bits: encoder resolution in bits per turn.

    Returns:
        The quantised angles [rad], shaped like ``theta``.
    """
    lsb = 2.0 * math.pi / (1 << bits)
    return torch.round(theta / lsb) * lsb


Controller = Callable[[Tensor, float, dict], tuple]
"""``ctrl(frame (S, 6), t [s], info) -> (torque (n,), state (·,), fault)``, see `simulate_closed_loop`."""

LOGGED_PER_JOINT = ("theta", "theta_rate", "tau_cmd", "tau_applied", "tip_deflection", "tip_slope", "base_curvature")
"""The (B, K, n) arrays of the closed-loop log."""


def _imu_bias(imus: ImuArray, n_arms: int, generator: torch.Generator) -> Optional[Tensor]:
    """Constant IMU biases (B, S, 6) drawn from ``generator`` with the noise model's stds; None without noise."""
    noise = imus.noise
    if noise is None:
        return None
    noise.validate()
    bstd = torch.tensor([noise.acc_bias] * 3 + [noise.gyr_bias] * 3, dtype=torch.float64)
    return torch.randn(n_arms, imus.count, 6, generator=generator, dtype=torch.float64) * bstd


def _empty_log(n_arms: int, n_steps: int, n_joints: int) -> dict[str, np.ndarray]:
    """Zeroed log arrays: `LOGGED_PER_JOINT` (B, K, n), ``ee_pose`` (B, K, 3), ``fault`` (B, K)."""
    log = {k: np.zeros((n_arms, n_steps, n_joints)) for k in LOGGED_PER_JOINT}
    log["ee_pose"] = np.zeros((n_arms, n_steps, 3))
    log["fault"] = np.zeros((n_arms, n_steps), dtype=np.int64)
    return log


def _call_controllers(
    controllers: Sequence[Controller],
    frames: Tensor,
    t: float,
    info: dict[str, Tensor],
    states: list[list[np.ndarray]],
    faults: np.ndarray,
) -> Tensor:
    """Call each arm's controller on its frame (S, 6) and its row of the batched ``info``; return the torques.

    Appends each controller's state to ``states[b]`` and writes its fault code into ``faults[b]`` (B,).
    Returns the commanded torques (B, n) [N·m].
    """
    u_new = torch.zeros(len(controllers), info["theta_enc"].shape[1], dtype=torch.float64)
    for b, ctrl in enumerate(controllers):
        tau, st, fault = ctrl(frames[b], t, {key: value[b] for key, value in info.items()})
        u_new[b] = tau
        states[b].append(st.detach().numpy().copy())
        faults[b] = int(fault)
    return u_new


def _rate_with_command(plant: FlexibleArmPlant, x: Tensor, f: Tensor, mass: Tensor, u: Tensor, u_new: Tensor) -> Tensor:
    """The state rate f(x, u) (B, 2N + n) updated for the new command ``u_new`` (reuses the mass matrix)."""
    N = plant.N
    f = f.clone()
    if plant.lag == 0:
        f[:, N : 2 * N] += torch.linalg.solve(mass, ((u_new - u) @ plant.B.t()).unsqueeze(-1)).squeeze(-1)
    else:
        f[:, 2 * N :] = (u_new - x[:, 2 * N :]) / plant.lag
    return f


def _record_step(
    log: dict[str, np.ndarray], k: int, plant: FlexibleArmPlant, x: Tensor, u_new: Tensor, tip: dict[str, Tensor]
) -> None:
    """Write step k of the log from the state x (B, 2N + n), the command and the tip quantities."""
    n, N = plant.n, plant.N
    q, qd = x[:, :N], x[:, N : 2 * N]
    log["theta"][:, k] = q[:, :n].numpy()
    log["theta_rate"][:, k] = qd[:, :n].numpy()
    log["tau_cmd"][:, k] = u_new.numpy()
    log["tau_applied"][:, k] = (x[:, 2 * N :] if plant.lag > 0 else u_new).numpy()
    log["tip_deflection"][:, k] = tip["tip"].numpy()
    log["tip_slope"][:, k] = tip["tip_slope"].numpy()
    log["base_curvature"][:, k] = tip["base_curvature"].numpy()
    log["ee_pose"][:, k] = plant.ee_pose(q).numpy()


def simulate_closed_loop(
    plant: FlexibleArmPlant,
    controllers: Sequence[Controller],
    theta0: Sequence[float],
    seconds: float,
    imus: ImuArray,
    loop: LoopSettings = LoopSettings(),
    seed: int = 0,
    frame_hook: Optional[Callable[[int, Tensor], Tensor]] = None,
) -> dict:
    """Run B = len(controllers) arms from rest at θ₀ for ``seconds`` at step ``loop.dt``.

    Each controller is called as ``ctrl(frame (S, 6), t, info) -> (torque (2,), state, fault)`` with
    ``info = {"theta_enc": (2,), "rate_enc": (2,), "q", "qd", "curvature", "tip"}`` (quantised encoder
    angles, low-passed difference rates for encoder-fed baselines; the truth state, base curvatures and tip
    deflections for oracle baselines and tests only).

    Args:
        plant: the truth model (`FlexibleArmPlant`).
        controllers: one controller callable per arm (B ≥ 1).
        theta0: initial joint angles [rad], the arms start at rest there.
        seconds: simulated time [s] (> 0).
        imus: IMU positions and noise model; each arm draws its own IMU biases.
        loop: step, encoder model and plant-step iterations.
        seed: seed of the IMU bias draw and the white noise.
        frame_hook: ``frame_hook(k, frames)`` may corrupt the (B, S, 6) frames of step k (bad-input tests).

    Returns:
        numpy arrays: ``t`` (K,), ``theta``, ``theta_rate``, ``tau_cmd``, ``tau_applied``, ``tip_deflection``,
        ``tip_slope``, ``base_curvature`` (B, K, n), ``ee_pose`` (B, K, 3), ``est_state`` (B, K, ·), ``fault``
        (B, K), ``energy`` (B, K).

    Raises:
        ConfigError: no controller, a non-positive duration or step, or an invalid IMU noise model.
        FloatingPointError: the closed loop diverged (non-finite state).
    """
    dt = loop.dt
    check(len(controllers) >= 1, "closed_loop.controllers", len(controllers), "need at least one")
    check(seconds > 0 and dt > 0, "closed_loop.seconds", (seconds, dt), "must be > 0")
    B, n, N = len(controllers), plant.n, plant.N
    K = int(round(seconds / dt))
    th0 = torch.tensor([list(theta0)] * B, dtype=torch.float64)
    x = plant.initial_state(th0)
    u = plant.holding_torque(x)
    gen = torch.Generator().manual_seed(seed)
    bias = _imu_bias(imus, B, gen)
    rows = plant.imu_rows(imus.positions)
    log = _empty_log(B, K, n)
    states: list[list[np.ndarray]] = [[] for _ in range(B)]
    enc_prev = encoder_quantize(th0, loop.encoder_bits)
    rate_f = torch.zeros(B, n, dtype=torch.float64)
    beta = dt / (loop.encoder_rate_tau + dt)
    for k in range(K):
        t = k * dt
        q, qd = x[:, :N], x[:, N : 2 * N]
        f, M = plant.state_derivative(x, u)
        frames = imu_frames(plant, q, qd, f[:, N : 2 * N], imus, bias, gen, rows)
        if frame_hook is not None:
            frames = frame_hook(k, frames)
        enc = encoder_quantize(q[:, :n], loop.encoder_bits)
        rate_f = rate_f + beta * ((enc - enc_prev) / dt - rate_f) if k > 0 else rate_f
        enc_prev = enc
        tq = plant.tip_quantities(q)
        info = {"theta_enc": enc, "rate_enc": rate_f, "q": q, "qd": qd, "curvature": tq["base_curvature"]}
        info["tip"] = tq["tip"]
        u_new = _call_controllers(controllers, frames, t, info, states, log["fault"][:, k])
        f = _rate_with_command(plant, x, f, M, u, u_new)
        _record_step(log, k, plant, x, u_new, tq)
        x = plant.step(x, u_new, dt, iters=loop.iters, f0=(f, M))
        u = u_new
        if not bool(torch.isfinite(x).all()):
            raise FloatingPointError(f"closed loop diverged at t = {t:.3f} s")
    log["t"] = np.arange(K) * dt
    log["est_state"] = np.array(states)
    return log
