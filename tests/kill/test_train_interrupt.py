"""Interruption and resume through the real `flexlearn-train` entry point (in-process): Ctrl-C and SIGTERM stop at
a safe point with `status: interrupted` and the resume command; the resume continues the same run directory, the
same CSV log and ends with the metrics of an uninterrupted run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

# Imported here, not inside a test: Lightning binds its log handler to the sys.stderr of import time.
import lightning  # noqa: F401
import pytest

import flexlearn.apps.train  # noqa: F401
import flexlearn.jobs.train  # noqa: F401  (its warning filters are set at import, outside a test)
from tests.data.console import call_app

BASE = ["data.sim.n_poses=400", "data.batch_size=64", "trainer.max_epochs=4", "logger=csv"]
SIGNAL_AT = "+callbacks.signal._target_=tests.kill.signals.SignalAt"


def strict(path: Path) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"{path}: not strict JSON ({name})")

    return json.loads(path.read_text(), parse_constant=refuse)


def runs(root: Path) -> list[Path]:
    return sorted((root / "logs" / "train" / "runs").glob("*"))


def val_epochs(run: Path) -> list[int]:
    with open(run / "csv" / "metrics.csv", newline="") as f:
        return [int(r["epoch"]) for r in csv.DictReader(f) if r.get("val/loss")]


@pytest.fixture
def train_app(tmp_path, cache_dir, monkeypatch, capsys):
    def _run(root: Path, *args: str) -> tuple[int, str, str]:
        root.mkdir(exist_ok=True)
        return call_app("train", root, [*args, f"paths.cache_dir={cache_dir}"], monkeypatch, capsys)

    return _run


def test_ctrl_c_stops_after_the_epoch_and_resume_continues_the_same_run(train_app, tmp_path):
    full_root, root = tmp_path / "full", tmp_path / "cut"
    code, _, _ = train_app(full_root, *BASE)
    assert code == 0
    full = strict(runs(full_root)[0] / "metrics.json")

    code, _, err = train_app(root, *BASE, SIGNAL_AT, "+callbacks.signal.epoch=1", "+callbacks.signal.signum=2")
    assert code == 130, err[-2000:]
    assert "Traceback" not in err
    (run,) = runs(root)
    lines = [ln for ln in err.splitlines() if "interrupted by SIGINT" in ln]
    assert len(lines) == 1 and f"resume with: flexlearn-train resume={run}" in lines[0], err[-2000:]
    record = strict(run / "metrics.json")
    assert record["status"] == "interrupted" and record["epochs"] == 2 and record["signal"] == "SIGINT"
    assert Path(record["last_ckpt"]).name == "last.ckpt" and val_epochs(run) == [0, 1]

    code, _, err = train_app(root, f"resume={run}")
    assert code == 0, err[-2000:]
    assert runs(root) == [run], "the resumed run continues in its own directory"
    resumed = strict(run / "metrics.json")
    assert resumed["status"] == "ok" and resumed["output_dir"] == str(run)
    assert val_epochs(run) == [0, 1, 2, 3], "one CSV log, every epoch once"
    for key in ("test/ang_err_median_deg", "val/ang_err_median_deg", "train/loss", "best_score"):
        assert resumed[key] == pytest.approx(full[key], rel=1e-5, abs=1e-7), key


def test_resume_takes_a_larger_max_epochs_and_refuses_a_smaller_one(train_app, tmp_path):
    root = tmp_path / "run"
    code, _, err = train_app(root, *BASE, SIGNAL_AT, "+callbacks.signal.epoch=2", "+callbacks.signal.signum=15")
    assert code == 143, err[-2000:]
    (run,) = runs(root)
    assert strict(run / "metrics.json")["epochs"] == 3
    code, _, err = train_app(root, f"resume={run}", "trainer.max_epochs=2")
    errors = [ln for ln in err.splitlines() if ln.startswith("flexlearn-train: error:")]
    assert code == 2 and len(errors) == 1 and "trainer.max_epochs" in errors[0] and "3 epochs" in errors[0], err
    last = Path(strict(run / "metrics.json")["last_ckpt"])
    # what a SIGKILL after the CSV row of epoch 3 and before its checkpoint leaves: a row the checkpoint lacks
    with open(run / "csv" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(run / "csv" / "metrics.csv", "a", newline="") as f:
        csv.DictWriter(f, fieldnames=list(rows[0])).writerow({**rows[-1], "epoch": "3", "step": "99"})
    code, _, err = train_app(root, f"ckpt_path={last}", "trainer.max_epochs=5")  # the README's way
    assert code == 0, err[-2000:]
    assert runs(root) == [run] and val_epochs(run) == [0, 1, 2, 3, 4]
    assert strict(run / "metrics.json")["epochs"] == 5


def test_a_second_signal_stops_at_once_and_the_run_still_resumes(train_app, tmp_path):
    root = tmp_path / "run"
    args = [*BASE, SIGNAL_AT, "+callbacks.signal.epoch=2", "+callbacks.signal.signum=15", "+callbacks.signal.times=2"]
    code, _, err = train_app(root, *args)
    assert code == 143 and "Traceback" not in err, err[-2000:]
    (run,) = runs(root)
    record = strict(run / "metrics.json")
    assert record["status"] == "interrupted" and record["epochs"] == 2, record  # stopped inside epoch 3
    # killed again inside the resumed run's first epoch (the signalling callback is part of the saved config)
    code, _, err = train_app(root, f"resume={run}")
    assert code == 143, err[-2000:]
    assert f"resume with: flexlearn-train resume={run}" in err and strict(run / "metrics.json")["epochs"] == 2
    code, _, err = train_app(root, f"resume={run}", "~callbacks.signal")
    assert code == 0, err[-2000:]
    assert runs(root) == [run] and val_epochs(run) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "arg,needle",
    [("resume={tmp}/nowhere", "not a run directory"), ("resume={tmp}", "not a run directory")],
)
def test_a_bad_resume_is_one_line(train_app, tmp_path, arg, needle):
    code, _, err = train_app(tmp_path / "r", arg.format(tmp=tmp_path))
    errors = [ln for ln in err.splitlines() if ln.startswith("flexlearn-train: error:")]
    assert code == 2 and len(errors) == 1 and needle in errors[0] and "resume" in errors[0], err[-2000:]
    assert not (tmp_path / "r" / "logs").exists(), "a refused resume makes no run directory"


def test_an_interrupted_wandb_run_is_resumed_not_restarted(train_app, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    root = tmp_path / "run"
    args = [*BASE[:-1], "logger=wandb", SIGNAL_AT, "+callbacks.signal.epoch=1", "+callbacks.signal.signum=2"]
    code, _, err = train_app(root, *args)
    assert code == 130, err[-2000:]
    (run,) = runs(root)
    first = [p.name.rsplit("-", 1)[-1] for p in (run / "wandb").glob("offline-run-*")]
    code, _, err = train_app(root, f"resume={run}", "~callbacks.signal")
    assert code == 0, err[-2000:]
    ids = {p.name.rsplit("-", 1)[-1] for p in (run / "wandb").glob("offline-run-*")}
    assert len(first) == 1 and ids == set(first), (first, ids)
    assert val_epochs(run) == [0, 1, 2, 3]
