"""Models and tasks chosen by ``_target_`` in the configs: a second model class goes through train → checkpoint →
load → export by config alone; checkpoints without a target load as DirectionMLP; bad targets are named."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest
import torch

import flexlearn.config
from flexlearn.errors import CheckpointError, ConfigError
from flexlearn.jobs.train import train
from flexlearn.jobs.training_parts import build_task
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.tasks.checkpoints import load_direction_model

# the simulated sweep of TINY in tests/training/test_train.py (simulated once per session), one epoch
TINY = ["data.sim.n_poses=400", "trainer.max_epochs=1", "data.batch_size=64"]
EXT = "flexlearn_ext_models"  # a package built on flexlearn, trusted through flexlearn.config.TARGET_PACKAGES

# A direction model that is not DirectionMLP: one hidden tanh layer on the unit field, no standardisation
# scale (runtime annotations, no ``from __future__``: TorchScript reads them).
TINY_MODEL = """
import torch
from torch import nn


class TinyDirection(nn.Module):
    input_mean: torch.Tensor

    def __init__(self, width: int = 6) -> None:
        super().__init__()
        self.inner = nn.Linear(3, width)
        self.outer = nn.Linear(width, 3)
        self.register_buffer("input_mean", torch.zeros(3))

    @torch.jit.ignore
    def fit_input_normalization(self, delta_b: torch.Tensor) -> None:
        x = delta_b / torch.linalg.vector_norm(delta_b, dim=-1, keepdim=True).clamp_min(1e-12)
        self.input_mean.copy_(x.mean(dim=0))

    def raw_output(self, delta_b: torch.Tensor) -> torch.Tensor:
        x = delta_b / torch.linalg.vector_norm(delta_b, dim=-1, keepdim=True).clamp_min(1e-12)
        return self.outer(torch.tanh(self.inner(x - self.input_mean)))

    def direction(self, y: torch.Tensor, delta_b: torch.Tensor) -> torch.Tensor:
        n = torch.linalg.vector_norm(y, dim=-1, keepdim=True)
        ok = (n > 1e-6) & torch.isfinite(y).all(dim=-1, keepdim=True)
        return torch.where(ok, y / n.clamp_min(1e-6), torch.zeros_like(y))

    def forward(self, delta_b: torch.Tensor) -> torch.Tensor:
        return self.direction(self.raw_output(delta_b), delta_b)
"""


@pytest.fixture
def ext_models(tmp_path, monkeypatch):
    """``flexlearn_ext_models.TinyDirection`` importable and trusted as a ``_target_``, and its config
    ``model/tiny.yaml`` in a config folder; returns (target, ``hydra.searchpath`` override naming that folder)."""
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / f"{EXT}.py").write_text(textwrap.dedent(TINY_MODEL))
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "tiny.yaml").write_text(f"_target_: {EXT}.TinyDirection\nwidth: 6\n")
    monkeypatch.syspath_prepend(str(tmp_path / "ext"))
    monkeypatch.setattr(flexlearn.config, "TARGET_PACKAGES", (*flexlearn.config.TARGET_PACKAGES, EXT))
    return f"{EXT}.TinyDirection", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"


def test_second_model_by_config_alone_trains_checkpoints_loads_and_exports(compose_cfg, ext_models):
    from flexlearn.jobs.export import export_checkpoint
    from flexlearn.runtime.export import load_program, load_torchscript

    target, searchpath = ext_models
    cfg = compose_cfg("train", TINY + [searchpath, "model=tiny", "model.width=5"])
    metrics = train(cfg)
    assert metrics["status"] == "ok" and math.isfinite(metrics["test/ang_err_median_deg"]), metrics
    ckpt = torch.load(metrics["best_ckpt"], map_location="cpu", weights_only=True)
    assert ckpt["hyper_parameters"]["model"] == {"_target_": target, "width": 5}
    model, info = load_direction_model(metrics["best_ckpt"])
    assert type(model).__name__ == "TinyDirection" and info["model_target"] == target
    assert model.inner.out_features == 5
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float32) * 1e-4
    paths = export_checkpoint(metrics["best_ckpt"], Path(cfg.paths.output_dir) / "export", metrics, cfg)
    with torch.no_grad():
        want = model(x)
    for load in (load_torchscript, load_program):
        module, meta = load(paths["torchscript" if load is load_torchscript else "program"])
        assert meta["model"] == "TinyDirection" and meta["model_target"] == target
        torch.testing.assert_close(module(x), want, rtol=1e-5, atol=1e-6)


def test_checkpoint_without_target_loads_as_direction_mlp(tmp_path):
    model = DirectionMLP(hidden=[4])
    state = {f"net.{k}": v.clone() for k, v in model.state_dict().items()}
    path = tmp_path / "old.ckpt"
    torch.save({"state_dict": state, "hyper_parameters": {"model": {"hidden": [4]}}}, path)
    loaded, info = load_direction_model(path)
    assert type(loaded) is DirectionMLP and info["model_target"] == "flexlearn.models.direction_mlp.DirectionMLP"
    x = torch.randn(5, 3, dtype=torch.float32)
    torch.testing.assert_close(loaded(x), model.eval()(x))


@pytest.mark.parametrize(
    "target, needle",
    [
        ("os.system", "inside"),  # code outside flexlearn is never called
        ("flexlearn.models.nope.Net", "no such class"),
        ("flexlearn.models.joint_modules.JointModuleModel", "not a direction model"),
        ("flexlearn.config.check", "no such class"),  # a function, not a class
    ],
)
def test_bad_model_targets_are_named_in_config_and_checkpoint(compose_cfg, tmp_path, target, needle):
    with pytest.raises(ConfigError, match=rf"model\._target_.*{needle}"):
        build_task(compose_cfg("train", [f"model._target_={target}"]))
    path = tmp_path / "bad.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"model": {"_target_": target}}}, path)
    with pytest.raises(CheckpointError, match=rf"bad.ckpt.*hyper_parameters\.model\._target_.*{needle}"):
        load_direction_model(path)


def test_task_target_and_model_keys_are_checked(compose_cfg):
    with pytest.raises(ConfigError, match=r"task\._target_.*DirectionTask"):
        build_task(compose_cfg("train", ["task._target_=flexlearn.identify.task.IdentificationTask"]))
    with pytest.raises(ConfigError, match=r"model\._target_.*required"):
        build_task(compose_cfg("train", ["~model._target_"]))
    with pytest.raises(ConfigError, match="hidden"):
        build_task(compose_cfg("train", ["model.hidden=[0]"]))
    assert build_task(compose_cfg("train", ["model.hidden=[8,8]"])).hparams["model"]["hidden"] == [8, 8]
