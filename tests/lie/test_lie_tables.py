"""The TorchScript literal series of flexlearn.lie.series are the exact rationals of flexlearn.lie.tables, whose
threshold table is flexlearn.lie.thresholds'."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

from flexlearn.errors import ArgumentError
from flexlearn.lie import series as _series
from flexlearn.lie.tables import (
    SERIES_NAMES,
    THRESHOLD_NAMES,
    bernoulli,
    taylor_coefficients,
    threshold_table,
)
from flexlearn.lie.thresholds import series_threshold

LITERAL_NAMES = ("sinc", "sinc3", "cosc2", "sinc5", "cotc", "atan2_ratio")


@pytest.mark.parametrize("name", LITERAL_NAMES)
def test_literal_series_equal_exact_rationals(name):
    lit = _series.series_coefficients(name)
    # exact: both are the float64 rounding of the same rational (equality of floats, not a tolerance)
    assert lit == taylor_coefficients(name, len(lit))


def test_bernoulli_and_known_values():
    assert bernoulli(6)[:7] == [
        Fraction(1),
        Fraction(1, 2),
        Fraction(1, 6),
        Fraction(0),
        Fraction(-1, 30),
        Fraction(0),
        Fraction(1, 42),
    ]
    assert taylor_coefficients("cotc", 3) == [1 / 12, 1 / 720, 1 / 30240]
    assert taylor_coefficients("cosc", 3) == [1 / 2, -1 / 24, 1 / 720]
    assert set(LITERAL_NAMES) < set(SERIES_NAMES)
    with pytest.raises(ArgumentError, match="tanc"):
        taylor_coefficients("tanc", 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_threshold_table_is_series_threshold(dtype):
    table = threshold_table(dtype)
    assert tuple(table) == THRESHOLD_NAMES
    for name, v in table.items():
        assert v == series_threshold(torch.zeros((), dtype=dtype), name)
