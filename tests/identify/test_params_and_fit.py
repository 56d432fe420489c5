"""Reparametrization, Jacobians (forward, reverse, finite differences) and the Hessian uncertainty."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.identify.fit import jacobian, lm_step, uncertainty
from flexlearn.identify.params import ParameterSet, ParamSpec


def test_reparametrization_starts_at_init_and_respects_bounds():
    ps = ParameterSet([ParamSpec("a", 2.0), ParamSpec("b", 5.0, 1.0, 100.0)])
    assert torch.allclose(ps.values(), torch.tensor([2.0, 5.0], dtype=torch.float64))
    for big in (-30.0, 30.0, -1e3, 1e3):  # unconstrained values map inside the bounds and stay positive
        v = ps.values(torch.tensor([max(min(big, 30.0), -30.0), big], dtype=torch.float64))
        assert 0 < float(v[0]) and 1.0 <= float(v[1]) <= 100.0 * (1 + 1e-12)
    with torch.no_grad():
        ps.u[1] = 40.0
    assert ps.at_bound() == [False, True]


@pytest.mark.parametrize(
    "spec, field",
    [
        (ParamSpec("E", -1.0), "params.E.init"),
        (ParamSpec("E", 5.0, 1.0, None), "params.E"),
        (ParamSpec("E", 0.5, 1.0, 10.0), "params.E"),
    ],
)
def test_bad_parameter_specs_name_the_parameter(spec, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        ParameterSet([spec])


class _Line:
    """y = a·x + b·x² with known noise: linear least squares, exact covariance σ²(XᵀX)⁻¹."""

    jacobian_mode = "forward"

    def __init__(self, noise=0.05, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.linspace(0.1, 2.0, 200, dtype=torch.float64)
        self.X = torch.stack([self.x, self.x**2], -1)
        self.measured = self.X @ torch.tensor([1.5, 0.7], dtype=torch.float64) + noise * torch.randn(
            200, generator=g, dtype=torch.float64
        )
        self.sigma = noise
        self.params = ParameterSet([ParamSpec("a", 1.0), ParamSpec("b", 1.0)])

    def predict(self, v):
        return self.X @ v


def test_lm_reaches_the_least_squares_solution_and_its_covariance():
    prob = _Line()
    lam = 1e-2
    for _ in range(30):
        out = lm_step(prob, lam)
        lam = out["lam"]
        if out["accepted"] and out["cost"] - out["new_cost"] < 1e-14 * out["cost"]:
            break
    exact = torch.linalg.lstsq(prob.X, prob.measured[:, None]).solution[:, 0]
    assert torch.allclose(prob.params.values().detach(), exact, rtol=1e-8)
    unc = uncertainty(prob)
    r = prob.X @ exact - prob.measured
    s2 = float(r @ r) / (200 - 2)
    std = torch.sqrt(s2 * torch.linalg.inv(prob.X.T @ prob.X).diagonal())
    assert torch.allclose(unc["std"], std, rtol=1e-6)
    assert bool(unc["identifiable"].all())


def test_forward_and_reverse_jacobians_agree_with_finite_differences():
    prob = _Line()
    f = lambda u: (prob.predict(prob.params.values(u)) - prob.measured) / prob.sigma  # noqa: E731
    u = torch.tensor([0.3, -0.2], dtype=torch.float64)
    _, jf = jacobian(f, u, "forward")
    _, jr = jacobian(f, u, "reverse")
    h = 1e-6
    fd = torch.stack([(f(u + h * e) - f(u - h * e)) / (2 * h) for e in torch.eye(2, dtype=torch.float64)], -1)
    assert torch.allclose(jf, jr, rtol=1e-12)
    assert torch.allclose(jf, fd, rtol=1e-6, atol=1e-6)


def test_a_parameter_the_data_do_not_see_is_reported_not_identifiable():
    prob = _Line()
    prob.X = torch.stack([prob.x, torch.zeros_like(prob.x)], -1)  # b has no effect on the data
    lam = 1e-2
    for _ in range(20):
        lam = lm_step(prob, lam)["lam"]
    assert float(prob.params.values()[1]) == pytest.approx(1.0)  # b never moves from its start
    unc = uncertainty(prob)
    assert unc["identifiable"].tolist() == [True, False]
    assert unc["hessian_cond"] > 1e12 and math.isfinite(float(unc["std"][1]))
