# mypy: disable-error-code="empty-body"
# (a TorchScript interface method is declared with a bare `pass` body, and TorchScript reads `# type:` comments)
"""Bias models of the fused estimator (`flexlearn.runtime.fusion.estimator.FusedEstimator`; seed 002, III-B4): how one
magnetic fix of joint j + 1 corrects the module rotations. One small submodule per model behind the `BiasModel`
interface; the estimator holds it as ``bias_filter`` and the scripted estimator dispatches to it.

* `RotationBias` ("rotation") — the seed's 3-D rotation bias b_j as written: P ← P + σ_b² Δt (+ (κ Δφ)²),
  K = P (P + σ_m²)⁻¹, y = Log(u^q → u^m) − b ("seed" innovation) or Log(Ĉ u^q → u^m) ("observable"),
  b ← b + K y, then b ← b − γ (b·u^q) u^q (twist damping), P ← (1 − K) P, C_j = exp([b_j]×).
* `HeadingWalkBias` ("heading_walk") — one scalar random walk per joint, c_j ← c_j + K y with y the signed heading
  angle about the vertical a from Ĉ u^q to u^m and variance σ_m² / s² (s = horizontal weight); module corrections
  C_k = exp(Σ_{m≤k} c_m [a_k]×), so a parent's correction carries its children.
* `HeadingRateBias` ("heading", the default) — module headings, drift rates per travel and receiver
  misalignments in one Kalman filter (`flexlearn.runtime.fusion.heading_filter.HeadingDriftFilter`).

The estimator's docstring (`flexlearn.runtime.fusion.estimator`) derives each model and says when to use which.

State: a model updates the estimator's bias state in place. It registers the estimator's own tensors (`BIAS_STATE`:
b (N, 3), C (N, 3, 3), the attitude gains G = C T (N + 1, 3, 16) and T, the variances p and their times, the
heading corrections, the drift axes, the modules' angular travel) as its buffers, so there is one copy of each in
the eager, scripted, saved and loaded estimator (TorchScript serialises a shared tensor once; a deep copy keeps
the sharing). `HeadingRateBias` shares the estimator's heading filter ``hf`` the same way: a module scripted
through an interface can hold no submodule of its own, so it is a `HeadingDriftFilter` over hf's tensors.
"""

import math
from typing import Mapping, cast

import torch
from torch import Tensor, nn

from flexlearn.lie import rotation_between, so3_exp
from flexlearn.runtime.fusion.heading_filter import HeadingDriftFilter, heading_angle, misalignment_direction

BIAS_STATE = ("bias", "c_bias", "gain", "tmap", "p_var", "t_p", "rel_c", "theta_applied", "axis", "travel")


@torch.jit.interface
class BiasModel(nn.Module):  # noqa: D101 (a TorchScript interface: methods only; see the module docstring)
    def correct(self, j: int, uq: Tensor, um: Tensor, r_par: Tensor, dtr: Tensor, t: float, sigma_m2: float) -> bool:
        """Fix of joint j + 1 at time t [s]: updates the shared bias state.

        Args:
            j: joint index: the fix is of joint j + 1 (child module j + 1, parent j).
            uq: quaternion direction u^q (3,) of the child.
            um: magnetic direction u^m (3,) of the child.
            r_par: corrected parent rotation R̂_j (3, 3).
            dtr: (child, parent) angular travel since the joint's last fix (2,) [rad].
            t: time of the fix [s].
            sigma_m2: σ_m² of this fix [rad²].

        Returns:
            True when applied; False: rejected (not finite or gated; the bias unchanged).
        """
        pass


def _register_bias_state(module: nn.Module, state: Mapping[str, Tensor]) -> None:
    """The estimator's bias-state tensors (`BIAS_STATE`) as buffers of ``module`` (the same tensors, not copies)."""
    for name in BIAS_STATE:
        module.register_buffer(name, state[name])


class BiasStateTypes:
    """Declarations (no values) of the estimator's bias-state buffers a bias model registers as its own."""

    bias: Tensor
    c_bias: Tensor
    gain: Tensor
    tmap: Tensor
    p_var: Tensor
    t_p: Tensor
    rel_c: Tensor
    theta_applied: Tensor
    axis: Tensor
    travel: Tensor


class _SharedBiasState(nn.Module, BiasStateTypes):
    """Base of the rotation and heading-walk models: the shared bias state and the predicted variance P_j."""

    def __init__(self, state: Mapping[str, Tensor], sigma_b2: float, travel_noise: float) -> None:
        super().__init__()
        _register_bias_state(self, state)
        self.n = int(state["bias"].shape[0])
        self.sigma_b2, self.travel_noise = float(sigma_b2), float(travel_noise)

    def _variance(self, j: int, dtr: Tensor, t: float, relative: bool) -> Tensor:
        """P_j predicted to t: p + k σ_b² Δt + (κ Δφ_child)² (+ (κ Δφ_parent)²), k = 2 and both travels when the
        state is relative (a difference of two modules' drifts, whose noises add), else k = 1, the child's only."""
        two = 2.0 if relative else 1.0
        p = self.p_var[j] + two * self.sigma_b2 * max(t - float(self.t_p[j]), 0.0)
        if self.travel_noise > 0.0:
            p = p + (self.travel_noise * dtr[0]) ** 2
            if relative:
                p = p + (self.travel_noise * dtr[1]) ** 2
        return p


class RotationBias(_SharedBiasState):
    """The seed's 3-D rotation bias b_j per segment with twist damping γ (module docstring); ``seed_innovation``:
    y = Log(u^q → u^m) − b (the seed), else y = Log(Ĉ u^q → u^m) (observable part only)."""

    def __init__(
        self,
        state: Mapping[str, Tensor],
        sigma_b2: float,
        travel_noise: float,
        twist_damping: float,
        seed_innovation: bool,
    ) -> None:
        super().__init__(state, sigma_b2, travel_noise)
        self.twist_damping, self.seed_innovation = float(twist_damping), bool(seed_innovation)

    def correct(self, j: int, uq: Tensor, um: Tensor, r_par: Tensor, dtr: Tensor, t: float, sigma_m2: float) -> bool:
        """Rotation-bias update: b ← b + K y, twist damping, P ← (1 − K) P, C_j = exp([b_j]×).

        Args:
            j: joint index: the fix is of joint j + 1 (child module j + 1, parent j).
            uq: quaternion direction u^q (3,) of the child.
            um: magnetic direction u^m (3,) of the child.
            r_par: corrected parent rotation R̂_j (3, 3).
            dtr: (child, parent) angular travel since the joint's last fix (2,) [rad].
            t: time of the fix [s].
            sigma_m2: σ_m² of this fix [rad²].

        Returns:
            True when applied; False: rejected (b not finite; the bias unchanged).
        """
        p = self._variance(j, dtr, t, False)
        b = self.bias[j]
        if self.seed_innovation:
            y = rotation_between(uq, um) - b  # seed III-B4 (implicitly damps b along u^q by K)
        else:
            y = rotation_between(torch.matmul(self.c_bias[j], uq), um)  # observable part only: Log(û → u^m)
        k = p / (p + sigma_m2)
        b = b + k * y
        b = b - self.twist_damping * torch.dot(b, uq) * uq
        if not bool(torch.isfinite(b).all()):
            return False
        self.bias[j] = b
        self.p_var[j].fill_((1.0 - k) * p)
        self.t_p[j].fill_(t)
        self.c_bias[j] = so3_exp(b)
        self.gain[j + 1] = torch.matmul(self.c_bias[j], self.tmap[j + 1])
        return True


class HeadingWalkBias(_SharedBiasState):
    """One random-walk heading correction per joint (module docstring).

    A game rotation vector's tilt is gravity-referenced, so its drift is a rotation ψ_k about the vertical a_k of
    module k. The fix measures ψ_{j+1} − ψ_j (the parent rotation converts the relative direction), seen through
    the horizontal part of u (|u_h| = sin tilt): y = signed angle about a from Ĉ u^q to u^m, variance
    σ_m² / (|Ĉu^q_h| |u^m_h|). Scalar Kalman update c_j ← c_j + K y; the module corrections are the cumulative sums
    C_k = exp(Σ_{m≤k} c_m [a_k]×), so a parent's correction carries its children along (their fixes were relative
    to it). Tilt components of y are ignored; near vertical (s² < 1e-3) only the prediction is kept.
    """

    def correct(self, j: int, uq: Tensor, um: Tensor, r_par: Tensor, dtr: Tensor, t: float, sigma_m2: float) -> bool:
        """Heading random-walk update c_j ← c_j + K y; corrections of modules j + 1..N follow.

        A segment near vertical (s² < 1e-3) leaves the heading unobservable: only the variance is predicted.

        Args:
            j: joint index: the fix is of joint j + 1 (child module j + 1, parent j).
            uq: quaternion direction u^q (3,) of the child.
            um: magnetic direction u^m (3,) of the child.
            r_par: corrected parent rotation R̂_j (3, 3).
            dtr: (child, parent) angular travel since the joint's last fix (2,) [rad].
            t: time of the fix [s].
            sigma_m2: σ_m² of this fix [rad²].

        Returns:
            True when applied; False: rejected (the correction not finite; the bias unchanged).
        """
        p = float(self._variance(j, dtr, t, j > 0))
        y, s2 = heading_angle(torch.matmul(self.c_bias[j], uq), um, self.axis[j + 1])
        self.p_var[j].fill_(p)
        self.t_p[j].fill_(t)
        if s2 < 1e-3:  # segment near vertical: heading unobservable
            return True
        k = p / (p + sigma_m2 / s2)
        c = self.rel_c[j] + k * y
        if not bool(torch.isfinite(c)):
            return False
        self.rel_c[j] = c
        self.p_var[j].fill_((1.0 - k) * p)
        cum = torch.cumsum(self.rel_c, 0)
        for m in range(j, self.n):
            w = cum[m] * self.axis[m + 1]
            self.bias[m] = w
            self.c_bias[m] = so3_exp(w)
            self.gain[m + 1] = torch.matmul(self.c_bias[m], self.tmap[m + 1])
        return True


class HeadingRateBias(HeadingDriftFilter, BiasStateTypes):
    """Default: module headings and drift rates in one Kalman filter, the estimator's ``hf``: this module is a
    `HeadingDriftFilter` over hf's own state tensors (`HeadingDriftFilter.share_state`) and the bias state, so
    ``est.hf`` shows every update it makes.

    Predicts every module's θ to t from its travel, then updates with joint j + 1's relative heading: y is the
    signed angle about a from Ĉ_{j+1} u^q to u^m (both built with the θ in the current gains), moved to the
    predicted state, white variance σ_m² / (|Ĉu^q_h| |u^m_h|), misalignment weights w = R̂_parᵀ (u^m × t̂) / s;
    near vertical (product < 1e-3) only the prediction is applied. All modules' gains are refreshed (a fix moves
    correlated neighbours and the drift rates). Returns False when the χ² gate rejects the fix.
    """

    def __init__(self, state: Mapping[str, Tensor], hf: HeadingDriftFilter) -> None:
        super().__init__(hf.n, hf.p0, 0.0, 0.0)  # settings and state: hf's, taken next
        self.share_state(hf)
        _register_bias_state(self, state)

    def correct(self, j: int, uq: Tensor, um: Tensor, r_par: Tensor, dtr: Tensor, t: float, sigma_m2: float) -> bool:
        """Predict every module's θ to t from its travel, then update with joint j + 1's heading.

        Args:
            j: joint index: the fix is of joint j + 1 (child module j + 1, parent j).
            uq: quaternion direction u^q (3,) of the child.
            um: magnetic direction u^m (3,) of the child.
            r_par: corrected parent rotation R̂_j (3, 3).
            dtr: (child, parent) angular travel since the joint's last fix (2,) [rad].
            t: time of the fix [s].
            sigma_m2: σ_m² of this fix [rad²].

        Returns:
            True when applied; False: rejected (the filter's update gated, or θ not finite: then the filter is reset).
        """
        self.predict(self.travel[1:], t)
        dth = self.theta() - self.theta_applied
        a = self.axis[j + 1]
        y, s2 = heading_angle(torch.matmul(self.c_bias[j], uq), um, a)
        ok = True
        if s2 >= 1e-3:
            y = y - float(dth[j]) + (float(dth[j - 1]) if j > 0 else 0.0)
            w = misalignment_direction(a, um, r_par) / math.sqrt(s2)
            ok = self.update(j, y, sigma_m2 / s2, w)
        th = self.theta()
        if not bool(torch.isfinite(th).all()):
            self.reset()
            return False
        self.theta_applied.copy_(th)
        self.rel_c.copy_(th - torch.cat([torch.zeros(1, dtype=torch.float64), th[:-1]]))
        self.p_var[j] = self.p[j, j]
        self.t_p[j].fill_(t)
        w = th.unsqueeze(-1) * self.axis[1:]
        self.bias.copy_(w)
        self.c_bias.copy_(so3_exp(w))
        self.gain[1:] = torch.matmul(self.c_bias, self.tmap[1:])
        return ok


def build_bias_model(
    kind: str,
    state: Mapping[str, Tensor],
    hf: HeadingDriftFilter,
    sigma_b2: float,
    travel_noise: float,
    twist_damping: float,
    seed_innovation: bool,
) -> BiasModel:
    """The `BiasModel` named ``kind`` over the estimator's bias state.

    Typed as the interface it implements (TorchScript checks the methods when the estimator is scripted).

    Args:
        kind: "heading", "heading_walk" or "rotation", checked by `fusion.options`.
        state: the estimator's bias-state tensors (`BIAS_STATE`), shared, not copied.
        hf: the estimator's heading filter (run by "heading" only).
        sigma_b2: σ_b², the bias random-walk rate [rad²/s] ("heading_walk", "rotation").
        travel_noise: κ, extra process noise (κ Δφ)² per rad of angular travel ("heading_walk", "rotation").
        twist_damping: γ, the fraction of b's component along u^q removed per update ("rotation").
        seed_innovation: y = Log(u^q → u^m) − b (the seed) instead of Log(Ĉ u^q → u^m) ("rotation").

    Returns:
        The bias model.
    """
    model: nn.Module
    if kind == "heading":
        model = HeadingRateBias(state, hf)
    elif kind == "heading_walk":
        model = HeadingWalkBias(state, sigma_b2, travel_noise)
    else:
        model = RotationBias(state, sigma_b2, travel_noise, twist_damping, seed_innovation)
    return cast(BiasModel, model)
