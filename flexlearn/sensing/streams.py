"""Raw sensor streams of a stationary-pose sweep: the form a hardware log holds, before any processing.

Both the sweep-rig simulator (`flexlearn.sim.rig`) and the ingestion of real recordings produce a
`RawSweep`; `flexlearn.data.process` turns it into training pairs. Everything is SI: seconds, tesla,
metres per second squared. Frames: every vector is in the *child sensor frame* (the frame of the
magnetometer/IMU board distal to the joint) unless its name says otherwise.

On disk a raw sweep is a directory of Parquet tables, one per stream, plus ``meta.json``:

| file            | columns                                   | units         |
| --------------- | ----------------------------------------- | ------------- |
| mag.parquet     | t, mx, my, mz                             | s, T          |
| accel.parquet   | t, ax, ay, az                             | s, m/s^2      |
| coil.parquet    | t, on                                     | s, bool (or 0/1) |
| poses.parquet   | pose_id, t_start, t_end, target_x/y/z     | int, s, s, unit |
| truth.parquet   | pose_id, label_x/y/z, u_x/y/z, db_x/y/z   | -, unit, unit, T (optional) |

``mag`` holds every register *poll* of the magnetometer: a conversion that has not been replaced yet is
read again and appears as a bitwise-identical repeat (stale sample). ``accel`` is the specific force
(reads +g upward at rest). ``coil`` holds the switch commands of the parent coil (state after the
switch). ``poses`` holds the rig controller's log: the joint was commanded to ``target`` (direction of the
child axis in the parent frame) and reported stationary between ``t_start`` and ``t_end``.
``truth`` exists only for simulated sweeps: the true label (parent axis, pointing from the child toward
the parent, in the child sensor frame), the true child direction in the parent frame and the noise-free
coil field at the magnetometer.

`RawSweep.load` checks every column's type strictly (`flexlearn.tables.read_columns`): numbers where numbers
are due, integers (or exactly integral floats) for ``pose_id``, booleans (or 0/1) for ``on``, and no null
(missing) value except in a mag/accel reading (a failed conversion, read as NaN). ``meta.json`` must hold a
JSON object. Anything else is a `DataError` naming the file, the column and the value.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flexlearn.atomic import atomic_dir
from flexlearn.errors import DataError
from flexlearn.tables import parse_json_object, read_columns, read_parquet

RAW_SCHEMA_VERSION = 1

_TABLES: dict[str, tuple[str, ...]] = {
    "mag": ("t", "mx", "my", "mz"),
    "accel": ("t", "ax", "ay", "az"),
    "coil": ("t", "on"),
    "poses": ("pose_id", "t_start", "t_end", "target_x", "target_y", "target_z"),
}
_TRUTH_COLUMNS = ("pose_id", "label_x", "label_y", "label_z", "u_x", "u_y", "u_z", "db_x", "db_y", "db_z")
# Column kinds as `flexlearn.tables.read_columns` checks them: every column is a number ("float", any integer
# or floating type, read as float64) but the coil state ("bool": boolean or 0/1) and pose ids ("int": integer,
# or floating point holding exact integers). Only a magnetometer or accelerometer reading may be null (a
# failed conversion, read as NaN and discarded by processing); a null anywhere else is an error.
_KINDS: dict[str, dict[str, str]] = {
    name: {c: "bool" if c == "on" else "int" if c == "pose_id" else "float" for c in cols}
    for name, cols in _TABLES.items()}
_TRUTH_KINDS = {c: "int" if c == "pose_id" else "float" for c in _TRUTH_COLUMNS}
_NULLABLE = ("mx", "my", "mz", "ax", "ay", "az")


@dataclass
class RawSweep:
    """Time-stamped streams of one sweep. Shapes: N_m mag polls, N_a accel samples, N_c coil switches, P poses.

    Attributes:
        mag_t: (N_m,) poll times [s], non-decreasing.
        mag: (N_m, 3) magnetometer readings [T] in the child sensor frame (stale polls repeat bitwise).
        accel_t: (N_a,) sample times [s].
        accel: (N_a, 3) specific force [m/s^2] in the child sensor frame.
        coil_t: (N_c,) switch times [s].
        coil_on: (N_c,) coil state after each switch.
        pose_id: (P,) integer pose identifiers, unique.
        pose_t_start, pose_t_end: (P,) interval [s] in which the rig reports the joint stationary.
        target: (P, 3) commanded unit direction of the child axis in the parent frame.
        meta: JSON-serialisable description: units, rig geometry, sampling, provenance.
        truth: optional dict of arrays keyed like ``truth.parquet`` columns (simulation only).
    """

    mag_t: np.ndarray
    mag: np.ndarray
    accel_t: np.ndarray
    accel: np.ndarray
    coil_t: np.ndarray
    coil_on: np.ndarray
    pose_id: np.ndarray
    pose_t_start: np.ndarray
    pose_t_end: np.ndarray
    target: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    truth: Optional[dict[str, np.ndarray]] = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, source: str = "raw sweep") -> None:
        """Check shapes and ordering; raise `DataError` naming the stream and field at fault."""
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise DataError(f"{source}: {msg}")

        need(self.mag_t.ndim == 1 and self.mag.shape == (self.mag_t.shape[0], 3),
             f"stream 'mag': expected t (N,) and m (N, 3), got {self.mag_t.shape} and {self.mag.shape}")
        need(self.accel_t.ndim == 1 and self.accel.shape == (self.accel_t.shape[0], 3),
             f"stream 'accel': expected t (N,) and a (N, 3), got {self.accel_t.shape} and {self.accel.shape}")
        need(self.coil_t.shape == self.coil_on.shape and self.coil_t.ndim == 1,
             f"stream 'coil': t {self.coil_t.shape} and on {self.coil_on.shape} differ")
        p = self.pose_id.shape[0]
        need(self.pose_t_start.shape == (p,) and self.pose_t_end.shape == (p,) and self.target.shape == (p, 3),
             "table 'poses': pose_id, t_start, t_end and target lengths differ")
        need(len(np.unique(self.pose_id)) == p, "table 'poses': pose_id values are not unique")
        for name, t in (("mag", self.mag_t), ("accel", self.accel_t), ("coil", self.coil_t)):
            need(bool(np.all(np.isfinite(t))), f"stream '{name}': field 't' has non-finite time stamps")
            if t.size > 1:
                bad = np.flatnonzero(np.diff(t) < 0)
                need(bad.size == 0, f"stream '{name}': field 't' decreases at index {bad[:1].tolist()}")
        need(bool(np.all(self.pose_t_end >= self.pose_t_start)), "table 'poses': t_end < t_start")

    # ------------------------------------------------------------------ disk
    def save(self, path: str | Path) -> Path:
        """Write the sweep as a directory of Parquet tables atomically; return the path."""
        path = Path(path)
        columns = {
            "mag": [self.mag_t, *self.mag.T],
            "accel": [self.accel_t, *self.accel.T],
            "coil": [self.coil_t, self.coil_on.astype(bool)],
            "poses": [self.pose_id.astype(np.int64), self.pose_t_start, self.pose_t_end, *self.target.T],
        }
        with atomic_dir(path) as tmp:
            for name, arrays in columns.items():
                table = pa.table({c: np.ascontiguousarray(a) for c, a in zip(_TABLES[name], arrays)})
                pq.write_table(table, tmp / f"{name}.parquet")
            if self.truth is not None:
                pq.write_table(pa.table({c: np.ascontiguousarray(self.truth[c]) for c in _TRUTH_COLUMNS}),
                               tmp / "truth.parquet")
            meta = dict(self.meta, raw_schema_version=RAW_SCHEMA_VERSION)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=float) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "RawSweep":
        """Read a sweep written by `save` (or by an ingester); errors name the file and the column."""
        path = Path(path)
        if not path.is_dir():
            raise DataError(f"{path}: raw sweep directory not found")

        def table(name: str, kinds: dict[str, str]) -> dict[str, np.ndarray]:
            f = path / f"{name}.parquet"
            return read_columns(read_parquet(f, f"stream file '{name}.parquet'"), f, kinds, nullable=_NULLABLE)

        mag, acc = table("mag", _KINDS["mag"]), table("accel", _KINDS["accel"])
        coil, poses = table("coil", _KINDS["coil"]), table("poses", _KINDS["poses"])
        truth = table("truth", _TRUTH_KINDS) if (path / "truth.parquet").exists() else None
        meta_file = path / "meta.json"
        meta = parse_json_object(meta_file.read_bytes(), str(meta_file), "raw sweep metadata") \
            if meta_file.exists() else {}
        sweep = cls.__new__(cls)
        sweep.mag_t = mag["t"]
        sweep.mag = np.stack([mag["mx"], mag["my"], mag["mz"]], axis=-1)
        sweep.accel_t = acc["t"]
        sweep.accel = np.stack([acc["ax"], acc["ay"], acc["az"]], axis=-1)
        sweep.coil_t = coil["t"]
        sweep.coil_on = coil["on"]
        sweep.pose_id = poses["pose_id"]
        sweep.pose_t_start = poses["t_start"]
        sweep.pose_t_end = poses["t_end"]
        sweep.target = np.stack([poses["target_x"], poses["target_y"], poses["target_z"]], axis=-1)
        sweep.meta = meta
        sweep.truth = truth
        sweep.validate(source=str(path))
        return sweep


def quantize_times(raw: RawSweep) -> RawSweep:
    """A copy of ``raw`` with every time rounded to whole nanoseconds: t → round(t·1e9)·1e-9.

    Recordings (rosbag2 stamps, serial dumps with integer clocks) resolve time in nanoseconds at best; this
    is the sweep as such a recording of it holds it (see `flexlearn.ingest.assemble`).
    """
    def q(t: np.ndarray) -> np.ndarray:
        return np.round(np.asarray(t, dtype=np.float64) * 1e9).astype(np.int64) * 1e-9

    return RawSweep(mag_t=q(raw.mag_t), mag=raw.mag.copy(), accel_t=q(raw.accel_t), accel=raw.accel.copy(),
                    coil_t=q(raw.coil_t), coil_on=raw.coil_on.copy(), pose_id=raw.pose_id.copy(),
                    pose_t_start=q(raw.pose_t_start), pose_t_end=q(raw.pose_t_end), target=raw.target.copy(),
                    meta=dict(raw.meta), truth=None if raw.truth is None else dict(raw.truth))
