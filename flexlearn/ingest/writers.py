"""Write a raw sweep as a recording: a rosbag2 (MCAP or sqlite3) per a topic map, or a serial dump.

Used to turn simulated sweeps into the recordings the rig produces (tests, demos, replay). Stamps are
``epoch_ns + round(t·1e9)`` (a whole-second epoch, so ingestion recovers `quantize_times` of the sweep
exactly); the bag's receive time is the stamp plus ``latency_ns``. Hold-window messages are published when
the hold ends; motion-capture poses (if the sweep has ``truth`` and the map a ``mocap`` topic) once per pose
at mid-hold, as the rotation taking the straight axis e = (0, 0, −1) to the true direction u. IMU messages carry
the sweep's ``rate`` stream as their angular velocity; without one, zeros marked as no estimate (REP 145:
``angular_velocity_covariance[0] = −1``), which ingestion reads as no gyroscope.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Optional

import numpy as np

from flexlearn.atomic import atomic_dir, atomic_path
from flexlearn.data.units import tumble_factor
from flexlearn.ingest.records import NS
from flexlearn.ingest.rosbag import make_typestore
from flexlearn.ingest.topic_map import TIME_UNITS, IngestConfig, unit_settings
from flexlearn.sensing.streams import STREAMS, RawSweep

DEFAULT_EPOCH_NS = 1_700_000_000 * NS
DEFAULT_LATENCY_NS = 2_000_000


@dataclass
class Message:
    """One message to write: topic, type, bag receive time [ns], payload (a rosbags message object)."""

    topic: str
    msgtype: str
    receive_ns: int
    msg: Any


def _stamps(t: np.ndarray, epoch_ns: int) -> np.ndarray:
    return epoch_ns + np.round(np.asarray(t, dtype=np.float64) * 1e9).astype(np.int64)


def _rotation_quaternions(u: np.ndarray) -> np.ndarray:
    """(N, 4) quaternions (w, x, y, z) of the shortest rotation taking e = (0, 0, −1) to unit u (N, 3)."""
    e = np.array([0.0, 0.0, -1.0])
    q = np.concatenate([(1.0 + u @ e)[:, None], np.cross(e, u)], axis=-1)  # (1 + e·u, e × u), then normalised
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


NO_ORIENTATION_COVARIANCE = np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0])
"""``orientation_covariance`` of an IMU message without an orientation estimate (REP 145: element 0 is −1); the
same marks ``angular_velocity_covariance`` when the sweep has no ``rate`` stream."""
ZERO9 = np.zeros(9)
"""The covariance of a measured field: all zero, "unknown" in REP 145."""


def _mocap_truth(
    raw: RawSweep, truth: dict[str, np.ndarray], epoch_ns: int
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Motion-capture poses of the sweep's holds from its ``truth`` table: mid-hold stamps [ns] (P,), the rotation
    taking e to u as quaternions (P, 4) (w, x, y, z) and the true directions u (P, 3), in the pose log's order."""
    order = np.argsort(truth["pose_id"])
    rows = order[np.searchsorted(truth["pose_id"], raw.pose_id, sorter=order)]
    u = np.stack([truth[f"u_{c}"][rows] for c in "xyz"], axis=-1)
    mid = _stamps(0.5 * (raw.pose_t_start + raw.pose_t_end), epoch_ns).tolist()
    return mid, _rotation_quaternions(u), u


# long: 78 lines of code; its docstring documents all 4 parameters
def _imu_rates(raw: RawSweep) -> np.ndarray:
    """(N_a, 3) angular velocity [rad/s] at the accelerometer's times: the ``rate`` stream's samples where they
    share those times, else interpolated per axis; zeros without a ``rate`` stream (marked as none by REP 145)."""
    t = np.asarray(raw.accel_t, dtype=np.float64)
    if "rate" not in raw.streams:
        return np.zeros((t.shape[0], 3))
    rt = np.asarray(raw.streams["rate"]["t"], dtype=np.float64)
    rate = np.asarray(raw.streams["rate"]["rate"], dtype=np.float64).reshape(-1, 3)
    if rt.shape == t.shape and np.array_equal(rt, t):
        return rate
    return np.stack([np.interp(t, rt, rate[:, j]) for j in range(3)], -1)


class _SweepMessages:
    """The messages of one sweep on the topics of a map, built in the map's typestore (`sweep_messages`)."""

    def __init__(self, cfg: IngestConfig, epoch_ns: int, latency_ns: int) -> None:
        self.store = make_typestore(cfg.msg_definitions)
        self.specs = cfg.topic_specs()
        self.types = self.store.types
        self.epoch_ns, self.latency_ns = epoch_ns, latency_ns
        self.out: list[Message] = []

    def time(self, ns: int) -> Any:
        return self.types["builtin_interfaces/msg/Time"](sec=int(ns // NS), nanosec=int(ns % NS))

    def header(self, ns: int) -> Any:
        return self.types["std_msgs/msg/Header"](stamp=self.time(ns), frame_id="")

    def vector(self, v: list[float]) -> Any:
        return self.types["geometry_msgs/msg/Vector3"](x=v[0], y=v[1], z=v[2])

    def stamps(self, t: np.ndarray) -> list[int]:
        return _stamps(t, self.epoch_ns).tolist()

    def add(self, name: str, stamp_ns: int, msg: Any) -> None:
        spec = self.specs[name]
        self.out.append(Message(spec.topic, spec.type, int(stamp_ns) + self.latency_ns, msg))

    def fields(self, name: str, t: np.ndarray, values: np.ndarray) -> None:
        """``MagneticField`` messages of stream ``name`` (``mag`` or ``tumble``): times [s], fields (M, 3) [T]."""
        kind = self.types[self.specs[name].type]
        for ns, m in zip(self.stamps(t), values.tolist()):
            self.add(
                name, ns, kind(header=self.header(ns), magnetic_field=self.vector(m), magnetic_field_covariance=ZERO9)
            )

    def imu(self, raw: RawSweep) -> None:
        """``Imu`` messages: specific force, the ``rate`` stream (or none, REP 145), no orientation."""
        kind, quaternion = self.types[self.specs["imu"].type], self.types["geometry_msgs/msg/Quaternion"]
        rate_cov = ZERO9 if "rate" in raw.streams else NO_ORIENTATION_COVARIANCE
        for ns, a, w in zip(self.stamps(raw.accel_t), raw.accel.tolist(), _imu_rates(raw).tolist()):
            msg = kind(
                header=self.header(ns),
                orientation=quaternion(x=0.0, y=0.0, z=0.0, w=1.0),
                orientation_covariance=NO_ORIENTATION_COVARIANCE,
                angular_velocity=self.vector(w),
                angular_velocity_covariance=rate_cov,
                linear_acceleration=self.vector(a),
                linear_acceleration_covariance=ZERO9,
            )
            self.add("imu", ns, msg)

    def coil(self, raw: RawSweep) -> None:
        """Coil switches in the map's coil type (with a header when the type has one)."""
        spec = self.specs["coil"]
        kind = self.types[spec.type]
        for ns, on in zip(self.stamps(raw.coil_t), raw.coil_on.tolist()):
            fields = {spec.field: bool(on)}
            if "header" in kind.__dataclass_fields__:
                fields["header"] = self.header(ns)
            self.add("coil", ns, kind(**fields))

    def poses(self, raw: RawSweep) -> None:
        """Hold-window messages, published when the hold ends."""
        kind = self.types[self.specs["poses"].type]
        ts, te = self.stamps(raw.pose_t_start), self.stamps(raw.pose_t_end)
        for pid, a, b, u in zip(raw.pose_id.tolist(), ts, te, raw.target.tolist()):
            msg = kind(
                header=self.header(b), pose_id=int(pid), t_start=self.time(a), t_end=self.time(b), target=self.vector(u)
            )
            self.add("poses", b, msg)

    def mocap(self, raw: RawSweep, truth: dict[str, np.ndarray]) -> None:
        """Motion-capture poses at mid-hold: the rotation taking e = (0, 0, −1) to the true direction u."""
        pose_type, point = self.types["geometry_msgs/msg/Pose"], self.types["geometry_msgs/msg/Point"]
        quaternion, kind = self.types["geometry_msgs/msg/Quaternion"], self.types[self.specs["mocap"].type]
        mid, q, u = _mocap_truth(raw, truth, self.epoch_ns)
        for ns, qi, ui in zip(mid, q.tolist(), u.tolist()):
            orientation = quaternion(w=qi[0], x=qi[1], y=qi[2], z=qi[3])
            pose = pose_type(position=point(x=ui[0], y=ui[1], z=ui[2]), orientation=orientation)
            self.add("mocap", ns, kind(header=self.header(ns), pose=pose))


def sweep_messages(
    raw: RawSweep, cfg: IngestConfig, epoch_ns: int = DEFAULT_EPOCH_NS, latency_ns: int = DEFAULT_LATENCY_NS
) -> tuple[list[Message], Any]:
    """Messages of the sweep on the topics of ``cfg`` (sorted by receive time) and the typestore to write them.

    Args:
        raw: the sweep (times [s], SI values).
        cfg: the topic map (topics, message types, custom ``.msg`` definitions).
        epoch_ns: header stamp [ns] of the sweep's time 0.
        latency_ns: receive time minus header stamp [ns] of every message.

    Returns:
        (the messages, the rosbags typestore).
    """
    messages = _SweepMessages(cfg, epoch_ns, latency_ns)
    messages.fields("mag", raw.mag_t, raw.mag)
    messages.imu(raw)
    messages.coil(raw)
    messages.poses(raw)
    tumble = tumble_samples(raw)
    if "tumble" in messages.specs and tumble is not None:
        messages.fields("tumble", *tumble)
    if "mocap" in messages.specs and raw.truth is not None:
        messages.mocap(raw, raw.truth)
    messages.out.sort(key=lambda m: m.receive_ns)
    return messages.out, messages.store


def write_rosbag(
    path: str | Path, messages: Iterable[Message], store: Any, storage: Literal["mcap", "sqlite3"] = "mcap"
) -> Path:
    """Write ``messages`` (in order) as a rosbag2 directory with the given storage plugin, atomically.

    Args:
        path: the bag directory.
        messages: the messages.
        store: the typestore.
        storage: "mcap" or "sqlite3".

    Returns:
        ``path``.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer  # rosbags kept off the serial-dump path

    plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage]
    path = Path(path)
    with atomic_dir(path) as tmp:
        bag = tmp / path.name
        with Writer(bag, version=9, storage_plugin=plugin) as writer:
            conns: dict[tuple[str, str], Any] = {}
            for m in messages:
                key = (m.topic, m.msgtype)
                if key not in conns:
                    conns[key] = writer.add_connection(m.topic, m.msgtype, typestore=store)
                writer.write(conns[key], m.receive_ns, store.serialize_cdr(m.msg, m.msgtype))
        for f in bag.iterdir():  # the Writer wants to create its directory itself
            f.rename(tmp / f.name)
        bag.rmdir()
    return path


def _json_value(v: Any) -> Any:
    """NumPy scalars as JSON numbers; a non-finite float as null (JSON has no NaN)."""
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, (np.integer, np.bool_)):
        return int(v)
    return v


TUMBLE_RATE_HZ = 50.0
"""Rate [Hz] the hand tumble's readings are stamped at, ending one period before the sweep's first sample."""


def tumble_samples(raw: RawSweep) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(t (N,) [s], readings (N, 3) [T]) of the sweep's hand tumble (``meta['tumble']``), stamped at
    `TUMBLE_RATE_HZ` just before the sweep's earliest sample (t may be negative); None without one.

    Args:
        raw: the sweep.

    Returns:
        The tumble's times and readings, or None.
    """
    tumble = raw.meta.get("tumble") if isinstance(raw.meta, dict) else None
    readings = np.asarray(tumble.get("mag") or [], dtype=np.float64) if isinstance(tumble, dict) else np.zeros(0)
    if readings.size == 0:
        return None
    readings = readings.reshape(-1, 3) * tumble_factor(raw.meta, "T")  # a sweep's fields are in T
    stamped = [np.asarray(raw.streams[n][STREAMS[n].stamp]) for n in raw.streams if n in STREAMS and STREAMS[n].stamp]
    start = min((float(t.min()) for t in stamped if t.size), default=0.0)
    return start - np.arange(readings.shape[0], 0, -1) / TUMBLE_RATE_HZ, readings


def _serial_columns(raw: RawSweep, name: str, scale: float, unit: float) -> tuple[np.ndarray, list[np.ndarray]]:
    """Record times [s] and the serial field columns of stream ``name``: times in the dump's ``unit``, scaled
    fields divided by ``scale``, booleans as 0/1."""
    schema, data = STREAMS[name], raw.streams[name]
    columns: list[np.ndarray] = []
    for f in schema.values:
        v = np.asarray(data[f.name])
        v = v / unit if f.is_time else v / scale if f.scaled else v.astype(np.int64) if f.kind == "bool" else v
        columns += [v] if f.width == 1 else [v[:, j] for j in range(f.width)]
    return np.asarray(data[schema.stamp], dtype=np.float64), columns


def write_serial(raw: RawSweep, path: str | Path, cfg: IngestConfig, fmt: Literal["csv", "jsonl"] = "csv") -> Path:
    """Write the sweep as a serial dump in the layout of ``cfg.serial``.

    A record per sample of every stream the map names and the sweep holds (stamped by its schema's ``stamp`` field;
    values divided by each scale).

    Args:
        raw: the sweep.
        path: the file written.
        cfg: the topic map.
        fmt: "csv" or "jsonl".

    Returns:
        ``path``.
    """
    serial = cfg.serial
    streams = serial.parsed()
    unit = TIME_UNITS[serial.time_unit]
    records: list[tuple[float, dict[str, Any]]] = []
    tumble = tumble_samples(raw)
    for name in (*STREAMS, "tumble"):  # registry order, the hand tumble last
        if name in streams and (name in raw.streams or (name == "tumble" and tumble is not None)):
            factors = [u.factor for u in unit_settings(name, streams[name], f"ingest.serial.streams.{name}").values()]
            scale = factors[0] if factors else 1.0
            if name == "tumble" and tumble is not None:
                t, columns = tumble[0], list((tumble[1] / scale).T)
            else:
                t, columns = _serial_columns(raw, name, scale, unit)
            spec = streams[name]
            for i in range(t.shape[0]):
                rec = {serial.time_field: float(t[i]) / unit, serial.kind_field: spec.kind}
                rec.update({f: c[i] for f, c in zip(spec.fields, columns)})
                records.append((float(t[i]), rec))
    records.sort(key=lambda r: r[0])
    header = list(
        dict.fromkeys([serial.time_field, serial.kind_field, *(f for s in streams.values() for f in s.fields)])
    )

    def text(v: Any) -> str:
        return (
            repr(float(v))
            if isinstance(v, (float, np.floating))
            else str(int(v))
            if isinstance(v, (int, np.integer, bool, np.bool_))
            else str(v)
        )

    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        if fmt == "csv":
            f.write(",".join(header) + "\n")
            for _, rec in records:
                f.write(",".join(text(rec[c]) if c in rec else "" for c in header) + "\n")
        else:
            for _, rec in records:
                f.write(json.dumps({k: _json_value(v) for k, v in rec.items()}) + "\n")
    return path
