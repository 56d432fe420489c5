"""Evaluation figures of the direction model: valid PNGs, error binning, sparse Lightning metrics, errors."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
import torch

from flexlearn.errors import ArgumentError, DataError
from flexlearn.metrics import angular_error_deg
from flexlearn.viz.direction_figures import (
    FIGURE_NAMES,
    bin_polar_error,
    cap_coordinates,
    plot_error_histogram,
    plot_error_polar_map,
    plot_training_curves,
    read_metrics_csv,
    write_evaluation_figures,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Hand-made Lightning CSVLogger file: sorted header, sparse rows (train steps, then val / epoch rows).
SPARSE_METRICS = """epoch,lr-Adam,step,train/loss_epoch,train/loss_step,val/ang_err_median_deg,val/loss
0,0.001,9,,0.09,,
0,,19,,0.07,,
0,,19,,,4.5,0.06
0,,19,0.08,,,
1,0.001,29,,0.05,,
1,,39,,0.04,,
1,,39,,,2.5,0.035
1,,39,0.045,,,
"""


def _cap(n: int, max_colat_deg: float = 30.0, seed: int = 0) -> np.ndarray:
    """(n, 3) unit directions spread over the cap up to ``max_colat_deg`` from +z."""
    g = np.random.default_rng(seed)
    colat = np.radians(max_colat_deg) * np.sqrt(g.random(n))
    az = g.uniform(-math.pi, math.pi, n)
    return np.stack([np.sin(colat) * np.cos(az), np.sin(colat) * np.sin(az), np.cos(colat)], axis=1)


def _direction(colat_deg: float, az_deg: float) -> np.ndarray:
    c, a = np.radians(colat_deg), np.radians(az_deg)
    return np.array([np.sin(c) * np.cos(a), np.sin(c) * np.sin(a), np.cos(c)])


def _perturb(label: np.ndarray, deg: float, seed: int = 1) -> np.ndarray:
    g = np.random.default_rng(seed)
    return label + np.radians(deg) * g.normal(size=label.shape)


def assert_png(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    # atomic_path's temporary files are hidden (".name...") whatever their suffix
    assert not [q for q in path.parent.iterdir() if q.name.startswith(".")], "temporary file left behind"


def test_cap_coordinates():
    colat, az = cap_coordinates(np.stack([_direction(0, 0), _direction(20, 90), _direction(30, -135)]))
    np.testing.assert_allclose(colat, [0.0, 20.0, 30.0], atol=1e-12)
    np.testing.assert_allclose(az[1:], np.radians([90.0, -135.0]), atol=1e-12)


def test_binning_puts_injected_error_in_its_bin():
    label = _cap(4000)
    pred = _perturb(label, 1.0)
    target = _direction(22.0, 60.0)
    hit = np.argmin(np.linalg.norm(label - target, axis=1))
    pred[hit] = [0.0, -1.0, 0.0]  # roughly 90 deg off
    err = angular_error_deg(torch.as_tensor(pred), torch.as_tensor(label))
    for stat in ("mean", "max"):
        bins = bin_polar_error(label, err, colat_step_deg=2.5, n_azimuth=24, statistic=stat)
        assert bins.value.shape == bins.count.shape == (12, 24)
        assert bins.count.sum() == len(label)
        i, j = bins.bin_of(*[float(v[0]) for v in cap_coordinates(label[hit : hit + 1])])
        assert np.nanargmax(bins.value) == i * 24 + j
        assert bins.colat_edges_deg[i] <= 22.5 and bins.colat_edges_deg[i + 1] >= 21.5
        assert bins.azimuth_edges_rad[j] <= math.radians(61) and bins.azimuth_edges_rad[j + 1] >= math.radians(59)
    assert np.isnan(bins.value[bins.count == 0]).all()


def test_binning_skips_nonfinite_and_checks_args():
    label = _cap(100)
    err = torch.ones(100, dtype=torch.float64)
    err[:3] = float("nan")
    bins = bin_polar_error(label, err)
    assert bins.n_nonfinite == 3 and bins.count.sum() == 97
    with pytest.raises(ValueError, match="statistic"):
        bin_polar_error(label, err, statistic="mode")
    with pytest.raises(ValueError, match="samples"):
        bin_polar_error(label, err[:50])


def test_polar_map_png_and_returned_bins(tmp_path):
    label = _cap(2000)
    pred = torch.as_tensor(_perturb(label, 1.0), dtype=torch.float32)  # float32 torch + float64 numpy mix
    hit = np.argmin(np.linalg.norm(label - _direction(12.0, -100.0), axis=1))
    pred[hit] = torch.tensor([1.0, 0.0, 0.0])
    bins = plot_error_polar_map(label, pred, tmp_path / "map.png", title="test map")
    assert_png(tmp_path / "map.png")
    colat, az = cap_coordinates(label[hit : hit + 1])
    i, j = bins.bin_of(float(colat[0]), float(az[0]))
    assert np.nanargmax(bins.value) == i * bins.value.shape[1] + j
    with pytest.raises(ValueError, match="shape"):
        plot_error_polar_map(label, pred[:10], tmp_path / "bad.png")
    assert not (tmp_path / "bad.png").exists()


def test_histogram_png_and_stats(tmp_path):
    err = np.abs(np.random.default_rng(2).normal(0.0, 2.0, 3000))
    err[:4] = [90.0, 120.0, np.nan, np.inf]
    s = plot_error_histogram(err, tmp_path / "hist.png")
    assert_png(tmp_path / "hist.png")
    finite = err[np.isfinite(err)]
    assert s["ang_err_median_deg"] == pytest.approx(np.median(finite))
    assert s["ang_err_rms_deg"] == pytest.approx(np.sqrt(np.mean(finite**2)))
    assert s["n_nonfinite"] == 2


def test_read_sparse_metrics(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(SPARSE_METRICS)
    cols = read_metrics_csv(path)
    assert len(cols["step"]) == 8
    val = cols["val/loss"]
    np.testing.assert_allclose(val[np.isfinite(val)], [0.06, 0.035])
    assert np.isnan(cols["train/loss_step"][2])


def test_training_curves_from_sparse_csv(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(SPARSE_METRICS)
    groups = plot_training_curves(path, tmp_path / "curves.png")
    assert_png(tmp_path / "curves.png")
    assert groups["loss"] == ["train/loss_epoch", "train/loss_step", "val/loss"]
    assert groups["ang_err_median_deg"] == ["val/ang_err_median_deg"]
    assert "lr-Adam" in groups and "step" not in groups and "epoch" not in groups


def test_training_curves_tolerate_missing_columns(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,val/loss\n0,0.5\n1,\n2,0.2\n")  # no step column, a blank cell
    groups = plot_training_curves(path, tmp_path / "curves.png", x="step")
    assert groups == {"loss": ["val/loss"]}
    assert_png(tmp_path / "curves.png")


@pytest.mark.parametrize(
    "content, match",
    [
        (None, "does not exist"),
        ("", "empty"),
        ("epoch,step\n0,9\n", "no metric columns"),
        ("step,train/loss\n0,abc\n", "line 2"),
    ],
)
def test_training_curves_data_errors(tmp_path, content, match):
    path = tmp_path / "metrics.csv"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=match) as exc:
        plot_training_curves(path, tmp_path / "curves.png")
    assert str(path) in str(exc.value)
    assert not (tmp_path / "curves.png").exists()


def test_write_evaluation_figures(tmp_path):
    label = _cap(500)
    pred = _perturb(label, 2.0)
    metrics = tmp_path / "metrics.csv"
    metrics.write_text(SPARSE_METRICS)
    paths = write_evaluation_figures(torch.as_tensor(label), pred, tmp_path / "figs", metrics_csv=metrics)
    assert set(paths) == set(FIGURE_NAMES)
    for key, p in paths.items():
        assert p == tmp_path / "figs" / FIGURE_NAMES[key]
        assert_png(p)
    paths = write_evaluation_figures(label, pred, tmp_path / "figs2")
    assert set(paths) == {"error_polar_map", "error_histogram"}
    with pytest.raises(DataError, match="does not exist"):
        write_evaluation_figures(label, pred, tmp_path / "figs3", metrics_csv=tmp_path / "missing.csv")
    assert not (tmp_path / "figs3").exists() or not any((tmp_path / "figs3").iterdir())


# ------------------------------------------------------------------ figures a reader can read (and degenerate data)
def test_training_curves_panels_log_axes_and_constant_quantities(tmp_path):
    from flexlearn.viz.training_curves import epoch_axis, log_scaled, plan_panels

    rows = [
        "epoch,step,train/loss,val/loss,val/ang_err_median_deg,val/ang_err_p95_deg,val/n_samples,val/invalid_fraction"
    ]
    for e in range(40):
        loss = 0.5 * 0.8**e
        rows.append(f"{e},{9 * e + 8},{loss},{0.9 * loss},{12 * 0.85**e + 0.3},{20 * 0.85**e + 0.8},150,0")
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    cols = read_metrics_csv(path)
    groups, panels, flat = plan_panels(cols, [c for c in cols if c not in ("epoch", "step")])
    assert list(panels) == ["loss", "angular error [deg]"]  # losses first, every error statistic in one panel
    assert panels["angular error [deg]"] == ["val/ang_err_median_deg", "val/ang_err_p95_deg"]
    assert sorted(flat) == ["invalid_fraction", "n_samples"]  # constant: a note, not a panel
    assert set(groups) == {"loss", "ang_err_median_deg", "ang_err_p95_deg", "n_samples", "invalid_fraction"}
    xs, label = epoch_axis(cols)
    assert label == "epoch" and xs[0] == pytest.approx(1.0) and xs[-1] == pytest.approx(40.0)
    assert log_scaled("loss", [cols["train/loss"]]) and log_scaled("angular error [deg]", [cols["val/ang_err_p95_deg"]])
    assert not log_scaled("invalid_fraction", [cols["val/invalid_fraction"]])  # zeros: linear
    plot_training_curves(path, tmp_path / "curves.png")
    assert_png(tmp_path / "curves.png")


@pytest.mark.parametrize(
    "content",
    [
        "epoch,step,val/loss\n0,9,0.5\n",  # a single row
        "epoch,step,val/n_samples,val/invalid_fraction\n0,9,150,0\n1,19,150,0\n",  # nothing varies
        "epoch,step,val/loss,train/loss\n0,9,,0.3\n1,19,,0.2\n",  # a column without values
        "step,val/loss\n0,-1\n1,2\n",  # negative values: linear axis, no epoch column
    ],
)
def test_training_curves_of_degenerate_logs(tmp_path, content):
    path = tmp_path / "metrics.csv"
    path.write_text(content)
    groups = plot_training_curves(path, tmp_path / "curves.png")
    assert groups and "step" not in groups and "epoch" not in groups
    assert_png(tmp_path / "curves.png")


def test_polar_map_bins_adapt_to_the_number_of_samples(tmp_path):
    from flexlearn.viz.direction_figures import adaptive_polar_bins

    steps = [adaptive_polar_bins(n, 30.0) for n in (1, 20, 144, 600, 3000, 10**6)]
    assert steps[-1] == (2.5, 24) and steps[-2] == (2.5, 24)  # plenty of samples: the finest grid
    cells = [math.ceil(30.0 / s - 1e-9) * a for s, a in steps]
    assert cells == sorted(cells) and cells[0] <= 4
    for n, (s, a) in zip((20, 144, 600), steps[1:4]):
        assert n / (math.ceil(30.0 / s - 1e-9) * a) >= 8 * 0.5  # about 8 samples per bin or more
    label = _cap(144)
    bins = plot_error_polar_map(label, _perturb(label, 1.0), tmp_path / "small.png")
    assert bins.count.size <= 144 / 8 and (bins.count > 0).mean() > 0.7  # not a map of empty bins
    assert_png(tmp_path / "small.png")
    bins = plot_error_polar_map(label, _perturb(label, 1.0), tmp_path / "fixed.png", colat_step_deg=2.5, n_azimuth=24)
    assert bins.value.shape == (12, 24)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_polar_map_of_very_few_samples(tmp_path, n):
    label = _cap(n)
    plot_error_polar_map(label, label, tmp_path / "few.png")  # zero error everywhere too
    assert_png(tmp_path / "few.png")
    one = np.tile(_direction(0.0, 0.0), (5, 1))  # all labels on the axis: colatitude 0
    plot_error_polar_map(one, _perturb(one, 1.0), tmp_path / "axis.png")
    assert_png(tmp_path / "axis.png")


def test_test_marks_sit_at_the_best_epoch_not_the_last(tmp_path):
    """Lightning logs the test row after the last epoch; the test scores the best checkpoint, so its star and the
    dotted line sit at the epoch of the best validation median (epoch 3 of 5 here, counted from 1)."""
    from flexlearn.viz.training_curves import training_curves_figure

    val = [4.0, 2.0, 1.5, 1.7, 1.6]
    rows = ["epoch,step,train/loss,val/loss,val/ang_err_median_deg,test/ang_err_median_deg,test/loss"]
    for e, v in enumerate(val):
        rows += [f"{e},{10 * e + 9},,{v / 100},{v},,", f"{e},{10 * e + 9},{0.1 / (e + 1)},,,,"]
    rows.append(f"5,49,,,,{1.45},{0.0145}")  # the test row, logged at the end of training
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    fig, _ = training_curves_figure(path)
    assert "best checkpoint at epoch 3, by val/ang_err_median_deg" in fig.get_suptitle()
    stars = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_marker() == "*"]
    assert len(stars) == 2 and all(list(ln.get_xdata()) == [3.0] for ln in stars)
    assert sorted(ln.get_label() for ln in stars) == ["test median (best checkpoint)", "test/loss (best checkpoint)"]
    dotted = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_label().startswith("best checkpoint")]
    assert dotted and all(ln.get_label() == "best checkpoint (epoch 3)" for ln in dotted)
    assert all(np.allclose(ln.get_xdata(), 3.0) for ln in dotted)
    fig, _ = training_curves_figure(path, mode="max")  # a monitor to maximise: the first epoch here
    assert "best checkpoint at epoch 1" in fig.get_suptitle()
    (tmp_path / "no_val.csv").write_text("epoch,step,train/loss,test/loss\n0,9,0.5,\n1,19,0.4,\n2,29,,0.3\n")
    fig, _ = training_curves_figure(tmp_path / "no_val.csv")  # no monitor logged: the star stays where it was logged
    stars = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_marker() == "*"]
    assert "best checkpoint" not in fig.get_suptitle() and list(stars[0].get_xdata()) == [3.0]


def test_evaluation_figures_say_what_they_show(tmp_path):
    """Default words: the test poses, and the numbers of all of them; a caption's title and numbers replace them."""
    from PIL import Image

    from flexlearn.metrics import angular_error_summary
    from flexlearn.viz.direction_figures import FigureCaption

    label = _cap(400)
    pred = _perturb(label, 2.0)
    s = angular_error_summary(angular_error_deg(torch.as_tensor(pred), torch.as_tensor(label)))
    numbers = f"all 400 poses: median {s['ang_err_median_deg']:.2f}°, p95 {s['ang_err_p95_deg']:.2f}°"
    paths = write_evaluation_figures(label, pred, tmp_path / "a")
    for name, first in (("error_polar_map", "over the bend range"), ("error_histogram", "poses")):
        with Image.open(paths[name]) as img:
            title = img.text["Title"].splitlines()
        assert title[0].startswith("Direction error of the test poses") and title[0].endswith(first)
        assert title[1] == numbers
    caption = FigureCaption("Direction error of module 7, uncalibrated", "within the cap: median 1.00°; all: x")
    paths = write_evaluation_figures(label, pred, tmp_path / "b", caption=caption)
    with Image.open(paths["error_histogram"]) as img:
        assert img.text["Title"].splitlines() == [
            "Direction error of module 7, uncalibrated",
            "within the cap: median 1.00°",
            "all: x",
        ]
    with pytest.raises(ArgumentError, match="mode must be 'min' or 'max'"):
        plot_training_curves(_sparse(tmp_path), tmp_path / "c.png", mode="lowest")


def _sparse(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.csv"
    path.write_text(SPARSE_METRICS)
    return path
