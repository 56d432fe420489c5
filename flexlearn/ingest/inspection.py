"""`flexlearn-ingest ... inspect=true`: what a recording holds and what the map makes of it, without writing anything.

Like ``ros2 bag info``, for every topic (rosbag2) or record kind (serial dump): its type or columns, message
count, sample rate (from the median spacing of the time stamps), the stream the map makes of it, the unit check
(median magnitude against the plausible range, `flexlearn.ingest.units`, with the guessed unit where it fails), and
what the map names but the recording lacks (required: the ingestion would fail; optional: skipped).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np

from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.errors import ConfigError, DataError
from flexlearn.ingest.recording import detect_format, read_streams, read_tumble_recording
from flexlearn.ingest.records import Stream
from flexlearn.ingest.rosbag import bag_root, open_bag
from flexlearn.ingest.topic_map import IngestConfig, is_required
from flexlearn.ingest.units import magnitude_problem, median_period, spacing_problem


def _stream_summary(s: Stream, processing: ProcessingConfig) -> dict[str, Any]:
    """Count, rate [Hz] and unit checks of one read stream."""
    bounds = {"T": processing.field_median_bounds, "m/s^2": processing.accel_median_bounds}
    period = median_period(s.stamp_ns * 1e-9)
    units = {}
    for col, setting in s.units.items():
        v = np.asarray(s.values[col], dtype=np.float64).reshape(len(s), -1)
        finite = v[np.isfinite(v).all(axis=1)]
        med = float(np.median(np.linalg.norm(finite, axis=1))) if finite.size else None
        problem = magnitude_problem(s.values[col], setting, "", bounds.get(setting.si))
        units[col] = {
            "read_as": setting.describe(),
            "si": setting.si,
            "median_norm": med,
            "ok": problem is None,
            "problem": problem.lstrip(": ") if problem else None,
        }
    timing = None
    if s.time is not None and s.time.rate_hz > 0 and not s.time.unit_key:
        timing = spacing_problem(s.stamp_ns * 1e-9, s.time, "")
    return {
        "messages": len(s),
        "rate_hz": (1.0 / period) if period else None,
        "units": units,
        "timing_problem": timing.lstrip(": ") if timing else None,
    }


def _read_each(path: Path, cfg: IngestConfig, fmt: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """Read every stream in ``names`` on its own, so that one stream's error does not hide the others."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            s = read_streams(path, cfg, fmt, False, only=name)[name]
        except DataError as exc:
            out[name] = {"error": str(exc)}
            continue
        out[name] = {"stream": s}
    return out


def _bag_topics(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Topic -> {type, messages} of every topic of the bag, and the bag's summary (storage, duration)."""
    root = bag_root(path)
    reader = open_bag(root)
    try:
        topics: dict[str, dict[str, Any]] = {}
        for c in reader.connections:
            t = topics.setdefault(c.topic, {"type": c.msgtype, "messages": 0})
            t["messages"] += c.msgcount
        info = {
            "storage": sorted({p.suffix.lstrip(".") for p in root.iterdir() if p.suffix in (".mcap", ".db3")}),
            "messages": reader.message_count,
            "duration_s": reader.duration * 1e-9 if reader.message_count else 0.0,
        }
    finally:
        reader.close()
    return topics, info


def _serial_kinds(path: Path, cfg: IngestConfig, fmt: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Record kind -> {records} of a serial dump, and its summary (columns, records)."""
    from flexlearn.ingest.serial import kinds_and_columns  # the serial reader's own parsing of the dump

    kinds, columns = kinds_and_columns(path, cfg, fmt)
    names, counts = np.unique(np.asarray([k for k in kinds if k is not None], dtype=object), return_counts=True)
    return {str(k): {"messages": int(n)} for k, n in zip(names, counts)}, {
        "columns": columns,
        "messages": int(len(kinds)),
    }


def inspect_recording(path: str | Path, cfg: IngestConfig, processing: Optional[ProcessingConfig] = None) -> dict:
    """What the recording at ``path`` holds and what the map ``cfg`` makes of it (see the module docstring).

    Args:
        path: the recording.
        cfg: the topic map.
        processing: the processing settings of the checks; None: the defaults.

    Returns:
        ``{path, format, summary, sources: {topic or kind: {type?, messages, stream?}}, streams: {name: {source,
        messages, rate_hz, units, timing_problem} or {source, error} or {source, missing, required}}}``.
    """
    path = Path(path)
    processing = processing or ProcessingConfig()
    fmt = detect_format(path, cfg.format)
    if fmt == "rosbag2":
        sources, summary = _bag_topics(path)
        mapped = {name: spec.topic for name, spec in cfg.topic_specs().items()}
    else:
        sources, summary = _serial_kinds(path, cfg, fmt)
        mapped = {name: spec.kind for name, spec in cfg.serial.parsed().items()}
    if cfg.tumble_recording:  # the tumble comes from there, not from the recording's tumble topic or records
        mapped.pop("tumble", None)
    streams: dict[str, dict[str, Any]] = {}
    present = [n for n, src in mapped.items() if sources.get(src, {}).get("messages")]
    for name, got in _read_each(path, cfg, fmt, present).items():
        entry: dict[str, Any] = {"source": mapped[name]}
        entry.update({"error": got["error"]} if "error" in got else _stream_summary(got["stream"], processing))
        streams[name] = entry
    for name, src in mapped.items():
        if name not in streams:
            streams[name] = {"source": src, "missing": True, "required": is_required(name)}
        sources.setdefault(src, {"messages": 0})["stream"] = name
    if cfg.tumble_recording:
        entry = {"source": cfg.tumble_recording, "separate_recording": True}
        try:
            entry.update(_stream_summary(read_tumble_recording(cfg), processing))
        except (DataError, ConfigError) as exc:
            entry["error"] = str(exc)
        streams["tumble"] = entry
    return {"path": str(path), "format": fmt, "summary": summary, "sources": sources, "streams": streams}


def _units_text(entry: dict[str, Any]) -> str:
    if "error" in entry:
        return "ERROR: " + entry["error"]
    parts = []
    for col, u in entry.get("units", {}).items():
        med = "-" if u["median_norm"] is None else f"{u['median_norm']:.4g} {u['si']}"
        parts.append(
            f"{col} {u['read_as']}: median |{col}| {med} " + ("ok" if u["ok"] else "WRONG UNIT: " + u["problem"])
        )
    if entry.get("timing_problem"):
        parts.append("TIMES: " + entry["timing_problem"])
    return "; ".join(parts) or "-"


def format_inspection(info: dict[str, Any]) -> str:
    """The inspection as text: a header line, one row per topic or record kind, then what is missing.

    Args:
        info: the inspection summary ('path', 'format', 'summary', 'sources', 'streams').

    Returns:
        The text, one line per row, without a trailing newline.
    """
    s = info["summary"]
    if info["format"] == "rosbag2":
        head = (
            f"{info['path']}: rosbag2 ({', '.join(s['storage'])}), {len(info['sources'])} topics, {s['messages']} "
            f"messages, {s['duration_s']:.3f} s"
        )
    else:
        head = f"{info['path']}: {info['format']}, {s['messages']} records, columns {s['columns']}"
    rows = [("topic" if info["format"] == "rosbag2" else "kind", "type", "messages", "rate [Hz]", "stream", "units")]
    for src, t in sorted(info["sources"].items()):
        name = t.get("stream")
        entry = info["streams"].get(name, {}) if name else {}
        rate = entry.get("rate_hz")
        rows.append(
            (
                src,
                t.get("type", "-"),
                str(t.get("messages", 0)),
                "-" if rate is None else f"{rate:.4g}",
                name or "(not mapped)",
                _units_text(entry) if name and not entry.get("missing") else "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [head] + ["  " + "  ".join(r[i].ljust(widths[i]) for i in range(5)) + "  " + r[5] for r in rows]
    for name, e in info["streams"].items():
        if e.get("missing"):
            what = "required: ingestion fails" if e["required"] else "optional: skipped"
            lines.append(f"missing: {e['source']} (stream '{name}', {what})")
        elif e.get("separate_recording"):
            lines.append(
                f"tumble: from the separate recording {e['source']} (ingest.tumble_recording): "
                f"{e.get('messages', 0)} readings; {_units_text(e)}"
            )
    if "tumble" not in info["streams"]:
        lines.append("tumble: none mapped (W = identity; see docs/ingest.md, 'Record the hand tumble')")
    lines.append("nothing written (inspect=true)")
    return "\n".join(lines)
