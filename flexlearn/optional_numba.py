"""numba's decorators when numba is installed, plain Python stand-ins when it is not.

``njit`` (numba.njit) and ``jitable`` (numba.extending.register_jitable: a plain function that compiled kernels may
call, and that TorchScript can script as well). Without numba both return the decorated function unchanged, so
the kernels run as (slow) Python; ``HAVE_NUMBA`` says which.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["HAVE_NUMBA", "jitable", "njit"]


def _plain_decorator(*args: Any, **kwargs: Any) -> Any:
    """Stand-in for a numba decorator, bare (``@njit``) or with options (``@njit(cache=True)``)."""
    if args and callable(args[0]):
        return args[0]
    return lambda f: f


jitable: Callable[..., Any] = _plain_decorator
njit: Callable[..., Any] = _plain_decorator
try:  # numba is optional: without it the same functions run as Python
    from numba import njit as _numba_njit
    from numba.extending import register_jitable as _numba_jitable

    jitable, njit = _numba_jitable, _numba_njit
    HAVE_NUMBA = True
except Exception:  # pragma: no cover - exercised only without numba
    HAVE_NUMBA = False
