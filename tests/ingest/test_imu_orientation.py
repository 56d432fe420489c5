"""IMU messages without an orientation (REP 145): ingestion computes it with the attitude filter and says so."""

from __future__ import annotations

import math

import numpy as np

from flexlearn.ingest.assemble import split_imu
from flexlearn.ingest.records import Stream
from flexlearn.sensing.attitude.orientation import inclination_error

G = 9.80665


def _imu_stream(seconds: float = 20.0, rate: float = 100.0, reported: bool = False):
    """A sensor turning at a constant 0.6 rad/s about a 40°-tilted body axis, 0.3 °/s gyro bias: IMU messages
    (accel [m/s²], rate [rad/s], orientation, orientation_cov0) and the true sensor → world quaternions."""
    n = int(seconds * rate)
    axis = np.array([math.sin(0.7), 0.0, math.cos(0.7)])
    w = 0.6 * axis
    q = np.empty((n, 4))
    cur = np.array([math.cos(0.3), math.sin(0.3), 0.0, 0.0])  # starts tilted by 34°
    dq = np.r_[math.cos(0.3 / rate), math.sin(0.3 / rate) * axis]
    for k in range(n):
        q[k] = cur
        a, b = cur, dq
        cur = np.array([a[0] * b[0] - a[1:] @ b[1:], *(a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:]))])
    qw, qx, qy, qz = q.T
    up = np.stack([2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)], 1)  # Rᵀ e_z
    rng = np.random.default_rng(0)
    acc = G * up + rng.normal(0, 0.05, (n, 3))
    gyr = w + np.radians(0.3) + rng.normal(0, 0.003, (n, 3))
    stamp = 1_700_000_000 * 10**9 + np.round(np.arange(n) / rate * 1e9).astype(np.int64)
    cov0 = np.full(n, 0.01 if reported else -1.0)
    vals = {"accel": acc, "rate": gyr, "orientation": np.tile([1.0, 0, 0, 0], (n, 1)), "orientation_cov0": cov0}
    return Stream("imu", "bag: topic '/imu'", stamp, vals, continuous=True), q


def test_orientation_computed_when_the_imu_reports_none():
    imu, truth = _imu_stream()
    out, note = split_imu({"imu": imu, "mag": Stream("mag", "bag", imu.stamp_ns[:3], {"mag": np.zeros((3, 3))})})
    assert set(out) == {"accel", "rate", "orientation", "mag"}
    q = out["orientation"].values["orientation"]
    assert q.shape == (len(imu), 4) and np.isfinite(q).all()
    assert np.array_equal(out["orientation"].stamp_ns, imu.stamp_ns)
    assert note["orientation"] == "computed" and abs(note["rate_hz"] - 100.0) < 1e-3 and note["skipped_samples"] == 0
    late = np.arange(len(q)) >= 500  # from 5 s on
    err = inclination_error(q, truth, late)["max_deg"]
    assert err < 1.0, err  # measured 0.2°


def test_reported_orientation_is_kept_and_bad_imu_data_named():
    imu, _ = _imu_stream(seconds=3.0, reported=True)
    out, note = split_imu({"imu": imu})
    assert note == {"orientation": "reported", "messages_with_orientation": len(imu)}
    assert np.array_equal(out["orientation"].values["orientation"], imu.values["orientation"])
    imu, _ = _imu_stream(seconds=3.0)
    imu.values["rate"] = np.degrees(imu.values["rate"]) * 20  # °/s, and fast: refused by magnitude
    out, note = split_imu({"imu": imu})
    assert "orientation" not in out and note["orientation"] == "none"
    assert "'gyr'" in note["reason"] and "/imu" in note["reason"]
    assert split_imu({"mag": imu}) == ({"mag": imu}, {})
