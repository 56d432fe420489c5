"""Simulator → rosbag2 → flexlearn-ingest → train (fast_dev_run, then a tiny run) → export → runtime replay from
the bag."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.config import from_dict
from flexlearn.ingest.replay import replay_recording
from flexlearn.ingest.writers import sweep_messages, write_rosbag
from flexlearn.jobs.export import export_checkpoint
from flexlearn.jobs.train import train
from flexlearn.sim.rig import simulate_sweep
from flexlearn.sim.rig_config import RigConfig
from flexlearn.tasks.checkpoints import load_direction_model

from .conftest import run_app


def test_simulator_to_bag_to_training_to_runtime_replay(tmp_path, compose_cfg, ros_map):
    raw = simulate_sweep(from_dict(RigConfig, {"n_poses": 120, "seed": 11}))
    msgs, store = sweep_messages(raw, ros_map)
    bag = write_rosbag(tmp_path / "rig_bag", msgs, store, "mcap")

    proc = run_app("ingest", tmp_path, f"input={bag}", f"output={tmp_path / 'session'}", "report_options.n_cells=16")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dataset = tmp_path / "session" / "dataset.parquet"
    assert f"data.path={dataset}" in proc.stdout
    assert (tmp_path / "session" / "report" / "report.md").is_file()

    fdr = compose_cfg("train", ["debug=fdr", "data=dataset", f"data.path={dataset}"], out="fdr")
    assert math.isfinite(train(fdr)["test/ang_err_median_deg"])

    cfg = compose_cfg(
        "train", ["data=dataset", f"data.path={dataset}", "trainer.max_epochs=3", "data.batch_size=32"], out="tiny"
    )
    metrics = train(cfg)
    assert metrics["dataset_path"] == str(dataset)
    paths = export_checkpoint(metrics["best_ckpt"], tmp_path / "export", metrics, cfg)

    replay = replay_recording(paths["torchscript"], bag, ros_map)
    from flexlearn.data.dataset import DirectionDataset

    ds = DirectionDataset.load(dataset)
    np.testing.assert_array_equal(replay["pose_id"], ds.pose_id)
    np.testing.assert_array_equal(replay["delta_b"], ds.delta_b)
    model, _ = load_direction_model(metrics["best_ckpt"])
    with torch.no_grad():
        want = model(torch.as_tensor(ds.delta_b, dtype=torch.float32)).double().numpy()
    np.testing.assert_allclose(replay["pred"], want, rtol=1e-5, atol=1e-6)
    # The replayed test poses reproduce the trainer's test metric (same model, same poses).
    test = ds.split == "test"
    assert np.median(replay["error_deg"][test]) == pytest.approx(metrics["test/ang_err_median_deg"], rel=1e-3)
    assert np.all(np.isfinite(replay["error_deg"]))
