"""SE(3): exp/log round trips and mpmath agreement, inverse, Ad, ad, coadjoints."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flexlearn.lie import se3_ad, se3_adjoint, se3_coad, se3_coadjoint, se3_exp, se3_hat, se3_inverse, se3_log, se3_vee
from tests.lie.lie_testutil import (
    DTYPES,
    EPS,
    angle_grid,
    mp_se3_exp,
    mp_to_torch,
    mp_vec,
    random_twists,
    rotvecs_on_grid,
    unit_vectors,
)


def test_hat_vee_round_trip():
    xi = random_twists(20)
    X = se3_hat(xi)
    # bitwise: hat/vee only copy entries and the last row is literal zeros, no arithmetic
    assert torch.equal(se3_vee(X), xi)
    assert torch.equal(X[..., 3, :], torch.zeros(20, 4, dtype=torch.float64))
    torch.testing.assert_close(se3_exp(xi), torch.linalg.matrix_exp(X))


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_log_round_trip_on_grid(dtype):
    eps = EPS[dtype]
    w = rotvecs_on_grid(dtype)
    v = unit_vectors(w.shape[0], seed=5, dtype=dtype) * 2.0
    xi = torch.cat([w, v], -1)
    T = se3_exp(xi)
    assert T.dtype == dtype
    inside = w.norm(dim=-1) < math.pi - 1e-6
    torch.testing.assert_close(se3_log(T)[inside], xi[inside], rtol=0, atol=32 * eps)
    torch.testing.assert_close(se3_exp(se3_log(T)), T, rtol=0, atol=32 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_and_log_agree_with_mpmath_across_thresholds(dtype):
    tol = {torch.float64: 8 * EPS[torch.float64], torch.float32: 2e-6}[dtype]
    axes = unit_vectors(2, seed=21)
    vs = unit_vectors(2, seed=22) * 1.5
    for theta in angle_grid(dtype):
        for a, v in zip(axes, vs):
            xi = torch.cat([theta * a, v]).to(dtype)
            ref = mp_to_torch(mp_se3_exp(mp_vec(xi.double())))
            assert (se3_exp(xi).double() - ref).abs().max() <= tol, theta
            if theta < math.pi - 1e-6:
                assert (se3_log(ref.to(dtype)).double() - xi.double()).abs().max() <= 4 * tol, theta


def test_inverse():
    T = se3_exp(random_twists(30))
    eye = torch.eye(4, dtype=torch.float64).expand(30, 4, 4)
    torch.testing.assert_close(se3_inverse(T) @ T, eye, rtol=0, atol=1e-14)
    torch.testing.assert_close(se3_inverse(T), torch.linalg.inv(T), rtol=0, atol=1e-14)


def test_adjoint_identities():
    xi, eta = random_twists(30, seed=1), random_twists(30, seed=2)
    T = se3_exp(xi)
    # Ad·x = vee(T hat(x) T⁻¹)
    torch.testing.assert_close(
        (se3_adjoint(T) @ eta[..., None])[..., 0], se3_vee(T @ se3_hat(eta) @ se3_inverse(T)), rtol=0, atol=1e-13
    )
    # ad_ξ η = [ξ, η]
    Xi, Eta = se3_hat(xi), se3_hat(eta)
    torch.testing.assert_close((se3_ad(xi) @ eta[..., None])[..., 0], se3_vee(Xi @ Eta - Eta @ Xi), rtol=0, atol=1e-14)
    # Ad(exp ξ) = exp(ad ξ)
    torch.testing.assert_close(se3_adjoint(T), torch.linalg.matrix_exp(se3_ad(xi)), rtol=0, atol=1e-12)
    # Ad is a homomorphism, Ad(T⁻¹) = Ad(T)⁻¹
    T2 = se3_exp(eta)
    torch.testing.assert_close(se3_adjoint(T @ T2), se3_adjoint(T) @ se3_adjoint(T2))
    torch.testing.assert_close(se3_adjoint(se3_inverse(T)), torch.linalg.inv(se3_adjoint(T)))
    # T exp(η) T⁻¹ = exp(Ad_T η)
    torch.testing.assert_close(T @ T2 @ se3_inverse(T), se3_exp((se3_adjoint(T) @ eta[..., None])[..., 0]))


def test_coadjoints_are_dual():
    xi, eta = random_twists(10, seed=3), random_twists(10, seed=4)
    w = torch.randn(10, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    T = se3_exp(xi)
    torch.testing.assert_close(se3_coadjoint(T), torch.linalg.inv(se3_adjoint(T)).mT)
    pair = lambda a, b: (a * b).sum(-1)  # noqa: E731
    mv = lambda M, x: (M @ x[..., None])[..., 0]  # noqa: E731
    torch.testing.assert_close(pair(mv(se3_coadjoint(T), w), mv(se3_adjoint(T), eta)), pair(w, eta))
    torch.testing.assert_close(pair(mv(se3_coad(xi), w), eta), -pair(w, mv(se3_ad(xi), eta)))
    # a pure force f at body point r: the base-frame moment is p × (R f) + R (r × f) ...
    f = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, -9.81], dtype=torch.float64)
    wb = mv(se3_coadjoint(T[0]), f)
    torch.testing.assert_close(wb[:3], torch.linalg.cross(T[0, :3, 3], T[0, :3, :3] @ f[3:]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-2.0, 2.0), min_size=6, max_size=6).filter(lambda v: sum(x * x for x in v[:3]) < 9.0))
def test_log_exp_property(v):
    xi = torch.tensor(v, dtype=torch.float64)
    torch.testing.assert_close(se3_log(se3_exp(xi)), xi, rtol=0, atol=1e-14)
