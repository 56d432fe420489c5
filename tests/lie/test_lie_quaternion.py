"""Quaternions: Hamilton product, canonical form, conversions, exp/log at w = 0, w < 0, w = 1e-12."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flexlearn.lie import (
    matrix_to_quat,
    quat_canonical,
    quat_conjugate,
    quat_exp,
    quat_inverse,
    quat_log,
    quat_multiply,
    quat_normalize,
    quat_rotate,
    quat_to_matrix,
    so3_exp,
    so3_log,
)
from tests.lie.lie_testutil import DTYPES, EPS, random_rotvecs, rotvecs_on_grid

SPECIAL = [
    [0.0, 1.0, 0.0, 0.0],  # w = 0 (rotation by π)
    [0.0, 0.0, -1.0, 0.0],
    [0.0, -0.6, 0.0, 0.8],
    [-0.5, 0.5, -0.5, 0.5],  # w < 0
    [-1.0, 0.0, 0.0, 0.0],
    [1e-12, 1.0, 0.0, 0.0],  # w = 1e-12 (not normalised: |q|² - 1 = 1e-24)
    [-1e-12, 0.0, 0.6, 0.8],
    [1.0, 0.0, 0.0, 0.0],
    [1.0, 1e-12, 0.0, -1e-12],
]


def random_quats(n: int, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return quat_normalize(torch.randn(n, 4, generator=g, dtype=torch.float64)).to(dtype)


def test_hamilton_product_matches_matrix_product():
    p, q = random_quats(30, 1), random_quats(30, 2)
    torch.testing.assert_close(quat_to_matrix(quat_multiply(p, q)), quat_to_matrix(p) @ quat_to_matrix(q))
    # i j = k (Hamilton, not JPL)
    i = torch.tensor([0.0, 1, 0, 0])
    j = torch.tensor([0.0, 0, 1, 0])
    # bitwise: inputs are 0/±1, so every product and sum is exact in any evaluation order, SIMD width or FMA
    assert torch.equal(quat_multiply(i, j), torch.tensor([0.0, 0, 0, 1]))
    torch.testing.assert_close(quat_multiply(p, quat_conjugate(p)), torch.tensor([1.0, 0, 0, 0]).double().expand(30, 4))
    q2 = 2.0 * q
    torch.testing.assert_close(quat_multiply(q2, quat_inverse(q2)), torch.tensor([1.0, 0, 0, 0]).double().expand(30, 4))


def test_body_to_world_and_rotate():
    """R(q) maps body to world: the body x-axis of a yaw by +90° points along world y."""
    q = torch.tensor([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)], dtype=torch.float64)
    torch.testing.assert_close(
        quat_to_matrix(q) @ torch.tensor([1.0, 0, 0]).double(), torch.tensor([0.0, 1, 0]).double(), rtol=0, atol=1e-15
    )
    qs, p = random_quats(20, 3), random_rotvecs(20, 2.0)
    torch.testing.assert_close(quat_rotate(qs, p), (quat_to_matrix(qs) @ p[..., None])[..., 0])


def test_canonical_is_unique_representative():
    q = torch.tensor(SPECIAL, dtype=torch.float64)
    c = quat_canonical(q)
    # bitwise: canonical(±q) = ±q · sign(±q) differs only by exact sign flips, same call and shape
    torch.testing.assert_close(quat_canonical(-q), c, rtol=0, atol=0)
    assert (c[:, 0] >= 0).all()
    first = torch.stack([row[row != 0][0] for row in c])
    assert (first > 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_quat_matrix_quat_round_trip_special_and_random(dtype):
    eps = EPS[dtype]
    q = torch.cat([quat_normalize(torch.tensor(SPECIAL, dtype=torch.float64)), random_quats(200)]).to(dtype)
    R = quat_to_matrix(q)
    eye = torch.eye(3, dtype=dtype)
    assert (R @ R.mT - eye).abs().max() < 8 * eps
    q2 = matrix_to_quat(R)
    assert q2.dtype == dtype
    torch.testing.assert_close(q2, quat_canonical(q), rtol=0, atol=8 * eps)
    assert ((q2.norm(dim=-1) - 1).abs() < 4 * eps).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_of_q_equals_log_of_minus_q(dtype):
    eps = EPS[dtype]
    q = torch.cat([torch.tensor(SPECIAL, dtype=torch.float64), random_quats(100)]).to(dtype)
    # bitwise (documented log(q) == log(-q)): -q only flips signs that quat_log cancels exactly (s·w, x², 2s·r),
    # through the same call on the same shape
    torch.testing.assert_close(quat_log(q), quat_log(-q), rtol=0, atol=0)
    w = quat_log(q)
    assert (w.norm(dim=-1) <= math.pi * (1 + 2 * eps)).all()
    torch.testing.assert_close(so3_exp(w), quat_to_matrix(q), rtol=0, atol=16 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_quat_exp_log_grid(dtype):
    eps = EPS[dtype]
    w = rotvecs_on_grid(dtype)
    q = quat_exp(w)
    assert ((q.norm(dim=-1) - 1).abs() < 4 * eps).all()
    torch.testing.assert_close(quat_to_matrix(q), so3_exp(w), rtol=0, atol=8 * eps)
    inside = w.norm(dim=-1) < math.pi - 50 * eps
    torch.testing.assert_close(quat_log(q)[inside], w[inside], rtol=0, atol=8 * eps)
    torch.testing.assert_close(quat_log(q), so3_log(quat_to_matrix(q)), rtol=0, atol=16 * eps)


def test_w_tiny_gives_angle_near_pi():
    q = torch.tensor([1e-12, 1.0, 0.0, 0.0], dtype=torch.float64)
    w = quat_log(q)
    torch.testing.assert_close(w, torch.tensor([math.pi - 2e-12, 0, 0], dtype=torch.float64), rtol=0, atol=1e-15)
    torch.testing.assert_close(quat_log(-q), w, rtol=0, atol=0)  # bitwise: exact sign flips, as above


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(lambda v: sum(x * x for x in v) > 1e-4))
def test_matrix_to_quat_property(v):
    q = quat_normalize(torch.tensor(v, dtype=torch.float64))
    q2 = matrix_to_quat(quat_to_matrix(q))
    assert torch.allclose(q2, q, atol=1e-14) or torch.allclose(q2, -q, atol=1e-14)
