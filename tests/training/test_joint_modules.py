"""Joint training on several modules (flexlearn.models.joint_modules) and the merged dataset's ``module`` column
(flexlearn.data.dataset.merge_modules)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.data.dataset import DirectionDataset, merge_modules
from flexlearn.errors import ArgumentError, DataError
from flexlearn.models.joint_modules import JointModuleModel, JointTraining, train_joint
from flexlearn.sensing.module_cal import input_map


def _module(n: int, seed: int, a: np.ndarray) -> DirectionDataset:
    """A synthetic module: labels within 30° of straight, field x = A⁻¹ g(label) with g a fixed smooth map."""
    rng = np.random.default_rng(seed)
    col, az = np.radians(30.0) * np.sqrt(rng.uniform(size=n)), rng.uniform(-math.pi, math.pi, n)
    lab = np.stack([np.sin(col) * np.cos(az), np.sin(col) * np.sin(az), np.cos(col)], -1)
    g = lab + 0.3 * np.stack([lab[:, 1] * lab[:, 2], lab[:, 0] ** 2, 0 * lab[:, 0]], -1)  # a bent field map
    x = 1e-4 * g @ np.linalg.inv(a).T
    split = np.where(np.arange(n) % 10 == 0, "test", np.where(np.arange(n) % 10 == 1, "val", "train"))
    return DirectionDataset(
        pose_id=np.arange(n),
        delta_b=x,
        label=lab,
        split=split,
        n_coil_on=np.full(n, 6),
        meta={"source": {"module": {"seed": seed}}},
    )


def test_merge_keeps_rows_splits_and_names_the_module(tmp_path):
    parts = [_module(40, 1, np.eye(3)), _module(30, 2, np.eye(3))]
    ds = merge_modules(parts)
    assert len(ds) == 70 and ds.module.tolist() == [0] * 40 + [1] * 30 and len(np.unique(ds.pose_id)) == 70
    assert (ds.split == np.concatenate([p.split for p in parts])).all()
    assert [m["seed"] for m in ds.meta["modules"]] == [1, 2]
    back = DirectionDataset.load(ds.save(tmp_path / "m.parquet"))
    assert back.module.tolist() == ds.module.tolist() and back.subset("test").module is not None
    with pytest.raises(DataError, match="no datasets"):
        merge_modules([])
    with pytest.raises(DataError, match="dataset 1 already holds several modules"):
        merge_modules([parts[0], ds])


def test_a_bad_module_column_is_named():
    ds = _module(10, 1, np.eye(3))
    with pytest.raises(DataError, match="module"):
        DirectionDataset(
            pose_id=ds.pose_id,
            delta_b=ds.delta_b,
            label=ds.label,
            split=ds.split,
            n_coil_on=ds.n_coil_on,
            module=np.zeros(9, np.int64),
        )
    with pytest.raises(DataError, match="column 'module' has value -1 at row 3"):
        DirectionDataset(
            pose_id=ds.pose_id,
            delta_b=ds.delta_b,
            label=ds.label,
            split=ds.split,
            n_coil_on=ds.n_coil_on,
            module=np.array([0, 0, 1, -1, 0, 0, 1, 1, 0, 0], np.int64),
        )


def test_forward_applies_each_rows_own_map():
    """d̂_n = f(A_{k(n)} x_n): rows of module 1 see its map, rows of module 0 the identity."""
    model = JointModuleModel(2, hidden=(8,))
    with torch.no_grad():
        model.theta[1, :3] = torch.tensor([0.0, 0.0, 0.3], dtype=torch.float64)
    x = torch.randn(6, 3, dtype=torch.float64)
    k = torch.tensor([0, 1, 0, 1, 1, 0])
    a1 = input_map(model.theta[1].detach(), "linear")
    want = torch.where((k == 1)[:, None], model.net((x @ a1.T).float()), model.net(x.float()))
    assert torch.allclose(model(x, k), want, atol=1e-6)


@pytest.mark.slow
def test_per_module_maps_take_what_one_shared_network_cannot():
    """Three modules whose fields differ by known maps (2° turns, 2 % stretch): trained jointly with a map per
    module, the test poses of every module are fitted far better than by the same network trained on the pooled
    rows with one map for all (which must split the 2° differences)."""
    true = [
        input_map(torch.tensor(t, dtype=torch.float64), "linear").numpy()
        for t in (
            [0.0] * 8,
            [0.035, 0.0, 0.0, 0.02, 0.0, 0.0, 0.0, 0.0],
            [0.0, -0.035, 0.0, 0.0, -0.02, 0.01, 0.0, 0.0],
        )
    ]
    ds = merge_modules([_module(1500, k, a) for k, a in enumerate(true)])
    tr, te = ds.subset("train"), ds.subset("test")
    err = {}
    for name, module in (("joint", tr.module), ("pooled", np.zeros_like(tr.module))):
        model = train_joint(tr.delta_b, tr.label, module, JointTraining(epochs=60, hidden=(64, 64)))
        k = te.module if name == "joint" else np.zeros_like(te.module)
        with torch.no_grad():
            pred = model(torch.as_tensor(te.delta_b), torch.as_tensor(k)).double().numpy()
        err[name] = float(np.median(np.degrees(np.arccos(np.clip((pred * te.label).sum(1), -1, 1)))))
    assert err["joint"] < 0.6 and err["joint"] < 0.5 * err["pooled"], err


def test_joint_model_rejects_a_bad_kind():
    with pytest.raises(ArgumentError, match="kind"):
        JointModuleModel(2, kind="affine")
