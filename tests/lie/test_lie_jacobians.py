"""Left/right Jacobians: series references (mpmath), inverses, Jl(ξ) = Jr(-ξ), numerical derivatives."""

import pytest
import torch

from flexlearn.lie import (
    se3_exp,
    se3_inverse,
    se3_left_jacobian,
    se3_left_jacobian_inv,
    se3_log,
    se3_right_jacobian,
    se3_right_jacobian_inv,
    so3_exp,
    so3_jacobians,
    so3_left_jacobian,
    so3_left_jacobian_inv,
    so3_log,
    so3_right_jacobian,
    so3_right_jacobian_inv,
)
from tests.lie.lie_testutil import (
    DTYPES,
    EPS,
    angle_grid,
    mp_ad,
    mp_dexp,
    mp_hat,
    mp_to_torch,
    mp_vec,
    random_twists,
    rotvecs_on_grid,
    unit_vectors,
)


@pytest.mark.parametrize("dtype", DTYPES)
def test_so3_jacobians_against_series_on_grid(dtype):
    tol = {torch.float64: 4 * EPS[torch.float64], torch.float32: 1e-6}[dtype]
    a = unit_vectors(1, seed=31)[0]
    for theta in angle_grid(dtype):
        w = (theta * a).to(dtype)
        ad = mp_hat(mp_vec(w.double()))
        assert (so3_left_jacobian(w).double() - mp_to_torch(mp_dexp(ad))).abs().max() <= tol, theta
        assert (so3_left_jacobian_inv(w).double() - mp_to_torch(mp_dexp(ad) ** -1)).abs().max() <= 2 * tol, theta


@pytest.mark.parametrize("dtype", DTYPES)
def test_se3_jacobians_against_series_across_thresholds(dtype):
    tol = {torch.float64: 8 * EPS[torch.float64], torch.float32: 2e-6}[dtype]
    a = unit_vectors(1, seed=32)[0]
    v = unit_vectors(1, seed=33)[0] * 1.5
    for theta in angle_grid(dtype):
        xi = torch.cat([theta * a, v]).to(dtype)
        ad = mp_ad(mp_vec(xi.double()))
        assert (se3_left_jacobian(xi).double() - mp_to_torch(mp_dexp(ad))).abs().max() <= tol, theta
        assert (se3_left_jacobian_inv(xi).double() - mp_to_torch(mp_dexp(ad) ** -1)).abs().max() <= 4 * tol, theta


@pytest.mark.parametrize("dtype", DTYPES)
def test_inverse_and_left_right_relations(dtype):
    eps = EPS[dtype]
    w = rotvecs_on_grid(dtype)
    w = w[w.norm(dim=-1) < 3.1]
    eye3 = torch.eye(3, dtype=dtype)
    # bitwise: J_r(-w) is the same elementwise expression as J_l(w) with exact sign flips (-cosc · -x = cosc · x)
    torch.testing.assert_close(so3_left_jacobian(w), so3_right_jacobian(-w), rtol=0, atol=0)
    torch.testing.assert_close(
        so3_left_jacobian(w) @ so3_left_jacobian_inv(w), eye3.expand_as(so3_left_jacobian(w)), rtol=0, atol=64 * eps
    )
    torch.testing.assert_close(
        so3_right_jacobian(w) @ so3_right_jacobian_inv(w), eye3.expand(w.shape[0], 3, 3), rtol=0, atol=64 * eps
    )
    Jl, Jr = so3_jacobians(w)
    # bitwise: so3_jacobians evaluates literally the same coefficients and expression as the single functions
    torch.testing.assert_close(Jl, so3_left_jacobian(w), rtol=0, atol=0)
    torch.testing.assert_close(Jr, so3_right_jacobian(w), rtol=0, atol=0)
    # J_l = R J_r
    torch.testing.assert_close(so3_left_jacobian(w), so3_exp(w) @ so3_right_jacobian(w), rtol=0, atol=16 * eps)
    xi = torch.cat([w, unit_vectors(w.shape[0], seed=9, dtype=dtype)], -1)
    eye6 = torch.eye(6, dtype=dtype).expand(xi.shape[0], 6, 6)
    # bitwise: se3_right_jacobian(-xi) is implemented as se3_left_jacobian(xi) (exact double negation)
    torch.testing.assert_close(se3_left_jacobian(xi), se3_right_jacobian(-xi), rtol=0, atol=0)
    torch.testing.assert_close(se3_left_jacobian(xi) @ se3_left_jacobian_inv(xi), eye6, rtol=0, atol=128 * eps)
    torch.testing.assert_close(se3_right_jacobian(xi) @ se3_right_jacobian_inv(xi), eye6, rtol=0, atol=128 * eps)


def _numerical_left_jacobian(exp, log, inverse, x, h=1e-6):
    """d/dδ log(exp(x + δ) exp(x)⁻¹) by central differences."""
    n = x.shape[-1]
    E = torch.eye(n, dtype=x.dtype)
    X_inv = inverse(exp(x))
    cols = [(log(exp(x + h * E[i]) @ X_inv) - log(exp(x - h * E[i]) @ X_inv)) / (2 * h) for i in range(n)]
    return torch.stack(cols, -1)


@pytest.mark.parametrize("scale", [0.0, 1e-5, 0.3, 1.0, 2.0, 3.0])
def test_jacobians_against_numerical_derivative(scale):
    a = unit_vectors(1, seed=41)[0]
    w = scale * a
    num = _numerical_left_jacobian(so3_exp, so3_log, lambda R: R.mT, w)
    torch.testing.assert_close(so3_left_jacobian(w), num, rtol=0, atol=1e-8)
    # right Jacobian: log(exp(x)⁻¹ exp(x + δ))
    num_r = _numerical_left_jacobian(so3_exp, so3_log, lambda R: R.mT, -w)
    torch.testing.assert_close(so3_right_jacobian(w), num_r, rtol=0, atol=1e-8)
    xi = torch.cat([w, torch.tensor([0.3, -1.2, 0.7], dtype=torch.float64)])
    num6 = _numerical_left_jacobian(se3_exp, se3_log, se3_inverse, xi)
    torch.testing.assert_close(se3_left_jacobian(xi), num6, rtol=0, atol=1e-8)


def test_right_perturbation_convention():
    """exp(ξ + δ) ≈ exp(ξ) exp(J_r(ξ) δ): right perturbations, docs/architecture.md."""
    xi = random_twists(5, seed=12)
    d = 1e-7 * random_twists(5, seed=13)
    lhs = se3_exp(xi + d)
    rhs = se3_exp(xi) @ se3_exp((se3_right_jacobian(xi) @ d[..., None])[..., 0])
    torch.testing.assert_close(lhs, rhs, rtol=0, atol=1e-13)
