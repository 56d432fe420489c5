"""The data report's noise figure (robust ranges, counted outliers, a note for a constant stream) and the
identification's fit figure (units, truth, time series), on ordinary and degenerate data."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib.image
import numpy as np
import pytest
import torch

from flexlearn.data.report import noise_figure, robust_range
from flexlearn.identify.params import ParameterSet, ParamSpec
from flexlearn.identify.report import measurement_series, write_fit_figure


def assert_png(path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = matplotlib.image.imread(path)
    assert img.shape[0] > 200 and img.shape[1] > 300


def test_robust_range_ignores_a_few_wild_outliers():
    g = np.random.default_rng(0)
    mag = g.lognormal(np.log(600.0), 0.15, 700)
    mag[:5] = 2e5  # 0.7 % of the poses at 200,000 nT
    lo, hi = robust_range([mag])
    assert 300 < lo < 500 and 800 < hi < 1500
    assert robust_range([np.zeros(50)]) is None and robust_range([]) is None
    assert robust_range([np.array([np.nan, np.inf])]) is None
    lo, hi = robust_range([np.r_[np.zeros(995), np.ones(5)]])  # nearly all equal: the whole range
    assert (lo, hi) == (0.0, 1.0)


@pytest.mark.parametrize("rate", [np.zeros(400), np.full(400, np.nan), np.zeros(0), None])
def test_noise_figure_with_outliers_and_degenerate_streams(tmp_path, rate):
    g = np.random.default_rng(1)
    mag = g.lognormal(np.log(600e-9), 0.15, 400)
    mag[:5] = 2e-4
    first = {"mag": mag, "accel": g.lognormal(np.log(0.02), 0.1, 400)}
    if rate is not None:
        first["rate"] = rate
    noise = [first, {"mag": np.full(30, 6e-7), "accel": np.full(30, np.nan)}]
    path = noise_figure(
        [SimpleNamespace(name="monday"), SimpleNamespace(name="tuesday")], noise, tmp_path / "noise.png"
    )
    assert_png(path)


def test_noise_figure_legend_counts_the_outliers(tmp_path, monkeypatch):
    import matplotlib.axes

    labels: list[str] = []
    original = matplotlib.axes.Axes.legend

    def spy(self, *args, **kwargs):
        labels.extend(self.get_legend_handles_labels()[1])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "legend", spy)
    g = np.random.default_rng(2)
    mag = g.lognormal(np.log(600e-9), 0.1, 400)
    mag[:5] = 2e-4
    noise_figure(
        [SimpleNamespace(name="s1")],
        [{"mag": mag, "accel": g.normal(0.02, 0.001, 400), "rate": np.zeros(400)}],
        tmp_path / "noise.png",
    )
    mag_label = next(lb for lb in labels if lb.startswith("s1 (median 6"))
    assert "beyond the axis" in mag_label and "max 2e+05" in mag_label


class LinearProblem:
    """y = a·t + b measured over 50 samples: a stand-in problem with known truths and units."""

    jacobian_mode = "forward"

    def __init__(self, fitted=(2.0, 1.0), truth=(2.0, 1.0)):
        self.t = torch.linspace(0.0, 1.0, 50, dtype=torch.float64)
        self.sigma = 0.05
        gen = torch.Generator().manual_seed(0)
        self.measured = truth[0] * self.t + truth[1] + self.sigma * torch.randn(50, generator=gen, dtype=torch.float64)
        self.params = ParameterSet(
            [ParamSpec("a", fitted[0], truth=truth[0], unit="m/s"), ParamSpec("b", fitted[1], truth=None, unit="m")]
        )

    def predict(self, values):
        return values[0] * self.t + values[1]


def test_fit_figure_of_an_unknown_problem_layout(tmp_path):
    problem = LinearProblem()
    series = measurement_series(problem)
    assert series.x_label == "measurement index" and series.channels == ["measurement"]
    assert_png(write_fit_figure(problem, tmp_path / "fit.png", "a = 2, b = 1"))


def test_fit_figure_of_the_modal_problem(tmp_path):
    from flexlearn.identify.modal import ModalIdConfig, ModalLinkProblem

    problem = ModalLinkProblem(ModalIdConfig(duration=0.3, n_elements=8))
    series = measurement_series(problem)
    assert series.unit == "mrad" and series.x_label == "time [s]" and len(series.channels) == 5
    assert series.shape(problem.measured.numpy()).shape == (len(series.x), 5)
    assert series.x[1] == pytest.approx(problem.dt)
    assert_png(write_fit_figure(problem, tmp_path / "fit.png"))


def test_fit_figure_with_a_constant_measurement(tmp_path):
    problem = LinearProblem(fitted=(1e-9, 1.0), truth=(1e-9, 1.0))
    problem.measured = torch.ones(50, dtype=torch.float64)  # residuals all but zero
    assert_png(write_fit_figure(problem, tmp_path / "fit.png"))
