"""IMU joint angles (eq. 2), relative rates (eq. 5), mounting, complementary filter (eq. 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.sensing.imu import (
    GRAVITY,
    ComplementaryFilter,
    ImuMount,
    complementary_filter,
    frame_valid,
    inclination,
    joint_angle,
    joint_rate,
    relative_angular_velocity,
)


def spec_force(psi):
    """Static specific force in a link frame inclined by ψ about x."""
    psi = torch.as_tensor(psi, dtype=torch.float64)
    return torch.stack([torch.zeros_like(psi), GRAVITY * torch.sin(psi), GRAVITY * torch.cos(psi)], -1)


def test_joint_angle_atan2_form_all_quadrants():
    g = torch.Generator().manual_seed(1)
    p0 = (torch.rand(200, generator=g, dtype=torch.float64) - 0.5) * 2 * math.pi
    th = (torch.rand(200, generator=g, dtype=torch.float64) - 0.5) * 2 * 3.1
    est = joint_angle(spec_force(p0), spec_force(p0 + th) * 0.7)  # scale-free
    assert torch.allclose(est, th, atol=1e-12)
    assert torch.allclose(inclination(spec_force(p0)), torch.atan2(torch.sin(p0), torch.cos(p0)), atol=1e-12)


def test_mounting_is_undone():
    psi = torch.tensor([0.2, -0.4, 1.0], dtype=torch.float64)
    gam = torch.tensor([0.3, -1.2, 2.5], dtype=torch.float64)
    flipped = torch.tensor([False, True, True])
    mount = ImuMount(gam, flipped)
    # sensor reading: f_sensor = Mᵀ f_link
    f_link = spec_force(psi)
    w_link = torch.tensor([[0.5, 0.0, 0.0]] * 3, dtype=torch.float64)
    f_s = torch.einsum("sji,sj->si", mount.matrix, f_link)
    w_s = torch.einsum("sji,sj->si", mount.matrix, w_link)
    a, w = mount(f_s, w_s)
    assert torch.allclose(inclination(a), psi, atol=1e-12)
    assert torch.allclose(w, w_link, atol=1e-12)
    assert torch.allclose(torch.linalg.det(mount.matrix), torch.ones(3, dtype=torch.float64))
    with pytest.raises(ConfigError, match="angles"):
        ImuMount(torch.tensor([float("nan")]), torch.tensor([False]))


def test_relative_angular_velocity_eq5():
    th = torch.tensor(0.7, dtype=torch.float64)
    w_prev = torch.tensor([0.3, 0.0, 0.0], dtype=torch.float64)
    w_next = torch.tensor([0.8, 0.0, 0.0], dtype=torch.float64)
    rel = relative_angular_velocity(w_prev, w_next, th)
    assert torch.allclose(rel, torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64))
    assert float(joint_rate(w_prev, w_next)) == pytest.approx(0.5)
    # a general 3D rate: the previous link's rate seen in the next frame is Rᵀ ω
    w_prev3 = torch.tensor([0.1, 0.2, -0.3], dtype=torch.float64)
    c, s = math.cos(0.7), math.sin(0.7)
    R = torch.tensor([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=torch.float64)
    assert torch.allclose(relative_angular_velocity(w_prev3, w_next, th), w_next - R.T @ w_prev3)


def _noisy_joint(seconds=60.0, bias=0.05, seed=0):
    dt = 1e-3
    t = np.arange(int(seconds / dt)) * dt
    rng = np.random.default_rng(seed)
    th = 0.3 * np.sin(2 * math.pi * 0.2 * t) + 0.1
    thd = 0.3 * 2 * math.pi * 0.2 * np.cos(2 * math.pi * 0.2 * t)
    meas = th + rng.normal(0, 0.02, t.shape)  # accelerometer angle noise
    rate = thd + bias + rng.normal(0, 0.01, t.shape)  # gyro with bias
    return t, th, meas, rate


def test_complementary_filter_tracks_with_noise_and_rejects_bias():
    t, th, meas, rate = _noisy_joint(seconds=300.0)
    est, b = complementary_filter(meas, rate)
    late = t > 200
    err = est[:, 0] - th
    assert np.sqrt(np.mean(err[late] ** 2)) < 0.2 * np.sqrt(np.mean((meas - th)[late] ** 2))
    assert abs(np.mean(err[late])) < 1e-3  # bias rejected by the integral state
    assert abs(b[-1, 0] + 0.05) < 0.005  # b̂ → −β


def test_module_equals_offline_and_scripted_equals_eager():
    _, _, meas, rate = _noisy_joint(seconds=2.0)
    off, _ = complementary_filter(meas, rate)
    eager = ComplementaryFilter(n_joints=1)
    scripted = torch.jit.script(ComplementaryFilter(n_joints=1))
    eps = torch.finfo(torch.float64).eps
    for k in range(len(meas)):
        a = torch.tensor([meas[k]], dtype=torch.float64)
        r = torch.tensor([rate[k]], dtype=torch.float64)
        # each step from the same state: a round-off difference would otherwise be carried along by the filter
        for name in ("theta_hat", "bias_hat", "initialized"):
            getattr(scripted, name).copy_(getattr(eager, name))
        e1 = eager(a, r)
        e2 = scripted(a, r)
        # TorchScript may run other kernels than eager (fusion, SIMD width): a few ulps of the step's magnitudes
        scale = 1.0 + abs(meas[k]) + abs(rate[k]) + float(eager.theta_hat.abs().max() + eager.bias_hat.abs().max())
        torch.testing.assert_close(e2[0], e1[0], rtol=0, atol=4 * eps * scale)
        torch.testing.assert_close(e2[1], e1[1], rtol=0, atol=4 * eps * scale)
    assert abs(float(e1[0][0]) - off[-1, 0]) < 1e-10


def test_filter_holds_state_on_nan_and_flags():
    f = ComplementaryFilter(n_joints=2)
    f(torch.tensor([0.1, 0.2], dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    before = f.theta_hat.clone()
    th, rate, fault = f(torch.tensor([float("nan"), 0.2], dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    # bitwise: a faulty frame returns a copy of the held state, no arithmetic
    assert bool(fault) and torch.equal(th, before) and torch.isfinite(rate).all()
    meas = np.array([0.1, np.nan, 0.1, 0.1])
    out, _ = complementary_filter(meas, np.zeros(4))
    assert np.all(np.isfinite(out))


def test_frame_validity_and_bad_gains():
    acc = torch.tensor([[0, 0, 9.8], [0, float("nan"), 9.8], [0, 0, 80.0]], dtype=torch.float64)
    gyr = torch.zeros(3, 3, dtype=torch.float64)
    assert frame_valid(acc, gyr, 6 * GRAVITY, 5.0).tolist() == [True, False, False]
    with pytest.raises(ConfigError, match="k_p"):
        ComplementaryFilter(k_p=-1.0)
    with pytest.raises(ConfigError, match="k_p"):
        ComplementaryFilter(k_p=2000.0, dt=1e-3)
