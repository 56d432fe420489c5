"""Recordings of a sweep written the way other loggers write them, without flexlearn's writers: rosbag2 bags through
rosbags' own `Writer` and typestore (standard message types, the hold window as a custom type from its .msg text),
serial dumps with the csv module, JSON lines by hand. Options choose units, time units, the tumble and what is left
out, so that the tests can make every mistake a user's logger makes."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

EPOCH_NS = 1_750_000_000 * 10**9
HOLD_MSG = """std_msgs/Header header
uint32 pose_id
builtin_interfaces/Time t_start
builtin_interfaces/Time t_end
geometry_msgs/Vector3 target
"""
COIL_MSG = """std_msgs/Header header
bool on
"""
TUMBLE_RATE_HZ = 100.0
TIME_FACTOR = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}  # numbers per second


@dataclass
class Logger:
    """What the logger writes: field unit factor (T -> numbers), acceleration factor (m/s² -> numbers), time unit,
    whether the tumble is written (in the recording or not at all), the coil as the custom CoilState (with a
    header) instead of std_msgs/Bool, and topics / record kinds left out."""

    field_per_tesla: float = 1.0
    accel_per_si: float = 1.0
    time_unit: str = "s"
    tumble: bool = True
    coil_custom: bool = False
    leave_out: tuple[str, ...] = ()
    topics: dict[str, str] = field(
        default_factory=lambda: {
            "mag": "/flexlearn/m1/magnetic_field",
            "imu": "/flexlearn/m1/imu",
            "coil": "/flexlearn/m0/coil",
            "poses": "/flexlearn/rig/hold",
            "tumble": "/flexlearn/m1/tumble",
            "mocap": "/mocap/m1/pose",
        }
    )


def _ns(t: np.ndarray) -> list[int]:
    return (EPOCH_NS + np.round(np.asarray(t, dtype=np.float64) * 1e9).astype(np.int64)).tolist()


def tumble_times(n: int) -> np.ndarray:
    """Times [s] of the tumble's readings: at 100 Hz, ending 5 s before the sweep's clock zero."""
    return -5.0 - (n - np.arange(n)) / TUMBLE_RATE_HZ


def write_bag(raw: Any, path: Path, storage: str = "mcap", opt: Optional[Logger] = None) -> Path:
    """The sweep ``raw`` as a rosbag2 bag written by rosbags' Writer: MagneticField, Imu, std_msgs/Bool coil (no
    header), a custom HoldWindow, the tumble on its own MagneticField topic."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    opt = opt or Logger()
    store = get_typestore(Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg(HOLD_MSG, "flexlearn_msgs/msg/HoldWindow"))
    store.register(get_types_from_msg(COIL_MSG, "flexlearn_msgs/msg/CoilState"))
    T = store.types
    Time, Header, Vec = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"], T["geometry_msgs/msg/Vector3"]
    Quat = T["geometry_msgs/msg/Quaternion"]

    def header(ns: int) -> Any:
        return Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id="m1")

    msgs: list[tuple[int, str, str, Any]] = []  # receive ns, stream, type, message
    mag_t = T["sensor_msgs/msg/MagneticField"]
    z9 = np.zeros(9)
    for ns, m in zip(_ns(raw.mag_t), (raw.mag * opt.field_per_tesla).tolist()):
        msgs.append((ns + 1_000_000, "mag", mag_t.__msgtype__, mag_t(header(ns), Vec(*m), z9)))
    if opt.tumble:
        tumble = np.asarray(raw.meta["tumble"]["mag"]) * opt.field_per_tesla
        for ns, m in zip(_ns(tumble_times(len(tumble))), tumble.tolist()):
            msgs.append((ns + 1_000_000, "tumble", mag_t.__msgtype__, mag_t(header(ns), Vec(*m), z9)))
    imu_t = T["sensor_msgs/msg/Imu"]
    cov = np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0])
    for ns, a in zip(_ns(raw.accel_t), (raw.accel * opt.accel_per_si).tolist()):
        msg = imu_t(header(ns), Quat(0.0, 0.0, 0.0, 1.0), cov, Vec(0.0, 0.0, 0.0), z9, Vec(*a), z9)
        msgs.append((ns + 1_000_000, "imu", imu_t.__msgtype__, msg))
    bool_t, coil_t = T["std_msgs/msg/Bool"], T["flexlearn_msgs/msg/CoilState"]
    for ns, on in zip(_ns(raw.coil_t), raw.coil_on.tolist()):
        if opt.coil_custom:
            msgs.append((ns + 1_000_000, "coil", "flexlearn_msgs/msg/CoilState", coil_t(header(ns), bool(on))))
        else:
            msgs.append((ns, "coil", bool_t.__msgtype__, bool_t(bool(on))))
    hold_t = T["flexlearn_msgs/msg/HoldWindow"]
    for pid, a, b, u in zip(raw.pose_id.tolist(), _ns(raw.pose_t_start), _ns(raw.pose_t_end), raw.target.tolist()):
        t0, t1 = Time(sec=a // 10**9, nanosec=a % 10**9), Time(sec=b // 10**9, nanosec=b % 10**9)
        msgs.append((b + 1_000_000, "poses", "flexlearn_msgs/msg/HoldWindow", hold_t(header(b), pid, t0, t1, Vec(*u))))
    msgs.sort(key=lambda m: m[0])
    plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage]
    with Writer(path, version=8, storage_plugin=plugin) as writer:
        conns: dict[str, Any] = {}
        for ns, stream, msgtype, msg in msgs:
            if stream in opt.leave_out:
                continue
            if stream not in conns:
                conns[stream] = writer.add_connection(opt.topics[stream], msgtype, typestore=store)
            writer.write(conns[stream], ns, store.serialize_cdr(msg, msgtype))
    return path


def serial_records(raw: Any, opt: Optional[Logger] = None) -> list[dict[str, Any]]:
    """The sweep as the microcontroller prints it: one record per sample, kinds mag/acc/coil/pose/tumble, times in
    ``opt.time_unit``, fields in µT × ``field_per_tesla`` / 1e6 ... i.e. the numbers ``opt`` asks for."""
    opt = opt or Logger(field_per_tesla=1e6, accel_per_si=1.0 / 9.80665)
    k = TIME_FACTOR[opt.time_unit]
    recs: list[tuple[float, dict[str, Any]]] = []
    for t, m in zip(raw.mag_t.tolist(), (raw.mag * opt.field_per_tesla).tolist()):
        recs.append((t, {"t": t * k, "type": "mag", "mx": m[0], "my": m[1], "mz": m[2]}))
    if opt.tumble:
        tumble = np.asarray(raw.meta["tumble"]["mag"]) * opt.field_per_tesla
        for t, m in zip(tumble_times(len(tumble)).tolist(), tumble.tolist()):
            recs.append((t, {"t": t * k, "type": "tumble", "mx": m[0], "my": m[1], "mz": m[2]}))
    for t, a in zip(raw.accel_t.tolist(), (raw.accel * opt.accel_per_si).tolist()):
        recs.append((t, {"t": t * k, "type": "acc", "ax": a[0], "ay": a[1], "az": a[2]}))
    for t, on in zip(raw.coil_t.tolist(), raw.coil_on.tolist()):
        recs.append((t, {"t": t * k, "type": "coil", "on": int(on)}))
    for pid, a, b, u in zip(raw.pose_id.tolist(), raw.pose_t_start.tolist(), raw.pose_t_end.tolist(), raw.target):
        rec = {"t": b * k, "type": "pose", "pose_id": pid, "t_start": a * k, "t_end": b * k}
        recs.append((b, {**rec, "tx": float(u[0]), "ty": float(u[1]), "tz": float(u[2])}))
    recs.sort(key=lambda r: r[0])
    return [r for _, r in recs if r["type"] not in opt.leave_out]


COLUMNS = ["t", "type", "mx", "my", "mz", "ax", "ay", "az", "on", "pose_id", "t_start", "t_end", "tx", "ty", "tz"]


def write_csv(raw: Any, path: Path, opt: Optional[Logger] = None) -> Path:
    """The serial records as CSV through the csv module (empty cells for fields a kind lacks)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, restval="")
        w.writeheader()
        for rec in serial_records(raw, opt):
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in rec.items()})
    return path


def write_jsonl(raw: Any, path: Path, opt: Optional[Logger] = None) -> Path:
    """The serial records as JSON lines, one object per line, written by hand (NaN as null)."""
    with open(path, "w") as f:
        for rec in serial_records(raw, opt):
            f.write(json.dumps({k: (None if isinstance(v, float) and v != v else v) for k, v in rec.items()}) + "\n")
    return path
