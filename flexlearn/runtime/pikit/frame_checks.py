"""Typed frames of the Pi runner: a decoded frame object (`frame_lines`, `serial_frames`) → ``t`` float and
tensors of the right shapes, or a `BadFrame` naming the field. Standard library + torch; part of the kit (``pikit``).
"""

from __future__ import annotations

from typing import Iterator

import torch

from .frame_lines import NAN, BadFrame

KINDS = ("ref", "att", "mag", "spool", "target")


def _num(x, field: str) -> float:
    """A JSON number or null (NaN) as float; anything else is a `BadFrame` naming ``field``."""
    if x is None:
        return NAN
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise BadFrame(f"field_{field}", f"field '{field}': {type(x).__name__} {short(x)} is not a number")
    try:
        return float(x)
    except OverflowError:
        raise BadFrame("number_out_of_range", f"field '{field}': number outside float64") from None


def first_line(exc: BaseException) -> str:
    """The first line of an error message (the class name if it has none).

    Args:
        exc: the exception.

    Returns:
        Its first non-blank line, stripped.
    """
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def short(x) -> str:
    """``repr(x)`` cut to 40 characters (values quoted in messages).

    Args:
        x: any value.

    Returns:
        Its repr, at most 40 characters (cut ones end in "...").
    """
    s = repr(x)
    return s if len(s) <= 40 else s[:37] + "..."


def _rows(v, rows: int, width: int, field: str) -> torch.Tensor:
    """``rows`` × ``width`` numbers (a row may be null: all NaN) → float64 tensor (rows, width); else `BadFrame`."""
    if not isinstance(v, list) or len(v) != rows:
        got = f"{len(v)} rows" if isinstance(v, list) else f"{type(v).__name__} {short(v)}"
        raise BadFrame(f"field_{field}", f"field '{field}': expected {rows} rows of {width} numbers, got {got}")
    flat = []
    for r in v:
        if r is None:
            flat.extend([NAN] * width)
        elif isinstance(r, list) and len(r) == width:
            flat.extend(_num(c, field) for c in r)
        else:
            raise BadFrame(f"field_{field}", f"field '{field}': row {short(r)} is not {width} numbers or null")
    return torch.tensor(flat, dtype=torch.float64).reshape(rows, width)


def _coil(x) -> int:
    if x is None:
        return -1
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if isinstance(x, bool) or not isinstance(x, int) or not -32768 <= x <= 32767:
        raise BadFrame("field_coil", f"field 'coil': {short(x)} is not a module index (int16, −1: none)")
    return x


def check_frame(fr: dict, n: int) -> dict:
    """A decoded frame → a typed one (``t`` float, tensors of the right shapes; ``n`` segments); raises `BadFrame`
    naming the field. A NaN time is kept (the estimator flags TIME_ORDER).

    Args:
        fr: the decoded frame object.
        n: the robot's segment count (``q`` (n + 1, 4), ``m`` (n, 3)).

    Returns:
        The typed frame: ``type``, ``t`` [s] and, by type, ``q``, ``m`` [T] and ``coil``, ``pos`` or ``h``.

    Raises:
        BadFrame: an unknown type, or a field missing or of the wrong type or shape.
    """
    kind = fr.get("type")
    if kind == "bad":
        raise BadFrame(fr.get("reason", "bad"), fr.get("message", "bad frame"))
    if not isinstance(kind, str) or kind not in KINDS:
        raise BadFrame("type", f"field 'type': {short(kind)} is not one of {', '.join(KINDS)}")
    if "t" not in fr:
        raise BadFrame("field_t", "field 't' missing")
    out = {"type": kind, "t": _num(fr["t"], "t")}
    if kind in ("ref", "att"):
        out["q"] = _rows(fr.get("q"), n + 1, 4, "q")
    elif kind == "mag":
        out["m"] = _rows(fr.get("m"), n, 3, "m")
        out["coil"] = _coil(fr.get("coil", -1))
    elif kind == "spool":
        out["pos"] = _num(fr.get("pos"), "pos")
    else:
        if "h" not in fr:
            raise BadFrame("field_h", "field 'h' missing")
        out["h"] = _num(fr["h"], "h")
    return out


def typed(frames: Iterator[dict], n: int) -> Iterator[dict]:
    """`check_frame` over ``frames`` (``n`` segments); a bad one becomes ``{"type": "bad", "reason", "message"}``.

    Args:
        frames: the decoded frame objects.
        n: the robot's segment count.

    Yields:
        The typed frames, bad ones included (with ``t`` NaN).
    """
    for fr in frames:
        try:
            yield check_frame(fr, n)
        except BadFrame as exc:
            yield {"type": "bad", "t": NAN, "reason": exc.reason, "message": str(exc)}
