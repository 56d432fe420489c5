"""LSE element (seed 003, Sec. III-V): Magnus map, closed-form Jacobians and tangent vs autograd/FD."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.lie import se3_exp, se3_hat
from flexlearn.physics.lse.element import (
    element_energy,
    element_forces,
    element_tangent,
    magnus_omega,
    mean_strain,
    section_properties,
    strain_jacobians,
)

DT = torch.float64


def _random_elements(n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    ga = se3_exp(torch.randn(n, 6, generator=g, dtype=DT))
    gb = ga @ se3_exp(0.8 * torch.randn(n, 6, generator=g, dtype=DT))
    beta = 2.0 * torch.randn(n, 6, generator=g, dtype=DT)
    h = 0.1 + 0.4 * torch.rand(n, generator=g, dtype=DT)
    k = 0.5 + torch.rand(n, 6, generator=g, dtype=DT)
    xi0 = 0.3 * torch.randn(n, 6, generator=g, dtype=DT)
    return ga, gb, beta, h, k, xi0


def _perturbed(ga, gb, beta, d):
    return ga @ se3_exp(d[:, :6]), gb @ se3_exp(d[:, 6:12]), beta + d[:, 12:]


def test_magnus_map_is_fourth_order():
    """exp(Ω(h)) vs an accurate integration of g' = g ξ(s)^ with linear ξ: error ratio ≈ 2⁵ when h halves."""
    xibar = torch.tensor([0.8, -0.5, 0.3, 0.1, 0.2, 1.0], dtype=DT)
    beta = torch.tensor([1.5, 0.7, -1.1, 0.3, -0.4, 0.2], dtype=DT)

    def reference(h, steps=400):
        # 4th-order Magnus on many sub-steps (global error O(h⁴/steps⁴): negligible)
        g = torch.eye(4, dtype=DT)
        ds = h / steps
        for i in range(steps):
            s_mid = (i + 0.5) * ds
            xi_mid = xibar + (s_mid - h / 2) * beta
            g = g @ se3_exp(magnus_omega(xi_mid, beta, torch.tensor(ds, dtype=DT)))
        return g

    errs = []
    for h in (0.4, 0.2):
        g = se3_exp(magnus_omega(xibar, beta, torch.tensor(h, dtype=DT)))
        errs.append(float((g - reference(h)).abs().max()))
    ratio = errs[0] / errs[1]
    assert 20.0 < ratio < 45.0, (errs, ratio)


def test_mean_strain_inverts_magnus_map():
    ga, _, beta, h, _, _ = _random_elements()
    xibar = 0.7 * torch.randn(6, 6, generator=torch.Generator().manual_seed(3), dtype=DT)
    gb = ga @ se3_exp(magnus_omega(xibar, beta, h))
    torch.testing.assert_close(mean_strain(ga, gb, beta, h), xibar, rtol=1e-11, atol=1e-11)


def test_strain_jacobians_match_autograd():
    ga, gb, beta, h, _, _ = _random_elements()
    j1, j2, j3 = strain_jacobians(ga, gb, beta, h)

    def f(d):
        return mean_strain(*_perturbed(ga, gb, beta, d), h).sum(0)

    jac = torch.autograd.functional.jacobian(f, torch.zeros(6, 18, dtype=DT)).permute(1, 0, 2)
    torch.testing.assert_close(torch.cat([j1, j2, j3], -1), jac, rtol=1e-10, atol=1e-10)


def test_strain_jacobians_match_finite_differences():
    ga, gb, beta, h, _, _ = _random_elements(3, seed=5)
    j = torch.cat(strain_jacobians(ga, gb, beta, h), -1)
    eps = 1e-6
    for c in range(18):
        d = torch.zeros(3, 18, dtype=DT)
        d[:, c] = eps
        fd = (mean_strain(*_perturbed(ga, gb, beta, d), h) - mean_strain(*_perturbed(ga, gb, beta, -d), h)) / (2 * eps)
        torch.testing.assert_close(j[..., c], fd, rtol=1e-6, atol=1e-7)


def test_residual_is_energy_gradient_and_tangent_is_exact():
    ga, gb, beta, h, k, xi0 = _random_elements()

    def energy(d):
        return element_energy(*_perturbed(ga, gb, beta, d), h, k, xi0).sum()

    def residual(d):
        st = element_forces(*_perturbed(ga, gb, beta, d), h, k, xi0)
        return torch.cat([st.r_a, st.r_b, st.r_beta], -1)

    d0 = torch.zeros(6, 18, dtype=DT, requires_grad=True)
    grad = torch.autograd.grad(energy(d0), d0)[0]
    torch.testing.assert_close(residual(torch.zeros(6, 18, dtype=DT)), grad, rtol=1e-11, atol=1e-12)
    jac = torch.autograd.functional.jacobian(lambda d: residual(d).sum(0), torch.zeros(6, 18, dtype=DT))
    tangent = element_tangent(element_forces(ga, gb, beta, h, k, xi0), beta, h, k)
    torch.testing.assert_close(tangent, jac.permute(1, 0, 2), rtol=1e-10, atol=1e-10)


def test_tangent_symmetric_at_zero_residual_element():
    """A stress-free element (ξ̄ = ξ₀, β = 0) has a symmetric, positive semi-definite tangent."""
    xi0 = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 1.0]], dtype=DT)
    h = torch.tensor([0.05], dtype=DT)
    ga = torch.eye(4, dtype=DT)[None]
    gb = se3_exp(h[:, None] * xi0)
    beta = torch.zeros(1, 6, dtype=DT)
    k = torch.tensor([[1.0, 1.0, 0.8, 100.0, 100.0, 300.0]], dtype=DT)
    t = element_tangent(element_forces(ga, gb, beta, h, k, xi0), beta, h, k)[0]
    torch.testing.assert_close(t, t.T, rtol=1e-12, atol=1e-12)
    assert float(torch.linalg.eigvalsh(0.5 * (t + t.T)).min()) > -1e-9


def test_section_properties():
    a, i1, i2, j = section_properties("circle", (0.5e-3,))
    assert a == pytest.approx(math.pi * 0.25e-6)
    assert i1 == i2 == pytest.approx(math.pi * 0.5e-3**4 / 4)
    assert j == pytest.approx(2 * i1)
    a, i1, i2, j = section_properties("rectangle", (2e-3, 0.5e-3))
    assert (a, i1, i2) == pytest.approx((1e-6, 2e-3 * 0.5e-3**3 / 12, 0.5e-3 * 2e-3**3 / 12))
    assert 0 < j < i1 + i2
    with pytest.raises(ValueError):
        section_properties("hexagon", (1.0,))


def test_hat_convention_consistency():
    """ξ̄ of an element equals (g_a⁻¹ g_b)' direction for a constant strain: Ω = h ξ̄ when β = 0."""
    xi = torch.tensor([0.3, -0.2, 0.1, 0.0, 0.05, 1.0], dtype=DT)
    h = torch.tensor(0.1, dtype=DT)
    gb = torch.linalg.matrix_exp(h * se3_hat(xi))
    torch.testing.assert_close(mean_strain(torch.eye(4, dtype=DT), gb, torch.zeros(6, dtype=DT), h), xi)


def test_fused_kernels_match_reference_elements():
    """flexlearn.physics.lse.fused (the solver's kernels) = element_forces / element_tangent to round-off, on
    random elements, on elements with no relative rotation, and on the series/closed-form switch points."""
    from flexlearn.physics.lse.fused import element_residual, element_tangent_fused

    ga, gb, beta, h, k, xi0 = _random_elements(24, seed=3)
    straight = se3_exp(torch.tensor([0.0, 0.0, 0.0, 0.01, -0.02, 0.3], dtype=DT)).expand(4, 4, 4)
    gb = torch.cat([gb[:20], ga[20:] @ straight])  # 4 elements without relative rotation
    for case in range(2):
        if case == 1:  # relative angles just below/above the thresholds θ² = 0.1, 2.0, 2.4, 3.8, 6.0
            angles = torch.tensor([0.1, 2.0, 2.4, 3.8, 6.0], dtype=DT).sqrt()
            angles = torch.cat([angles * (1 - 1e-9), angles * (1 + 1e-9)])
            axis = torch.nn.functional.normalize(
                torch.randn(10, 3, dtype=DT, generator=torch.Generator().manual_seed(1)), dim=-1
            )
            tw = torch.cat(
                [angles[:, None] * axis, torch.randn(10, 3, dtype=DT, generator=torch.Generator().manual_seed(2))], -1
            )
            ga, beta, h, k, xi0 = ga[:10], beta[:10], h[:10], k[:10], xi0[:10]
            gb = ga @ se3_exp(tw)
        st = element_forces(ga, gb, beta, h, k, xi0)
        ref = torch.cat([st.r_a, st.r_b, st.r_beta], -1)
        res, cache = element_residual(ga, gb, beta, h, k, xi0)
        torch.testing.assert_close(res, ref, rtol=0, atol=1e-13 * float(ref.abs().max()))
        tan = element_tangent(st, beta, h, k)
        torch.testing.assert_close(element_tangent_fused(cache, beta), tan, rtol=0, atol=1e-13 * float(tan.abs().max()))


def test_fused_residual_gradient_finite_at_zero_rotation():
    """Gradients through the fused log at an exactly straight element are finite and match autograd of the
    reference (the safe-where pattern)."""
    from flexlearn.physics.lse.fused import element_residual

    _, _, beta, h, k, xi0 = _random_elements(1, seed=4)
    ga = torch.eye(4, dtype=DT)[None]
    d = torch.zeros(1, 6, dtype=DT, requires_grad=True)
    gb_of = lambda d: se3_exp(d) @ se3_exp(torch.tensor([[0.0, 0, 0, 0, 0, 0.2]], dtype=DT))  # noqa: E731
    g_fused = torch.autograd.grad(element_residual(ga, gb_of(d), beta, h, k, xi0)[0].sum(), d)[0]
    st = element_forces(ga, gb_of(d), beta, h, k, xi0)
    g_ref = torch.autograd.grad(torch.cat([st.r_a, st.r_b, st.r_beta], -1).sum(), d)[0]
    assert torch.isfinite(g_fused).all()
    torch.testing.assert_close(g_fused, g_ref, rtol=1e-12, atol=1e-12 * float(g_ref.abs().max()))
