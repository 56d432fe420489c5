"""SO(2) and SE(2): hat/vee, exp/log on the angle grid, matrix exponential, Ad and ad identities."""

import math

import mpmath
import pytest
import torch

from flexlearn.lie import (
    se2_ad,
    se2_adjoint,
    se2_exp,
    se2_hat,
    se2_inverse,
    se2_log,
    se2_vee,
    so2_exp,
    so2_hat,
    so2_log,
    so2_vee,
)
from tests.lie.lie_testutil import DTYPES, EPS, angle_grid


def _grid(dtype):
    a = torch.tensor(angle_grid(dtype), dtype=torch.float64)
    return torch.cat([a, -a]).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_so2_exp_log(dtype):
    eps = EPS[dtype]
    th = _grid(dtype)[:, None]
    assert torch.equal(so2_vee(so2_hat(th)), th)  # bitwise: hat/vee only copy entries, no arithmetic
    R = so2_exp(th)
    ref = torch.tensor(
        [
            [[float(mpmath.cos(t)), -float(mpmath.sin(t))], [float(mpmath.sin(t)), float(mpmath.cos(t))]]
            for t in th[:, 0].double().tolist()
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(R.double(), ref, rtol=0, atol=eps)
    torch.testing.assert_close(R.double(), torch.linalg.matrix_exp(so2_hat(th.double())), rtol=0, atol=8 * eps)
    inside = th.abs()[:, 0] < math.pi - 1e-6
    torch.testing.assert_close(so2_log(R)[inside], th[inside], rtol=0, atol=4 * eps)
    torch.testing.assert_close(so2_exp(so2_log(R)), R, rtol=0, atol=4 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_se2_exp_log_against_matrix_exp(dtype):
    eps = EPS[dtype]
    w = _grid(dtype)
    g = torch.Generator().manual_seed(0)
    v = torch.randn(w.shape[0], 2, generator=g, dtype=torch.float64).to(dtype)
    xi = torch.cat([w[:, None], v], -1)
    assert torch.equal(se2_vee(se2_hat(xi)), xi)  # bitwise: hat/vee only copy entries, no arithmetic
    T = se2_exp(xi)
    ref = torch.linalg.matrix_exp(se2_hat(xi.double()))
    torch.testing.assert_close(T.double(), ref, rtol=0, atol=16 * eps)
    inside = w.abs() < math.pi - 1e-6
    torch.testing.assert_close(se2_log(T)[inside], xi[inside], rtol=0, atol=32 * eps)
    torch.testing.assert_close(se2_exp(se2_log(T)), T, rtol=0, atol=32 * eps)


def test_se2_group_identities():
    g = torch.Generator().manual_seed(1)
    xi = torch.randn(20, 3, generator=g, dtype=torch.float64)
    eta = torch.randn(20, 3, generator=g, dtype=torch.float64)
    T = se2_exp(xi)
    eye = torch.eye(3, dtype=torch.float64).expand(20, 3, 3)
    torch.testing.assert_close(se2_inverse(T) @ T, eye)
    mv = lambda M, x: (M @ x[..., None])[..., 0]  # noqa: E731
    torch.testing.assert_close(mv(se2_adjoint(T), eta), se2_vee(T @ se2_hat(eta) @ se2_inverse(T)))
    torch.testing.assert_close(mv(se2_ad(xi), eta), se2_vee(se2_hat(xi) @ se2_hat(eta) - se2_hat(eta) @ se2_hat(xi)))
    torch.testing.assert_close(se2_adjoint(T), torch.linalg.matrix_exp(se2_ad(xi)))
