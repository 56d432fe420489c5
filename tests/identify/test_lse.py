"""Continuum parallel robot: rod stiffness from end-effector positions through the LSE implicit gradients."""

from __future__ import annotations

import pytest
import torch

from flexlearn.identify.fit import jacobian, whitened_residuals
from flexlearn.identify.lse import CprStiffnessProblem, LseIdConfig
from flexlearn.identify.run import identify

SMALL = [
    "task.problem.n_elements=2",
    "task.problem.truth_elements=3",
    "task.problem.n_phases=3",
    "task.problem.actuation_scale=0.3",
    "task.problem.experiments=[pulley]",
    "logger=none",
]


def test_implicit_jacobian_matches_finite_differences():
    prob = CprStiffnessProblem(
        LseIdConfig(
            n_elements=2,
            truth_elements=2,
            n_phases=2,
            actuation_scale=0.3,
            experiments=("pulley",),
            init={"youngs_modulus": 1.0e10},
        )
    )
    f = lambda u: whitened_residuals(prob, u)  # noqa: E731
    u = torch.tensor([0.05], dtype=torch.float64)
    _, J = jacobian(f, u, "reverse")
    h = 1e-5
    fd = ((f(u + h) - f(u - h)) / (2 * h))[:, None]
    assert float((J - fd).abs().max()) < 1e-5 * float(fd.abs().max())


def test_identify_lse_sim_recovers_youngs_modulus(compose_cfg):
    m = identify(compose_cfg("train", ["experiment=identify_lse_sim", *SMALL]))
    assert m["id/youngs_modulus_identifiable"] == 1.0
    assert m["id/youngs_modulus_rel_err"] < 0.02, m
    assert m["id/youngs_modulus_rel_err"] < 4 * m["id/youngs_modulus_rel_std"], m


@pytest.mark.slow
def test_identify_lse_sim_default_protocol(compose_cfg):
    m = identify(compose_cfg("train", ["experiment=identify_lse_sim", "logger=none"]))
    assert m["id/youngs_modulus_rel_err"] < 0.02, m
