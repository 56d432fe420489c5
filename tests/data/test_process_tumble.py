"""Processing with the module's tumble (ProcessingConfig.soft_iron): ΔB = W·ΔB_raw with the ellipsoid W of the
recorded tumble, recorded in the dataset; a tumble too poor to fit is refused naming its coverage."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from flexlearn.data.process import process_sweep
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.errors import DataError
from flexlearn.sim.rig import simulate_sweep


@pytest.fixture(scope="module")
def sweep():
    return simulate_sweep({"n_poses": 120, "seed": 21, "magnetometer": {"soft_iron": 0.05}})


def test_tumble_calibration_is_applied_and_recorded(sweep):
    cal = process_sweep(sweep).dataset
    raw = process_sweep(sweep, ProcessingConfig(soft_iron="none")).dataset
    w = np.asarray(cal.meta["calibration"]["W"])
    assert raw.meta["calibration"] is None and cal.meta["calibration"]["source"] == "tumble"
    assert np.allclose(cal.delta_b, raw.delta_b @ w.T, rtol=1e-12, atol=1e-18)
    # W undoes the module's gain/soft iron: the corrected noise-free field is a rotation of the true field, so
    # its norm ratio to the true field is the same for every pose (raw: it varies by the 5 % soft iron)
    s = np.asarray(sweep.meta["sensors"]["magnetometer"]["soft_iron"])
    q = np.asarray(sweep.meta["module"]["draw"]["mag_axes"])
    true = raw.truth_delta_b @ np.linalg.inv(s @ q.T).T
    ratio = np.linalg.norm(cal.truth_delta_b, axis=1) / np.linalg.norm(true, axis=1)
    raw_ratio = np.linalg.norm(raw.truth_delta_b, axis=1) / np.linalg.norm(true, axis=1)
    assert ratio.std() / ratio.mean() < 0.2 * raw_ratio.std() / raw_ratio.mean()


def test_a_tumble_about_one_axis_is_refused(sweep):
    bad = copy.deepcopy(sweep)
    m = np.asarray(bad.meta["tumble"]["mag"])
    bad.meta["tumble"]["mag"] = m[m[:, 2] > np.median(m[:, 2]) + 1.5 * m[:, 2].std() * 0.3].tolist()
    with pytest.raises(DataError, match=r"tumble.*covers \d+% of the sphere"):
        process_sweep(bad)
