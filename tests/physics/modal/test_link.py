"""FlexibleLink: roots, frequencies against an independent FE beam, orthonormality, gradients, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.modal import FlexibleLink


def fe_beam_frequencies(EI, rhoA, L, M=0.0, J=0.0, n_el=120, n=4):
    """Independent Hermite-cubic FE cantilever with tip mass M and rotary inertia J [rad/s]."""
    h = L / n_el
    k = (
        EI
        / h**3
        * np.array(
            [
                [12, 6 * h, -12, 6 * h],
                [6 * h, 4 * h * h, -6 * h, 2 * h * h],
                [-12, -6 * h, 12, -6 * h],
                [6 * h, 2 * h * h, -6 * h, 4 * h * h],
            ]
        )
    )
    m = (
        rhoA
        * h
        / 420
        * np.array(
            [
                [156, 22 * h, 54, -13 * h],
                [22 * h, 4 * h * h, 13 * h, -3 * h * h],
                [54, 13 * h, 156, -22 * h],
                [-13 * h, -3 * h * h, -22 * h, 4 * h * h],
            ]
        )
    )
    N = 2 * (n_el + 1)
    K = np.zeros((N, N))
    Mm = np.zeros((N, N))
    for e in range(n_el):
        sl = slice(2 * e, 2 * e + 4)
        K[sl, sl] += k
        Mm[sl, sl] += m
    Mm[-2, -2] += M
    Mm[-1, -1] += J
    w2 = scipy.linalg.eigh(K[2:, 2:], Mm[2:, 2:], eigvals_only=True, subset_by_index=[0, n - 1])
    return np.sqrt(w2)


def test_bare_cantilever_roots():
    lam = FlexibleLink(1.0, 1.0, 1.0).roots(4)
    ref = torch.tensor([1.875104, 4.694091, 7.854757, 10.995541], dtype=torch.float64)
    assert torch.allclose(lam, ref, atol=1e-6, rtol=0)
    # the analytic frequency equation 1 + cos cosh = 0 to machine precision
    assert torch.all((1 + torch.cos(lam) * torch.cosh(lam)).abs() / torch.cosh(lam) < 1e-13)


@pytest.mark.parametrize("M,J", [(20.0, 0.0), (40.0, 0.0), (20.0, 2.5), (5.0, 40.0)])
def test_tip_mass_and_inertia_vs_fe(M, J):
    EI, rhoA, L = 74300.0, 5.37, 4.5
    link = FlexibleLink(EI, rhoA, L, M, J)
    w = link.angular_frequencies(4).numpy()
    w_fe = fe_beam_frequencies(EI, rhoA, L, M, J)
    assert np.all(np.abs(w / w_fe - 1) < 1e-3), (w, w_fe)


def test_batched_matches_scalar_and_shapes():
    EI = torch.tensor([5e4, 7.43e4, 1e5], dtype=torch.float64)
    M = torch.tensor([[0.0], [20.0]], dtype=torch.float64)
    link = FlexibleLink(EI, 5.37, 4.5, M)
    f = link.natural_frequencies(3)
    assert f.shape == (2, 3, 3)
    single = FlexibleLink(7.43e4, 5.37, 4.5, 20.0).natural_frequencies(3)
    assert torch.allclose(f[1, 1], single, rtol=1e-12)
    phi = link.mode_shapes(torch.linspace(0, 4.5, 7, dtype=torch.float64), 3, derivative=1)
    assert phi.shape == (2, 3, 7, 3)


@pytest.mark.parametrize("M,J", [(0.0, 0.0), (20.0, 0.0), (20.0, 3.0), (300.0, 80.0)])
def test_mass_weighted_orthonormality(M, J):
    link = FlexibleLink(74300.0, 5.37, 4.5, M, J)
    G = link.gram(8, quad_points=600)
    assert torch.allclose(G, torch.eye(8, dtype=torch.float64), atol=1e-10, rtol=0)


def test_mode_shape_derivatives_and_boundary_conditions():
    EI, rhoA, L, M, J = 74300.0, 5.37, 4.5, 20.0, 3.0
    link = FlexibleLink(EI, rhoA, L, M, J)
    n = 4
    xi = torch.linspace(0.3, 4.2, 9, dtype=torch.float64)
    h = 1e-5
    for k in range(3):
        num = (link.mode_shapes(xi + h, n, k) - link.mode_shapes(xi - h, n, k)) / (2 * h)
        ana = link.mode_shapes(xi, n, k + 1)
        assert torch.allclose(num, ana, rtol=1e-6, atol=1e-7 * ana.abs().max())
    zero = torch.zeros(1, dtype=torch.float64)
    tipx = torch.full((1,), L, dtype=torch.float64)
    assert link.mode_shapes(zero, n, 0).abs().max() < 1e-14
    assert link.mode_shapes(zero, n, 1).abs().max() < 1e-13
    w2 = link.angular_frequencies(n) ** 2
    # EI Φ''(L) = J ω² Φ'(L);  EI Φ'''(L) = −M ω² Φ(L)
    lhs1 = EI * link.mode_shapes(tipx, n, 2)[0]
    rhs1 = J * w2 * link.mode_shapes(tipx, n, 1)[0]
    assert torch.allclose(lhs1, rhs1, rtol=1e-8, atol=1e-8 * lhs1.abs().max())
    lhs2 = EI * link.mode_shapes(tipx, n, 3)[0]
    rhs2 = -M * w2 * link.mode_shapes(tipx, n, 0)[0]
    assert torch.allclose(lhs2, rhs2, rtol=1e-8, atol=1e-8 * lhs2.abs().max())
    assert torch.all(link.mode_shapes(zero, n, 2) > 0)  # sign convention Φ''(0) > 0


def test_gradients_by_implicit_function_theorem():
    p = torch.tensor([74300.0, 5.37, 4.5, 20.0, 2.0], dtype=torch.float64, requires_grad=True)

    def f(q):
        link = FlexibleLink(q[0], q[1], q[2], q[3], q[4])
        return torch.cat([link.natural_frequencies(3), link.tip_values(2)["tip"]])

    assert torch.autograd.gradcheck(f, (p,), eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize(
    "kw", [dict(EI=-1.0), dict(rho_A=0.0), dict(length=float("nan")), dict(tip_mass=-2.0), dict(tip_inertia=-1.0)]
)
def test_bad_parameters_raise_config_error(kw):
    args = dict(EI=74300.0, rho_A=5.37, length=4.5)
    args.update(kw)
    name = next(iter(kw))
    with pytest.raises(ConfigError, match=name):
        FlexibleLink(**args)


def test_bad_mode_count_raises():
    with pytest.raises(ConfigError, match="n"):
        FlexibleLink(1.0, 1.0, 1.0).roots(0)
