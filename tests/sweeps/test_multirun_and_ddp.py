"""A 2-job joblib multirun of an identification, aggregated; a DDP training run with two CPU processes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_app(module: str, root: Path, args: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLEXLEARN_ROOT=str(root), WANDB_MODE="offline", OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow  # ≈ 15 s: run by CI after the default suite (.ci/run)
def test_joblib_multirun_of_two_identifications_then_aggregate(tmp_path):
    proc = run_app(
        "flexlearn.apps.train",
        tmp_path,
        [
            "-m",
            "experiment=identify_modal_sim",
            "hydra/launcher=local_parallel",
            "logger=none",
            "task.problem.duration=1.0",
            "task.problem.seed=0,1",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep_dir = next(tmp_path.glob("logs/identify_modal/multiruns/*"))
    jobs = sorted(sweep_dir.glob("*/metrics.json"))
    assert len(jobs) == 2
    pids = {json.loads((p.parent / "identification.json").read_text())["config"]["problem"]["seed"] for p in jobs}
    assert pids == {0, 1}
    for p in jobs:
        m = json.loads(p.read_text())
        assert m["id/EI_rel_err"] < 0.05 and m["id/converged"] == 1.0
    agg = run_app("flexlearn.apps.aggregate", tmp_path, [f"dir={sweep_dir}", "y=id/EI_rel_err"], timeout=120)
    assert agg.returncode == 0, agg.stderr[-2000:]
    rows = list(csv.DictReader(open(sweep_dir / "summary.csv")))
    assert [r["task.problem.seed"] for r in rows] == ["0", "1"] and all(r["status"] == "ok" for r in rows)
    assert (sweep_dir / "summary.png").exists()


@pytest.mark.slow  # ≈ 15 s: run by CI after the default suite (.ci/run)
def test_ddp_training_with_two_cpu_processes(tmp_path):
    proc = run_app(
        "flexlearn.apps.train",
        tmp_path,
        [
            "trainer=ddp_cpu",
            "data.sim.n_poses=200",
            "data.batch_size=32",
            "data.eval_batch_size=8",
            "trainer.max_epochs=1",
            "logger=csv",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = next(tmp_path.glob("logs/train/runs/*"))
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["world_size"] == 2 and m["epochs"] == 1
    assert (run_dir / "train_ddp_process_1.log").exists()  # rank 1 ran in the same run directory
    assert "test/ang_err_median_deg" in m and Path(m["best_ckpt"]).exists()
    from flexlearn.data.dataset import DirectionDataset

    split = DirectionDataset.load(m["dataset_path"]).split
    # each rank evaluates the whole val/test split (exact metrics, no duplicated or missing samples)
    assert m["val/n_samples"] == (split == "val").sum() and m["test/n_samples"] == (split == "test").sum()
