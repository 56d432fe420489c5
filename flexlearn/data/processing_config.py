"""How raw sweep streams become (ΔB, label) pairs: the options of `flexlearn.data.process` and the sample and
pose filters of `flexlearn.data.quality` (seed 002, III-B1 and III-B2), in one small module both import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from flexlearn.config import check

TIME_UNITS = ("s", "ms", "us", "µs", "ns")
FIELD_UNITS = ("T", "mT", "gauss", "G", "uT", "µT", "nT")
ACCEL_UNITS = ("m/s^2", "g", "mg")


@dataclass
class ProcessingConfig:
    """How raw streams become (ΔB, label) pairs. Times in s, fields in T, accelerations in m/s².

    Attributes:
        settle_time: coil-on polls count only if t_on + settle_time ≤ t ≤ t_off; coil-off polls only if
            outside [t_on, t_off + settle_time] of every pulse (III-B2 "accepted only after settling").
        min_coil_on: accepted coil-on samples a pose needs (summed over its pulses; seed: ~6 per pose).
        min_coil_off_per_side: accepted coil-off samples needed before and after each pulse of the pose.
        min_accel_samples: accelerometer samples a pose needs in its hold window.
        max_accel_std: stationarity bound on the per-axis std of the specific force over the hold window
            [m/s²]; None: max(0.05, 2.5·σ), σ the IMU part's noise per sample (`flexlearn.data.faults.Limits`).
        saturation_limit: a used sample with any |component| ≥ this [T] is saturated; None: the magnetometer
            part's full scale less half an LSB (``sensor`` parts, e.g. 479 µT for a LIS3MDL at ±4 gauss).
        min_kept_fraction: the sweep is refused when fewer than this fraction of its poses are kept (the
            message counts the drops by reason); below it, bad poses are dropped and counted.
        time_unit: unit of every time of the raw sweep ("s", "ms", "us", "ns"); others are converted to s
            with one note. Times whose spacing disagrees with the IMU's output rate are refused naming it.
        field_unit: unit of the mag stream ("T", "mT", "gauss", "uT", "nT"), converted to T with one note.
        accel_unit: unit of the accel stream ("m/s^2", "g", "mg"), converted to m/s² with one note.
        field_median_bounds: (lo, hi) plausible median |m| of the whole mag stream in tesla; outside it the
            stream is taken to be in another unit (µT, gauss, ...) and rejected.
        accel_median_bounds: (lo, hi) plausible median |a| in m/s² (≈ 9.81 at rest); outside → wrong unit.
        split_fractions: (train, val, test) fractions, summing to 1.
        split_seed: seed of the pose → split hash (`flexlearn.data.dataset.assign_splits`).
        soft_iron: "tumble" — when the raw sweep holds the module's hand-tumble readings (``meta['tumble']``),
            ΔB becomes W·ΔB with the ellipsoid fit's W scaled to det W = 1 (gain and soft iron removed, tesla
            kept; seed 002 III-B3, `flexlearn.sensing.module_cal.tumble_calibration`), recorded in
            ``meta['calibration']``; "none" — ΔB as measured.
    """

    settle_time: float = 0.015
    min_coil_on: int = 4
    min_coil_off_per_side: int = 2
    min_accel_samples: int = 2
    max_accel_std: Optional[float] = None
    saturation_limit: Optional[float] = None
    min_kept_fraction: float = 0.5
    time_unit: str = "s"
    field_unit: str = "T"
    accel_unit: str = "m/s^2"
    field_median_bounds: tuple[float, float] = (1e-6, 1e-3)
    accel_median_bounds: tuple[float, float] = (8.0, 12.0)
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    split_seed: int = 0
    soft_iron: str = "tumble"

    def validate(self) -> None:
        """Range checks; a bad value raises `ConfigError` naming the key."""
        check(self.settle_time >= 0, "settle_time", self.settle_time, "must be >= 0 s")
        check(self.min_coil_on >= 1, "min_coil_on", self.min_coil_on, "must be >= 1")
        check(
            self.min_coil_off_per_side >= 1,
            "min_coil_off_per_side",
            self.min_coil_off_per_side,
            "must be >= 1 (the ambient fit must bracket every pulse)",
        )
        check(self.min_accel_samples >= 1, "min_accel_samples", self.min_accel_samples, "must be >= 1")
        for key, unit in (("max_accel_std", "m/s^2"), ("saturation_limit", "T")):
            v = getattr(self, key)
            check(v is None or v > 0, key, v, f"must be > 0 {unit} (or null: derived from the sensor parts)")
        check(0 <= self.min_kept_fraction <= 1, "min_kept_fraction", self.min_kept_fraction, "must be in [0, 1]")
        for key, known in (("time_unit", TIME_UNITS), ("field_unit", FIELD_UNITS), ("accel_unit", ACCEL_UNITS)):
            check(getattr(self, key) in known, key, getattr(self, key), f"must be one of {', '.join(known)}")
        for name in ("field_median_bounds", "accel_median_bounds"):
            lo, hi = getattr(self, name)
            check(0 < lo < hi, name, getattr(self, name), "must be (lo, hi) with 0 < lo < hi")
        fr = self.split_fractions
        check(
            len(fr) == 3 and min(fr) >= 0 and abs(sum(fr) - 1.0) < 1e-9,
            "split_fractions",
            fr,
            "must be three non-negative fractions summing to 1",
        )
        check(self.split_seed >= 0, "split_seed", self.split_seed, "must be >= 0")
        check(self.soft_iron in ("tumble", "none"), "soft_iron", self.soft_iron, "must be 'tumble' or 'none'")
