"""Start-up of the command-line apps: ``--help`` and config errors import neither Lightning, torch, matplotlib nor
numba (they take seconds to import), checked on ``sys.modules`` in a fresh process rather than by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

APPS = [
    "simulate",
    "process",
    "train",
    "evaluate",
    "export",
    "pipeline",
    "aggregate",
    "ingest",
    "plan",
    "report",
    "cosserat",
    "cpr",
    "warmup",
    "frames",
]
HEAVY = ("torch", "lightning", "matplotlib", "numba", "wandb", "scipy")

PROBE = """
import json, runpy, sys
module, args = sys.argv[1], sys.argv[2:]
sys.argv = [module, *args]
code = 0
try:
    runpy.run_module(module, run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
""".format(heavy=HEAVY)


def probe(module: str, tmp_path: Path, *args: str) -> tuple[dict, str]:
    """Run flexlearn.apps.<module> with ``args`` in a fresh interpreter; (exit code and heavy modules, stderr)."""
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, f"flexlearn.apps.{module}", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    last = proc.stderr.strip().splitlines()[-1]
    return json.loads(last), proc.stderr


@pytest.mark.parametrize("app", APPS)
def test_help_imports_no_heavy_module(app, tmp_path):
    result, err = probe(app, tmp_path, "--help")
    assert result["code"] == 0, err[-2000:]
    assert result["heavy"] == [], f"flexlearn-{app} --help imported {result['heavy']}"


@pytest.mark.parametrize(
    "app,args,needle",
    [
        ("train", ["task.lrr=1"], "did you mean 'task.lr'?"),
        ("train", ["+bogus_key=1"], "bogus_key"),  # refused by the job's own config check, before Lightning
        ("pipeline", ["seed=-1"], "seed"),
        ("evaluate", [], "'ckpt_path' is required"),
    ],
)
def test_config_errors_import_no_heavy_module(app, args, needle, tmp_path):
    result, err = probe(app, tmp_path, *args)
    assert result["code"] == 2, err[-2000:]
    assert needle in err and "Traceback" not in err, err[-2000:]
    assert result["heavy"] == [], f"flexlearn-{app} {' '.join(args)} imported {result['heavy']} before failing"


def test_trainer_keys_are_lightnings_own(monkeypatch):
    """The trainer keys read from Lightning's source (no import) are the arguments of lightning.Trainer."""
    import inspect

    import lightning as L

    from flexlearn.jobs.runs import trainer_keys

    expected = set(inspect.signature(L.Trainer.__init__).parameters) - {"self", "callbacks", "logger"}
    assert set(trainer_keys()) == expected
    assert "max_epochs" in trainer_keys() and "enable_progress_bar" in trainer_keys()
