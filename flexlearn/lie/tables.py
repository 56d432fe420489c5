"""The series of the Lie group coefficient functions as data (plain Python): exact Taylor coefficients in
t2 = θ² and the per-dtype thresholds where the series take over from the closed forms.

:func:`taylor_coefficients` is the one definition of every series used by the Lie group formulas and by the
kernels built on them: the TorchScript literal lists of :func:`flexlearn.lie.series.series_coefficients` are
tested equal to a prefix of these (tests/lie/test_lie_tables.py), and the fused and numba linear-strain-element
kernels (:mod:`flexlearn.physics.lse.fused`, :mod:`flexlearn.physics.lse.compiled.elements`) build their (15, 6) table
from them. Each coefficient is an exact rational (Bernoulli numbers for D) rounded once to float64:

==============  ====================================  ========================================
name            function of θ                         coefficient of t2^j
==============  ====================================  ========================================
sinc            A = sin θ / θ                         (-1)^j / (2j+1)!
cosc            B = (1 - cos θ) / θ²                  (-1)^j / (2j+2)!
sinc3           C = (θ - sin θ) / θ³                  (-1)^j / (2j+3)!
cosc2           E = (θ² + 2 cos θ - 2) / (2θ⁴)        (-1)^j / (2j+4)!
sinc5           F = (2θ - 3 sin θ + θ cos θ) / (2θ⁵)  (-1)^j (j+1) / (2j+5)!
cotc            D = (1 - (θ/2) cot(θ/2)) / θ²         |B_{2j+2}| / (2j+2)!
atan2_ratio     atan(y) / y  (t2 = y²)                (-1)^j / (2j+1)
==============  ====================================  ========================================

:func:`threshold_table`: the switch points of :func:`flexlearn.lie.thresholds.series_threshold` (the one
definition, TorchScript literals) as a dict, for kernels that need them as constants.
"""

from __future__ import annotations

from fractions import Fraction
from math import factorial

import torch

from flexlearn.errors import ArgumentError
from flexlearn.lie.thresholds import series_threshold

__all__ = [
    "SERIES_NAMES",
    "THRESHOLD_NAMES",
    "bernoulli",
    "taylor_coefficients",
    "threshold_table",
]

SERIES_NAMES = ("sinc", "cosc", "sinc3", "cosc2", "sinc5", "cotc", "atan2_ratio")
# the coefficients with a threshold of their own (B = (1 - cos θ)/θ² is evaluated through A in flexlearn.lie)
THRESHOLD_NAMES = ("sinc", "sinc3", "cosc2", "sinc5", "cotc", "atan2_ratio")


def bernoulli(n: int) -> list[Fraction]:
    """Bernoulli numbers B_0..B_n, exact (Akiyama–Tanigawa; the even ones are convention-free).

    Args:
        n: index of the last number wanted, ≥ 0.

    Returns:
        The n + 1 numbers B_0..B_n as exact fractions (B_1 = +1/2 in this algorithm).
    """
    out = []
    a = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(a[0])
    return out


def _exact(name: str, j: int, bern: list[Fraction]) -> Fraction:
    s = (-1) ** j
    if name == "sinc":
        return Fraction(s, factorial(2 * j + 1))
    if name == "cosc":
        return Fraction(s, factorial(2 * j + 2))
    if name == "sinc3":
        return Fraction(s, factorial(2 * j + 3))
    if name == "cosc2":
        return Fraction(s, factorial(2 * j + 4))
    if name == "sinc5":
        return Fraction(s * (j + 1), factorial(2 * j + 5))
    if name == "cotc":
        return abs(bern[2 * j + 2]) / factorial(2 * j + 2)
    if name == "atan2_ratio":
        return Fraction(s, 2 * j + 1)
    raise ArgumentError(f"unknown series {name!r}; expected one of {SERIES_NAMES}")


def taylor_coefficients(name: str, n_terms: int) -> list[float]:
    """The first ``n_terms`` coefficients c_j of ``f = Σ_j c_j t2^j`` (t2 = θ² [rad²]), each the float64
    rounding of the exact rational (table in the module docstring).

    Args:
        name: one of :data:`SERIES_NAMES`.
        n_terms: how many coefficients, from j = 0.

    Returns:
        The coefficients c_0 .. c_{n_terms-1} as floats.

    Raises:
        ArgumentError: ``name`` is not a known series (also a ``ValueError``).
    """
    bern = bernoulli(2 * n_terms + 2) if name == "cotc" else []
    return [float(_exact(name, j, bern)) for j in range(n_terms)]


def threshold_table(dtype: torch.dtype) -> dict[str, float]:
    """``{name: series_threshold(x, name)}`` (θ² [rad²]) for x of ``dtype``, names :data:`THRESHOLD_NAMES`.

    Args:
        dtype: the dtype in use (float64; any other dtype gets the float32 values).

    Returns:
        Name -> threshold on θ² [rad²].
    """
    x = torch.empty(0, dtype=dtype)
    return {name: series_threshold(x, name) for name in THRESHOLD_NAMES}
