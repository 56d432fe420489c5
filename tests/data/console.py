"""Run an installed console command (``flexlearn-process``, ...) and check it failed cleanly."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def run_console(command: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Run console script ``command`` (from the running Python's environment) with Hydra ``args`` in ``cwd``."""
    script = Path(sys.executable).with_name(command)
    if not script.exists():
        found = shutil.which(command)
        assert found, f"console command {command} is not installed (pip install -e .)"
        script = Path(found)
    env = dict(os.environ, FLEXLEARN_ROOT=str(cwd), OMP_NUM_THREADS="1")
    return subprocess.run([str(script), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def assert_clean_failure(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit status 2, no traceback, one error line on stderr naming every needle; return that line."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, proc.stderr[-2000:]
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]
