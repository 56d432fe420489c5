"""NumPy front ends of `flexlearn.lie` for the simulators (float64 arrays in, arrays out), and a context that
runs torch single-threaded while a simulator issues many small torch ops."""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import torch

from flexlearn.lie import matrix_to_quat, so3_exp, so3_log


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64))


def exp_so3(w: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of rotation vectors ``w`` (..., 3) [rad]: R = exp(ŵ).

    Args:
        w: rotation vectors (..., 3) [rad].

    Returns:
        R (..., 3, 3), float64.
    """
    return so3_exp(_tensor(w)).numpy()


def log_so3(r: np.ndarray) -> np.ndarray:
    """Rotation vectors (..., 3) [rad] of rotation matrices ``r`` (..., 3, 3).

    Args:
        r: rotation matrices (..., 3, 3).

    Returns:
        Rotation vectors (..., 3) [rad], float64.
    """
    return so3_log(_tensor(r)).numpy()


def quat_of(r: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4), (w, x, y, z) with w ≥ 0, of rotation matrices ``r`` (..., 3, 3).

    Args:
        r: rotation matrices (..., 3, 3).

    Returns:
        Quaternions (..., 4), float64.
    """
    return matrix_to_quat(_tensor(r)).numpy()


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """Run torch intra-op single-threaded, then restore the previous thread count.

    The simulators issue thousands of mid-sized element-wise torch ops (Biot–Savart chunks, SO(3) maps); on a
    busy machine, OpenMP threads that spin-wait for a core make each op slow (measured: 72 s instead of 5 s
    for the default sweep with 2 threads at load 8 on 2 cores), while one thread loses < 0.3 s when idle.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
