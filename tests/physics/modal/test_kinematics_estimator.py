"""SE(2) flexibility-aware kinematics (§IV) and the runtime estimator (§II–IV)."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.arm.kinematics_se2 import (
    PlanarFlexibleKinematics,
    forward_kinematics,
    piecewise_rigid_forward_kinematics,
    pose_to_xytheta,
    rigid_forward_kinematics,
)
from flexlearn.physics.modal import EstimatorOptions, FlexibleArmEstimator, FlexibleLink
from flexlearn.sensing.imu import GRAVITY

f64 = torch.float64


def _assert_ulp_close(x, y, scale, ulps=16):
    """``x`` equals ``y`` to ``ulps`` units in the last place of ``scale`` (the magnitude of the terms that make
    ``y``). TorchScript and eager may run other kernels (graph passes, fusion, SIMD width, summation order), so
    they agree to round-off, not bitwise. Boolean (fault) outputs are compared exactly."""
    if not y.is_floating_point():
        assert torch.equal(x, y)  # bitwise: booleans
        return
    torch.testing.assert_close(x, y, rtol=0, atol=ulps * torch.finfo(y.dtype).eps * scale)


def test_rigid_two_link_closed_form():
    th = torch.tensor([[0.3, -0.5], [1.0, 0.2]], dtype=f64)
    L = torch.tensor([4.5, 3.55], dtype=f64)
    p = pose_to_xytheta(rigid_forward_kinematics(th, L))
    x = L[0] * torch.cos(th[:, 0]) + L[1] * torch.cos(th.sum(-1))
    y = L[0] * torch.sin(th[:, 0]) + L[1] * torch.sin(th.sum(-1))
    assert torch.allclose(p[:, 0], x) and torch.allclose(p[:, 1], y) and torch.allclose(p[:, 2], th.sum(-1))


def test_flexible_single_link_tip_and_closed_form_module():
    g = torch.Generator().manual_seed(3)
    th = torch.randn(6, 3, generator=g, dtype=f64) * 0.5
    w = torch.randn(6, 3, generator=g, dtype=f64) * 0.05
    s = torch.randn(6, 3, generator=g, dtype=f64) * 0.02
    L = torch.tensor([4.5, 3.55, 1.0], dtype=f64)
    G = forward_kinematics(th, L, w, s)
    # one link: tip at R(θ)(L, w), angle θ + w′
    G1 = pose_to_xytheta(forward_kinematics(th[:, :1], L[:1], w[:, :1], s[:, :1]))
    c, sn = torch.cos(th[:, 0]), torch.sin(th[:, 0])
    assert torch.allclose(G1[:, 0], c * 4.5 - sn * w[:, 0]) and torch.allclose(G1[:, 1], sn * 4.5 + c * w[:, 0])
    mod = PlanarFlexibleKinematics(L)
    sc = torch.jit.script(mod)
    a = pose_to_xytheta(G)
    b = mod(th, w, s)
    assert torch.allclose(a, b, atol=1e-12)
    _assert_ulp_close(sc(th, w, s), b, 1.0 + float(L.sum()))  # positions: sums of terms up to L_i
    # SE(2) structure: rotation block orthonormal
    R = G[..., :2, :2]
    assert torch.allclose(R @ R.transpose(-1, -2), torch.eye(2, dtype=f64).expand_as(R), atol=1e-12)


def test_piecewise_rigid_straight_and_bent():
    seg = torch.full((5,), 0.9, dtype=f64)
    p = pose_to_xytheta(piecewise_rigid_forward_kinematics(torch.full((5,), 0.2, dtype=f64), seg))
    assert torch.allclose(p, torch.tensor([4.5 * math.cos(0.2), 4.5 * math.sin(0.2), 0.2], dtype=f64))
    ang = torch.tensor([0.0, 0.1, 0.2, 0.3, 0.4], dtype=f64)
    p = pose_to_xytheta(piecewise_rigid_forward_kinematics(ang, seg))
    assert torch.allclose(p[0], (0.9 * torch.cos(ang)).sum()) and torch.allclose(p[1], (0.9 * torch.sin(ang)).sum())


def _links():
    return [FlexibleLink(74300.0, 5.37, 4.5, 30.0), FlexibleLink(74300.0, 5.37, 3.55, 10.0)]


POS = [[0.45, 4.05], [0.35, 1.8, 3.2]]


def _static_frames(links, theta, eta_by_link):
    """Exact static IMU frames of a deformed arm (accelerometer = gravity only)."""
    acc, gyr = [], []
    base = 0.0
    for i, (link, pos) in enumerate(zip(links, POS)):
        m = eta_by_link[i].numel()
        slopes = link.mode_shapes(torch.tensor(pos, dtype=f64), m, 1) @ eta_by_link[i]
        absang = base + theta[i] + slopes
        for a in absang:
            acc.append([0.0, GRAVITY * math.sin(a), GRAVITY * math.cos(a)])
            gyr.append([0.0, 0.0, 0.0])
        tipslope = link.mode_shapes(link.length.reshape(1), m, 1) @ eta_by_link[i]
        base = base + theta[i] + float(tipslope)
    return torch.tensor(acc, dtype=f64), torch.tensor(gyr, dtype=f64)


def test_estimator_exact_on_static_modal_deformation_and_scripted_equal():
    links = _links()
    est = FlexibleArmEstimator.build(links, POS, [1, 2])
    sc = torch.jit.script(FlexibleArmEstimator.build(links, POS, [1, 2]))
    theta = [0.4, -0.7]
    eta = [torch.tensor([0.08], dtype=f64), torch.tensor([0.05, -0.01], dtype=f64)]
    acc, gyr = _static_frames(links, theta, eta)
    for _ in range(3):
        out = est(acc, gyr)
        out_s = sc(acc, gyr)
    # the outputs are sums of terms up to |psi_map| |psi_hat| (η, angles) or the link lengths (positions)
    scale = 1.0 + max(float((est.psi_map.abs() @ est.psi_hat.abs()).max()), float(est.lengths.sum()))
    for a, b in zip(out_s, out):
        _assert_ulp_close(a, b, scale)
    pose, th, rate, et, w, s, curv, fault = out
    assert not bool(fault)
    assert torch.allclose(th, torch.tensor(theta, dtype=f64), atol=1e-12)
    assert torch.allclose(et, torch.cat(eta), atol=1e-12)
    wt = torch.stack(
        [links[i].mode_shapes(links[i].length.reshape(1), len(eta[i]), 0).reshape(-1) @ eta[i] for i in range(2)]
    )
    st = torch.stack(
        [links[i].mode_shapes(links[i].length.reshape(1), len(eta[i]), 1).reshape(-1) @ eta[i] for i in range(2)]
    )
    ref = pose_to_xytheta(
        forward_kinematics(torch.tensor(theta, dtype=f64), torch.tensor([4.5, 3.55], dtype=f64), wt, st)
    )
    assert torch.allclose(pose, ref, atol=1e-12)
    assert torch.allclose(w, wt, atol=1e-12) and torch.allclose(s, st, atol=1e-12)


def test_estimator_save_load_roundtrip(tmp_path):
    links = _links()
    est = torch.jit.script(FlexibleArmEstimator.build(links, POS, [1, 2]))
    path = tmp_path / "est.pt"
    torch.jit.save(est, str(path))
    loaded = torch.jit.load(str(path))
    acc, gyr = _static_frames(
        links, [0.1, 0.3], [torch.tensor([0.02], dtype=f64), torch.tensor([0.01, 0.0], dtype=f64)]
    )
    for a, b in zip(est(acc, gyr), loaded(acc, gyr)):
        # bitwise: a lossless save/load of one TorchScript module (same graph and buffers, same interpreter,
        # first call of each on the same input)
        assert torch.equal(a, b)


def test_estimator_holds_on_nan_saturation_missing_imu():
    links = _links()
    est = torch.jit.script(FlexibleArmEstimator.build(links, POS, [1, 2]))
    acc, gyr = _static_frames(links, [0.2, 0.1], [torch.zeros(1, dtype=f64), torch.zeros(2, dtype=f64)])
    good = est(acc, gyr)
    bad_acc = acc.clone()
    bad_acc[2, 1] = float("nan")
    sat = acc.clone()
    sat[0, 2] = 1000.0
    missing = acc.clone()
    missing[4] = float("nan")
    for a, g in ((bad_acc, gyr), (sat, gyr), (missing, gyr), (acc, gyr * float("inf"))):
        out = est(a, g)
        assert bool(out[-1])
        for x, y in zip(out[:-1], good[:-1]):
            # bitwise: a faulty frame returns a copy of the held output, no arithmetic
            assert torch.isfinite(x).all() and torch.equal(x, y)
    assert not bool(est(acc, gyr)[-1])


def test_estimator_configuration_errors():
    links = _links()
    with pytest.raises(ConfigError, match="imu_positions"):
        FlexibleArmEstimator.build(links, [[0.45, 4.05], [0.35, 3.2]], [1, 2])
    with pytest.raises(ConfigError, match="rank"):
        FlexibleArmEstimator.build(links, [[0.45, 4.05], [0.35, 2.0, 2.0]], [1, 2])
    with pytest.raises(ConfigError, match="k_p"):
        FlexibleArmEstimator.build(links, POS, [1, 2], EstimatorOptions(k_p=-1.0))
    with pytest.raises(ConfigError, match="mount"):
        FlexibleArmEstimator.build(links, POS, [1, 2], EstimatorOptions(mount_angles=[0.0, 0.0]))


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ang = st.floats(-3.0, 3.0, allow_nan=False)
_small = st.floats(-0.3, 0.3, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_ang, _small, _small, st.floats(0.5, 6.0)), min_size=1, max_size=4))
def test_closed_form_kinematics_equals_se2_product(links):
    th = torch.tensor([x[0] for x in links], dtype=f64)
    w = torch.tensor([x[1] for x in links], dtype=f64)
    s = torch.tensor([x[2] for x in links], dtype=f64)
    L = torch.tensor([x[3] for x in links], dtype=f64)
    a = pose_to_xytheta(forward_kinematics(th, L, w, s))
    b = PlanarFlexibleKinematics(L)(th, w, s)
    assert torch.allclose(a[:2], b[:2], atol=1e-10)
    d = a[2] - b[2]
    assert abs(math.atan2(math.sin(float(d)), math.cos(float(d)))) < 1e-10
