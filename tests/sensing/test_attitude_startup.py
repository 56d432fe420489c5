"""Start-up and gap recovery on real data (BROAD development trial 24, tapping): started in motion and after a 1 s
NaN gap the inclination error over 5–10 s after the event stays under 2° (the issue's target), with the bias-
uncertainty time-constant schedule (`kernels.acc_time_constant`) doing measurably better than a fixed
τ_acc. Also the schedule itself (τ rises from its start value to τ_acc as the bias is learnt)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.sensing.attitude.offline import AttitudeConfig, run_filter
from flexlearn.sensing.attitude.orientation import inclination_error

from .conftest import BROAD, simulate, wobble

TRIAL24 = BROAD.parent / "broad" / "24_disturbed_tapping_A.hdf5"
needs_24 = pytest.mark.skipif(not TRIAL24.exists(), reason=f"BROAD trial 24 not found at {TRIAL24}")


def _load():
    h5py = pytest.importorskip("h5py")
    with h5py.File(TRIAL24, "r") as f:
        d = {k: f[k][:].astype(np.float64) for k in ("imu_acc", "imu_gyr", "opt_quat")}
        return d, f["movement"][:].astype(bool).ravel(), float(f.attrs["sampling_rate"])


def _events(movement: np.ndarray, fs: float) -> list:
    """Quarter and middle points of the motion phases longer than 12 s (the benchmark's event points)."""
    edges = np.flatnonzero(np.diff(np.r_[0, movement.astype(np.int8), 0]))
    pts = []
    for a, b in zip(edges[::2], edges[1::2]):
        if b - a > 12 * fs:
            pts += [a + (b - a) // 4, a + (b - a) // 2]
    return pts[:4]


def _rms(q, ref, t0: int, fs: float) -> float:
    mask = torch.zeros(len(q), dtype=torch.bool)
    mask[t0 + int(5 * fs) : t0 + int(10 * fs)] = True
    return inclination_error(torch.as_tensor(q), torch.as_tensor(ref), mask)["rms_deg"]


@needs_24
def test_start_in_motion_and_gap_on_broad_trial24():
    d, movement, fs = _load()
    events = _events(movement, fs)
    assert len(events) == 2
    start, start_fixed, gap = [], [], []
    for s0 in events:
        seg = slice(s0, s0 + int(12 * fs))
        for cfg, out in ((None, start), (AttitudeConfig(adaptive_tau=False), start_fixed)):
            q = run_filter(d["imu_gyr"][seg], d["imu_acc"][seg], fs, config=cfg).quat
            out.append(_rms(q, d["opt_quat"][seg], 0, fs))
        g, a = d["imu_gyr"].copy(), d["imu_acc"].copy()
        g[s0 : s0 + int(fs)] = np.nan
        a[s0 : s0 + int(fs)] = np.nan
        gap.append(_rms(run_filter(g, a, fs).quat, d["opt_quat"], s0 + int(fs), fs))
    print(f"trial 24 start in motion {np.round(start, 3)} (fixed τ {np.round(start_fixed, 3)}), gap {np.round(gap, 3)}")
    assert max(start) < 1.2  # measured 0.95, 0.65 (fixed τ_acc = 3 s: 1.28, 1.48)
    assert np.mean(start) < 0.75 * np.mean(start_fixed)  # measured 0.80 against 1.38
    assert max(gap) < 0.8  # measured 0.62, 0.39 (without gap_uncertainty 0.62, 0.40)


def test_time_constant_follows_the_bias_uncertainty():
    """τ = τ_acc (σ_motion/σ_b)^(1/3): 3·(0.1/0.5)^(1/3) = 1.75 s at the start (σ_b = σ_init), back to τ_acc
    once rest has pinned the bias down; fixed when adaptive_tau is off."""
    s = simulate(seconds=20.0)  # at rest: the bias is learnt from 1.5 s on
    st = run_filter(s["gyr"][:1], s["acc"][:1], s["rate"]).state
    assert math.isclose(st[148], 3.0 * (0.1 / 0.5) ** (1 / 3), rel_tol=0.006)
    assert math.isclose(run_filter(s["gyr"], s["acc"], s["rate"]).state[148], 3.0, rel_tol=0.005)  # 0.5 % steps
    fixed = run_filter(s["gyr"][:1], s["acc"][:1], s["rate"], config=AttitudeConfig(adaptive_tau=False)).state
    assert fixed[148] == 3.0


def test_gap_grows_an_inclination_uncertainty_that_shortens_tau():
    """Through a 1 s gap σ_θ grows by (‖ω_last‖ + σ_b)·1 s; the first sample after it runs at
    τ = τ_acc (σ_motion τ_acc/σ_θ)^(1/3) (σ_θ/τ_acc weighs like a bias uncertainty); σ_θ then decays as
    exp(−t/τ) and τ returns to the value without the mechanism. Off: σ_θ stays 0."""
    s = simulate(seconds=40.0, omega=wobble, seed=1)
    gyr, acc = s["gyr"].copy(), s["acc"].copy()
    gyr[2000:2100] = np.nan  # 20–21 s, turning at ~1 rad/s
    acc[2000:2100] = np.nan
    before = run_filter(gyr[:2000], acc[:2000], s["rate"]).state
    grown = run_filter(gyr[:2100], acc[:2100], s["rate"]).state
    expect = np.linalg.norm(before[26:29]) + math.sqrt(before[15:24:4].max())
    assert math.isclose(grown[149], expect, rel_tol=0.01)  # P grows a little through the gap
    first = run_filter(gyr[:2101], acc[:2101], s["rate"]).state
    sigma = max(grown[149] / 3.0, math.sqrt(first[15:24:4].max()))  # τ is set before σ_θ decays
    assert math.isclose(first[148], 3.0 * (math.radians(0.1) / sigma) ** (1 / 3), rel_tol=0.006)
    assert first[148] < 0.6
    end = run_filter(gyr, acc, s["rate"]).state
    off = run_filter(gyr, acc, s["rate"], config=AttitudeConfig(gap_uncertainty=False)).state
    assert end[149] < 1e-3 and off[149] == 0.0  # measured 1.1e-4 rad 19 s after the gap
    assert math.isclose(end[148], off[148], rel_tol=0.006)
