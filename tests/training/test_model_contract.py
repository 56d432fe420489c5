"""The direction model's output contract (unit vector or exactly zero) through TorchScript, the scoring of
predictions that are no direction, and the bounded validation of model hyper-parameters."""

from __future__ import annotations

import pytest
import torch

from flexlearn.errors import CheckpointError, ConfigError
from flexlearn.metrics import angular_error_deg, angular_error_summary
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.export import export_torchscript, load_torchscript
from flexlearn.tasks.checkpoints import load_direction_model


def _norms(y: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(y, dim=-1)


def _assert_unit_or_zero(y: torch.Tensor) -> None:
    n = _norms(y)
    ok = (n == 0) | ((n - 1).abs() < 1e-5)
    assert bool(ok.all()), f"outputs neither unit nor zero: norms {n[~ok].tolist()}"


def test_exported_model_returns_unit_or_exactly_zero_vectors(tmp_path):
    torch.manual_seed(0)
    model = DirectionMLP(hidden=[8, 8]).eval()
    x = torch.randn(6, 3) * 1e-4
    x[1] = 0.0  # no field: no direction
    x[2, 0] = float("nan")  # broken sensor reading
    x[3, 1] = float("inf")
    path = export_torchscript(model, tmp_path / "m.pt", {"model": "DirectionMLP"})
    scripted, _ = load_torchscript(path)
    y = scripted(x)
    _assert_unit_or_zero(y)
    assert bool(torch.isfinite(y).all())
    assert _norms(y).tolist() == pytest.approx([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], abs=1e-5)
    torch.testing.assert_close(y, model(x).detach())


def test_collapsed_network_says_so_through_torchscript(tmp_path):
    """A network whose raw output is (almost) zero must not emit a short or arbitrary vector."""
    model = DirectionMLP(hidden=[8]).eval()
    with torch.no_grad():
        model.net[-1].weight.zero_()
        model.net[-1].bias.copy_(torch.tensor([1e-13, 0.0, 0.0]))  # raw output of length 1e-13
    path = export_torchscript(model, tmp_path / "collapsed.pt", {"model": "DirectionMLP"})
    scripted, _ = load_torchscript(path)
    y = scripted(torch.randn(5, 3) * 1e-4)
    _assert_unit_or_zero(y)
    assert bool((_norms(y) == 0).all())


def test_a_zero_prediction_scores_180_degrees_and_is_counted():
    target = torch.nn.functional.normalize(torch.randn(7, 3, dtype=torch.float64), dim=-1)
    pred = target.clone()
    pred[:3] = 0.0
    pred[3, 0] = float("nan")
    err = angular_error_deg(pred, target)
    assert err[:4].tolist() == [180.0] * 4
    assert err[4:].abs().max() < 1e-5
    from flexlearn.metrics import invalid_direction

    summary = angular_error_summary(err, "test/", invalid=invalid_direction(pred))
    assert summary["test/invalid_fraction"] == pytest.approx(4 / 7)
    assert summary["test/ang_err_median_deg"] == 180.0


@pytest.mark.parametrize(
    "hidden,needle",
    [
        ([10**12], "hidden"),
        ([4096] * 8, "parameters"),
        ([0], "hidden"),
        ([8.5], "hidden"),
        ("abc", "hidden"),
        ([True], "hidden"),
    ],
)
def test_model_sizes_are_bounded_before_allocation(hidden, needle):
    with pytest.raises(ValueError, match=needle):
        DirectionMLP(hidden=hidden)


def _checkpoint(path, model_hp, state=None):
    torch.save({"state_dict": state or {}, "hyper_parameters": {"model": model_hp}}, path)
    return path


@pytest.mark.parametrize(
    "model_hp,needle",
    [
        ({"hidden": [10**12]}, "hidden"),
        ({"hidden": [8], "bogus": 1}, "bogus"),
        ({"hidden": "abc"}, "hidden"),
        ({"hidden": [8], "activation": 3}, "activation"),
        ({"hidden": [8], "amplitude_eps": -1.0}, "amplitude_eps"),
    ],
)
def test_checkpoint_with_bad_hyper_parameters_is_named(tmp_path, model_hp, needle):
    path = _checkpoint(tmp_path / "bad.ckpt", model_hp)
    with pytest.raises(CheckpointError, match=needle) as info:
        load_direction_model(path)
    assert "bad.ckpt" in str(info.value)


def test_checkpoint_that_is_a_text_file_is_named(tmp_path):
    path = tmp_path / "notes.ckpt"
    path.write_text("hello, this is not a checkpoint\n")
    with pytest.raises(CheckpointError, match="notes.ckpt"):
        load_direction_model(path)


def test_checkpoint_with_non_finite_weights_is_refused(tmp_path):
    model = DirectionMLP(hidden=[4])
    state = {f"net.{k}": v.clone() for k, v in model.state_dict().items()}
    state["net.net.0.weight"][0, 0] = float("nan")
    path = _checkpoint(tmp_path / "nan.ckpt", {"hidden": [4]}, state)
    with pytest.raises(CheckpointError, match="not finite"):
        load_direction_model(path)


def test_build_task_names_bad_model_and_task_values(compose_cfg):
    from flexlearn.jobs.training_parts import build_task

    for override, needle in [
        ("model.hidden=[1e12]", "model.hidden"),
        ("task.lr=-1", "task.lr"),
        ("task.lr=nan", "task.lr"),
        ("task.lr=abc", "task.lr"),
        ("task.weight_decay=-0.1", "task.weight_decay"),
        ("+task.bogus=1", "bogus"),
    ]:
        with pytest.raises(ConfigError, match=needle):
            build_task(compose_cfg("train", [override]))
