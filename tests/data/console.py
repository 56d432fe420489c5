"""Shared test helpers for bad input: run an installed console command (``flexlearn-process``, ...) and check
it failed cleanly; check that a call raises a one-line `DataError` naming what is wrong."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from flexlearn.errors import DataError


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


def data_error(fn: Callable[[], object], *needles: str) -> str:
    """``fn()`` raises a one-line `DataError` whose text holds every needle; return the text."""
    with pytest.raises(DataError) as info:
        fn()
    text = str(info.value)
    assert "\n" not in text
    for n in needles:
        assert n in text, text
    return text


def call_app(module: str, root: Path, args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """Call the entry point of flexlearn.apps.<module> in-process with ``args`` in ``root``; return (exit code,
    stdout, stderr). Hydra's global state and its logging set-up (handlers on this test's captured streams) are
    undone afterwards."""
    import importlib
    import logging

    from hydra.core.global_hydra import GlobalHydra

    main = importlib.import_module(f"flexlearn.apps.{module}").main
    monkeypatch.setenv("FLEXLEARN_ROOT", str(root))
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "argv", [f"flexlearn-{module}", *args])
    GlobalHydra.instance().clear()
    capsys.readouterr()
    handlers = logging.root.handlers[:]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        GlobalHydra.instance().clear()
        for h in logging.root.handlers:
            if h not in handlers:
                h.close()
        logging.root.handlers = handlers
    out = capsys.readouterr()
    return code, out.out, out.err
