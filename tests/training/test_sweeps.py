"""Hydra multirun through the console entry point: basic grid sweep (with a diverging job) and Optuna."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

SMALL = ["data.sim.n_poses=400", "trainer.max_epochs=2", "data.batch_size=64"]


def run_train(root: Path, cache_dir: Path, args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLEXLEARN_ROOT=str(root), WANDB_MODE="offline")
    return subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.train", *args, f"paths.cache_dir={cache_dir}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def job_metrics(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.glob("logs/train/multiruns/*/*/metrics.json"))]


def test_grid_sweep_survives_a_diverging_job(tmp_path, cache_dir):
    proc = run_train(tmp_path, cache_dir, ["-m", *SMALL, "task.lr=3e-3,1e30"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = job_metrics(tmp_path)
    assert len(metrics) == 2
    # a diverged job records a non-finite metric (null in strict JSON)
    finite = [m["val/ang_err_median_deg"] is not None and math.isfinite(m["val/ang_err_median_deg"]) for m in metrics]
    assert metrics[1]["status"] == "diverged" and not finite[1]
    assert finite[0], "the sane job must produce a finite metric"
    # the end of the sweep names the best run: the sane job, its directory and best checkpoint
    sweep = next(tmp_path.glob("logs/train/multiruns/*"))
    lines = proc.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("best run: "))
    assert lines[at].startswith("best run: job 0 (task.lr=0.003): val/ang_err_median_deg = ")
    assert (
        lines[at + 1] == f"  directory:  {sweep / '0'}" and lines[at + 2] == f"  checkpoint: {metrics[0]['best_ckpt']}"
    )
    assert "  status diverged: job 1" in lines[:at]
    assert "| **0 (best)** | ok |" in (sweep / "summary.md").read_text()


def test_optuna_sweep_two_trials(tmp_path, cache_dir):
    proc = run_train(
        tmp_path,
        cache_dir,
        [
            *SMALL,
            "hparams_search=direction_optuna",
            "hydra.sweeper.n_trials=2",
            "hydra.sweeper.sampler.n_startup_trials=2",
        ],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(job_metrics(tmp_path)) == 2
    optimization = next(tmp_path.glob("logs/train/multiruns/*/optimization_results.yaml")).read_text()
    assert "best_value" in optimization
    # the trial printed as best is the study's best: its objective is its best checkpoint's score
    import yaml

    best_value = yaml.safe_load(optimization)["best_value"]
    metrics = job_metrics(tmp_path)
    best = min(range(2), key=lambda i: metrics[i]["best_score"])
    assert metrics[best]["best_score"] == best_value
    assert f"best run: job {best} (" in proc.stdout and f"  checkpoint: {metrics[best]['best_ckpt']}" in proc.stdout


def test_unknown_override_fails_with_a_message_naming_the_key(tmp_path, cache_dir):
    proc = run_train(tmp_path, cache_dir, [*SMALL, "trainer.max_epoch=3"])
    assert proc.returncode != 0
    assert "max_epoch" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_data_path_gives_one_line_error(tmp_path, cache_dir):
    proc = run_train(tmp_path, cache_dir, ["data=dataset", "data.path=missing.parquet"])
    assert proc.returncode == 2
    assert "missing.parquet" in proc.stderr and "Traceback" not in proc.stderr
