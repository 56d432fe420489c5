"""Calibration of a new module (flexlearn.sensing.module_cal): refusals that name what is missing, and the
alignment fit recovering a known map on poses it was not fitted on."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.errors import DataError
from flexlearn.sensing.module_cal import fit_input_map, input_map, pose_coverage, tumble_calibration


def _cap(n: int, rng: np.random.Generator, max_col: float = math.radians(29.5), sectors: int = 6) -> np.ndarray:
    c = rng.uniform(math.cos(max_col), 1.0, n)
    az = rng.uniform(-math.pi, -math.pi + 2 * math.pi * sectors / 6, n)
    s = np.sqrt(1 - c * c)
    return np.stack([s * np.cos(az), s * np.sin(az), c], -1)


def test_tumble_with_too_few_readings_or_too_little_sphere_is_refused():
    rng = np.random.default_rng(0)
    d = rng.normal(size=(400, 3))
    d = 50e-6 * d / np.linalg.norm(d, axis=1, keepdims=True)
    with pytest.raises(DataError, match=r"30 finite tumble readings, at least 50"):
        tumble_calibration(d[:30])
    half = d[d[:, 2] > 0.3 * 50e-6]  # only the upper part of the sphere
    with pytest.raises(DataError, match=r"covers \d+% of the sphere \(\d+ readings\), at least 70%"):
        tumble_calibration(half)
    w, _, q = tumble_calibration(d)
    assert q["coverage"] == 1.0 and np.allclose(w, np.eye(3), atol=1e-6)


def test_too_few_poses_or_one_sided_poses_are_refused():
    rng = np.random.default_rng(1)
    x = _cap(60, rng)
    with pytest.raises(DataError, match=r"5 stationary poses covering \d+% of the cap; at least 12 poses"):
        fit_input_map(lambda v: v, x[:5], x[:5])
    one_side = _cap(40, rng, sectors=1)
    assert pose_coverage(one_side) < 0.6
    with pytest.raises(DataError, match=r"40 stationary poses covering \d+%"):
        fit_input_map(lambda v: v, one_side, one_side)


@pytest.mark.parametrize("kind", ["rotation", "linear"])
def test_fit_recovers_a_known_map_on_held_out_poses(kind):
    """Model f(x) = x/|x|, labels f(A0 x): A fitted on 50 poses predicts 2000 other poses to < 0.05°."""
    rng = np.random.default_rng(2)
    theta = torch.tensor(
        [0.02, -0.03, 0.025, 0.01, -0.015, 0.008, 0.0, -0.005][: 3 if kind == "rotation" else 8], dtype=torch.float64
    )
    a0 = input_map(theta, kind).numpy()

    def model(x: torch.Tensor) -> torch.Tensor:
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)

    x_fit, x_test = 1e-4 * _cap(50, rng), 1e-4 * _cap(2000, rng)
    label = x_fit @ a0.T
    label /= np.linalg.norm(label, axis=1, keepdims=True)
    a, report = fit_input_map(model, x_fit, label, kind=kind, sigma_fix=math.radians(0.05))
    pred, want = x_test @ a.T, x_test @ a0.T
    cos = (pred * want).sum(1) / np.linalg.norm(pred, axis=1) / np.linalg.norm(want, axis=1)
    err = np.degrees(np.arccos(np.clip(cos, -1, 1)))
    assert err.max() < 0.05 and report["median_residual_deg_before"] > 1.0
    assert report["n_poses"] == 50 and report["pose_coverage"] >= 0.6
