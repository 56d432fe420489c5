"""Sensor parts as configuration: presets load, validate and round-trip; bad values name their key."""

from __future__ import annotations

import math

import pytest

from flexlearn.errors import ConfigError
from flexlearn.sensing.parts import ChipAxis, SensorParts, preset_names


def test_presets_load_and_round_trip() -> None:
    for mag in preset_names("magnetometer"):
        for imu in preset_names("imu"):
            parts = SensorParts.preset(mag, imu)
            assert SensorParts.from_config(parts.to_config()) == parts
    assert {"sim_default", "lis3mdl_4g", "mmc5983ma"} <= set(preset_names("magnetometer"))
    assert {"sim_default", "bno055", "icm20948", "lsm6dsox"} <= set(preset_names("imu"))


def test_lis3mdl_clips_where_its_16_bit_output_ends() -> None:
    field = SensorParts.preset("lis3mdl_4g", "sim_default").magnetometer.field
    assert field.full_scale == pytest.approx(32767 / 6842 * 1e-4, rel=1e-5)  # 479 µT
    assert field.lsb == pytest.approx(1e-4 / 6842, rel=1e-5)


def test_default_matches_what_the_simulator_models() -> None:
    parts = SensorParts.default()
    assert parts.magnetometer.field.full_scale == pytest.approx(1300e-6)
    assert parts.magnetometer.noise_std == pytest.approx(0.6e-6, rel=2e-3)  # σ per conversion at 90 Hz
    assert parts.imu.accel_noise_std == pytest.approx(0.02, rel=2e-3)


def test_noise_std_is_density_over_the_nyquist_band() -> None:
    ax = ChipAxis(full_scale=1.0, lsb=1e-9, noise_density=2e-3, unit="T")
    assert ax.noise_std(200.0) == pytest.approx(2e-3 * math.sqrt(100.0), rel=1e-9)


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        (("magnetometer", "field", "full_scale"), -1.0, "sensor.magnetometer.field.full_scale"),
        (("magnetometer", "field", "lsb"), 1.0, "sensor.magnetometer.field.lsb"),
        (("magnetometer", "field", "unit"), "gauss", "sensor.magnetometer.field.unit"),
        (("imu", "accel", "noise_density"), "x", "sensor.imu.accel.noise_density"),
        (("imu", "output_rate_hz"), 1e12, "sensor.imu.output_rate_hz"),
        (("imu", "gyro", "full_scale"), float("nan"), "sensor.imu.gyro.full_scale"),
    ],
)
def test_bad_values_name_their_key(path: tuple[str, ...], value: object, key: str) -> None:
    cfg = SensorParts.default().to_config()
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        SensorParts.from_config(cfg)


def test_unknown_and_missing_keys() -> None:
    cfg = SensorParts.default().to_config()
    cfg["imu"]["acel"] = cfg["imu"].pop("accel")
    with pytest.raises(ConfigError, match=r"sensor\.imu\.acel"):
        SensorParts.from_config(cfg)
    with pytest.raises(ConfigError, match=r"sensor\.magnetometer"):
        SensorParts.from_config({"imu": SensorParts.default().to_config()["imu"]})
