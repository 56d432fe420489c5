"""Cosserat rod: Young's modulus and damping from a tip track through the LGVI."""

from __future__ import annotations

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.identify.cosserat import CosseratIdConfig, CosseratTipProblem
from flexlearn.identify.fit import jacobian, uncertainty, whitened_residuals
from flexlearn.identify.run import identify


def test_tip_track_jacobian_matches_finite_differences():
    prob = CosseratTipProblem(CosseratIdConfig(steps=24, horizons=(1.0,)))
    f = lambda u: whitened_residuals(prob, u)  # noqa: E731
    u = torch.tensor([0.1, 0.2], dtype=torch.float64)
    _, J = jacobian(f, u, "forward")
    h = 1e-5
    fd = torch.stack([(f(u + h * e) - f(u - h * e)) / (2 * h) for e in torch.eye(2, dtype=torch.float64)], -1)
    assert float((J - fd).abs().max()) < 1e-5 * float(fd.abs().max())


def test_rod_hanging_still_does_not_identify_its_damping():
    # at the true parameters of a rod at rest in its gravity equilibrium, the track has no damping information
    cfg = CosseratIdConfig(initial="static", steps=60, horizons=(1.0,), init={"youngs_modulus": 3.65e5, "alpha": 40.0})
    unc = uncertainty(CosseratTipProblem(cfg))
    assert not bool(unc["identifiable"][1])
    assert float(unc["rel_std"][1]) > 1.0


def test_bad_horizons_are_rejected():
    with pytest.raises(ConfigError, match="task.problem.horizons"):
        CosseratTipProblem(CosseratIdConfig(horizons=(0.5,)))


@pytest.mark.slow
def test_identify_cosserat_sim_recovers_modulus_and_damping(compose_cfg):
    m = identify(compose_cfg("train", ["experiment=identify_cosserat_sim", "logger=none"]))
    assert m["id/youngs_modulus_rel_err"] < 0.02, m
    assert m["id/youngs_modulus_identifiable"] == 1.0 and m["id/alpha_identifiable"] == 1.0
    assert m["id/alpha_rel_err"] < 4 * m["id/alpha_rel_std"], m
