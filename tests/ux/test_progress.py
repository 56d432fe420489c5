"""Progress bars (flexlearn.progress): drawn on a terminal; in a pipe or log, plain lines for work that lasts
(none for short work); nothing when turned off; identification runs print one line per iteration."""

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


def test_quiet_when_stderr_is_not_a_terminal_and_the_work_is_short(capsys):
    assert list(P.progress(range(5), desc="work")) == [0, 1, 2, 3, 4]
    with P.ticker("blocking call", 3.0) as bar:
        bar.update(1)
    assert capsys.readouterr().err == ""  # pytest's captured stderr is no terminal


def test_long_work_prints_plain_lines_when_stderr_is_not_a_terminal(capsys, monkeypatch):
    """A log is never silent for longer than the line interval: counts with percent, elapsed seconds, a last line;
    no carriage return (no bar drawn into the file)."""
    monkeypatch.setattr(P, "LINE_INTERVAL_S", 0.05)
    for _ in P.progress(range(4), desc="solving", unit="solve"):
        time.sleep(0.06)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) >= 4 and all(line.startswith("solving: ") for line in lines), err
    assert re.search(r"solving: \d/4 solve \(\d+ %\), \d+ s", lines[0]), lines[0]
    assert lines[-1].startswith("solving: 4/4 solve (100 %)") and lines[-1].endswith("(done)"), lines[-1]
    with P.ticker("compiling", estimate_s=30.0):
        time.sleep(0.2)
    err = capsys.readouterr().err
    assert err.startswith("compiling: ") and "of ≈ 30 s estimated" in err, err
    P.set_enabled(False)  # the app's `progress=false`: nothing at all
    for _ in P.progress(range(3), desc="solving"):
        time.sleep(0.06)
    assert capsys.readouterr().err == ""


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
