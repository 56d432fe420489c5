"""Every series coefficient and threshold of the LSE kernels (fused torch and compiled numba) is flexlearn.lie's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from flexlearn.lie.tables import taylor_coefficients
from flexlearn.lie.thresholds import series_threshold
from flexlearn.physics.lse import (
    fused,
)  # fused/compiled columns [A, B, C, E, F, D]; B (1 - cos θ)/θ² switches where A does (flexlearn.lie has no
from flexlearn.physics.lse.compiled import elements as compiled

# threshold of its own for B: it evaluates B as ½ A(θ/2)²)
COLUMNS = ("sinc", "cosc", "sinc3", "cosc2", "sinc5", "cotc")
THRESHOLD_OF = ("sinc", "sinc", "sinc3", "cosc2", "sinc5", "cotc")


def test_series_tables_are_the_lie_definitions():
    n = fused.SERIES.shape[0]
    expected = np.array([taylor_coefficients(name, n) for name in COLUMNS]).T
    # exact: the same float64 numbers, not values within a tolerance
    for table in (fused.SERIES, compiled._SER):
        assert table.shape == (n, 6) and table.dtype == np.float64
        assert np.array_equal(table, expected)


def test_thresholds_are_the_lie_float64_thresholds():
    x = torch.zeros((), dtype=torch.float64)
    expected = np.array([series_threshold(x, name) for name in THRESHOLD_OF])
    for table in (fused.THRESHOLDS, compiled._THR):
        assert np.array_equal(table, expected)
    assert compiled._THR[0] == compiled._THR.min()  # the compiled kernel's "some closed form" shortcut


def test_coefficients_follow_the_tables():
    """The fused and compiled evaluations switch at the tables' thresholds and use their series."""
    t2 = torch.tensor([0.0, 0.05, 0.0999, 0.1001, 1.9, 2.1, 2.35, 2.45, 3.7, 3.9, 5.9, 6.1], dtype=torch.float64)
    co = fused.coefficients(t2)
    nb = np.stack([compiled.coefficients_nb(float(x)) for x in t2])
    np.testing.assert_allclose(nb, co.numpy(), rtol=0, atol=4e-16)
    for i, t in enumerate(t2.tolist()):
        for c in range(6):
            if t < fused.THRESHOLDS[c]:
                ref = sum(coef * t**j for j, coef in enumerate(fused.SERIES[:, c]))
                assert abs(float(co[i, c]) - ref) <= 4e-16 * max(1.0, abs(ref))


def test_numba_cache_fingerprint_covers_the_lie_sources():
    """Numba freezes the global tables into its cached machine code: the sources they come from are in the
    fingerprint that invalidates that cache."""
    here = Path(compiled.__file__).parent
    files = {(here / f"{name}.py").resolve() for name in compiled.CACHE_SOURCES}
    assert all(f.is_file() for f in files)
    lie = Path(taylor_coefficients.__code__.co_filename).parent
    assert {(lie / "tables.py").resolve(), (lie / "thresholds.py").resolve()} <= files
    for mod in ("../fused", "elements", "condense", "newton", "../newton_policy"):
        assert (here / f"{mod}.py").resolve() in files
