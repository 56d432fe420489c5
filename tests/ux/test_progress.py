"""Progress bars (flexlearn.progress): drawn on a terminal only, off in pipes and when turned off; identification
runs print one line per iteration."""

from __future__ import annotations

import re
import time

import pytest

from flexlearn import progress as P


@pytest.fixture(autouse=True)
def automatic(monkeypatch):
    monkeypatch.delenv("FLEXLEARN_PROGRESS", raising=False)
    P.set_enabled(None)
    yield
    P.set_enabled(None)


def test_quiet_when_stderr_is_not_a_terminal(capsys):
    assert list(P.progress(range(5), desc="work")) == [0, 1, 2, 3, 4]
    with P.ticker("blocking call", 3.0) as bar:
        bar.update(1)
    assert capsys.readouterr().err == ""  # pytest's captured stderr is no terminal


def test_forced_on_by_the_environment_and_off_by_the_config(capsys, monkeypatch):
    monkeypatch.setenv("FLEXLEARN_PROGRESS", "1")
    assert list(P.progress([1, 2, 3], desc="counting")) == [1, 2, 3]
    err = capsys.readouterr().err
    assert "counting" in err and "3/3" in err
    P.set_enabled("false")  # the app's `progress=false` wins over the environment
    list(P.progress([1, 2, 3], desc="counting"))
    assert capsys.readouterr().err == ""


def test_ticker_counts_seconds_while_a_call_blocks(capsys, monkeypatch):
    monkeypatch.setenv("FLEXLEARN_PROGRESS", "1")
    with P.ticker("compiling", estimate_s=10.0) as bar:
        time.sleep(0.7)
        bar.write("a line above the bar")
    err = capsys.readouterr().err
    assert "compiling" in err and "s estimated" in err and "a line above the bar" in err


def test_bar_write_prints_plainly_when_off(capsys):
    with P.ticker("x") as bar:
        bar.write("announce")
    assert capsys.readouterr().err == "announce\n"


@pytest.mark.slow  # imports Lightning (5-10 s on 2 cores)
def test_identification_prints_a_line_per_iteration(compose_cfg, capsys):
    """Experiment configs set callbacks: none; the identification adds its own iteration lines."""
    from flexlearn.identify.run import identify

    cfg = compose_cfg(
        "train", ["experiment=identify_modal_sim", "trainer.max_epochs=3", "logger=none", "task.problem.duration=1.0"]
    )
    identify(cfg)
    out = capsys.readouterr().out
    assert re.search(r"^epoch 1/3  id/cost \S+  id/lambda", out, re.M), out[-2000:]
    assert re.search(r"^epoch 3/3  ", out, re.M) or "epoch 2/3" in out, out[-2000:]
