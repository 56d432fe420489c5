"""Raw sensor streams of a stationary-pose sweep: the form a hardware log holds, before any processing.

Both the sweep-rig simulator (`flexlearn.sim.rig`) and the ingestion of real recordings produce a
`RawSweep`; `flexlearn.data.process` turns it into training pairs. Everything is SI: seconds, tesla,
metres per second squared. Frames: every vector is in the *child sensor frame* (the frame of the
magnetometer/IMU board distal to the joint) unless its name says otherwise.

A `RawSweep` is a mapping of named streams (``raw.streams['mag'] = {'t': (N,), 'mag': (N, 3)}``), each laid out
by a `StreamSchema` of the registry `STREAMS`. The registry is the one place a stream is declared: save, load
and validation here, the ingestion of recordings (`flexlearn.ingest`: topic maps, readers, writers), the
simulators and processing (`flexlearn.data.process`: per-pose means of ``per_pose`` streams) read it.
`register_stream` adds a stream. On disk a raw sweep is a directory of Parquet tables, one per stream, plus
``meta.json``; the built-in streams:

| file                | columns                                   | units            | required |
| ------------------- | ----------------------------------------- | ---------------- | -------- |
| mag.parquet         | t, mx, my, mz                             | s, T             | yes      |
| accel.parquet       | t, ax, ay, az                             | s, m/s^2         | yes      |
| coil.parquet        | t, on                                     | s, bool (or 0/1) | yes      |
| poses.parquet       | pose_id, t_start, t_end, target_x/y/z     | int, s, s, unit  | yes      |
| truth.parquet       | pose_id, label_x/y/z, u_x/y/z, db_x/y/z   | -, unit, unit, T | no (simulation) |
| rate.parquet        | t, wx, wy, wz                             | s, rad/s         | no (ingest)     |
| orientation.parquet | t, qw, qx, qy, qz                         | s, unit          | no (ingest)     |
| mocap.parquet       | t, px, py, pz, qw, qx, qy, qz             | s, m, unit       | no (ingest)     |

``mag`` holds every register *poll* of the magnetometer: a conversion that has not been replaced yet is
read again and appears as a bitwise-identical repeat (stale sample). ``accel`` is the specific force
(reads +g upward at rest). ``coil`` holds the switch commands of the parent coil (state after the
switch). ``poses`` holds the rig controller's log: the joint was commanded to ``target`` (direction of the
child axis in the parent frame) and reported stationary between ``t_start`` and ``t_end``.
``truth`` exists only for simulated sweeps: the true label (parent axis, pointing from the child toward
the parent, in the child sensor frame), the true child direction in the parent frame and the noise-free
coil field at the magnetometer. ``rate`` and ``orientation`` come from a recording's IMU (the orientation
reported, or computed by the attitude filter: ``meta['imu_orientation']``), ``mocap`` from motion capture.

`RawSweep.load` checks every column's type strictly (`flexlearn.tables.read_columns`) by its field's kind:
numbers where numbers are due, integers (or exactly integral floats) for ``pose_id``, booleans (or 0/1) for
``on``, and no null (missing) value except in a nullable field (a failed conversion, read as NaN). ``meta.json``
must hold a JSON object. Tables of unregistered names are kept as read (`RawSweep.unregistered`) and written
back by `save`; a non-nullable float field must be finite. Anything else is a `DataError` naming the file,
the column and the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flexlearn.atomic import OUTPUT_MARKER, atomic_dir, json_text
from flexlearn.errors import ConfigError, DataError
from flexlearn.sensing.stream_schema import Field, StreamSchema, time_field
from flexlearn.tables import parse_json_object, read_columns, read_parquet

RAW_SCHEMA_VERSION = 1


def _hold_windows_ordered(d: Mapping[str, np.ndarray]) -> Optional[str]:
    return None if bool(np.all(d["t_end"] >= d["t_start"])) else "stream 'poses': t_end < t_start"


def _xyz(prefix: str, **kw: Any) -> Field:
    return Field(prefix, tuple(f"{prefix}_{a}" for a in "xyz"), **kw)


_QUAT = ("qw", "qx", "qy", "qz")
BUILTIN_STREAMS: tuple[StreamSchema, ...] = (
    StreamSchema(
        "mag",
        (
            time_field("poll time"),
            Field(
                "mag",
                ("mx", "my", "mz"),
                unit="T",
                nullable=True,
                ros="magnetic_field",
                doc="field, child sensor frame",
            ),
        ),
        required=True,
        continuous=True,
        attrs=(("mag_t", "t"), ("mag", "mag")),
        doc="magnetometer polls (stale polls repeat bitwise)",
    ),
    StreamSchema(
        "accel",
        (
            time_field(),
            Field("accel", ("ax", "ay", "az"), unit="m/s^2", nullable=True, doc="specific force, child sensor frame"),
        ),
        required=True,
        continuous=True,
        attrs=(("accel_t", "t"), ("accel", "accel")),
        doc="accelerometer (from the IMU topic in a rosbag2 recording)",
    ),
    StreamSchema(
        "coil",
        (time_field("switch time"), Field("on", kind="bool", doc="coil state after the switch")),
        required=True,
        attrs=(("coil_t", "t"), ("coil_on", "on")),
        doc="parent coil switch events",
    ),
    StreamSchema(
        "poses",
        (
            Field("pose_id", kind="int", ros="pose_id"),
            Field("t_start", unit="s", ros="t_start"),
            Field("t_end", unit="s", ros="t_end"),
            _xyz("target", unit="1", ros="target", doc="commanded child axis, parent frame"),
        ),
        required=True,
        key="pose_id",
        stamp="t_end",
        check=_hold_windows_ordered,
        attrs=(("pose_id", "pose_id"), ("pose_t_start", "t_start"), ("pose_t_end", "t_end"), ("target", "target")),
        doc="hold windows of the rig controller",
    ),
    StreamSchema(
        "truth",
        (
            Field("pose_id", kind="int"),
            *(Field(f"{p}_{a}", unit=u) for p, u in (("label", "1"), ("u", "1"), ("db", "T")) for a in "xyz"),
        ),
        key="pose_id",
        stamp="",
        doc="simulation only: true label, direction, coil field",
    ),
    StreamSchema(
        "rate",
        (time_field(), Field("rate", ("wx", "wy", "wz"), unit="rad/s", nullable=True)),
        continuous=True,
        doc="gyroscope (from the IMU topic), child sensor frame",
    ),
    StreamSchema(
        "orientation",
        (time_field(), Field("orientation", _QUAT, unit="1", nullable=True)),
        doc="IMU orientation quaternion (w, x, y, z), sensor -> world",
    ),
    StreamSchema(
        "mocap",
        (
            time_field(),
            Field("position", ("px", "py", "pz"), unit="m", ros="pose.position"),
            Field("orientation", _QUAT, unit="1", ros="pose.orientation"),
        ),
        doc="motion-capture pose of the child",
    ),
)
STREAMS: dict[str, StreamSchema] = {}
_ATTRS: dict[str, tuple[str, str]] = {}  # RawSweep attribute -> (stream, field)


def _layout_problem(schema: StreamSchema) -> Optional[str]:
    """Why the fields of ``schema`` cannot be one table (repeated or empty names, a ``t`` that is no time), or None."""
    names = [f.name for f in schema.fields]
    columns = [c for f in schema.fields for c in f.columns]
    twice = sorted({c for c in names if names.count(c) > 1} | {c for c in columns if columns.count(c) > 1})
    if twice:
        return f"field or column name(s) {twice} repeated; each must name one quantity, one column"
    empty = [f.name for f in schema.fields if not f.name.isidentifier() or not all(c.strip() for c in f.columns)]
    if empty:
        return f"field(s) {empty}: expected an identifier name and non-blank column names"
    if any(f.name == "t" and not (f.is_time and f.kind == "float" and f.width == 1) for f in schema.fields):
        return "field 't' is the sample time: expected Field('t', unit='s') (one float column)"
    unknown = [a for a, f in schema.attrs if f not in names]
    return f"attribute(s) {unknown} name no field" if unknown else None


def register_stream(schema: StreamSchema) -> StreamSchema:
    """Add ``schema`` to `STREAMS` (the same schema again is a no-op); return it.

    Args:
        schema: the stream's schema; its name must be an identifier and it needs at least one field.

    Returns:
        ``schema``.

    Raises:
        ConfigError: another schema of that name, or an attribute or file name already taken.
    """
    old = STREAMS.get(schema.name)
    if old is not None:
        if old == schema:
            return schema
        raise ConfigError(f"stream '{schema.name}' is already registered with another schema")
    if not schema.name.isidentifier() or not schema.fields:
        raise ConfigError(f"stream {schema.name!r}: expected an identifier and at least one field")
    same_file = [n for n in STREAMS if n.casefold() == schema.name.casefold()]
    if same_file:  # one file on a case-insensitive file system (macOS, Windows): a save would overwrite it
        raise ConfigError(
            f"stream '{schema.name}': its file {schema.name}.parquet is {same_file[0]}.parquet on a "
            "case-insensitive file system; choose another name"
        )
    taken = [a for a, _ in schema.attrs if a in _ATTRS]
    if taken:
        raise ConfigError(f"stream '{schema.name}': attribute(s) {taken} already name another stream's field")
    if (schema.key and schema.key not in {f.name for f in schema.fields}) or (
        schema.stamp and schema.stamp not in {f.name for f in schema.fields}
    ):
        raise ConfigError(f"stream '{schema.name}': key {schema.key!r} / stamp {schema.stamp!r} is not a field")
    problem = _layout_problem(schema)
    if problem:
        raise ConfigError(f"stream '{schema.name}': {problem}")
    STREAMS[schema.name] = schema
    _ATTRS.update({a: (schema.name, f) for a, f in schema.attrs})
    return schema


def unregister_stream(name: str) -> None:
    """Remove a stream added by `register_stream` (built-in streams stay; an unknown name is a no-op).

    Args:
        name: the stream name.

    Raises:
        ConfigError: ``name`` is a built-in stream.
    """
    if any(s.name == name for s in BUILTIN_STREAMS):
        raise ConfigError(f"stream '{name}' is built in and cannot be removed")
    STREAMS.pop(name, None)


def stream_schema(name: str) -> StreamSchema:
    """The registered schema of ``name``.

    Args:
        name: the stream name (a key of `STREAMS`).

    Returns:
        Its `StreamSchema`.

    Raises:
        ConfigError: an unknown name (the message lists the registered ones).
    """
    if name not in STREAMS:
        raise ConfigError(
            f"stream '{name}' is not registered (flexlearn.sensing.streams.register_stream); "
            f"registered: {list(STREAMS)}"
        )
    return STREAMS[name]


for _schema in BUILTIN_STREAMS:
    register_stream(_schema)


class _FieldView:
    """Attribute access to one field of a built-in stream: ``raw.mag_t`` is ``raw.streams['mag']['t']``."""

    def __init__(self, stream: str, name: str) -> None:
        self.stream, self.name = stream, name

    def __get__(self, obj: Any, owner: Any = None) -> np.ndarray:
        return obj.streams[self.stream][self.name]

    def __set__(self, obj: Any, value: np.ndarray) -> None:
        obj.streams[self.stream][self.name] = value


def _refuse_foreign_entries(path: Path) -> None:
    """Refuse to save over a sweep directory that holds anything a sweep does not write, naming it.

    A sweep directory is replaced as a whole: a user's notes, figures or subdirectories in it are named (the
    first entries) instead of dropped. (A directory flexlearn did not write is refused by `atomic_dir` itself.)
    """
    if not (path / OUTPUT_MARKER).is_file():
        return
    foreign = sorted(
        e.name
        for e in path.iterdir()
        if not (e.is_file() and (e.suffix == ".parquet" or e.name in ("meta.json", OUTPUT_MARKER)))
    )
    if foreign:
        raise DataError(
            f"{path}: saving the raw sweep would replace the directory and lose {foreign[:5]}"
            f"{' ...' if len(foreign) > 5 else ''} (not part of a raw sweep); move them or save elsewhere"
        )


@dataclass(init=False, eq=False)
class RawSweep:
    """Time-stamped streams of one sweep: ``streams`` maps a registered stream name to its field arrays.

    The built-in streams keep attribute access (N_m mag polls, N_a accel samples, N_c coil switches, P poses):
    mag_t (N_m,) [s] non-decreasing; mag (N_m, 3) [T]; accel_t (N_a,) [s]; accel (N_a, 3) [m/s^2] specific
    force; coil_t (N_c,) [s]; coil_on (N_c,) state after each switch; pose_id (P,) unique ints; pose_t_start,
    pose_t_end (P,) [s] the interval the joint is reported stationary; target (P, 3) commanded unit direction
    (parent frame); truth: optional dict of ``truth.parquet`` columns (simulation only). Every other stream
    (``rate``, ``mocap``, a registered one) is ``raw.streams[name]``.

    Construct with the fields' attribute names as keywords (``RawSweep(mag_t=..., mag=..., ...)``), with
    ``streams=`` (a mapping by `STREAMS`), or both (field keywords override); every argument is a keyword.
    ``meta``: JSON-serialisable units, rig geometry, provenance. ``unregistered``: table file stem -> the Parquet
    bytes of a table `load` found whose stream is not registered in this process; kept as read and written back by
    `save`, so that a re-save loses no table.
    """

    streams: dict[str, dict[str, np.ndarray]]
    meta: dict[str, Any]
    unregistered: dict[str, bytes]

    mag_t = _FieldView("mag", "t")
    mag = _FieldView("mag", "mag")
    accel_t = _FieldView("accel", "t")
    accel = _FieldView("accel", "accel")
    coil_t = _FieldView("coil", "t")
    coil_on = _FieldView("coil", "on")
    pose_id = _FieldView("poses", "pose_id")
    pose_t_start = _FieldView("poses", "t_start")
    pose_t_end = _FieldView("poses", "t_end")
    target = _FieldView("poses", "target")

    def __init__(
        self,
        *,
        streams: Optional[Mapping[str, Mapping[str, np.ndarray]]] = None,
        meta: Optional[dict[str, Any]] = None,
        truth: Optional[Mapping[str, np.ndarray]] = None,
        unregistered: Optional[Mapping[str, bytes]] = None,
        **fields: np.ndarray,
    ) -> None:
        """Build a sweep from whole streams and/or single fields by attribute name; checked (`validate`).

        Args:
            streams: stream name -> {field name -> array}, by `STREAMS` (copied one level deep).
            meta: JSON-serialisable units, rig geometry, provenance.
            truth: the ``truth`` stream's columns (simulation only).
            unregistered: table file stem -> Parquet bytes of tables whose stream is not registered.
            **fields: single fields by their attribute name (the built-in ``mag_t``, ``mag``, ``accel_t``,
                ``accel``, ``coil_t``, ``coil_on``, ``pose_id``, ``pose_t_start``, ``pose_t_end``, ``target``, or
                an ``attrs`` name of a registered stream); they override ``streams``.

        Raises:
            TypeError: a keyword that names no stream field.
            DataError: a stream missing, unregistered or malformed (`validate`).
        """
        unknown = sorted(set(fields) - set(_ATTRS))
        if unknown:
            raise TypeError(
                f"RawSweep() got unexpected keyword argument(s) {unknown}; fields by attribute: {sorted(_ATTRS)}"
            )
        self.streams = {name: dict(data) for name, data in (streams or {}).items()}
        for attr, value in fields.items():
            if value is not None:
                stream, name = _ATTRS[attr]
                self.streams.setdefault(stream, {})[name] = value
        if truth is not None:
            self.streams["truth"] = dict(truth)
        self.meta = {} if meta is None else meta
        self.unregistered = dict(unregistered or {})
        self.validate()

    @property
    def truth(self) -> Optional[dict[str, np.ndarray]]:
        return self.streams.get("truth")

    @truth.setter
    def truth(self, value: Optional[Mapping[str, np.ndarray]]) -> None:
        if value is None:
            self.streams.pop("truth", None)
        else:
            self.streams["truth"] = dict(value)

    def columns(self, name: str) -> dict[str, np.ndarray]:
        """Stream ``name`` as its on-disk columns (``mocap`` -> t, px, ..., qz).

        Args:
            name: a stream of this sweep.

        Returns:
            Column name -> (N,) array.
        """
        return stream_schema(name).to_columns(self.streams[name])

    def validate(self, source: str = "raw sweep") -> None:
        """Check every stream against its schema.

        Args:
            source: what the messages name as the sweep (a path, "raw sweep").

        Raises:
            DataError: a required stream missing, an unregistered stream, or a malformed one (naming the stream and
                field at fault).
        """
        for schema in STREAMS.values():
            if schema.required and schema.name not in self.streams:
                raise DataError(f"{source}: stream '{schema.name}' missing")
        for name, data in self.streams.items():
            if name not in STREAMS:
                raise DataError(
                    f"{source}: stream '{name}' is not registered "
                    f"(flexlearn.sensing.streams.register_stream); registered: {list(STREAMS)}"
                )
            problem = STREAMS[name].validate(data)
            if problem:
                raise DataError(f"{source}: {problem}")

    # ------------------------------------------------------------------ disk
    def save(self, path: str | Path) -> Path:
        """Write the sweep as a directory of Parquet tables (one per stream) atomically; return the path.

        The tables of `unregistered` streams are written back as read (unless a stream of that name is set).
        The sweep is checked first (`validate`): a stream changed or unregistered since is a `DataError`.

        Args:
            path: the sweep directory to write (replaced as a whole).

        Returns:
            ``path``.

        Raises:
            DataError: the sweep fails `validate`, or the directory holds files a sweep does not write.
        """
        path = Path(path)
        self.validate(source=f"{path}: raw sweep to save")
        _refuse_foreign_entries(path)
        with atomic_dir(path) as tmp:
            for name, blob in self.unregistered.items():
                if name not in self.streams:
                    (tmp / f"{name}.parquet").write_bytes(blob)
            for name, data in self.streams.items():
                pq.write_table(pa.table(STREAMS[name].to_columns(data)), tmp / f"{name}.parquet")
            meta = dict(self.meta, raw_schema_version=RAW_SCHEMA_VERSION)
            (tmp / "meta.json").write_text(json_text(meta))
        return path

    @classmethod
    def load(cls, path: str | Path) -> "RawSweep":
        """Read a sweep written by `save` (or by an ingester); errors name the file and the column.

        Args:
            path: the sweep directory (``<stream>.parquet`` tables and ``meta.json``).

        Returns:
            The sweep.

        Raises:
            DataError: no such directory, an empty one, or a table or ``meta.json`` that fails the checks.
        """
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise DataError(f"{path}: is a file, not a raw sweep directory (Parquet streams and meta.json)")
        if not path.is_dir():
            raise DataError(f"{path}: raw sweep directory not found")
        if not any(path.iterdir()):
            raise DataError(f"{path}: raw sweep directory is empty (expected mag.parquet, accel.parquet, ...)")
        streams = {}
        for name, schema in STREAMS.items():
            f = path / f"{name}.parquet"
            if schema.required or f.exists():
                table = read_parquet(f, f"stream file '{name}.parquet'")
                streams[name] = schema.from_columns(read_columns(table, f, schema.kinds, nullable=schema.nullable))
        meta_file = path / "meta.json"
        meta = (
            parse_json_object(meta_file.read_bytes(), str(meta_file), "raw sweep metadata")
            if meta_file.exists()
            else {}
        )
        sweep = cls.__new__(cls)
        sweep.streams, sweep.meta = streams, meta
        sweep.unregistered = {
            f.stem: f.read_bytes() for f in sorted(path.glob("*.parquet")) if f.stem not in STREAMS and f.is_file()
        }
        sweep.validate(source=str(path))
        return sweep


def quantize_times(raw: RawSweep) -> RawSweep:
    """A copy of ``raw`` with every time (fields of unit ``s``) rounded to whole nanoseconds: t → round(t·1e9)·1e-9.

    Recordings (rosbag2 stamps, serial dumps with integer clocks) resolve time in nanoseconds at best; this
    is the sweep as such a recording of it holds it (see `flexlearn.ingest.assemble`).

    Args:
        raw: the sweep (not changed).

    Returns:
        The copy.
    """

    def q(t: np.ndarray) -> np.ndarray:
        return np.round(np.asarray(t, dtype=np.float64) * 1e9).astype(np.int64) * 1e-9

    streams = {
        name: {
            f.name: q(data[f.name]) if f.is_time else np.array(data[f.name], copy=True) for f in STREAMS[name].fields
        }
        for name, data in raw.streams.items()
    }
    return RawSweep(streams=streams, meta=dict(raw.meta), unregistered=raw.unregistered)
