"""Every command's run directory says how the run ended (`status.json`): ok, error with its message, interrupted
with the signal and the command that reruns it; the interruption line names that file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _statuses(root: Path, task: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / "logs" / task / "runs").glob("*/status.json"))]


def _command(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_an_error_and_an_interruption_are_recorded_in_the_run_directory(tmp_path):
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    bad = subprocess.run([_command("flexlearn-process"), f"input={tmp_path / 'absent'}"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2, bad.stderr
    (error,) = _statuses(tmp_path, "process")
    assert error["status"] == "error" and error["exit_status"] == 2 and "absent" in error["error"]
    assert error["command"][0] == "flexlearn-process" and error["started"] <= error["ended"]

    proc = subprocess.Popen([_command("flexlearn-simulate"), "sim.n_poses=100000", f"output={tmp_path / 'raw'}"],
                            cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)  # fmt: skip
    end = time.monotonic() + 120
    while time.monotonic() < end and proc.poll() is None:
        found = _statuses(tmp_path, "simulate")
        if found and found[0]["status"] == "running":
            break
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-1500:]
    (record,) = _statuses(tmp_path, "simulate")
    assert record["status"] == "interrupted" and record["signal"] == "SIGTERM", record
    assert record["resume"].startswith("rerun: flexlearn-simulate sim.n_poses=100000")
    (line,) = [ln for ln in err.splitlines() if "interrupted by SIGTERM" in ln]
    assert "status.json" in line and str(tmp_path / "logs" / "simulate") in line


def test_an_interruption_records_the_work_under_way(tmp_path):
    """SIGINT while `flexlearn-simulate` simulates: ``stopped_in`` names that work and its elapsed time, and the
    one line says it."""
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1", FLEXLEARN_PROGRESS="1")
    proc = subprocess.Popen([_command("flexlearn-simulate"), "sim.n_poses=200000", f"output={tmp_path / 'raw'}"],
                            cwd=tmp_path, env=env, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None
    seen = b""
    while b"simulating 200000 poses" not in seen and proc.poll() is None:
        seen += proc.stderr.read1(256)  # the bar (FLEXLEARN_PROGRESS=1) shows the work has begun
    time.sleep(1.2)
    proc.send_signal(signal.SIGINT)
    err = (seen + proc.stderr.read()).decode()
    assert proc.wait(timeout=120) == 130, err[-1500:]
    (record,) = _statuses(tmp_path, "simulate")
    stage = record["stopped_in"]
    assert stage["what"] == "simulating 200000 poses" and stage["elapsed_s"] >= 1.0, record
    (line,) = [ln for ln in err.replace("\r", "\n").splitlines() if "interrupted by SIGINT" in ln]
    assert "while simulating 200000 poses (" in line, line
