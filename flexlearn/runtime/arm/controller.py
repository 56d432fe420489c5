"""Deployable deformation-informed PDE controller of a two-link flexible arm (seed 000, §V-B, eq. (45)).

One scriptable module, one step entry: ``forward(frame (S, 6) [acc m/s² | gyr rad/s], t [s])`` →
``(torques (2,) [N m], state (STATE_SIZE,), fault code (int64 scalar))``. Inside:

1. input checks (lost frame: wrong shape/empty; non-finite sample; saturated sensor; non-finite time);
2. :class:`~flexlearn.physics.modal.FlexibleArmEstimator` (IMU → joint angles θ̂ and rates, modal
   coordinates, tip deflections w(L), tip slopes w′(L), base curvatures w″(0), end-effector pose; seed
   000, §II–IV) — the state is IMU-only, no encoders;
3. quintic reference (seed 000, §VI-D) ``θ_d = θ₀ + Δ(10σ³ − 15σ⁴ + 6σ⁵)``, σ = clip((t − t₀)/T, 0, 1);
4. the control law of seed 000, eq. (45): ``τ_i = K_p,i e_i + K_d,i ė_i − H_i``, e = θ_d − θ̂, with

       H₁ = E₁I₁w₁″(0) + E₂I₂w₂″(0) − (½m₁ + m₂) g L₁ cos θ₁ + (M₁ + M₂) g w₁(L₁) sin θ₁
            − ½ m₂ g L₂ cos(θ₁ + θ₂) + M₂ g w₂(L₂) sin(θ₁ + θ₂) − I_h1 θ̈_d1
       H₂ = E₂I₂w₂″(0) − ½ m₂ g L₂ cos(θ₁ + θ₂) + M₂ g w₂(L₂) sin(θ₁ + θ₂) − I_h2 θ̈_d2

   (m_i = ρA_i L_i link masses, M_i tip payloads, I_hi hub inertias), each group weighted by ``terms`` =
   (curvature, rigid gravity, deformation–gravity coupling, payload gravity, feedforward);
5. torque limit ``|τ_i| ≤ tau_max_i`` (clamped, flagged).

Faults never produce NaN: on a bad frame the module returns the last valid torques and state with the
fault bits set (``FAULT_*``); before the first valid frame it returns the rigid gravity torques at θ₀.
A long run of faults keeps holding the last torques (no fallback policy yet).

Estimation extras (all variants, each switchable): ``gyro_rest_calibration`` — before the motion
(t < t0) the gyro biases are fitted from ∫ω − ψ_acc and replace the PI filter's integral state at t0 (the
seed's k_I needs ≈ 35 s; a 0.005 rad/s bias costs K_d·0.005 = 30 N m); ``slope_correction`` — the angles get
the static sag correction Δθ = C (cos φ₁, cos φ₂) of :func:`~flexlearn.runtime.arm.load.static_angle_correction`
(the few-mode slope fit of a loaded link's sag is 0.2° off at the reference IMU); ``modal_rates`` (off) —
joint rates as the derivative of the angle map instead of eq. (5). The hub loads of
:class:`~flexlearn.runtime.arm.load.LinkLoadModel` (root moments from the IMU-measured link loads) are
computed for every variant, low-passed (critically damped, ``load_filter_hz``), and reported in the state.

Variants (``ArmControllerConfig.variant``; default ``moment``, eq. (45) in its consistent hub form with the root
moments from the IMU-measured loads): the weights of the law's term groups, listed in `flexlearn.runtime.arm.config`.

The five discrepancies found in the seed's equations and the measurements behind the default variant are in
docs/arm_controller.md ("The seed's equations and the default variant").

Step cost (1 kHz, also on a Raspberry Pi 5): estimator and loads folded into a few matrices (`flexlearn.runtime.
arm.step`, ~15 kernels), the law on Python floats, outputs exact via :func:`~flexlearn.runtime.arm.step.exact_f64`
(``torch.tensor(List[float])`` rounds through float32 in TorchScript); eager and scripted are bit-identical.
"""

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from flexlearn.physics.modal.estimator import FlexibleArmEstimator
from flexlearn.runtime.arm.config import VARIANTS, ArmControllerConfig
from flexlearn.runtime.arm.layout import lean_step_layout
from flexlearn.runtime.arm.load import LinkLoadModel, static_angle_correction
from flexlearn.runtime.arm.outputs import (
    FAULT_BAD_TIME,
    FAULT_BAD_TORQUE,
    FAULT_LOST_FRAME,
    FAULT_NONFINITE,
    FAULT_SATURATED,
    FAULT_TORQUE_LIMIT,
)
from flexlearn.runtime.arm.reference import quintic
from flexlearn.runtime.arm.step import (
    STEP_FLOATS,
    STEP_INTS,
    compensation_map,
    exact_f64,
    gyro_bias_from_rest,
    initial_link_trig,
    rest_sample,
)

__all__ = ["ArmController"]


class ArmController(nn.Module):
    """Scriptable IMU-fed controller of seed 000, eq. (45) (module docstring). Build with :meth:`build`."""

    # fault bits as TorchScript constants (the module-level FAULT_* names)
    # immutable settings too: inlined into the scripted code (no attribute look-ups in the 1 kHz step)
    __constants__ = (
        [
            "LOST_FRAME",
            "NONFINITE",
            "SATURATED",
            "TORQUE_LIMIT",
            "BAD_TORQUE",
            "BAD_TIME",
            "thf0",
            "thf1",
            "hold_a",
            "hold_b",
            "use_load",
            "slope_correction",
            "calibrate",
            "compensate",
            "n_y",
        ]
        + list(STEP_INTS)
        + list(STEP_FLOATS)
    )
    LOST_FRAME = FAULT_LOST_FRAME
    NONFINITE = FAULT_NONFINITE
    SATURATED = FAULT_SATURATED
    TORQUE_LIMIT = FAULT_TORQUE_LIMIT
    BAD_TORQUE = FAULT_BAD_TORQUE
    BAD_TIME = FAULT_BAD_TIME
    # buffers: gains and references, the last output, the lean step's maps (`lean_step_maps`), its work vectors
    # and their fixed views (real annotations: this module does not postpone them, TorchScript reads them)
    kp: Tensor
    kd: Tensor
    theta0: Tensor
    thetaf: Tensor
    tau_max: Tensor
    hub: Tensor
    EI: Tensor
    last_out: Tensor
    last_tau: Tensor
    last_state: Tensor
    trig_off: Tensor
    trig_map: Tensor
    cal: Tensor
    gyr_count: Tensor
    A: Tensor
    a0: Tensor
    Q: Tensor
    KK: Tensor
    init_off: Tensor
    init_map: Tensor
    W: Tensor
    ranges: Tensor
    work: Tensor
    sines: Tensor
    frame_in: Tensor
    xz: Tensor
    zY: Tensor
    L: Tensor
    L_f: Tensor
    L_u1: Tensor
    L_u2: Tensor
    L_zY: Tensor
    L_w: Tensor
    L_fl: Tensor
    f_c: Tensor
    f_cy: Tensor
    f_cz: Tensor
    psi_m: Tensor
    Y_out: Tensor
    Y_e: Tensor
    Y_sin: Tensor
    YF: Tensor
    F: Tensor
    out_index: Tensor
    s_trig: Tensor
    s_load: Tensor

    def __init__(self, estimator: FlexibleArmEstimator, cfg: ArmControllerConfig) -> None:
        super().__init__()
        cfg.validate()
        f64 = torch.float64
        self.estimator = estimator
        self.n_imus = int(estimator.n_imus)
        M = int(estimator.n_modes_total)
        self.n_modes_total = M
        self.state_size = 17 + M
        self.register_buffer("kp", torch.tensor(cfg.kp, dtype=f64))
        self.register_buffer("kd", torch.tensor(cfg.kd, dtype=f64))
        self.register_buffer("theta0", torch.tensor(cfg.theta0, dtype=f64))
        self.register_buffer("thetaf", torch.tensor(cfg.thetaf, dtype=f64))
        self.register_buffer("tau_max", torch.tensor(cfg.tau_max, dtype=f64))
        self.register_buffer("hub", torch.tensor(cfg.hub_inertia, dtype=f64))
        self.register_buffer("EI", torch.tensor(cfg.EI, dtype=f64))
        self.t0 = float(cfg.t0)
        self.duration = float(cfg.duration)
        self._set_law_coefficients(cfg)
        L1, L2 = cfg.lengths
        # last valid output [τ (2) | state]: last_tau and last_state are views of one buffer (one copy per step)
        last = torch.zeros(2 + self.state_size, dtype=f64)
        last[0:2] = self._gravity_hold(torch.tensor(cfg.theta0, dtype=f64))
        last[2:4] = torch.tensor(cfg.theta0, dtype=f64)
        self.register_buffer("last_out", last)
        self.register_buffer("last_tau", last[0:2])
        self.register_buffer("last_state", last[2:])
        self.tau2_last = float(self.last_tau[1])  # joint-2 torque of the last output (hub-1 load), float
        self.fault_count = 0  # steps with a fault bit set
        self.steps = 0  # calls of forward / step_joints
        # hub loads from the measured link loads (`arm.load`); joint 1 also carries link 2
        links = cfg.model_links()
        self.loads = LinkLoadModel.build(links, cfg.rho_A, cfg.payload, cfg.imu_positions, cfg.n_modes)
        self.use_load = cfg.variant == "moment"
        self.L1 = float(L1)
        link_of_imu = torch.tensor([i for i, p in enumerate(cfg.imu_positions) for _ in p], dtype=torch.int64)
        n = 2
        phi_rows = estimator.psi_map[1 + 4 * n + M : 1 + 5 * n + M]  # absolute base angles φ = P_φ ψ̂ (n, S)
        trig_off, trig_map = LinkLoadModel.trig_of_slopes(torch.eye(self.n_imus, dtype=f64) - phi_rows[link_of_imu])
        self.register_buffer("trig_off", trig_off)  # local slopes δ_s = ψ̂_s − φ_link(s): sin/cos in one op
        self.register_buffer("trig_map", trig_map)
        # hub 2 sits on link 1's tip: its base accelerates with θ̈₁ (consistent hub form of the feedforward)
        self.ff21 = self.ff2 if self.use_load else 0.0
        # critically damped second-order low-pass of the hub loads (two first-order stages at load_filter_hz):
        # keeps the motion and the first modes, removes what the affine load fit cannot represent (the
        # instantaneous high-mode accelerations that a torque step excites)
        self.lp_beta = float(cfg.dt / (1.0 / (2.0 * math.pi * cfg.load_filter_hz) + cfg.dt))
        self.lp = [0.0, 0.0, 0.0, 0.0]
        self.lp_init = False
        # static joint-angle correction Δθ = C (cos φ₁, cos φ₂) (`arm.load.static_angle_correction`)
        self.slope_correction = bool(cfg.slope_correction)
        C = static_angle_correction(links, cfg.rho_A, cfg.payload, cfg.imu_positions, cfg.n_modes, cfg.gravity).tolist()
        self.c11, self.c12, self.c21, self.c22 = C[0][0], C[0][1], C[1][0], C[1][1]
        # standstill gyro calibration before the motion starts (t < t0): b̂ = −mean(ω) per IMU
        self.calibrate = bool(cfg.gyro_rest_calibration)
        # sums of the least-squares line through r(t) = ∫ω dt − ψ_m(t) per IMU (rows: count, Σt, Σt², Σr, Σtr, ∫ω)
        self.register_buffer("cal", torch.zeros(6, self.n_imus, dtype=f64))
        self.register_buffer("gyr_count", torch.zeros((), dtype=torch.int64))
        self.cal_pending = self.calibrate  # until the calibration has been applied (at t0)
        self.cal_gate = 0.05  # rad: samples whose |ψ_m − ψ̂| exceeds this (torque-step transients) are skipped
        self._lean_step_buffers(estimator, trig_off, trig_map, float(L2))

    def _set_law_coefficients(self, cfg: ArmControllerConfig) -> None:
        """Scalar coefficients of eq. (45) in the configured variant (Python floats, TorchScript constants)."""
        g = float(cfg.gravity)
        m1, m2 = (cfg.rho_A[i] * cfg.lengths[i] for i in range(2))
        M1, M2 = cfg.payload
        L1, L2 = cfg.lengths
        w = VARIANTS[cfg.variant]
        self.c_curv, self.c_grav, self.c_coup, self.c_pay, self.c_ff = (float(v) for v in w)
        # H₁ = a11 m₁ + a12 m₂ − (gA1 cos θ₁ + gB1 cos θ₁₂ − kA1 w₁ sin θ₁ − kB1 w₂ sin θ₁₂) − ff₁ θ̈_d1
        # H₂ = a22 m₂ − (gB2 cos θ₁₂ − kB2 w₂ sin θ₁₂) − ff₂ θ̈_d2          (m_i = E_iI_i w_i″(0))
        gA = (0.5 * m1 + m2) * g * L1 * self.c_grav + (M1 + M2) * g * L1 * self.c_pay
        gB = 0.5 * m2 * g * L2 * self.c_grav + M2 * g * L2 * self.c_pay
        kA = (M1 + M2) * g * self.c_coup
        kB = M2 * g * self.c_coup
        self.a11, self.a12, self.a22 = self.c_curv, self.c_curv, self.c_curv
        s1 = s2 = 1.0
        if cfg.variant in ("hub", "blend", "moment"):
            self.a12 = 0.0
        if cfg.variant == "blend":  # per joint: k_i × root moment + (1 − k_i) × full gravity model
            k1, k2 = (float(v) for v in cfg.curvature_gain)
            self.a11, self.a22 = k1, k2
            s1, s2 = 1.0 - k1, 1.0 - k2
        self.gA1, self.gB1, self.kA1, self.kB1 = s1 * gA, s1 * gB, s1 * kA, s1 * kB
        self.gB2, self.kB2 = s2 * gB, s2 * kB
        self.th00, self.th01 = (float(v) for v in cfg.theta0)
        self.thf0, self.thf1 = (float(v) for v in cfg.thetaf)
        self.kp1, self.kp2 = (float(v) for v in cfg.kp)
        self.kd1, self.kd2 = (float(v) for v in cfg.kd)
        self.tmax1, self.tmax2 = (float(v) for v in cfg.tau_max)
        self.dt = float(cfg.dt)
        self.EI1, self.EI2 = (float(v) for v in cfg.EI)
        self.ff1 = self.c_ff * float(cfg.hub_inertia[0])
        self.ff2 = self.c_ff * float(cfg.hub_inertia[1])
        self.hold_a = (0.5 * m1 + m2 + M1 + M2) * g * L1
        self.hold_b = (0.5 * m2 + M2) * g * L2

    def _lean_step_buffers(
        self, estimator: FlexibleArmEstimator, trig_off: Tensor, trig_map: Tensor, L2: float
    ) -> None:
        """Matrices, row offsets and buffers of the lean step (`arm.layout`, `arm.step`); the estimator's filter
        state and link-angle trig become views of the controller's buffers ``work`` and ``sines``."""
        layout = lean_step_layout(estimator, self.loads, trig_off, trig_map)
        self.compensate = bool(estimator.compensate)
        for k, v in layout.offsets.items():  # k_u … k_fl, n_y: TorchScript constants (`STEP_INTS`)
            setattr(self, k, v)
        self.L2 = L2
        for k, b in layout.buffers.items():
            self.register_buffer(k, b)

    @classmethod
    def build(cls, cfg: Optional[ArmControllerConfig] = None) -> "ArmController":
        """Controller with its IMU estimator (compensated, elastic) from a validated config.

        Args:
            cfg: the configuration (None: the defaults, ``ArmControllerConfig()``).

        Returns:
            The controller.
        """
        cfg = ArmControllerConfig() if cfg is None else cfg
        cfg.validate()
        est = cfg.build_estimator()
        return cls(est, cfg)

    def _gravity_hold(self, theta: Tensor) -> Tensor:
        """Rigid gravity torques incl. payloads at θ (2,) [N m]: the output before the first valid frame."""
        c1 = torch.cos(theta[0])
        c12 = torch.cos(theta[0] + theta[1])
        return torch.stack([self.hold_a * c1 + self.hold_b * c12, self.hold_b * c12])

    @torch.jit.export
    def reset(self) -> None:
        """Back to the state after construction: estimator, last output (gravity hold at θ₀), counters, calibration."""
        self.estimator.reset()
        self.last_tau.copy_(self._gravity_hold(self.theta0))
        self.last_state.zero_()
        self.last_state[0:2].copy_(self.theta0)
        self.fault_count = 0
        self.steps = 0
        self.cal.zero_()
        self.gyr_count.zero_()
        self.cal_pending = self.calibrate
        self.tau2_last = float(self.last_tau[1])
        self.lp = [0.0, 0.0, 0.0, 0.0]
        self.lp_init = False

    @torch.jit.export
    def desired(self, t: float) -> Tuple[Tensor, Tensor, Tensor]:
        """θ_d, θ̇_d, θ̈_d (2,) at time t [s] (quintic, seed 000, §VI-D).

        Args:
            t: the time [s] on the trajectory's clock (held at its ends outside [t0, t0 + duration]).

        Returns:
            ``(θ_d [rad], θ̇_d [rad/s], θ̈_d [rad/s²])``, each (2,).
        """
        tt = torch.full((2,), t, dtype=torch.float64)
        return quintic(tt, self.theta0, self.thetaf, self.t0, self.duration)

    def _desired_f(self, t: float) -> List[float]:
        """Scalar twin of :meth:`desired` (hot path): [θ_d1, θ_d2, θ̇_d1, θ̇_d2, θ̈_d1, θ̈_d2]."""
        T = self.duration
        sig = min(max((t - self.t0) / T, 0.0), 1.0)
        s2 = sig * sig
        s3 = s2 * sig
        p = 10.0 * s3 - 15.0 * s3 * sig + 6.0 * s3 * s2
        v = (30.0 * s2 - 60.0 * s3 + 30.0 * s2 * s2) / T
        a = (60.0 * sig - 180.0 * s2 + 120.0 * s3) / (T * T)
        d0 = self.thf0 - self.th00
        d1 = self.thf1 - self.th01
        return [self.th00 + d0 * p, self.th01 + d1 * p, d0 * v, d1 * v, d0 * a, d1 * a]

    def _check(self, frame: Tensor, t: float) -> int:
        """Cheap checks before estimation: lost frame (shape; a complex frame is no sensor reading) and time."""
        if frame.dim() != 2 or frame.size(0) != self.n_imus or frame.size(1) != 6 or frame.is_complex():
            return self.LOST_FRAME
        if not math.isfinite(t):
            return self.BAD_TIME
        return 0

    def _classify(self, frame: Tensor) -> int:
        """Why a frame was rejected: non-finite sample or saturation (only on the fault path)."""
        if bool(torch.isfinite(frame).all()):
            return self.SATURATED
        return self.NONFINITE

    def _hold(self, code: int) -> Tuple[Tensor, Tensor, Tensor]:
        self.fault_count += 1
        return self.last_tau.clone(), self.last_state.clone(), torch.tensor(code, dtype=torch.int64)

    def _calibrate_gyros(self, t: float, fl: Tensor, w: Tensor, psi: Tensor) -> None:
        """Gyro biases before the motion starts (t < t0, the arm near rest): the slope of the least-squares
        line through ``r(t) = ∫ω dt − ψ_m(t)`` per IMU is the bias β (the accelerometer inclination
        ψ_m = atan2(f_y, f_z) carries no drift; uncompensated, as the compensation's differentiated gyros
        would add noise at rest; samples with ``|ψ_m − ψ̂| > cal_gate`` — transients of the high modes after torque
        steps — are left out). At t0 :meth:`_apply_gyro_calibration` replaces the PI filter's integral state
        by ``b̂ = −β`` (at the seed's k_I that state needs ≈ 35 s to converge; a rate bias β costs K_d β of
        torque). ``fl`` = raw link-frame [f_y; f_z] (2S), ``w`` gyro rates (S), ``psi`` the new ψ̂ (S)."""
        c = self.cal
        sample = rest_sample(c[5], fl, w, psi, self.dt, self.cal_gate)  # `arm.step`
        c[5].copy_(sample.integral)
        c[0].add_(sample.mask)
        c[1].add_(sample.mask, alpha=t)
        c[2].add_(sample.mask, alpha=t * t)
        c[3].add_(sample.residual)
        c[4].add_(sample.residual * t)  # not add_(alpha=t): that fuses the multiply (one rounding), the graph cannot
        self.gyr_count.add_(1)

    def _apply_gyro_calibration(self) -> None:
        """End of the rest period: ``b̂ = −β`` for every IMU with ≥ 200 accepted samples (`gyro_bias_from_rest`)."""
        bias, ok = gyro_bias_from_rest(self.cal)
        self.estimator.bias_hat.copy_(torch.where(ok, bias, self.estimator.bias_hat))
        self.cal_pending = False

    def _estimate(self) -> None:
        """The estimator step of a valid frame, already in ``frame_in`` over the sensor ranges, in folded form
        (`arm.step`): updates the estimator's filter state (in ``work``) and ``trig`` (in ``sines``), the
        buffers ``L``, ``Y`` (in ``work``), ``sines``."""
        est = self.estimator
        S = self.n_imus
        n = 2
        if not bool(est.initialized):  # first frame: ψ̂ = ψ_m, ω_prev = ω, link angles from ψ̂
            torch.addmv(self.a0, self.A, self.xz, out=self.L)
            est.psi_hat.copy_(torch.atan2(self.L_fl[:S], self.L_fl[S : 2 * S]))
            est.w_prev.copy_(self.L_w)
            est.trig.copy_(initial_link_trig(self.init_off, self.init_map, est.psi_hat))
            est.initialized.fill_(True)
        torch.addmv(self.a0, self.A, self.xz, out=self.L)
        if self.compensate:  # f_c = f + T(c) u,  T(c) = Q (c ⊗ c),  u = u₁ ⊙ u₂;  ψ_m = atan2(f_c)
            T = compensation_map(self.Q, est.trig, S, n)
            torch.addmv(self.L_f, T, self.L_u1 * self.L_u2, out=self.f_c)
            torch.atan2(self.f_cy, self.f_cz, out=self.psi_m)
        else:
            torch.atan2(self.L_f[:S], self.L_f[S:], out=self.psi_m)
        torch.addmv(self.L_zY, self.KK, self.psi_m, out=self.zY)  # [z′; Y]
        torch.sin(self.Y_sin, out=self.sines)  # sines[:2n] is the estimator's trig

    def _loads(self, lf: List[float], o: List[float]) -> List[float]:
        """Hub loads from the measured link loads (`arm.load`), low-passed: [hub-1 load, hub-2 load]
        [N m]. ``lf`` = [Λ₁, Λ₂, F_a2, F_n2]; hub 1 carries link 1's root moment, link 2's force at link 1's
        tip and the joint-2 torque (the last command)."""
        M = self.n_modes_total
        rot = o[2] + o[5 + M]  # link 2's base frame relative to link 1's: θ₂ + w₁′(L₁)
        cr, sr = math.cos(rot), math.sin(rot)
        fa2, fn2 = cr * lf[2] - sr * lf[3], sr * lf[2] + cr * lf[3]
        raw = [lf[0] + self.L1 * fn2 - o[3 + M] * fa2 + self.tau2_last, lf[1]]
        if not self.lp_init:
            self.lp = raw + raw
            self.lp_init = True
        b = self.lp_beta
        res = torch.jit.annotate(List[float], [])
        for j in range(2):
            a = self.lp[j] + b * (raw[j] - self.lp[j])
            y = self.lp[2 + j] + b * (a - self.lp[2 + j])
            self.lp[j] = a
            self.lp[2 + j] = y
            res.append(y)
        return res

    def _pose(self, o: List[float], cs: List[float]) -> List[float]:
        """End-effector position [x, y] (§IV): Σ L_i (cos φ_i, sin φ_i) + w_i(L_i) (−sin φ_i, cos φ_i)."""
        M = self.n_modes_total
        c1, c2, s1, s2 = cs[0], cs[1], cs[2], cs[3]
        w1, w2 = o[3 + M], o[4 + M]
        return [
            (c1 * self.L1 + c2 * self.L2) - (s1 * w1 + s2 * w2),
            (s1 * self.L1 + s2 * self.L2) + (c1 * w1 + c2 * w2),
        ]

    def _control(
        self, frame: Tensor, t: float, theta_in: Optional[Tensor], rate_in: Optional[Tensor]
    ) -> Tuple[Tensor, Tensor, Tensor]:
        self.steps += 1
        code = self._check(frame, t)
        if code != 0:
            return self._hold(code)
        # the estimator's validity test: every |sample| below its range (NaN and inf fail)
        # (|x|/r < 1 ⟺ |x| < r exactly for r > 0; the inf-norm propagates NaN); the quotient is the estimator's input
        torch.div(frame, self.ranges, out=self.frame_in)
        if not float(torch.linalg.vector_norm(self.frame_in, float("inf"))) < 1.0:
            return self._hold(self._classify(frame))
        M = self.n_modes_total
        self._estimate()
        if self.cal_pending:
            if t < self.t0:  # raw link-frame [f_y; f_z], gyro rates, new ψ̂
                self._calibrate_gyros(t, self.L_fl, self.L_w, self.estimator.psi_hat)
            else:
                self._apply_gyro_calibration()
        # [Λ₁, Λ₂, F_a2, F_n2] = W (s_load ⊙ fl ⊙ e) (`arm.step`)
        lf = torch.jit.annotate(List[float], torch.mv(self.W, self.s_load * self.L_fl * self.Y_e).tolist())
        # o = [angle, θ (2), η (M), w(L) (2), w′(L) (2), w″(0) (2), θ̇ (2)]
        o = torch.jit.annotate(List[float], self.Y_out.tolist())
        cs = torch.jit.annotate(List[float], self.s_trig.tolist())  # [cos φ₁, cos φ₂, sin φ₁, sin φ₂]
        th1, th2 = o[1], o[2]
        r1, r2 = o[9 + M], o[10 + M]
        if theta_in is not None and rate_in is not None:
            jt = torch.jit.annotate(List[float], theta_in.to(torch.float64).tolist())
            jr = torch.jit.annotate(List[float], rate_in.to(torch.float64).tolist())
            th1, th2, r1, r2 = jt[0], jt[1], jr[0], jr[1]
        w1, w2 = o[3 + M], o[4 + M]
        # hub loads from the IMU-measured link loads: link i's root moment Λ_i (= −E_iI_i w_i″(0)) and, for
        # hub 1, link 2's force at link 1's tip and the joint-2 torque (last command)
        lc = self._loads(lf, o)
        load1, load2 = lc[0], lc[1]
        if self.slope_correction and theta_in is None:
            cp1 = math.cos(th1)
            cp2 = math.cos(th1 + o[5 + M] + th2)  # absolute base angles φ₁, φ₂
            th1, th2 = th1 + self.c11 * cp1 + self.c12 * cp2, th2 + self.c21 * cp1 + self.c22 * cp2
        if self.use_load:
            m1, m2 = -load1, -load2  # the root moments E_iI_i w_i″(0) of eq. (45) in its hub form
        else:
            m1 = self.EI1 * o[7 + M]  # root bending moments E_iI_i w_i″(0) [N m], modal reconstruction
            m2 = self.EI2 * o[8 + M]
        d = self._desired_f(t)
        a12 = th1 + th2
        c1, s1 = math.cos(th1), math.sin(th1)
        c12, s12 = math.cos(a12), math.sin(a12)
        H1 = (
            self.a11 * m1
            + self.a12 * m2
            - self.gA1 * c1
            - self.gB1 * c12
            + self.kA1 * w1 * s1
            + self.kB1 * w2 * s12
            - self.ff1 * d[4]
        )
        H2 = self.a22 * m2 - self.gB2 * c12 + self.kB2 * w2 * s12 - self.ff2 * d[5] - self.ff21 * d[4]
        t1 = self.kp1 * (d[0] - th1) + self.kd1 * (d[2] - r1) - H1
        t2 = self.kp2 * (d[1] - th2) + self.kd2 * (d[3] - r2) - H2
        if not (math.isfinite(t1) and math.isfinite(t2) and math.isfinite(th1 + th2 + r1 + r2)):
            return self._hold(self.BAD_TORQUE)
        code = 0
        if abs(t1) > self.tmax1 or abs(t2) > self.tmax2:
            code = self.TORQUE_LIMIT
            t1 = min(max(t1, -self.tmax1), self.tmax1)
            t2 = min(max(t2, -self.tmax2), self.tmax2)
            self.fault_count += 1
        # [τ | state [θ, θ̇, η, w(L), w′(L), w″(0), pose, θ_d, hub loads]]: the scalars computed here, exactly
        # (exact_f64) into F, gathered with the estimator's values from Y in one kernel (θ̇ is Y's own rate when
        # no encoder rates are given: the same float64 values)
        p = self._pose(o, cs)
        exact_f64([t1, t2, th1, th2, r1, r2, p[0], p[1], d[0], d[1], load1, load2], self.F)
        out = torch.index_select(self.YF, 0, self.out_index)
        self.last_out.copy_(out)
        self.tau2_last = t2
        parts = torch.split(out, [2, self.state_size])  # one kernel for both views
        return parts[0], parts[1], torch.tensor(code, dtype=torch.int64)

    def forward(self, frame: Tensor, t: float) -> Tuple[Tensor, Tensor, Tensor]:
        """One control step (1 kHz).

        Args:
            frame: (S, 6) = [acc (3) m/s² | gyr (3) rad/s] per IMU in the estimator's order (link by link,
                reference IMU first).
            t: time [s].

        Returns:
            ``(τ (2,) [N m], state, fault code)``.
        """
        return self._control(frame, t, None, None)

    @torch.jit.export
    def step_joints(self, frame: Tensor, t: float, theta: Tensor, theta_rate: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Encoder-fed baseline: as :meth:`forward` but with joint angles/rates from encoders.

        The deformation still comes from the IMUs.

        Args:
            frame: (S, 6) = [acc (3) m/s² | gyr (3) rad/s] per IMU in the estimator's order.
            t: time [s].
            theta: joint angles (2,) [rad] from the encoders.
            theta_rate: joint rates (2,) [rad/s] from the encoders.

        Returns:
            ``(τ (2,) [N m], state, fault code)``.
        """
        return self._control(frame, t, theta, theta_rate)
