"""Progress shown on the terminal while long work runs: one small front door for every app and library loop.

* :func:`progress` wraps an iterable (or counts ``update`` calls) in a tqdm bar on stderr;
* :func:`ticker` shows a bar that counts elapsed seconds while one blocking call runs (a compiled kernel, a
  vectorised simulation), with an estimate of the total when one is known.

Both draw only when stderr is a terminal, and never when turned off: ``set_enabled(False)`` (the apps call it
with their config's ``progress`` value) or the environment variable ``FLEXLEARN_PROGRESS=0`` (``1`` forces
bars on, e.g. under ``script``). Off, they cost nothing and print nothing, so logs and pipes stay clean. tqdm
is imported only when a bar is drawn.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any, Iterable, Iterator, Optional

__all__ = ["enabled", "set_enabled", "progress", "ticker", "Bar"]

_forced: Optional[bool] = None


def set_enabled(value: Optional[bool | str]) -> None:
    """Turn bars on (True), off (False) or back to automatic (None, ``"auto"``: on when stderr is a terminal)."""
    global _forced
    if isinstance(value, str):
        value = {"auto": None, "true": True, "false": False, "on": True, "off": False}.get(value.lower(), None)
    _forced = value


def enabled(stream: Any = None) -> bool:
    """Whether a bar would be drawn now: ``set_enabled`` first, then ``FLEXLEARN_PROGRESS``, then whether
    ``stream`` (default stderr) is a terminal."""
    if _forced is not None:
        return _forced
    env = os.environ.get("FLEXLEARN_PROGRESS", "").strip().lower()
    if env in ("0", "false", "off", "no"):
        return False
    if env in ("1", "true", "on", "yes"):
        return True
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


class Bar:
    """A bar that may be off: ``update(n)``, ``set_postfix_str(text)`` and ``close()`` are no-ops then, and
    ``write(text)`` prints plainly."""

    def __init__(self, total: Optional[float], desc: str, unit: str, on: Optional[bool] = None) -> None:
        self._bar = None
        if enabled() if on is None else on:
            from tqdm.auto import tqdm  # off the start-up path: imported only when a bar is drawn

            self._bar = tqdm(
                total=total, desc=desc, unit=unit, file=sys.stderr, mininterval=0.25, dynamic_ncols=True, leave=True
            )

    def update(self, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def set_postfix_str(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def write(self, text: str) -> None:
        """Print a line on stderr above the bar (plainly when no bar is drawn)."""
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress(
    items: Iterable[Any], total: Optional[int] = None, desc: str = "", unit: str = "it", on: Optional[bool] = None
) -> Iterator[Any]:
    """Yield ``items`` while a bar counts them (``total`` default ``len(items)`` when it has one)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Bar(total, desc, unit, on) as bar:
        for item in items:
            yield item
            bar.update(1)


@contextlib.contextmanager
def ticker(desc: str, estimate_s: Optional[float] = None, on: Optional[bool] = None) -> Iterator[Bar]:
    """A bar of elapsed seconds (out of ``estimate_s`` when given) while the body runs; a thread ticks it
    every 0.5 s. The bar ends at the true elapsed time."""
    bar = Bar(round(estimate_s, 1) if estimate_s else None, desc, "s", on)
    inner = bar._bar
    if inner is None:
        yield bar
        return
    inner.bar_format = (
        "{desc}: {n:.0f}/{total:.0f} s estimated |{bar}| {postfix}" if estimate_s else "{desc}: {n:.0f} s {postfix}"
    )
    stop = threading.Event()
    t0 = time.perf_counter()

    def tick() -> None:
        while not stop.wait(0.5):
            elapsed = time.perf_counter() - t0
            if inner.total:
                elapsed = min(elapsed, inner.total)  # an overrun shows as a full bar, not an overflow
            inner.n = elapsed
            inner.refresh()

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield bar
    finally:
        stop.set()
        thread.join()
        inner.n = time.perf_counter() - t0
        if inner.total:
            inner.total = max(inner.total, inner.n)
        bar.close()
