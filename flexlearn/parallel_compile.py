"""Compile numba kernels on two processes at once, for a first (cache-cold) compile.

numba compiles on one thread. When a kernel calls several large kernels that do not call one another, those can
be compiled side by side: a forked child compiles one list while this process compiles another, both write
numba's on-disk cache (``cache=True``), and the caller, compiled afterwards, loads them from it instead of
compiling them again. The child is a ``fork`` of this process, so it starts at once, with everything already
imported and compiled here; it prints nothing and ends with ``os._exit`` (no interpreter shutdown that could
wait on a lock held by another thread of this process at the fork).

Serial (the child's list runs here, after this process's own) off Linux (no ``fork`` on Windows; on macOS a forked
child may not use every system library), when fewer than two CPUs are available, or with
``FLEXLEARN_COMPILE_JOBS=1``. Whatever the child leaves undone (it failed, was killed
after ``timeout_s``) is compiled here afterwards: the child's list always runs here at the end, and loads from
the cache what the child wrote. numba writes each cache file atomically; when both processes add a specialisation
of one small shared helper to its index at the same moment, one entry can be lost, which costs only a compile of
that helper the next time a kernel that calls it is compiled.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import warnings
from typing import Callable, Sequence

__all__ = ["available_cpus", "compile_side_by_side"]

JOBS_ENV = "FLEXLEARN_COMPILE_JOBS"


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one), capped by ``FLEXLEARN_COMPILE_JOBS``
    when that is set to a positive integer."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    cap = os.environ.get(JOBS_ENV, "").strip()
    if cap.isdigit() and int(cap) > 0:
        n = min(n, int(cap))
    return n


def _run_child(jobs: Sequence[Callable[[], object]]) -> None:
    """The forked child: run ``jobs``, then leave at once with 0 (all done) or 1. Never returns."""
    code = 1
    try:
        warnings.simplefilter("ignore")
        for job in jobs:
            job()
        code = 0
    finally:
        os._exit(code)


def _wait(pid: int, timeout_s: float) -> int:
    """Wait for the child ``pid`` (kill it after ``timeout_s``); returns its exit status (-1: killed or lost)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return -1
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -1
        time.sleep(0.02)


def _fork(jobs: Sequence[Callable[[], object]]) -> int:
    """Fork a child that runs ``jobs`` (:func:`_run_child`); returns its pid, or 0 when the fork is refused (no
    process left to this user, ``ulimit -u``; no memory)."""
    with warnings.catch_warnings():  # Python ≥ 3.12 warns on fork in a process with threads (the child only compiles)
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            pid = os.fork()
        except OSError:
            return 0
    if pid == 0:
        _run_child(jobs)
    return pid


def compile_side_by_side(
    here: Sequence[Callable[[], object]], there: Sequence[Callable[[], object]], timeout_s: float = 900.0
) -> str:
    """Run the compile jobs ``there`` in a forked child while ``here`` runs in this process; then run ``there``
    here too (cache loads after a successful child). Returns ``"parallel"``, or ``"serial"`` when no child was
    used, or ``"parallel, child failed (status S)"``. Jobs must only compile (they run twice in the parallel case).

    Args:
        here: the compile jobs run in this process first.
        there: the compile jobs run in the forked child, then here.
        timeout_s: how long to wait for the child after ``here`` is done [s]; it is killed then.

    Returns:
        How the jobs ran (see above).
    """
    pid = _fork(there) if there and sys.platform.startswith("linux") and available_cpus() >= 2 else 0
    mode = "parallel" if pid else "serial"
    try:
        for job in here:
            job()
    except BaseException:
        if pid:  # no orphan left compiling after this process fails or is interrupted
            _wait(pid, 0.0)
        raise
    if pid:
        status = _wait(pid, timeout_s)
        if status != 0:
            mode = f"parallel, child failed (status {status})"
    for job in there:
        job()
    return mode
