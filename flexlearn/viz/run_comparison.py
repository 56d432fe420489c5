"""Figures that compare runs: overlaid training curves and test errors side by side (`flexlearn.jobs.compare`).

Each run is one colour in every panel and is named by the config keys that differ between the runs. Curves come
from each run's Lightning ``metrics.csv`` against completed epochs (as in :mod:`.training_curves`); a run's best
epoch (its best checkpoint) is marked with a circle on its validation curves.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Optional, Protocol, Sequence

import numpy as np
from matplotlib.figure import Figure

from flexlearn.errors import DataError
from flexlearn.viz.common import save_png
from flexlearn.viz.training_curves import INDEX_COLUMNS, epoch_axis, log_scaled, quantity_label, read_metrics_csv

__all__ = ["plot_curves", "curves_figure", "plot_test_metrics", "DEFAULT_QUANTITIES"]

DEFAULT_QUANTITIES = ("train/loss", "val/loss", "val/ang_err_median_deg", "val/ang_err_p95_deg")
TEST_BARS = (
    ("test/cap/ang_err_median_deg", "median, within the cap"),
    ("test/cap/ang_err_p95_deg", "p95, within the cap"),
    ("test/ang_err_median_deg", "median, all test poses"),
    ("test/ang_err_p95_deg", "p95, all test poses"),
)


class Run(Protocol):
    """What the figures read of a run (`flexlearn.jobs.compare.RunRecord`)."""

    label: str
    metrics: dict
    metrics_csv: Optional[Path]

    @property
    def best_epoch(self) -> Optional[int]:
        """The best checkpoint's epoch counted from 1, None if unknown."""
        ...


def _short(label: str, width: int = 60) -> str:
    return textwrap.shorten(label, width=width, placeholder=" …")


def plot_curves(runs: Sequence[Run], path: Path, quantities: Optional[Sequence[str]] = None) -> Path:
    """One panel per quantity (``quantities``, default `DEFAULT_QUANTITIES` that any run logged), one line per run.

    Args:
        runs: the runs, in legend order.
        path: the PNG to write.
        quantities: ``metrics.csv`` columns to draw.

    Returns:
        the written path.

    Raises:
        DataError: no run has curves, or none of the quantities was logged (the message lists what was).
    """
    return save_png(curves_figure(runs, quantities), path)


def curves_figure(runs: Sequence[Run], quantities: Optional[Sequence[str]] = None) -> Figure:
    """The figure of `plot_curves`, not saved (its arguments and errors).

    Args:
        runs: the runs, in legend order.
        quantities: ``metrics.csv`` columns to draw; None: `DEFAULT_QUANTITIES`.

    Returns:
        The figure.

    Raises:
        DataError: no run has curves, or none of the quantities was logged (the message lists what was).
    """
    curves = {id(r): read_metrics_csv(r.metrics_csv) for r in runs if r.metrics_csv is not None}
    if not curves:
        raise DataError("none of the runs has csv/metrics.csv (curves are logged by logger=csv, the default)")
    logged = sorted({c for cols in curves.values() for c in cols if c not in INDEX_COLUMNS})
    wanted = list(quantities or DEFAULT_QUANTITIES)
    drawn = [q for q in wanted if q in logged]
    if not drawn:
        raise DataError(f"none of {wanted} was logged by these runs; logged: {', '.join(logged) or 'nothing'}")
    ncols = min(2, len(drawn))
    nrows = math.ceil(len(drawn) / ncols)
    fig = Figure(figsize=(6.0 * ncols, 3.8 * nrows + 0.35 * len(runs)), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, q in zip(axes, drawn):
        series = []
        for i, r in enumerate(runs):
            cols = curves.get(id(r))
            if cols is None or q not in cols:
                continue
            xs, _ = epoch_axis(cols)
            ok = np.isfinite(cols[q]) & np.isfinite(xs)
            series.append(cols[q][ok])
            ax.plot(xs[ok], cols[q][ok], color=f"C{i % 10}", lw=1.3, label=_short(r.label))
            _mark_best(ax, r, xs, cols[q], f"C{i % 10}")
        if log_scaled(q, series):
            ax.set_yscale("log")
        ax.set_title(f"{q.split('/')[0]} {quantity_label(q.split('/', 1)[-1])}", fontsize=10)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    for ax in axes[len(drawn) :]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", fontsize=8, ncols=1 if len(runs) > 4 else 2)
    fig.suptitle(f"Training curves of {len(runs)} runs (circles: each run's best checkpoint)", fontsize=11)
    return fig


def _mark_best(ax, run: Run, xs: np.ndarray, values: np.ndarray, colour: str) -> None:
    """Circle the value logged at the end of the best epoch (``best_epoch``, counted from 1: x = that epoch on the
    axis of completed epochs), if the run logged one there."""
    e = run.best_epoch
    if e is None:
        return
    at = np.isfinite(values) & np.isclose(xs, float(e))
    if at.any():
        ax.plot(xs[at][-1], values[at][-1], "o", mfc="none", mec=colour, ms=9, mew=1.5)


def plot_test_metrics(runs: Sequence[Run], path: Path) -> Path:
    """Grouped bars: each run's test angular errors (`TEST_BARS`) in degrees; a missing value is left out.

    Args:
        runs: the runs, in legend order.
        path: the PNG to write.

    Returns:
        the written path.
    """
    fig = Figure(
        figsize=(max(6.0, 1.6 * len(TEST_BARS) + 0.25 * len(runs)), 4.2 + 0.3 * len(runs)), layout="constrained"
    )
    ax = fig.subplots()
    width = 0.8 / max(1, len(runs))
    for i, r in enumerate(runs):
        got = [r.metrics.get(k) for k, _ in TEST_BARS]
        vals = [float(v) if isinstance(v, (int, float)) and math.isfinite(v) else np.nan for v in got]
        ax.bar(
            np.arange(len(TEST_BARS)) + (i - (len(runs) - 1) / 2) * width,
            vals,
            width,
            color=f"C{i % 10}",
            label=_short(r.label),
        )
    ax.set_xticks(np.arange(len(TEST_BARS)), [name for _, name in TEST_BARS], fontsize=9)
    ax.set_ylabel("test angular error [deg]")
    ax.grid(axis="y", alpha=0.3)
    fig.legend(loc="outside lower center", fontsize=8, ncols=1 if len(runs) > 4 else 2)
    fig.suptitle("Test errors of the best checkpoint of each run (cap: the training range of bends)", fontsize=11)
    return save_png(fig, path)
