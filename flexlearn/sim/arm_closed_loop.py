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
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.arm import FlexibleArmPlant
from flexlearn.sensing.imu import ImuNoiseConfig

__all__ = ["ImuNoise", "ImuNoiseConfig", "imu_frames", "simulate_closed_loop", "encoder_quantize"]


ImuNoise = ImuNoiseConfig


def imu_frames(plant: FlexibleArmPlant, q: Tensor, qd: Tensor, qdd: Tensor, imu_positions: Sequence[Sequence[float]],
               noise: Optional[ImuNoiseConfig], bias: Optional[Tensor], generator: Optional[torch.Generator],
               rows: Optional[list] = None) -> Tensor:
    """IMU frames (B, S, 6) from the plant state: exact readings (:meth:`FlexibleArmPlant.imu`) plus ``bias``
    (B, S, 6) and white noise, clipped at the ranges (a saturated accelerometer reads its range)."""
    acc, gyr = plant.imu(q, qd, qdd, imu_positions, rows)
    fr = torch.cat([acc, gyr], -1)
    if noise is None:
        return fr
    std = torch.tensor([noise.acc_noise] * 3 + [noise.gyr_noise] * 3, dtype=fr.dtype)
    fr = fr + torch.randn(fr.shape, generator=generator, dtype=fr.dtype) * std
    if bias is not None:
        fr = fr + bias
    lim = torch.tensor([noise.acc_range] * 3 + [noise.gyr_range] * 3, dtype=fr.dtype)
    return torch.maximum(torch.minimum(fr, lim), -lim)


def encoder_quantize(theta: Tensor, bits: int = 18) -> Tensor:
    """Absolute encoder reading: θ rounded to 2π/2^bits (seed 000, §VI-C: 18-bit SICK AFM60A)."""
    lsb = 2.0 * math.pi / (1 << bits)
    return torch.round(theta / lsb) * lsb




Controller = Callable[[Tensor, float, dict], tuple]


def simulate_closed_loop(plant: FlexibleArmPlant, controllers: Sequence[Controller], theta0: Sequence[float],
                         seconds: float, imu_positions: Sequence[Sequence[float]], dt: float = 1e-3,
                         noise: Optional[ImuNoiseConfig] = None, seed: int = 0, encoder_bits: int = 18,
                         encoder_rate_tau: float = 0.005, iters: int = 1,
                         frame_hook: Optional[Callable[[int, Tensor], Tensor]] = None) -> dict:
    """Run B = len(controllers) arms from rest at θ₀ for ``seconds`` at step ``dt``.

    Each controller is called as ``ctrl(frame (S, 6), t, info) -> (torque (2,), state, fault)`` with
    ``info = {"theta_enc": (2,), "rate_enc": (2,), "q", "qd", "curvature", "tip"}`` (quantised encoder
    angles, low-passed difference rates for encoder-fed baselines; the truth state, base curvatures and tip
    deflections for oracle baselines and tests only). ``frame_hook(k, frames)`` may corrupt frames (bad-input tests).
    Returns numpy arrays: ``t`` (K,), ``theta``, ``theta_rate``, ``tau_cmd``, ``tau_applied``,
    ``tip_deflection``, ``tip_slope``, ``base_curvature`` (B, K, n), ``ee_pose`` (B, K, 3), ``est_state``
    (B, K, ·), ``fault`` (B, K), ``energy`` (B, K).
    """
    check(len(controllers) >= 1, "closed_loop.controllers", len(controllers), "need at least one")
    check(seconds > 0 and dt > 0, "closed_loop.seconds", (seconds, dt), "must be > 0")
    B, n, N = len(controllers), plant.n, plant.N
    K = int(round(seconds / dt))
    th0 = torch.tensor([list(theta0)] * B, dtype=torch.float64)
    x = plant.initial_state(th0)
    u = plant.holding_torque(x)
    gen = torch.Generator().manual_seed(seed)
    S = sum(len(p) for p in imu_positions)
    bias = None
    if noise is not None:
        noise.validate()
        bstd = torch.tensor([noise.acc_bias] * 3 + [noise.gyr_bias] * 3, dtype=torch.float64)
        bias = torch.randn(B, S, 6, generator=gen, dtype=torch.float64) * bstd
    rows = plant.imu_rows(imu_positions)
    log: dict[str, np.ndarray] = {k: np.zeros((B, K, n)) for k in ("theta", "theta_rate", "tau_cmd", "tau_applied", "tip_deflection",
                                          "tip_slope", "base_curvature")}
    log["ee_pose"] = np.zeros((B, K, 3))
    log["fault"] = np.zeros((B, K), dtype=np.int64)
    states: list = [[] for _ in range(B)]
    enc_prev = encoder_quantize(th0, encoder_bits)
    rate_f = torch.zeros(B, n, dtype=torch.float64)
    beta = dt / (encoder_rate_tau + dt)
    for k in range(K):
        t = k * dt
        q, qd = x[:, :N], x[:, N:2 * N]
        f, M = plant._f(x, u)
        frames = imu_frames(plant, q, qd, f[:, N:2 * N], imu_positions, noise, bias, gen, rows)
        if frame_hook is not None:
            frames = frame_hook(k, frames)
        enc = encoder_quantize(q[:, :n], encoder_bits)
        rate_f = rate_f + beta * ((enc - enc_prev) / dt - rate_f) if k > 0 else rate_f
        enc_prev = enc
        u_new = torch.zeros(B, n, dtype=torch.float64)
        tq = plant.tip_quantities(q)
        for b, ctrl in enumerate(controllers):
            tau, st, fault = ctrl(frames[b], t, {"theta_enc": enc[b], "rate_enc": rate_f[b], "q": q[b], "qd": qd[b],
                                                 "curvature": tq["base_curvature"][b], "tip": tq["tip"][b]})
            u_new[b] = tau
            states[b].append(st.detach().numpy().copy())
            log["fault"][b, k] = int(fault)
        if plant.lag == 0:
            du = torch.linalg.solve(M, ((u_new - u) @ plant.B.t()).unsqueeze(-1)).squeeze(-1)
            f = f.clone()
            f[:, N:2 * N] += du
        else:
            f = f.clone()
            f[:, 2 * N:] = (u_new - x[:, 2 * N:]) / plant.lag
        log["theta"][:, k] = q[:, :n].numpy()
        log["theta_rate"][:, k] = qd[:, :n].numpy()
        log["tau_cmd"][:, k] = u_new.numpy()
        log["tau_applied"][:, k] = (x[:, 2 * N:] if plant.lag > 0 else u_new).numpy()
        log["tip_deflection"][:, k] = tq["tip"].numpy()
        log["tip_slope"][:, k] = tq["tip_slope"].numpy()
        log["base_curvature"][:, k] = tq["base_curvature"].numpy()
        log["ee_pose"][:, k] = plant.ee_pose(q).numpy()
        x = plant.step(x, u_new, dt, iters=iters, f0=(f, M))
        u = u_new
        if not bool(torch.isfinite(x).all()):
            raise FloatingPointError(f"closed loop diverged at t = {t:.3f} s")
    log["t"] = np.arange(K) * dt
    log["est_state"] = np.array(states)
    return log
