"""Read a dump of the microcontroller's serial stream: CSV (header row) or JSON lines, one record per line.

Each record has a time (``serial.time_field`` in ``serial.time_unit``), a kind (``serial.kind_field``) and
the fields of its stream, in the order of its registered columns besides ``t``
(`flexlearn.sensing.streams.STREAMS`): mag, accel and rate (x, y, z, scaled to SI by the stream's ``scale``),
coil (on: 0/1 or true/false), poses (pose_id, t_start, t_end in the time unit, target x, y, z), and so on
for any registered stream. Records of other kinds are ignored. A missing column, a record lacking a field
of its kind or an unreadable file is a `DataError` naming the file, the column and the line; an empty
(null) value of a nullable field (mag/accel/rate) is a failed conversion and reads as NaN (processing
discards it as non-finite).

Field types are checked strictly by the field's kind (`flexlearn.tables.column_values`): numbers for times
and vectors, an integer (or exactly integral number) for pose_id, true/false or 0/1 for the coil state;
a time (a field of unit ``s``) is converted to nanosecond stamps and must be finite and
within ±`flexlearn.ingest.records.STAMP_LIMIT_NS` once in nanoseconds. Anything else is a `DataError` naming
the file, the record kind, the column, the line and the value.

Values are converted to SI by each stream's ``unit``/``scale`` (`flexlearn.ingest.units`). Before that, the
sample spacing of a continuous stream is checked against its declared rate (``rate_hz``) or plausible sensor
rates, so that times in another unit than ``serial.time_unit`` are named as such (``ingest.serial.time_unit=ms``).
An optional stream without records of its kind is skipped with one log line.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
from pyarrow import csv as pa_csv
from pyarrow import json as pa_json

from flexlearn.errors import DataError
from flexlearn.ingest.records import NS, STAMP_LIMIT_NS, Stream
from flexlearn.ingest.topic_map import (
    TIME_UNITS,
    IngestConfig,
    SerialStream,
    is_required,
    schema_of,
    time_setting,
    unit_settings,
)
from flexlearn.ingest.units import SENSOR_UNITS, spacing_problem
from flexlearn.tables import column_values

log = logging.getLogger(__name__)


def _read_table(path: Path, fmt: str) -> pa.Table:
    if not path.is_file():
        raise DataError(f"{path}: serial dump not found")
    try:
        if fmt == "csv":
            # Only an empty cell is missing; "nan" is a number (a failed conversion), not a missing value.
            return pa_csv.read_csv(
                path, convert_options=pa_csv.ConvertOptions(null_values=[""], strings_can_be_null=True)
            )
        return pa_json.read_json(path)
    except pa.ArrowInvalid as exc:
        raise DataError(f"{path}: cannot be read as {fmt.upper()} ({str(exc).splitlines()[0]})") from exc


def _field(
    path: Path,
    table: pa.Table,
    col: str,
    rows: np.ndarray,
    kind: str,
    line0: int,
    value_kind: str,
    null_is_nan: bool = False,
) -> np.ndarray:
    """Column ``col`` at ``rows`` checked strictly as ``value_kind`` (`flexlearn.tables.column_values`).

    A null is a record lacking the field (`DataError` naming the line) unless ``null_is_nan`` (reads NaN).
    """
    sub = table.column(col).combine_chunks().take(pa.array(rows, type=pa.int64()))
    if sub.null_count and not null_is_nan:
        bad = int(rows[np.flatnonzero(np.asarray(sub.is_null().to_numpy(zero_copy_only=False)))[0]])
        raise DataError(f"{path}: line {bad + line0}: record of kind '{kind}' lacks field '{col}'")
    return column_values(
        sub,
        value_kind,
        f"{path}: records of kind '{kind}'",
        col,
        nullable=null_is_nan,
        locate=lambda i: f"line {int(rows[i]) + line0}",
    )


def _stamps(path: Path, t: np.ndarray, unit: str, col: str, rows: np.ndarray, line0: int) -> np.ndarray:
    """Times ``t`` [``unit``] as int64 stamps [ns]; non-finite or beyond ±`STAMP_LIMIT_NS` is a `DataError`."""
    with np.errstate(over="ignore", invalid="ignore"):
        ns = np.round(t * (TIME_UNITS[unit] * NS))
        bad = np.flatnonzero(~np.isfinite(ns) | (np.abs(ns) > STAMP_LIMIT_NS))
    if bad.size:
        i = int(bad[0])
        what = (
            "is not a finite time"
            if not np.isfinite(t[i])
            else (f"{unit} is outside the range of time stamps, ±{STAMP_LIMIT_NS / NS:.6g} s (int64 nanoseconds)")
        )
        raise DataError(f"{path}: line {int(rows[i]) + line0}: field '{col}' = {float(t[i])!r} {what}")
    return ns.astype(np.int64)


def _kinds(path: Path, table: pa.Table, kind_field: str) -> np.ndarray:
    """The record kind of every row, as strings (None where missing)."""
    try:
        kinds = table.column(kind_field).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DataError(
            f"{path}: column '{kind_field}' (the record kind) holds {table.column(kind_field).type} "
            f"values, expected strings ({str(exc).splitlines()[0]})"
        ) from exc
    return np.asarray(kinds.to_numpy(zero_copy_only=False), dtype=object)


def kinds_and_columns(path: Path, cfg: IngestConfig, fmt: str) -> tuple[np.ndarray, list[str]]:
    """The record kind of every line (None where missing) and the column names of a serial dump.

    Args:
        path: the serial dump.
        cfg: the topic map (``serial.kind_field``).
        fmt: 'csv' or 'jsonl'.

    Returns:
        (the kinds, the column names).

    Raises:
        DataError: when the kind column is missing.
    """
    table = _read_table(Path(path), fmt)
    if cfg.serial.kind_field not in table.column_names:
        raise DataError(
            f"{path}: column '{cfg.serial.kind_field}' missing (the record kind field); columns present: "
            f"{sorted(table.column_names)}"
        )
    return _kinds(Path(path), table, cfg.serial.kind_field), list(table.column_names)


def _present(
    path: Path, streams: dict[str, SerialStream], kinds: np.ndarray, names: set[str], skipped: dict[str, str]
) -> dict[str, np.ndarray]:
    """Stream -> its record rows, for the streams the dump holds; an optional one without records is skipped (one
    log line), a required one without records or any stream with records but a column missing is a `DataError`."""
    out = {}
    for name, spec in streams.items():
        rows = np.flatnonzero(kinds == spec.kind)
        if rows.size == 0 and not is_required(name):
            skipped[name] = (
                f"{path}: no records of kind '{spec.kind}' (optional stream '{name}'); skipped "
                f"(ingest.serial.streams.{name}=null leaves it out of the map)"
            )
            log.warning("%s", skipped[name])
            continue
        for col in spec.fields:
            if col not in names:
                drop = "" if is_required(name) else f"; ingest.serial.streams.{name}=null reads the dump without it"
                raise DataError(
                    f"{path}: column '{col}' missing (stream '{name}' needs {list(spec.fields)}); "
                    f"columns present: {sorted(names)}{drop}"
                )
        if rows.size == 0:
            raise DataError(
                f"{path}: records of kind '{spec.kind}': none found (stream '{name}'); kinds present: "
                f"{sorted(set(k for k in kinds if k is not None))}"
            )
        out[name] = rows
    return out


def read_serial(
    path: Path,
    cfg: IngestConfig,
    fmt: str,
    streams: Optional[dict[str, SerialStream]] = None,
    skipped: Optional[dict[str, str]] = None,
) -> dict[str, Stream]:
    """Streams of a serial dump (``fmt`` 'csv' or 'jsonl'); duplicates marked by row bytes (checks not applied).

    Args:
        path: the dump.
        cfg: the map (``cfg.serial``).
        fmt: ``csv`` or ``jsonl``.
        streams: the streams to read (default: every stream of ``cfg.serial``).
        skipped: collects optional streams the dump lacks (stream -> the line logged).
    """
    path = Path(path)
    serial = cfg.serial
    streams = serial.parsed() if streams is None else streams
    skipped = {} if skipped is None else skipped
    table = _read_table(path, fmt)
    line0 = 2 if fmt == "csv" else 1  # line number of the first record (CSV has a header row)
    names = set(table.column_names)
    for col in (serial.time_field, serial.kind_field):
        if col not in names:
            raise DataError(
                f"{path}: column '{col}' missing (the record {'time' if col == serial.time_field else 'kind'}"
                f" field); columns present: {sorted(names)}"
            )
    kinds = _kinds(path, table, serial.kind_field)
    unit = serial.time_unit
    out = {}
    for name, rows in _present(path, streams, kinds, names, skipped).items():
        spec, where = streams[name], f"ingest.serial.streams.{name}"
        source = f"{path}: records of kind '{spec.kind}'"
        t = _field(path, table, serial.time_field, rows, spec.kind, line0, "float")
        units = unit_settings(name, spec, where)
        timing = time_setting(name, spec, where, "ingest.serial.time_unit", unit)
        sensor = any(u.si in SENSOR_UNITS for u in units.values())  # a magnetometer, accelerometer or gyro
        problem = spacing_problem(t, timing, source) if timing and (sensor or timing.rate_hz > 0) else None
        if problem:
            raise DataError(problem)
        stamp = _stamps(path, t, unit, serial.time_field, rows, line0)
        values: dict[str, np.ndarray] = {}
        cols: list[np.ndarray] = []
        field_names = iter(spec.fields)
        for f in schema_of(name).values:  # the record's fields in the stream's column order
            parts = [
                _field(path, table, next(field_names), rows, spec.kind, line0, f.kind, f.nullable) for _ in f.columns
            ]
            cols += parts
            value = parts[0] if f.width == 1 else np.stack(parts, axis=-1)
            if f.is_time:
                values[f"{f.name}_ns"] = _stamps(path, value, unit, spec.fields[len(cols) - 1], rows, line0)
            else:
                values[f.name] = value * units[f.name].factor if f.name in units else value
        row_bytes = np.ascontiguousarray(np.stack([t, *cols], axis=1).astype(np.float64)).view(np.uint8)
        keys = [r.tobytes() for r in row_bytes.reshape(rows.size, -1)]
        out[name] = Stream(
            name=name,
            source=source,
            stamp_ns=stamp,
            values=values,
            keys=keys,
            continuous=schema_of(name).continuous,
            units=units,
            time=timing,
        )
    return out
