"""The flexlearn-frames and flexlearn-warmup commands written in README.md and docs/ run as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = {"flexlearn-frames": "frames", "flexlearn-warmup": "warmup"}


def _documented() -> list[str]:
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for line in doc.read_text().splitlines():
            line = re.split(r"\s+#\s", line)[0].strip()
            if re.match(r"^(flexlearn-frames|flexlearn-warmup)( |$)", line):
                found.append(line)
    return sorted(set(found))


COMMANDS = _documented()


def test_the_docs_show_both_commands():
    assert {c.split()[0] for c in COMMANDS} == set(MODULES)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "flexlearn-warmup"])
def test_documented_command_runs(command, tmp_path):
    app, *args = shlex.split(command)
    env = dict(os.environ, OMP_NUM_THREADS="1", FLEXLEARN_PROGRESS="0")
    proc = subprocess.run(
        [sys.executable, "-m", f"flexlearn.apps.{MODULES[app]}", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = re.search(r"--out (\S+)", command)
    if app == "flexlearn-frames":
        assert (tmp_path / (out[1] if out else "frames.jsonl")).stat().st_size > 1000


@pytest.mark.slow  # compiles every numba kernel group when the cache is cold (minutes)
def test_full_warmup_runs(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", FLEXLEARN_PROGRESS="0")
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.warmup"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"still_cold": []' in proc.stdout
