"""gradcheck / gradgradcheck (float64) at every branch point; finite gradients at the identity and at π."""

import math

import pytest
import torch
from torch.autograd import gradcheck as _gradcheck
from torch.autograd import gradgradcheck as _gradgradcheck

import flexlearn.lie as L
from flexlearn.lie.thresholds import series_threshold
from tests.lie.lie_testutil import DTYPES

AXIS = torch.tensor([0.48, -0.6, 0.64], dtype=torch.float64)  # unit
V = torch.tensor([0.3, -1.1, 0.7], dtype=torch.float64)


def _taus():
    """θ at every threshold (both dtypes, also as seen through half angles), plus 0, 1e-9, 1, π - 1e-3."""
    out = {0.0, 1e-9, 1e-4, 1.0, math.pi - 1e-3}
    for dt in DTYPES:
        z = torch.zeros((), dtype=dt)
        for name in ["sinc", "sinc3", "cosc2", "sinc5", "cotc"]:
            t = math.sqrt(series_threshold(z, name))
            out |= {t, 2 * t}  # B(θ) = ½ A(θ/2)²: A's threshold seen at 2θ
        r = math.sqrt(series_threshold(z, "atan2_ratio"))
        out.add(2 * math.atan(r))  # quaternion log: n/w = tan(θ/2)
    return sorted(t for t in out if t < math.pi)


ANGLES = _taus()
# The full (every Jacobian entry) checks run where the branches switch for the four core maps; the
# rest use fast_mode (a random projection vᵀ J u per check: same finite-difference comparison, O(1)).
FULL = {"so3_exp", "so3_log", "se3_exp", "se3_log"}


def gradcheck(f, args, full=False):
    return _gradcheck(f, args, fast_mode=not full)


def gradgradcheck(f, args, full=False):
    return _gradgradcheck(f, args, fast_mode=not full)


def _rot(theta):
    return (theta * AXIS).clone().requires_grad_(True)


def _twist(theta):
    return torch.cat([theta * AXIS, V]).requires_grad_(True)


ROTVEC_FNS = [
    "so3_exp",
    "quat_exp",
    "so3_left_jacobian",
    "so3_right_jacobian",
    "so3_left_jacobian_inv",
    "so3_right_jacobian_inv",
    "so3_cayley",
    "so3_cayley_jacobian",
]
TWIST_FNS = ["se3_exp", "se3_left_jacobian", "se3_left_jacobian_inv", "se3_cayley", "se3_cayley_jacobian"]


@pytest.mark.parametrize("theta", ANGLES)
def test_gradcheck_rotvec_functions(theta):
    for name in ROTVEC_FNS:
        f = getattr(L, name)
        assert gradcheck(f, (_rot(theta),), full=name in FULL), name
        assert gradgradcheck(f, (_rot(theta),)), name


@pytest.mark.parametrize("theta", ANGLES)
def test_gradcheck_twist_functions(theta):
    for name in TWIST_FNS:
        f = getattr(L, name)
        assert gradcheck(f, (_twist(theta),), full=name in FULL), name
    assert gradgradcheck(L.se3_exp, (_twist(theta),))
    assert gradgradcheck(L.se3_left_jacobian, (_twist(theta),))


@pytest.mark.parametrize("theta", ANGLES)
def test_gradcheck_logs(theta):
    R = L.so3_exp(theta * AXIS).requires_grad_(True)
    assert gradcheck(L.so3_log, (R,), full=True)
    assert gradgradcheck(L.so3_log, (R,))
    q = L.quat_exp(theta * AXIS).requires_grad_(True)
    assert gradcheck(L.quat_log, (q,))
    assert gradgradcheck(L.quat_log, (q,))
    T = L.se3_exp(torch.cat([theta * AXIS, V])).requires_grad_(True)
    assert gradcheck(L.se3_log, (T,), full=True)
    assert gradgradcheck(L.se3_log, (T,))
    assert gradcheck(L.matrix_to_quat, (R,))


@pytest.mark.parametrize("theta", [0.0, 1e-9, 0.2, 0.7, 1.0, 2.0, 3.0])
def test_gradcheck_planar(theta):
    xi = torch.tensor([theta, 0.4, -0.9], dtype=torch.float64, requires_grad=True)
    assert gradcheck(L.se2_exp, (xi,))
    assert gradgradcheck(L.se2_exp, (xi,))
    T = L.se2_exp(xi.detach()).requires_grad_(True)
    assert gradcheck(L.se2_log, (T,))
    assert gradgradcheck(L.se2_log, (T,))
    th = torch.tensor([theta], dtype=torch.float64, requires_grad=True)
    assert gradcheck(L.so2_exp, (th,))
    assert gradcheck(L.so2_log, (L.so2_exp(th.detach()).requires_grad_(True),))


@pytest.mark.parametrize("offset", [0.0, 1e-3, 0.5])
def test_gradcheck_rotation_between(offset):
    u = torch.tensor([0.2, -0.5, 0.9], dtype=torch.float64)
    p = torch.tensor([0.7, 0.1, 0.3], dtype=torch.float64)
    for v in [u + offset * p, -u + offset * p]:
        if offset == 0.0 and v[0] < 0:
            continue  # exactly antiparallel: ill-posed, checked for finiteness below
        args = (u.clone().requires_grad_(True), v.clone().requires_grad_(True))
        # every Jacobian entry (full mode): near antiparallel (offset 1e-3) the second derivatives are ~1e6 with
        # opposite signs, and fast mode's random projection vᵀ J u could cancel them to ~3e3, where the finite
        # difference's truncation error (~6) failed rtol depending on the global RNG state (test order)
        assert gradcheck(L.rotation_between, args, full=True)
        assert gradgradcheck(L.rotation_between, args, full=True)


def _finite_grads(fn, x):
    x = x.clone().requires_grad_(True)
    y = fn(x)
    (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x, allow_unused=True, materialize_grads=True)
    return bool(torch.isfinite(g).all() and torch.isfinite(gg).all())


@pytest.mark.parametrize("dtype", DTYPES)
def test_finite_gradients_at_identity_and_pi(dtype):
    zero3 = torch.zeros(3, dtype=dtype)
    zero6 = torch.zeros(6, dtype=dtype)
    pi3 = (math.pi * AXIS).to(dtype)
    for name in ROTVEC_FNS:
        assert _finite_grads(getattr(L, name), zero3), name
        assert _finite_grads(getattr(L, name), pi3), name
    for name in TWIST_FNS:
        assert _finite_grads(getattr(L, name), zero6), name
        assert _finite_grads(getattr(L, name), torch.cat([pi3, V.to(dtype)])), name
    eye3 = torch.eye(3, dtype=dtype)
    eye4 = torch.eye(4, dtype=dtype)
    for name, x in [
        ("so3_log", eye3),
        ("se3_log", eye4),
        ("so3_log", L.so3_exp(pi3)),
        ("se2_log", eye3),
        ("so3_log", torch.diag(torch.tensor([1.0, -1.0, -1.0], dtype=dtype))),
        ("quat_log", torch.tensor([1.0, 0, 0, 0], dtype=dtype)),
        ("quat_log", torch.tensor([0.0, 0.6, 0.0, 0.8], dtype=dtype)),
        ("matrix_to_quat", eye3),
        ("se2_exp", zero3),
        ("so3_cayley_inv", eye3),
    ]:
        assert _finite_grads(getattr(L, name), x), name
    u = torch.tensor([0.0, 0.6, 0.8], dtype=dtype)
    for v in [u, -u]:
        uu = u.clone().requires_grad_(True)
        vv = v.clone().requires_grad_(True)
        gu, gv = torch.autograd.grad(L.rotation_between(uu, vv).sum(), (uu, vv))
        assert torch.isfinite(gu).all() and torch.isfinite(gv).all()
