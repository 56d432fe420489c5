"""A small IMU simulator for the attitude tests (numpy, exact strapdown truth)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

G = 9.80665
BROAD = Path(__file__).resolve().parents[3] / "shared/data/external/broad_trial02_undisturbed_slow_rotation_B.hdf5"


def qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def rotmat(q):
    """(N, 4) → (N, 3, 3) sensor-to-world rotation matrices."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def simulate(
    seconds=40.0,
    rate=100.0,
    omega=None,
    lin=None,
    bias=(0.0, 0.0, 0.0),
    q0=(1.0, 0, 0, 0),
    noise=(0.003, 0.05, 0.3),
    mag_world=(0.0, 20.0, -40.0),
    mag_body_dist=None,
    seed=0,
):
    """Truth q (N, 4) sensor→ENU and readings gyr [rad/s], acc [m/s²], mag [µT] (N, 3).

    ``q_k = q_{k−1} ⊗ exp(½ ω_k Ts)`` from ``omega(t) → (N, 3)`` body rates; ``acc = Rᵀ(g e_z + lin(t))``;
    ``mag = Rᵀ m_world + mag_body_dist(t)`` (a field carried with the sensor, e.g. a magnet); white noise
    of std ``noise = (gyr, acc, mag)``; constant gyro ``bias``.
    """
    rng = np.random.default_rng(seed)
    n = int(round(seconds * rate))
    t = np.arange(n) / rate
    w = np.zeros((n, 3)) if omega is None else omega(t)
    q = np.empty((n, 4))
    cur = np.asarray(q0, dtype=float) / np.linalg.norm(q0)
    for k in range(n):
        nw = np.linalg.norm(w[k])
        if nw > 0:
            h = 0.5 * nw / rate
            cur = qmul(cur, np.r_[math.cos(h), math.sin(h) * w[k] / nw])
        q[k] = cur
    R = rotmat(q)
    f_world = np.tile([0.0, 0.0, G], (n, 1)) + (0 if lin is None else lin(t))
    acc = np.einsum("nji,nj->ni", R, f_world) + rng.normal(0, noise[1], (n, 3))
    mag = np.einsum("nji,j->ni", R, np.asarray(mag_world)) + rng.normal(0, noise[2], (n, 3))
    if mag_body_dist is not None:
        mag = mag + mag_body_dist(t)
    gyr = w + np.asarray(bias) + rng.normal(0, noise[0], (n, 3))
    return {"q": q, "gyr": gyr, "acc": acc, "mag": mag, "rate": rate, "t": t}


def wobble(t):
    """A smooth, rich body-rate profile (~0.5–1 rad/s), rest for the first 5 s."""
    w = np.stack([0.9 * np.sin(0.7 * t), 0.7 * np.sin(0.43 * t + 1.0), 0.6 * np.cos(0.29 * t)], 1)
    w[t < 5.0] = 0.0
    return w


@pytest.fixture
def imu_sim():
    return simulate
