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
the static sag correction Δθ = C (cos φ₁, cos φ₂) of :func:`~flexlearn.runtime.arm_load.static_angle_correction`
(the few-mode slope fit of a loaded link's sag is 0.2° off at the reference IMU); ``modal_rates`` (off) —
joint rates as the derivative of the angle map instead of eq. (5). The hub loads of
:class:`~flexlearn.runtime.arm_load.LinkLoadModel` (root moments from the IMU-measured link loads) are
computed for every variant, low-passed (critically damped, ``load_filter_hz``), and reported in the state.

Variants (``ArmControllerConfig.variant``):
* ``moment`` (default): eq. (45) in its consistent hub form, ``τ_i = K_p,i e_i + K_d,i ė_i − E_iI_i w_i″(0)
  + I_h,i θ̈_d,i`` (joint 2 also ``+ I_h2 θ̈_d1``: hub 2 rides on link 1's tip), with the root moment
  −E_iI_i w_i″(0) estimated from the IMU-measured loads (hub 1 including link 2's force and the joint-2
  torque) instead of Φ″(0)η — in our closed-loop runs Φ″(0)η was 500 / 400 N m off (16 % / 55 %), the
  load estimate ≈ 5 / 2 N m RMS (open loop, along a reaching run);
* ``seed``: eq. (45) exactly (terms 1, 1, 1, 0, 1);
* ``blend`` (curvature_gain (0.5, 0)): per joint ``k_i`` × own root moment E_iI_i w_i″(0) + (1 − k_i) × the
  full gravity model (rigid + payload + deformation coupling) + feedforward (``curvature_gain`` = (k₁, k₂));
* ``seed_payload``: eq. (45) plus the payload gravity moments ``(M₁+M₂) g L₁ cos θ₁ + M₂ g L₂ cos(θ₁+θ₂)``
  and ``M₂ g L₂ cos(θ₁+θ₂)`` that the seed's H omits (terms 1, 1, 1, 1, 1);
* ``rigid``: baseline PD with rigid gravity compensation including payloads, no deformation terms, no
  feedforward (terms 0, 1, 0, 1, 0);
* ``hub``: the exact hub equation of a clamped link, ``I_h,i φ̈_i = τ_i + E_iI_i w_i″(0)``: curvature of
  the own link only plus feedforward (no separate gravity: the root moment already carries it).

Seed discrepancies (recorded): (a) the rigid gravity terms of eq. (44)/(45) omit the payloads' own
moments M_i g L cos(·) while keeping their deformation coupling; (b) the hub equation (44) contains both
the root bending moment −EI w″(0) and the links' gravity moments — for a link whose deflection includes
the gravity sag (as IMU-reconstructed deflection does) the root moment already carries the gravity load,
so the two are counted twice: the exact hub equation of a clamped link on a hub is
``I_h φ̈ = τ + EI w″(0)`` (no gravity term); (c) E₂I₂w₂″(0) appears in joint 1's equation although link
2's root moment acts on hub 2, not on joint 1; (d) θ₂ in eq. (45) is the angle relative to link 1, here
relative to link 1's deformed tip frame (§IV, the estimator's convention); (e) eq. (8) (tip shear) lacks
the rigid-motion term of a rotating link. Measured on the simulator (scripts/reproduce_seed000_control.py,
hub inertias 1000/200 kg m², tip masses 20/10 kg): eq. (45) exactly (``seed``) drives the arm away (the
doubled gravity moment, ≈ 3300 N m on joint 1, against K_p = 6000 N m/rad), even with true states
(≈ 15° RMSE); the consistent ``hub`` form with *true* curvatures tracks far better than the rigid PD; with
IMU-reconstructed curvatures (1 mode on link 1: +12 % static curvature error; link 2's two-mode curvature
is sensitive to gyro bias) the curvature feedback was unstable unless weighted down (``blend``,
curvature_gain (0.5, 0)), and then tracked worse than the rigid PD baseline in our runs; hence ``moment``.
Its raw load estimate reacts to a torque step with the high modes' instantaneous accelerations (an affine
fit of two IMUs cannot represent them: hub 1's estimate moved 18 N m per N m of τ₂ in our simulator), which
made the unfiltered loop unstable; the 5 Hz filter keeps the motion and the first modes.
Measured with ``moment`` (scripts/reproduce_seed000_control.py, reaching (0.2, −0.6) → (0.6, −0.2) rad over
6 s, IMU noise/bias of :class:`~flexlearn.sensing.imu.ImuNoiseConfig`, five draws): IMU-fed tracking RMSE
0.08–0.29° / 0.21–0.46° (joint 1 / 2; worst 0.29 / 0.46), rigid PD IMU-fed 1.13–1.27° / 0.32–0.66° (and
diverged on one draw); residual tip vibration 12.2 / 1.5 mm vs 13.5 / 2.1 mm for the rigid PD. Joint 2's
error is mostly the θ₂ estimate (link 1's tip slope from one mode); with the quintic over 2.5 s instead of
6 s joint 2 reached 1.5°.

TorchScript note: ``torch.tensor(float)`` and item assignment of a Python float round through float32
in TorchScript; the hot path builds its outputs with ``torch.full``/``fill_`` to stay float64 (eager and
scripted results are bit-identical, tested).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor, nn

from flexlearn.config import check
from flexlearn.physics.modal.estimator import FlexibleArmEstimator
from flexlearn.physics.modal.link import FlexibleLink
from flexlearn.runtime.arm_load import LinkLoadModel, static_angle_correction
from flexlearn.sensing.imu import GRAVITY

__all__ = ["ArmControllerConfig", "ArmController", "VARIANTS", "FAULT_LOST_FRAME", "FAULT_NONFINITE",
           "FAULT_SATURATED", "FAULT_TORQUE_LIMIT", "FAULT_BAD_TORQUE", "FAULT_BAD_TIME", "state_layout",
           "export_arm_controller", "export_arm_controller_from_config", "load_arm_controller", "quintic"]

FAULT_LOST_FRAME = 1
FAULT_NONFINITE = 2
FAULT_SATURATED = 4
FAULT_TORQUE_LIMIT = 8
FAULT_BAD_TORQUE = 16
FAULT_BAD_TIME = 32

VARIANTS = {"seed": (1.0, 1.0, 1.0, 0.0, 1.0), "seed_payload": (1.0, 1.0, 1.0, 1.0, 1.0),
            "rigid": (0.0, 1.0, 0.0, 1.0, 0.0), "hub": (1.0, 0.0, 0.0, 0.0, 1.0), "blend": (0.5, 0.5, 0.5, 0.5, 1.0),
            "moment": (1.0, 0.0, 0.0, 0.0, 1.0)}


@dataclasses.dataclass
class ArmControllerConfig:
    """Controller, model and trajectory parameters (SI). Seed values: gains (§VI-D), EI, ρA, L (§VI-C),
    IMUs 1, 4 | 5, 6, 8 at the centres of four segments per link with 1 | 2 modes (Remark 2, §VI-C)."""

    EI: tuple[float, ...] = (74300.0, 74300.0)
    rho_A: tuple[float, ...] = (5.37, 5.37)
    lengths: tuple[float, ...] = (4.5, 3.55)
    payload: tuple[float, ...] = (20.0, 10.0)
    hub_inertia: tuple[float, ...] = (1000.0, 200.0)
    mode_tip_mass: tuple[float, ...] = (-1.0, -1.0)
    n_modes: tuple[int, ...] = (1, 2)
    imu_positions: tuple[tuple[float, ...], ...] = ((0.5625, 3.9375), (0.44375, 1.33125, 3.10625))
    kp: tuple[float, ...] = (6000.0, 12000.0)
    kd: tuple[float, ...] = (6000.0, 2000.0)
    theta0: tuple[float, ...] = (0.2, -0.6)
    thetaf: tuple[float, ...] = (0.6, -0.2)
    t0: float = 1.0
    duration: float = 6.0
    gravity: float = GRAVITY
    tau_max: tuple[float, ...] = (20000.0, 5000.0)
    variant: str = "moment"
    dt: float = 1e-3
    filter_kp: float = 7.0407
    filter_ki: float = 0.1984
    acc_range: float = 6.0 * GRAVITY
    gyr_range: float = math.radians(300.0)
    tau_alpha: float = 0.05
    compensate: bool = True
    elastic: bool = True
    curvature_gain: tuple[float, ...] = (0.5, 0.0)
    gyro_rest_calibration: bool = True
    load_filter_hz: float = 5.0
    slope_correction: bool = True
    modal_rates: bool = False

    def validate(self) -> None:
        for k in ("EI", "rho_A", "lengths", "payload", "hub_inertia", "mode_tip_mass", "n_modes", "imu_positions",
                  "kp", "kd", "theta0", "thetaf", "tau_max"):
            check(len(getattr(self, k)) == 2, f"arm_controller.{k}", getattr(self, k), "needs two entries (two links)")
        for k in ("EI", "rho_A", "lengths", "kp", "kd", "tau_max"):
            check(all(math.isfinite(v) and v > 0 for v in getattr(self, k)), f"arm_controller.{k}",
                  getattr(self, k), "must be finite and > 0")
        for k in ("payload", "hub_inertia"):
            check(all(math.isfinite(v) and v >= 0 for v in getattr(self, k)), f"arm_controller.{k}",
                  getattr(self, k), "must be finite and >= 0")
        check(len(self.curvature_gain) == 2 and all(0.0 <= k <= 1.0 for k in self.curvature_gain),
              "arm_controller.curvature_gain", self.curvature_gain, "two values in [0, 1]")
        check(math.isfinite(self.load_filter_hz) and self.load_filter_hz > 0, "arm_controller.load_filter_hz",
              self.load_filter_hz, "must be a finite number > 0 [Hz]")
        check(self.variant in VARIANTS, "arm_controller.variant", self.variant, f"one of {sorted(VARIANTS)}")
        check(self.duration > 0 and math.isfinite(self.t0), "arm_controller.duration", self.duration, "must be > 0")
        check(0 < self.dt <= 0.01, "arm_controller.dt", self.dt, "must be in (0, 0.01] s")

    def model_links(self) -> list[FlexibleLink]:
        """The controller's modal model (clamped links; link 1 carries link 2 and both payloads unless
        ``mode_tip_mass`` ≥ 0 is given)."""
        carried = (self.payload[0] + self.rho_A[1] * self.lengths[1] + self.payload[1], self.payload[1])
        return [FlexibleLink(self.EI[i], self.rho_A[i], self.lengths[i],
                             carried[i] if self.mode_tip_mass[i] < 0 else self.mode_tip_mass[i]) for i in range(2)]


def quintic(t: Tensor, theta0: Tensor, thetaf: Tensor, t0: float, duration: float) -> Tuple[Tensor, Tensor, Tensor]:
    """Quintic reaching trajectory of seed 000, §VI-D: θ_d, θ̇_d, θ̈_d (broadcast of t (...,) or scalar with
    the joint dimension last) [rad, rad/s, rad/s²]."""
    sig = torch.clamp((t - t0) / duration, 0.0, 1.0)
    d = thetaf - theta0
    s2 = sig * sig
    s3 = s2 * sig
    pos = theta0 + d * (10.0 * s3 - 15.0 * s3 * sig + 6.0 * s3 * s2)
    vel = d * (30.0 * s2 - 60.0 * s3 + 30.0 * s2 * s2) / duration
    acc = d * (60.0 * sig - 180.0 * s2 + 120.0 * s3) / (duration * duration)
    return pos, vel, acc


def state_layout(n_modes_total: int) -> dict[str, list[int]]:
    """Slices [start, stop) of the packed state: θ, θ̇, η, w(L), w′(L), w″(0) (modal), pose (x, y, angle), θ_d,
    hub loads (the root moments from the measured link loads, :mod:`flexlearn.runtime.arm_load`) [N m]."""
    M = n_modes_total
    names = [("theta", 2), ("theta_rate", 2), ("eta", M), ("tip_deflection", 2), ("tip_slope", 2),
             ("base_curvature", 2), ("pose", 3), ("theta_desired", 2), ("hub_load", 2)]
    out, o = {}, 0
    for k, m in names:
        out[k] = [o, o + m]
        o += m
    return out


class ArmController(nn.Module):
    """Scriptable IMU-fed controller of seed 000, eq. (45) (module docstring). Build with :meth:`build`."""

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
        self.register_buffer("last_tau", self._gravity_hold(torch.tensor(cfg.theta0, dtype=f64)))
        self.tau2_last = float(self.last_tau[1])  # joint-2 torque of the last output (hub-1 load), float
        st = torch.zeros(self.state_size, dtype=f64)
        st[0:2] = torch.tensor(cfg.theta0, dtype=f64)
        self.register_buffer("last_state", st)
        Mt = M
        idx = [3, 4, 11 + Mt, 12 + Mt] + list(range(5, 11 + Mt)) + [0, 1, 2, 0, 0, 0, 0]
        self.register_buffer("state_index", torch.tensor(idx, dtype=torch.int64))
        self.register_buffer("fault_count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        # hub loads from the measured link loads (module arm_load); joint 1 also carries link 2
        links = cfg.model_links()
        self.loads = LinkLoadModel.build(links, cfg.rho_A, cfg.payload, cfg.imu_positions, cfg.n_modes)
        self.use_load = cfg.variant == "moment"
        self.L1 = float(L1)
        link_of_imu = torch.tensor([i for i, p in enumerate(cfg.imu_positions) for _ in p], dtype=torch.int64)
        n = 2
        phi_rows = estimator.psi_map[1 + 4 * n + M:1 + 5 * n + M]  # absolute base angles φ = P_φ ψ̂ (n, S)
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
        # static joint-angle correction Δθ = C (cos φ₁, cos φ₂) (arm_load.static_angle_correction)
        self.slope_correction = bool(cfg.slope_correction)
        C = static_angle_correction(links, cfg.rho_A, cfg.payload, cfg.imu_positions, cfg.n_modes,
                                    cfg.gravity).tolist()
        self.c11, self.c12, self.c21, self.c22 = C[0][0], C[0][1], C[1][0], C[1][1]
        # standstill gyro calibration before the motion starts (t < t0): b̂ = −mean(ω) per IMU
        self.calibrate = bool(cfg.gyro_rest_calibration)
        # sums of the least-squares line through r(t) = ∫ω dt − ψ_m(t) per IMU (rows: count, Σt, Σt², Σr, Σtr, ∫ω)
        self.register_buffer("cal", torch.zeros(6, self.n_imus, dtype=f64))
        self.register_buffer("gyr_count", torch.zeros((), dtype=torch.int64))
        self.cal_pending = self.calibrate  # until the calibration has been applied (at t0)
        self.cal_gate = 0.05  # rad: samples whose |ψ_m − ψ̂| exceeds this (torque-step transients) are skipped

    @classmethod
    def build(cls, cfg: Optional[ArmControllerConfig] = None) -> "ArmController":
        """Controller with its IMU estimator (compensated, elastic) from a validated config."""
        cfg = ArmControllerConfig() if cfg is None else cfg
        cfg.validate()
        est = FlexibleArmEstimator.build(cfg.model_links(), [list(p) for p in cfg.imu_positions], list(cfg.n_modes),
                                         dt=cfg.dt, k_p=cfg.filter_kp, k_i=cfg.filter_ki, acc_range=cfg.acc_range,
                                         gyr_range=cfg.gyr_range, tau_alpha=cfg.tau_alpha,
                                         compensate=cfg.compensate, elastic=cfg.elastic, modal_rates=cfg.modal_rates)
        return cls(est, cfg)

    def _gravity_hold(self, theta: Tensor) -> Tensor:
        """Rigid gravity torques incl. payloads at θ (2,) [N m]: the output before the first valid frame."""
        c1 = torch.cos(theta[0])
        c12 = torch.cos(theta[0] + theta[1])
        return torch.stack([self.hold_a * c1 + self.hold_b * c12, self.hold_b * c12])

    @torch.jit.export
    def reset(self) -> None:
        self.estimator.reset()
        self.last_tau.copy_(self._gravity_hold(self.theta0))
        self.last_state.zero_()
        self.last_state[0:2].copy_(self.theta0)
        self.fault_count.zero_()
        self.steps.zero_()
        self.cal.zero_()
        self.gyr_count.zero_()
        self.cal_pending = self.calibrate
        self.tau2_last = float(self.last_tau[1])
        self.lp = [0.0, 0.0, 0.0, 0.0]
        self.lp_init = False

    @torch.jit.export
    def desired(self, t: float) -> Tuple[Tensor, Tensor, Tensor]:
        """θ_d, θ̇_d, θ̈_d (2,) at time t [s] (quintic, seed 000, §VI-D)."""
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
        """Cheap checks before estimation: lost frame (shape) and time."""
        if frame.dim() != 2 or frame.size(0) != self.n_imus or frame.size(1) != 6:
            return 1  # FAULT_LOST_FRAME
        if not math.isfinite(t):
            return 32  # FAULT_BAD_TIME
        return 0

    def _classify(self, frame: Tensor) -> int:
        """Why the estimator rejected a frame: non-finite sample or saturation (only on the fault path)."""
        if bool(torch.isfinite(frame).all()):
            return 4  # FAULT_SATURATED
        return 2  # FAULT_NONFINITE

    def _hold(self, code: int) -> Tuple[Tensor, Tensor, Tensor]:
        self.fault_count.add_(1)
        return self.last_tau.clone(), self.last_state.clone(), torch.tensor(code, dtype=torch.int64)

    def _calibrate_gyros(self, t: float) -> None:
        """Gyro biases before the motion starts (t < t0, the arm near rest): the slope of the least-squares
        line through ``r(t) = ∫ω dt − ψ_m(t)`` per IMU is the bias β (the accelerometer inclination
        ψ_m = atan2(f_y, f_z) carries no drift; uncompensated, as the compensation's differentiated gyros
        would add noise at rest; samples with ``|ψ_m − ψ̂| > cal_gate`` — transients of the high modes after torque
        steps — are left out). At t0 :meth:`_apply_gyro_calibration` replaces the PI filter's integral state
        by ``b̂ = −β`` (at the seed's k_I that state needs ≈ 35 s to converge; a rate bias β costs K_d β of
        torque)."""
        S = self.n_imus
        c = self.cal
        est = self.estimator
        fl = est.frame_link
        c[5].add_(fl[2 * S:], alpha=self.dt)
        psi_m = torch.atan2(fl[:S], fl[S:2 * S])  # uncompensated: the arm is (nearly) at rest
        r = c[5] - psi_m
        m = ((psi_m - est.psi_hat).abs() < self.cal_gate).to(torch.float64)
        c[0].add_(m)
        c[1].add_(m, alpha=t)
        c[2].add_(m, alpha=t * t)
        mr = m * r
        c[3].add_(mr)
        c[4].add_(mr, alpha=t)
        self.gyr_count.add_(1)

    def _apply_gyro_calibration(self) -> None:
        """End of the rest period: ``b̂ = −β`` for every IMU with ≥ 200 accepted samples."""
        c = self.cal
        den = c[0] * c[2] - c[1] * c[1]
        ok = (c[0] >= 200.0) & (den > 0.0)
        beta = (c[4] * c[0] - c[3] * c[1]) / torch.where(ok, den, torch.ones_like(den))
        self.estimator.bias_hat.copy_(torch.where(ok, -beta, self.estimator.bias_hat))
        self.cal_pending = False

    def _loads(self, out: Tensor, o: List[float]) -> List[float]:
        """Hub loads from the measured link loads (module arm_load), low-passed: [hub-1 load, hub-2 load]
        [N m]. Hub 1 carries link 1's root moment, link 2's force at link 1's tip and the joint-2 torque (the
        last command)."""
        S = self.n_imus
        M = self.n_modes_total
        # local slopes δ_s = ψ̂_s − φ_link(s), linear in ψ̂: their sines and cosines in one product and one sin
        trig = torch.sin(torch.addmv(self.trig_off, self.trig_map, self.estimator.psi_hat)).view(2, 2, S)
        Y = torch.jit.annotate(List[List[float]], self.loads.packed(self.estimator.frame_link[:2 * S].view(2, S),
                                                                    trig, out[5:5 + M]).tolist())
        lf = [Y[0][0] - Y[2][4], Y[0][1] - Y[2][5], Y[1][3], Y[0][3]]  # Λ₁, Λ₂, F_a2, F_n2
        rot = o[4] + o[7 + M]  # link 2's base frame relative to link 1's: θ₂ + w₁′(L₁)
        cr, sr = math.cos(rot), math.sin(rot)
        fa2, fn2 = cr * lf[2] - sr * lf[3], sr * lf[2] + cr * lf[3]
        raw = [lf[0] + self.L1 * fn2 - o[5 + M] * fa2 + self.tau2_last, lf[1]]
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

    def _control(self, frame: Tensor, t: float, theta_in: Optional[Tensor],
                 rate_in: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
        self.steps.add_(1)
        code = self._check(frame, t)
        if code != 0:
            return self._hold(code)
        # the estimator rejects non-finite and saturated frames (|acc| ≥ acc_range, |gyr| ≥ gyr_range) and
        # holds its last valid output
        out, efault = self.estimator.step(frame[:, :3], frame[:, 3:])
        if bool(efault):
            return self._hold(self._classify(frame))
        M = self.n_modes_total
        if self.cal_pending:
            if t < self.t0:
                self._calibrate_gyros(t)
            else:
                self._apply_gyro_calibration()
        # out = [pose (3), θ (2), η (M), w(L) (2), w′(L) (2), w″(0) (2), θ̇ (2)]
        o = torch.jit.annotate(List[float], out.tolist())
        th1, th2 = o[3], o[4]
        r1, r2 = o[11 + M], o[12 + M]
        if theta_in is not None and rate_in is not None:
            jt = torch.jit.annotate(List[float], theta_in.to(torch.float64).tolist())
            jr = torch.jit.annotate(List[float], rate_in.to(torch.float64).tolist())
            th1, th2, r1, r2 = jt[0], jt[1], jr[0], jr[1]
        w1, w2 = o[5 + M], o[6 + M]
        # hub loads from the IMU-measured link loads: link i's root moment Λ_i (= −E_iI_i w_i″(0)) and, for
        # hub 1, link 2's force at link 1's tip and the joint-2 torque (last command)
        lc = self._loads(out, o)
        load1, load2 = lc[0], lc[1]
        if self.slope_correction and theta_in is None:
            cp1 = math.cos(th1)
            cp2 = math.cos(th1 + o[7 + M] + th2)  # absolute base angles φ₁, φ₂
            th1, th2 = th1 + self.c11 * cp1 + self.c12 * cp2, th2 + self.c21 * cp1 + self.c22 * cp2
        if self.use_load:
            m1, m2 = -load1, -load2  # the root moments E_iI_i w_i″(0) of eq. (45) in its hub form
        else:
            m1 = self.EI1 * o[9 + M]  # root bending moments E_iI_i w_i″(0) [N m], modal reconstruction
            m2 = self.EI2 * o[10 + M]
        d = self._desired_f(t)
        a12 = th1 + th2
        c1, s1 = math.cos(th1), math.sin(th1)
        c12, s12 = math.cos(a12), math.sin(a12)
        H1 = (self.a11 * m1 + self.a12 * m2 - self.gA1 * c1 - self.gB1 * c12 + self.kA1 * w1 * s1
              + self.kB1 * w2 * s12 - self.ff1 * d[4])
        H2 = self.a22 * m2 - self.gB2 * c12 + self.kB2 * w2 * s12 - self.ff2 * d[5] - self.ff21 * d[4]
        t1 = self.kp1 * (d[0] - th1) + self.kd1 * (d[2] - r1) - H1
        t2 = self.kp2 * (d[1] - th2) + self.kd2 * (d[3] - r2) - H2
        if not (math.isfinite(t1) and math.isfinite(t2) and math.isfinite(th1 + th2 + r1 + r2)):
            return self._hold(16)  # FAULT_BAD_TORQUE
        code = 0
        if abs(t1) > self.tmax1 or abs(t2) > self.tmax2:
            code = 8  # FAULT_TORQUE_LIMIT
            t1 = min(max(t1, -self.tmax1), self.tmax1)
            t2 = min(max(t2, -self.tmax2), self.tmax2)
            self.fault_count.add_(1)
        # (fill_ keeps float64: in TorchScript torch.tensor(float) and item assignment round through float32)
        tau = torch.full((2,), t1, dtype=torch.float64)
        tau.select(0, 1).fill_(t2)
        state = out[self.state_index]  # [θ, θ̇, η, w(L), w′(L), w″(0), pose, (θ_d placeholder)]
        if theta_in is not None or self.slope_correction:
            state.select(0, 0).fill_(th1)
            state.select(0, 1).fill_(th2)
        if theta_in is not None:
            state.select(0, 2).fill_(r1)
            state.select(0, 3).fill_(r2)
        state.select(0, 13 + M).fill_(d[0])
        state.select(0, 14 + M).fill_(d[1])
        state.select(0, 15 + M).fill_(load1)
        state.select(0, 16 + M).fill_(load2)
        self.last_tau.copy_(tau)
        self.tau2_last = t2
        self.last_state.copy_(state)
        return tau, state, torch.tensor(code, dtype=torch.int64)

    def forward(self, frame: Tensor, t: float) -> Tuple[Tensor, Tensor, Tensor]:
        """One control step (1 kHz): frame (S, 6) = [acc (3) m/s² | gyr (3) rad/s] per IMU in the estimator's
        order (link by link, reference IMU first), t [s] → (τ (2,) [N m], state, fault code)."""
        return self._control(frame, t, None, None)

    @torch.jit.export
    def step_joints(self, frame: Tensor, t: float, theta: Tensor, theta_rate: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Encoder-fed baseline: as :meth:`forward` but with joint angles/rates (2,) from encoders; the
        deformation still comes from the IMUs."""
        return self._control(frame, t, theta, theta_rate)


def _check_export_settings(cfg: ArmControllerConfig) -> None:
    """Ranges `ArmControllerConfig.validate` leaves open, checked before anything is built or written."""
    from flexlearn.config import check_finite

    check_finite(cfg, "arm_controller", "theta0", "thetaf", "t0", "duration", "acc_range", "gyr_range")
    check(math.isfinite(cfg.gravity) and cfg.gravity >= 0, "arm_controller.gravity", cfg.gravity,
          "must be a finite acceleration >= 0 [m/s^2]")


def export_arm_controller(controller: ArmController, path: str | Path, cfg: ArmControllerConfig,
                          extra: Optional[dict[str, Any]] = None) -> Path:
    """Script and save ``controller`` atomically with ``metadata.json`` (config, state layout, fault bits,
    units) and the manifest ``<path>.manifest.json`` (kind "arm_controller"), readable by
    :func:`load_arm_controller`. Not frozen: ``step_joints``, ``desired`` and ``reset`` stay callable and
    the state buffers stay mutable."""
    from flexlearn.runtime.export import script, script_artifact, write_artifacts

    _check_export_settings(cfg)
    meta = {"kind": "flexible_arm_controller", "schema": 1, "seed": "000 eq. (45)",
            "config": dataclasses.asdict(cfg), "state_layout": state_layout(controller.n_modes_total),
            "faults": {"lost_frame": FAULT_LOST_FRAME, "nonfinite": FAULT_NONFINITE, "saturated": FAULT_SATURATED,
                       "torque_limit": FAULT_TORQUE_LIMIT, "bad_torque": FAULT_BAD_TORQUE, "bad_time": FAULT_BAD_TIME},
            "inputs": {"frame": "(S, 6) [acc m/s^2 | gyr rad/s], link frames per the estimator", "t": "s"},
            "outputs": {"torque": "(2,) N m", "state": "see state_layout", "fault": "int64 bit mask"}}
    meta.update(extra or {})
    art = script_artifact(script(controller), path, meta, "arm_controller")
    return write_artifacts([art])[0]


def export_arm_controller_from_config(overrides: Optional[Any], path: str | Path) -> Path:
    """Build the controller from ``ArmControllerConfig`` overrides (a mapping or OmegaConf node; unknown
    keys and out-of-range values raise :class:`~flexlearn.errors.ConfigError`) and export it to ``path``
    (``flexlearn-export target=arm_controller``); everything is checked before anything is written."""
    from flexlearn.config import from_dict
    from flexlearn.runtime.export import check_output_path

    cfg = from_dict(ArmControllerConfig, overrides, "arm_controller")
    _check_export_settings(cfg)
    check_output_path(path)
    return export_arm_controller(ArmController.build(cfg), path, cfg)


def load_arm_controller(path: str | Path, *, trust_unverified: bool = False
                        ) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """Load an exported controller and its metadata with plain torch, after verifying its manifest
    (``trust_unverified=True`` skips that, only for files you trust: a model file is code)."""
    from flexlearn.errors import CheckpointError
    from flexlearn.runtime.export import load_torchscript

    module, meta = load_torchscript(path, trust_unverified=trust_unverified)
    if meta.get("kind") != "flexible_arm_controller":
        raise CheckpointError(f"model file '{path}': metadata kind {meta.get('kind')!r}, expected "
                              f"'flexible_arm_controller'")
    return module, meta
