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
| tumble | sensor_msgs/msg/MagneticField (optional)                  | ``meta['tumble']`` readings [T]     |

Besides ``imu`` (one topic, three streams), every stream of the registry `flexlearn.sensing.streams.STREAMS`
that is recorded (a ``stamp`` field) and whose fields say where their values are in a message (``Field.ros``;
the coil's on/off path comes from ``field``) can be mapped to a topic: a registered stream needs no code here.

Besides the registry's streams a map may name ``tumble``: the module's hand tumble, magnetometer readings while
the module is turned by hand in the ambient field (a ``sensor_msgs/msg/MagneticField`` topic, or serial records of
their own kind with the three field values); ``tumble_recording`` names a separate recording of it instead (its
``mag`` stream is the tumble). Processing fits the tumble's ellipsoid and applies its W to ΔB.

Streams the registry does not require (``mocap``, ``tumble``, ``rate``, registered optional ones) are optional:
one the recording lacks is skipped with one log line; ``ingest.topics.<name>=null`` drops it from the map.

Custom message types (the coil state, the hold window) are registered from their ``.msg`` text given in
``msg_definitions`` (type name -> text), so no ROS installation is needed. Serial dumps (CSV or JSON lines)
are described by `SerialMap`: one record per line, its kind in ``kind_field``, its fields per stream (the
stream's columns besides ``t``, `serial_width`).

Units: every topic and serial stream takes ``unit`` (the unit of its numbers: ``uT``, ``mT``, ``G``, ``g``,
``deg/s``, ``mm``, ...; `flexlearn.ingest.units.UNITS`) and ``scale`` (an extra factor), converted to SI here,
once (they multiply the fields `flexlearn.sensing.stream_schema.Field.scaled` marks); an IMU topic's angular rate has
its own ``rate_unit``/``rate_scale``. Serial times are in ``serial.time_unit``. A continuous stream may declare
its sample rate (``rate_hz``), against which its time stamps are checked (`flexlearn.ingest.units`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from flexlearn.config import check, from_dict, to_dict
from flexlearn.errors import ConfigError
from flexlearn.ingest.units import TIME_UNITS, TimeSetting, UnitSetting
from flexlearn.sensing.stream_schema import Field, StreamSchema, time_field
from flexlearn.sensing.streams import STREAMS

FORMATS = ("auto", "rosbag2", "csv", "jsonl")
IMU_STREAMS = ("accel", "rate", "orientation")  # the streams a bag's 'imu' topic becomes (`assemble.split_imu`)
STAMPS = ("header", "receive")
TUMBLE = StreamSchema(
    "tumble",
    (time_field(), Field("mag", ("mx", "my", "mz"), unit="T", nullable=True, ros="magnetic_field")),
    doc="the module's hand tumble: magnetometer readings while it is turned by hand in the ambient field",
)
"""The hand tumble: read like ``mag``, kept in the raw sweep's ``meta['tumble']`` (not a stream of its own)."""


def schema_of(name: str) -> StreamSchema:
    """The schema of a stream a map may name: a registered one, or `TUMBLE`.

    Args:
        name: the stream's name ('tumble' or a key of `STREAMS`).

    Returns:
        Its `StreamSchema`.
    """
    return TUMBLE if name == "tumble" else STREAMS[name]


def serial_streams() -> tuple[str, ...]:
    """Streams a serial dump may hold: the registered streams that are recorded (a ``stamp`` field), and ``tumble``."""
    return (*(n for n, s in STREAMS.items() if s.stamp), "tumble")


def bag_streams() -> tuple[str, ...]:
    """Streams a rosbag2 topic map may name: ``imu`` and the recorded streams not taken from it."""
    return ("imu", *(n for n in serial_streams() if n not in IMU_STREAMS))


def is_required(name: str) -> bool:
    """Whether every recording must hold the stream (``imu`` does: it carries the required ``accel``).

    Args:
        name: the stream's name.

    Returns:
        True for a required stream; False for others and for names not in `STREAMS`.
    """
    return name == "imu" or (name in STREAMS and STREAMS[name].required)


def unit_settings(name: str, spec: "TopicSpec | SerialStream", where: str) -> dict[str, UnitSetting]:
    """Value column -> its `UnitSetting` for stream ``name`` (``imu``: accel and rate), validated.

    Args:
        name: the stream's name.
        spec: its topic or serial-stream spec.
        where: the config path named in errors.

    Returns:
        The unit settings by column.

    Raises:
        ConfigError: for a unit or scale the stream cannot take.
    """
    rate_keys = (getattr(spec, "rate_unit", ""), getattr(spec, "rate_scale", 1.0))  # a serial stream has none
    if name == "imu":
        out = {
            "accel": UnitSetting(where, "m/s^2", spec.unit, spec.scale),
            "rate": UnitSetting(where, "rad/s", *rate_keys, "rate_unit", "rate_scale"),
        }
    else:
        out = {f.name: UnitSetting(where, f.unit, spec.unit, spec.scale) for f in schema_of(name).values if f.scaled}
        check(
            bool(out) or (not spec.unit and spec.scale == 1.0),
            f"{where}.{'unit' if spec.unit else 'scale'}",
            spec.unit or spec.scale,
            f"stream '{name}' has no field a unit applies to",
        )
        rate_keys = (getattr(spec, "rate_unit", ""), getattr(spec, "rate_scale", 1.0))
        check(
            rate_keys == ("", 1.0), f"{where}.rate_unit", rate_keys[0], "only an 'imu' topic has a rate_unit/rate_scale"
        )
    for setting in out.values():
        setting.validate()
    return out


def time_setting(name: str, spec: "TopicSpec | SerialStream", where: str, unit_key: str = "", unit: str = "s"):
    """The `TimeSetting` of a continuous stream (declared ``rate_hz``, time unit key), or None for others.

    Args:
        name: the stream's name.
        spec: its topic or serial-stream spec.
        where: the config path named in errors.
        unit_key: the config key of the time unit.
        unit: the time unit.

    Returns:
        The `TimeSetting`, or None.

    Raises:
        ConfigError: for a negative ``rate_hz``.
    """
    continuous = name == "imu" or schema_of(name).continuous
    check(spec.rate_hz >= 0, f"{where}.rate_hz", spec.rate_hz, "must be >= 0 Hz (0: not declared)")
    return TimeSetting(f"{where}.rate_hz", spec.rate_hz, unit_key, unit) if continuous else None


def required_streams(bag: bool) -> tuple[str, ...]:
    """Streams a topic map (``bag``) or serial map must name: the registry's required streams.

    Args:
        bag: True for a rosbag2 topic map (``imu`` in place of the streams taken from it), False for a serial map.

    Returns:
        The required stream names.
    """
    req = tuple(n for n, s in STREAMS.items() if s.required)
    return ("imu", *(n for n in req if n not in IMU_STREAMS)) if bag else req


def serial_width(schema: StreamSchema) -> int:
    """Number of fields a serial record of the stream names: its columns besides the time ``t``.

    Args:
        schema: the stream's schema.

    Returns:
        The summed width of its value fields.
    """
    return sum(f.width for f in schema.values)


def needs_field(schema: StreamSchema) -> bool:
    """The topic map must name the message field (``field``): a value field without a ``Field.ros`` path.

    Args:
        schema: the stream's schema.

    Returns:
        Whether some value field has no ``ros`` path.
    """
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
        unit: unit of the values (`flexlearn.ingest.units.UNITS`, e.g. ``uT``; empty: SI); for ``imu`` of the
            linear acceleration.
        scale: extra factor to SI (with ``unit``: to that unit).
        rate_hz: declared sample rate [Hz] of a continuous stream, checked against its stamps (0: not declared).
        rate_unit, rate_scale: ``imu`` only: unit and factor of the angular rate (e.g. ``deg/s``).
    """

    topic: str = ""
    type: str = ""
    stamp: str = "header"
    field: str = ""
    unit: str = ""
    scale: float = 1.0
    rate_hz: float = 0.0
    rate_unit: str = ""
    rate_scale: float = 1.0

    def validate(self) -> None:
        check(bool(self.topic), "topic", self.topic, "must name a topic")
        check(self.type.count("/") == 2, "type", self.type, "expected a full type name 'package/msg/Name'")
        check(self.stamp in STAMPS, "stamp", self.stamp, f"expected one of {STAMPS}")


@dataclass
class SerialStream:
    """One record kind of a serial dump: ``kind`` value, field names (`serial_width` of them), the unit of the
    values (``unit``, e.g. ``uT``; empty: SI) and an extra factor (``scale``), and the declared sample rate
    [Hz] of a continuous stream (``rate_hz``, 0: not declared)."""

    kind: str = ""
    fields: tuple[str, ...] = ()
    scale: float = 1.0
    unit: str = ""
    rate_hz: float = 0.0


@dataclass
class SerialMap:
    """Serial dump layout (CSV with a header row, or JSON lines): time field and unit, kind field, streams."""

    time_field: str = "t"
    time_unit: str = "s"
    kind_field: str = "type"
    streams: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        check(
            self.time_unit in TIME_UNITS,
            "ingest.serial.time_unit",
            self.time_unit,
            f"expected one of {list(TIME_UNITS)}",
        )

    def parsed(self) -> dict[str, SerialStream]:
        """Stream name -> `SerialStream`, validated (unknown stream, wrong field count, missing stream)."""
        out = {}
        allowed = serial_streams()
        for name, spec in self.streams.items():
            check(name in allowed, f"ingest.serial.streams.{name}", name, f"expected one of {allowed}")
            if spec is None:
                continue
            s = from_dict(SerialStream, spec, f"ingest.serial.streams.{name}")
            width = serial_width(schema_of(name))
            check(
                len(s.fields) == width,
                f"ingest.serial.streams.{name}.fields",
                list(s.fields),
                f"expected {width} field name(s)",
            )
            unit_settings(name, s, f"ingest.serial.streams.{name}")
            time_setting(name, s, f"ingest.serial.streams.{name}")
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
        tumble_recording: a separate recording (rosbag2 directory or serial dump, read with this map) of the
            module's hand tumble: its ``mag`` stream is the tumble. Empty: the tumble is the ``tumble`` topic or
            serial stream, if the recording holds one.
    """

    format: str = "auto"
    coil_module: int = 0
    sensor_module: int = 1
    topics: dict[str, Any] = field(default_factory=dict)
    msg_definitions: dict[str, Any] = field(default_factory=dict)
    serial: SerialMap = field(default_factory=SerialMap)
    checks: IngestChecks = field(default_factory=IngestChecks)
    description: str = ""
    tumble_recording: str = ""

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
            unit_settings(name, out[name], f"ingest.topics.{name}")
            time_setting(name, out[name], f"ingest.topics.{name}")
        missing = [s for s in required_streams(bag=True) if s not in out]
        check(not missing, "ingest.topics", sorted(self.topics), f"missing stream(s) {missing}")
        for name, spec in out.items():
            if name != "imu" and needs_field(schema_of(name)):
                check(
                    bool(spec.field),
                    f"ingest.topics.{name}.field",
                    spec.field,
                    f"must name the field of the {name} message that holds the value (for the coil: its on/off "
                    "field, e.g. 'data' for std_msgs/msg/Bool)",
                )
        return out


def load_ingest_config(data: Optional[Mapping[str, Any]]) -> IngestConfig:
    """Build and validate an `IngestConfig` from a plain dict or OmegaConf node; errors name the key.

    Args:
        data: the ``ingest`` block; None: all defaults (then refused: no streams mapped).

    Returns:
        The validated `IngestConfig`.

    Raises:
        ConfigError: an unknown key, a bad value, or neither 'topics' nor 'serial.streams' given.
    """
    cfg = from_dict(IngestConfig, data, "ingest")
    if not cfg.topics and not cfg.serial.streams:
        raise ConfigError("config 'ingest': neither 'topics' (rosbag2) nor 'serial.streams' (CSV/JSON lines) given")
    if cfg.topics:  # every key checked now, whichever format the input turns out to be
        cfg.topic_specs()
    if cfg.serial.streams:
        cfg.serial.parsed()
    return cfg


def describe(cfg: IngestConfig) -> dict[str, Any]:
    """JSON-serialisable form of the topic map, for provenance.

    Args:
        cfg: the topic map.

    Returns:
        Its plain-dict form.
    """
    return to_dict(cfg)
