"""Coefficient functions of θ² shared by the SO(3)/SE(3)/SE(2) formulas, with Taylor branches.

Each function takes ``t2 = θ²`` (any shape, rad²) and returns a tensor of the same shape. The pattern
that keeps values *and* gradients finite everywhere is written once, in :func:`split`: below the
threshold the closed form is evaluated at the safe input θ² = 1 and the series at the true θ²; above
it the series is evaluated at 0 and the closed form at the true θ². ``torch.where`` then routes the
gradient of the used branch only, and the unused branch contributes ``0 · finite`` instead of
``0 · inf = NaN`` (the failure of a single ``torch.where`` around ``sin(θ)/θ``).

Series coefficients (:func:`series_coefficients`) are exact rationals (Bernoulli numbers for D) rounded to
float64, defined in :mod:`flexlearn.lie.tables`; each list is long enough to be exact to float64 rounding at
the float64 threshold and to float32 rounding at the float32 threshold (see :mod:`flexlearn.lie.thresholds`).
"""

from typing import List, Tuple

import torch
from torch import Tensor

from flexlearn.lie.thresholds import series_threshold


def poly(t2: Tensor, c: List[float]) -> Tensor:
    """Horner evaluation of Σ_j c[j] t2^j.

    Args:
        t2: the polynomial's variable (any shape), here θ² (rad²).
        c: coefficients, lowest power first.

    Returns:
        Σ_j c[j] t2^j, shaped like t2.
    """
    out = torch.full_like(t2, c[len(c) - 1])
    for i in range(len(c) - 2, -1, -1):
        out = out * t2 + c[i]
    return out


# fmt: off
# (the literal tables stay in rows: one number per line would make this data 90 lines long)
def series_coefficients(name: str) -> List[float]:
    """Taylor coefficients c_j in t2 = θ² of the series branch of ``name`` (``Σ_j c_j t2^j``).

    Literals (TorchScript cannot read module globals): float64 roundings of the exact rationals of
    :func:`flexlearn.lie.tables.taylor_coefficients` (tested equal, tests/lie/test_lie_tables.py); each list is
    as long as the series needs at its float32 threshold. Names: "sinc", "sinc3", "cosc2", "sinc5", "cotc",
    "atan2_ratio" (series in y² = n²/w²).

    Args:
        name: one of the names above; any other name gets the "atan2_ratio" series.

    Returns:
        The coefficients c_j, lowest power first.
    """
    if name == "sinc":
        return [1.0, -0.16666666666666666, 0.008333333333333333, -0.0001984126984126984,
                2.7557319223985893e-06, -2.505210838544172e-08, 1.6059043836821613e-10]
    if name == "sinc3":
        return [0.16666666666666666, -0.008333333333333333, 0.0001984126984126984,
                -2.7557319223985893e-06, 2.505210838544172e-08, -1.6059043836821613e-10,
                7.647163731819816e-13, -2.8114572543455206e-15, 8.22063524662433e-18,
                -1.9572941063391263e-20]
    if name == "cosc2":
        return [0.041666666666666664, -0.001388888888888889, 2.48015873015873e-05,
                -2.755731922398589e-07, 2.08767569878681e-09, -1.1470745597729725e-11,
                4.779477332387385e-14, -1.5619206968586225e-16, 4.110317623312165e-19,
                -8.896791392450574e-22]
    if name == "sinc5":
        return [0.008333333333333333, -0.0003968253968253968, 8.267195767195768e-06,
                -1.0020843354176688e-07, 8.029521918410807e-10, -4.58829823909189e-12,
                1.9680200780418645e-14, -6.576508197299464e-17, 1.7615646957052136e-19,
                -3.868170170630684e-22, 7.091645312822921e-25, -1.1020427836554655e-27]
    if name == "cotc":
        return [0.08333333333333333, 0.001388888888888889, 3.306878306878307e-05,
                8.267195767195768e-07, 2.08767569878681e-08, 5.284190138687493e-10,
                1.3382536530684679e-11, 3.3896802963225827e-13, 8.586062056277845e-15,
                2.174868698558062e-16, 5.5090028283602295e-18, 1.3954464685812522e-19,
                3.534707039629467e-21, 8.953517427037546e-23]
    # atan2_ratio
    return [1.0, -1.0 / 3.0, 1.0 / 5.0, -1.0 / 7.0, 1.0 / 9.0, -1.0 / 11.0, 1.0 / 13.0,
            -1.0 / 15.0, 1.0 / 17.0, -1.0 / 19.0, 1.0 / 21.0, -1.0 / 23.0]
# fmt: on


def split(t2: Tensor, name: str) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Safe-where split of θ² for the coefficient ``name`` (its threshold: ``series_threshold``).

    Args:
        t2: θ² (rad²), any shape.
        name: the series coefficient whose threshold applies (see :func:`series_threshold`).

    Returns:
        ``(small, t2_series, t2_closed, theta_closed)``: the mask of the series branch, θ² for the
        series (0 where the closed form is used), θ² and θ = sqrt(θ²) for the closed form (1 where the
        series is used).
    """
    small = t2 < series_threshold(t2, name)
    t2_series = torch.where(small, t2, torch.zeros_like(t2))
    t2_closed = torch.where(small, torch.ones_like(t2), t2)
    return small, t2_series, t2_closed, torch.sqrt(t2_closed)


def sinc(t2: Tensor) -> Tensor:
    """A(θ) = sin θ / θ (Sola et al., "A micro Lie theory", eq. (143) coefficients).

    Args:
        t2: θ² [rad²], any shape.

    Returns:
        A(θ), shaped like t2.
    """
    small, ts, _, th = split(t2, "sinc")
    c = series_coefficients("sinc")
    return torch.where(small, poly(ts, c), torch.sin(th) / th)


def cosc(t2: Tensor) -> Tensor:
    """B(θ) = (1 - cos θ) / θ², evaluated as ½ (sin(θ/2) / (θ/2))²: no cancellation at any θ.

    Args:
        t2: θ² [rad²], any shape.

    Returns:
        B(θ), shaped like t2.
    """
    a = sinc(0.25 * t2)
    return 0.5 * a * a


def cos_from_t2(t2: Tensor) -> Tensor:
    """Cos θ = 1 - θ² B(θ), with a finite gradient at θ = 0 (unlike cos(sqrt(θ²))).

    Args:
        t2: θ² [rad²], any shape.

    Returns:
        cos θ, shaped like t2.
    """
    return 1.0 - t2 * cosc(t2)


def sinc3(t2: Tensor) -> Tensor:
    """C(θ) = (θ - sin θ) / θ³ (the W² coefficient of J_l, J_r and of the SE(3) V matrix).

    Args:
        t2: θ² [rad²], any shape.

    Returns:
        C(θ), shaped like t2.
    """
    small, ts, tc, th = split(t2, "sinc3")
    c = series_coefficients("sinc3")
    return torch.where(small, poly(ts, c), (th - torch.sin(th)) / (tc * th))


def cosc2(t2: Tensor) -> Tensor:
    """E(θ) = (θ² + 2 cos θ - 2) / (2 θ⁴) = (½ - B(θ)) / θ² (Barfoot 2017, eq. (7.86), 3rd term).

    Args:
        t2: θ² [rad²], any shape.

    Returns:
        E(θ), shaped like t2.
    """
    small, ts, tc, _ = split(t2, "cosc2")
    c = series_coefficients("cosc2")
    return torch.where(small, poly(ts, c), (0.5 - cosc(tc)) / tc)


def sinc5(t2: Tensor) -> Tensor:
    """F(θ) = (2θ - 3 sin θ + θ cos θ) / (2 θ⁵) (Barfoot 2017, eq. (7.86), 4th term).

    Args:
        t2: θ² [rad²], any shape.

    Returns:
        F(θ), shaped like t2.
    """
    small, ts, tc, th = split(t2, "sinc5")
    c = series_coefficients("sinc5")
    closed = (2.0 * th - 3.0 * torch.sin(th) + th * torch.cos(th)) / (2.0 * tc * tc * th)
    return torch.where(small, poly(ts, c), closed)


def cotc(t2: Tensor) -> Tensor:
    """D(θ) = (1 - (θ/2) cot(θ/2)) / θ², the W² coefficient of J_l⁻¹ and J_r⁻¹ (Sola eq. (144)).

    Finite for θ < 2π; D(π) = 1/π². Series: Σ_j (-1)^j B_{2j+2} θ^{2j} / (2j+2)!.

    Args:
        t2: θ² [rad²], any shape, θ < 2π.

    Returns:
        D(θ), shaped like t2.
    """
    small, ts, tc, th = split(t2, "cotc")
    c = series_coefficients("cotc")
    half = 0.5 * th
    closed = (1.0 - half * torch.cos(half) / torch.sin(half)) / tc
    return torch.where(small, poly(ts, c), closed)


def atan2_ratio(n2: Tensor, w: Tensor) -> Tensor:
    """atan2(n, w) / n with n = sqrt(n2) ≥ 0, finite value and gradient at n = 0 when w > 0.

    Series in y² = n²/w² for w > 0: (1/w) Σ_j (-1)^j y^{2j} / (2j + 1). Where n = 0 and w ≤ 0 the
    result is finite but meaningless (the angle is π and the axis undefined): callers replace it.

    Args:
        n2: n² ≥ 0 (any shape).
        w: the second argument of atan2 (shape of n2).

    Returns:
        atan2(n, w) / n, shaped like n2.
    """
    small = (w > 0.0) & (n2 < series_threshold(n2, "atan2_ratio") * w * w)
    w_s = torch.where(small, w, torch.ones_like(w))
    y2 = torch.where(small, n2, torch.zeros_like(n2)) / (w_s * w_s)
    n2_c = torch.where(small | (n2 <= 0.0), torch.ones_like(n2), n2)
    n_c = torch.sqrt(n2_c)
    c = series_coefficients("atan2_ratio")
    return torch.where(small, poly(y2, c) / w_s, torch.atan2(n_c, w) / n_c)
