"""Physics-informed direction model (flexlearn.models.coil_direction): its forward model is the simulator's joint,
and identified on 50 poses inside the trained cap it extrapolates to 30–40° on a module it was not fitted on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flexlearn.data.process import process_sweep
from flexlearn.models.coil_direction import CoilDirectionModel
from flexlearn.sim.rig import simulate_sweep

CLEAN = {"swing_rate": 0.0, "nan_rate": 0.0, "saturation_rate": 0.0, "short_pulse_rate": 0.0}
ZERO = {
    "mag_axes": 0.0,
    "sensor_offset": [0.0, 0.0, 0.0],
    "pivot_radius": 0.0,
    "joint_length": 0.0,
    "coil_offset": [0.0, 0.0, 0.0],
    "coil_tilt": 0.0,
}


def _deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(a, b), axis=1), (a * b).sum(1)))


def test_forward_model_is_the_simulators_joint():
    """θ = 0 on a nominal module: x̂(label) is the simulator's noise-free coil field direction (to 1e-7°)."""
    sw = simulate_sweep(
        {
            "n_poses": 25,
            "seed": 5,
            "faults": CLEAN,
            "module": ZERO,
            "magnetometer": {"soft_iron": 0.0},
            "geometry": {"mount_misalignment": 0.0, "max_colatitude": 0.7, "mechanical_limit": 0.75},
        }
    )
    label = np.stack([sw.truth[f"label_{c}"] for c in "xyz"], -1)
    db = np.stack([sw.truth[f"db_{c}"] for c in "xyz"], -1)
    x = CoilDirectionModel().field_direction(torch.from_numpy(label)).numpy()
    assert _deg(x, db / np.linalg.norm(db, axis=1, keepdims=True)).max() < 1e-7  # degrees


@pytest.mark.slow
def test_identified_module_extrapolates_past_the_cap():
    """Module 52 (never seen): θ from 50 poses within 29.5°; on its 30–40° test poses the model errs < 1° median."""
    sw = simulate_sweep({"n_poses": 800, "seed": 52, "geometry": {"max_colatitude": 0.7, "mechanical_limit": 0.785}})
    ds = process_sweep(sw).dataset
    col = np.degrees(np.arccos(np.clip(ds.label[:, 2], -1, 1)))
    fit = np.flatnonzero((ds.split == "train") & (col <= 29.5))[:50]
    test = np.flatnonzero((col > 30.0) & (col <= 40.0))  # none of them was used for the fit
    model = CoilDirectionModel()
    report = model.identify(ds.delta_b[fit], ds.label[fit])
    assert report["median_residual_deg_after"] < 0.5 * report["median_residual_deg_before"]
    pred = model(torch.from_numpy(ds.delta_b[test])).numpy()
    err = _deg(pred, ds.label[test])
    assert test.size > 200 and np.median(err) < 1.0 and np.percentile(err, 95) < 2.5, (np.median(err), test.size)


def test_fix_confidence_grows_with_the_answers_error_and_flags_bends_past_the_cap():
    """Exact fields of the nominal model: the right answer has σ_m = σ₀; an answer 2° off has a residual of about
    half of that (the field turns ≈0.5 rad per rad of bend) and σ_m ≈ its error; 40° bends are flagged."""
    from flexlearn.lie import so3_exp
    from flexlearn.models.fix_confidence import fix_confidence

    model = CoilDirectionModel()
    rng = np.random.default_rng(3)
    col, az = np.radians(rng.uniform(5, 25, 40)), rng.uniform(-np.pi, np.pi, 40)
    label = torch.from_numpy(np.stack([np.sin(col) * np.cos(az), np.sin(col) * np.sin(az), np.cos(col)], -1))
    x = model.field_direction(label)
    axis = torch.linalg.cross(label, torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64).expand_as(label), dim=-1)
    off = (
        so3_exp(np.radians(2.0) * axis / torch.linalg.vector_norm(axis, dim=-1, keepdim=True)) @ label.unsqueeze(-1)
    ).squeeze(-1)
    right, wrong = fix_confidence(model, x, label), fix_confidence(model, x, off)
    assert float(right["residual"].max()) < 1e-9 and not bool(right["flagged"].any())
    ratio = np.degrees(wrong["residual"].numpy()) / 2.0
    assert 0.25 < ratio.min() and ratio.max() < 1.0
    assert np.all(np.degrees(wrong["sigma_m"].numpy()) > 1.0)
    far = torch.tensor([[np.sin(0.7), 0.0, np.cos(0.7)]], dtype=torch.float64)
    assert bool(fix_confidence(model, model.field_direction(far), far)["flagged"].all())


def _cap_labels(n: int, max_deg: float, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    col, az = np.radians(max_deg) * np.sqrt(rng.uniform(size=n)), rng.uniform(-np.pi, np.pi, n)
    return torch.tensor(np.stack([np.sin(col) * np.cos(az), np.sin(col) * np.sin(az), np.cos(col)], -1))


@pytest.mark.slow
def test_residual_learns_what_a_coarse_coil_model_misses():
    """A coarse coil model (8 vertices per turn) against fields of the fine one (48, the simulator's): untrained, the
    residual model is the coil model itself; fitted on 0–29.5° it removes most of the mismatch there and at 30–40°,
    which it never saw."""
    from flexlearn.models.coil_residual import CoilResidualModel, fit_residual
    from flexlearn.sensing.coil import CoilConfig, PlanarCoil

    coarse = PlanarCoil(CoilConfig(points_per_turn=8))
    fine = CoilDirectionModel()
    model = CoilResidualModel(coil=coarse)
    lab = _cap_labels(1500, 29.5, 1)
    assert torch.allclose(model.field_direction(lab), CoilDirectionModel(coil=coarse).field_direction(lab))
    fit = fit_residual(model, fine.field_direction(lab), lab)
    assert fit["median_residual_deg_after"] < 0.25 * fit["median_residual_deg_before"], fit
    past = _cap_labels(4000, 40.0, 2)
    past = past[np.degrees(np.arccos(past[:, 2].numpy())) > 30.0]
    with torch.no_grad():
        truth = fine.field_direction(past)
        err = {
            name: _deg(m.field_direction(past).numpy(), truth.numpy())
            for name, m in (("coil", CoilDirectionModel(coil=coarse)), ("residual", model))
        }
    assert np.median(err["residual"]) < 0.5 * np.median(err["coil"]), {k: np.median(v) for k, v in err.items()}
