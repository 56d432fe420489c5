"""SIGINT/SIGTERM through a real console command (a subprocess): one line, the status of a signal, no traceback,
nothing half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_simulation_writes_nothing_and_says_so(tmp_path, sig):
    script = Path(sys.executable).with_name("flexlearn-simulate")
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    out = tmp_path / "raw"
    proc = subprocess.Popen(
        [str(script), "sim.n_poses=100000", f"output={out}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    end = time.monotonic() + 60
    while not (tmp_path / "logs" / "simulate").is_dir() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)  # the run directory exists once the command's handlers are in place
    time.sleep(1.0)
    assert proc.poll() is None, "the simulation ended before it could be interrupted"
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err[-2000:]
    lines = [ln for ln in err.splitlines() if "interrupted by" in ln]
    assert len(lines) == 1 and signal.Signals(sig).name in lines[0] and "rerun: flexlearn-simulate" in lines[0]
    assert "Traceback" not in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".raw.tmp-")]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_modules_load_ends_with_one_line_not_a_traceback(tmp_path, sig):
    """A signal inside an import (torch and numpy load for seconds at a command's start) ends the command at
    once with its one line and 128 + the signal: an exception raised there would leave half-loaded modules
    (numpy then refuses to load again) and a traceback."""
    marker = tmp_path / "loading"
    (tmp_path / "slow_module.py").write_text(
        f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(60)\n"
    )
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "from flexlearn.apps.interrupts import interruptions\n"
        "with interruptions('flexlearn-demo'):\n"
        "    import slow_module\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), "the module never started loading"
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"flexlearn-demo: interrupted by {signal.Signals(sig).name}")
    assert "while loading modules" in lines[0] and "rerun: flexlearn-demo" in lines[0]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_a_console_command_starts_ends_with_its_line(tmp_path, sig):
    """The console scripts put the handlers in place before the app's modules load (`flexlearn.apps.launch`):
    a signal while Hydra loads — a fraction of a second after the start — is the command's one line, not a
    traceback (SIGINT) or a silent death (SIGTERM)."""
    script = Path(sys.executable).with_name("flexlearn-process")
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), PYTHONVERBOSE="1")  # -v: each import is announced
    proc = subprocess.Popen([str(script), "input=nowhere"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    seen = []
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("import 'hydra'"):  # the app's own modules are loading now
            proc.send_signal(sig)
            break
    try:
        err = "".join(seen) + proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert any(ln.startswith("import 'hydra'") for ln in seen), "hydra was never imported"
    assert proc.returncode == 128 + sig, err[-2000:]
    assert "Traceback" not in err
    ours = [ln for ln in err.splitlines() if ln.startswith("flexlearn-process: interrupted by")]
    assert len(ours) == 1 and "while loading modules" in ours[0], err[-2000:]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_the_command_ended_keeps_its_exit_status(tmp_path, sig):
    """A signal while the interpreter shuts down, after the command has written its outputs and status (here the
    shutdown is held open by an atexit sleep): the process ends at once with the command's own status 0 and one line,
    not killed by the signal."""
    out = tmp_path / "raw"
    code = (
        "import atexit, sys, time\n"
        "atexit.register(time.sleep, 60)\n"
        f"sys.argv = ['flexlearn-simulate', 'sim.n_poses=20', 'output={out}']\n"
        "from flexlearn.apps.launch import simulate\n"
        "sys.exit(simulate())\n"
    )
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120
    status = list(tmp_path.glob("logs/simulate/runs/*/status.json"))
    while not (status and '"ok"' in status[0].read_text()) and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
        status = list(tmp_path.glob("logs/simulate/runs/*/status.json"))
    time.sleep(0.5)
    assert proc.poll() is None, "the command ended before its shutdown"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"flexlearn-simulate: {signal.Signals(sig).name} after the command had ended"), line
    assert out.is_dir() and "Traceback" not in err
