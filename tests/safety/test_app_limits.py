"""Applications refuse runaway or meaningless settings in one line (exit 2) before any work starts."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _app(module: str, cwd, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLEXLEARN_ROOT=str(cwd), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", f"flexlearn.apps.{module}", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _one_line_exit_2(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0]


def test_cosserat_step_count_is_capped_before_running(tmp_path):
    proc = _app("cosserat", tmp_path, "cosserat.dt=1e-12")
    _one_line_exit_2(proc, "cosserat.dt", "max_steps")


@pytest.mark.parametrize("threads", ["0", "-2", "abc"])
def test_cpr_threads_must_be_positive(tmp_path, threads):
    _one_line_exit_2(_app("cpr", tmp_path, f"threads={threads}"), "threads")
