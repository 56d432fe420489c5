"""Cayley maps: definition, round trips, orthogonality, derivatives, the LGVI Newton solve."""

import math

import pytest
import torch

from flexlearn.lie import (
    se3_cayley,
    se3_cayley_inv,
    se3_cayley_jacobian,
    se3_exp,
    se3_hat,
    se3_inverse,
    se3_log,
    so3_cayley,
    so3_cayley_inv,
    so3_cayley_jacobian,
    so3_cayley_jacobian_inv,
    so3_cayley_lgvi,
    so3_cayley_lgvi_solve,
    so3_exp,
    so3_hat,
    so3_log,
    so3_vee,
)
from tests.lie.lie_testutil import DTYPES, EPS, random_rotvecs, random_twists

I3 = torch.eye(3, dtype=torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_so3_cayley_definition_orthogonality_and_inverse(dtype):
    eps = EPS[dtype]
    f = torch.cat(
        [
            random_rotvecs(50, 3.0),
            torch.zeros(1, 3, dtype=torch.float64),
            torch.tensor([[1e-9, 0, 0], [0, 50.0, 0]], dtype=torch.float64),
        ]
    ).to(dtype)
    C = so3_cayley(f)
    eye = torch.eye(3, dtype=dtype)
    ref = (eye + so3_hat(f)) @ torch.linalg.inv(eye - so3_hat(f))
    torch.testing.assert_close(C, ref, rtol=0, atol=8 * eps)
    assert (C @ C.mT - eye).abs().max() < 8 * eps
    assert (torch.linalg.det(C) - 1).abs().max() < 8 * eps
    rel = (so3_cayley_inv(C) - f).norm(dim=-1) / (1 + f.norm(dim=-1) ** 2)
    assert rel.max() < 16 * eps
    # a rotation by 2 atan|f| about f
    torch.testing.assert_close(
        so3_log(C).double(),
        (2 * torch.atan(f.double().norm(dim=-1, keepdim=True)) * torch.nn.functional.normalize(f.double(), dim=-1)),
        rtol=0,
        atol=64 * eps,
    )


def test_seed_inverse_is_the_scaled_map():
    """Seed 001: Cay⁻¹(R) = 2 (R - I)(R + I)⁻¹ is 2 so3_cayley_inv(R), inverse of so3_cayley(ψ / 2)."""
    R = so3_exp(random_rotvecs(20, 2.5))
    seed_psi = so3_vee(2 * (R - I3) @ torch.linalg.inv(R + I3))
    torch.testing.assert_close(seed_psi, 2 * so3_cayley_inv(R))
    torch.testing.assert_close(so3_cayley(seed_psi / 2), R)


def test_so3_cayley_jacobian_is_right_trivialised_derivative():
    f = random_rotvecs(5, 2.0, seed=3)
    h = 1e-6
    for x in f:
        num = torch.stack(
            [
                (
                    so3_log(so3_cayley(x).mT @ so3_cayley(x + h * I3[i]))
                    - so3_log(so3_cayley(x).mT @ so3_cayley(x - h * I3[i]))
                )
                / (2 * h)
                for i in range(3)
            ],
            -1,
        )
        torch.testing.assert_close(so3_cayley_jacobian(x), num, rtol=0, atol=1e-9)
    torch.testing.assert_close(so3_cayley_jacobian(f) @ so3_cayley_jacobian_inv(f), I3.expand(5, 3, 3))
    # the Jacobian of the plain map, via autograd, agrees: d cay = cay (J df)^
    x = f[0].clone().requires_grad_(True)
    jac = torch.autograd.functional.jacobian(so3_cayley, x)  # (3, 3, 3)
    pred = torch.einsum("ij,kjl->ilk", so3_cayley(f[0]), so3_hat(so3_cayley_jacobian(f[0]).mT))
    torch.testing.assert_close(jac, pred, rtol=0, atol=1e-14)


@pytest.mark.parametrize("dtype", DTYPES)
def test_se3_cayley_definition_and_inverse(dtype):
    eps = EPS[dtype]
    xi = random_twists(30, 3.0).to(dtype)
    T = se3_cayley(xi)
    eye = torch.eye(4, dtype=dtype)
    torch.testing.assert_close(T, (eye + se3_hat(xi)) @ torch.linalg.inv(eye - se3_hat(xi)), rtol=0, atol=32 * eps)
    torch.testing.assert_close(se3_cayley_inv(T), xi, rtol=0, atol=64 * eps * 10)


def test_se3_cayley_jacobian():
    xi = random_twists(4, 2.0, seed=5)
    E = torch.eye(6, dtype=torch.float64)
    h = 1e-6
    for x in xi:
        Ti = se3_inverse(se3_cayley(x))
        num = torch.stack(
            [
                (se3_log(Ti @ se3_cayley(x + h * E[i])) - se3_log(Ti @ se3_cayley(x - h * E[i]))) / (2 * h)
                for i in range(6)
            ],
            -1,
        )
        torch.testing.assert_close(se3_cayley_jacobian(x), num, rtol=0, atol=1e-8)


def test_cayley_approximates_exp_to_second_order():
    xi = 1e-3 * random_twists(5, seed=8)
    err = (se3_cayley(xi / 2) - se3_exp(xi)).abs().max()
    assert err < 1e-8  # O(|ξ|³), |ξ| ≲ 3e-3


def test_lgvi_residual_jacobian_and_newton_solve():
    J = torch.tensor([[2.0, 0.1, 0.0], [0.1, 3.0, 0.2], [0.0, 0.2, 4.0]], dtype=torch.float64)
    Jd = 0.5 * torch.trace(J) * I3 - J
    f = random_rotvecs(6, 1.2, seed=9) * 0.5
    F = so3_cayley(f)
    g, dg = so3_cayley_lgvi(f, Jd)
    torch.testing.assert_close(g, so3_vee(F @ Jd - Jd @ F.mT))
    jac = torch.autograd.functional.jacobian(lambda x: so3_cayley_lgvi(x, Jd)[0], f[0])
    torch.testing.assert_close(dg[0], jac)
    f_sol = so3_cayley_lgvi_solve(g, Jd)
    torch.testing.assert_close(f_sol, f, rtol=0, atol=1e-12)
    assert math.isfinite(float(f_sol.sum()))
