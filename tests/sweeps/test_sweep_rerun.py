"""A sweep interrupted with Ctrl-C and run again with the command its line prints keeps its finished jobs and
continues the interrupted one from its last.ckpt (`flexlearn.sweeps.rerun`)."""

from __future__ import annotations

import csv
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
from omegaconf import OmegaConf

from flexlearn.sweeps.rerun import continued_checkpoint, kept_result, recorded_result, sweep_rerun_command

OVERRIDES = ["task.lr=0.001", "seed=3"]


@pytest.mark.parametrize(
    ("record", "kept"),
    [
        ({"status": "ok", "overrides": OVERRIDES, "result": 0.31}, (True, 0.31)),
        ({"status": "ok", "overrides": OVERRIDES, "result": "inf"}, (True, math.inf)),  # a diverged job
        ({"status": "ok", "overrides": OVERRIDES, "result": None}, (True, None)),
        ({"status": "ok", "overrides": ["task.lr=0.01", "seed=3"], "result": 0.31}, (False, None)),  # another job
        ({"status": "ok", "overrides": OVERRIDES}, (False, None)),  # no result recorded
        ({"status": "error", "overrides": OVERRIDES, "result": 0.31}, (False, None)),
        ({"status": "interrupted", "overrides": OVERRIDES}, (False, None)),
        ({"status": "ok", "overrides": OVERRIDES, "result": "0.31"}, (False, None)),  # not a number
        (None, (False, None)),
    ],
)
def test_only_a_job_that_ended_ok_with_the_same_overrides_is_kept(record, kept):
    assert kept_result(record, OVERRIDES) == kept


@pytest.mark.parametrize(
    ("result", "kept"),
    [(None, (True, None)), (0.3, (True, 0.3)), (2, (True, 2)), (math.inf, (True, "inf")), (math.nan, (False, None)),
     (-math.inf, (False, None)), (True, (False, None)), ("0.3", (False, None))],
)  # fmt: skip
def test_a_result_is_kept_as_strict_json_and_read_back(result, kept):
    assert recorded_result(result) == kept
    if kept[0]:
        record = {"status": "ok", "overrides": OVERRIDES, "result": kept[1]}
        assert kept_result(record, OVERRIDES) == (True, result)


def test_only_a_stopped_job_of_the_same_overrides_with_a_last_ckpt_continues(tmp_path):
    cfg = OmegaConf.create({"ckpt_path": None, "paths": {"checkpoint_dir": str(tmp_path)}})
    stopped = {"status": "interrupted", "overrides": OVERRIDES}
    assert continued_checkpoint(cfg, stopped, OVERRIDES) is None  # no last.ckpt yet: it runs as new
    (tmp_path / "last.ckpt").write_bytes(b"x")
    assert continued_checkpoint(cfg, stopped, OVERRIDES) == tmp_path / "last.ckpt"
    assert continued_checkpoint(cfg, dict(stopped, status="running"), OVERRIDES) == tmp_path / "last.ckpt"  # killed
    assert continued_checkpoint(cfg, dict(stopped, status="error"), OVERRIDES) is None
    assert continued_checkpoint(cfg, stopped, ["task.lr=0.01", "seed=3"]) is None
    given = OmegaConf.create({"ckpt_path": "/elsewhere/last.ckpt", "paths": {"checkpoint_dir": str(tmp_path)}})
    assert continued_checkpoint(given, stopped, OVERRIDES) is None  # the user's own checkpoint wins
    assert (
        continued_checkpoint(OmegaConf.create({"paths": {"checkpoint_dir": str(tmp_path)}}), stopped, OVERRIDES) is None
    )


def test_the_rerun_command_replaces_an_earlier_sweep_dir(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["x", "-m", "task.lr=1e-3,1e-2", "hydra.sweep.dir=/old dir"])
    line = sweep_rerun_command("flexlearn-train", "/new dir")
    assert line.endswith("flexlearn-train -m task.lr=1e-3,1e-2 'hydra.sweep.dir=/new dir'"), line


SWEEP = [
    "-m",
    "task.lr=1e-3,3e-3,1e-2",
    "data.sim.n_poses=300",
    "trainer.max_epochs=150",
    "callbacks.schedule.target_steps=1000000",  # every epoch, no plateau stop: long enough to be interrupted
    "callbacks.schedule.min_patience=1000000",
    "logger=csv",
    "seed=5",
]


OPTUNA = [  # the documented Bayesian search (its TPE sampler is seeded), 3 trials of a small model
    "hparams_search=direction_optuna",
    "hydra.sweeper.n_trials=3",
    "hydra.sweeper.sampler.n_startup_trials=2",
    *[o for o in SWEEP if o not in ("-m", "task.lr=1e-3,3e-3,1e-2", "trainer.max_epochs=150")],
    "trainer.max_epochs=60",
]


def _stop_during_job_1(tmp_path, sweep_args):
    """Run the sweep; Ctrl-C while job 1 trains, after its first checkpoint. Returns (sweep dir, its stderr)."""
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "flexlearn.apps.train", *sweep_args]
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob("checkpoints/train/multiruns/*/1/last.ckpt")) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    (sweep,) = tmp_path.glob("logs/train/multiruns/*")
    return sweep, err


def _rerun(tmp_path, err):
    """Run the command the interruption's last line prints; return the finished process."""
    prefix = "rerun the sweep (its finished jobs are kept, an interrupted one continues): "
    again = shlex.split(err.strip().splitlines()[-1].split(prefix, 1)[1])
    assert again[0] == "flexlearn-train"
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "flexlearn.apps.train", *again[1:]]
    res = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


@pytest.mark.slow
def test_a_seeded_optuna_study_rerun_in_its_directory_asks_the_same_trials_and_keeps_them(tmp_path):
    sweep, err = _stop_during_job_1(tmp_path, OPTUNA)
    first = {job: json.loads((sweep / job / "status.json").read_text())["overrides"] for job in ("0", "1")}
    kept_metrics = (sweep / "0" / "metrics.json").read_bytes()
    res = _rerun(tmp_path, err)
    assert f"[job 0] kept: it ended ok in an earlier run of this sweep ({sweep / '0'})" in res.stdout, res.stdout
    assert "[job 1] continues from" in res.stdout, res.stdout
    assert (sweep / "0" / "metrics.json").read_bytes() == kept_metrics
    for job, overrides in first.items():  # the seeded sampler, told the kept result, asks the same trials
        assert json.loads((sweep / job / "status.json").read_text())["overrides"] == overrides, job
    assert list(tmp_path.glob("logs/train/multiruns/*")) == [sweep]
    assert (sweep / "optimization_results.yaml").is_file()
    assert all(json.loads((sweep / j / "status.json").read_text())["status"] == "ok" for j in ("0", "1", "2"))


@pytest.mark.slow  # ≈ 40 s: run by CI after the default suite (.ci/run)
def test_a_sweep_stopped_by_ctrl_c_reruns_in_its_directory_keeping_what_it_finished(tmp_path):
    sweep, err = _stop_during_job_1(tmp_path, SWEEP)
    last = err.strip().splitlines()[-1]
    prefix = "rerun the sweep (its finished jobs are kept, an interrupted one continues): "
    assert prefix in last and f"hydra.sweep.dir={sweep}" in last, last
    kept_metrics = (sweep / "0" / "metrics.json").read_bytes()
    assert json.loads((sweep / "1" / "status.json").read_text())["status"] == "interrupted"
    assert not (sweep / "2").exists()
    res = _rerun(tmp_path, err)
    assert f"[job 0] kept: it ended ok in an earlier run of this sweep ({sweep / '0'})" in res.stdout, res.stdout
    assert "[job 1] continues from" in res.stdout and "last.ckpt" in res.stdout, res.stdout
    assert (sweep / "0" / "metrics.json").read_bytes() == kept_metrics  # not run again
    assert list(tmp_path.glob("logs/train/multiruns/*")) == [sweep]  # no second sweep directory
    for job in ("0", "1", "2"):
        assert json.loads((sweep / job / "status.json").read_text())["status"] == "ok", job
        rows = [r for r in csv.DictReader(open(sweep / job / "csv" / "metrics.csv")) if r.get("val/loss")]
        assert [int(float(r["epoch"])) for r in rows] == list(range(150)), job  # one continuous curve each
    assert "best run: job" in res.stdout + res.stderr
