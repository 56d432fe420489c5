"""The console entry points: each command's SIGINT and SIGTERM handlers (`flexlearn.apps.interrupts`) are in place
before its modules load, so a Ctrl-C or a scheduler's SIGTERM in the first fraction of a second (Hydra, torch and
numpy take that long to import) ends in the command's one line and exit status 130 or 143, not a traceback or a
silent death. Only the interpreter's own start-up (about 20 ms) comes before them."""

from __future__ import annotations

import importlib
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
    with interruptions(app):
        return importlib.import_module(f"flexlearn.apps.{module}").main()


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
