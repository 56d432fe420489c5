"""The Cramér–Rao bound of the direction fix against the simulator and against an efficient estimator."""

import numpy as np
import pytest

from flexlearn.data.process import process_sweep
from flexlearn.errors import DataError
from flexlearn.sim import direction_bound as db
from flexlearn.sim.rig import simulate_sweep


@pytest.fixture(scope="module")
def dataset():
    return process_sweep(simulate_sweep({"n_poses": 300, "seed": 3, "module_seed": 41})).dataset


def test_module_field_is_the_simulated_truth(dataset):
    field, label = db.module_field(dataset.meta)
    scale = np.abs(dataset.truth_delta_b).max()
    assert np.abs(field(dataset.truth_u) - dataset.truth_delta_b).max() < 1e-12 * scale
    assert np.abs(label(dataset.truth_u) - dataset.truth_label).max() < 1e-12


def test_measured_noise_recovers_the_sample_model():
    rng = np.random.default_rng(0)
    n_on = rng.integers(4, 10, 20000)
    var = 0.02e-12 + 0.36e-12 / n_on
    truth = rng.normal(0, 1e-4, (n_on.size, 3))
    noisy = truth + rng.normal(size=truth.shape) * np.sqrt(var)[:, None]
    got = db.measured_noise(noisy, truth, n_on)
    assert np.allclose(got, var, rtol=0.05)


def _ml_fix(field, label, u0, b_meas, iters=8):
    """Gauss–Newton maximum-likelihood fit of the direction to a noisy unit field; returns the fitted label."""
    u = u0.copy()
    target = b_meas / np.linalg.norm(b_meas, axis=-1, keepdims=True)

    def unit(x):
        b = field(x)
        return b / np.linalg.norm(b, axis=-1, keepdims=True)

    for _ in range(iters):
        j = db.tangent_jacobian(unit, u)
        r = target - unit(u)
        step = np.linalg.solve(np.einsum("nki,nkj->nij", j, j), np.einsum("nki,nk->ni", j, r)[..., None])[..., 0]
        lam = np.arccos(np.clip(-u[:, 2], -1, 1))
        th = np.arctan2(u[:, 1], u[:, 0])
        t1 = np.stack([np.cos(lam) * np.cos(th), np.cos(lam) * np.sin(th), np.sin(lam)], -1)
        t2 = np.cross(u, t1)
        d = step[:, :1] * t1 + step[:, 1:] * t2
        ang = np.linalg.norm(d, axis=-1, keepdims=True)
        u = u * np.cos(ang) + d / np.maximum(ang, 1e-300) * np.sin(ang)
    return label(u)


def test_bound_matches_an_efficient_estimator(dataset):
    """At the module's own noise level the maximum-likelihood fix is efficient: its RMS error equals the bound's."""
    field, label = db.module_field(dataset.meta)
    rng = np.random.default_rng(1)
    u = np.repeat(dataset.truth_u[:6], 300, axis=0)
    var = np.full(u.shape[0], (0.29e-6) ** 2)
    b = field(u) + rng.normal(size=u.shape) * np.sqrt(var)[:, None]
    fit = _ml_fix(field, label, u, b)
    err = np.degrees(np.arccos(np.clip(np.sum(fit * label(u), -1), -1, 1)))
    bound = db.error_bound(field, label, dataset.truth_u[:6], var[:6], 0.0, draws=2000)
    assert np.sqrt(np.mean(err**2)) == pytest.approx(np.sqrt(np.mean(bound**2)), rel=0.06)
    assert np.median(err) == pytest.approx(np.median(bound), rel=0.08)
    # the magnitude only adds information
    full = db.error_bound(field, label, dataset.truth_u[:6], var[:6], 0.0, full_vector=True, draws=2000)
    assert np.mean(full**2) < np.mean(bound**2)


def test_label_noise_adds_in_quadrature(dataset):
    field, label = db.module_field(dataset.meta)
    u, var = dataset.truth_u[:50], np.full(50, 1e-13)
    lv = np.radians(0.2) ** 2
    e0 = db.error_bound(field, label, u, var, 0.0, draws=400)
    e1 = db.error_bound(field, label, u, var, lv, draws=400)
    assert np.mean(e1**2) == pytest.approx(np.mean(e0**2) + 2 * np.degrees(np.sqrt(lv)) ** 2, rel=0.05)


def test_a_recorded_dataset_is_refused_by_name():
    with pytest.raises(DataError, match="no simulated sweep"):
        db.module_field({"source": {"provenance": {}}})
