"""What a training run says and records: the config tree at the start, one line per epoch when stdout is not a
terminal, the metrics table and the run directory at the end; config.yaml with the seeds and the dataset's
fingerprint, logged to the CSV and wandb loggers; run names carrying the overrides."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

SMALL = ["data.sim.n_poses=400", "data.batch_size=64", "trainer.max_epochs=2"]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, cache_dir) -> dict:
    """One `flexlearn-train` run in a fresh process, stdout a pipe (not a terminal)."""
    root = tmp_path_factory.mktemp("cli_run")
    env = dict(os.environ, FLEXLEARN_ROOT=str(root), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.train", *SMALL, f"paths.cache_dir={cache_dir}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"proc": proc, "run_dir": Path(proc.stdout.strip().splitlines()[-1])}


def test_progress_lines_when_stdout_is_not_a_terminal(cli_run):
    out = cli_run["proc"].stdout
    assert re.search(r"^training DirectionTask \([\d,]+ parameters\) for up to 2 epochs", out, re.M), out[-3000:]
    for epoch in (1, 2):
        line = re.search(
            rf"^epoch {epoch}/2  train/loss \S+  val/loss \S+  val/ang_err_median_deg \S+ .*left\)$", out, re.M
        )
        assert line, out[-3000:]
    assert "\r" not in out and "━" not in out  # no progress bar in a log


def test_metrics_table_and_run_directory_at_the_end(cli_run):
    lines = cli_run["proc"].stdout.strip().splitlines()
    metrics = json.loads((cli_run["run_dir"] / "metrics.json").read_text())
    start = lines.index(next(ln for ln in lines if ln.startswith("test metrics (")))
    table = lines[start:]
    assert table[0] == f"test metrics ({int(metrics['test/n_samples'])} samples)"
    for name, key in (
        ("median error", "test/ang_err_median_deg"),
        ("p95 error", "test/ang_err_p95_deg"),
        ("RMS error", "test/ang_err_rms_deg"),
        ("mean error", "test/ang_err_mean_deg"),
    ):
        row = next(ln for ln in table if ln.strip().startswith(name))
        assert row.strip().endswith(f"{metrics[key]:.3f}°"), row
    assert any(ln.strip().startswith("invalid fraction") and ln.strip().endswith("%") for ln in table)
    assert lines[-2:] == ["run directory:", str(cli_run["run_dir"])]


def test_config_tree_printed_and_saved(cli_run):
    out = cli_run["proc"].stdout
    tree = (cli_run["run_dir"] / "config_tree.txt").read_text()
    for group in ("data", "model", "task", "trainer", "paths"):
        assert re.search(rf"^\W*{group}$", tree, re.M), tree[:2000]
    assert "batch_size: 64" in tree and "n_poses: 400" in tree
    assert out.index("batch_size: 64") < out.index("epoch 1/2")  # printed before training starts


def test_config_yaml_records_seeds_fingerprint_and_overrides(cli_run):
    record = yaml.safe_load((cli_run["run_dir"] / "config.yaml").read_text())
    assert record["data"]["batch_size"] == 64 and record["seed"] == 7 and "hydra" not in record
    run = record["run"]
    assert run["seeds"] == {"seed": 7, "data.sim.seed": 0, "data.processing.split_seed": 0}
    dataset = Path(run["dataset"]["path"])
    assert run["dataset"]["sha256"] == hashlib.sha256(dataset.read_bytes()).hexdigest()
    metrics = json.loads((cli_run["run_dir"] / "metrics.json").read_text())
    assert str(dataset) == metrics["dataset_path"]
    assert "data.batch_size=64" in run["overrides"]
    assert run["name"].startswith("train ") and "data.batch_size=64" in run["name"]
    assert "paths.cache_dir" not in run["name"]  # locations are left out of names
    assert set(run["versions"]) >= {"flexlearn", "torch", "lightning"}


def test_csv_logger_hparams_hold_the_whole_config(cli_run):
    hparams = yaml.safe_load((cli_run["run_dir"] / "csv" / "hparams.yaml").read_text())
    assert hparams["data"]["batch_size"] == 64 and hparams["seed"] == 7
    assert hparams["run"]["dataset"]["sha256"] and hparams["run"]["seeds"]["seed"] == 7


def test_wandb_offline_run_config_and_name(compose_cfg, monkeypatch):
    import lightning as L

    from flexlearn.jobs.train import train

    monkeypatch.setenv("WANDB_SILENT", "true")
    seen: dict = {}

    class Capture(L.Callback):
        def on_train_start(self, trainer, pl_module):
            wandb_logger = next(lg for lg in trainer.loggers if type(lg).__name__ == "WandbLogger")
            seen["config"] = dict(wandb_logger.experiment.config)
            seen["name"] = wandb_logger.experiment.name

    cfg = compose_cfg("train", ["debug=default", "logger=wandb", "data.batch_size=32"])
    train(cfg, extra_callbacks=[Capture()])
    assert seen["config"]["data"]["batch_size"] == 32 and seen["config"]["seed"] == 7
    assert seen["config"]["run"]["seeds"]["seed"] == 7 and seen["config"]["run"]["dataset"]["sha256"]
    assert seen["name"] == "train debug=default data.batch_size=32"
    import time

    for _ in range(40):  # wandb's service writes the offline run file asynchronously
        stored = b"".join(p.read_bytes() for p in Path(cfg.paths.output_dir, "wandb").glob("offline-run-*/*.wandb"))
        if re.search(rb'"batch_size": ?32', stored):
            break
        time.sleep(0.25)
    assert re.search(rb'"batch_size": ?32', stored), "the offline run file holds no data.batch_size"
    assert re.search(rb'"seed": ?7', stored)


def test_run_name_carries_task_and_overrides(compose_cfg):
    from flexlearn.config import run_name

    cfg = compose_cfg("train", ["experiment=quick", "task.lr=0.001", "paths.cache_dir=/x", "logger=wandb"])
    assert run_name("train") == "train experiment=quick task.lr=0.001"
    assert len(run_name("train" * 60)) == 128
    assert OmegaConf.to_container(cfg.logger, resolve=True)["wandb"]["name"] == "train experiment=quick task.lr=0.001"


def test_epoch_lines_in_process(compose_cfg, capsys):
    from flexlearn.jobs.train import train

    train(compose_cfg("train", SMALL))
    out = capsys.readouterr().out
    assert re.search(r"^epoch 1/2  train/loss", out, re.M) and re.search(r"^epoch 2/2  ", out, re.M), out[-2000:]
