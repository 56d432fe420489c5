"""Spherical-cap targets with Fibonacci cells and quotas (seed 002, Sec. III-B1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from flexlearn.sim.targets import assign_cells, cell_quotas, fibonacci_cells, sample_cap_targets, sample_cap_uniform

LMAX = math.radians(29.5)
COS_MAX = math.cos(LMAX)


def _cos_lambda(d: np.ndarray) -> np.ndarray:
    return -d[:, 2]  # colatitude from the straight axis (0, 0, -1)


def test_fibonacci_cells_cover_the_cap() -> None:
    c = fibonacci_cells(100, LMAX)
    assert c.shape == (100, 3)
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, rtol=1e-12)
    cl = _cos_lambda(c)
    assert np.all(cl >= COS_MAX) and np.all(cl <= 1.0)
    # equal cos λ spacing: each centre stands for an equal solid angle
    np.testing.assert_allclose(np.diff(np.sort(cl)), (1 - COS_MAX) / 100, rtol=1e-9)


def test_assign_cells_is_the_nearest_centre() -> None:
    c = fibonacci_cells(30, LMAX)
    d = sample_cap_uniform(500, LMAX, np.random.default_rng(0))
    cell = assign_cells(d, c)
    ang = np.arccos(np.clip(d @ c.T, -1, 1))
    # indices, exact: both sides rank the very same matrix product d @ c.T (arccos is monotone)
    np.testing.assert_array_equal(cell, ang.argmin(axis=1))
    np.testing.assert_array_equal(assign_cells(c, c), np.arange(30))


@pytest.mark.parametrize("seed", [0, 1])
def test_uniform_cap_sampling_ks(seed: int) -> None:
    d = sample_cap_uniform(4000, LMAX, np.random.default_rng(seed))
    assert stats.kstest((_cos_lambda(d) - COS_MAX) / (1 - COS_MAX), "uniform").pvalue > 1e-3
    theta = np.arctan2(d[:, 1], d[:, 0])
    assert stats.kstest((theta + math.pi) / (2 * math.pi), "uniform").pvalue > 1e-3


@pytest.mark.parametrize("seed", [0, 3])
def test_stratified_targets_uniform_and_fill_quotas(seed: int) -> None:
    n, n_cells = 3000, 60
    d = sample_cap_targets(n, LMAX, n_cells, seed)
    assert d.shape == (n, 3)
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, rtol=1e-12)
    assert np.all(_cos_lambda(d) >= COS_MAX - 1e-12)
    assert stats.kstest((_cos_lambda(d) - COS_MAX) / (1 - COS_MAX), "uniform").pvalue > 1e-3
    theta = np.arctan2(d[:, 1], d[:, 0])
    assert stats.kstest((theta + math.pi) / (2 * math.pi), "uniform").pvalue > 1e-3
    centres = fibonacci_cells(n_cells, LMAX)
    counts = np.bincount(assign_cells(d, centres), minlength=n_cells)
    quota = cell_quotas(n, centres, LMAX)
    np.testing.assert_array_equal(counts, quota)  # integer counts: each cell holds its quota exactly
    # quotas follow the cell solid angles: within ±1 of n × (Monte-Carlo area share)
    big = sample_cap_uniform(400_000, LMAX, np.random.default_rng(9))
    share = np.bincount(assign_cells(big, centres), minlength=n_cells) / big.shape[0]
    assert np.all(np.abs(quota - n * share) <= 1.0 + 4 * np.sqrt(n * share / big.shape[0] * n))


def test_targets_deterministic_and_seed_dependent() -> None:
    a = sample_cap_targets(500, LMAX, 25, 7)
    # bitwise: the same seeded call twice in one process (determinism is the contract)
    np.testing.assert_array_equal(a, sample_cap_targets(500, LMAX, 25, 7))
    assert not np.array_equal(a, sample_cap_targets(500, LMAX, 25, 8))


def test_quotas_sum_and_edge_cases() -> None:
    c = fibonacci_cells(7, LMAX)
    assert cell_quotas(100, c, LMAX).sum() == 100
    assert sample_cap_targets(0, LMAX, 10, 0).shape == (0, 3)
    assert sample_cap_targets(3, LMAX, 10, 0).shape == (3, 3)  # fewer targets than cells
    with pytest.raises(ValueError):
        fibonacci_cells(0, LMAX)
