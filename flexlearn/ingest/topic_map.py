"""The ``ingest`` config block: which topic (or serial record) carries which quantity of which module.

A recording of one joint holds the child module's magnetometer and IMU, the parent module's coil state and
the rig controller's hold-window log (one message per stationary pose), optionally motion-capture ground
truth. Streams and the message types the reader understands:

| stream | rosbag2 message types                                     | becomes (raw-stream form)           |
| ------ | --------------------------------------------------------- | ----------------------------------- |
| mag    | sensor_msgs/msg/MagneticField                             | mag [T]                             |
| imu    | sensor_msgs/msg/Imu                                       | accel [m/s²], rate [rad/s], orientation |
| coil   | any message with a bool/int field (``field``), e.g. std_msgs/msg/Bool or a custom one | coil switch events |
| poses  | a hold-window message: pose_id, t_start, t_end (Time), target (Vector3) | poses table          |
| mocap  | geometry_msgs/msg/PoseStamped (optional)                  | mocap table (position, quaternion)  |

Besides ``imu`` (one topic, three streams), every stream of the registry `flexlearn.sensing.streams.STREAMS`
that is recorded (a ``stamp`` field) and whose fields say where their values are in a message (``Field.ros``;
the coil's on/off path comes from ``field``) can be mapped to a topic: a registered stream needs no code here.

Custom message types (the coil state, the hold window) are registered from their ``.msg`` text given in
``msg_definitions`` (type name -> text), so no ROS installation is needed. Serial dumps (CSV or JSON lines)
are described by `SerialMap`: one record per line, its kind in ``kind_field``, its fields per stream (the
stream's columns besides ``t``, `serial_width`) and a scale factor to SI units per stream (converted here,
once; it multiplies the fields `flexlearn.sensing.streams.Field.scaled` marks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from flexlearn.config import check, from_dict, to_dict
from flexlearn.errors import ConfigError
from flexlearn.sensing.streams import STREAMS, StreamSchema

FORMATS = ("auto", "rosbag2", "csv", "jsonl")
IMU_STREAMS = ("accel", "rate", "orientation")  # the streams a bag's 'imu' topic becomes (`assemble.split_imu`)
STAMPS = ("header", "receive")
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def serial_streams() -> tuple[str, ...]:
    """Streams a serial dump may hold: the registered streams that are recorded (a ``stamp`` field)."""
    return tuple(n for n, s in STREAMS.items() if s.stamp)


def bag_streams() -> tuple[str, ...]:
    """Streams a rosbag2 topic map may name: ``imu`` and the recorded streams not taken from it."""
    return ("imu", *(n for n in serial_streams() if n not in IMU_STREAMS))


def required_streams(bag: bool) -> tuple[str, ...]:
    """Streams a topic map (``bag``) or serial map must name: the registry's required streams."""
    req = tuple(n for n, s in STREAMS.items() if s.required)
    return ("imu", *(n for n in req if n not in IMU_STREAMS)) if bag else req


def serial_width(schema: StreamSchema) -> int:
    """Number of fields a serial record of the stream names: its columns besides the time ``t``."""
    return sum(f.width for f in schema.values)


def needs_field(schema: StreamSchema) -> bool:
    """The topic map must name the message field (``field``): a value field without a ``Field.ros`` path."""
    return any(not f.ros for f in schema.values)


@dataclass
class TopicSpec:
    """One stream of a rosbag2 recording.

    Attributes:
        topic: topic name, e.g. ``/flexlearn/m1/mag``.
        type: expected message type, e.g. ``sensor_msgs/msg/MagneticField``; another type on the topic is an error.
        stamp: time of a sample: ``header`` (header.stamp, the sensor clock) or ``receive`` (the bag's time).
        field: attribute path of the value of a stream whose field has no ``ros`` path (the coil: of the
            on/off value, ``data`` for std_msgs/msg/Bool).
    """

    topic: str = ""
    type: str = ""
    stamp: str = "header"
    field: str = ""

    def validate(self) -> None:
        check(bool(self.topic), "topic", self.topic, "must name a topic")
        check(self.type.count("/") == 2, "type", self.type, "expected a full type name 'package/msg/Name'")
        check(self.stamp in STAMPS, "stamp", self.stamp, f"expected one of {STAMPS}")


@dataclass
class SerialStream:
    """One record kind of a serial dump: ``kind`` value, field names (`serial_width` of them) and SI scale."""

    kind: str = ""
    fields: tuple[str, ...] = ()
    scale: float = 1.0


@dataclass
class SerialMap:
    """Serial dump layout (CSV with a header row, or JSON lines): time field and unit, kind field, streams."""

    time_field: str = "t"
    time_unit: str = "s"
    kind_field: str = "type"
    streams: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        check(self.time_unit in TIME_UNITS, "serial.time_unit", self.time_unit, f"expected one of {list(TIME_UNITS)}")

    def parsed(self) -> dict[str, SerialStream]:
        """Stream name -> `SerialStream`, validated (unknown stream, wrong field count, missing stream)."""
        out = {}
        allowed = serial_streams()
        for name, spec in self.streams.items():
            check(name in allowed, f"ingest.serial.streams.{name}", name, f"expected one of {allowed}")
            if spec is None:
                continue
            s = from_dict(SerialStream, spec, f"ingest.serial.streams.{name}")
            width = serial_width(STREAMS[name])
            check(
                len(s.fields) == width,
                f"ingest.serial.streams.{name}.fields",
                list(s.fields),
                f"expected {width} field name(s)",
            )
            check(s.scale > 0, f"ingest.serial.streams.{name}.scale", s.scale, "must be > 0")
            out[name] = s
        missing = [s for s in required_streams(bag=False) if s not in out]
        check(not missing, "ingest.serial.streams", sorted(self.streams), f"missing stream(s) {missing}")
        return out


@dataclass
class IngestChecks:
    """Which stream faults are dropped and counted, and which are errors. Times in s.

    Attributes:
        max_duplicate_fraction: identical repeated messages (same stamp, same bytes) are dropped and counted;
            more than this fraction of a stream is an error.
        max_reorder: a stamp earlier than its predecessor by at most this is re-sorted (counted); more is a
            backward clock jump (error).
        max_gap: a forward step between consecutive samples of a continuous stream (mag, imu) longer than
            this is a forward clock jump (error); shorter steps above ``gap_factor`` × the median period
            are gaps (counted).
        max_clock_jump: with header stamps, a change of (bag time − header stamp) between consecutive
            messages larger than this is a clock jump (error).
        gap_factor: a step longer than this many median periods counts as a gap.
    """

    max_duplicate_fraction: float = 0.01
    max_reorder: float = 0.05
    max_gap: float = 2.0
    max_clock_jump: float = 0.5
    gap_factor: float = 5.0

    def validate(self) -> None:
        check(
            0 <= self.max_duplicate_fraction < 1,
            "ingest.checks.max_duplicate_fraction",
            self.max_duplicate_fraction,
            "must be in [0, 1)",
        )
        for key in ("max_reorder", "max_gap", "max_clock_jump", "gap_factor"):
            check(getattr(self, key) > 0, f"ingest.checks.{key}", getattr(self, key), "must be > 0")


@dataclass
class IngestConfig:
    """The ``ingest`` group (a topic map). See the module docstring and ``conf/ingest/*.yaml``.

    Attributes:
        format: ``auto`` (from the input: a directory with metadata.yaml is rosbag2, ``*.csv``, ``*.jsonl``),
            ``rosbag2``, ``csv`` or ``jsonl``.
        coil_module, sensor_module: module numbers of the parent (coil) and child (sensors); metadata, and
            usable in topic names by interpolation.
        topics: rosbag2 stream name -> `TopicSpec` fields (``mocap`` may be null).
        msg_definitions: custom message type name -> ``.msg`` text.
        serial: `SerialMap` fields for CSV / JSON-lines dumps.
        checks: `IngestChecks` fields.
    """

    format: str = "auto"
    coil_module: int = 0
    sensor_module: int = 1
    topics: dict[str, Any] = field(default_factory=dict)
    msg_definitions: dict[str, Any] = field(default_factory=dict)
    serial: SerialMap = field(default_factory=SerialMap)
    checks: IngestChecks = field(default_factory=IngestChecks)
    description: str = ""

    def validate(self) -> None:
        check(self.format in FORMATS, "ingest.format", self.format, f"expected one of {FORMATS}")
        for name, text in self.msg_definitions.items():
            check(
                isinstance(text, str) and name.count("/") == 2,
                f"ingest.msg_definitions.{name}",
                text,
                "expected 'package/msg/Name: <.msg text>'",
            )

    def topic_specs(self) -> dict[str, TopicSpec]:
        """Stream name -> `TopicSpec` for the streams present (required ones checked)."""
        out = {}
        allowed = bag_streams()
        for name, spec in self.topics.items():
            check(name in allowed, f"ingest.topics.{name}", name, f"expected one of {allowed}")
            if spec is None:
                continue
            out[name] = from_dict(TopicSpec, spec, f"ingest.topics.{name}")
        missing = [s for s in required_streams(bag=True) if s not in out]
        check(not missing, "ingest.topics", sorted(self.topics), f"missing stream(s) {missing}")
        for name, spec in out.items():
            if name != "imu" and needs_field(STREAMS[name]):
                check(
                    bool(spec.field),
                    f"ingest.topics.{name}.field",
                    spec.field,
                    f"must name the field of the {name} message that holds the value (for the coil: its on/off "
                    "field, e.g. 'data' for std_msgs/msg/Bool)",
                )
        return out


def load_ingest_config(data: Optional[Mapping[str, Any]]) -> IngestConfig:
    """Build and validate an `IngestConfig` from a plain dict or OmegaConf node; errors name the key."""
    cfg = from_dict(IngestConfig, data, "ingest")
    if not cfg.topics and not cfg.serial.streams:
        raise ConfigError("config 'ingest': neither 'topics' (rosbag2) nor 'serial.streams' (CSV/JSON lines) given")
    return cfg


def describe(cfg: IngestConfig) -> dict[str, Any]:
    """JSON-serialisable form of the topic map, for provenance."""
    return to_dict(cfg)
