"""The library type-checks: mypy over flexlearn/ (configured in pyproject.toml's [tool.mypy]) reports no error.

The check runs in the background from the end of collection (`tests/conftest.py`); this test collects it."""

from __future__ import annotations

import pytest


def test_mypy_reports_no_error(type_check) -> None:
    pytest.importorskip("mypy")
    code, out = type_check.result()
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert code == 0 and not errors, "\n".join(errors[:50]) or out
