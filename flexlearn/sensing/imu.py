"""IMU joint states for planar (vertical-plane) manipulators (seed 000, §II, eqs. (1)–(6)).

Frames: the joint axes are the x axes (seed 000, eq. (1): ``^{i−1}R_i`` is a rotation about x); a link
frame has y along the link and z normal to it in the vertical plane, the world z axis points up. A
link inclined by ψ (rotation about x) carries, at rest, the specific force

    f = R_x(ψ)ᵀ (0, 0, g) = g (0, sin ψ, cos ψ)   →   ψ = atan2(f_y, f_z).

Mounting: each IMU's sensor frame relates to its link frame by ``f_link = M f_sensor`` with ``M`` a
rotation about x by the mounting angle γ, optionally preceded by a half turn about z (``flipped``:
the sensor's x axis opposes the joint axis, so ``f_y`` and ``ω_x`` change sign). :class:`ImuMount`
applies it.

Relative joint angle, seed 000, eq. (2), in the atan2 form with (eqs. (3)–(4), lost in the seed's text,
re-derived here)

    A_i = f_{y,i} f_{z,i−1} − f_{z,i} f_{y,i−1} = g² sin(ψ_i − ψ_{i−1}),
    B_i = f_{y,i} f_{y,i−1} + f_{z,i} f_{z,i−1} = g² cos(ψ_i − ψ_{i−1}),      θ_i = atan2(A_i, B_i).

Relative angular velocity, eq. (5): ``ᶦ_{i−1}Ω_i = ᶦΩ_i − (^{i−1}R_i)ᵀ ^{i−1}Ω_{i−1}``; in the plane its x
component is ``θ̇_i = ω_{x,i} − ω_{x,i−1}`` (a rotation about x leaves the x component unchanged).

PI complementary filter, eq. (6), discretised by forward Euler at step ``dt``:

    θ̂ ← θ̂ + dt (b̂ + k_P (θ − θ̂) + θ̇),      b̂ ← b̂ + dt k_I (θ − θ̂),

(k_P = 7.0407 s⁻¹, k_I = 0.1984 s⁻² at 1 kHz in the seed). With a constant gyro bias β the integral
state converges to ``b̂ = −β`` and θ̂ is unbiased.

Run-time faults: a frame with a non-finite or saturated value (or a missing IMU, given as NaN) makes
:class:`ComplementaryFilter` hold its last valid state and return ``fault = True``; it never returns NaN.
"""

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np
import torch
from torch import Tensor, nn

from flexlearn.config import check
from flexlearn.lie import so3_exp

__all__ = [
    "GRAVITY",
    "ImuMount",
    "inclination",
    "joint_angle",
    "relative_angular_velocity",
    "joint_rate",
    "frame_valid",
    "ComplementaryFilter",
    "complementary_filter",
    "kinematic_acceleration",
    "angular_acceleration",
]

GRAVITY = 9.80665


def inclination(acc: Tensor) -> Tensor:
    """Link inclination ψ = atan2(f_y, f_z) [rad] from specific force in the link frame (..., 3) → (...).

    Args:
        acc: link-frame specific force (..., 3) (any unit: only the y/z ratio matters).

    Returns:
        ψ (...) [rad].
    """
    return torch.atan2(acc[..., 1], acc[..., 2])


def joint_angle(acc_prev: Tensor, acc_next: Tensor) -> Tensor:
    """Relative joint angle θ_i = atan2(A_i, B_i) (seed 000, eq. (2)) [rad], (..., 3) link-frame forces → (...).

    Args:
        acc_prev: link-frame specific force (..., 3) of link i−1 (or a base IMU / the world for i = 1).
        acc_next: link-frame specific force (..., 3) of link i.

    Returns:
        θ_i (...) [rad], with A_i = f_y,i f_z,i−1 − f_z,i f_y,i−1 and B_i = f_y,i f_y,i−1 + f_z,i f_z,i−1.
    """
    fy0, fz0 = acc_prev[..., 1], acc_prev[..., 2]
    fy1, fz1 = acc_next[..., 1], acc_next[..., 2]
    A = fy1 * fz0 - fz1 * fy0
    B = fy1 * fy0 + fz1 * fz0
    return torch.atan2(A, B)


def _rot_x(theta: Tensor) -> Tensor:
    """^{i−1}R_i of seed 000, eq. (1): rotation about x by θ (..., 3, 3) (``so3_exp(θ e_x)``)."""
    z = torch.zeros_like(theta)
    return so3_exp(torch.stack([theta, z, z], -1))


def relative_angular_velocity(gyr_prev: Tensor, gyr_next: Tensor, theta: Tensor) -> Tensor:
    """``ᶦ_{i−1}Ω_i = ᶦΩ_i − (^{i−1}R_i)ᵀ ^{i−1}Ω_{i−1}`` (seed 000, eq. (5)) [rad/s], (..., 3).

    Args:
        gyr_prev: angular velocity ^{i−1}Ω_{i−1} (..., 3) [rad/s] of link i−1.
        gyr_next: angular velocity ᶦΩ_i (..., 3) [rad/s] of link i.
        theta: joint angle θ_i (...) [rad] of ^{i−1}R_i = R_x(θ_i).

    Returns:
        The relative angular velocity (..., 3) [rad/s].
    """
    R = _rot_x(theta)
    return gyr_next - torch.matmul(R.transpose(-1, -2), gyr_prev.unsqueeze(-1)).squeeze(-1)


def joint_rate(gyr_prev: Tensor, gyr_next: Tensor) -> Tensor:
    """Planar joint rate θ̇_i = ω_{x,i} − ω_{x,i−1} [rad/s] (x component of eq. (5)).

    Args:
        gyr_prev: gyro (..., 3) [rad/s] of link i−1.
        gyr_next: gyro (..., 3) [rad/s] of link i.

    Returns:
        θ̇_i (...) [rad/s].
    """
    return gyr_next[..., 0] - gyr_prev[..., 0]


class ImuMount(nn.Module):
    """Sensor-to-link mounting of S IMUs: angles γ [rad] about x and ``flipped`` flags (buffers, (S,)).

    ``forward(acc, gyr)`` maps (..., S, 3) sensor-frame readings to link-frame readings.
    """

    # buffer M = R_x(γ) · diag(±1, ±1, 1) (S, 3, 3) (runtime annotation, no ``from __future__ import
    # annotations`` in this module: TorchScript reads class annotations)
    matrix: Tensor

    def __init__(self, angles: Tensor, flipped: Tensor) -> None:
        super().__init__()
        a = torch.as_tensor(angles, dtype=torch.float64).reshape(-1)
        f = torch.as_tensor(flipped, dtype=torch.bool).reshape(-1)
        check(a.shape == f.shape, "imu.mount.flipped", tuple(f.shape), f"must match angles {tuple(a.shape)}")
        check(bool(torch.isfinite(a).all()), "imu.mount.angles", a.tolist(), "must be finite")
        sgn = torch.where(f, -torch.ones_like(a), torch.ones_like(a))
        c, s = torch.cos(a), torch.sin(a)
        o, z = torch.ones_like(a), torch.zeros_like(a)
        # M = R_x(γ) · diag(sgn, sgn, 1)
        M = torch.stack([sgn * o, z, z, z, c * sgn, -s, z, s * sgn, c], -1).reshape(-1, 3, 3)
        self.register_buffer("matrix", M)

    def forward(self, acc: Tensor, gyr: Tensor) -> Tuple[Tensor, Tensor]:
        """Mounting → link frame: ``M a``, ``M ω`` with M = R_x(γ) · diag(±1, ±1, 1).

        Args:
            acc: accelerometer (S, 3) [m/s²] in the IMU frames.
            gyr: gyro (S, 3) [rad/s] in the IMU frames.

        Returns:
            ``(acc, gyr)`` in the link frames, (S, 3) each.
        """
        a = torch.matmul(self.matrix, acc.unsqueeze(-1)).squeeze(-1)
        w = torch.matmul(self.matrix, gyr.unsqueeze(-1)).squeeze(-1)
        return a, w


def frame_valid(acc: Tensor, gyr: Tensor, acc_range: float, gyr_range: float) -> Tensor:
    """True where an IMU frame is finite and below saturation, (..., 3) → (...).

    Args:
        acc: accelerometer (..., 3) [m/s²].
        gyr: gyro (..., 3) [rad/s].
        acc_range: accelerometer saturation limit [m/s²] (|component| must be below it).
        gyr_range: gyro saturation limit [rad/s].

    Returns:
        The validity mask (...) bool.
    """
    ok_a = torch.isfinite(acc).all(-1) & (acc.abs() < acc_range).all(-1)
    ok_g = torch.isfinite(gyr).all(-1) & (gyr.abs() < gyr_range).all(-1)
    return ok_a & ok_g


class ComplementaryFilter(nn.Module):
    """PI complementary filter of seed 000, eq. (6), for J joints; scriptable, stateful.

    Args: k_p [1/s], k_i [1/s²], dt [s], n_joints. State buffers ``theta_hat``, ``bias_hat`` (J,),
    ``initialized`` (bool). ``forward(theta_meas (J,), rate_meas (J,)) -> (theta_hat, rate_hat, fault)``
    where ``rate_hat = θ̇ + b̂`` is the bias-corrected rate; non-finite inputs hold the state and flag
    ``fault``.
    """

    # buffers: gains and step (), state (J,) and the initialised flag (bool)
    k_p: Tensor
    k_i: Tensor
    dt: Tensor
    theta_hat: Tensor
    bias_hat: Tensor
    initialized: Tensor

    def __init__(self, k_p: float = 7.0407, k_i: float = 0.1984, dt: float = 1e-3, n_joints: int = 1) -> None:
        super().__init__()
        for name, v in (("k_p", k_p), ("k_i", k_i), ("dt", dt)):
            check(math.isfinite(v) and v > 0, f"complementary_filter.{name}", v, "must be a finite number > 0")
        check(k_p * dt < 1.0, "complementary_filter.k_p", k_p, f"k_p*dt must be < 1 for stability (dt={dt})")
        check(n_joints >= 1, "complementary_filter.n_joints", n_joints, "must be >= 1")
        self.register_buffer("k_p", torch.tensor(k_p, dtype=torch.float64))
        self.register_buffer("k_i", torch.tensor(k_i, dtype=torch.float64))
        self.register_buffer("dt", torch.tensor(dt, dtype=torch.float64))
        self.register_buffer("theta_hat", torch.zeros(n_joints, dtype=torch.float64))
        self.register_buffer("bias_hat", torch.zeros(n_joints, dtype=torch.float64))
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))

    @torch.jit.export
    def reset(self) -> None:
        self.theta_hat.zero_()
        self.bias_hat.zero_()
        self.initialized.fill_(False)

    def forward(self, theta_meas: Tensor, rate_meas: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One step of eq. (6); non-finite inputs hold the state and flag ``fault``.

        Args:
            theta_meas: measured joint angles (J,) [rad].
            rate_meas: measured joint rates (J,) [rad/s].

        Returns:
            ``(theta_hat (J,) [rad], rate_hat (J,) [rad/s], fault () bool)``; ``rate_hat = θ̇ + b̂`` the
            bias-corrected rate (b̂ · 0 on a fault).
        """
        ok = torch.isfinite(theta_meas).all() & torch.isfinite(rate_meas).all()
        if bool(ok):
            if not bool(self.initialized):
                self.theta_hat.copy_(theta_meas)
                self.initialized.fill_(True)
            e = theta_meas - self.theta_hat
            new_theta = self.theta_hat + self.dt * (self.bias_hat + self.k_p * e + rate_meas)
            self.bias_hat.add_(self.dt * self.k_i * e)
            self.theta_hat.copy_(new_theta)
            return self.theta_hat.clone(), rate_meas + self.bias_hat, torch.zeros((), dtype=torch.bool)
        return self.theta_hat.clone(), self.bias_hat * 0.0, torch.ones((), dtype=torch.bool)


def complementary_filter(
    theta: np.ndarray | Tensor, rate: np.ndarray | Tensor, dt: float = 1e-3, k_p: float = 7.0407, k_i: float = 0.1984
) -> tuple[np.ndarray, np.ndarray]:
    """Offline eq. (6) over a sequence: θ (N,) or (N, J), θ̇ likewise → (θ̂ (N, J), b̂ (N, J)).

    The same update as :class:`ComplementaryFilter` (state initialised with the first sample). A fully
    finite record is filtered as the equivalent LTI system with :func:`scipy.signal.lfilter` (C speed);
    with non-finite samples a sample loop holds the state over them.

    Args:
        theta: measured angles θ (N,) or (N, J) [rad].
        rate: measured rates θ̇ (N,) or (N, J) [rad/s].
        dt: sample period [s].
        k_p: proportional gain [1/s].
        k_i: integral gain [1/s²].

    Returns:
        ``(θ̂ (N, J) [rad], b̂ (N, J) [rad/s])``.
    """
    from scipy.signal import lfilter  # heavy (~1 s): loaded by the offline filters only, not by the runtime

    th = np.asarray(theta, dtype=np.float64)
    rt = np.asarray(rate, dtype=np.float64)
    if th.ndim == 1:
        th, rt = th[:, None], rt[:, None]
    N, J = th.shape
    if np.all(np.isfinite(th)) and np.all(np.isfinite(rt)):
        a11, a12, a21, a22 = 1.0 - dt * k_p, dt, -dt * k_i, 1.0
        B = np.array([[dt * k_p, dt], [dt * k_i, 0.0]])
        den = [1.0, -(a11 + a22), a11 * a22 - a12 * a21]
        # y_k = x_{k+1} = z (zI − A)⁻¹ B u ;  adj(zI − A) = [[z − a22, a12], [a21, z − a11]]
        num = {
            (0, 0): [B[0, 0], -a22 * B[0, 0] + a12 * B[1, 0]],
            (0, 1): [B[0, 1], -a22 * B[0, 1] + a12 * B[1, 1]],
            (1, 0): [B[1, 0], a21 * B[0, 0] - a11 * B[1, 0]],
            (1, 1): [B[1, 1], a21 * B[0, 1] - a11 * B[1, 1]],
        }
        u0 = th - th[0]  # [θ0, 0] is an equilibrium for input [θ0, 0]
        out = th[0] + lfilter(num[(0, 0)], den, u0, axis=0) + lfilter(num[(0, 1)], den, rt, axis=0)
        bias = lfilter(num[(1, 0)], den, u0, axis=0) + lfilter(num[(1, 1)], den, rt, axis=0)
        return out, bias
    out = np.empty((N, J))
    bias_out = np.empty((N, J))
    x = None
    b = np.zeros(J)
    for k in range(N):
        t, r = th[k], rt[k]
        if np.all(np.isfinite(t)) and np.all(np.isfinite(r)):
            if x is None:
                x = t.copy()
            e = t - x
            x = x + dt * (b + k_p * e + r)
            b = b + dt * k_i * e
        out[k] = x if x is not None else 0.0
        bias_out[k] = b
    return out, bias_out


def kinematic_acceleration(
    omega: Tensor, alpha: Tensor, phi: Tensor, lever: Tensor, link_of_imu: Tensor, frame_angle: Optional[Tensor] = None
) -> Tensor:
    """Rigid-chain linear acceleration of each IMU in its own frame, (..., S, 3) [m/s²].

    Planar serial chain with absolute link angles φ_j, rates ω_j and angular accelerations α_j
    (..., n); IMU s sits on link i(s) = ``link_of_imu[s]`` with lever arms ``lever[s, j]`` = L_j for
    j < i(s), its distance ξ_s from joint i(s) for j = i(s), and 0 beyond (S, n) [m]. In complex form
    (world x + i y) the acceleration is ``Σ_j lever[s, j] (−ω_j² + i α_j) e^{iφ_j}``; rotated by
    ``e^{−iψ_s}`` it gives the (y, z) components in the IMU frame (x = 0), where ψ_s is the IMU's own
    inclination ``frame_angle`` (..., S) (default: its link angle; on a bent link the two differ by the
    local slope w′; in our single-link simulations the difference in the result was negligible).
    Subtracting it from the accelerometer leaves gravity, which makes eq. (2) valid during motion (the
    compensation of the seed's ref. [18]; seed 000, §II-A, where eqs. (3)–(4) are lost in the text).

    Args:
        omega: link rates ω_j (..., n) [rad/s].
        alpha: link angular accelerations α_j (..., n) [rad/s²].
        phi: absolute link angles φ_j (..., n) [rad].
        lever: lever arms (S, n) [m].
        link_of_imu: link index of each IMU (S,) int.
        frame_angle: each IMU's own inclination ψ_s (..., S) [rad]; None: its link angle.

    Returns:
        The acceleration (..., S, 3) [m/s²], x component 0.
    """
    c = torch.complex(-omega * omega, alpha) * torch.polar(torch.ones_like(phi), phi)  # (..., n)
    a_world = torch.matmul(c, lever.to(c.dtype).transpose(-1, -2))  # (..., S)
    ang = phi[..., link_of_imu] if frame_angle is None else frame_angle
    a = a_world * torch.polar(torch.ones_like(ang), -ang)
    r = torch.view_as_real(a)
    return torch.cat([torch.zeros_like(r[..., :1]), r], -1)


def angular_acceleration(omega: np.ndarray, dt: float, tau: float = 0.05) -> np.ndarray:
    """Low-passed finite difference of gyro rates, (N, ...) → (N, ...) [rad/s²].

    ``α_k = α_{k−1} + β ((ω_k − ω_{k−1})/dt − α_{k−1})``, ``β = dt/(τ + dt)``, α_0 = 0 (offline twin of
    the runtime estimator's recursion).

    Args:
        omega: gyro rates (N, ...) [rad/s].
        dt: sample period [s].
        tau: low-pass time constant τ [s].

    Returns:
        α (N, ...) [rad/s²].
    """
    from scipy.signal import lfilter  # heavy (~1 s): loaded by the offline filters only, not by the runtime

    w = np.asarray(omega, dtype=np.float64)
    d = np.concatenate([np.zeros_like(w[:1]), np.diff(w, axis=0) / dt], 0)
    beta = dt / (tau + dt)
    return lfilter([beta], [1.0, -(1.0 - beta)], d, axis=0)


@dataclasses.dataclass
class ImuNoiseConfig:
    """White noise (std per sample) and constant bias (std of the random draw per IMU and axis)."""

    acc_noise: float = 0.02  # m/s²
    gyr_noise: float = 0.002  # rad/s
    acc_bias: float = 0.02  # m/s²
    gyr_bias: float = 0.005  # rad/s
    acc_range: float = 6.0 * GRAVITY  # m/s², saturation
    gyr_range: float = math.radians(300.0)  # rad/s

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            check(math.isfinite(v) and v >= 0, f"noise.{f.name}", v, "must be a finite number >= 0")
        check(self.acc_range > 0 and self.gyr_range > 0, "noise.acc_range", self.acc_range, "ranges must be > 0")
