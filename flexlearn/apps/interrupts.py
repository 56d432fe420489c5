"""SIGINT and SIGTERM as a command's outcome: one line (where it stopped, what it kept, the command that resumes or
reruns it) and exit status 128 + the signal number, never a traceback. Standard library only, so that the console
entry points (`flexlearn.apps.launch`) put these handlers in place before any heavy module loads."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from typing import Any, Callable, Iterator

from flexlearn.errors import Interrupted

# Called with the interruption before a signal inside an import ends the process at once (no ``finally`` runs then):
# `flexlearn.apps.run_status` records the run's status here.
BEFORE_HARD_EXIT: list[Callable[[Interrupted], None]] = []


# Asked, in order, where the command is when a signal stops it; the first answer that is not None is the
# interruption's ``stage`` (`flexlearn.apps.run_status` adds the open progress bar's work here).
STAGE_PROBES: list[Callable[[], Any]] = []


def _stage_now() -> Any:
    for probe in STAGE_PROBES:
        stage = probe()
        if stage is not None:
            return stage
    return None


@contextlib.contextmanager
def interruptions(app: str) -> Iterator[None]:
    """SIGINT and SIGTERM raise `flexlearn.errors.Interrupted` in the main thread while the body runs (commits
    hold them back: `flexlearn.atomic.signals_deferred`); the command ends with one line on stderr (where it
    stopped, what it kept, the command to resume or rerun) and exit status 128 + the signal number.

    Args:
        app: the command's name, which starts the line and the rerun command.
    """
    caught = (signal.SIGINT, signal.SIGTERM)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.getsignal(s) for s in caught} if main_thread else {}

    def stop(signum: int, frame: Any) -> None:
        if _importing(frame):  # an exception inside an import leaves half-loaded modules (numpy refuses a
            exc = Interrupted(signum, "while loading modules, before any output was begun")  # second load)
            for hook in list(BEFORE_HARD_EXIT):
                hook(exc)
            _report(app, exc)
            os._exit(128 + signum)  # as safe as a kill: every output is written whole or not at all
        exc = Interrupted(signum)
        exc.stage = _stage_now()
        raise exc

    for s in previous:
        signal.signal(s, stop)
    try:
        yield
    except Interrupted as exc:
        for s in previous:  # a second Ctrl-C while the message is printed ends nothing half-way
            signal.signal(s, signal.SIG_IGN)
        _report(app, exc)
        sys.exit(exc.exit_status)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def _importing(frame: Any) -> bool:
    """Whether ``frame`` or a caller of it runs Python's import machinery (a module is being loaded)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


KEPT = "every output is written whole or not at all: the previous versions are kept"


def rerun_command(app: str, exc: Interrupted) -> str:
    """What continues the work: the interruption's own resume command, else the command line run again.

    Args:
        app: the command's name.
        exc: the interruption.

    Returns:
        ``exc.resume``, or ``rerun: <app> <the same arguments>``.
    """
    return exc.resume or "rerun: " + " ".join(shlex.quote(a) for a in [app, *sys.argv[1:]])


def _report(app: str, exc: Interrupted) -> None:
    """The one line an interrupted command ends with: the signal, where it stopped, the command that reruns it."""
    print(f"{app}: interrupted by {exc.signal_name}: {exc.detail or KEPT}; {rerun_command(app, exc)}", file=sys.stderr,
          flush=True)  # fmt: skip
