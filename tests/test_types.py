"""The library type-checks: mypy over flexlearn/ (configured in pyproject.toml's [tool.mypy]) reports no error."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_reports_no_error(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    # A private cache directory: a clean run every time, no clash with a developer's own cache.
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy_cache")],
                            cwd=ROOT, capture_output=True, text=True)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 0 and not errors, "\n".join(errors[:50]) or result.stdout + result.stderr
