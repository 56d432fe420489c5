"""Binary serial frame protocol ``flexlearn-binframes/1`` (master → Pi), encoder and resynchronising parser.

Standard library only (struct, zlib), so that the Pi runner can use this file next to it without flexlearn.
All fields little-endian. One frame:

    offset size  field
    0      2     sync     0xA5 0x5A
    2      1     version  1
    3      1     type     1 ref, 2 att, 3 mag, 4 spool, 5 target
    4      2     length   payload bytes (uint16)
    6      2     seq      frame counter (uint16, wraps; a gap counts as dropped frames, see below)
    8      L     payload  (below)
    8+L    4     crc      CRC-32 (IEEE 802.3, zlib.crc32) of bytes 2 .. 8+L−1 (header after the sync + payload)

Payloads (t: float64 seconds on the master's monotonic clock; SI units; NaN marks a missing value):
    ref, att  t, then (N+1) × 4 float32 quaternions (w, x, y, z), base module first   L = 8 + 16 (N+1)
    mag       t, coil (int16: firing module, −1 none), pad (int16 = 0), N × 3 float32 readings [T]   L = 12 + 12 N
    spool     t, pos (float64, spool take-up [m of tendon])                            L = 16
    target    t, h (float64, tip-height target [m])                                   L = 16

Parsing (`FrameParser.feed`): bytes are buffered; the parser looks for the sync word, checks version, type and
length (consistent with the type and ≤ ``max_payload``), waits for the whole frame, and checks the CRC. A bad header
or CRC drops one byte and searches again (a corrupted length cannot swallow good frames); every skipped byte and
rejected candidate is counted in `FrameParser.stats`. Decoded frames are the dicts of the JSON-lines protocol
``flexlearn-frames/1`` (``{"type": "att", "t": …, "q": [[w, x, y, z], …]}`` etc.).

Sequence numbers (mod 2¹⁶) are compared with the newest seen, s_max. A step d = seq − s_max in 1 .. 2¹⁵ − 1 counts
d − 1 ``dropped`` frames. A repeated or older seq within ``REORDER_WINDOW`` is not a gap: one seen before is a
``duplicates`` frame, one not seen yet arrived late (``reordered``; it had been counted as dropped, which is undone).
An older seq beyond the window is a restarted sender (``seq_resets``; the count starts again from it). Every
decoded frame is returned either way (the estimator orders frames by time).
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import Dict, List, Optional, Sequence

SYNC = b"\xa5\x5a"
VERSION = 1
PROTOCOL = "flexlearn-binframes/1"
TYPES = {"ref": 1, "att": 2, "mag": 3, "spool": 4, "target": 5}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
_HEADER = struct.Struct("<2sBBHH")  # sync, version, type, length, seq
HEADER_SIZE = _HEADER.size  # 8
CRC_SIZE = 4
MAX_PAYLOAD = 4096
REORDER_WINDOW = 64  # older sequence numbers within this many are duplicates/reorders


class FrameEncodeError(ValueError):
    """A frame that `encode_frame` cannot write (unknown kind, missing or misshapen rows, too long).

    A plain ValueError: this module stays standard-library only (tests/runtime/test_serial_frames.py), and its
    callers are the frame writers, not user input at an application boundary.
    """


def _f32_rows(rows: Sequence[Sequence[Optional[float]]], width: int) -> List[float]:
    out: List[float] = []
    for r in rows:
        if len(r) != width:
            raise FrameEncodeError(f"row {list(r)!r}: expected {width} values")
        out.extend(float("nan") if c is None else float(c) for c in r)
    return out


def encode_frame(
    kind: str,
    t: float,
    seq: int = 0,
    q: Optional[Sequence[Sequence[float]]] = None,
    m: Optional[Sequence[Sequence[float]]] = None,
    coil: int = -1,
    value: float = 0.0,
) -> bytes:
    """One frame: ``kind`` in TYPES; ``q`` (N+1, 4) for ref/att, ``m`` (N, 3) [T] + ``coil`` for mag, ``value`` for
    spool (pos [m]) and target (h [m]).

    Args:
        kind: the frame type ("ref", "att", "mag", "spool" or "target").
        t: time on the master's monotonic clock [s].
        seq: the frame counter (taken mod 2¹⁶).
        q: quaternions (N+1, 4) (w, x, y, z) for ref/att (None in a row: NaN).
        m: magnetometer readings (N, 3) [T] for mag (None in a row: NaN).
        coil: the firing module for mag (−1: none).
        value: spool take-up [m of tendon] for spool, tip-height target [m] for target.

    Returns:
        The frame's bytes (header, payload, CRC-32).

    Raises:
        FrameEncodeError: an unknown kind, missing or misshapen rows, or a payload over `MAX_PAYLOAD`.
    """
    if kind not in TYPES:
        raise FrameEncodeError(f"kind = {kind!r}: expected one of {sorted(TYPES)}")
    if kind in ("ref", "att"):
        if q is None:
            raise FrameEncodeError(f"{kind} frame needs q")
        vals = _f32_rows(q, 4)
        payload = struct.pack(f"<d{len(vals)}f", t, *vals)
    elif kind == "mag":
        if m is None:
            raise FrameEncodeError("mag frame needs m")
        vals = _f32_rows(m, 3)
        payload = struct.pack(f"<dhh{len(vals)}f", t, int(coil), 0, *vals)
    else:
        payload = struct.pack("<dd", t, float(value))
    if len(payload) > MAX_PAYLOAD:
        raise FrameEncodeError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    head = _HEADER.pack(SYNC, VERSION, TYPES[kind], len(payload), seq & 0xFFFF)
    crc = zlib.crc32(head[2:] + payload) & 0xFFFFFFFF
    return head + payload + struct.pack("<I", crc)


def _length_ok(kind: int, length: int) -> bool:
    if kind in (1, 2):
        return length >= 8 + 16 and (length - 8) % 16 == 0
    if kind == 3:
        return length >= 12 + 12 and (length - 12) % 12 == 0
    return length == 16


def _decode_payload(kind: int, p: bytes) -> Dict:
    t = struct.unpack_from("<d", p, 0)[0]
    if kind in (1, 2):
        vals = struct.unpack_from(f"<{(len(p) - 8) // 4}f", p, 8)
        return {"type": TYPE_NAMES[kind], "t": t, "q": [list(vals[k : k + 4]) for k in range(0, len(vals), 4)]}
    if kind == 3:
        coil = struct.unpack_from("<h", p, 8)[0]
        vals = struct.unpack_from(f"<{(len(p) - 12) // 4}f", p, 12)
        return {"type": "mag", "t": t, "coil": coil, "m": [list(vals[k : k + 3]) for k in range(0, len(vals), 3)]}
    v = struct.unpack_from("<d", p, 8)[0]
    return {"type": TYPE_NAMES[kind], "t": t, ("pos" if kind == 4 else "h"): v}


class FrameParser:
    """Incremental parser: ``feed(data)`` → list of decoded frames; counters in ``stats``.

    stats: ``frames`` decoded, ``bad_crc`` candidates failing the CRC, ``bad_header`` candidates with an unknown
    version/type or inconsistent length, ``skipped_bytes`` discarded while resynchronising, ``dropped`` frames missing
    by the sequence counter, ``duplicates`` / ``reordered`` / ``seq_resets`` (see the module docstring), ``bad_time``
    frames with a non-finite time (still returned: the estimator flags them).
    """

    def __init__(self, max_payload: int = MAX_PAYLOAD) -> None:
        self.buf = bytearray()
        self.max_payload = int(max_payload)
        self.last_seq: Optional[int] = None  # newest sequence number seen
        self.seen = 0  # bit k: seq last_seq − k seen (k < REORDER_WINDOW)
        self.span = 0  # seqs counted so far, up to REORDER_WINDOW (first seen .. newest)
        self.stats = {
            "frames": 0,
            "bad_crc": 0,
            "bad_header": 0,
            "skipped_bytes": 0,
            "dropped": 0,
            "duplicates": 0,
            "reordered": 0,
            "seq_resets": 0,
            "bad_time": 0,
        }

    def _sequence(self, seq: int) -> None:
        """Update the dropped / duplicate / reordered counters for sequence number ``seq`` (module docstring)."""
        if self.last_seq is None:
            self.last_seq, self.seen, self.span = seq, 1, 1
            return
        d = (seq - self.last_seq) & 0xFFFF
        back = (self.last_seq - seq) & 0xFFFF
        if 0 < d < 0x8000:  # newer: d − 1 frames missing
            self.stats["dropped"] += d - 1
            self.seen = ((self.seen << d) | 1) & ((1 << REORDER_WINDOW) - 1)
            self.span = min(self.span + d, REORDER_WINDOW)
            self.last_seq = seq
        elif back < REORDER_WINDOW:  # repeated or late (back = 0: the newest again)
            if (self.seen >> back) & 1:
                self.stats["duplicates"] += 1
                return
            self.seen |= 1 << back
            self.stats["reordered"] += 1
            if back < self.span:  # inside the counted range: it was counted as dropped
                self.stats["dropped"] -= 1
        else:  # far older: the sender restarted its counter
            self.stats["seq_resets"] += 1
            self.last_seq, self.seen, self.span = seq, 1, 1

    def _skip(self, n: int) -> None:
        del self.buf[:n]
        self.stats["skipped_bytes"] += n

    def feed(self, data: bytes) -> List[Dict]:
        """Buffer ``data`` and decode every complete frame in the buffer (module docstring); counters in ``stats``.

        Args:
            data: the bytes received.

        Returns:
            The decoded frames (JSON-lines protocol dicts), in arrival order.
        """
        self.buf.extend(data)
        out: List[Dict] = []
        while True:
            i = self.buf.find(SYNC)
            if i < 0:  # keep a trailing 0xA5 (maybe half a sync word)
                keep = 1 if self.buf[-1:] == SYNC[:1] else 0
                self._skip(len(self.buf) - keep)
                return out
            if i:
                self._skip(i)
            if len(self.buf) < HEADER_SIZE:
                return out
            _, ver, kind, length, seq = _HEADER.unpack_from(self.buf, 0)
            if ver != VERSION or kind not in TYPE_NAMES or length > self.max_payload or not _length_ok(kind, length):
                self.stats["bad_header"] += 1
                self._skip(1)
                continue
            end = HEADER_SIZE + length
            if len(self.buf) < end + CRC_SIZE:
                return out
            crc = struct.unpack_from("<I", self.buf, end)[0]
            if zlib.crc32(bytes(self.buf[2:end])) & 0xFFFFFFFF != crc:
                self.stats["bad_crc"] += 1
                self._skip(1)
                continue
            frame = _decode_payload(kind, bytes(self.buf[HEADER_SIZE:end]))
            del self.buf[: end + CRC_SIZE]
            self._sequence(seq)
            if not math.isfinite(frame["t"]):
                self.stats["bad_time"] += 1
            self.stats["frames"] += 1
            out.append(frame)
