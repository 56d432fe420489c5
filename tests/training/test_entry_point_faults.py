"""Bad input through the real entry points (flexlearn-train, -pipeline, -eval): exit status 2 and one line
naming the key or file, never a traceback; unique run directories for runs started in the same second."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Imported here, not inside a test: Lightning binds its log handler to the sys.stderr of import time,
# which must not be one test's captured stream (the apps themselves import Lightning only when a job runs).
import lightning  # noqa: F401
import pytest
import torch
import yaml

import flexlearn.apps.evaluate  # noqa: F401
import flexlearn.apps.pipeline  # noqa: F401
import flexlearn.apps.train  # noqa: F401
import flexlearn.jobs.train  # noqa: F401  (its warning filters are set at import, outside a test)
from tests.data.console import call_app  # noqa: E402

SMALL = ["data.sim.n_poses=400", "data.batch_size=64", "trainer.max_epochs=1"]


def run_main(module: str, root: Path, cache_dir: Path, args: list[str], monkeypatch, capsys) -> tuple[int, str]:
    """Call the ``@hydra.main`` of flexlearn.apps.<module> in-process with ``args``; return (exit code, stderr)."""
    extra = [f"paths.cache_dir={cache_dir}"] if module != "evaluate" else []
    code, _, err = call_app(module, root, [*args, *extra], monkeypatch, capsys)
    return code, err


def assert_one_line_error(code: int, err: str, app: str, *needles: str) -> None:
    assert code == 2, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{app}: error:")]
    assert len(lines) == 1, err[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def app(tmp_path, cache_dir, monkeypatch, capsys):
    def _run(module: str, *args: str) -> tuple[int, str]:
        return run_main(module, tmp_path, cache_dir, list(args), monkeypatch, capsys)

    return _run


@pytest.mark.parametrize(
    "override,needle",
    [
        ("task.lr=-1", "task.lr"),
        ("task.lr=nan", "task.lr"),
        ("task.lr=abc", "task.lr"),
        ("task.weight_decay=-1e-3", "task.weight_decay"),
        ("seed=abc", "seed"),
        ("trainer.max_epochs=-1", "trainer.max_epochs"),
        ("+bogus_key=1", "bogus_key"),
        ("+trainer.bogus_flag=1", "bogus_flag"),
        ("+paths.bogus_dir=x", "bogus_dir"),
        ("seed=-1", "seed"),
        ("+callbacks.bogus_cb=1", "bogus_cb"),
        ("+logger.bogus_log=1", "bogus_log"),
    ],
)
def test_bad_train_option_exits_2_naming_the_key(app, override, needle):
    # max_steps bounds the old behaviour of max_epochs=-1 (train forever) should validation be missing.
    code, err = app("train", *SMALL, "+trainer.max_steps=3", override)
    assert_one_line_error(code, err, "flexlearn-train", needle)


def test_model_too_wide_to_allocate_exits_2(app):
    code, err = app("train", *SMALL, "model.hidden=[1000000000000]")
    assert_one_line_error(code, err, "flexlearn-train", "model.hidden")


def test_diverged_pipeline_exits_2_and_exports_nothing(app, tmp_path):
    code, err = app("pipeline", *SMALL, "task.lr=1e30")
    assert_one_line_error(code, err, "flexlearn-pipeline", "diverged")
    assert not list(tmp_path.glob("logs/**/direction_model.pt*"))


@pytest.fixture
def bad_checkpoints(tmp_path, trained_run) -> dict[str, Path]:
    good = Path(trained_run["metrics"]["last_ckpt"])
    ckpt = torch.load(good, weights_only=True)
    out = {"text": tmp_path / "notes.ckpt", "truncated": tmp_path / "truncated.ckpt"}
    out["text"].write_text("hello, this is not a checkpoint\n")
    out["truncated"].write_bytes(good.read_bytes()[:5000])
    for name, model in (
        ("extra", {**ckpt["hyper_parameters"]["model"], "bogus": 1}),
        ("wide", {**ckpt["hyper_parameters"]["model"], "hidden": [10**12]}),
        ("other_model", {**ckpt["hyper_parameters"]["model"], "hidden": [8]}),
    ):
        bad = dict(ckpt, hyper_parameters={**ckpt["hyper_parameters"], "model": model})
        out[name] = tmp_path / f"{name}.ckpt"
        torch.save(bad, out[name])
    return out


@pytest.mark.parametrize("which", ["text", "truncated", "extra", "wide"])
def test_eval_of_a_bad_checkpoint_exits_2_naming_the_file(app, bad_checkpoints, which):
    path = bad_checkpoints[which]
    code, err = app("evaluate", f"ckpt_path={path}")
    assert_one_line_error(code, err, "flexlearn-eval", path.name)


@pytest.mark.parametrize("which", ["text", "truncated", "other_model"])
def test_resume_from_a_bad_or_incompatible_checkpoint_exits_2(app, bad_checkpoints, trained_run, which):
    path = bad_checkpoints[which]
    sizes = ["data.sim.n_poses=600", "trainer.max_epochs=3", "data.batch_size=64"]  # as in trained_run
    code, err = app("train", *sizes, f"ckpt_path={path}")
    assert_one_line_error(code, err, "flexlearn-train", path.name)


def test_unknown_top_level_key_exits_2_through_the_console_script(tmp_path, cache_dir):
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.train", *SMALL, f"paths.cache_dir={cache_dir}", "+bogus_key=1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "bogus_key" in proc.stderr


RUN_DIR_PROBE = """
import datetime, sys
import hydra.core.utils as hydra_utils

class Frozen(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2030, 1, 2, 3, 4, 5, 600000)

hydra_utils.datetime = Frozen          # both processes start in the same microsecond
sys.argv = ["flexlearn-train", "--cfg", "all", "--resolve"]
from flexlearn.apps.train import main
main()
"""


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path):
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RUN_DIR_PROBE],
            cwd=tmp_path,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    cfgs = [yaml.safe_load(out) for out, _ in outs]
    runs = [c["hydra"]["run"]["dir"] for c in cfgs]
    sweeps = [c["hydra"]["sweep"]["dir"] for c in cfgs]
    assert all(Path(r).name.startswith("2030-01-02_03-04-05") for r in runs), runs
    # checkpoints/<task>/runs/<name> mirrors the run directory (paths.checkpoint_dir), so it differs too
    assert runs[0] != runs[1] and sweeps[0] != sweeps[1]


def test_eval_refuses_unknown_keys_and_a_dataset_without_test_split(app, trained_run, tmp_path):
    import numpy as np

    from flexlearn.data.dataset import DirectionDataset

    best = trained_run["metrics"]["best_ckpt"]
    code, err = app("evaluate", f"ckpt_path={best}", "+bogus_key=1")
    assert_one_line_error(code, err, "flexlearn-eval", "bogus_key")
    ds = DirectionDataset.load(trained_run["metrics"]["dataset_path"])
    path = ds.take(np.flatnonzero(ds.split != "test")).save(tmp_path / "no_test.parquet")
    code, err = app("evaluate", f"ckpt_path={best}", f"dataset_path={path}")
    assert_one_line_error(code, err, "flexlearn-eval", "no_test.parquet", "split 'test'")
