"""Errors that name the problem: the file, the field and the value at fault."""

from __future__ import annotations

import signal
from typing import Any


class FlexlearnError(Exception):
    """Base class of every error flexlearn raises on bad input; applications print it without a traceback."""


class DataError(FlexlearnError):
    """A recording, raw stream or dataset is malformed (missing field, wrong unit, NaN, too few samples)."""


class ConfigError(FlexlearnError):
    """A configuration key is unknown or a value is out of range."""


class CheckpointError(FlexlearnError):
    """A checkpoint or exported model is missing, corrupt or of an incompatible schema."""


class ArgumentError(FlexlearnError, ValueError):
    """A function or constructor was given a value outside its domain: a wrong shape, an unknown option name, a
    size out of range. Also a `ValueError`, as Python callers expect of a bad argument (`except ValueError` keeps
    working); a config that passes such a value reaches the user as a `ConfigError` naming the key."""


class Interrupted(BaseException):
    """SIGINT (Ctrl-C) or SIGTERM stopped a command.

    Not an `Exception`: a library's ``except Exception`` must not swallow it. Raised by the apps' signal
    handlers (`flexlearn.apps.interrupts`); a training run first finishes its epoch and writes ``last.ckpt`` (a
    second signal stops it at once). The app prints one line with ``detail`` and the command that resumes or
    reruns it, and exits with status 128 + the signal number (130 for SIGINT, 143 for SIGTERM).

    Attributes:
        signum: the signal number.
        detail: where the command stopped and what it kept (the run directory, the last epoch or item).
        resume: the command line that continues (or reruns) the work; '' when none applies.
        stage: the work under way when the signal came (`flexlearn.progress.open_stage`), or None.
    """

    def __init__(self, signum: int, detail: str = "", resume: str = "") -> None:
        super().__init__(signum, detail, resume)
        self.signum = int(signum)
        self.detail = detail
        self.resume = resume
        self.stage: Any = None

    @property
    def signal_name(self) -> str:
        """``SIGINT``, ``SIGTERM``, ... (the number when the name is unknown)."""
        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"

    @property
    def exit_status(self) -> int:
        """The shell's status of a command ended by this signal: 128 + signal number."""
        return 128 + self.signum
