"""Heading-drift Kalman filter of the fused estimator (seed 002, III-B4 "heading drift", per module).

A game rotation vector's tilt is gravity-referenced; only its heading about the vertical drifts, and the seed
measures that drift as ≈ 0.65 % of the module's angular travel. The filter therefore carries, for modules
k = 1..N (the base module 0 is fixed and uncorrected),

    x = [θ_1..θ_N, ρ_1..ρ_N, δ_1..δ_N]   (5N,),   θ_k: heading correction of module k [rad],
                                                   ρ_k: its drift per radian of angular travel [rad/rad],
                                                   δ_j (3,): residual misalignment of receiver j [rad],

with the prediction θ_k ← θ_k + ρ_k Δφ_k over the travel Δφ_k since the previous prediction (a drift ∝ travel is a
ramp, which a random walk can only follow with a lag) and P ← F P Fᵀ + diag(σ_b² Δt, 0, 0). Prior: θ ~ N(0, p0),
ρ ~ N(0, κ²) with κ the seed's drift figure, δ ~ N(0, σ_δ² I) with σ_δ from the mounting tolerance.

A magnetic fix of joint j + 1 (parent module j, child j + 1) observes the relative heading θ_{j+1} − θ_j
(θ_0 ≡ 0) through the horizontal part of u (|u_h| = s = sin tilt), with white variance r = σ_m² / s². A fixed
misalignment of the measured direction (receiver mount, residual alignment A_j; a rotation δ_j in the parent
frame moves u^m by (R_par δ_j) × u^m) adds w·δ_j to the heading, w = R_parᵀ (u^m × t̂) / s with t̂ the heading
direction a × u^m / |a × u^m|. It does not average out over fixes — treated as white noise it biases the heading of
near-vertical (small s) segments by degrees, and a proximal heading error is common to every distal segment —
but as a state it is separable from the heading because its weight 1/s changes with the tilt as the robot moves.
Scalar update with h = e_{j+1} − e_j + w on δ_j, S = hᵀPh + r, K = Ph / S. An innovation with y² > g² S (χ² gate, g
standard deviations) is
rejected as an outlier unless the joint's previous fix was rejected too (a persistent large innovation is a
change the model did not foresee, and refusing it for ever would let the filter diverge). Cost: a few (2N × 2N)
products, once per coil pulse (300 ms), none per attitude frame.
"""

import math
from typing import Tuple

import torch
from torch import Tensor, nn

from flexlearn.runtime.fusion.options import EstimatorSettingsError


def heading_angle_terms(x: Tensor, u: Tensor, a: Tensor) -> Tuple[Tensor, Tensor]:
    """The heading angle and its horizontal weight, without a branch.

    Args:
        x: a direction (3,).
        u: another direction (3,).
        a: the unit vertical (3,).

    Returns:
        (signed angle () [rad] about ``a`` from the horizontal part of x to that of u, s = |x_h| |u_h| (): the angle
        is unobservable when s is ~0).
    """
    xp = x - torch.dot(x, a) * a
    yp = u - torch.dot(u, a) * a
    s2 = torch.linalg.vector_norm(xp) * torch.linalg.vector_norm(yp)
    return torch.atan2(torch.dot(a, torch.linalg.cross(xp, yp)), torch.dot(xp, yp)), s2


def heading_angle(x: Tensor, u: Tensor, a: Tensor) -> Tuple[float, float]:
    """`heading_angle_terms` as Python floats, the angle 0 where s < 1e-3 (unobservable).

    Args:
        x: a direction (3,).
        u: another direction (3,).
        a: the unit vertical (3,).

    Returns:
        (signed angle [rad], s).
    """
    angle, s2t = heading_angle_terms(x, u, a)
    s2 = float(s2t)
    if s2 < 1e-3:
        return 0.0, s2
    return float(angle), s2


def misalignment_direction(a: Tensor, um: Tensor, r_par: Tensor) -> Tensor:
    """R_parᵀ (u^m × t̂), t̂ = a × u^m / |a × u^m|: the misalignment weights w of a fix times s (module docstring).

    Args:
        a: the unit vertical (3,).
        um: the magnetic direction u^m (3,).
        r_par: the corrected parent rotation R̂_par (3, 3).

    Returns:
        s w (3,) [1/rad·rad]; divide by s = √(s²) of `heading_angle_terms`.
    """
    that = torch.linalg.cross(a, um)
    that = that / torch.linalg.vector_norm(that).clamp_min(1e-12)
    return torch.matmul(r_par.transpose(0, 1), torch.linalg.cross(um, that))


def heading_prior_variances(n: int, p0: float, kappa2: float, sigma_align2: float) -> Tensor:
    """The prior's diagonal diag(p0 …, κ² …, σ_δ² …) (5N,) [rad², (rad/rad)², rad²] of the filter state x.

    Args:
        n: N modules.
        p0: prior variance of θ [rad²].
        kappa2: prior variance κ² of ρ.
        sigma_align2: prior variance σ_δ² of each misalignment axis [rad²].

    Returns:
        (5N,) float64.
    """
    f64 = torch.float64
    return torch.cat(
        [
            torch.full((n,), p0, dtype=f64),
            torch.full((n,), kappa2, dtype=f64),
            torch.full((3 * n,), sigma_align2, dtype=f64),
        ]
    )


def heading_predict(
    x: Tensor, p: Tensor, eye: Tensor, dphi: Tensor, dt: Tensor, sigma_b2: float
) -> Tuple[Tensor, Tensor]:
    """Prediction θ_k ← θ_k + ρ_k Δφ_k, P ← F P Fᵀ + diag(σ_b² Δt, 0, 0) (module docstring).

    Args:
        x: state (5N,).
        p: covariance (5N, 5N).
        eye: identity (5N, 5N).
        dphi: angular travel Δφ (N,) [rad] since the previous prediction.
        dt: time () [s] since the previous prediction (0 for the first).
        sigma_b2: heading random walk σ_b² [rad²/s].

    Returns:
        (x, P) predicted.
    """
    n = dphi.shape[0]
    f = eye.clone()
    f[:n, n : 2 * n] = torch.diag(dphi)
    x = torch.matmul(f, x)
    p = torch.matmul(torch.matmul(f, p), f.transpose(0, 1))
    p[:n, :n] += eye[:n, :n] * (sigma_b2 * dt)
    return x, p


class HeadingDriftFilter(nn.Module):
    """Module heading corrections and drift rates (see the module docstring); TorchScript-compatible.

    Args:
        n: N sensing modules.  p0: prior variance of θ [rad²].  kappa: prior std of ρ [rad per rad of travel].
        sigma_b: heading random walk [rad/√s].  gate: χ² gate in standard deviations (0: no gate).
        sigma_align: prior std σ_δ of each receiver's residual misalignment per axis [rad] (0: not estimated).
    """

    # buffers (real annotations: this module does not postpone them, TorchScript reads them)
    x: Tensor
    p: Tensor
    travel_ref: Tensor
    eye: Tensor
    last_nis: Tensor
    rejected: Tensor
    t_ref: Tensor

    def __init__(
        self, n: int, p0: float, kappa: float, sigma_b: float, gate: float = 3.0, sigma_align: float = 0.0
    ) -> None:
        super().__init__()
        if gate < 0.0 or not math.isfinite(gate):
            raise EstimatorSettingsError(f"gate = {gate}: expected a finite value >= 0")
        self.n = int(n)
        self.p0 = float(p0)
        self.kappa2 = float(kappa) ** 2
        self.sigma_b2 = float(sigma_b) ** 2
        self.sigma_align2 = float(sigma_align) ** 2
        self.gate2 = float(gate) ** 2
        f64 = torch.float64
        self.register_buffer("x", torch.zeros(5 * n, dtype=f64))
        self.register_buffer("p", torch.zeros(5 * n, 5 * n, dtype=f64))
        self.register_buffer("travel_ref", torch.zeros(n, dtype=f64))
        self.register_buffer("eye", torch.eye(5 * n, dtype=f64))
        self.register_buffer("last_nis", torch.zeros(n, dtype=f64))  # y² / S of each joint's latest fix
        self.register_buffer("rejected", torch.zeros(n, dtype=torch.int64))  # consecutive gated fixes per joint
        self.register_buffer("t_ref", torch.full((), -1e300, dtype=f64))  # time of the last prediction [s]
        self.reset()

    def share_state(self, other: "HeadingDriftFilter") -> None:
        """Take ``other``'s settings and its state tensors themselves (not copies): the two are then one filter
        (used by `flexlearn.runtime.fusion.bias_models.HeadingRateBias`, which runs the estimator's filter).

        Args:
            other: the filter whose settings and state tensors this one takes.
        """
        self.n, self.p0, self.kappa2, self.sigma_b2 = other.n, other.p0, other.kappa2, other.sigma_b2
        self.sigma_align2, self.gate2 = other.sigma_align2, other.gate2
        for name in ("x", "p", "travel_ref", "eye", "last_nis", "rejected", "t_ref"):
            self.register_buffer(name, getattr(other, name))

    @torch.jit.export
    def reset(self) -> None:
        """X = 0, P = diag(p0 …, κ² …, σ_δ² …), travel reference zero (the estimator's travel restarts at zero)."""
        self.x.zero_()
        self.p.copy_(self.eye * heading_prior_variances(self.n, self.p0, self.kappa2, self.sigma_align2))
        self.travel_ref.zero_()
        self.last_nis.zero_()
        self.rejected.zero_()
        self.t_ref.fill_(-1e300)

    @torch.jit.export
    def theta(self) -> Tensor:
        """Module heading corrections θ (N,) [rad]."""
        return self.x[: self.n]

    @torch.jit.export
    def predict(self, travel: Tensor, t: float) -> None:
        """Advance to time t [s] with the modules' cumulative angular travel (N,) [rad].

        Args:
            travel: the modules' cumulative angular travel (N,) [rad].
            t: time [s].
        """
        dphi = (travel - self.travel_ref).clamp_min(0.0)
        self.travel_ref.copy_(travel)
        t_ref = float(self.t_ref)
        dt = max(t - t_ref, 0.0) if t_ref > -1e299 else 0.0
        self.t_ref.fill_(t)
        x, p = heading_predict(self.x, self.p, self.eye, dphi, torch.full((), dt, dtype=torch.float64), self.sigma_b2)
        self.x.copy_(x)
        self.p.copy_(p)

    @torch.jit.export
    def misalignment(self) -> Tensor:
        """Estimated residual receiver misalignments δ (N, 3) [rad] (parent frame)."""
        return self.x[2 * self.n :].reshape(self.n, 3)

    @torch.jit.export
    def update(self, j: int, y: float, r: float, w: Tensor) -> bool:
        """Fix of joint j + 1 (child module j + 1, parent j).

        Args:
            j: joint index (the fix is of joint j + 1).
            y: measured minus predicted θ_{j+1} − θ_j [rad] (the δ term is subtracted here).
            r: white variance [rad²].
            w: misalignment weights (3,) [1/rad·rad].

        Returns:
            True when applied; False (state unchanged) when the innovation is not finite or fails the χ² gate (the
            second consecutive failure of a joint is accepted).
        """
        b = 2 * self.n + 3 * j
        ph = self.p[:, j].clone()
        if j > 0:
            ph = ph - self.p[:, j - 1]
        ph = ph + torch.matmul(self.p[:, b : b + 3], w)
        s = float(ph[j]) - (float(ph[j - 1]) if j > 0 else 0.0) + float(torch.dot(ph[b : b + 3], w)) + r
        y = y - float(torch.dot(self.x[b : b + 3], w))
        if not math.isfinite(y) or not math.isfinite(s) or s <= 0.0:
            return False
        nis = y * y / s
        self.last_nis[j].fill_(nis)
        if self.gate2 > 0.0 and nis > self.gate2 and int(self.rejected[j]) == 0:
            self.rejected[j] = 1
            return False
        self.rejected[j] = 0
        k = ph / s
        self.x.add_(k * y)
        p = self.p - torch.outer(k, ph)
        self.p.copy_(0.5 * (p + p.transpose(0, 1)))
        return True
