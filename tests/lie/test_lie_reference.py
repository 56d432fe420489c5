"""Coefficient functions against mpmath, in ulp, just below and above every per-dtype threshold.

This is the measurement behind :mod:`flexlearn.lie.thresholds`: it also checks that the closed form
alone would be worse than the chosen branch well below the threshold (the cancellation is real).
"""

import math

import mpmath
import pytest
import torch

from flexlearn.lie import series as _series
from flexlearn.lie.thresholds import series_threshold
from tests.lie.lie_testutil import DTYPES, EPS

REF = {
    "sinc": lambda t: mpmath.sin(t) / t,
    "sinc3": lambda t: (t - mpmath.sin(t)) / t**3,
    "cosc2": lambda t: (t**2 + 2 * mpmath.cos(t) - 2) / (2 * t**4),
    "sinc5": lambda t: (2 * t - 3 * mpmath.sin(t) + t * mpmath.cos(t)) / (2 * t**5),
    "cotc": lambda t: (1 - (t / 2) * mpmath.cot(t / 2)) / t**2,
    "atan2_ratio": lambda t: mpmath.atan(t) / t,
}
SCALE = {"sinc": 1.0, "sinc3": 1 / 6, "cosc2": 1 / 24, "sinc5": 1 / 120, "cotc": 1 / 12, "atan2_ratio": 1.0}
FN = {
    "sinc": _series.sinc,
    "sinc3": _series.sinc3,
    "cosc2": _series.cosc2,
    "sinc5": _series.sinc5,
    "cotc": _series.cotc,
    "atan2_ratio": lambda t2: _series.atan2_ratio(t2, torch.ones_like(t2)),
}


def _thetas(dtype, name):
    tau = math.sqrt(series_threshold(torch.zeros((), dtype=dtype), name))
    near = [tau * (1 + k * 1e-3) for k in (-20, -3, -1, 1, 3, 20)]
    return [1e-9, 1e-6, 1e-4, 1e-2, 0.3, 1.0, 2.0, 3.0, math.pi] + near


def _errors(name, dtype):
    th = torch.tensor(_thetas(dtype, name), dtype=dtype, requires_grad=True)
    val = FN[name](th * th)
    (grad,) = torch.autograd.grad(val.sum(), th)
    scale = SCALE[name]
    ev, eg = [], []
    with mpmath.workdps(90):  # θ = 1e-9 cancels ~45 digits in sinc5
        for t, v, g in zip(th.detach().double().tolist(), val.detach().double().tolist(), grad.double().tolist()):
            t = mpmath.mpf(t)
            ev.append(abs(v - float(REF[name](t))) / scale / EPS[dtype])
            eg.append(abs(g - float(mpmath.diff(REF[name], t))) / scale / EPS[dtype])
    return max(ev), max(eg)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(REF))
def test_coefficient_within_few_ulp_around_thresholds(name, dtype):
    ev, eg = _errors(name, dtype)
    assert ev <= 4.0, f"{name} value error {ev:.1f} ulp"
    assert eg <= 8.0, f"{name} gradient error {eg:.1f} ulp"


@pytest.mark.parametrize("name", ["sinc3", "cosc2", "sinc5", "cotc"])
def test_closed_form_cancellation_is_real(name, monkeypatch):
    """Forcing the closed form at θ = 1e-2 (float32) costs ≥ 100 ulp: the series branch is needed."""
    monkeypatch.setattr(_series, "series_threshold", lambda x, n: -1.0)
    t = torch.tensor([1e-2], dtype=torch.float32)
    v = float(FN[name](t * t)[0])
    ref = float(REF[name](mpmath.mpf(float(t[0]))))
    assert abs(v - ref) / abs(ref) / EPS[torch.float32] > 100.0
