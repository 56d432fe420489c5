"""Evaluation figures of the joint-direction model: error map over the spherical cap, error histogram and
training curves (`flexlearn.viz.training_curves`), drawn with matplotlib's Agg canvas (no pyplot, no global
state) and saved atomically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch
from matplotlib import patheffects
from matplotlib.figure import Figure
from matplotlib.projections.polar import PolarAxes

from flexlearn.errors import ArgumentError
from flexlearn.metrics import angular_error_deg, angular_error_summary
from flexlearn.viz.common import save_png
from flexlearn.viz.training_curves import MONITOR, plot_training_curves, read_metrics_csv

__all__ = [
    "FIGURE_NAMES",
    "cap_coordinates",
    "PolarErrorBins",
    "bin_polar_error",
    "adaptive_polar_bins",
    "plot_error_polar_map",
    "plot_error_histogram",
    "read_metrics_csv",
    "plot_training_curves",
    "write_evaluation_figures",
    "FigureCaption",
]

FIGURE_NAMES = {
    "error_polar_map": "error_polar_map.png",
    "error_histogram": "error_histogram.png",
    "training_curves": "training_curves.png",
}
_STATS: dict[str, Callable[[np.ndarray], Any]] = {"mean": np.mean, "median": np.median, "max": np.max}


@dataclass(frozen=True)
class FigureCaption:
    """What the evaluation figures say they show, in plain words.

    Args:
        title: what was scored, e.g. 'Held-out modules 2001 and 2002, each calibrated on 50 poses'.
        numbers: the headline numbers as the console prints them (the figure shows them as given, each
            '; '-separated part on a line of its own, so figure and headline agree); '' lets the figure state the
            median and p95 of all its samples itself.
    """

    title: str
    numbers: str = ""

    def lines(self, summary: dict[str, Any], what: str = "poses") -> str:
        """The title, then ``numbers`` or 'all N poses: median m°, p95 p°' of ``summary``
        (`flexlearn.metrics.angular_error_summary`).

        Args:
            summary: the error summary (``n_samples``, ``ang_err_median_deg``, ``ang_err_p95_deg`` are used).
            what: the noun counted in the own numbers line.

        Returns:
            The caption text, one line per part.
        """
        numbers = self.numbers or (
            f"all {summary['n_samples']} {what}: median {summary['ang_err_median_deg']:.2f}°, "
            f"p95 {summary['ang_err_p95_deg']:.2f}°"
        )
        return f"{self.title}\n" + numbers.replace("; ", "\n")


def _caption(title: "str | FigureCaption") -> FigureCaption:
    return title if isinstance(title, FigureCaption) else FigureCaption(str(title))


def _as_directions(x: np.ndarray | torch.Tensor, name: str) -> torch.Tensor:
    """(N, 3) numpy or torch -> float64 CPU tensor (N, 3)."""
    t = torch.as_tensor(x.detach().cpu() if isinstance(x, torch.Tensor) else np.asarray(x))
    if t.ndim != 2 or t.shape[-1] != 3:
        raise ArgumentError(f"{name} must have shape (N, 3), got {tuple(t.shape)}")
    return t.to(torch.float64)


def cap_coordinates(direction: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Colatitude from +z [deg] and azimuth atan2(y, x) [rad, (-pi, pi]] of directions (N, 3) -> (N,), (N,).

    Args:
        direction: directions (N, 3), numpy or torch; need not be unit.

    Returns:
        (colatitude (N,) [deg], azimuth (N,) [rad]).

    Raises:
        ArgumentError: ``direction`` is not of shape (N, 3).
    """
    d = _as_directions(direction, "direction").numpy()
    colat = np.degrees(np.arctan2(np.hypot(d[:, 0], d[:, 1]), d[:, 2]))
    return colat, np.arctan2(d[:, 1], d[:, 0])


@dataclass(frozen=True)
class PolarErrorBins:
    """Angular error binned over the cap: ``value[i, j]`` is the statistic of the samples whose label lies in
    colatitude ring i (edges ``colat_edges_deg``, (R+1,) deg) and azimuth sector j (edges ``azimuth_edges_rad``,
    (A+1,) rad); shape (R, A), NaN where ``count`` is 0."""

    colat_edges_deg: np.ndarray
    azimuth_edges_rad: np.ndarray
    value: np.ndarray
    count: np.ndarray
    statistic: str
    n_nonfinite: int

    def bin_of(self, colat_deg: float, azimuth_rad: float) -> tuple[int, int]:
        """(ring, sector) index of a point on the cap.

        Args:
            colat_deg: colatitude from +z [deg] (clipped to the rings).
            azimuth_rad: azimuth [rad] (wrapped to [−π, π)).

        Returns:
            (ring, sector).
        """
        i = int(np.clip(np.searchsorted(self.colat_edges_deg, colat_deg, side="right") - 1, 0, self.count.shape[0] - 1))
        a = (azimuth_rad + math.pi) % (2 * math.pi) - math.pi
        j = int(np.clip(np.searchsorted(self.azimuth_edges_rad, a, side="right") - 1, 0, self.count.shape[1] - 1))
        return i, j


def bin_polar_error(
    label,
    err_deg,
    colat_step_deg: float = 2.5,
    n_azimuth: int = 24,
    max_colat_deg: float | None = None,
    statistic: str = "mean",
) -> PolarErrorBins:
    """Bin per-sample errors ``err_deg`` (N,) [deg] by the label's position (N, 3) on the cap.

    Rings are ``colat_step_deg`` wide up to ``max_colat_deg`` (default: the largest label colatitude, rounded
    up to a ring); sectors split the azimuth evenly. Samples with a non-finite error or label are skipped.

    Args:
        label: label directions (N, 3), numpy or torch.
        err_deg: per-sample angular errors (N,) [deg].
        colat_step_deg: ring width [deg].
        n_azimuth: number of azimuth sectors.
        max_colat_deg: outer edge of the last ring [deg]; None: from the labels.
        statistic: "mean", "median" or "max".

    Returns:
        The bins.

    Raises:
        ArgumentError: unknown ``statistic``, or ``err_deg`` and ``label`` differ in length.
    """
    if statistic not in _STATS:
        raise ArgumentError(f"statistic must be one of {sorted(_STATS)}, got {statistic!r}")
    colat, az = cap_coordinates(label)
    err = torch.as_tensor(err_deg).detach().cpu().double().numpy().reshape(-1)
    if err.shape[0] != colat.shape[0]:
        raise ArgumentError(f"err_deg has {err.shape[0]} samples but label has {colat.shape[0]}")
    ok = np.isfinite(err) & np.isfinite(colat) & np.isfinite(az)
    colat, az, err = colat[ok], az[ok], err[ok]
    if max_colat_deg is None:
        top = float(colat.max()) if colat.size else colat_step_deg
        max_colat_deg = colat_step_deg * max(1, math.ceil(top / colat_step_deg - 1e-9))
    n_rings = max(1, math.ceil(max_colat_deg / colat_step_deg - 1e-9))
    r_edges = colat_step_deg * np.arange(n_rings + 1, dtype=float)
    a_edges = np.linspace(-math.pi, math.pi, n_azimuth + 1)
    i = np.clip(np.searchsorted(r_edges, colat, side="right") - 1, 0, n_rings - 1)
    j = np.clip(np.searchsorted(a_edges, az, side="right") - 1, 0, n_azimuth - 1)
    inside = colat <= r_edges[-1]
    flat = i[inside] * n_azimuth + j[inside]
    count = np.bincount(flat, minlength=n_rings * n_azimuth).reshape(n_rings, n_azimuth)
    value = np.full(n_rings * n_azimuth, np.nan)
    order = np.argsort(flat, kind="stable")
    keys, starts = np.unique(flat[order], return_index=True)
    for k, chunk in zip(keys, np.split(err[inside][order], starts[1:])):
        value[k] = _STATS[statistic](chunk)
    return PolarErrorBins(r_edges, a_edges, value.reshape(n_rings, n_azimuth), count, statistic, int((~ok).sum()))


_NICE_STEPS_DEG = (2.5, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0)
_NICE_SECTORS = (24, 18, 12, 8, 6, 4)


def adaptive_polar_bins(
    n_samples: int, max_colat_deg: float, samples_per_bin: float = 8.0, finest: tuple[float, int] = (2.5, 24)
) -> tuple[float, int]:
    """(colatitude step [deg], azimuth sectors) of the finest grid, down to ``finest``, whose bins hold
    ``samples_per_bin`` samples on average, preferring bins about as wide as long (at mid radius).

    Args:
        n_samples: number of samples to bin.
        max_colat_deg: largest colatitude to cover [deg].
        samples_per_bin: target mean count per bin.
        finest: the finest grid allowed: (colatitude step [deg], azimuth sectors).

    Returns:
        (colatitude step [deg], azimuth sectors).
    """
    target = max(1.0, n_samples / samples_per_bin)
    top = max(float(max_colat_deg), 1e-6)
    best: tuple[float, float, int] = (-1.0, _NICE_STEPS_DEG[-1], _NICE_SECTORS[-1])
    for step in (s for s in _NICE_STEPS_DEG if s >= finest[0]):
        rings = max(1, math.ceil(top / step - 1e-9))
        for sectors in (a for a in _NICE_SECTORS if a <= finest[1]):
            if rings * sectors > target and (rings, sectors) != (1, _NICE_SECTORS[-1]):
                continue
            arc = 0.5 * min(top, rings * step) * 2 * math.pi / sectors  # sector width at mid radius [deg]
            score = rings * sectors * math.sqrt(min(step / arc, arc / step))
            if score > best[0]:
                best = (score, step, sectors)
    return best[1], best[2]


def plot_error_polar_map(
    label,
    pred,
    path,
    title: "str | FigureCaption" = "Direction error of the test poses over the bend range",
    colat_step_deg: Optional[float] = None,
    n_azimuth: Optional[int] = None,
    statistic: str = "mean",
    clip_percentile: float = 99.0,
) -> PolarErrorBins:
    """Polar map of the angular error of ``pred`` against ``label`` (both (N, 3)), saved as PNG at ``path``.

    Radius: colatitude of the label from +z [deg]; angle: azimuth atan2(y, x); colour: per-bin ``statistic``
    of the angular error [deg], capped at the ``clip_percentile`` of the bin values. The grid (``colat_step_deg``,
    ``n_azimuth``) is chosen from the number of samples when not given (`adaptive_polar_bins`: a small test set
    gets coarse bins, not a map of empty ones); small grids show each bin's sample count. ``title``: what was scored,
    or a `FigureCaption` with the headline numbers to show instead of the figure's own. Returns the bins.

    Args:
        label: label directions (N, 3), numpy or torch.
        pred: predicted directions (N, 3), numpy or torch.
        path: the PNG file to write.
        title: what was scored, or a `FigureCaption`.
        colat_step_deg: ring width [deg]; None: chosen by `adaptive_polar_bins`.
        n_azimuth: number of azimuth sectors; None: chosen by `adaptive_polar_bins`.
        statistic: per-bin statistic, "mean", "median" or "max".
        clip_percentile: percentile of the bin values [%] where the colour scale ends.

    Returns:
        The bins shown.

    Raises:
        ArgumentError: ``label`` or ``pred`` is not (N, 3), or their shapes differ.
    """
    lab, prd = _as_directions(label, "label"), _as_directions(pred, "pred")
    if lab.shape != prd.shape:
        raise ArgumentError(f"label {tuple(lab.shape)} and pred {tuple(prd.shape)} differ in shape")
    err = angular_error_deg(prd, lab)
    if colat_step_deg is None or n_azimuth is None:
        colat = cap_coordinates(lab)[0]
        colat = colat[np.isfinite(colat)]
        step, sectors = adaptive_polar_bins(int(colat.size), float(colat.max()) if colat.size else 1.0)
        colat_step_deg, n_azimuth = colat_step_deg or step, n_azimuth or sectors
    bins = bin_polar_error(lab, err, colat_step_deg, n_azimuth, statistic=statistic)
    shown = bins.value[np.isfinite(bins.value)]
    vmax = float(np.percentile(shown, clip_percentile)) if shown.size else 1.0
    vmax = vmax if vmax > 0 else 1.0
    s = angular_error_summary(err)

    fig = Figure(figsize=(6.4, 5.8), layout="constrained")
    ax = fig.add_subplot(projection="polar")
    assert isinstance(ax, PolarAxes)
    mesh = _draw_bins(ax, bins, vmax)
    ax.set_ylim(0.0, bins.colat_edges_deg[-1])
    ax.set_rlabel_position(112.5)
    ax.text(
        np.radians(112.5), bins.colat_edges_deg[-1] * 1.13, "colatitude θ [deg]", ha="center", va="center", fontsize=8
    )
    ax.set_xlabel("azimuth φ = atan2(y, x) [deg]")
    ax.grid(True, alpha=0.4)
    cb = fig.colorbar(mesh, ax=ax, extend="max" if shown.size and shown.max() > vmax else "neither", pad=0.1)
    cb.set_label(f"angular error, bin {statistic} [deg]")
    extra = f", {bins.n_nonfinite} non-finite skipped" if bins.n_nonfinite else ""
    filled = bins.count[bins.count > 0]
    ax.set_title(
        f"{_caption(title).lines(s)}{extra}\nbins {colat_step_deg:g}° × {360 / n_azimuth:g}°, "
        f"{filled.size} of {bins.count.size} filled, median {np.median(filled) if filled.size else 0:.0f} "
        "samples per bin",
        fontsize=9,
    )
    save_png(fig, path)
    return bins


def _draw_bins(ax, bins: PolarErrorBins, vmax: float):
    """The bins as annular sectors (each sector drawn as 5° slices, so coarse bins keep their arcs), their
    outlines and, on small grids, each bin's sample count. Returns the mesh (for the colour bar)."""
    a_edges = bins.azimuth_edges_rad
    k = max(1, math.ceil(float(np.degrees(a_edges[1] - a_edges[0])) / 5.0))
    fine = np.concatenate([np.linspace(a, b, k + 1)[:-1] for a, b in zip(a_edges[:-1], a_edges[1:])] + [a_edges[-1:]])
    theta, r = np.meshgrid(fine, bins.colat_edges_deg)
    mesh = ax.pcolormesh(
        theta,
        r,
        np.ma.masked_invalid(np.repeat(bins.value, k, axis=1)),
        cmap="viridis",
        vmin=0.0,
        vmax=vmax,
        shading="flat",
    )
    if bins.count.size <= 72:
        circle = np.linspace(-math.pi, math.pi, 361)
        for edge in bins.colat_edges_deg[1:]:
            ax.plot(circle, np.full_like(circle, edge), color="white", linewidth=0.6)
        for a in a_edges[:-1]:
            ax.plot([a, a], [0.0, bins.colat_edges_deg[-1]], color="white", linewidth=0.6)
        _annotate_counts(ax, bins)
    return mesh


def _annotate_counts(ax, bins: PolarErrorBins) -> None:
    """Write each filled bin's sample count at its centre."""
    r_mid = 0.5 * (bins.colat_edges_deg[1:] + bins.colat_edges_deg[:-1])
    a_mid = 0.5 * (bins.azimuth_edges_rad[1:] + bins.azimuth_edges_rad[:-1])
    for i, r in enumerate(r_mid):
        for j, a in enumerate(a_mid):
            if bins.count[i, j]:
                ax.text(
                    a,
                    r,
                    str(int(bins.count[i, j])),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white",
                    path_effects=[_outline()],
                )


def _outline():
    return patheffects.withStroke(linewidth=1.2, foreground="black")


def plot_error_histogram(
    err_deg,
    path,
    title: "str | FigureCaption" = "Direction error of the test poses",
    n_bins: int = 60,
    tail_percentile: float = 99.5,
) -> dict[str, float]:
    """Histogram of angular errors ``err_deg`` (N,) [deg] with median, RMS and p95 lines (of all of them), saved as
    PNG; ``title`` says what was scored, a `FigureCaption` also the headline numbers.

    The x range ends at 1.25 x the ``tail_percentile`` of the errors; the legend counts samples beyond it.
    Returns ``angular_error_summary`` of the errors.

    Args:
        err_deg: angular errors (N,) [deg], numpy or torch; non-finite ones are counted, not drawn.
        path: the PNG file to write.
        title: what was scored, or a `FigureCaption`.
        n_bins: number of histogram bins.
        tail_percentile: percentile [%] of the errors that sets the x range.

    Returns:
        The error summary (`flexlearn.metrics.angular_error_summary`).
    """
    err = torch.as_tensor(err_deg).detach().cpu().double().reshape(-1)
    s = angular_error_summary(err)
    e = err[torch.isfinite(err)].numpy()
    upper = min(float(e.max()), 1.25 * float(np.percentile(e, tail_percentile))) if e.size else 1.0
    upper = upper if upper > 0 else 1.0
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.hist(e, bins=np.linspace(0.0, upper, n_bins + 1).tolist(), color="0.65", edgecolor="0.4", linewidth=0.4)
    for key, name, colour, style in (
        ("median", "median", "tab:blue", "-"),
        ("rms", "RMS", "tab:orange", "--"),
        ("p95", "p95", "tab:red", ":"),
    ):
        v = s[f"ang_err_{key}_deg"]
        if math.isfinite(v):
            ax.axvline(v, color=colour, linestyle=style, linewidth=1.6, label=f"{name}, all poses = {v:.2f}°")
    beyond = int((e > upper).sum())
    if beyond:
        ax.plot([], [], " ", label=f"{beyond} beyond {upper:.1f}° (max {e.max():.1f}°)")
    if s["n_nonfinite"]:
        ax.plot([], [], " ", label=f"{s['n_nonfinite']} non-finite skipped")
    ax.set_xlim(0.0, upper)
    ax.set_xlabel("angular error [deg]")
    ax.set_ylabel("samples")
    ax.set_title(_caption(title).lines(s), fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", fontsize=8)
    ax.grid(True, alpha=0.3)
    save_png(fig, path)
    return s


def write_evaluation_figures(
    label,
    pred,
    out_dir,
    metrics_csv=None,
    caption: Optional[FigureCaption] = None,
    monitor: str = MONITOR,
    mode: str = "min",
) -> dict[str, Path]:
    """Write the polar error map, error histogram and (if ``metrics_csv`` is given) training curves of
    ``pred`` against ``label`` (both (N, 3)) into ``out_dir`` under the names in ``FIGURE_NAMES``; ``caption``
    says what was scored and the headline numbers (default: the test poses, the figures' own numbers);
    ``monitor`` and ``mode`` are those the best checkpoint was chosen by (the curves mark its epoch).

    The metrics file is checked first, so a missing one fails before any figure is written.

    Args:
        label: label directions (N, 3), numpy or torch.
        pred: predicted directions (N, 3), numpy or torch.
        out_dir: folder of the figures.
        metrics_csv: the training's ``metrics.csv``; None: no training curves.
        caption: what was scored and the headline numbers; None: the figures' defaults.
        monitor: metric the best checkpoint was chosen by.
        mode: "min" or "max", the direction of ``monitor`` that is best.

    Returns:
        Figure name (a key of ``FIGURE_NAMES``) -> path written.
    """
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    if metrics_csv is not None:
        paths["training_curves"] = out / FIGURE_NAMES["training_curves"]
        plot_training_curves(metrics_csv, paths["training_curves"], monitor=monitor, mode=mode)
    lab, prd = _as_directions(label, "label"), _as_directions(pred, "pred")
    paths["error_polar_map"] = out / FIGURE_NAMES["error_polar_map"]
    polar = caption or FigureCaption("Direction error of the test poses over the bend range")
    plot_error_polar_map(lab, prd, paths["error_polar_map"], title=polar)
    paths["error_histogram"] = out / FIGURE_NAMES["error_histogram"]
    hist = caption or FigureCaption("Direction error of the test poses")
    plot_error_histogram(angular_error_deg(prd, lab), paths["error_histogram"], title=hist)
    return paths
