"""The JSON-lines frame protocol of the Pi runner (`flexlearn-frames/1`, docs/raspberry_pi.md): one frame object
per line, decoded strictly. A line that cannot be a frame (not UTF-8, not JSON, nested too deeply, longer than
`MAX_LINE`, a number outside float64) raises `BadFrame` with a short reason key for the runner's counters.

Standard library only: `scripts/pi_runner.py` loads this file next to itself on a Pi that has only torch.
"""

from __future__ import annotations

import io
import json
import math
from typing import IO, Iterator, Optional

from .family import DataError as _FamilyBase  # flexlearn's error family inside flexlearn

NAN = float("nan")
MAX_LINE = 1 << 20  # longest accepted JSON line [bytes]


class BadFrame(_FamilyBase, ValueError):  # type: ignore[valid-type,misc]
    """A line or frame that is skipped: ``reason`` (a short key for the counters) and a message naming the problem."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _parse_float(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise BadFrame("number_out_of_range", f"number {s[:24]} is outside float64")
    return v


def _parse_int(s: str) -> int:
    if len(s.lstrip("-")) > 308:  # 10^308 and up: not safely a float64
        raise BadFrame("number_out_of_range", f"integer of {len(s)} digits is outside float64")
    return int(s)


def _parse_constant(s: str) -> float:
    if s == "NaN":
        return NAN  # read as a missing value, like null
    raise BadFrame("number_out_of_range", f"number {s} is not accepted (missing values are null)")


def decode_line(line) -> Optional[dict]:
    """One JSON line (bytes or str) → the frame object, None for a blank line; raises `BadFrame`.

    Args:
        line: the line, bytes (UTF-8) or str.

    Returns:
        The JSON object, or None for a blank line.

    Raises:
        BadFrame: not UTF-8, not JSON, nested too deeply, a number outside float64, or not an object.
    """
    if isinstance(line, (bytes, bytearray)):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadFrame("not_utf8", f"not UTF-8 (byte 0x{line[exc.start]:02x} at {exc.start})") from None
    line = line.strip()
    if not line:
        return None
    try:
        fr = json.loads(line, parse_float=_parse_float, parse_int=_parse_int, parse_constant=_parse_constant)
    except RecursionError:
        raise BadFrame("too_deep", "JSON nested too deeply") from None
    except BadFrame:
        raise
    except ValueError as exc:
        raise BadFrame("not_json", f"not JSON ({exc})") from None
    if not isinstance(fr, dict):
        raise BadFrame("not_object", f"a JSON {type(fr).__name__}, not an object")
    return fr


def _bad(exc: BadFrame) -> dict:
    return {"type": "bad", "reason": exc.reason, "message": str(exc)}


def read_lines(source: IO) -> Iterator[dict]:
    """Frame objects of the JSON-lines protocol; a bad line gives ``{"type": "bad", "reason", "message"}``.

    Reads bytes when it can (a text file's buffer), so that a non-UTF-8 byte spoils one line only; lines longer
    than `MAX_LINE` are skipped without being held in memory.

    Args:
        source: a binary or text file object.

    Yields:
        The frame objects, blank lines skipped.
    """
    if isinstance(source, io.TextIOWrapper):
        source = source.buffer
    while True:
        line = source.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE:
            nl = b"\n" if isinstance(line, bytes) else "\n"
            while not line.endswith(nl):  # drop the rest of the overlong line
                line = source.readline(MAX_LINE)
                if not line:
                    break
            yield _bad(BadFrame("too_long", f"line longer than {MAX_LINE} bytes"))
            continue
        try:
            fr = decode_line(line)
        except BadFrame as exc:
            yield _bad(exc)
            continue
        if fr is not None:
            yield fr
