"""The unit checks on their own: every field, acceleration, rate, position and time unit mistake is named with the
override that fixes it; values in the declared unit pass."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flexlearn.errors import ConfigError
from flexlearn.ingest.units import UNITS, TimeSetting, UnitSetting, magnitude_problem, spacing_problem

FIELD_BOUNDS, ACCEL_BOUNDS = (1e-6, 1e-3), (8.0, 12.0)
rng = np.random.default_rng(0)
AMBIENT = rng.normal(0.0, 1.0, (500, 3)) * 1e-6 + np.array([20e-6, -5e-6, -45e-6])  # T, |B| ≈ 49 µT
GRAVITY = rng.normal(0.0, 0.02, (500, 3)) + np.array([0.3, -0.2, 9.8])  # m/s², at rest


@pytest.mark.parametrize("unit,name", [("mT", "mT"), ("uT", "uT"), ("nT", "nT"), ("G", "G"), ("mG", "mG"), ("T", "T")])
def test_a_field_recorded_in_another_unit_names_it(unit, name):
    recorded = AMBIENT / UNITS["T"][unit]  # the numbers a logger in that unit writes
    declared = "uT" if unit == "T" else "T"
    setting = UnitSetting("ingest.topics.mag", "T", declared)
    problem = magnitude_problem(recorded * setting.factor, setting, "bag: topic '/m'", FIELD_BOUNDS)
    assert problem is not None and problem.endswith(f"set ingest.topics.mag.unit={name}"), problem
    fixed = UnitSetting("ingest.topics.mag", "T", unit)
    assert magnitude_problem(recorded * fixed.factor, fixed, "", FIELD_BOUNDS) is None


def test_a_scale_map_is_told_the_scale_that_fixes_it():
    """A map that converts by ``scale`` (no unit name) is told the scale, not a unit it does not use."""
    setting = UnitSetting("ingest.serial.streams.mag", "T", "", 1e-6)
    recorded = AMBIENT / 1e-3  # mT
    problem = magnitude_problem(recorded * setting.factor, setting, "", FIELD_BOUNDS)
    assert problem.endswith("set ingest.serial.streams.mag.scale=0.001"), problem


@pytest.mark.parametrize("unit,name", [("g", "g"), ("mg", "mg"), ("m/s^2", "m/s2")])
def test_a_specific_force_in_another_unit_names_it(unit, name):
    recorded = GRAVITY / UNITS["m/s^2"][unit]
    declared = "mg" if unit != "mg" else "g"
    setting = UnitSetting("ingest.topics.imu", "m/s^2", declared)
    problem = magnitude_problem(recorded * setting.factor, setting, "", ACCEL_BOUNDS)
    assert problem is not None and problem.endswith(f"set ingest.topics.imu.unit={name}"), problem


def test_a_gyro_in_degrees_per_second_and_positions_in_mm_are_named():
    w = np.tile([0.0, 0.0, 300.0], (100, 1))  # 300 °/s read as rad/s
    rate = UnitSetting("ingest.topics.imu", "rad/s", "", 1.0, "rate_unit", "rate_scale")
    assert magnitude_problem(w, rate, "", None).endswith("set ingest.topics.imu.rate_unit=deg/s")
    assert magnitude_problem(w * math.pi / 180, rate, "", None) is None
    pos = UnitSetting("ingest.topics.mocap", "m")
    assert magnitude_problem(np.tile([400.0, 0.0, 900.0], (10, 1)), pos, "", None).endswith("unit=mm")


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_times_in_another_unit_are_named_by_their_spacing(unit):
    t_s = np.arange(1000) * 0.005  # 200 Hz
    recorded = t_s * {"ms": 1e3, "us": 1e6, "ns": 1e9}[unit]
    plain = TimeSetting("ingest.serial.streams.mag.rate_hz", 0.0, "ingest.serial.time_unit", "s")
    assert spacing_problem(recorded, plain, "d.csv").endswith(f"set ingest.serial.time_unit={unit}")
    declared = TimeSetting("ingest.serial.streams.mag.rate_hz", 200.0, "ingest.serial.time_unit", "s")
    assert spacing_problem(recorded, declared, "d.csv").endswith(f"set ingest.serial.time_unit={unit}")
    assert spacing_problem(recorded, TimeSetting("k", 200.0, "ingest.serial.time_unit", unit), "") is None


def test_a_wrong_declared_rate_names_the_measured_one():
    t = np.arange(1000) * 0.01  # 100 Hz
    problem = spacing_problem(t, TimeSetting("ingest.topics.mag.rate_hz", 25.0), "bag")
    assert problem.endswith("set ingest.topics.mag.rate_hz=100 (the measured rate) or check the time stamps")
    assert spacing_problem(t, TimeSetting("ingest.topics.mag.rate_hz", 110.0), "bag") is None


def test_unknown_unit_names_and_bad_scales_are_refused():
    with pytest.raises(ConfigError, match=r"'ingest.topics.mag.unit' = 'Tesla': expected one of"):
        UnitSetting("ingest.topics.mag", "T", "Tesla").validate()
    with pytest.raises(ConfigError, match=r"'ingest.topics.mag.scale' = -1.0"):
        UnitSetting("ingest.topics.mag", "T", "", -1.0).validate()
    with pytest.raises(ConfigError, match=r"has no unit names; use scale"):
        UnitSetting("ingest.serial.streams.temperature", "degC", "K").validate()


def test_a_strong_coil_does_not_turn_millitesla_into_gauss():
    """Median |m| ≈ 300 µT (half the polls coil-on, far above the ambient field): in mT it reads 0.3, which as gauss
    would be 30 µT; the coil-off polls (ambient, ≈ 50 µT) decide for mT."""
    coil = np.array([0.0, 0.0, 600e-6])
    field = np.concatenate([AMBIENT[:400], AMBIENT[:400] + coil])
    setting = UnitSetting("ingest.serial.streams.mag", "T", "uT")
    recorded = field / 1e-3
    problem = magnitude_problem(recorded * setting.factor, setting, "", FIELD_BOUNDS)
    assert float(np.median(np.linalg.norm(field, axis=1))) > 150e-6
    assert problem.endswith("set ingest.serial.streams.mag.unit=mT"), problem
