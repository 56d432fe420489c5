"""Per-dtype switch points between closed forms and Taylor series (TorchScript-compatible).

Every coefficient of the Lie group formulas is a function of ``t2 = θ²`` (:mod:`._series`). Near θ = 0
the closed forms lose accuracy, the series lose it far from 0, and each threshold below sits at the
crossover of the two *measured* errors (value and first derivative against mpmath at 40 digits, over
θ ∈ [1e-3, 5.5], in ulp of the dtype; ``tests/lie/test_lie_reference.py`` re-checks it on every run):

==============  ==========================================  ============  =========  =========
name            coefficient                                 cancellation  f64 τ      f32 τ
==============  ==========================================  ============  =========  =========
sinc            A = sin θ / θ                               grad ~ ε/θ    0.1        0.5
sinc3           C = (θ - sin θ) / θ³                        ~ ε/θ²        2.0        3.0
cosc2           E = (θ² + 2 cos θ - 2) / (2θ⁴)              ~ ε/θ²        3.8        6.0
sinc5           F = (2θ - 3 sin θ + θ cos θ) / (2θ⁵)        ~ ε/θ⁴        6.0        6.0
cotc            D = (1 - (θ/2) cot(θ/2)) / θ²               ~ ε/θ²        2.4        4.0
atan2_ratio     atan2(n, w) / n  (τ on n²/w²)               grad ~ ε/n    0.04       0.2
==============  ==========================================  ============  =========  =========

Measured closed-form error, in ulp of the coefficient's scale f(0) (identical in float32 and float64
once expressed in ulp): A ≤ 1 ulp at any θ but its gradient ≈ 0.5/θ ulp; C 160 ulp at θ = 0.1 and
2 ulp only from θ² ≈ 0.8; E 700 ulp at θ = 0.1, 2 ulp from θ² ≈ 1.5; F 10⁶ ulp at θ = 0.1, 2 ulp
from θ² ≈ 4; D 800 ulp at θ = 0.1, 2 ulp from θ² ≈ 2.3. The series are long (7-14 terms), so their
truncation error, relative to ε, is what differs between dtypes: it stays below float32's ε far
beyond float64's crossover, and the float32 thresholds are larger. With these values the worst error
of each coefficient over θ ∈ [1e-3, 5.5] is ≤ 3 ulp in value and ≤ 7.5 ulp in gradient, both dtypes.
For comparison, the common choice "θ² < machine epsilon" in float32 (θ < 3.5e-4) leaves C, D, E with
≈ 100 % error just above the threshold and F without a single correct digit below θ ≈ 0.06.

B = (1 - cos θ)/θ² needs no threshold of its own: it is evaluated as ½ A(θ/2)², cancellation-free.
half and bfloat16 use the float32 thresholds (the series are then exact to their precision).
"""

import torch
from torch import Tensor


def series_threshold(x: Tensor, name: str) -> float:
    """θ² (rad²) below which the Taylor series of coefficient ``name`` is used, for x's dtype.

    Values: the table in the module docstring (literals: TorchScript cannot read module globals).

    Names: "sinc", "sinc3", "cosc2", "sinc5", "cotc", "atan2_ratio" (see :mod:`._series`).

    Args:
        x: a tensor of the dtype in use (float64, or float32 also for float16 and bfloat16).
        name: the coefficient's name (any other name gets the "atan2_ratio" value).

    Returns:
        The threshold θ² (rad²).
    """
    if x.dtype == torch.float64:
        if name == "sinc":
            return 0.1
        if name == "sinc3":
            return 2.0
        if name == "cosc2":
            return 3.8
        if name == "sinc5":
            return 6.0
        if name == "cotc":
            return 2.4
        return 0.04
    # float32 (also float16 and bfloat16)
    if name == "sinc":
        return 0.5
    if name == "sinc3":
        return 3.0
    if name == "cosc2":
        return 6.0
    if name == "sinc5":
        return 6.0
    if name == "cotc":
        return 4.0
    return 0.2


def antiparallel_threshold(x: Tensor) -> float:
    """|u × v|² below which two opposite unit directions count as exactly antiparallel.

    Below it u × v is rounding noise (a few ε), so :func:`flexlearn.lie.so3.rotation_between` picks a
    deterministic axis perpendicular to u; ``exp(ω^) u`` then misses v by at most |u × v|:
    float64 |u × v| < 1e-15 (≈ 4.5 ε), float32 |u × v| < 3e-7 (≈ 2.5 ε).

    Args:
        x: a tensor of the dtype in use (float64; any other dtype gets the float32 value).

    Returns:
        The threshold on ``|u × v|²``.
    """
    if x.dtype == torch.float64:
        return 1.0e-30
    return 1.0e-13


def normalize_eps(x: Tensor) -> float:
    """Smallest norm accepted when normalising a vector (guards 0/0 only, not a tuning knob).

    Args:
        x: a tensor of the dtype in use (float64; any other dtype gets the float32 value).

    Returns:
        The smallest norm: 1e-300 in float64, 1e-30 otherwise.
    """
    if x.dtype == torch.float64:
        return 1.0e-300
    return 1.0e-30
