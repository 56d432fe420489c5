"""One style, enforced: the formatter and the linter configured in pyproject.toml ([tool.ruff]) are clean."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ["flexlearn", "hydra_plugins", "tests", "scripts"]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="ruff is not installed (pip install -e '.[dev]' brings it)"
)


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, *TREES], cwd=ROOT, capture_output=True, text=True)


def test_the_code_is_formatted():
    result = _ruff("format", "--check")
    assert result.returncode == 0, "run `ruff format`:\n" + result.stdout[-4000:] + result.stderr[-2000:]


def test_the_linter_is_clean():
    result = _ruff("check", "--output-format", "concise")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
