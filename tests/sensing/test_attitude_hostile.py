"""Attitude filter under hostile input: long gaps, gaps at the start, alternating and infinite samples, a corrupt
gyro value. The output is never NaN, the skipped count is exact, and the offline (numba) and runtime
(TorchScript) paths agree."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flexlearn.errors import DataError
from flexlearn.sensing.attitude.offline import run_filter
from flexlearn.sensing.attitude.orientation import estimate_orientation
from flexlearn.sensing.attitude.step import AttitudeStep

from .conftest import simulate
from .test_attitude_robust import SHAKE, TURN, _angle, _step_all


@pytest.fixture(scope="module")
def long_run():
    return simulate(seconds=100.0, omega=TURN, lin=SHAKE, seed=11)


def _spoiled(s, rows, which=("acc", "gyr"), value=np.nan):
    acc, gyr = s["acc"].copy(), s["gyr"].copy()
    for name, arr in (("acc", acc), ("gyr", gyr)):
        if name in which:
            arr[rows] = value
    return acc, gyr


@pytest.mark.parametrize(
    "rows, which, value, n_bad",
    [
        (slice(2000, 8000), ("acc", "gyr"), np.nan, 6000),  # a 60 s gap mid-motion
        (slice(0, 500), ("acc", "gyr"), np.nan, 500),  # 5 s missing from the very start
        (slice(0, 500), ("gyr",), np.nan, 500),  # gyro only, from the start
        (slice(0, 9997), ("acc", "gyr"), np.nan, 9997),  # all but the last 3 samples
        (slice(0, None, 2), ("acc", "gyr"), np.nan, 5000),  # every other sample
        (slice(100, 200), ("acc",), np.inf, 100),
        (slice(100, 200), ("gyr",), -np.inf, 100),
    ],
)
def test_gaps_never_give_nan_and_are_counted(long_run, rows, which, value, n_bad):
    acc, gyr = _spoiled(long_run, rows, which, value)
    for mag in (None, long_run["mag"]):
        q, info = estimate_orientation(acc, gyr, long_run["rate"], mag=mag, return_info=True)
        assert torch.isfinite(q).all() and torch.allclose(q.norm(dim=1), torch.ones(len(q), dtype=q.dtype))
        assert info["n_skipped"] == n_bad == int(info["skipped"].sum())


def test_sixty_second_timestamp_hole_is_filled_and_counted(long_run):
    keep = np.ones(len(long_run["t"]), bool)
    keep[2000:8000] = False
    q, info = estimate_orientation(
        long_run["acc"][keep], long_run["gyr"][keep], t=long_run["t"][keep], return_info=True
    )
    assert q.shape == (int(keep.sum()), 4) and torch.isfinite(q).all() and info["n_skipped"] == 6000


def test_all_nan_input_is_a_data_error(long_run):
    acc, gyr = _spoiled(long_run, slice(None))
    with pytest.raises(DataError, match="no finite sample"):
        estimate_orientation(acc, gyr, long_run["rate"])
    assert np.isfinite(run_filter(gyr, acc, long_run["rate"]).quat).all()  # the kernel alone: initial attitude


@pytest.mark.parametrize("big", [1e154, 1e200, 1e308])
def test_corrupt_huge_gyro_value_is_skipped_on_both_paths(big):
    """A single finite but absurd rate used to overflow ‖ω‖² to inf and leave the filter NaN for good."""
    s = simulate(seconds=12.0, omega=TURN, lin=SHAKE, seed=5)
    gyr, acc, mag = s["gyr"].copy(), s["acc"], s["mag"]
    gyr[700, 1] = big
    ref = run_filter(gyr, acc, s["rate"], mag=mag)
    step = torch.jit.script(AttitudeStep(s["rate"], use_mag=True))
    q = _step_all(step, gyr, acc, mag)
    assert np.isfinite(ref.quat).all() and ref.n_skipped == 1 == step.skipped()
    assert _angle(q, ref.quat).max() < 1e-9
    clean = run_filter(s["gyr"], acc, s["rate"], mag=mag).quat
    assert np.degrees(_angle(ref.quat[-200:], clean[-200:])).max() < 1.0  # one skipped sample: no lasting harm
