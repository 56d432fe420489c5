"""Settings of the flexible-arm controller (`flexlearn.runtime.arm.controller`, seed 000, eq. (45)): the
control-law variants and :class:`ArmControllerConfig` (validated, SI units).

``VARIANTS`` weights the term groups of the law (curvature, rigid gravity, deformation–gravity coupling, payload
gravity, feedforward); ``ArmControllerConfig.variant`` picks one:

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
"""

from __future__ import annotations

import dataclasses
import math

from flexlearn.config import check
from flexlearn.errors import ConfigError
from flexlearn.physics.modal.estimator import EstimatorOptions, FlexibleArmEstimator
from flexlearn.physics.modal.link import FlexibleLink
from flexlearn.sensing.imu import GRAVITY

__all__ = ["VARIANTS", "ArmControllerConfig", "ArmSettingsError"]

VARIANTS = {
    "seed": (1.0, 1.0, 1.0, 0.0, 1.0),
    "seed_payload": (1.0, 1.0, 1.0, 1.0, 1.0),
    "rigid": (0.0, 1.0, 0.0, 1.0, 0.0),
    "hub": (1.0, 0.0, 0.0, 0.0, 1.0),
    "blend": (0.5, 0.5, 0.5, 0.5, 1.0),
    "moment": (1.0, 0.0, 0.0, 0.0, 1.0),
}


class ArmSettingsError(ConfigError, ValueError):
    """The controller cannot be built from these settings (a ValueError for API callers)."""


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
        for k in (
            "EI",
            "rho_A",
            "lengths",
            "payload",
            "hub_inertia",
            "mode_tip_mass",
            "n_modes",
            "imu_positions",
            "kp",
            "kd",
            "theta0",
            "thetaf",
            "tau_max",
        ):
            check(len(getattr(self, k)) == 2, f"arm_controller.{k}", getattr(self, k), "needs two entries (two links)")
        for k in ("EI", "rho_A", "lengths", "kp", "kd", "tau_max"):
            check(
                all(math.isfinite(v) and v > 0 for v in getattr(self, k)),
                f"arm_controller.{k}",
                getattr(self, k),
                "must be finite and > 0",
            )
        for k in ("payload", "hub_inertia"):
            check(
                all(math.isfinite(v) and v >= 0 for v in getattr(self, k)),
                f"arm_controller.{k}",
                getattr(self, k),
                "must be finite and >= 0",
            )
        check(
            len(self.curvature_gain) == 2 and all(0.0 <= k <= 1.0 for k in self.curvature_gain),
            "arm_controller.curvature_gain",
            self.curvature_gain,
            "two values in [0, 1]",
        )
        check(
            math.isfinite(self.load_filter_hz) and self.load_filter_hz > 0,
            "arm_controller.load_filter_hz",
            self.load_filter_hz,
            "must be a finite number > 0 [Hz]",
        )
        check(self.variant in VARIANTS, "arm_controller.variant", self.variant, f"one of {sorted(VARIANTS)}")
        check(self.duration > 0 and math.isfinite(self.t0), "arm_controller.duration", self.duration, "must be > 0")
        check(0 < self.dt <= 0.01, "arm_controller.dt", self.dt, "must be in (0, 0.01] s")

    def build_estimator(self) -> FlexibleArmEstimator:
        """The controller's IMU estimator (seed 000, §IV): the modal model of `model_links`, the IMUs at
        ``imu_positions`` and the filter settings of this config.

        Returns:
            An unscripted `FlexibleArmEstimator`.
        """
        return FlexibleArmEstimator.build(
            self.model_links(),
            [list(p) for p in self.imu_positions],
            list(self.n_modes),
            EstimatorOptions(
                dt=self.dt,
                k_p=self.filter_kp,
                k_i=self.filter_ki,
                acc_range=self.acc_range,
                gyr_range=self.gyr_range,
                tau_alpha=self.tau_alpha,
                compensate=self.compensate,
                elastic=self.elastic,
                modal_rates=self.modal_rates,
            ),
        )

    def model_links(self) -> list[FlexibleLink]:
        """The controller's modal model (clamped links; link 1 carries link 2 and both payloads unless
        ``mode_tip_mass`` ≥ 0 is given)."""
        carried = (self.payload[0] + self.rho_A[1] * self.lengths[1] + self.payload[1], self.payload[1])
        return [
            FlexibleLink(
                self.EI[i],
                self.rho_A[i],
                self.lengths[i],
                carried[i] if self.mode_tip_mass[i] < 0 else self.mode_tip_mass[i],
            )
            for i in range(2)
        ]
