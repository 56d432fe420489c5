"""Progress shown on the terminal while long work runs: one small front door for every app and library loop.

* :func:`progress` wraps an iterable (or counts ``update`` calls) in a tqdm bar on stderr;
* :func:`ticker` shows a bar that counts elapsed seconds while one blocking call runs (a compiled kernel, a
  vectorised simulation), with an estimate of the total when one is known.

Both draw a bar when stderr is a terminal. When it is not (a log file, a pipe, a SLURM job's output) and
nothing turned them on or off, they print a plain line every ``LINE_INTERVAL_S`` seconds instead (none for work
that ends sooner; no carriage returns), so a long run never looks hung in a log. Turned off (``set_enabled(False)``
— the apps call it with their config's ``progress`` value — or the environment variable ``FLEXLEARN_PROGRESS=0``)
they cost nothing and print nothing; ``1`` forces bars on, e.g. under ``script``. tqdm is imported only when a bar
is drawn.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any, Iterable, Iterator, Optional

__all__ = ["enabled", "set_enabled", "progress", "ticker", "Bar", "LINE_INTERVAL_S", "open_stage", "stage_text"]

LINE_INTERVAL_S = 8.0
"""Seconds between the plain progress lines printed when stderr is not a terminal."""

_forced: Optional[bool] = None


def set_enabled(value: Optional[bool | str]) -> None:
    """Turn bars on (True), off (False) or back to automatic (None, ``"auto"``: on when stderr is a terminal).

    Args:
        value: True, False, None, or one of the words ``auto``, ``true``, ``false``, ``on``, ``off``.
    """
    global _forced
    if isinstance(value, str):
        value = {"auto": None, "true": True, "false": False, "on": True, "off": False}.get(value.lower(), None)
    _forced = value


def enabled(stream: Any = None) -> bool:
    """Whether a bar would be drawn now: ``set_enabled`` first, then ``FLEXLEARN_PROGRESS``, then whether
    ``stream`` is a terminal.

    Args:
        stream: the stream the bar would be drawn on (None: stderr).
    """
    if _forced is not None:
        return _forced
    env = _environment()
    if env is not None:
        return env
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


def lines_enabled() -> bool:
    """Whether plain progress lines stand in for a bar: no bar is drawn and nothing turned progress off."""
    return _forced is None and _environment() is not False and not enabled()


def _environment() -> Optional[bool]:
    """``FLEXLEARN_PROGRESS``: True (1/true/on/yes), False (0/false/off/no) or None (unset, anything else)."""
    env = os.environ.get("FLEXLEARN_PROGRESS", "").strip().lower()
    return True if env in ("1", "true", "on", "yes") else False if env in ("0", "false", "off", "no") else None


def _line(desc: str, done: float, total: Optional[float], unit: str, elapsed: float) -> str:
    """``"<desc>: 40/200 solve (20 %), 16 s"`` (no total: ``"<desc>: 40 solve, 16 s"``)."""
    count = f"{done:g}/{total:g} {unit} ({100.0 * done / total:.0f} %)" if total else f"{done:g} {unit}"
    return f"{desc or 'progress'}: {count}, {elapsed:.0f} s"


_OPEN: list["Bar"] = []  # the bars not yet closed, innermost last (`open_stage`)


def open_stage() -> Optional[dict[str, Any]]:
    """The work the innermost open bar counts, for a record of where a run stopped (``status.json``).

    Returns:
        None when no bar is open; else ``{"what": label, "elapsed_s": s}`` plus ``"done"``, ``"total"`` and
        ``"unit"`` for a counting bar, or ``"estimate_s"`` for a `ticker` of a blocking call.
    """
    if not _OPEN:
        return None
    bar = _OPEN[-1]
    stage: dict[str, Any] = {"what": bar.desc, "elapsed_s": round(time.perf_counter() - bar._t0, 1)}
    if bar.unit == "s" and not bar.count:  # a ticker: elapsed time of one blocking call
        stage["estimate_s"] = bar.total
    else:
        stage.update(done=bar.count, total=bar.total, unit=bar.unit)
    return stage


def stage_text(stage: dict[str, Any]) -> str:
    """``"while <what> (40/200 record, 16 s)"`` or ``"while <what> (3 s of ≈ 5 s)"``: `open_stage` in words.

    Args:
        stage: what `open_stage` returned.

    Returns:
        The phrase.
    """
    if "done" in stage:
        count = f"{stage['done']:g}/{stage['total']:g}" if stage["total"] else f"{stage['done']:g}"
        return f"while {stage['what']} ({count} {stage['unit']}, {stage['elapsed_s']:.0f} s)"
    of = f" of ≈ {stage['estimate_s']:.0f} s" if stage.get("estimate_s") else ""
    return f"while {stage['what']} ({stage['elapsed_s']:.0f} s{of})"


class Bar:
    """A bar that may be off: ``update(n)``, ``set_postfix_str(text)`` and ``close()`` are no-ops then, and
    ``write(text)`` prints plainly. Open bars are known to `open_stage`."""

    def __init__(self, total: Optional[float], desc: str, unit: str, on: Optional[bool] = None) -> None:
        """A bar of ``total`` units (None: open-ended) labelled ``desc``.

        Args:
            total: the count at the end, or None.
            desc: the label, e.g. ``"flexlearn-cpr: LSE solves"``.
            unit: what one update counts (``"solve"``, ``"s"``).
            on: draw (True), do not (False), or follow `enabled` (None; plain lines when not a terminal).
        """
        self._bar = None
        self.total, self.desc, self.unit = total, desc, unit
        self.count = 0.0
        self._t0 = self._last = time.perf_counter()
        self._lines = on is None and lines_enabled()
        _OPEN.append(self)
        if enabled() if on is None else on:
            from tqdm.auto import tqdm  # off the start-up path: imported only when a bar is drawn

            self._bar = tqdm(
                total=total, desc=desc, unit=unit, file=sys.stderr, mininterval=0.25, dynamic_ncols=True, leave=True
            )

    def update(self, n: float = 1) -> None:
        """Count ``n`` more units (a plain line when one is due and no bar is drawn).

        Args:
            n: units done since the last call.
        """
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._lines:
            now = time.perf_counter()
            if now - self._last >= LINE_INTERVAL_S:
                self._last = now
                print(_line(self.desc, self.count, self.total, self.unit, now - self._t0), file=sys.stderr, flush=True)

    def set_postfix_str(self, text: str) -> None:
        """Text shown after the bar (not in plain lines).

        Args:
            text: the text.
        """
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def write(self, text: str) -> None:
        """Print a line on stderr above the bar (plainly when no bar is drawn).

        Args:
            text: the line.
        """
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        """End the bar; when plain lines were printed, a last one with the final count."""
        with contextlib.suppress(ValueError):  # closed twice
            _OPEN.remove(self)
        if self._bar is not None:
            self._bar.close()
        elif self._lines and self._last > self._t0:
            now = time.perf_counter()
            print(_line(self.desc, self.count, self.total, self.unit, now - self._t0) + " (done)", file=sys.stderr)
            self._last = self._t0  # printed once

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress(
    items: Iterable[Any], total: Optional[int] = None, desc: str = "", unit: str = "it", on: Optional[bool] = None
) -> Iterator[Any]:
    """Yield ``items`` while a bar counts them (``total`` default ``len(items)`` when it has one).

    Args:
        items: what to iterate over.
        total: the number of items (None: ``len(items)`` when it has one).
        desc: the bar's label.
        unit: what one item is called.
        on: draw (True), do not (False), or follow `enabled` (None).

    Yields:
        The items, in order.
    """
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with Bar(total, desc, unit, on) as bar:
        for item in items:
            yield item
            bar.update(1)


@contextlib.contextmanager
def ticker(desc: str, estimate_s: Optional[float] = None, on: Optional[bool] = None) -> Iterator[Bar]:
    """A bar of elapsed seconds (out of ``estimate_s`` when given) while the body runs; a thread ticks it
    every 0.5 s. The bar ends at the true elapsed time. Without a bar (not a terminal) a plain line says the
    elapsed seconds every ``LINE_INTERVAL_S``.

    Args:
        desc: the label, e.g. ``"compiling the LSE kernels"``.
        estimate_s: the expected duration [s], or None.
        on: draw (True), do not (False), or follow `enabled` (None).

    Yields:
        The `Bar` (its ``write`` prints above it).
    """
    bar = Bar(round(estimate_s, 1) if estimate_s else None, desc, "s", on)
    inner = bar._bar
    if inner is None:
        with _plain_ticks(bar, estimate_s):
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


@contextlib.contextmanager
def _plain_ticks(bar: Bar, estimate_s: Optional[float]) -> Iterator[None]:
    """Plain lines of elapsed seconds (of ``estimate_s``) every ``LINE_INTERVAL_S`` while the body runs, when
    ``bar`` prints lines; nothing otherwise."""
    if not bar._lines:
        yield
        return
    stop = threading.Event()
    t0 = time.perf_counter()
    of = f" of ≈ {estimate_s:.0f} s estimated" if estimate_s else ""

    def tick() -> None:
        while not stop.wait(LINE_INTERVAL_S):
            print(f"{bar.desc}: {time.perf_counter() - t0:.0f} s{of}", file=sys.stderr, flush=True)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
