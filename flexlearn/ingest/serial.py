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
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
from pyarrow import csv as pa_csv
from pyarrow import json as pa_json

from flexlearn.errors import DataError
from flexlearn.ingest.records import NS, STAMP_LIMIT_NS, Stream
from flexlearn.ingest.topic_map import TIME_UNITS, IngestConfig
from flexlearn.sensing.streams import STREAMS
from flexlearn.tables import column_values


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


def read_serial(path: Path, cfg: IngestConfig, fmt: str) -> dict[str, Stream]:
    """Streams of a serial dump (``fmt`` 'csv' or 'jsonl'); duplicates marked by row bytes (checks not applied)."""
    path = Path(path)
    serial = cfg.serial
    streams = serial.parsed()
    table = _read_table(path, fmt)
    line0 = 2 if fmt == "csv" else 1  # line number of the first record (CSV has a header row)
    names = set(table.column_names)
    for col in (serial.time_field, serial.kind_field):
        if col not in names:
            raise DataError(
                f"{path}: column '{col}' missing (the record {'time' if col == serial.time_field else 'kind'}"
                f" field); columns present: {sorted(names)}"
            )
    for name, spec in streams.items():
        for col in spec.fields:
            if col not in names:
                raise DataError(
                    f"{path}: column '{col}' missing (stream '{name}' needs {list(spec.fields)}); "
                    f"columns present: {sorted(names)}"
                )
    kinds = _kinds(path, table, serial.kind_field)
    unit = serial.time_unit
    out = {}
    for name, spec in streams.items():
        rows = np.flatnonzero(kinds == spec.kind)
        source = f"{path}: records of kind '{spec.kind}'"
        if rows.size == 0:
            raise DataError(
                f"{source}: none found (stream '{name}'); kinds present: "
                f"{sorted(set(k for k in kinds if k is not None))}"
            )
        t = _field(path, table, serial.time_field, rows, spec.kind, line0, "float")
        stamp = _stamps(path, t, unit, serial.time_field, rows, line0)
        values: dict[str, np.ndarray] = {}
        cols: list[np.ndarray] = []
        field_names = iter(spec.fields)
        for f in STREAMS[name].values:  # the record's fields in the stream's column order
            parts = [
                _field(path, table, next(field_names), rows, spec.kind, line0, f.kind, f.nullable) for _ in f.columns
            ]
            cols += parts
            value = parts[0] if f.width == 1 else np.stack(parts, axis=-1)
            if f.is_time:
                values[f"{f.name}_ns"] = _stamps(path, value, unit, spec.fields[len(cols) - 1], rows, line0)
            else:
                values[f.name] = value * spec.scale if f.scaled else value
        row_bytes = np.ascontiguousarray(np.stack([t, *cols], axis=1).astype(np.float64)).view(np.uint8)
        keys = [r.tobytes() for r in row_bytes.reshape(rows.size, -1)]
        out[name] = Stream(
            name=name, source=source, stamp_ns=stamp, values=values, keys=keys, continuous=STREAMS[name].continuous
        )
    return out
