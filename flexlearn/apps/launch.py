"""The console entry points: each command's SIGINT and SIGTERM handlers (`flexlearn.apps.interrupts`) are in place
before its modules load, so a Ctrl-C or a scheduler's SIGTERM in the first fraction of a second (Hydra, torch and
numpy take that long to import) ends in the command's one line and exit status 130 or 143, not a traceback or a
silent death. Only the interpreter's own start-up (about 20 ms) comes before them. After the command has ended, a
signal while the interpreter shuts down ends it at once with the command's own exit status (`exit_on_late_signals`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from typing import Any

from flexlearn.apps.interrupts import interruptions


def launch(module: str, app: str) -> Any:
    """Import ``flexlearn.apps.<module>`` and run its ``main`` with the interruption handlers of ``app`` around both.

    Args:
        module: the app's module in `flexlearn.apps`.
        app: the command's name (``flexlearn-<...>``), which starts the interruption line.

    Returns:
        What the app's ``main`` returns (the process exit status of the console script).
    """
    status: Any = 1
    try:
        with interruptions(app):
            result = importlib.import_module(f"flexlearn.apps.{module}").main()
        status = result if isinstance(result, int) and not isinstance(result, bool) else 0
        return result
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        raise
    finally:
        exit_on_late_signals(app, status)


def exit_on_late_signals(app: str, status: int) -> None:
    """After the command has ended: a SIGINT or SIGTERM while the interpreter shuts down (torch and numpy take a
    moment) ends the process at once with the command's own exit status and one line, instead of killing it with
    the signal's status although its outputs are complete and its ``status.json`` written.

    Args:
        app: the command's name, which starts the line.
        status: the command's exit status.
    """

    def ended(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            print(f"{app}: {name} after the command had ended: its outputs are complete (exit status {status})",
                  file=sys.stderr, flush=True)  # fmt: skip
        os._exit(status)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, ended)


def app_module(entry: str) -> str:
    """The module an entry point runs: ``flexlearn.apps.launch:train`` → ``flexlearn.apps.train``.

    Args:
        entry: the entry point's value (``module:function``).

    Returns:
        The app's module (the entry's own module when it is not a launcher).
    """
    module, _, function = entry.partition(":")
    return f"flexlearn.apps.{function}" if module == __name__ else module


def cli() -> Any:  # noqa: D103 - one entry point per command, named in pyproject.toml [project.scripts]
    return launch("cli", "flexlearn")


def simulate() -> Any:  # noqa: D103
    return launch("simulate", "flexlearn-simulate")


def process() -> Any:  # noqa: D103
    return launch("process", "flexlearn-process")


def train() -> Any:  # noqa: D103
    return launch("train", "flexlearn-train")


def evaluate() -> Any:  # noqa: D103
    return launch("evaluate", "flexlearn-eval")


def calibrate() -> Any:  # noqa: D103
    return launch("calibrate", "flexlearn-calibrate")


def export() -> Any:  # noqa: D103
    return launch("export", "flexlearn-export")


def pipeline() -> Any:  # noqa: D103
    return launch("pipeline", "flexlearn-pipeline")


def aggregate() -> Any:  # noqa: D103
    return launch("aggregate", "flexlearn-aggregate")


def ingest() -> Any:  # noqa: D103
    return launch("ingest", "flexlearn-ingest")


def plan() -> Any:  # noqa: D103
    return launch("plan", "flexlearn-plan")


def report() -> Any:  # noqa: D103
    return launch("report", "flexlearn-report")


def cosserat() -> Any:  # noqa: D103
    return launch("cosserat", "flexlearn-cosserat")


def cpr() -> Any:  # noqa: D103
    return launch("cpr", "flexlearn-cpr")


def warmup() -> Any:  # noqa: D103
    return launch("warmup", "flexlearn-warmup")


def frames() -> Any:  # noqa: D103
    return launch("frames", "flexlearn-frames")


def mcap() -> Any:  # noqa: D103
    return launch("mcap", "flexlearn-mcap")


def compare() -> Any:  # noqa: D103
    return launch("compare", "flexlearn-compare")
