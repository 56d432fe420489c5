"""Attitude filter: synthetic checks (tilt, bias, linear acceleration, the strapdown core) and real BROAD data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.config import from_dict
from flexlearn.errors import ConfigError, DataError
from flexlearn.lie import quat_exp, quat_multiply
from flexlearn.sensing.attitude.offline import run_filter
from flexlearn.sensing.attitude.orientation import (
    AttitudeConfig,
    estimate_orientation,
    heading_error,
    inclination_error,
    up_in_sensor,
)

from .conftest import BROAD, simulate, wobble


def _incl(q_est, q_ref, mask=None):
    return inclination_error(torch.as_tensor(q_est), torch.as_tensor(q_ref), mask)


def test_static_tilt():
    q0 = (math.cos(0.4), math.sin(0.4) * 0.6, math.sin(0.4) * 0.8, 0.0)  # 46° tilt
    s = simulate(seconds=20.0, q0=q0)
    q = estimate_orientation(s["acc"], s["gyr"], s["rate"])
    assert q.shape == (len(s["acc"]), 4) and q.dtype == torch.float64
    assert torch.allclose(q.norm(dim=-1), torch.ones(len(q), dtype=torch.float64), atol=1e-12)
    assert bool((q[:, 0] >= 0).all())
    res = _incl(q, s["q"], torch.as_tensor(s["t"] > 3.0))
    assert res["max_deg"] < 0.2  # acc noise 0.05 m/s² averaged over τ_acc


def test_constant_rotation_with_bias():
    """Rest (bias learnt there), then a constant rate about a tilted axis with a 0.5 °/s bias per axis."""
    bias = np.deg2rad([0.5, -0.5, 0.4])
    s = simulate(seconds=60.0, omega=lambda t: np.where(t[:, None] > 8.0, [0.3, 0.2, 0.5], 0.0), bias=bias)
    q, info = estimate_orientation(s["acc"], s["gyr"], s["rate"], return_info=True)
    b = info["bias"]
    assert np.allclose(b[int(7.9 * s["rate"])].numpy(), bias, atol=np.deg2rad(0.05))  # rest estimate
    assert np.allclose(b[-1, :2].numpy(), bias[:2], atol=np.deg2rad(0.15))  # still right while turning
    assert _incl(q, s["q"], torch.as_tensor(s["t"] > 8.0))["rms_deg"] < 0.3


def test_linear_acceleration_rejection():
    """3 m/s² horizontal shaking at 0.5 Hz would tilt an accelerometer-only estimate by up to 17°."""
    lin = lambda t: np.stack([3.0 * np.sin(np.pi * t), 2.0 * np.cos(0.8 * np.pi * t), 0 * t], 1)  # noqa: E731
    s = simulate(seconds=60.0, omega=wobble, lin=lin, seed=1)
    q = estimate_orientation(s["acc"], s["gyr"], s["rate"])
    after = torch.as_tensor(s["t"] > 10.0)
    acc_only = np.degrees(
        np.arccos(
            np.clip(
                np.einsum(
                    "ni,ni->n",
                    s["acc"] / np.linalg.norm(s["acc"], axis=1, keepdims=True),
                    up_in_sensor(torch.as_tensor(s["q"])).numpy(),
                ),
                -1,
                1,
            )
        )
    )
    assert acc_only[s["t"] > 10.0].max() > 12.0
    assert _incl(q, s["q"], after)["rms_deg"] < 1.0


def test_nine_axis_heading_and_inclination():
    s = simulate(seconds=40.0, omega=wobble, seed=2)
    q9, info = estimate_orientation(s["acc"], s["gyr"], s["rate"], mag=s["mag"], return_info=True)
    q6 = estimate_orientation(s["acc"], s["gyr"], s["rate"])
    late = torch.as_tensor(s["t"] > 10.0)
    assert heading_error(q9, torch.as_tensor(s["q"]), late)["max_deg"] < 1.5
    assert torch.allclose(up_in_sensor(q9), up_in_sensor(q6), atol=1e-12)  # mag never touches inclination
    # the field is accepted as reference after 5 s of turning faster than 20 °/s (here at 10.7 s)
    assert not bool(info["mag_disturbed"][torch.as_tensor(s["t"] > 15.0)].any())


def test_nan_and_inf_skipped_and_counted():
    s = simulate(seconds=12.0, omega=wobble)
    acc, gyr = s["acc"].copy(), s["gyr"].copy()
    acc[300:320] = np.nan
    gyr[500] = np.inf
    gyr[700, 1] = np.nan
    q, info = estimate_orientation(torch.as_tensor(acc), torch.as_tensor(gyr), s["rate"], return_info=True)
    assert torch.isfinite(q).all()
    assert info["n_skipped"] == 22 and int(info["skipped"].sum()) == 22
    assert _incl(q, s["q"], torch.as_tensor(s["t"] > 8.0))["rms_deg"] < 1.0


def test_bad_shapes_rates_and_config():
    s = simulate(seconds=3.0)
    with pytest.raises(DataError, match="shape"):
        estimate_orientation(s["acc"][:, :2], s["gyr"], s["rate"])
    with pytest.raises(DataError, match="same N"):
        estimate_orientation(s["acc"][:-1], s["gyr"], s["rate"])
    with pytest.raises(ConfigError, match="rate_hz"):
        estimate_orientation(s["acc"], s["gyr"], -1.0)
    with pytest.raises(ConfigError, match="tau_acc"):
        from_dict(AttitudeConfig, {"tau_acc": 0.0})
    with pytest.raises(DataError, match="no finite"):
        estimate_orientation(np.full((5, 3), np.nan), np.zeros((5, 3)), 100.0)


def test_up_direction_convention():
    # a sensor rolled by +90° about x: its y axis points up in the world
    q = torch.tensor([math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0], dtype=torch.float64)
    assert torch.allclose(up_in_sensor(q), torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64), atol=1e-12)


def test_strapdown_matches_lie_core():
    """With the accelerometer silent (all-zero samples are ignored) the filter is pure strapdown."""
    rate, n = 100.0, 200
    t = np.arange(n) / rate
    w = np.stack([0.5 * np.sin(t), 0.3 * np.cos(2 * t), -0.4 + 0 * t], 1)
    q = run_filter(w, np.zeros((n, 3)), rate).quat
    cur = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    wt = torch.as_tensor(w)
    for k in range(n):
        cur = quat_multiply(cur, quat_exp(wt[k] / rate))
    assert np.allclose(q[-1], (cur * torch.sign(cur[0])).numpy(), atol=1e-12)


def _broad():
    h5py = pytest.importorskip("h5py")
    with h5py.File(BROAD, "r") as f:
        return (
            {k: f[k][:] for k in ("imu_acc", "imu_gyr", "imu_mag", "opt_quat")},
            f["movement"][:].astype(bool).ravel(),
            float(f.attrs["sampling_rate"]),
        )


@pytest.mark.skipif(not BROAD.exists(), reason=f"BROAD trial 02 not found at {BROAD} (shared data not laid out)")
def test_broad_trial02_inclination_and_heading():
    """Measured 0.429° inclination (6D, = VQF 6D) and 1.31° heading (9D, = VQF 9D); bounds with ~15 % margin."""
    d, movement, fs = _broad()
    ref, mask = torch.as_tensor(d["opt_quat"]), torch.as_tensor(movement)
    q6 = estimate_orientation(d["imu_acc"], d["imu_gyr"], fs)
    q9 = estimate_orientation(d["imu_acc"], d["imu_gyr"], fs, mag=d["imu_mag"])
    inc, head = inclination_error(q6, ref, mask), heading_error(q9, ref, mask)
    print(f"BROAD 02: inclination {inc['rms_deg']:.3f}° over {inc['n']} samples, heading {head['rms_deg']:.3f}°")
    assert inc["rms_deg"] < 0.5
    assert head["rms_deg"] < 1.5
