"""Compiling numba kernels side by side (flexlearn.parallel_compile): the child's work reaches this process through
numba's cache, a failed or hung child costs only time, and one CPU (or FLEXLEARN_COMPILE_JOBS=1) stays serial."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from flexlearn import parallel_compile
from flexlearn.parallel_compile import available_cpus, compile_side_by_side

pytest.importorskip("numba")


def _kernels(tmp_path, monkeypatch):
    """A fresh module with two cached njit kernels (cache files in tmp_path/__pycache__), importable by name (a
    kernel loaded from numba's cache names its module)."""
    src = tmp_path / "fork_probe.py"
    src.write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef f(x):\n    return x + 1.0\n\n"
        "@njit(cache=True)\ndef g(x):\n    return 2.0 * x\n"
    )
    spec = importlib.util.spec_from_file_location("fork_probe", src)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fork_probe", mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.delenv(parallel_compile.JOBS_ENV, raising=False)
    monkeypatch.setattr(parallel_compile, "available_cpus", lambda: 2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_the_child_compiles_and_this_process_loads_its_work_from_the_cache(tmp_path, monkeypatch, two_cpus):
    from numba import float64

    mod = _kernels(tmp_path, monkeypatch)
    mode = compile_side_by_side([lambda: mod.f.compile((float64,))], [lambda: mod.g.compile((float64,))])
    assert mode == "parallel"
    assert mod.f.stats.cache_misses[(float64,)] == 1  # f compiled here
    assert mod.g.stats.cache_hits[(float64,)] == 1  # g compiled by the child, loaded here
    assert mod.g.stats.cache_misses.get((float64,), 0) == 0
    assert mod.g(3.0) == 6.0 and mod.f(1.0) == 2.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_a_failed_child_leaves_its_jobs_to_this_process(tmp_path, two_cpus):
    parent = os.getpid()
    done = []

    def job():
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        done.append("here")

    assert compile_side_by_side([], [job]) == "parallel, child failed (status 1)"
    assert done == ["here"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_a_hung_child_is_killed_after_the_timeout(two_cpus):
    import time

    parent = os.getpid()
    done = []

    def job():
        if os.getpid() != parent:
            time.sleep(60)
        done.append("here")

    t0 = time.perf_counter()
    assert compile_side_by_side([], [job], timeout_s=0.5) == "parallel, child failed (status -1)"
    assert done == ["here"] and time.perf_counter() - t0 < 30


def test_one_cpu_or_the_variable_keeps_it_serial(monkeypatch):
    order = []
    monkeypatch.setenv(parallel_compile.JOBS_ENV, "1")
    assert available_cpus() == 1
    assert compile_side_by_side([lambda: order.append("here")], [lambda: order.append("there")]) == "serial"
    assert order == ["here", "there"]
    monkeypatch.setenv(parallel_compile.JOBS_ENV, "not a number")  # ignored: the CPUs of the affinity mask
    assert available_cpus() >= 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks only on Linux")
def test_a_failure_here_stops_the_child(two_cpus, monkeypatch):
    import time

    parent = os.getpid()
    forked = []
    real_fork = os.fork

    def fork():
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)

    def slow():
        if os.getpid() != parent:
            time.sleep(60)

    def fail():
        raise ValueError("a compile error here")

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="a compile error here"):
        compile_side_by_side([fail], [slow])
    assert time.perf_counter() - t0 < 30 and len(forked) == 1
    with pytest.raises(ChildProcessError):  # the child was killed and reaped
        os.waitpid(forked[0], os.WNOHANG)


def test_a_refused_fork_compiles_serially(two_cpus, monkeypatch):
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    order = []
    assert compile_side_by_side([lambda: order.append("here")], [lambda: order.append("there")]) == "serial"
    assert order == ["here", "there"]
