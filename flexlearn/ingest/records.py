"""Time-stamped streams as read from a recording, their fault checks, and the drop log.

A `Stream` holds integer nanosecond stamps (the recording's clock) and value columns. `clean_stream`
applies the rules of `IngestChecks`, in this order:

1. duplicates (same stamp and same bytes as an earlier message) are dropped and counted; more than
   ``max_duplicate_fraction`` of the stream is an error;
2. with header stamps and bag times both known, a change of (bag time − header stamp) larger than
   ``max_clock_jump`` between consecutive messages is a clock jump (error);
3. a stamp earlier than its predecessor by at most ``max_reorder`` is re-sorted (counted); by more, a
   backward clock jump (error);
4. in continuous streams (mag, imu) a forward step over ``max_gap`` is a forward clock jump (error); steps
   over ``gap_factor`` × the median period are gaps (counted, with the time they cover).

Stamps (and hold-window times) beyond ±``STAMP_LIMIT_NS`` are an error before any of these.

Errors are `DataError` with one line naming the file, the topic (or serial record kind), the message index
and what was expected.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

import numpy as np

from flexlearn.errors import DataError
from flexlearn.ingest.topic_map import IngestChecks
from flexlearn.ingest.units import TimeSetting, UnitSetting
from flexlearn.progress import progress as progress_bar

NS = 1_000_000_000
# Largest |stamp| [ns] a recording may hold (≈ ±146 years about its clock's zero): the difference of two stamps,
# or of a stamp and its whole-second time origin (`flexlearn.ingest.assemble`), then always fits int64.
STAMP_LIMIT_NS = 2**62 - NS


@dataclass
class Stream:
    """One stream of N samples read from a recording.

    Attributes:
        name: stream name ('mag', 'imu', 'coil', 'poses', 'mocap', 'accel', 'rate').
        source: where it came from, for messages: "<file>: topic '/x'" or "<file>: records of kind 'mag'".
        stamp_ns: (N,) int64 sample times [ns] on the recording's clock.
        values: column name -> (N,) or (N, k) array, SI units.
        receive_ns: (N,) int64 bag receive times [ns] when the stamps are header stamps, else None.
        keys: (N,) identity of each message (raw bytes, or a row's bytes) for duplicate detection, or None.
        continuous: sampled at a steady rate (gap and forward-jump checks apply).
        units: value column -> how it was read and converted (`flexlearn.ingest.units.UnitSetting`).
        time: declared rate and time unit of a continuous stream (`flexlearn.ingest.units.TimeSetting`), or None.
    """

    name: str
    source: str
    stamp_ns: np.ndarray
    values: dict[str, np.ndarray]
    receive_ns: Optional[np.ndarray] = None
    keys: Optional[list[bytes]] = None
    continuous: bool = False
    units: dict[str, UnitSetting] = field(default_factory=dict)
    time: Optional[TimeSetting] = None

    def __len__(self) -> int:
        return int(self.stamp_ns.shape[0])

    def take(self, idx: np.ndarray) -> "Stream":
        """The samples at ``idx`` (index array or mask), in that order.

        Args:
            idx: sample indices (K,) or a boolean mask (N,).

        Returns:
            A new `Stream` of those samples (same name, source, units and time setting).
        """
        keys = None if self.keys is None else [self.keys[i] for i in np.arange(len(self))[idx]]
        return Stream(
            self.name,
            self.source,
            self.stamp_ns[idx],
            {k: v[idx] for k, v in self.values.items()},
            None if self.receive_ns is None else self.receive_ns[idx],
            keys,
            self.continuous,
            self.units,
            self.time,
        )


@dataclass
class DropLog:
    """Recoverable stream faults, per stream and reason: counts (and gap time in s); optional streams the recording
    lacks (stream -> the line said) and unit conversions made (one line each)."""

    counts: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    gap_time: dict[str, float] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    conversions: list[str] = field(default_factory=list)

    def add(self, stream: str, reason: str, n: int) -> None:
        """Count ``n`` messages of ``stream`` dropped for ``reason``.

        Args:
            stream: the stream's name.
            reason: why they were dropped.
            n: how many.
        """
        self.counts[stream][reason] = self.counts[stream].get(reason, 0) + int(n)

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": dict(self.messages),
            "dropped": {s: dict(r) for s, r in self.counts.items()},
            "gap_time_s": dict(self.gap_time),
            "skipped": dict(self.skipped),
            "conversions": list(self.conversions),
        }


def _fmt_stamp(ns: int) -> str:
    return f"{ns // NS}.{ns % NS:09d} s"


def _drop_duplicates(s: Stream, checks: IngestChecks, log: DropLog) -> Stream:
    if s.keys is None or len(s) == 0:
        return s
    seen: set[tuple[int, bytes]] = set()
    keep = np.ones(len(s), dtype=bool)
    for i, (stamp, key) in enumerate(zip(s.stamp_ns.tolist(), s.keys)):
        k = (stamp, key)
        if k in seen:
            keep[i] = False
        else:
            seen.add(k)
    n_dup = int((~keep).sum())
    log.add(s.name, "duplicate", n_dup)
    if n_dup > checks.max_duplicate_fraction * len(s):
        first = int(np.flatnonzero(~keep)[0])
        raise DataError(
            f"{s.source}: {n_dup} of {len(s)} messages are duplicates (first at message {first}, "
            f"stamp {_fmt_stamp(int(s.stamp_ns[first]))}); expected at most "
            f"{checks.max_duplicate_fraction:.1%} (ingest.checks.max_duplicate_fraction)"
        )
    return s.take(keep) if n_dup else s


def _check_range(s: Stream) -> None:
    """Stamps (and hold-window times) beyond ±`STAMP_LIMIT_NS` are a `DataError` naming the message."""
    times = {"stamp": s.stamp_ns, **{k: v for k, v in s.values.items() if k.endswith("_ns")}}
    for what, ns in times.items():
        ns = np.asarray(ns, dtype=np.int64)
        bad = np.flatnonzero((ns > STAMP_LIMIT_NS) | (ns < -STAMP_LIMIT_NS))
        if bad.size:
            i = int(bad[0])
            raise DataError(
                f"{s.source}: message {i}: {what} {int(ns[i])} ns is outside the range of time stamps, "
                f"±{STAMP_LIMIT_NS} ns"
            )


def clean_stream(s: Stream, checks: IngestChecks, log: DropLog) -> Stream:
    """Apply the checks of the module docstring; return the cleaned stream sorted by stamp.

    Args:
        s: the stream.
        checks: the ingest checks.
        log: the drop log (counts what is dropped).

    Returns:
        The cleaned stream.
    """
    _check_range(s)
    log.messages[s.name] = len(s)
    s = _drop_duplicates(s, checks, log)
    if len(s) < 2:
        return s
    if s.receive_ns is not None:
        offset = s.receive_ns - s.stamp_ns
        jump = np.diff(offset)
        bad = np.flatnonzero(np.abs(jump) > checks.max_clock_jump * NS)
        if bad.size:
            i = int(bad[0]) + 1
            raise DataError(
                f"{s.source}: clock jump at message {i}: header stamp {_fmt_stamp(int(s.stamp_ns[i]))} "
                f"moved by {jump[i - 1] / -NS:+.3f} s against the bag's clock; expected drift below "
                f"{checks.max_clock_jump} s between messages (ingest.checks.max_clock_jump)"
            )
    step = np.diff(s.stamp_ns)
    back = np.flatnonzero(step < -checks.max_reorder * NS)
    if back.size:
        i = int(back[0]) + 1
        raise DataError(
            f"{s.source}: clock jumps back by {-step[i - 1] / NS:.3f} s at message {i} (stamp "
            f"{_fmt_stamp(int(s.stamp_ns[i]))}); expected non-decreasing stamps (re-sorted up to "
            f"ingest.checks.max_reorder = {checks.max_reorder} s)"
        )
    n_reordered = int((step < 0).sum())
    log.add(s.name, "reordered", n_reordered)
    if n_reordered:
        s = s.take(np.argsort(s.stamp_ns, kind="stable"))
        step = np.diff(s.stamp_ns)
    if s.continuous:
        fwd = np.flatnonzero(step > checks.max_gap * NS)
        if fwd.size:
            i = int(fwd[0]) + 1
            raise DataError(
                f"{s.source}: clock jumps forward by {step[i - 1] / NS:.3f} s at message {i} (stamp "
                f"{_fmt_stamp(int(s.stamp_ns[i]))}); expected steps below ingest.checks.max_gap = "
                f"{checks.max_gap} s"
            )
        period = float(np.median(step))
        gaps = step > checks.gap_factor * max(period, 1.0)
        log.add(s.name, "gap", int(gaps.sum()))
        log.gap_time[s.name] = float(np.sum(step[gaps] - period) / NS) if gaps.any() else 0.0
    return s


def progress(items: Iterable[Any], total: Optional[int], desc: str, enabled: Optional[bool] = None) -> Iterator[Any]:
    """Wrap ``items`` in a progress bar on stderr (:func:`flexlearn.progress.progress`).

    Off unless stderr is a terminal (or ``enabled``).

    Args:
        items: the items.
        total: their number, if known.
        desc: the bar's label.
        enabled: force the bar on or off; None: when stderr is a terminal.

    Yields:
        The items.
    """
    yield from progress_bar(items, total, desc, unit="msg", on=enabled)
