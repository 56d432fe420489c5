"""The LightningModule (LM and gradient descent) and config errors of the identification tasks."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.identify.params import ParameterSet, ParamSpec
from flexlearn.identify.run import identify
from flexlearn.identify.task import IdentificationTask


class _Exp:
    """y = A exp(−t/τ), A and τ positive; truth A = 2, τ = 0.5."""

    jacobian_mode = "forward"

    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.t = torch.linspace(0, 2, 100, dtype=torch.float64)
        self.measured = 2.0 * torch.exp(-self.t / 0.5) + 0.01 * torch.randn(100, generator=g, dtype=torch.float64)
        self.sigma = 0.01
        self.params = ParameterSet([ParamSpec("A", 1.0, truth=2.0), ParamSpec("tau", 1.0, 0.01, 10.0, truth=0.5)])

    def predict(self, v):
        return v[0] * torch.exp(-self.t / v[1])


@pytest.mark.parametrize("method, epochs", [("lm", 30), ("adam", 400)])
def test_task_fits_through_the_trainer(method, epochs):
    task = IdentificationTask(_Exp(), method=method, lr=0.05, tol=1e-10)
    L.Trainer(
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    ).fit(task)
    rep = task.report()
    assert rep["id/A_rel_err"] < 0.02 and rep["id/tau_rel_err"] < 0.02, rep
    assert task.history[-1] < task.history[0]
    if method == "lm":
        assert rep["id/converged"] == 1.0 and rep["id/iterations"] < 30


def test_unknown_keys_and_problem_types_are_named(compose_cfg):
    with pytest.raises(ConfigError, match="task.problem"):
        identify(compose_cfg("train", ["experiment=identify_modal_sim", "+task.problem.stiffness=1"]))
    with pytest.raises(ConfigError, match="task.problem_type"):
        identify(compose_cfg("train", ["experiment=identify_modal_sim", "task.problem_type=fem"]))
    with pytest.raises(ConfigError, match="task.method"):
        identify(
            compose_cfg("train", ["experiment=identify_modal_sim", "task.method=newton", "task.problem.duration=0.5"])
        )
    with pytest.raises(ConfigError, match=r"task\.problem\.EI"):
        identify(compose_cfg("train", ["experiment=identify_modal_sim", "task.problem.EI=-1"]))
