"""Applications refuse runaway or meaningless settings in one line (exit 2) before any work starts."""

from __future__ import annotations

import pytest

from tests.data.console import assert_clean_failure, run_console


def test_cosserat_step_count_is_capped_before_running(tmp_path):
    assert_clean_failure(run_console("flexlearn-cosserat", tmp_path, "cosserat.dt=1e-12"), "cosserat.dt", "max_steps")


@pytest.mark.parametrize("threads", ["0", "-2", "abc"])
def test_cpr_threads_must_be_positive(tmp_path, threads):
    assert_clean_failure(run_console("flexlearn-cpr", tmp_path, f"threads={threads}"), "threads")
