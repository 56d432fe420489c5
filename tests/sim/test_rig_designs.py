"""Rigs unlike the seed's: universal joint, multilayer coil, fixed drive current, separate and turned chips,
datasheet parts, ambient trend — each against its analytic expectation; the bound's module model reproduces such a
rig's simulated field; bad values are refused naming their key."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.config import from_dict
from flexlearn.errors import ConfigError
from flexlearn.sensing.coil import MU0, CoilConfig, PlanarCoil
from flexlearn.sensing.parts import SensorParts
from flexlearn.sim.direction_bound import label_noise_var, measured_noise, module_field
from flexlearn.sim.numpy_lie import exp_so3
from flexlearn.sim.rig import STRAIGHT, StackedCoil, build_coil, child_frame, coil_current, simulate_sweep
from flexlearn.sim.rig.geometry import universal_angles
from flexlearn.sim.rig_config import RigConfig

CLEAN = {"swing_rate": 0.0, "nan_rate": 0.0, "saturation_rate": 0.0, "short_pulse_rate": 0.0}
EXACT = {"mag_axes": 0.0, "sensor_offset": [0, 0, 0], "pivot_radius": 0, "joint_length": 0, "coil_offset": [0, 0, 0]}


def _vec(truth: dict, name: str) -> np.ndarray:
    return np.stack([truth[f"{name}_{c}"] for c in "xyz"], axis=-1)


def _cap(n: int, max_col: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lam = np.arccos(rng.uniform(math.cos(max_col), 1.0, n))
    th = rng.uniform(-math.pi, math.pi, n)
    return np.stack([np.sin(lam) * np.cos(th), np.sin(lam) * np.sin(th), -np.cos(lam)], axis=-1)


def test_universal_joint_is_two_axis_rotations_that_reach_u():
    u = _cap(200, math.radians(40.0))
    r_rel, _ = child_frame(u, None, "universal")
    np.testing.assert_allclose(r_rel @ STRAIGHT, u, atol=1e-12)
    alpha, beta = universal_angles(u)
    rx = exp_so3(np.stack([alpha, 0 * alpha, 0 * alpha], -1))
    ry = exp_so3(np.stack([0 * beta, beta, 0 * beta], -1))
    np.testing.assert_allclose(r_rel, rx @ ry, atol=1e-12)
    # it twists about u against the spherical (no-twist) joint: R_sphᵀ R_univ is a rotation about e
    r_sph, _ = child_frame(u)
    twist = np.einsum("nji,njk->nik", r_sph, r_rel)
    np.testing.assert_allclose(twist @ STRAIGHT, np.broadcast_to(STRAIGHT, u.shape), atol=1e-12)
    angle = np.arctan2(twist[:, 1, 0], twist[:, 0, 0])
    assert np.max(np.abs(angle)) > math.radians(1.0)  # a real twist at 40° of bend
    # second order (BCH: exp(αx̂) exp(βŷ) = exp(αx̂ + βŷ + αβ/2 ẑ + …)): a twist of αβ/2 about ẑ
    small = _cap(50, math.radians(2.0), seed=1)
    tw = np.einsum("nji,njk->nik", child_frame(small)[0], child_frame(small, None, "universal")[0])
    a, b = universal_angles(small)
    np.testing.assert_allclose(np.arctan2(tw[:, 1, 0], tw[:, 0, 0]), a * b / 2, atol=2e-6)


def test_stacked_coil_far_field_is_the_dipole_of_its_summed_moment():
    cfg = CoilConfig(outer_radius=6e-3, pitch=0.3e-3, turns=10, board_thickness=1.6e-3)
    stack = build_coil(cfg, 6)
    assert isinstance(stack, StackedCoil) and len(stack.pairs) == 3
    assert isinstance(build_coil(cfg, 2), PlanarCoil)
    thick = sorted(float(p.board_thickness) for p in stack.pairs)  # layers at ±h/2, ±3h/10, ±h/10
    np.testing.assert_allclose(thick, [1.6e-3 / 5, 3 * 1.6e-3 / 5, 1.6e-3], rtol=1e-12)
    m = stack.moment()
    np.testing.assert_allclose(m, sum(p.moment() for p in stack.pairs), rtol=1e-12)
    assert float(stack.resistance()) == pytest.approx(sum(float(p.resistance()) for p in stack.pairs), rel=1e-12)
    z = 0.5  # m ≫ coil radius: on-axis dipole field μ0 m / (2π z³)
    b = stack.field(torch.tensor([[0.0, 0.0, z]], dtype=torch.float64))[0]
    assert float(b[2]) == pytest.approx(MU0 * float(m[2]) / (2 * math.pi * z**3), rel=1e-4)
    assert float(m[2]) == pytest.approx(3 * float(build_coil(cfg, 2).moment()[2]), rel=0.02)  # three similar spirals


def test_fixed_drive_current_sets_the_field_at_the_sensor():
    base = {"n_poses": 20, "seed": 1, "faults": CLEAN, "module": EXACT}
    scaled = simulate_sweep(base)
    cur = scaled.meta["coil"]["current"]
    fixed = simulate_sweep({**base, "acquisition": {"coil_current": 0.5 * cur}})
    assert fixed.meta["coil"]["current"] == 0.5 * cur
    np.testing.assert_allclose(_vec(fixed.truth, "db"), 0.5 * _vec(scaled.truth, "db"), rtol=1e-12, atol=1e-18)
    cfg = from_dict(RigConfig, {"coil_layers": 4, "acquisition": {"coil_current": 1.5}})
    assert coil_current(build_coil(cfg.coil, 4), cfg) == 1.5


def test_turned_chips_rotate_the_label_and_the_field_as_their_mounts_say():
    base = {"n_poses": 30, "seed": 4, "faults": CLEAN, "module": EXACT, "magnetometer": {"soft_iron": 0.0}}
    plain = simulate_sweep(base)
    quarter = [0.0, 0.0, math.pi / 2]
    turned = simulate_sweep({**base, "geometry": {"imu_mount": quarter, "magnetometer_mount": [math.pi, 0.0, 0.0]}})
    rz = exp_so3(np.array([quarter]))[0]
    # label = R_childᵀ ẑ with R_child = R_rel M R_z: the IMU's axes turned a quarter about the board normal
    np.testing.assert_allclose(_vec(turned.truth, "label"), _vec(plain.truth, "label") @ rz, atol=1e-12)
    # the magnetometer, flipped about x on the board underside: (x, y, z) → (x, −y, −z) of the board's reading
    np.testing.assert_allclose(_vec(turned.truth, "db"), _vec(plain.truth, "db") * [1, -1, -1], atol=1e-15)
    np.testing.assert_allclose(turned.meta["sensors"]["magnetometer"]["axes"], rz.T @ np.diag([1, -1, -1]), atol=1e-12)


def test_parts_set_the_chip_values_and_quantise_the_accelerometer():
    parts = SensorParts.default().to_config()
    parts["magnetometer"].update(name="x", output_rate_hz=80.0)
    parts["imu"]["accel"].update(lsb=0.01, noise_density=0.001, full_scale=40.0)
    cfg = from_dict(RigConfig, {"parts": parts}).with_parts()
    nd = parts["magnetometer"]["field"]["noise_density"]
    assert cfg.magnetometer.rate == 80.0 and cfg.magnetometer.noise == pytest.approx(nd * math.sqrt(40.0))
    assert cfg.accelerometer.lsb == 0.01 and cfg.accelerometer.noise == pytest.approx(0.001 * math.sqrt(50.0))
    sw = simulate_sweep({"n_poses": 10, "seed": 2, "parts": parts})
    np.testing.assert_allclose(sw.accel / 0.01, np.round(sw.accel / 0.01), atol=1e-9)
    assert sw.meta["sensor"] == SensorParts.from_config(parts).to_config()  # what processing checks against
    duration = sw.meta["rig"]["duration"]
    assert sw.meta["sensors"]["magnetometer"]["conversions"] == pytest.approx(80.0 * duration, abs=2)


def test_ambient_trend_moves_the_coil_off_field_at_its_rate():
    base = {"n_poses": 40, "seed": 6, "faults": CLEAN, "ambient": {"drift": 0.0}}
    flat = simulate_sweep(base)
    rate = 2e-8  # T/s
    trend = simulate_sweep({**base, "ambient": {"drift": 0.0, "drift_rate": rate}})
    ok = np.isfinite(flat.mag).all(1) & np.isfinite(trend.mag).all(1)
    d = trend.mag[ok] - flat.mag[ok]  # noise draws are the same: only the trend (rotated into the sensor) differs
    assert np.abs(d).max() > 0
    slope = np.linalg.norm(d[-1] - d[0]) / (trend.mag_t[ok][-1] - trend.mag_t[ok][0])
    assert slope == pytest.approx(rate, rel=0.25)  # the sensor turns by ≤ 30° while the trend grows


def test_bound_model_reproduces_a_second_rig_sweep():
    sim = {
        "n_poses": 40,
        "seed": 9,
        "coil_layers": 4,
        "acquisition": {"coil_current": 1.2},
        "geometry": {
            "joint": "universal",
            "axis_offset": 3e-3,
            "pivot_offset": [0.6e-3, -0.4e-3],
            "magnetometer_offset": [4e-3, -3e-3, -1.6e-3],
            "imu_offset": [-5e-3, 2e-3, 0.0],
            "magnetometer_mount": [math.pi, 0.0, 0.0],
            "imu_mount": [0.0, 0.0, math.pi / 2],
        },
    }
    sw = simulate_sweep(sim)
    field, label = module_field({"source": sw.meta})
    u = _vec(sw.truth, "u")
    np.testing.assert_allclose(field(u), _vec(sw.truth, "db"), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(label(u), _vec(sw.truth, "label"), atol=1e-12)


def test_noise_estimates_leave_out_what_a_unit_field_model_does_not_see():
    rng = np.random.default_rng(0)
    n = 4000
    b = rng.normal(size=(n, 3)) * 50e-6
    n_on = rng.integers(4, 12, n)
    sigma = 0.3e-6
    noise = rng.normal(size=(n, 3)) * sigma * np.sqrt(1.0 + 1.0 / n_on)[:, None]
    scale = 1.0 + 0.02 * rng.uniform(-1, 1, n)[:, None]  # amplitude error along b̂
    var = measured_noise(scale * b + noise, b, n_on, perpendicular=True)
    np.testing.assert_allclose(var, sigma**2 * (1 + 1 / n_on), rtol=0.1)
    assert np.median(measured_noise(scale * b + noise, b, n_on)) > 2 * sigma**2  # isotropic: the scale counts
    lab = _cap(n, 0.5)[:, [0, 1, 2]] * [1, 1, -1]  # labels near +z
    beta = np.array([0.004, -0.003, 0.002])
    noisy = lab + beta + rng.normal(size=(n, 3)) * 1e-3
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    var_l, est = label_noise_var(noisy, lab)
    proj = np.eye(3) - np.outer(lab[0], lab[0])
    np.testing.assert_allclose(proj @ est, proj @ beta, atol=2e-4)
    assert var_l == pytest.approx(1e-6, rel=0.1)


@pytest.mark.parametrize(
    "override, key",
    [
        ({"geometry": {"joint": "revolute"}}, "geometry.joint"),
        ({"geometry": {"axis_offset": 1e-3}}, "geometry.axis_offset"),
        ({"geometry": {"imu_mount": [4.0, 0.0, 0.0]}}, "geometry.imu_mount"),
        ({"geometry": {"imu_offset": [0.1, 0.0, 0.0]}}, "geometry.imu_offset"),
        ({"coil_layers": 3}, "coil_layers"),
        ({"acquisition": {"coil_current": -1.0}}, "acquisition.coil_current"),
        ({"accelerometer": {"full_scale": 9.0}}, "accelerometer.full_scale"),
        ({"ambient": {"drift_rate": -1e-9}}, "ambient.drift_rate"),
        ({"parts": {"magnetometer": {}, "imu": {}}}, "parts.magnetometer"),
        ({"parts": "lis3mdl"}, "parts"),
    ],
)
def test_bad_rig_values_name_their_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        simulate_sweep({"n_poses": 5, **override})


def test_parts_whose_rate_leaves_no_conversion_window_are_refused():
    parts = SensorParts.default().to_config()
    parts["magnetometer"]["output_rate_hz"] = 400.0  # 2.5 ms period, the default window is 5 ms
    with pytest.raises(ConfigError, match=r"magnetometer\.window"):
        simulate_sweep({"n_poses": 5, "parts": parts})
