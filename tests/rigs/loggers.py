"""A simulated sweep written as other people's loggers write their recordings, without flexlearn's writers.

Each writer takes a `flexlearn.sensing.streams.RawSweep` (what the rig's sensors put out) and records it the way a
third-party logger would, in one of the formats docs/ingest.md documents:

* `write_mcap` — ``ros2 bag record`` with the MCAP storage, through the ``rosbags`` library's own Writer and
  serializer; topics of another joint (sensor module 3, coil module 2), no motion capture; header stamps from the
  sensor's clock, receive times later by a random transport latency; the hand tumble as a second bag.
* `write_sqlite3` — an older ``ros2 bag`` (sqlite3 storage, rosbag2 metadata version 5) written with the
  ``sqlite3`` module, every message serialized to CDR by hand (`Cdr`); the tumble on its own topic.
* `write_csv` — a microcontroller's serial log through the ``csv`` module with its own columns and units: times
  in ms, field in mG (LIS3MDL counts / 6.842), specific force in mg, rate in °/s, kinds in capitals.
* `write_jsonl` — the documented serial layout (``conf/ingest/serial.yaml``: t in s, µT, g) as JSON lines.

Every writer also returns the ingest map overrides its recording needs (`Recording.overrides`; the CSV logger's
map is a file, `Recording.config_dir`). The sweep is timed from the logger's own clock: the hand tumble comes
first (``TUMBLE_SECONDS``), then the sweep. The sweep simulates no rotation rate: the gyroscope the loggers write
is its part's white noise (zero rate), quantised to its step.
"""

from __future__ import annotations

import csv
import json
import math
import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

NS = 1_000_000_000
TUMBLE_SECONDS = 20.0  # [s] of hand tumble before the sweep
G0 = 9.80665


@dataclass(frozen=True)
class LoggerOptions:
    """How the logger stamps and names things.

    Attributes:
        epoch_ns: the sensor clock's reading [ns] at the logger's time zero (the bag's stamps start here).
        sensor_module, coil_module: module numbers in the topic names.
        latency_ns: (min, max) transport latency [ns] between a header stamp and the bag's receive time.
        seed: seed of the latency and gyro-noise draws.
    """

    epoch_ns: int = 1_733_390_000 * NS + 123_456_789
    sensor_module: int = 3
    coil_module: int = 2
    latency_ns: tuple[int, int] = (400_000, 3_500_000)
    seed: int = 0


@dataclass
class Recording:
    """A written recording: its path, an optional separate tumble recording, the ingest map to read it with
    (``ingest`` group option, with ``config_dir`` added to Hydra's search path when set) and its overrides."""

    path: Path
    ingest: str
    overrides: list[str] = field(default_factory=list)
    tumble: Optional[Path] = None
    config_dir: Optional[Path] = None

    def ingest_args(self) -> list[str]:
        """The flexlearn-ingest arguments besides ``input``/``output``."""
        args = [f"--config-dir={self.config_dir}"] if self.config_dir else []
        args.append(f"ingest={self.ingest}")
        if self.tumble is not None:
            args.append(f"ingest.tumble_recording={self.tumble}")
        return args + self.overrides


# ---------------------------------------------------------------------------------------------- the logged data
@dataclass
class Logged:
    """What the logger saw, on its own clock [s] (tumble first): every stream as plain arrays."""

    mag_t: np.ndarray
    mag: np.ndarray  # [T], NaN: failed conversion
    imu_t: np.ndarray
    accel: np.ndarray  # [m/s²]
    gyro: np.ndarray  # [rad/s]
    coil_t: np.ndarray
    coil_on: np.ndarray
    pose_id: np.ndarray
    t_start: np.ndarray
    t_end: np.ndarray
    target: np.ndarray
    tumble_t: np.ndarray
    tumble: np.ndarray  # [T]


def _gyro_noise(raw: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    parts = raw.meta.get("sensors", {}).get("parts") or {}
    gyro = parts.get("imu", {}).get("gyro")
    if not gyro:
        return np.zeros((n, 3))
    rate = float(parts["imu"]["output_rate_hz"])
    w = rng.normal(0.0, gyro["noise_density"] * math.sqrt(rate / 2.0), (n, 3))
    return np.round(w / gyro["lsb"]) * gyro["lsb"]


def logged(raw: Any, seed: int = 0) -> Logged:
    """The sweep on the logger's clock: the tumble (``meta['tumble']`` readings at 50 Hz) from 0, the sweep after."""
    rng = np.random.default_rng(seed)
    tumble = np.asarray(raw.meta["tumble"]["mag"], dtype=np.float64).reshape(-1, 3)
    tumble_t = np.arange(tumble.shape[0]) / 50.0
    shift = TUMBLE_SECONDS + 1.0
    if tumble_t.size and tumble_t[-1] >= TUMBLE_SECONDS:
        raise ValueError(f"{tumble.shape[0]} tumble readings do not fit {TUMBLE_SECONDS} s at 50 Hz")
    return Logged(
        mag_t=raw.mag_t + shift,
        mag=raw.mag,
        imu_t=raw.accel_t + shift,
        accel=raw.accel,
        gyro=_gyro_noise(raw, raw.accel_t.size, rng),
        coil_t=raw.coil_t + shift,
        coil_on=raw.coil_on.astype(bool),
        pose_id=raw.pose_id,
        t_start=raw.pose_t_start + shift,
        t_end=raw.pose_t_end + shift,
        target=raw.target,
        tumble_t=tumble_t,
        tumble=tumble,
    )


def _stamp(t: np.ndarray, opts: LoggerOptions) -> np.ndarray:
    return opts.epoch_ns + np.round(np.asarray(t, dtype=np.float64) * 1e9).astype(np.int64)


def _covariance(var: float) -> list[float]:
    return [var, 0.0, 0.0, 0.0, var, 0.0, 0.0, 0.0, var]


# ------------------------------------------------------------------------------------------------- ROS 2 messages
HOLD_WINDOW = """std_msgs/Header header
uint32 pose_id
builtin_interfaces/Time t_start
builtin_interfaces/Time t_end
geometry_msgs/Vector3 target
"""
COIL_STATE = """std_msgs/Header header
bool on
"""
CUSTOM = {"flexlearn_msgs/msg/HoldWindow": HOLD_WINDOW, "flexlearn_msgs/msg/CoilState": COIL_STATE}


def topics(opts: LoggerOptions) -> dict[str, tuple[str, str]]:
    """Stream → (topic, type) of the logger (the documented topic names, for its modules)."""
    s, c = opts.sensor_module, opts.coil_module
    return {
        "mag": (f"/flexlearn/m{s}/magnetic_field", "sensor_msgs/msg/MagneticField"),
        "imu": (f"/flexlearn/m{s}/imu", "sensor_msgs/msg/Imu"),
        "coil": (f"/flexlearn/m{c}/coil", "flexlearn_msgs/msg/CoilState"),
        "poses": ("/flexlearn/rig/hold", "flexlearn_msgs/msg/HoldWindow"),
        "tumble": (f"/flexlearn/m{s}/tumble", "sensor_msgs/msg/MagneticField"),
    }


@dataclass
class Event:
    """One message: stream name, header stamp [ns], receive time [ns] and the values the message carries."""

    stream: str
    stamp_ns: int
    receive_ns: int
    values: dict[str, Any]


def events(log: Logged, opts: LoggerOptions, streams: tuple[str, ...]) -> list[Event]:
    """The messages of ``streams`` in the order the logger receives them (random transport latency)."""
    rng = np.random.default_rng(opts.seed + 1)
    out: list[Event] = []

    def add(stream: str, t: np.ndarray, rows: list[dict[str, Any]]) -> None:
        stamps = _stamp(t, opts)
        lat = rng.integers(opts.latency_ns[0], opts.latency_ns[1], stamps.size)
        out.extend(Event(stream, int(s), int(s + d), v) for s, d, v in zip(stamps, lat, rows))

    if "mag" in streams:
        add("mag", log.mag_t, [{"field": m} for m in log.mag.tolist()])
    if "tumble" in streams:
        add("tumble", log.tumble_t, [{"field": m} for m in log.tumble.tolist()])
    if "imu" in streams:
        add("imu", log.imu_t, [{"accel": a, "gyro": w} for a, w in zip(log.accel.tolist(), log.gyro.tolist())])
    if "coil" in streams:
        add("coil", log.coil_t, [{"on": bool(o)} for o in log.coil_on.tolist()])
    if "poses" in streams:
        ts, te = _stamp(log.t_start, opts), _stamp(log.t_end, opts)
        rows = [
            {"pose_id": int(p), "t_start": int(a), "t_end": int(b), "target": u}
            for p, a, b, u in zip(log.pose_id.tolist(), ts.tolist(), te.tolist(), log.target.tolist())
        ]
        add("poses", log.t_end, rows)  # published when the hold ends
    out.sort(key=lambda e: e.receive_ns)
    return out


# ---------------------------------------------------------------------------- MCAP through rosbags' own Writer
def _rosbags_message(store: Any, msgtype: str, e: Event, frame: str) -> Any:
    """The rosbags message object of event ``e``."""
    T = store.types
    Time, Header, Vector3 = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"], T["geometry_msgs/msg/Vector3"]

    def time(ns: int) -> Any:
        return Time(sec=int(ns // NS), nanosec=int(ns % NS))

    header = Header(stamp=time(e.stamp_ns), frame_id=frame)
    v = e.values
    if e.stream in ("mag", "tumble"):
        x, y, z = v["field"]
        return T[msgtype](header=header, magnetic_field=Vector3(x=x, y=y, z=z), magnetic_field_covariance=np.zeros(9))
    if e.stream == "imu":
        (ax, ay, az), (wx, wy, wz) = v["accel"], v["gyro"]
        return T[msgtype](
            header=header,
            orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
            orientation_covariance=np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0]),
            angular_velocity=Vector3(x=wx, y=wy, z=wz),
            angular_velocity_covariance=np.zeros(9),
            linear_acceleration=Vector3(x=ax, y=ay, z=az),
            linear_acceleration_covariance=np.zeros(9),
        )
    if e.stream == "coil":
        return T[msgtype](header=header, on=v["on"])
    x, y, z = v["target"]
    return T[msgtype](
        header=header,
        pose_id=v["pose_id"],
        t_start=time(v["t_start"]),
        t_end=time(v["t_end"]),
        target=Vector3(x=x, y=y, z=z),
    )


def _rosbags_bag(path: Path, evs: list[Event], names: dict[str, tuple[str, str]]) -> None:
    """Write ``evs`` into a new MCAP rosbag2 directory at ``path`` with rosbags' Writer."""
    from rosbags.rosbag2 import StoragePlugin, Writer  # test support: rosbags is a dependency of ingestion
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    for name, text in CUSTOM.items():
        store.register(get_types_from_msg(text, name))
    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        conns: dict[str, Any] = {}
        for e in evs:
            topic, msgtype = names[e.stream]
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=store)
            msg = _rosbags_message(store, msgtype, e, frame=topic.split("/")[2])
            writer.write(conns[topic], e.receive_ns, store.serialize_cdr(msg, msgtype))


def write_mcap(raw: Any, out: Path, opts: LoggerOptions = LoggerOptions()) -> Recording:
    """``out``/sweep (MCAP bag of mag, imu, coil, hold topics) and ``out``/tumble (a bag of the mag topic while
    the module is tumbled). Read with ``ingest=rig_ros2`` and the joint's module numbers, no motion capture."""
    log = logged(raw, opts.seed)
    names = topics(opts)
    out.mkdir(parents=True, exist_ok=True)
    _rosbags_bag(out / "sweep", events(log, opts, ("mag", "imu", "coil", "poses")), names)
    tumble_log = Logged(**{**log.__dict__, "mag_t": log.tumble_t, "mag": log.tumble})
    _rosbags_bag(out / "tumble", events(tumble_log, opts, ("mag",)), names)
    return Recording(
        out / "sweep",
        "rig_ros2",
        [f"ingest.sensor_module={opts.sensor_module}", f"ingest.coil_module={opts.coil_module}"],
        tumble=out / "tumble",
    )


# --------------------------------------------------------------------- sqlite3 bag with hand-written CDR messages
class Cdr:
    """A little-endian CDR (XCDR1) encoder: primitives aligned to their size from the start of the body."""

    def __init__(self) -> None:
        self.body = bytearray()

    def _put(self, fmt: str, value: Any) -> None:
        size = struct.calcsize(fmt)
        self.body += b"\0" * (-len(self.body) % size)
        self.body += struct.pack("<" + fmt, value)

    def header(self, stamp_ns: int, frame: str) -> None:
        self.time(stamp_ns)
        raw = frame.encode() + b"\0"
        self._put("I", len(raw))
        self.body += raw

    def time(self, ns: int) -> None:
        self._put("i", ns // NS)
        self._put("I", ns % NS)

    def f64(self, *values: float) -> None:
        for v in values:
            self._put("d", float(v))

    def u32(self, v: int) -> None:
        self._put("I", v)

    def bool(self, v: bool) -> None:
        self._put("B", 1 if v else 0)

    def bytes(self) -> bytes:
        return b"\x00\x01\x00\x00" + bytes(self.body)


def cdr_message(e: Event, frame: str) -> bytes:
    """CDR bytes of event ``e`` in the layout of its ROS 2 type (MagneticField, Imu, CoilState, HoldWindow)."""
    c = Cdr()
    c.header(e.stamp_ns, frame)
    v = e.values
    if e.stream in ("mag", "tumble"):
        c.f64(*v["field"], *([0.0] * 9))
    elif e.stream == "imu":
        c.f64(0.0, 0.0, 0.0, 1.0, -1.0, *([0.0] * 8))  # orientation (x, y, z, w): none (covariance[0] = -1)
        c.f64(*v["gyro"], *([0.0] * 9))
        c.f64(*v["accel"], *([0.0] * 9))
    elif e.stream == "coil":
        c.bool(v["on"])
    else:
        c.u32(v["pose_id"])
        c.time(v["t_start"])
        c.time(v["t_end"])
        c.f64(*v["target"])
    return c.bytes()


def _metadata_v5(db: str, evs: list[Event], names: dict[str, tuple[str, str]], used: list[str]) -> dict[str, Any]:
    first, last = evs[0].receive_ns, evs[-1].receive_ns
    counts = {s: sum(1 for e in evs if e.stream == s) for s in used}
    span = {"duration": {"nanoseconds": last - first}, "starting_time": {"nanoseconds_since_epoch": first}}
    return {
        "rosbag2_bagfile_information": {
            "version": 5,
            "storage_identifier": "sqlite3",
            "relative_file_paths": [db],
            **span,
            "message_count": len(evs),
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": names[s][0],
                        "type": names[s][1],
                        "serialization_format": "cdr",
                        "offered_qos_profiles": "",
                    },
                    "message_count": counts[s],
                }
                for s in used
            ],
            "compression_format": "",
            "compression_mode": "",
            "files": [{"path": db, **span, "message_count": len(evs)}],
        }
    }


def write_sqlite3(raw: Any, out: Path, opts: LoggerOptions = LoggerOptions()) -> Recording:
    """``out`` as a rosbag2 directory (metadata.yaml version 5 + one .db3) written with sqlite3, the tumble on
    its own MagneticField topic of the same bag (the map's ``tumble`` topic). Read with ``ingest=rig_ros2``."""
    names = topics(opts)
    used = ["mag", "imu", "coil", "poses", "tumble"]
    evs = events(logged(raw, opts.seed), opts, tuple(used))
    out.mkdir(parents=True, exist_ok=False)
    db = f"{out.name}_0.db3"
    con = sqlite3.connect(out / db)
    with con:
        con.execute(
            "CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL, "
            "serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL)"
        )
        con.execute(
            "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL, "
            "data BLOB NOT NULL)"
        )
        con.execute("CREATE INDEX timestamp_idx ON messages (timestamp ASC)")
        ids = {s: i + 1 for i, s in enumerate(used)}
        con.executemany("INSERT INTO topics VALUES (?, ?, ?, 'cdr', '')", [(ids[s], *names[s]) for s in used])
        con.executemany(
            "INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)",
            ((ids[e.stream], e.receive_ns, cdr_message(e, names[e.stream][0].split("/")[2])) for e in evs),
        )
    con.close()
    meta = _metadata_v5(db, evs, names, used)
    (out / "metadata.yaml").write_text(_yaml(meta))
    return Recording(
        out, "rig_ros2", [f"ingest.sensor_module={opts.sensor_module}", f"ingest.coil_module={opts.coil_module}"]
    )


def _yaml(data: Any, indent: int = 0) -> str:
    """Block YAML of nested dicts/lists of scalars (what ros2 bag writes; JSON scalars are valid YAML)."""
    pad = " " * indent
    lines = []
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:\n{_yaml(v, indent + 2)}")
            else:
                lines.append(f"{pad}{k}: {json.dumps(v)}")
    else:
        for v in data:
            body = _yaml(v, indent + 2).lstrip() if isinstance(v, (dict, list)) else json.dumps(v)
            lines.append(f"{pad}- {body}")
    return "\n".join(lines) + ("\n" if indent == 0 else "")


# ------------------------------------------------------------------------------------------------ serial dumps
MG_PER_COUNT = 1000.0 / 6842.0  # LIS3MDL at ±4 gauss: 6842 counts per gauss


def _rows(log: Logged) -> list[tuple[float, str, dict[str, Any]]]:
    """(time [s], kind, SI values) of every record, in time order (the microcontroller prints as it goes)."""
    rows: list[tuple[float, str, dict[str, Any]]] = []
    rows += [(t, "tumble", {"field": m}) for t, m in zip(log.tumble_t.tolist(), log.tumble.tolist())]
    rows += [(t, "mag", {"field": m}) for t, m in zip(log.mag_t.tolist(), log.mag.tolist())]
    rows += [(t, "acc", {"accel": a}) for t, a in zip(log.imu_t.tolist(), log.accel.tolist())]
    rows += [(t, "gyro", {"gyro": w}) for t, w in zip(log.imu_t.tolist(), log.gyro.tolist())]
    rows += [(t, "coil", {"on": bool(o)}) for t, o in zip(log.coil_t.tolist(), log.coil_on.tolist())]
    rows += [
        (b, "pose", {"pose_id": p, "t_start": a, "t_end": b, "target": u})
        for p, a, b, u in zip(log.pose_id.tolist(), log.t_start.tolist(), log.t_end.tolist(), log.target.tolist())
    ]
    rows.sort(key=lambda r: r[0])
    return rows


def _num(v: float, fmt: str) -> str:
    return "" if not math.isfinite(v) else format(v, fmt)


CSV_MAP = """# A logger's own serial CSV: times in ms, field in mG, specific force in mg, rate in deg/s.
defaults:
  - serial
  - _self_

description: second rig's serial logger (CSV, ms, mG, mg, deg/s)
serial:
  time_field: ms
  time_unit: ms
  kind_field: kind
  streams:
    mag: {kind: MAG, fields: [x, y, z], unit: mG, scale: 1.0}
    accel: {kind: ACC, fields: [x, y, z], unit: mg, scale: 1.0}
    rate: {kind: GYR, fields: [x, y, z], unit: deg/s, scale: 1.0}
    coil: {kind: COIL, fields: [state]}
    poses: {kind: HOLD, fields: [pose, start_ms, end_ms, dx, dy, dz]}
    tumble: {kind: CAL, fields: [x, y, z], unit: mG, scale: 1.0}
"""


def write_csv(raw: Any, out: Path, opts: LoggerOptions = LoggerOptions()) -> Recording:
    """``out``/log.csv (the csv module; columns ms,kind,x,y,z,state,pose,start_ms,end_ms,dx,dy,dz) and its
    ingest map ``out``/conf/ingest/rig_b_csv.yaml. A failed conversion is an empty field."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "log.csv"
    kinds = {"tumble": "CAL", "mag": "MAG", "acc": "ACC", "gyro": "GYR", "coil": "COIL", "pose": "HOLD"}
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["ms", "kind", "x", "y", "z", "state", "pose", "start_ms", "end_ms", "dx", "dy", "dz"])
        for t, kind, v in _rows(logged(raw, opts.seed)):
            row = [f"{t * 1e3:.4f}", kinds[kind]] + [""] * 10
            if kind in ("tumble", "mag"):
                counts = np.round(np.asarray(v["field"]) / 1e-4 * 6842.0)  # the chip's integer counts
                row[2:5] = [_num(c * MG_PER_COUNT, ".4f") for c in counts.tolist()]
            elif kind == "acc":
                row[2:5] = [_num(a / G0 * 1e3, ".3f") for a in v["accel"]]
            elif kind == "gyro":
                row[2:5] = [_num(math.degrees(x), ".4f") for x in v["gyro"]]
            elif kind == "coil":
                row[5] = "1" if v["on"] else "0"
            else:
                row[6:9] = [str(v["pose_id"]), f"{v['t_start'] * 1e3:.4f}", f"{v['t_end'] * 1e3:.4f}"]
                row[9:12] = [format(x, ".9f") for x in v["target"]]
            w.writerow(row)
    conf = out / "conf" / "ingest"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "rig_b_csv.yaml").write_text(CSV_MAP)
    return Recording(path, "rig_b_csv", config_dir=out / "conf")


def write_jsonl(raw: Any, out: Path, opts: LoggerOptions = LoggerOptions()) -> Recording:
    """``out``/dump.jsonl in the documented serial layout (``conf/ingest/serial.yaml``: t [s], µT, g); failed
    conversions are null; the tumble as records of kind ``tumble`` (mx, my, mz in µT)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "dump.jsonl"
    fmt: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "tumble": lambda v: dict(zip(("mx", "my", "mz"), _ut(v["field"]))),
        "mag": lambda v: dict(zip(("mx", "my", "mz"), _ut(v["field"]))),
        "acc": lambda v: dict(zip(("ax", "ay", "az"), (round(a / G0, 6) for a in v["accel"]))),
        "coil": lambda v: {"on": int(v["on"])},
        "pose": lambda v: {
            "pose_id": v["pose_id"],
            "t_start": round(v["t_start"], 9),
            "t_end": round(v["t_end"], 9),
            **dict(zip(("tx", "ty", "tz"), v["target"])),
        },
    }
    with open(path, "w") as fh:
        for t, kind, v in _rows(logged(raw, opts.seed)):
            if kind in fmt:
                fh.write(json.dumps({"t": round(t, 9), "type": kind, **fmt[kind](v)}) + "\n")
    return Recording(path, "serial")


def _ut(field_t: list[float]) -> list[Optional[float]]:
    return [round(x * 1e6, 4) if math.isfinite(x) else None for x in field_t]


WRITERS: dict[str, Callable[..., Recording]] = {
    "mcap": write_mcap,
    "sqlite3": write_sqlite3,
    "csv": write_csv,
    "jsonl": write_jsonl,
}
"""Format name → logger writer (``writer(raw, out_dir, opts) -> Recording``)."""
