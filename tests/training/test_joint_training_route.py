"""Training on several modules through `flexlearn-train`: ``data.module_seeds`` / ``data.paths`` build one dataset
with a ``module`` column, ``task.module_maps`` learns a map per module with the network (seed 002 III-B3)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from flexlearn.data.dataset import DirectionDataset
from flexlearn.errors import CheckpointError, ConfigError
from flexlearn.jobs.train import train
from flexlearn.sensing.module_cal import input_map
from flexlearn.tasks.checkpoints import load_direction_model

TINY = ["trainer.max_epochs=3", "data.batch_size=64", "transfer.module_seeds=[]"]
# Module 1's field is module 0's turned by 3° about x and stretched 3 % along x: what its map must learn.
TRUE_THETA_1 = [0.0524, 0.0, 0.0, 0.03, -0.015, 0.0, 0.0, 0.0]


def _module_file(path: Path, n: int, seed: int, theta: list[float]) -> str:
    """A synthetic module (labels within 30° of straight, a fixed bent field map seen through A⁻¹), saved."""
    rng = np.random.default_rng(seed)
    col, az = np.radians(30.0) * np.sqrt(rng.uniform(size=n)), rng.uniform(-np.pi, np.pi, n)
    lab = np.stack([np.sin(col) * np.cos(az), np.sin(col) * np.sin(az), np.cos(col)], -1)
    g = lab + 0.3 * np.stack([lab[:, 1] * lab[:, 2], lab[:, 0] ** 2, 0 * lab[:, 0]], -1)
    a = input_map(torch.tensor(theta, dtype=torch.float64), "linear").numpy()
    split = np.where(np.arange(n) % 10 == 0, "test", np.where(np.arange(n) % 10 == 1, "val", "train"))
    ds = DirectionDataset(
        pose_id=np.arange(n),
        delta_b=1e-4 * g @ np.linalg.inv(a).T,
        label=lab,
        split=split,
        n_coil_on=np.full(n, 6),
        meta={"source": {"module": {"seed": seed}}},
    )
    return str(ds.save(path))


@pytest.fixture
def two_module_files(tmp_path) -> list[str]:
    return [
        _module_file(tmp_path / "m0.parquet", 1500, 1, [0.0] * 8),
        _module_file(tmp_path / "m1.parquet", 1500, 2, TRUE_THETA_1),
    ]


def _theta(ckpt: str) -> torch.Tensor:
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    return state["module_maps.theta"]


def test_recorded_modules_train_jointly_and_the_maps_find_the_difference(compose_cfg, two_module_files):
    """Two modules whose fields differ by a known 3° turn and 3 % stretch, trained through the config route: with a
    map per module the test poses are fitted better than by one network for both, the maps' difference moves
    toward that turn and stretch, and the exported network is the shared one (loads without the maps)."""
    common = [
        "data=modules",
        f"data.paths=[{','.join(two_module_files)}]",
        "trainer.max_epochs=25",
        "data.batch_size=128",
        "transfer.module_seeds=[]",
    ]
    pooled = train(compose_cfg("train", common, out="pooled"))
    cfg = compose_cfg("train", common + ["task.module_maps={}"], out="maps")
    joint = train(cfg)
    assert joint["test/ang_err_median_deg"] < 0.7 * pooled["test/ang_err_median_deg"], (joint, pooled)
    written = json.loads(Path(cfg.paths.output_dir, "metrics.json").read_text())
    theta = _theta(written["best_ckpt"])
    assert theta.shape == (2, 8)
    a0, a1 = (input_map(t, "linear") for t in theta)
    rel = torch.linalg.inv(a0) @ a1  # f(A₀ x₀) = f(A₁ x₁) with x₀ = A_true x₁: A₀⁻¹A₁ = A_true whatever
    #                                     common map the network absorbs
    want = input_map(torch.tensor(TRUE_THETA_1, dtype=torch.float64), "linear")
    assert float(torch.linalg.matrix_norm(rel - want)) < 0.7 * float(torch.linalg.matrix_norm(want - torch.eye(3)))
    net, info = load_direction_model(written["best_ckpt"])
    assert info["hyper_parameters"]["n_modules"] == 2 and info["hyper_parameters"]["module_maps"]["kind"] == "linear"
    assert net(torch.zeros(1, 3) + 1e-4).shape == (1, 3)


def test_simulated_modules_by_seed_make_one_dataset(compose_cfg):
    cfg = compose_cfg(
        "train", ["data.module_seeds=[0,1]", "data.sim.n_poses=300", "task.module_maps={kind: rotation}"] + TINY
    )
    metrics = train(cfg)
    written = json.loads(Path(cfg.paths.output_dir, "metrics.json").read_text())
    ds = DirectionDataset.load(written["dataset_path"])
    assert sorted(set(ds.module.tolist())) == [0, 1]
    assert [m["seed"] for m in ds.meta["modules"]] == [0, 1]
    assert _theta(written["best_ckpt"]).shape == (2, 3)
    assert np.isfinite(metrics["test/ang_err_median_deg"])


@pytest.mark.parametrize(
    "overrides,named",
    [
        (["task.module_maps={}"], "task.module_maps"),  # one module: nothing to map
        (["data.module_seeds=[0,1]", "task.module_maps={kind: affine}"], "task.module_maps.kind"),
        (["data.module_seeds=[0,1]", "task.module_maps={prior_shap: 0.1}"], "prior_shape"),
        (["data.module_seeds=[0,1]", "task.module_maps={sigma_fix_deg: -1}"], "task.module_maps.sigma_fix_deg"),
        (["data.module_seeds=[0,0]"], "data.module_seeds"),
        (["data.module_seeds=[0,-1]"], "data.module_seeds"),
        (["+data.paths=[a.parquet]"], "data.paths"),
        (["data=dataset", "data.path=a.parquet", "data.paths=[b.parquet]"], "data.path"),
        (["data=dataset", "data.path=a.parquet", "+data.module_seeds=[1]"], "data.module_seeds"),
        (["+task.n_modules=3"], "n_modules"),
    ],
)
def test_bad_module_settings_are_named(compose_cfg, overrides, named):
    sim = [] if "data=dataset" in overrides else ["data.sim.n_poses=300"]
    cfg = compose_cfg("train", sim + TINY + overrides)
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        train(cfg)


def test_resuming_on_another_module_count_is_refused(compose_cfg):
    base = [
        "data.sim.n_poses=300",
        "task.module_maps={}",
        "trainer.max_epochs=1",
        "data.batch_size=64",
        "transfer.module_seeds=[]",
    ]
    cfg = compose_cfg("train", base + ["data.module_seeds=[0,1]"], out="two")
    train(cfg)
    last = Path(cfg.paths.checkpoint_dir) / "last.ckpt"
    resumed = compose_cfg("train", base + ["data.module_seeds=[1]", f"ckpt_path={last}"], out="one")
    with pytest.raises(CheckpointError, match="module_maps.theta"):
        train(resumed)
