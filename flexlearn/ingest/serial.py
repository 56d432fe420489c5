"""Read a dump of the microcontroller's serial stream: CSV (header row) or JSON lines, one record per line.

Each record has a time (``serial.time_field`` in ``serial.time_unit``), a kind (``serial.kind_field``) and
the fields of its stream (`flexlearn.ingest.topic_map.SERIAL_FIELDS`): mag, accel and rate (x, y, z, scaled
to SI by the stream's ``scale``), coil (on: 0/1 or true/false), poses (pose_id, t_start, t_end in the time
unit, target x, y, z). Records of other kinds are ignored. A missing column, a record lacking a field of its
kind or an unreadable file is a `DataError` naming the file, the column and the line; an empty (null)
mag/accel/rate value is a failed conversion and reads as NaN (processing discards it as non-finite).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from flexlearn.errors import DataError
from flexlearn.ingest.records import NS, Stream
from flexlearn.ingest.topic_map import TIME_UNITS, IngestConfig

CONTINUOUS = ("mag", "accel", "rate")


def _read_table(path: Path, fmt: str) -> pa.Table:
    if not path.is_file():
        raise DataError(f"{path}: serial dump not found")
    try:
        if fmt == "csv":
            from pyarrow import csv

            # Only an empty cell is missing; "nan" is a number (a failed conversion), not a missing value.
            return csv.read_csv(path, convert_options=csv.ConvertOptions(null_values=[""], strings_can_be_null=True))
        from pyarrow import json

        return json.read_json(path)
    except pa.ArrowInvalid as exc:
        raise DataError(f"{path}: cannot be read as {fmt.upper()} ({str(exc).splitlines()[0]})") from exc


def _numeric(path: Path, table: pa.Table, col: str, rows: np.ndarray, kind: str, line0: int,
             null_is_nan: bool = False) -> np.ndarray:
    """Column ``col`` at ``rows`` as float64; text, or nulls unless ``null_is_nan``, raise `DataError` naming the line."""
    arr = table.column(col).combine_chunks()
    sub = arr.take(pa.array(rows))
    if sub.null_count and null_is_nan and (pa.types.is_floating(sub.type) or pa.types.is_integer(sub.type)
                                           or pa.types.is_null(sub.type)):
        return np.asarray(sub.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    if sub.null_count:
        bad = int(rows[np.flatnonzero(np.asarray(sub.is_null().to_numpy(zero_copy_only=False)))[0]])
        raise DataError(f"{path}: line {bad + line0}: record of kind '{kind}' lacks field '{col}'")
    if pa.types.is_boolean(sub.type):
        return np.asarray(sub.to_numpy(zero_copy_only=False), dtype=np.float64)
    if not (pa.types.is_integer(sub.type) or pa.types.is_floating(sub.type)):
        raise DataError(f"{path}: column '{col}' holds {sub.type} values, expected numbers (records of kind '{kind}')")
    return np.asarray(sub.to_numpy(zero_copy_only=False), dtype=np.float64)


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
            raise DataError(f"{path}: column '{col}' missing (the record {'time' if col == serial.time_field else 'kind'}"
                            f" field); columns present: {sorted(names)}")
    for name, spec in streams.items():
        for col in spec.fields:
            if col not in names:
                raise DataError(f"{path}: column '{col}' missing (stream '{name}' needs {list(spec.fields)}); "
                                f"columns present: {sorted(names)}")
    kinds = np.asarray(table.column(serial.kind_field).cast(pa.string()).to_numpy(zero_copy_only=False), dtype=object)
    unit = TIME_UNITS[serial.time_unit]
    out = {}
    for name, spec in streams.items():
        rows = np.flatnonzero(kinds == spec.kind)
        source = f"{path}: records of kind '{spec.kind}'"
        if rows.size == 0:
            raise DataError(f"{source}: none found (stream '{name}'); kinds present: "
                            f"{sorted(set(k for k in kinds if k is not None))}")
        t = _numeric(path, table, serial.time_field, rows, spec.kind, line0)
        if not np.all(np.isfinite(t)):
            raise DataError(f"{path}: line {int(rows[~np.isfinite(t)][0]) + line0}: field '{serial.time_field}' "
                            "is not a finite time")
        stamp = np.round(t * (unit * NS)).astype(np.int64)
        vector = name in CONTINUOUS  # a null reading is a failed conversion: NaN, dropped by processing
        cols = np.stack([_numeric(path, table, c, rows, spec.kind, line0, vector) for c in spec.fields], axis=-1)
        if name == "poses":
            values = {"pose_id": cols[:, 0].astype(np.int64),
                      "t_start_ns": np.round(cols[:, 1] * (unit * NS)).astype(np.int64),
                      "t_end_ns": np.round(cols[:, 2] * (unit * NS)).astype(np.int64), "target": cols[:, 3:6]}
        elif name == "coil":
            values = {"on": cols[:, 0] != 0}
        else:
            values = {name: cols * spec.scale}
        row_bytes = np.ascontiguousarray(np.concatenate([t[:, None], cols], axis=1)).view(np.uint8)
        keys = [r.tobytes() for r in row_bytes.reshape(rows.size, -1)]
        out[name] = Stream(name=name, source=source, stamp_ns=stamp, values=values, keys=keys,
                           continuous=name in CONTINUOUS)
    return out
