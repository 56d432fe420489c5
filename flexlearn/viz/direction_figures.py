"""Evaluation figures of the joint-direction model: error map over the spherical cap, error histogram and
training curves, drawn with matplotlib's Agg canvas (no pyplot, no global state) and saved atomically.
"""
from __future__ import annotations

import csv
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from flexlearn.atomic import atomic_path
from flexlearn.errors import DataError
from flexlearn.metrics import angular_error_deg, angular_error_summary

FIGURE_NAMES = {
    "error_polar_map": "error_polar_map.png",
    "error_histogram": "error_histogram.png",
    "training_curves": "training_curves.png",
}
_STATS = {"mean": np.mean, "median": np.median, "max": np.max}


def _as_directions(x: np.ndarray | torch.Tensor, name: str) -> torch.Tensor:
    """(N, 3) numpy or torch -> float64 CPU tensor (N, 3)."""
    t = torch.as_tensor(x.detach().cpu() if isinstance(x, torch.Tensor) else np.asarray(x))
    if t.ndim != 2 or t.shape[-1] != 3:
        raise ValueError(f"{name} must have shape (N, 3), got {tuple(t.shape)}")
    return t.to(torch.float64)


def _save(fig: Figure, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Write ``fig`` as PNG to ``path`` atomically (the temporary name ends in .tmp, so the format is explicit)."""
    path = Path(path)
    FigureCanvasAgg(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    return path


def cap_coordinates(direction: np.ndarray | torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Colatitude from +z [deg] and azimuth atan2(y, x) [rad, (-pi, pi]] of directions (N, 3) -> (N,), (N,)."""
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
        """(ring, sector) index of a point on the cap."""
        i = int(np.clip(np.searchsorted(self.colat_edges_deg, colat_deg, side="right") - 1, 0, self.count.shape[0] - 1))
        a = (azimuth_rad + math.pi) % (2 * math.pi) - math.pi
        j = int(np.clip(np.searchsorted(self.azimuth_edges_rad, a, side="right") - 1, 0, self.count.shape[1] - 1))
        return i, j


def bin_polar_error(label, err_deg, colat_step_deg: float = 2.5, n_azimuth: int = 24,
                    max_colat_deg: float | None = None, statistic: str = "mean") -> PolarErrorBins:
    """Bin per-sample errors ``err_deg`` (N,) [deg] by the label's position (N, 3) on the cap.

    Rings are ``colat_step_deg`` wide up to ``max_colat_deg`` (default: the largest label colatitude, rounded
    up to a ring); sectors split the azimuth evenly. Samples with a non-finite error or label are skipped.
    """
    if statistic not in _STATS:
        raise ValueError(f"statistic must be one of {sorted(_STATS)}, got {statistic!r}")
    colat, az = cap_coordinates(label)
    err = torch.as_tensor(err_deg).detach().cpu().double().numpy().reshape(-1)
    if err.shape[0] != colat.shape[0]:
        raise ValueError(f"err_deg has {err.shape[0]} samples but label has {colat.shape[0]}")
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
    return PolarErrorBins(r_edges, a_edges, value.reshape(n_rings, n_azimuth), count, statistic,
                          int((~ok).sum()))


def plot_error_polar_map(label, pred, path, title: str = "Direction error over the joint cap",
                         colat_step_deg: float = 2.5, n_azimuth: int = 24, statistic: str = "mean",
                         clip_percentile: float = 99.0) -> PolarErrorBins:
    """Polar map of the angular error of ``pred`` against ``label`` (both (N, 3)), saved as PNG at ``path``.

    Radius: colatitude of the label from +z [deg]; angle: azimuth atan2(y, x); colour: per-bin ``statistic``
    of the angular error [deg], capped at the ``clip_percentile`` of the bin values. Returns the bins drawn.
    """
    lab, prd = _as_directions(label, "label"), _as_directions(pred, "pred")
    if lab.shape != prd.shape:
        raise ValueError(f"label {tuple(lab.shape)} and pred {tuple(prd.shape)} differ in shape")
    err = angular_error_deg(prd, lab)
    bins = bin_polar_error(lab, err, colat_step_deg, n_azimuth, statistic=statistic)
    shown = bins.value[np.isfinite(bins.value)]
    vmax = float(np.percentile(shown, clip_percentile)) if shown.size else 1.0
    vmax = vmax if vmax > 0 else 1.0
    s = angular_error_summary(err)

    fig = Figure(figsize=(6.4, 5.6), layout="constrained")
    ax = fig.add_subplot(projection="polar")
    theta, r = np.meshgrid(bins.azimuth_edges_rad, bins.colat_edges_deg)
    mesh = ax.pcolormesh(theta, r, np.ma.masked_invalid(bins.value), cmap="viridis", vmin=0.0, vmax=vmax,
                         shading="flat")
    ax.set_ylim(0.0, bins.colat_edges_deg[-1])
    ax.set_rlabel_position(112.5)
    ax.text(np.radians(112.5), bins.colat_edges_deg[-1] * 1.13, "colatitude θ [deg]", ha="center",
            va="center", fontsize=8)
    ax.set_xlabel("azimuth φ = atan2(y, x) [deg]")
    ax.grid(True, alpha=0.4)
    cb = fig.colorbar(mesh, ax=ax, extend="max" if shown.size and shown.max() > vmax else "neither", pad=0.1)
    cb.set_label(f"angular error, bin {statistic} [deg]")
    extra = f", {bins.n_nonfinite} non-finite skipped" if bins.n_nonfinite else ""
    ax.set_title(f"{title}\nN = {s['n_samples']}, median {s['ang_err_median_deg']:.2f}°, "
                 f"p95 {s['ang_err_p95_deg']:.2f}°{extra}", fontsize=10)
    _save(fig, path)
    return bins


def plot_error_histogram(err_deg, path, title: str = "Direction error distribution", n_bins: int = 60,
                         tail_percentile: float = 99.5) -> dict[str, float]:
    """Histogram of angular errors ``err_deg`` (N,) [deg] with median, RMS and p95 lines, saved as PNG.

    The x range ends at 1.25 x the ``tail_percentile`` of the errors; the legend counts samples beyond it.
    Returns ``angular_error_summary`` of the errors.
    """
    err = torch.as_tensor(err_deg).detach().cpu().double().reshape(-1)
    s = angular_error_summary(err)
    e = err[torch.isfinite(err)].numpy()
    upper = min(float(e.max()), 1.25 * float(np.percentile(e, tail_percentile))) if e.size else 1.0
    upper = upper if upper > 0 else 1.0
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.hist(e, bins=np.linspace(0.0, upper, n_bins + 1), color="0.65", edgecolor="0.4", linewidth=0.4)
    for key, name, colour, style in (("median", "median", "tab:blue", "-"), ("rms", "RMS", "tab:orange", "--"),
                                     ("p95", "p95", "tab:red", ":")):
        v = s[f"ang_err_{key}_deg"]
        if math.isfinite(v):
            ax.axvline(v, color=colour, linestyle=style, linewidth=1.6, label=f"{name} = {v:.2f}°")
    beyond = int((e > upper).sum())
    if beyond:
        ax.plot([], [], " ", label=f"{beyond} beyond {upper:.1f}° (max {e.max():.1f}°)")
    if s["n_nonfinite"]:
        ax.plot([], [], " ", label=f"{s['n_nonfinite']} non-finite skipped")
    ax.set_xlim(0.0, upper)
    ax.set_xlabel("angular error [deg]")
    ax.set_ylabel("samples")
    ax.set_title(f"{title} (N = {s['n_samples']})", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", fontsize=8)
    ax.grid(True, alpha=0.3)
    _save(fig, path)
    return s


def read_metrics_csv(metrics_csv) -> dict[str, np.ndarray]:
    """Columns of a Lightning CSVLogger ``metrics.csv`` as float arrays (R,), NaN where a row leaves a cell blank.

    Raises DataError naming the file if it is missing, empty or holds a non-numeric value.
    """
    path = Path(metrics_csv)
    if not path.is_file():
        raise DataError(f"metrics file {path} does not exist")
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise DataError(f"metrics file {path} is empty (no header row)")
        cols: dict[str, list[float]] = {h: [] for h in header}
        for lineno, row in enumerate(reader, start=2):
            if not row:
                continue
            for h, cell in zip(header, row + [""] * (len(header) - len(row))):
                try:
                    cols[h].append(float(cell) if cell.strip() else math.nan)
                except ValueError:
                    raise DataError(f"metrics file {path}, line {lineno}, column {h!r}: "
                                    f"{cell!r} is not a number") from None
    return {h: np.asarray(v, dtype=float) for h, v in cols.items()}


def _group_key(column: str) -> str:
    """'train/loss_step', 'val/loss' -> 'loss': the series of one quantity share a subplot."""
    key = re.sub(r"^(train|val|valid|validation|test)[/_]", "", column)
    return re.sub(r"_(step|epoch)$", "", key)


def plot_training_curves(metrics_csv, path, x: str = "step",
                         title: str = "Training curves") -> dict[str, list[str]]:
    """Plot every metric column of a Lightning ``metrics.csv`` against ``x`` ('step' or 'epoch'), one subplot per
    quantity (train and val of the same quantity together), saved as PNG. Falls back to the other x column,
    then to the row index, if ``x`` is absent. Returns {subplot title: [columns]}.
    """
    cols = read_metrics_csv(metrics_csv)
    index_cols = {"step", "epoch"}
    metrics = [c for c in cols if c not in index_cols and np.isfinite(cols[c]).any()]
    if not metrics:
        raise DataError(f"metrics file {metrics_csv} has no metric columns with values "
                        f"(columns: {', '.join(cols) or 'none'})")
    x_name = next((c for c in (x, *sorted(index_cols - {x})) if c in cols and np.isfinite(cols[c]).any()), None)
    xs = cols[x_name] if x_name else np.arange(len(cols[metrics[0]]), dtype=float)
    groups: dict[str, list[str]] = {}
    for c in metrics:
        groups.setdefault(_group_key(c), []).append(c)

    ncols = min(2, len(groups))
    nrows = math.ceil(len(groups) / ncols)
    fig = Figure(figsize=(5.2 * ncols, 3.4 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (key, members) in zip(axes, groups.items()):
        positive = True
        for c in members:
            ok = np.isfinite(cols[c]) & np.isfinite(xs)
            ax.plot(xs[ok], cols[c][ok], marker="." if ok.sum() < 50 else None, linewidth=1.2, label=c)
            positive &= bool((cols[c][ok] > 0).all())
        if "loss" in key and positive:
            ax.set_yscale("log")
        m = re.match(r"(.*)_(deg|rad)$", key)
        ax.set_ylabel(f"{m[1]} [{m[2]}]" if m else key)
        ax.set_xlabel(x_name or "row")
        ax.set_title(key, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[len(groups):]:
        ax.set_visible(False)
    fig.suptitle(f"{title} ({Path(metrics_csv).name})", fontsize=11)
    _save(fig, path)
    return groups


def write_evaluation_figures(label, pred, out_dir, metrics_csv=None) -> dict[str, Path]:
    """Write the polar error map, error histogram and (if ``metrics_csv`` is given) training curves of
    ``pred`` against ``label`` (both (N, 3)) into ``out_dir`` under the names in ``FIGURE_NAMES``.

    The metrics file is checked first, so a missing one fails before any figure is written.
    """
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    if metrics_csv is not None:
        paths["training_curves"] = out / FIGURE_NAMES["training_curves"]
        plot_training_curves(metrics_csv, paths["training_curves"])
    lab, prd = _as_directions(label, "label"), _as_directions(pred, "pred")
    paths["error_polar_map"] = out / FIGURE_NAMES["error_polar_map"]
    plot_error_polar_map(lab, prd, paths["error_polar_map"])
    paths["error_histogram"] = out / FIGURE_NAMES["error_histogram"]
    plot_error_histogram(angular_error_deg(prd, lab), paths["error_histogram"])
    return paths
