"""SO(3): hat/vee, exp/log round trips on the angle grid, mpmath agreement, rotation_between."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flexlearn.lie import rotation_between, so3_exp, so3_hat, so3_log, so3_vee
from tests.lie.lie_testutil import (
    DTYPES,
    EPS,
    angle_grid,
    mp_so3_exp,
    mp_to_torch,
    mp_vec,
    random_rotvecs,
    rotvecs_on_grid,
    unit_vectors,
)

I3 = torch.eye(3, dtype=torch.float64)


def test_hat_vee_round_trip_and_cross_product():
    w = random_rotvecs(20, 5.0)
    p = random_rotvecs(20, 5.0, seed=3)
    W = so3_hat(w)
    # bitwise: hat/vee only copy (and negate) entries, no rounding
    assert torch.equal(so3_vee(W), w)
    assert torch.equal(W, -W.mT)
    torch.testing.assert_close((W @ p[..., None])[..., 0], torch.linalg.cross(w, p), rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_is_orthonormal_and_log_round_trip_on_grid(dtype):
    eps = EPS[dtype]
    w = rotvecs_on_grid(dtype)
    R = so3_exp(w)
    assert R.dtype == dtype
    eye = torch.eye(3, dtype=dtype)
    assert (R @ R.mT - eye).abs().max() < 8 * eps
    assert (torch.linalg.det(R) - 1).abs().max() < 8 * eps
    w2 = so3_log(R)
    theta = w.norm(dim=-1)
    # below π (in this dtype's arithmetic) the log returns ω itself
    inside = theta < math.pi - 50 * eps
    torch.testing.assert_close(w2[inside], w[inside], rtol=0, atol=8 * eps)
    # at π the log may return -ω; exp(log R) = R always
    torch.testing.assert_close(so3_exp(w2), R, rtol=0, atol=16 * eps)
    assert (w2.norm(dim=-1) <= math.pi * (1 + 4 * eps)).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_and_log_agree_with_mpmath_across_thresholds(dtype):
    """Exp against mpmath.expm, log against the exact generator, just below and above every threshold."""
    axes = unit_vectors(3, seed=11)
    tol = {torch.float64: 4 * EPS[torch.float64], torch.float32: 1e-6}[dtype]
    for theta in angle_grid(dtype):
        for a in axes:
            w = (theta * a).to(dtype)
            ref = mp_to_torch(mp_so3_exp(mp_vec(w.double())))
            R = so3_exp(w)
            assert (R.double() - ref).abs().max() <= tol, (theta, a)
            if theta < math.pi - 1e-6:
                # log of the correctly rounded matrix: error ≤ conditioning (≤ π/2) × rounding
                w_back = so3_log(ref.to(dtype))
                assert (w_back.double() - w.double()).abs().max() <= 2.5 * tol, (theta, a)


def test_log_at_pi_is_deterministic_and_finite():
    """Rotations by exactly π (w = 0): the first non-zero component of ω is positive."""
    a = torch.tensor([1.0, -2.0, 2.0], dtype=torch.float64) / 3
    d = lambda *x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    for R, expected in [
        (torch.diag(d(1.0, -1.0, -1.0)), d(math.pi, 0, 0)),
        (torch.diag(d(-1.0, 1.0, -1.0)), d(0, math.pi, 0)),
        (torch.diag(d(-1.0, -1.0, 1.0)), d(0, 0, math.pi)),
        (2 * a[:, None] * a[None, :] - I3, math.pi * a),
    ]:
        w = so3_log(R)
        torch.testing.assert_close(w, expected, rtol=0, atol=4e-15)
        torch.testing.assert_close(so3_exp(w), R, rtol=0, atol=4e-15)
        torch.testing.assert_close(so3_log(R.mT.contiguous()), w, rtol=0, atol=4e-15)  # R⁻¹ = R at π


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3).filter(lambda v: sum(x * x for x in v) > 1e-6),
    st.floats(0.0, math.pi * (1 - 1e-9)),
)
def test_log_exp_property(axis, angle):
    a = torch.tensor(axis, dtype=torch.float64)
    w = angle * a / a.norm()
    torch.testing.assert_close(so3_log(so3_exp(w)), w, rtol=0, atol=2e-15)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rotation_between_maps_u_to_v_with_smallest_angle(dtype):
    eps = EPS[dtype]
    u = unit_vectors(200, seed=1, dtype=dtype) * 3.0  # not unit on purpose
    v = unit_vectors(200, seed=2, dtype=dtype)
    w = rotation_between(u, v)
    un = u / u.norm(dim=-1, keepdim=True)
    torch.testing.assert_close((so3_exp(w) @ un[..., None])[..., 0], v, rtol=0, atol=8 * eps)
    # smallest angle: the angle between u and v, about an axis orthogonal to both
    angle = torch.arccos((un * v).sum(-1).clamp(-1, 1))
    torch.testing.assert_close(w.norm(dim=-1), angle, rtol=0, atol=1e-3 if dtype == torch.float32 else 1e-7)
    assert (w * un).sum(-1).abs().max() < 16 * eps
    assert (w * v).sum(-1).abs().max() < 16 * eps


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("offset", [0.0, 1e-17, 1e-12, 1e-8, 1e-4])
def test_rotation_between_parallel_and_antiparallel(dtype, offset):
    eps = EPS[dtype]
    u = unit_vectors(50, seed=3, dtype=dtype)
    p = unit_vectors(50, seed=4, dtype=dtype)
    for sign in [1.0, -1.0]:
        v = sign * u + offset * p
        v = v / v.norm(dim=-1, keepdim=True)
        w = rotation_between(u, v)
        assert torch.isfinite(w).all()
        torch.testing.assert_close((so3_exp(w) @ u[..., None])[..., 0], v, rtol=0, atol=8 * eps)
        if sign > 0:
            assert (w.norm(dim=-1) <= offset * 1.01 + 4 * eps).all()
        else:
            assert (w.norm(dim=-1) >= math.pi - offset * 1.01 - 4 * eps).all()
    # exactly antiparallel: deterministic (same input, same output; axis perpendicular to u)
    w1 = rotation_between(u, -u)
    # bitwise: the same input through the same call on the same shape (determinism is the contract)
    torch.testing.assert_close(w1, rotation_between(u.clone(), -u.clone()), rtol=0, atol=0)
    assert (w1 * u).sum(-1).abs().max() < 8 * eps
    assert rotation_between(u, u).abs().max() < 4 * eps


def test_rotation_between_reference_frames():
    ez = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    ex = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(rotation_between(ex, ez), torch.tensor([0, -math.pi / 2, 0], dtype=torch.float64))
    assert torch.allclose(so3_exp(rotation_between(ex, -ex)) @ ex, -ex, atol=1e-15)
    assert I3.dtype == torch.float64
