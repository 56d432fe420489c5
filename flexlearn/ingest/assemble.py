"""Cleaned recording streams → the raw-stream form (`flexlearn.sensing.streams.RawSweep`) plus extra tables.

Times: every stamp is an integer number of nanoseconds on the recording's clock. The raw sweep's times are
seconds since the *time origin*, the whole second at or before the earliest sample or hold-window start:
t = (stamp − origin)·1e-9. Keeping the origin a whole second keeps the sub-second part exact, so a
simulated sweep written with stamps ``origin + round(t·1e9)`` comes back as exactly
`flexlearn.sensing.streams.quantize_times` of it. The origin is stored in ``meta['time_origin_ns']``.

Every cleaned stream becomes the stream of that name of the raw sweep, laid out by its registered schema
(`flexlearn.sensing.streams.STREAMS`): ``t`` from the stamps, a time field ``x`` from the stream's ``x_ns``
stamps, every other field as read. Optional streams without samples are left out. Besides the built-in
mag/accel/coil/poses these are ``rate`` and ``orientation`` (from the IMU: its own orientation or, when its
messages carry none, computed by the attitude filter — ``meta['imu_orientation']`` says which, see
`split_imu`), ``mocap`` and any registered stream the topic map names.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np

from flexlearn.errors import ConfigError, DataError
from flexlearn.ingest.records import NS, Stream
from flexlearn.sensing.streams import STREAMS, RawSweep

log = logging.getLogger(__name__)

UNIT_TOL = 1e-3  # |‖target‖ − 1| allowed in a hold-window message


def split_imu(streams: dict[str, Stream]) -> tuple[dict[str, Stream], dict[str, Any]]:
    """Replace a bag's 'imu' stream by 'accel', 'rate' and 'orientation' streams; return them and a note on
    where the orientation came from (empty when there is no 'imu' stream).

    Messages that report an orientation keep it (``{"orientation": "reported"}``). When none does (REP 145:
    ``orientation_covariance[0] = -1``), the orientation is computed from the IMU's own accelerometer and gyro
    by the attitude filter (`flexlearn.sensing.attitude.orientation.estimate_orientation`, 6-axis: world z up, heading
    that of the start) and the note says so, with the filter's sampling rate and skipped samples. IMU data
    that cannot give an orientation (wrong units, bad timestamps) leave it out, with the reason in the note.

    Args:
        streams: the bag's streams by name.

    Returns:
        (the streams with 'imu' replaced, the orientation note).
    """
    if "imu" not in streams:
        return streams, {}
    out = {k: v for k, v in streams.items() if k != "imu"}
    imu = streams["imu"]
    out["accel"] = Stream("accel", imu.source, imu.stamp_ns, {"accel": imu.values["accel"]}, continuous=True)
    has_rate = _reports_rate(imu)
    if has_rate.any():
        rate = np.where(has_rate[:, None], imu.values["rate"], np.nan)  # a message without one: missing
        out["rate"] = Stream("rate", imu.source, imu.stamp_ns, {"rate": rate}, continuous=True)
    else:
        log.info("%s: the IMU reports no angular velocity (REP 145): no 'rate' stream", imu.source)
    has_q = imu.values["orientation_cov0"] != -1.0  # REP 145: covariance[0] = -1 means "no orientation"
    if has_q.any():
        out["orientation"] = Stream(
            "orientation", imu.source, imu.stamp_ns[has_q], {"orientation": imu.values["orientation"][has_q]}
        )
        return out, {"orientation": "reported", "messages_with_orientation": int(has_q.sum())}
    q, note = _computed_orientation(imu)
    if q is not None:
        out["orientation"] = Stream("orientation", imu.source, imu.stamp_ns, {"orientation": q})
    return out, note


def _reports_rate(imu: Stream) -> np.ndarray:
    """(N,) bool: the messages that carry an angular velocity (REP 145: ``angular_velocity_covariance[0] = -1``
    means none; a source without that column reports it in every message)."""
    cov0 = imu.values.get("rate_cov0")
    return np.ones(len(imu), dtype=bool) if cov0 is None else np.asarray(cov0).reshape(-1) != -1.0


def _computed_orientation(imu: Stream) -> tuple[Optional[np.ndarray], dict[str, Any]]:
    """(N, 4) quaternions (w, x, y, z; sensor → world, z up) from the IMU's accel [m/s²] and rate [rad/s] at its
    stamps, and the provenance note; (None, note with the reason) when the data cannot give one."""
    from flexlearn.sensing.attitude.orientation import estimate_orientation  # torch + numba: off the ingest start-up

    note: dict[str, Any] = {
        "orientation": "computed",
        "method": "flexlearn.sensing.attitude.orientation.estimate_orientation",
        "mode": "6-axis (accelerometer + gyroscope): world z up, heading that of the start",
    }
    if len(imu) < 2:
        return None, dict(note, orientation="none", reason=f"{imu.source}: fewer than 2 IMU samples")
    try:
        t = (imu.stamp_ns - imu.stamp_ns[0]) * 1e-9  # [s] from the first message: exact at ns resolution
        rate = imu.values["rate"]
        if not _reports_rate(imu).any():  # no gyroscope: the tilt of gravity alone, heading held
            rate = np.zeros_like(rate)
            note["mode"] = "accelerometer only (the IMU reports no angular velocity): world z up, heading held"
        q, info = estimate_orientation(imu.values["accel"], rate, t=t, return_info=True)
    except (DataError, ConfigError) as e:  # e.g. gyro in °/s, timestamps that do not give a rate
        log.warning("%s: no orientation computed: %s", imu.source, e)
        return None, dict(note, orientation="none", reason=f"{imu.source}: {e}")
    note.update(rate_hz=info["rate_hz"], skipped_samples=int(info["n_skipped"]))
    return q.numpy(), note


def time_origin_ns(streams: dict[str, Stream]) -> int:
    """The whole second [ns] at or before the earliest stamp of any stream (sample or hold-window start).

    Args:
        streams: the streams by name (stamps and ``*_ns`` values [ns]); at least one must hold a message.

    Returns:
        The time origin [ns].
    """
    firsts = [
        int(t.min())
        for s in streams.values()
        if len(s)
        for t in (s.stamp_ns, *(v for k, v in s.values.items() if k.endswith("_ns")))
    ]
    return (min(firsts) // NS) * NS


def _seconds(ns: np.ndarray, origin: int) -> np.ndarray:
    return (np.asarray(ns, dtype=np.int64) - np.int64(origin)) * 1e-9


def _check_poses(s: Stream) -> None:
    """Hold windows: one message per pose, t_end ≥ t_start, disjoint windows, unit targets (else `DataError`)."""
    pid, ts, te, target = (s.values[k] for k in ("pose_id", "t_start_ns", "t_end_ns", "target"))
    uniq, counts = np.unique(pid, return_counts=True)
    if (counts > 1).any():
        raise DataError(
            f"{s.source}: pose_id {int(uniq[counts > 1][0])} is logged {int(counts.max())} times with "
            "different hold windows; expected one message per pose"
        )
    bad = np.flatnonzero(te < ts)
    if bad.size:
        raise DataError(f"{s.source}: pose_id {int(pid[bad[0]])} has t_end before t_start")
    order = np.argsort(ts, kind="stable")
    overlap = np.flatnonzero(ts[order][1:] < te[order][:-1])
    if overlap.size:
        a, b = order[overlap[0]], order[overlap[0] + 1]
        raise DataError(
            f"{s.source}: hold windows of pose_id {int(pid[a])} and pose_id {int(pid[b])} overlap by "
            f"{(te[a] - ts[b]) / NS:.3f} s; expected disjoint windows (did the clock jump back?)"
        )
    norm = np.linalg.norm(target, axis=1)
    bad = np.flatnonzero(~np.isfinite(norm) | (np.abs(norm - 1.0) > UNIT_TOL))
    if bad.size:
        raise DataError(
            f"{s.source}: pose_id {int(pid[bad[0]])} has target {target[bad[0]].tolist()} of norm "
            f"{norm[bad[0]]:.4g}; expected a unit direction"
        )


def _fields(name: str, s: Stream, origin: int) -> dict[str, np.ndarray]:
    """The stream's registered fields from a cleaned `Stream`: times in s from the origin, values by kind."""
    out = {}
    for f in STREAMS[name].fields:
        if f.name == "t":
            out["t"] = _seconds(s.stamp_ns, origin)
        elif f.is_time:
            out[f.name] = _seconds(s.values[f"{f.name}_ns"], origin)
        else:
            out[f.name] = np.ascontiguousarray(s.values[f.name], dtype=bool if f.kind == "bool" else None)
    return out


def assemble_raw(streams: dict[str, Stream], meta: dict[str, Any]) -> tuple[RawSweep, dict[str, dict[str, np.ndarray]]]:
    """Build the `RawSweep` (times relative to `time_origin_ns`) from cleaned streams.

    Args:
        streams: the cleaned streams by name.
        meta: the sweep's metadata (``time_origin_ns`` is added).

    Returns:
        (the `RawSweep`, the optional streams as their tables (column -> array)).
    """
    origin = time_origin_ns(streams)
    _check_poses(streams["poses"])
    data = {name: _fields(name, s, origin) for name, s in streams.items() if STREAMS[name].required or len(s)}
    raw = RawSweep(streams=data, meta=dict(meta, time_origin_ns=origin))
    return raw, {name: raw.columns(name) for name in data if not STREAMS[name].required}
