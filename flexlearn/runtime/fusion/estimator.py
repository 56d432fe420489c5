"""Scripted magnetic–inertial shape estimator of seed 002 (III-B2 acquisition, III-B3 reconstruction, III-B4 fusion).

Robot: a base module 0 and N sensing modules 1..N (N = 9 in the seed, 8 for its height hold). Module k carries an
IMU (game-rotation-vector quaternion q_k, body → its own drifting world frame), a coil, and a magnetometer that
receives the coil of module k − 1 (the receiver of joint i is module i). Units: s, T, m, rad.

Equations (seed 002):
* III-B3: the seed writes R_i = R(q_i) R(q_i⁰)ᵀ (q⁰ recorded hanging straight), e = −ẑ, u_i^q = R_i e. A game
  rotation vector reports H_i R_i^true M_i with its own arbitrary heading H_i about the vertical, so that form is
  R_i^true conjugated by H_i: each segment's bending plane turns by its IMU's initial heading, and the rotation of
  the parent about its own axis then corrupts u_i^m, which a direction-only bias b_i cannot undo (measured in
  simulation: 60+ mm backbone RMSE). The default ``reference="body"`` uses R_i = R(q_i⁰)ᵀ R(q_i) = M_iᵀ H_i0ᵀ
  H_i(t) R_i^true M_i, in which the initial heading cancels exactly and only the drift H_i0ᵀ H_i(t) remains — the
  error the seed's b_i is meant to track; ``reference="world"`` keeps the seed's literal form (seed discrepancy).
  Fast path: u_i^q is a quadratic form in q_i, û_i = C_i T_i vec(q_i q_iᵀ) with C_i = exp([b_i]×).
* III-B3: u_i^m = R̂_{i−1} M f(A_i W_i ΔB_i). The seed writes M_e = 2eeᵀ − I; with the training label of
  `flexlearn.models.direction_mlp` (parent axis pointing from child to parent, = R_childᵀ ẑ) that gives −u_i, so
  this code uses M = I − 2eeᵀ = diag(1, 1, −1) (seed discrepancy, see tests/runtime/test_fusion.py::test_sign).
  R̂_{i−1} = exp([b_{i−1}]×) R_{i−1} is the *corrected* parent rotation (the seed writes R_{i−1}; the raw one
  carries the parent IMU's own heading offset), R_0 of the base (b_0 = 0); both rotations are taken at coil
  activation (seed: "the parent's rotation is evaluated at coil activation").
* III-B4: û_i = exp([b_i]×) u_i^q,  P_i ← P_i + σ_b² Δt;  at a magnetic update y = Log(u_i^q → u_i^m) − b_i,
  K = P(P + σ_m²)⁻¹, b ← b + K y, P ← (1 − K) P. P starts and stays isotropic (P = p I) under these equations, so
  p is a scalar per segment (exact, not an approximation). The seed's "− b" already damps b's component along
  u^q (unobservable) by K per update; an extra damping b ← b − γ (b·u^q) u^q is applied (γ = ``twist_damping``).
  Keep γ small: heading drift is a rotation about the vertical, i.e. *along* u^q whenever a segment passes
  straight, and a large γ erases the learned heading correction every time (measured: γ = 0.5 left 100 mm tip
  error after 50 curl cycles, γ = 0.02 tracks the drift). ``innovation="observable"`` uses y = Log(û_i → u_i^m)
  instead (no implicit damping); both give the same accuracy in simulation.
* Bias model (``bias_model``). "rotation" is the seed's III-B4 as written (3-D b_i per segment). Its weakness:
  a fix of joint i measures segment i's direction *relative to its parent*, so u_i^m carries the parent's heading
  error, and the part of that error about the parent's own axis is exactly b_{i−1}'s unobservable (damped)
  component — children inherit their parents' uncorrected headings. The heading models use what a game rotation
  vector's drift is (tilt is gravity-referenced; only the heading about the vertical a_k drifts, seed III-B4):
  module corrections C_k = exp(θ_k [a_k]×), a fix of joint i measuring θ_i − θ_{i−1} through the horizontal part
  of u (variance σ_m² / sin² tilt). Default "heading": one Kalman filter over module headings, drift rates per
  travel and receiver misalignments (`flexlearn.runtime.fusion.heading_filter`, which documents it). "heading_walk": one
  scalar random walk per joint, c_i = θ_i − θ_{i−1}, noise (κ Δφ)² per travel Δφ, θ_k = Σ_{m≤k} c_m, σ_m = 0.07.
  Each model is a submodule behind the `flexlearn.runtime.fusion.bias_models.BiasModel` interface (``bias_filter``),
  which
  holds its update equations; the scripted estimator dispatches to it. Measured accuracy of each model:
  docs/raspberry_pi.md (`scripts/reproduce_seed002_table1.py`).
* III-B4: p_0 = 0, p_i = p_{i−1} + L û_i;  III-C: h = L Σ (1 + û_{i,z}).
* III-B2 coil field: ΔB = mean of fresh coil-on samples (after ``settle``, bitwise-new conversions) − the latest
  confirmed coil-off baseline (mean of fresh coil-off samples before the pulse).

Modes (the seed's baselines in the same code path): FUSION, QUAT_ONLY (b ≡ 0), MAG_ONLY (û from the chain of the
latest magnetic relative directions, no-twist joints, quaternions unused).

Robustness (never NaN; the last valid state is held and the segment flagged, bits in `fusion.flags`): non-finite or
non-unit quaternions, silent modules (stale), repeated (stale) or saturated magnetometer conversions, non-finite
readings, out-of-order / duplicated timestamps (frame ignored), pulses with too few fresh samples or no baseline;
a restarted or jumping master clock is detected and the time base resynchronised (`time_base`, CLOCK_RESYNC).

Twin: `flexlearn.runtime.fusion.graph.FusedEstimatorGraph` is this estimator without data-dependent branches, for
`torch.export` / ExecuTorch (default configuration). Both run the same pure steps (`fusion.quat_quadratic`:
reference rows, quadratic maps, module directions, angular travel, relative rotations; `fusion.frame_rules`: which
quaternions and readings count, the flags of those that do not, the timed flags, whether a fix is usable, its
direction; `fusion.heading_filter`: heading angle, misalignment weights, prediction and prior of the heading
filter; `pikit.time_base.clock_step`: the clock rule) and share one list of state buffers (`fusion.state`); what
differs is only how each applies an outcome (a branch here, ``torch.where`` there). A change to either must keep
tests/runtime/test_executorch.py's parity tests passing.
"""

import json
import math
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from flexlearn.lie import quat_to_matrix
from flexlearn.runtime.fusion.bias_models import BIAS_STATE, BiasModel, build_bias_model
from flexlearn.runtime.fusion.confidence import FixConfidence, build_confidence, quat_bend
from flexlearn.runtime.fusion.flags import (
    BAD_MAG,
    BAD_QUAT,
    CLOCK_RESYNC,
    FLAG_BITS,
    LOW_CONFIDENCE,
    MAG_REJECTED,
    NO_FIX,
    NO_REFERENCE,
    REPEATED_MAG,
    STALE_QUAT,
    TIME_ORDER,
)
from flexlearn.runtime.fusion.frame_rules import (
    child_direction,
    good_readings,
    held_quaternions,
    magnetometer_flags,
    timed_flags,
    usable_fix,
)
from flexlearn.runtime.fusion.heading_filter import HeadingDriftFilter
from flexlearn.runtime.fusion.options import (
    FUSION,
    MAG_ONLY,
    MODES,
    QUAT_ONLY,
    EstimatorSettings,
    mag_chain,
    resolve_noise,
)
from flexlearn.runtime.fusion.quat_quadratic import (
    angular_travel,
    body_relative_rotation,
    module_directions,
    quadratic_map,
    reference_rows,
)
from flexlearn.runtime.fusion.state import ESTIMATOR_BUFFERS, EstimatorStateTypes
from flexlearn.runtime.pikit.time_base import RESYNC_FLAG_S, TimeBase

__all__ = ["FusedEstimator"]


class FusedEstimator(nn.Module, EstimatorStateTypes):
    """Stateful per-frame estimator; every method is TorchScript-compatible (state lives in buffers).

    Args:
        model: direction model f, ΔB (…, 3) [T] → unit parent axis in the child sensor frame (`DirectionMLP`).
        settings: N, L, noise levels, pulse and fault rules, mode, reference, innovation, bias model, clock rule and
            fix confidence (`flexlearn.runtime.fusion.options.EstimatorSettings`, which documents each; how the
            defaults were chosen: `flexlearn.runtime.fusion.options`); None: the defaults.
        soft_iron: W (N, 3, 3) per receiver (identity if None).
        alignment: A (N, 3, 3) per receiver (identity if None).

    Raises:
        EstimatorSettingsError: a setting out of range (a ValueError).

    Inputs are float64 tensors (other dtypes are converted); quaternions (w, x, y, z) with R(q) body → world.
    """

    # flag bits (`fusion.flags`) and modes: TorchScript constants, inlined into the scripted code
    __constants__ = list(FLAG_BITS) + ["FUSION", "QUAT_ONLY", "MAG_ONLY"]
    BAD_QUAT, STALE_QUAT, BAD_MAG, REPEATED_MAG, TIME_ORDER = BAD_QUAT, STALE_QUAT, BAD_MAG, REPEATED_MAG, TIME_ORDER
    MAG_REJECTED, NO_FIX, NO_REFERENCE, CLOCK_RESYNC = MAG_REJECTED, NO_FIX, NO_REFERENCE, CLOCK_RESYNC
    LOW_CONFIDENCE, FUSION, QUAT_ONLY, MAG_ONLY = LOW_CONFIDENCE, FUSION, QUAT_ONLY, MAG_ONLY
    # submodules behind interfaces (real types: this module does not postpone annotations, TorchScript reads them)
    confidence: FixConfidence
    bias_filter: BiasModel
    # buffers (registered in the `_init_*` helpers) beside those of `EstimatorStateTypes`
    d_rel: Tensor
    no_fix_mask: Tensor
    zeros3: Tensor
    last_um: Tensor
    last_db: Tensor
    last_target: Tensor
    last_sigma_m: Tensor
    n_low_confidence: Tensor

    def __init__(
        self,
        model: nn.Module,
        settings: Optional[EstimatorSettings] = None,
        soft_iron: Optional[Tensor] = None,
        alignment: Optional[Tensor] = None,
    ) -> None:
        """Arguments: see the class docstring. The state is set up by the `_init_*` helpers (TorchScript takes every
        attribute and buffer the instance has once built); the settings are kept as plain attributes."""
        super().__init__()
        settings = EstimatorSettings() if settings is None else settings
        sigma_b, sigma_m, travel_noise = resolve_noise(settings)
        confidence = settings.confidence
        n_segments, length, p0 = settings.n_segments, settings.length, settings.p0
        bias_model, innovation = settings.bias_model, settings.innovation
        n = int(n_segments)
        self.model, self.n, self.length = model, n, float(length)
        # configuration (also the bundle's metadata, `flexlearn.runtime.deploy`)
        self.sigma_b2, self.sigma_m2 = sigma_b**2, sigma_m**2
        self.confidence = build_confidence(confidence, self.sigma_m2)
        self.confidence_json = json.dumps(confidence and dict(confidence), sort_keys=True)  # bundle metadata
        self.use_confidence = confidence is not None and confidence["kind"] != "constant"
        self.fix_sigma_m2, self.conf_flag = self.sigma_m2, 0  # σ_m² of the current fix, its flag
        self.p0, self.twist_damping, self.settle = float(p0), float(settings.twist_damping), float(settings.settle)
        self.min_fresh, self.full_scale = int(settings.min_fresh), float(settings.full_scale)
        self.stale_after, self.fix_timeout = float(settings.stale_after), float(settings.fix_timeout)
        self.mode = MODES[settings.mode]
        self.body_ref = settings.reference == "body"
        self.travel_noise, self.bias_model = float(travel_noise), bias_model
        self.gate, self.sigma_align = float(settings.gate), float(settings.sigma_align)
        self._init_attitude_state(n, soft_iron, alignment)
        self._init_magnetometer_state(n, float(sigma_m))
        # bias model (`bias_models`): it updates the bias state above in place; "heading" runs the filter ``hf``
        self.hf = HeadingDriftFilter(
            n,
            float(p0),
            self.travel_noise if bias_model == "heading" else 0.0,
            float(sigma_b),
            self.gate,
            self.sigma_align,
        )
        self.bias_filter = build_bias_model(
            bias_model,
            {name: getattr(self, name) for name in BIAS_STATE},
            self.hf,
            self.sigma_b2,
            self.travel_noise,
            self.twist_damping,
            innovation == "seed",
        )
        # master clock → estimator time τ = t + t_off (one shared offset; streams 0: attitude, 1: magnetometer)
        self.clock = TimeBase(2, float(settings.clock_jump), int(settings.clock_confirm))
        self.t_off = 0.0
        self.max_gap = float(settings.clock_jump)
        self.resync_until = -1e300  # CLOCK_RESYNC shown until then
        self.resync_flag_s = RESYNC_FLAG_S
        self.set_reference(self.q_ref.clone())
        self.static_flags.fill_(self.NO_REFERENCE)  # until set_reference
        self.base_flags = self.static_flags.clone()
        missing = [name for name in ESTIMATOR_BUFFERS if name not in self._buffers]
        assert not missing, f"state buffers declared in fusion.state but not registered: {missing}"

    def _init_attitude_state(self, n: int, soft_iron: Optional[Tensor], alignment: Optional[Tensor]) -> None:
        """Calibration, references, bias state, attitude outputs and flags of N segments (see the buffers' notes)."""
        f64 = torch.float64
        eye = torch.eye(3, dtype=f64)
        w = eye.expand(n, 3, 3) if soft_iron is None else soft_iron.to(f64).reshape(n, 3, 3)
        a = eye.expand(n, 3, 3) if alignment is None else alignment.to(f64).reshape(n, 3, 3)
        self.register_buffer("aw", (a @ w).contiguous())  # A_i W_i (N, 3, 3)
        self.register_buffer("e", torch.tensor([0.0, 0.0, -1.0], dtype=f64))
        self.register_buffer("flip", torch.tensor([1.0, 1.0, -1.0], dtype=f64))  # M = I − 2eeᵀ
        # attitude state
        self.register_buffer("q_ref", torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=f64).repeat(n + 1, 1))
        self.register_buffer("v_ref", self.e.repeat(n + 1, 1))  # R(q⁰)ᵀ e ("world") or e ("body")
        self.register_buffer("r0t", torch.eye(3, dtype=f64).repeat(n + 1, 1, 1))  # R(q⁰)ᵀ per module
        self.register_buffer("theta_applied", torch.zeros(n, dtype=f64))  # θ in the current gains [rad]
        self.register_buffer("axis", torch.tensor([0.0, 0.0, 1.0], dtype=f64).repeat(n + 1, 1))  # drift axes
        self.register_buffer("rel_c", torch.zeros(n, dtype=f64))  # heading: joint corrections [rad]
        self.register_buffer("travel", torch.zeros(n + 1, dtype=f64))  # module angular travel [rad]
        self.register_buffer("travel_fix", torch.zeros(n, 2, dtype=f64))  # (child, parent) travel at last fix
        self.register_buffer("has_ref", torch.zeros(n + 1, dtype=torch.bool))
        self.register_buffer("q_last", self.q_ref.clone())
        self.register_buffer("q_time", torch.full((n + 1,), -1e300, dtype=f64))
        self.register_buffer("q_on", self.q_ref.clone())  # snapshot at coil activation
        self.register_buffer("bias", torch.zeros(n, 3, dtype=f64))
        self.register_buffer("c_bias", eye.repeat(n, 1, 1))  # exp([b_i]×)
        self.register_buffer("p_var", torch.full((n,), self.p0, dtype=f64))  # P_i = p_i I at time t_p
        self.register_buffer("t_p", torch.full((n,), 1e300, dtype=f64))
        self.register_buffer("d_rel", self.e.repeat(n, 1))  # MAG_ONLY: latest relative directions
        self.register_buffer("u_hat", self.e.repeat(n, 1))
        self.register_buffer("points", torch.zeros(n + 1, 3, dtype=f64))
        self.register_buffer("height", torch.zeros((), dtype=f64))
        self.register_buffer("flags", torch.zeros(n, dtype=torch.int64))
        self.register_buffer("tmap", torch.zeros(n + 1, 3, 16, dtype=f64))  # q ↦ R(q) v_k per module k
        self.register_buffer("gain", torch.zeros(n + 1, 3, 16, dtype=f64))  # C_k T_k (C_0 = I)
        chain = torch.tril(torch.ones(n + 1, n + 1, dtype=f64)) * self.length
        chain[:, 0] = 0.0  # the base module adds no segment
        self.register_buffer("chain", chain)  # points = chain @ û
        self.register_buffer("no_fix_mask", torch.zeros(n, dtype=torch.bool))
        self.register_buffer("zeros3", torch.zeros(n, 3, dtype=f64))
        self.register_buffer("static_flags", torch.zeros(n, dtype=torch.int64))
        self.register_buffer("base_flags", torch.zeros(n, dtype=torch.int64))  # static | magnetometer flags
        self.t_att = -1e300
        self.t_all_ok = -1e300
        self.register_buffer("bad_now", torch.zeros(n, dtype=torch.int64))
        # NO_FIX flags, recomputed only when they can change: at the next timeout deadline or after a fix
        self.nofix_next = -1e300
        self.nofix_any = False
        self.register_buffer("nofix_flags", torch.zeros(n, dtype=torch.int64))

    def _init_magnetometer_state(self, n: int, sigma_m: float) -> None:
        """Magnetometer / coil-burst state (receiver j = segment j + 1, its parent coil = module j) and fix records."""
        f64 = torch.float64
        self.register_buffer("prev_raw", torch.full((n, 3), float("nan"), dtype=f64))
        self.register_buffer("off_sum", torch.zeros(n, 3, dtype=f64))
        self.register_buffer("off_cnt", torch.zeros(n, dtype=f64))
        self.register_buffer("base", torch.zeros(n, 3, dtype=f64))
        self.register_buffer("base_ok", torch.zeros(n, dtype=torch.bool))
        self.register_buffer("on_sum", torch.zeros(n, 3, dtype=f64))
        self.register_buffer("on_cnt", torch.zeros(n, dtype=f64))
        self.register_buffer("mag_flags", torch.zeros(n, dtype=torch.int64))
        self.register_buffer("t_fix", torch.full((n,), -1e300, dtype=f64))
        self.register_buffer("n_fixes", torch.zeros(n, dtype=torch.int64))
        self.register_buffer("last_um", torch.full((n, 3), float("nan"), dtype=f64))
        self.register_buffer("last_db", torch.full((n, 3), float("nan"), dtype=f64))
        self.register_buffer("last_target", torch.full((n, 3), float("nan"), dtype=f64))
        self.register_buffer("last_sigma_m", torch.full((n,), sigma_m, dtype=f64))  # per-fix σ_m [rad]
        self.register_buffer("n_low_confidence", torch.zeros(n, dtype=torch.int64))  # fixes it rejected
        self.register_buffer("eye_n", torch.eye(n, dtype=torch.bool))
        self.mag_flagged = False
        self.coil = -1
        self.t_switch, self.t_mag = -1e300, -1e300

    # ------------------------------------------------------------------------------------------ setup
    @torch.jit.export
    def set_reference(self, quats: Tensor) -> None:
        """Record q⁰ (N + 1, 4) with the robot hanging straight (non-finite rows keep identity, flagged) and reset.

        Args:
            quats: module quaternions (N + 1, 4) (w, x, y, z), body → world.
        """
        q, ok = reference_rows(quats, self.q_ref)
        self.q_ref.copy_(q)
        self.has_ref.copy_(ok)
        r0t = quat_to_matrix(q).transpose(-1, -2)
        self.r0t.copy_(r0t)
        if self.body_ref:
            self.v_ref.copy_(self.e.expand(self.n + 1, 3))
            self.axis.copy_(r0t[:, :, 2])  # R(q⁰)ᵀ ẑ: the IMU's vertical in the reference frame
        else:
            self.v_ref.copy_(torch.matmul(r0t, self.e))
            self.axis.copy_(-self.e.expand(self.n + 1, 3))
        self.q_last.copy_(q)
        self.static_flags.copy_(torch.where(ok[1:], 0, self.NO_REFERENCE))
        self.base_flags = self.static_flags | self.mag_flags
        self._refresh_tmap()
        self.reset_filter()

    @torch.jit.export
    def reset_filter(self) -> None:
        """Zero the rotation biases, set P = p0, forget magnetic fixes and pulse accumulators."""
        self.bias.zero_()
        self.c_bias.copy_(torch.eye(3, dtype=torch.float64).expand(self.n, 3, 3))
        self.p_var.fill_(self.p0)
        self.t_p.fill_(1e300)
        self.d_rel.copy_(self.e.expand(self.n, 3))
        self.off_sum.zero_()
        self.off_cnt.zero_()
        self.on_sum.zero_()
        self.on_cnt.zero_()
        self.base_ok.zero_()
        self.n_fixes.zero_()
        self.t_fix.fill_(-1e300)
        self.nofix_next = -1e300
        self.gain.copy_(self.tmap)
        self.rel_c.zero_()
        self.hf.reset()
        self.theta_applied.zero_()
        self.travel.zero_()
        self.travel_fix.zero_()
        self.q_on.copy_(self.q_last)

    # --------------------------------------------------------------------------------------- attitude
    def _refresh_tmap(self) -> None:
        """T_i (N, 3, 16): the quadratic map q ↦ R(q) v_i, so that û_i = C_i T_i vec(q qᵀ) / |q|² (G_i = C_i T_i)."""
        t = quadratic_map(self.v_ref)  # (N + 1, 3, 16), `quat_quadratic`
        if self.body_ref:
            t = torch.matmul(self.r0t, t)  # R(q⁰)ᵀ R(q) e
        self.tmap.copy_(t)

    @torch.jit.export
    def attitude(self, t: float, quats: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One attitude sweep: quats (N + 1, 4) at time t [s] → (points (N + 1, 3) [m], h () [m], flags (N,)).

        Rows with |q|² in (0.25, 4) are normalised; invalid rows (non-finite, |q|² outside) hold the module's last
        valid quaternion (BAD_QUAT); a frame whose time is not after the previous one, more than ``clock_jump`` after
        it, or non-finite is ignored (TIME_ORDER on all segments) unless it confirms a restarted clock. Fast path
        (every |q|² within 1e-3 of 1, then used unnormalised: < 0.03 mm per
        segment): ~15 tensor ops, û_i = exp([b_i]×) R_i e = G_i vec(q_i q_iᵀ) with G_i = C_i T_i precomputed.

        Args:
            t: time of the frame [s].
            quats: module quaternions (N + 1, 4).

        Returns:
            ``(points (N + 1, 3) [m], h () [m], flags (N,))``.
        """
        tau = t + self.t_off  # estimator time (`time_base`)
        if not (tau > self.t_att and tau - self.t_att <= self.max_gap):
            tau = self._clock(0, t, self.t_att)
            if math.isnan(tau):
                return self.points, self.height, self.flags | self.TIME_ORDER
        t = tau
        self.t_att = t
        q = quats.to(torch.float64)
        n2 = (q * q).sum(-1)
        # fast path: every row unit to 1e-3 (then |q|² normalisation changes û by < 1e-3, < 0.03 mm per segment)
        all_ok = torch.equal(n2.clamp(0.999, 1.001), n2)  # False for NaN or inf
        if all_ok:
            self.q_last.copy_(q)
            self.t_all_ok = t
            if self.mode == self.MAG_ONLY:
                u = mag_chain(self.e, self.d_rel)
            else:
                u = module_directions(self.gain, q)
        else:
            u = self._attitude_slow(t, q, n2)
        self.u_hat = u[1:]
        self.points = torch.matmul(self.chain, u)  # p_0 = 0, p_i = p_{i−1} + L û_i (û_0 column unused)
        self.height = self.points[self.n, 2] + self.n * self.length  # h = L Σ (1 + û_z) = p_N,z + N L
        fl = self.base_flags
        if not all_ok:
            fl = fl | self.bad_now | torch.where(t - self.q_time[1:] > self.stale_after, self.STALE_QUAT, 0)
        if t >= self.nofix_next:
            self._refresh_nofix(t)
        if self.nofix_any:
            fl = fl | self.nofix_flags
        self.flags = fl
        return self.points, self.height, fl

    def _refresh_nofix(self, t: float) -> None:
        """Timed flags: NO_FIX on segments without a fix for more than ``fix_timeout``, CLOCK_RESYNC on all within
        `RESYNC_FLAG_S` of a resync; the next change is the earliest deadline (a new fix or resync resets it)."""
        f64 = torch.float64
        fl, nxt = timed_flags(
            torch.full((), t, dtype=f64), self.t_fix, self.fix_timeout, torch.full((), self.resync_until, dtype=f64)
        )
        self.nofix_flags = fl
        self.nofix_any = bool((fl != 0).any())
        self.nofix_next = float(nxt)

    def _clock(self, k: int, t: float, last: float) -> float:
        """Slow time check of stream k (0 att, 1 mag), master time t [s] → τ [s], or NaN: drop (`TimeBase.check`)."""
        tau = self.clock.check(k, t, last, max(self.t_att, self.t_mag))
        if self.clock.offset != self.t_off:
            self.t_off = self.clock.offset
            self.resync_until = tau + self.resync_flag_s
            self.nofix_next = -1e300  # refresh the timed flags
        return tau

    def _attitude_slow(self, t: float, q: Tensor, n2: Tensor) -> Tensor:
        """Some rows not unit: normalise those in (0.25, 4), hold the others' last valid quaternion (BAD_QUAT)."""
        ok, q = held_quaternions(q, n2, self.q_last)
        self.q_time.copy_(torch.where(ok, t, torch.clamp_min(self.q_time, self.t_all_ok)))
        self.q_last.copy_(q)
        self.bad_now.copy_(torch.where(ok[1:], 0, self.BAD_QUAT))
        if self.mode == self.MAG_ONLY:
            return mag_chain(self.e, self.d_rel)
        return module_directions(self.gain, q)

    # ------------------------------------------------------------------------------------ magnetometer
    @torch.jit.export
    def magnetometer(self, t: float, mags: Tensor, coil: int) -> Tensor:
        """One magnetometer round: raw readings (N, 3) [T] of receivers 1..N; ``coil`` = firing module (−1: none).

        Only bitwise-new, finite, unsaturated readings count (flags REPEATED_MAG / BAD_MAG otherwise); a pulse ends
        when ``coil`` changes. Coil-off baselines are collected only from rounds with no coil firing.

        Args:
            t: time of the round [s].
            mags: raw readings (N, 3) [T] of receivers 1..N.
            coil: the firing module (−1: none).

        Returns:
            The per-segment mask (N,) of magnetic corrections applied in this call.
        """
        applied = self.no_fix_mask
        tau = t + self.t_off  # estimator time (`time_base`)
        if not (tau > self.t_mag and tau - self.t_mag <= self.max_gap):
            tau = self._clock(1, t, self.t_mag)
            if math.isnan(tau):
                self._set_mag_flags(torch.full_like(self.mag_flags, self.TIME_ORDER))
                return applied
        t = tau
        self.t_mag = t
        m = mags.to(torch.float64)
        # good: finite, unsaturated and bitwise-new (NaN prev at start: new); flags of the others
        good = good_readings(m, self.prev_raw, self.full_scale)
        all_good = bool(good.all())
        if all_good:
            self.prev_raw.copy_(m)
            if self.mag_flagged:
                self._set_mag_flags(torch.zeros_like(self.mag_flags))
        else:
            _, finite, fl = magnetometer_flags(m, self.prev_raw, self.full_scale)  # a round with bad readings
            self.prev_raw.copy_(torch.where(finite.unsqueeze(-1), m, self.prev_raw))
            self._set_mag_flags(fl)
        if coil != self.coil:
            if self.coil >= 0 and self.coil < self.n:
                applied = self._finish_pulse(self.coil, t)
            self.coil = coil
            self.t_switch = t
            if coil >= 0 and coil < self.n:  # confirm the receiver's coil-off baseline
                j = coil
                if float(self.off_cnt[j]) > 0.0:
                    self.base[j] = self.off_sum[j] / self.off_cnt[j]
                    self.base_ok[j] = True
                self.on_sum[j].zero_()
                self.on_cnt[j] = 0.0
                # angular travel since the previous activation (every T_pair): drift grows with it (III-B4)
                self.travel.add_(angular_travel(self.q_on, self.q_last))
                self.q_on.copy_(self.q_last)
            self.off_sum.zero_()
            self.off_cnt.zero_()
            return applied  # samples at a switch instant are transients
        if t - self.t_switch < self.settle:
            return applied
        if self.coil >= 0 and self.coil < self.n:
            j = self.coil
            if bool(good[j]):
                self.on_sum[j] += m[j]
                self.on_cnt[j] += 1.0
            return applied  # baselines only from coil-off rounds: other receivers see this coil too
        if self.coil >= 0:
            return applied  # an unknown coil index is on: no baseline samples
        if all_good:
            self.off_sum.add_(m)
            self.off_cnt.add_(1.0)
        else:
            self.off_sum.add_(torch.where(good.unsqueeze(-1), m, self.zeros3))
            self.off_cnt.add_(good)
        return applied

    def _set_mag_flags(self, fl: Tensor) -> None:
        self.mag_flags.copy_(fl)
        self.base_flags = self.static_flags | fl
        self.mag_flagged = bool((fl != 0).any())

    def _finish_pulse(self, j: int, t: float) -> Tensor:
        applied = torch.zeros(self.n, dtype=torch.bool)
        if float(self.on_cnt[j]) < float(self.min_fresh) or not bool(self.base_ok[j]):
            self._set_mag_flags(self.mag_flags | torch.where(self.eye_n[j], self.MAG_REJECTED, 0))
            return applied
        db = self.on_sum[j] / self.on_cnt[j] - self.base[j]
        if self.correct(j + 1, db, t):
            applied[j] = True
        else:
            self._set_mag_flags(self.mag_flags | torch.where(self.eye_n[j], self.MAG_REJECTED | self.conf_flag, 0))
            self.conf_flag = 0
        return applied

    def _relative(self, k: int) -> Tensor:
        """R_k at coil activation: R(q_k⁰)ᵀ R(q_k) (reference "body") or R(q_k) R(q_k⁰)ᵀ ("world", the seed's form)."""
        if self.body_ref:
            return body_relative_rotation(self.r0t[k], self.q_on[k])
        r = quat_to_matrix(self.q_on[k] / torch.linalg.vector_norm(self.q_on[k]))
        return torch.matmul(r, self.r0t[k].transpose(0, 1))

    def _confident(self, j: int, x: Tensor, f: Tensor) -> bool:
        """Per-fix σ_m² of joint j + 1 from the confidence source, given the quaternion bend (corrected parent and
        child at coil activation; unknown in MAG_ONLY); False: rejected (the caller flags LOW_CONFIDENCE)."""
        bq = -1.0
        if self.mode != self.MAG_ONLY:
            r_par = self._relative(j) if j == 0 else torch.matmul(self.c_bias[j - 1], self._relative(j))
            bq = quat_bend(r_par, torch.matmul(self.c_bias[j], torch.matmul(self._relative(j + 1), self.e)), self.e)
        self.fix_sigma_m2, reject = self.confidence(x, f, bq)
        self.last_sigma_m[j].fill_(math.sqrt(self.fix_sigma_m2))
        self.conf_flag = self.LOW_CONFIDENCE if reject else 0
        self.n_low_confidence[j] += int(reject)
        return not reject

    @torch.jit.export
    def correct(self, i: int, delta_b: Tensor, t: float) -> bool:
        """Magnetic update of segment i ∈ 1..N from its coil field ΔB (3,) [T] (seed 002, III-B3/B4).

        Uses the module quaternions snapshotted at coil activation.

        Args:
            i: segment index ∈ 1..N.
            delta_b: the coil field ΔB (3,) [T].
            t: time of the fix [s].

        Returns:
            True when applied; False (state unchanged) when the prediction is not a usable direction (not finite, or
            shorter than 0.5: the direction model returns exactly zero for "no direction") or ΔB is zero, and when
            the bias model rejects the fix (`bias_models`: the "heading" model's χ² gate; its drift prediction is
            still applied).
        """
        j = i - 1
        db = delta_b.to(torch.float64)
        x = torch.matmul(self.aw[j], db)
        f = self.model(x.to(torch.float32).unsqueeze(0)).squeeze(0).detach().to(torch.float64)
        if not bool(usable_fix(db, f)):
            return False
        if self.use_confidence and not self._confident(j, x, f):
            return False
        d = child_direction(f, self.flip)  # child direction in the parent frame
        self.n_fixes[j] += 1
        self.t_fix[j].fill_(t)
        self.nofix_next = -1e300
        if self.mode == self.MAG_ONLY:
            self.d_rel[j] = d
            self.last_um[j] = d
            return True
        r_par = self._relative(j)
        if j > 0:
            r_par = torch.matmul(self.c_bias[j - 1], r_par)
        um = torch.matmul(r_par, d)
        uq = torch.matmul(self._relative(i), self.e)
        self.last_um[j] = um
        self.last_db[j] = db  # for the alignment fit (seed III-B3): ΔB_i and
        self.last_target[j] = torch.matmul(r_par.transpose(0, 1), uq)  # R_{i−1}ᵀ u_i^q at this fix
        if self.mode == self.QUAT_ONLY:
            return True
        dtr = self.travel[j : i + 1].flip(0) - self.travel_fix[j]  # (child, parent) travel [rad]
        self.travel_fix[j] = self.travel[j : i + 1].flip(0)
        return self.bias_filter.correct(j, uq, um, r_par, dtr, t, self.fix_sigma_m2)  # `bias_models`

    def forward(self, t: float, quats: Tensor, mags: Tensor, coil: int) -> Tuple[Tensor, Tensor, Tensor]:
        """One fused step: magnetometer round then attitude sweep at time t (see `magnetometer`, `attitude`).

        Args:
            t: time [s].
            quats: module quaternions (N + 1, 4).
            mags: raw magnetometer readings (N, 3) [T].
            coil: the firing module (−1: none).

        Returns:
            The attitude sweep's ``(points (N + 1, 3) [m], h () [m], flags (N,))``.
        """
        self.magnetometer(t, mags, coil)
        return self.attitude(t, quats)
