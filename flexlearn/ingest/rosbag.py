"""Read the streams of a rosbag2 recording (MCAP or sqlite3 storage) with `rosbags`, no ROS installation.

`read_rosbag` opens the bag, checks that every mapped topic is present with the expected message type,
decodes the messages (CDR) with a typestore that knows the standard ROS 2 Humble types plus the custom
``.msg`` definitions of the topic map, and returns one `Stream` per mapped stream, its values converted to SI by
the topic's ``unit``/``scale``. A bag that cannot be opened or read to the end (truncated, corrupt) is a
`DataError` naming the file. An optional stream (`flexlearn.ingest.topic_map.is_required`) whose topic the bag
lacks, or holds no message of, is skipped with one log line; a required one is an error naming the topics of the
expected type the bag holds (the ``ingest.topics.<name>.topic=...`` override that would read one).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from flexlearn.errors import ConfigError, DataError
from flexlearn.ingest.records import NS, Stream, progress
from flexlearn.ingest.topic_map import IngestConfig, TopicSpec, is_required, schema_of, time_setting, unit_settings
from flexlearn.sensing.stream_schema import Field

log = logging.getLogger(__name__)


def make_typestore(msg_definitions: dict[str, str]) -> Any:
    """ROS 2 Humble typestore with the custom ``.msg`` texts registered (type name -> text).

    Args:
        msg_definitions: message type name (e.g. 'pkg/msg/Name') -> its ``.msg`` text.

    Returns:
        The rosbags typestore.

    Raises:
        ConfigError: a definition does not parse or cannot be registered.
    """
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
    """The rosbag2 directory (with metadata.yaml) for ``path`` (the directory or a storage file in it).

    Args:
        path: the bag directory or one of its storage files.

    Returns:
        The directory holding metadata.yaml.

    Raises:
        DataError: ``path`` is missing, an empty directory, or not in a directory with metadata.yaml.
    """
    root = path if path.is_dir() else path.parent
    if not path.exists():
        raise DataError(f"{path}: recording not found")
    if path.is_dir() and not any(path.iterdir()):
        raise DataError(
            f"{path}: the directory is empty; expected a rosbag2 recording (a directory with metadata.yaml and "
            "its .mcap or .db3 files), a *.csv or a *.jsonl serial dump"
        )
    if not (root / "metadata.yaml").is_file():
        storage = sorted(p.name for p in root.iterdir() if p.suffix in (".mcap", ".db3"))[:3]
        hint = (
            f"; it holds {storage} but no metadata.yaml (copy the whole directory `ros2 bag record` wrote)"
            if storage
            else ""
        )
        raise DataError(f"{path}: not a rosbag2 recording (expected a directory with metadata.yaml){hint}")
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
    """A coil on/off field as 1.0/0.0: a boolean, or an integer 0 or 1.

    Args:
        value: the field's value.
        field: the field's name.

    Returns:
        1.0 or 0.0.

    Raises:
        DataError: for anything else.
    """
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
    (`flexlearn.sensing.stream_schema.Field.ros`, or the topic map's ``field`` where a field has none)."""
    if name == "imu":
        return (
            lambda m: (
                *_vec(m.linear_acceleration),
                *_vec(m.angular_velocity),
                *_quat(m.orientation),
                float(m.orientation_covariance[0]),
                float(m.angular_velocity_covariance[0]),
            )
        ), {"accel": 3, "rate": 3, "orientation": 4, "orientation_cov0": 1, "rate_cov0": 1}
    readers = [_field_reader(f, f.ros or spec.field) for f in schema_of(name).values]
    widths = {col: f.width for f, (_, col) in zip(schema_of(name).values, readers)}
    return (lambda m: tuple(v for read, _ in readers for v in read(m))), widths


def _drop_hint(name: str) -> str:
    """How to read the recording without an optional stream ('' for a required one)."""
    return "" if is_required(name) else f"; ingest.topics.{name}=null reads the recording without it"


def _check_connections(
    root: Path, reader: Any, specs: dict[str, TopicSpec], store: Any, skipped: dict[str, str]
) -> dict[str, Any]:
    """Topic -> connection list for the mapped topics present. A required topic missing or empty and a wrong type
    raise `DataError`; an optional topic missing or empty is skipped (``skipped``: stream -> the line logged)."""
    present: dict[str, list[Any]] = {}
    for c in reader.connections:
        present.setdefault(c.topic, []).append(c)
    out = {}
    for name, spec in specs.items():
        conns = present.get(spec.topic)
        count = sum(c.msgcount for c in conns or ())
        if not count and not is_required(name):
            why = "is not in the recording" if not conns else "has no messages"
            skipped[name] = (
                f"{root}: topic '{spec.topic}' (optional stream '{name}') {why}; skipped "
                f"(ingest.topics.{name}=null leaves it out of the map)"
            )
            log.warning("%s", skipped[name])
            continue
        if not conns:
            taken = {sp.topic for sp in specs.values()}
            same = sorted(t for t, cs in present.items() if t not in taken and any(c.msgtype == spec.type for c in cs))
            hint = f"; to read {same[0]}: ingest.topics.{name}.topic={same[0]}" if same else ""
            raise DataError(
                f"{root}: topic '{spec.topic}' (stream '{name}', {spec.type}) is not in the recording; "
                f"topics present: {sorted(present)}{hint}"
            )
        for c in conns:
            if c.msgtype != spec.type:
                raise DataError(
                    f"{root}: topic '{spec.topic}' carries {c.msgtype}, expected {spec.type} (stream '{name}')"
                    f"{_drop_hint(name)}"
                )
        if spec.type not in store.types:
            raise ConfigError(
                f"config 'ingest.topics.{name}.type' = '{spec.type}': unknown message type; add its "
                ".msg text under ingest.msg_definitions"
            )
        if count == 0:
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
        {f"{f.name}_ns" if f.is_time else f.name for f in schema_of(name).values if f.is_time or f.kind == "int"}
        if name != "imu"
        else set()
    )
    for col, width in columns.items():
        dtype = np.int64 if col in int_columns else np.float64  # kept exact (ns stamps exceed 2^53)
        block = np.array(flat[j : j + width], dtype=dtype).reshape(width, len(rows)).T
        values[col] = block[:, 0] if width == 1 else np.ascontiguousarray(block)
        j += width
    return values


def open_bag(root: Path) -> Any:
    """An open rosbags `Reader` of the bag directory ``root``; one it cannot open is a `DataError` naming it.

    Args:
        root: the bag directory (`bag_root`).

    Returns:
        The open `Reader` (the caller closes it).

    Raises:
        DataError: the bag is truncated, corrupt or not rosbag2.
    """
    from rosbags.rosbag2 import Reader  # rosbags kept off the serial-dump (CSV/JSON lines) path

    try:
        reader = Reader(root)
        reader.open()
    except Exception as exc:  # rosbags raises ReaderError and lower-level errors for broken files
        raise DataError(
            f"{root}: cannot open the rosbag2 recording: truncated, corrupt or not rosbag2 "
            f"({type(exc).__name__}: {exc})"
        ) from exc
    return reader


def read_rosbag(
    path: Path,
    cfg: IngestConfig,
    show_progress: Optional[bool] = None,
    specs: Optional[dict[str, TopicSpec]] = None,
    skipped: Optional[dict[str, str]] = None,
) -> dict[str, Stream]:
    """Streams of the mapped topics of the rosbag2 recording at ``path``, in bag order (checks not applied).

    Args:
        path: the bag directory (or a storage file in it).
        cfg: the topic map.
        show_progress: progress bar on stderr (None: when stderr is a terminal).
        specs: the streams to read (default: every stream of the map).
        skipped: collects optional streams the bag lacks (stream -> the line logged).
    """
    root = bag_root(Path(path))
    specs = cfg.topic_specs() if specs is None else specs
    skipped = {} if skipped is None else skipped
    store = make_typestore(cfg.msg_definitions)
    reader = open_bag(root)
    try:
        conns = _check_connections(root, reader, specs, store, skipped)
        specs = {name: spec for name, spec in specs.items() if name not in skipped}
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
                        f"a field stream '{name}' needs ({exc}){_drop_hint(name)}"
                    ) from exc
                except Exception as exc:
                    raise DataError(
                        f"{root}: topic '{conn.topic}' message {len(rows[name])} cannot be decoded as "
                        f"{conn.msgtype} ({type(exc).__name__}: {exc}){_drop_hint(name)}"
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
    return {
        name: _stream(root, name, spec, extract[name][1], (rows, stamps, recv, keys)) for name, spec in specs.items()
    }


def _stream(root: Path, name: str, spec: TopicSpec, columns: dict[str, int], read: tuple) -> Stream:
    """The `Stream` of one topic from its decoded rows, stamps, receive times and raw bytes (``read``: four dicts by
    stream), its values converted to SI by the topic's unit keys."""
    rows, stamps, recv, keys = (d[name] for d in read)
    where = f"ingest.topics.{name}"
    units = unit_settings(name, spec, where)
    values = _column_arrays(name, columns, rows)
    for col, setting in units.items():
        if setting.factor != 1.0:
            values[col] = values[col] * setting.factor
    return Stream(
        name=name,
        source=f"{root}: topic '{spec.topic}'",
        stamp_ns=np.asarray(stamps, np.int64),
        values=values,
        receive_ns=np.asarray(recv, np.int64) if spec.stamp == "header" else None,
        keys=keys,
        continuous=name == "imu" or schema_of(name).continuous,
        units=units,
        time=time_setting(name, spec, where),
    )
