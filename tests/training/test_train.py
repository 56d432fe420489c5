"""Training stack: config composition, fast_dev_run, full tiny runs, resume determinism, bad config."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from flexlearn.errors import ConfigError, DataError
from flexlearn.jobs.train import train
from flexlearn.jobs.training_parts import build_task

# A tiny sweep shared by these tests (simulated once per session through the cache).
TINY = ["data.sim.n_poses=400", "trainer.max_epochs=3", "data.batch_size=64"]

CONFIG_GROUPS = {
    "data": ["sim_rig", "raw", "dataset", "modules"],
    "logger": ["csv", "wandb", "tensorboard", "none"],
    "debug": ["default", "fdr", "overfit"],
    "experiment": ["quick", "joint_modules"],
    "trainer": ["default", "gpu"],
    "callbacks": ["default", "none"],
}


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in CONFIG_GROUPS.items() for o in opts])
def test_every_config_option_composes(compose_cfg, group, option):
    overrides = [f"{group}={option}"]
    if group == "data" and option != "sim_rig":
        overrides.append("data.path=/nonexistent")
    cfg = compose_cfg("train", overrides)
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    assert cfg.task_name == "train"


def test_pipeline_and_tool_configs_compose(compose_cfg):
    assert compose_cfg("pipeline").export is True
    for name in ("eval", "export", "process"):
        cfg = compose_cfg(name, ["ckpt_path=x.ckpt"] if name in ("eval", "export") else ["input=raw"])
        OmegaConf.to_container(cfg, resolve=True)


def test_hparams_search_config_composes(compose_cfg):
    cfg = compose_cfg("train", ["hparams_search=direction_optuna"])
    assert cfg.hydra.sweeper.direction == "minimize"
    assert "task.lr" in cfg.hydra.sweeper.params


def test_fast_dev_run(compose_cfg):
    cfg = compose_cfg("train", ["debug=fdr"])
    metrics = train(cfg)
    assert math.isfinite(metrics["test/ang_err_median_deg"])
    assert json.loads(Path(cfg.paths.output_dir, "metrics.json").read_text())["dataset_path"]


def test_tiny_run_learns_and_writes_required_metrics(compose_cfg):
    cfg = compose_cfg("train", ["data.sim.n_poses=1500", "trainer.max_epochs=8", "data.batch_size=128"])
    metrics = train(cfg)
    written = json.loads(open(f"{cfg.paths.output_dir}/metrics.json").read())
    for key in ("test/ang_err_median_deg", "test/ang_err_p95_deg", "test/ang_err_rms_deg", "test/ang_err_mean_deg"):
        assert key in written
    # Untrained directions are off by tens of degrees; a few epochs on 1,200 poses get well below that.
    assert metrics["test/ang_err_median_deg"] < 5.0
    assert written["best_ckpt"].endswith(".ckpt") and written["last_ckpt"].endswith("last.ckpt")
    # the value a sweep gets is the best checkpoint's metric (the minimum over epochs), not the last epoch's
    import csv

    with open(Path(cfg.paths.output_dir, "csv", "metrics.csv"), newline="") as f:
        per_epoch = [float(r[cfg.optimized_metric]) for r in csv.DictReader(f) if r.get(cfg.optimized_metric)]
    assert len(per_epoch) == 8
    assert written["best_score"] == pytest.approx(min(per_epoch), rel=1e-6)


class StopAfterSteps(Exception):
    pass


def test_resume_from_last_checkpoint_matches_uninterrupted_run(compose_cfg):
    """Interrupt a run mid-epoch, resume from last.ckpt: same final metrics as an uninterrupted run."""
    import lightning as L

    full = train(compose_cfg("train", TINY, out="full"))

    class Interrupt(L.Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.current_epoch == 1 and trainer.global_step >= 9:
                raise StopAfterSteps

    cfg = compose_cfg("train", TINY, out="interrupted")
    with pytest.raises(StopAfterSteps):
        train(cfg, extra_callbacks=[Interrupt()])
    last = f"{cfg.paths.checkpoint_dir}/last.ckpt"
    resumed_cfg = compose_cfg("train", TINY + [f"ckpt_path={last}"], out="interrupted")
    resumed = train(resumed_cfg)
    for key in ("test/ang_err_median_deg", "test/ang_err_p95_deg", "val/ang_err_median_deg", "train/loss"):
        assert resumed[key] == pytest.approx(full[key], rel=1e-5, abs=1e-7), key


def test_unknown_config_keys_are_named(compose_cfg):
    cfg = compose_cfg("train", TINY + ["+data.sim.n_pose=10"])
    with pytest.raises(ConfigError, match="n_pose"):
        train(cfg)
    cfg = compose_cfg("train", TINY + ["+model.hiden=[8]"])
    with pytest.raises(ConfigError, match="hiden"):
        build_task(cfg)
    cfg = compose_cfg("train", TINY + ["model.activation=sigmoidal"])
    with pytest.raises(ConfigError, match="activation"):
        build_task(cfg)


def test_out_of_range_value_is_named(compose_cfg):
    cfg = compose_cfg("train", TINY + ["data.batch_size=0"])
    with pytest.raises(ConfigError, match="data.batch_size"):
        train(cfg)


def test_missing_dataset_file_is_named(compose_cfg, tmp_path):
    cfg = compose_cfg("train", ["data=dataset", f"data.path={tmp_path}/nope.parquet"])
    with pytest.raises(DataError, match="nope.parquet"):
        train(cfg)


def test_wandb_logger_runs_offline(compose_cfg, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = compose_cfg("train", ["debug=default", "logger=wandb"])  # fast_dev_run would mute loggers
    train(cfg)
    assert list(Path(cfg.paths.output_dir, "wandb").glob("offline-run-*")), "no offline wandb run written"


def test_pipeline_config_writes_figures_and_exports(compose_cfg):
    cfg = compose_cfg("pipeline", TINY)
    metrics = train(cfg)
    for key in ("error_polar_map", "error_histogram", "training_curves"):
        assert Path(metrics["figures"][key]).stat().st_size > 1000
    assert Path(metrics["exports"]["torchscript"]).exists() and Path(metrics["exports"]["program"]).exists()
    # every JSON file the pipeline wrote parses strictly (no NaN, Infinity: JSON.parse, jq accept them)
    written = sorted(Path(cfg.paths.root_dir).rglob("*.json"))
    assert any(p.name == "metrics.json" for p in written)

    def refuse(name):
        raise ValueError(name)

    for path in written:
        json.loads(path.read_text(), parse_constant=refuse)
