"""A misspelled config key or group option: one line naming the closest valid names and exit status 2, through
the real entry points (no hint to add the typo with '+'); the config checks of the jobs suggest the key too."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flexlearn.config import closest, did_you_mean, from_dict
from flexlearn.errors import ConfigError
from tests.data.console import call_app


def run_main(module: str, root: Path, args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """Call the entry point of flexlearn.apps.<module> in-process with ``args``; (exit code, stdout, stderr)."""
    return call_app(module, root, args, monkeypatch, capsys)


def one_error_line(code: int, err: str, app: str) -> str:
    assert code == 2, err[-2000:]
    assert "Traceback" not in err and "+" not in err.split("did you mean")[-1], err[-2000:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{app}: error: "), err[-2000:]
    return lines[0]


@pytest.mark.parametrize(
    "module,arg,expected",
    [
        (
            "train",
            "task.lrr=1",
            "config key 'task.lrr' does not exist; did you mean 'task.lr'? "
            "(keys of 'task': _target_, lr, weight_decay, lr_min_factor, module_maps)",
        ),
        ("train", "trainer.max_epoch=3", "did you mean 'trainer.max_epochs'?"),
        ("pipeline", "data.sim.n_pose=10", "did you mean 'data.sim.n_poses'?"),
        ("train", "tsk.lr=1", "config key 'tsk.lr' does not exist; did you mean 'task.lr'? (top-level keys: data,"),
        ("train", "seeed=3", "did you mean 'seed'?"),
        ("evaluate", "ckpt_pth=x.ckpt", "did you mean 'ckpt_path'?"),
        (
            "train",
            "trainer=gpuu",
            "config group 'trainer' has no option 'gpuu'; did you mean 'trainer=gpu'? (options: ddp_cpu, default, gpu)",
        ),
        ("train", "experiment=quik", "did you mean 'experiment=quick'?"),
        ("cpr", "rod.n_elemnts=3", "config key 'rod.n_elemnts' does not exist; did you mean 'cpr.rod.n_elements'?"),
        ("cpr", "n_elements=3", "did you mean 'cpr.rod.n_elements'?"),
    ],
)
def test_misspelled_key_names_the_closest(module, arg, expected, tmp_path, monkeypatch, capsys):
    code, out, err = run_main(module, tmp_path, [arg], monkeypatch, capsys)
    line = one_error_line(code, err, {"evaluate": "flexlearn-eval"}.get(module, f"flexlearn-{module}"))
    assert expected in line, line
    assert "To append" not in err and out == ""


def test_unknown_key_without_a_close_match_lists_the_keys(tmp_path, monkeypatch, capsys):
    code, _, err = run_main("train", tmp_path, ["data.sim.zzz=1"], monkeypatch, capsys)
    assert code == 2 and "Traceback" not in err
    assert "config key 'data.sim.zzz' does not exist (keys of 'data.sim': n_poses, seed" in err
    assert "did you mean" not in err
    code, _, err = run_main("cpr", tmp_path, ["geometry.zzz=1"], monkeypatch, capsys)  # a deeper 'geometry' only
    assert code == 2 and "did you mean" not in err, err  # is no match: every part must be alike


def test_misspelled_key_through_the_console_script(tmp_path):
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.train", "task.lrr=1e-3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == (
        "flexlearn-train: error: config key 'task.lrr' does not exist; did you mean "
        "'task.lr'? (keys of 'task': _target_, lr, weight_decay, lr_min_factor, module_maps)"
    )


def test_hydra_full_error_keeps_hydras_report(tmp_path):
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), HYDRA_FULL_ERROR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.train", "task.lrr=1e-3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "ConfigCompositionException" in proc.stderr


def test_required_value_left_out_is_one_line(tmp_path, monkeypatch, capsys):
    code, out, err = run_main("evaluate", tmp_path, [], monkeypatch, capsys)
    line = one_error_line(code, err, "flexlearn-eval")
    assert line == "flexlearn-eval: error: config 'ckpt_path' is required: add ckpt_path=... to the command"
    assert "CONFIG" not in out  # refused before the config tree is printed


def test_from_dict_suggests_the_closest_key():
    @dataclasses.dataclass
    class Block:
        n_poses: int = 1
        seed: int = 0

    with pytest.raises(ConfigError) as info:
        from_dict(Block, {"n_pose": 3}, "data.sim")
    assert "unknown key(s) ['n_pose']; did you mean 'n_poses'?" in str(info.value)
    assert "known keys: ['n_poses', 'seed']" in str(info.value)
    with pytest.raises(ConfigError) as info:
        from_dict(Block, {"zzz": 3}, "data.sim")
    assert "did you mean" not in str(info.value)


def test_job_config_checks_suggest_the_closest_key(compose_cfg):
    from flexlearn.jobs.runs import check_run_config
    from flexlearn.tasks.direction import validate_task_hparams

    with pytest.raises(ConfigError, match=r"\['max_epoch'\]; did you mean 'max_epochs'\?"):
        check_run_config(compose_cfg("train", ["+trainer.max_epoch=3"]))
    with pytest.raises(ConfigError, match=r"did you mean 'figures'\?"):
        check_run_config(compose_cfg("train", ["+figure=true"]))
    with pytest.raises(ConfigError, match=r"did you mean 'weight_decay'\?"):
        validate_task_hparams({"weight_decy": 1e-5}, 3)


def test_closest_and_did_you_mean():
    assert closest("lrr", ["lr", "weight_decay"]) == ["lr"]
    assert closest("qqq", ["lr", "weight_decay"]) == []
    assert did_you_mean(["lrr"], ["lr"]) == "; did you mean 'lr'?"
    assert did_you_mean(["lrr", "sed"], ["lr", "seed"]) == "; did you mean 'lr' (for 'lrr'), 'seed' (for 'sed')?"
    assert did_you_mean(["qqq"], ["lr"]) == ""


@pytest.mark.parametrize(
    "module,arg,expected",
    [
        ("train", "task.lr=-1", "flexlearn-train: error: config 'task.lr' = -1: must be a positive finite number"),
        ("train", "data.batch_size=0", "flexlearn-train: error: config 'data.batch_size' = 0: must be >= 1"),
        ("pipeline", "task.lr=0", "flexlearn-pipeline: error: config 'task.lr' = 0: must be a positive finite number"),
    ],
)
def test_a_value_only_the_task_or_the_data_checks_is_refused_before_the_config_tree(
    module, arg, expected, tmp_path, monkeypatch, capsys
):
    code, out, err = run_main(module, tmp_path, [arg], monkeypatch, capsys)
    assert one_error_line(code, err, f"flexlearn-{module}").startswith(expected)
    assert out == ""  # the error is all that is printed: no config tree above it
