"""Per-call timing shared by the benchmark scripts: medians of wall and thread-CPU time in µs."""

from __future__ import annotations

import statistics
import time
from typing import Callable


def time_per_call(fn: Callable[[int], object], steps: int, repeats: int, warmup: int = 500) -> dict[str, float]:
    """Call ``fn(k)`` for k = 0..steps-1, ``repeats`` times after a warm-up; µs per call (median, min)."""
    for k in range(min(warmup, steps)):
        fn(k)
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.thread_time()
        for k in range(steps):
            fn(k)
        wall.append((time.perf_counter() - t0) / steps * 1e6)
        cpu.append((time.thread_time() - c0) / steps * 1e6)
    return {
        "wall_median": statistics.median(wall),
        "wall_min": min(wall),
        "cpu_median": statistics.median(cpu),
        "cpu_min": min(cpu),
    }
