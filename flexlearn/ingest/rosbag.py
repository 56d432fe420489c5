"""Read the streams of a rosbag2 recording (MCAP or sqlite3 storage) with `rosbags`, no ROS installation.

`read_rosbag` opens the bag, checks that every mapped topic is present with the expected message type,
decodes the messages (CDR) with a typestore that knows the standard ROS 2 Humble types plus the custom
``.msg`` definitions of the topic map, and returns one `Stream` per mapped stream. A bag that cannot be
opened or read to the end (truncated, corrupt) is a `DataError` naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from flexlearn.errors import ConfigError, DataError
from flexlearn.ingest.records import NS, Stream, progress
from flexlearn.ingest.topic_map import IngestConfig, TopicSpec
from flexlearn.sensing.streams import STREAMS, Field


def make_typestore(msg_definitions: dict[str, str]) -> Any:
    """ROS 2 Humble typestore with the custom ``.msg`` texts registered (type name -> text)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore  # rosbags off the serial-dump path

    store = get_typestore(Stores.ROS2_HUMBLE)
    types: dict[str, Any] = {}
    for name, text in msg_definitions.items():
        try:
            types.update(get_types_from_msg(text, name))
        except Exception as exc:  # the parser raises its own exception types
            raise ConfigError(f"config 'ingest.msg_definitions.{name}': not a valid .msg definition ({exc})") from exc
    try:
        store.register(types)
    except Exception as exc:
        raise ConfigError(f"config 'ingest.msg_definitions': cannot register {sorted(types)} ({exc})") from exc
    return store


def bag_root(path: Path) -> Path:
    """The rosbag2 directory (with metadata.yaml) for ``path`` (the directory or a storage file in it)."""
    root = path if path.is_dir() else path.parent
    if not (root / "metadata.yaml").is_file():
        raise DataError(f"{path}: not a rosbag2 recording (expected a directory with metadata.yaml)")
    return root


def _stamp(msg: Any, spec: TopicSpec, receive_ns: int, topic: str) -> int:
    if spec.stamp == "receive":
        return receive_ns
    header = getattr(msg, "header", None)
    if header is None:
        raise ConfigError(f"config 'ingest.topics': topic '{topic}' ({spec.type}) has no header; set stamp: receive")
    return int(header.stamp.sec) * NS + int(header.stamp.nanosec)


def _time_ns(t: Any) -> int:
    return int(t.sec) * NS + int(t.nanosec)


def _vec(v: Any) -> tuple[float, float, float]:
    return (float(v.x), float(v.y), float(v.z))


def _quat(q: Any) -> tuple[float, float, float, float]:
    return (float(q.w), float(q.x), float(q.y), float(q.z))


def coil_state(value: Any, field: str) -> float:
    """A coil on/off field as 1.0/0.0: a boolean, or an integer 0 or 1; anything else is a `DataError`."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return float(bool(value))
    raise DataError(f"coil field '{field}' = {value!r}: expected a boolean (or 0/1)")


def _getpath(msg: Any, path: str) -> Any:
    for part in path.split("."):
        msg = getattr(msg, part)
    return msg


def _value(v: Any, width: int) -> tuple[float, ...]:
    """A message value as floats: a scalar (width 1), a vector x, y, z (3) or a quaternion w, x, y, z (4)."""
    if width == 1:
        return (float(v),)
    return _vec(v) if width == 3 else _quat(v)


def _field_reader(f: Field, path: str) -> tuple[Callable[[Any], tuple], str]:
    """(message -> the field's values, column name in the `Stream`): times become int ns (``<name>_ns``), integers
    stay int, booleans read by `coil_state`, floats by `_value`."""
    if f.is_time:
        return (lambda m: (_time_ns(_getpath(m, path)),)), f"{f.name}_ns"
    if f.kind == "int":
        return (lambda m: (int(_getpath(m, path)),)), f.name
    if f.kind == "bool":
        return (lambda m: (coil_state(_getpath(m, path), path),)), f.name
    return (lambda m: _value(_getpath(m, path), f.width)), f.name


# stream -> (row extractor, {column: width}); a row is a flat tuple of floats in column order.
def _extractor(name: str, spec: TopicSpec) -> tuple[Callable[[Any], tuple], dict[str, int]]:
    """The ``imu`` topic by hand (one message, three streams); every other stream from its registered fields
    (`flexlearn.sensing.streams.Field.ros`, or the topic map's ``field`` where a field has none)."""
    if name == "imu":
        return (
            lambda m: (
                *_vec(m.linear_acceleration),
                *_vec(m.angular_velocity),
                *_quat(m.orientation),
                float(m.orientation_covariance[0]),
            )
        ), {"accel": 3, "rate": 3, "orientation": 4, "orientation_cov0": 1}
    readers = [_field_reader(f, f.ros or spec.field) for f in STREAMS[name].values]
    widths = {col: f.width for f, (_, col) in zip(STREAMS[name].values, readers)}
    return (lambda m: tuple(v for read, _ in readers for v in read(m))), widths


def _check_connections(root: Path, reader: Any, specs: dict[str, TopicSpec], store: Any) -> dict[str, Any]:
    """Topic -> connection list for the mapped topics; missing topics and wrong types raise `DataError`."""
    present: dict[str, list[Any]] = {}
    for c in reader.connections:
        present.setdefault(c.topic, []).append(c)
    out = {}
    for name, spec in specs.items():
        conns = present.get(spec.topic)
        if not conns:
            raise DataError(
                f"{root}: topic '{spec.topic}' (stream '{name}', {spec.type}) is not in the recording; "
                f"topics present: {sorted(present)}"
            )
        for c in conns:
            if c.msgtype != spec.type:
                raise DataError(
                    f"{root}: topic '{spec.topic}' carries {c.msgtype}, expected {spec.type} (stream '{name}')"
                )
        if spec.type not in store.types:
            raise ConfigError(
                f"config 'ingest.topics.{name}.type' = '{spec.type}': unknown message type; add its "
                ".msg text under ingest.msg_definitions"
            )
        if sum(c.msgcount for c in conns) == 0:
            raise DataError(f"{root}: topic '{spec.topic}' (stream '{name}') has no messages")
        out[spec.topic] = conns
    return out


def _column_arrays(name: str, columns: dict[str, int], rows: list[tuple]) -> dict[str, np.ndarray]:
    """Column name -> (M,) or (M, width) array from the M decoded message rows of stream ``name``.

    ``columns`` maps each column to its width, in row order; time (``*_ns``) and integer fields of a registered
    stream stay int64 (ns stamps exceed 2^53), the rest are float64.
    """
    flat = list(zip(*rows)) or [()] * sum(columns.values())
    values, j = {}, 0
    int_columns = (
        {f"{f.name}_ns" if f.is_time else f.name for f in STREAMS[name].values if f.is_time or f.kind == "int"}
        if name in STREAMS
        else set()
    )
    for col, width in columns.items():
        dtype = np.int64 if col in int_columns else np.float64  # kept exact (ns stamps exceed 2^53)
        block = np.array(flat[j : j + width], dtype=dtype).reshape(width, len(rows)).T
        values[col] = block[:, 0] if width == 1 else np.ascontiguousarray(block)
        j += width
    return values


def read_rosbag(path: Path, cfg: IngestConfig, show_progress: Optional[bool] = None) -> dict[str, Stream]:
    """Streams of the mapped topics of the rosbag2 recording at ``path``, in bag order (checks not applied)."""
    from rosbags.rosbag2 import Reader  # rosbags kept off the serial-dump (CSV/JSON lines) path

    root = bag_root(Path(path))
    specs = cfg.topic_specs()
    store = make_typestore(cfg.msg_definitions)
    try:
        reader = Reader(root)
        reader.open()
    except Exception as exc:  # rosbags raises ReaderError and lower-level errors for broken files
        raise DataError(
            f"{root}: cannot open the rosbag2 recording: truncated, corrupt or not rosbag2 "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    try:
        conns = _check_connections(root, reader, specs, store)
        by_topic = {spec.topic: name for name, spec in specs.items()}
        extract = {name: _extractor(name, spec) for name, spec in specs.items()}
        rows: dict[str, list[tuple]] = {n: [] for n in specs}
        stamps: dict[str, list[int]] = {n: [] for n in specs}
        recv: dict[str, list[int]] = {n: [] for n in specs}
        keys: dict[str, list[bytes]] = {n: [] for n in specs}
        wanted = [c for cs in conns.values() for c in cs]
        expected = sum(c.msgcount for c in wanted)
        n_read = 0
        try:
            for conn, t_recv, data in progress(
                reader.messages(connections=wanted), expected, f"reading {root.name}", show_progress
            ):
                name = by_topic[conn.topic]
                spec = specs[name]
                try:
                    msg = store.deserialize_cdr(data, conn.msgtype)
                    row = extract[name][0](msg)
                except (AttributeError, TypeError) as exc:
                    raise DataError(
                        f"{root}: topic '{conn.topic}' message {len(rows[name])}: {conn.msgtype} lacks "
                        f"a field stream '{name}' needs ({exc})"
                    ) from exc
                except Exception as exc:
                    raise DataError(
                        f"{root}: topic '{conn.topic}' message {len(rows[name])} cannot be decoded as "
                        f"{conn.msgtype} ({type(exc).__name__}: {exc})"
                    ) from exc
                rows[name].append(row)
                stamps[name].append(_stamp(msg, spec, int(t_recv), conn.topic))
                recv[name].append(int(t_recv))
                keys[name].append(bytes(data))
                n_read += 1
        except (DataError, ConfigError):
            raise
        except Exception as exc:
            raise DataError(
                f"{root}: the recording is truncated or corrupt: reading stopped after {n_read} of "
                f"{expected} messages ({type(exc).__name__}: {exc})"
            ) from exc
        if n_read != expected:
            raise DataError(
                f"{root}: the recording is truncated or corrupt: {n_read} of the {expected} messages its "
                "metadata lists could be read"
            )
    finally:
        reader.close()
    out = {}
    for name, spec in specs.items():
        out[name] = Stream(
            name=name,
            source=f"{root}: topic '{spec.topic}'",
            stamp_ns=np.asarray(stamps[name], np.int64),
            values=_column_arrays(name, extract[name][1], rows[name]),
            receive_ns=np.asarray(recv[name], np.int64) if spec.stamp == "header" else None,
            keys=keys[name],
            continuous=name == "imu" or STREAMS[name].continuous,
        )
    return out
