"""The figure of a multirun (``flexlearn-aggregate``): a metric against one swept key, coloured by a second.

Numeric keys are placed on a number line (logarithmic for learning rates and for any positive key spanning more
than 100×), categorical ones on evenly spaced ticks; the colour shows the second swept key (a legend for
categories, a colour bar for numbers); the best job (lowest metric) is ringed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Optional, Sequence

import matplotlib.ticker as mticker
import numpy as np
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from flexlearn.config import is_finite_number as is_number
from flexlearn.viz.common import save_png

_LR = re.compile(r"(^|[._/])(lr|learning_rate)$")


def wants_log(key: str, values: Sequence[float] | np.ndarray) -> bool:
    """Log axis for a learning rate, or for positive values spanning more than 100×.

    Args:
        key: the quantity's name (a learning rate ends in ``lr`` or ``learning_rate``).
        values: the values to draw.

    Returns:
        True when all values are positive and the key is a learning rate or the values span more than 100×.
    """
    v = np.asarray(values, float)
    if v.size == 0 or not (v > 0).all():
        return False
    return bool(_LR.search(key)) or float(v.max() / v.min()) > 100


def _short(v: Any) -> str:
    return f"{float(v):.3g}" if is_number(v) else str(v)


def _categories(values: Sequence[Any]) -> list[str]:
    """Distinct values as strings, in numeric order where they are numbers, else alphabetical."""
    distinct = {str(v): v for v in values}
    return sorted(distinct, key=lambda s: (0, float(distinct[s]), s) if is_number(distinct[s]) else (1, 0.0, s))


def _format_axis(axis: Any, log: bool, values: np.ndarray) -> None:
    """Readable, non-overlapping number ticks: at most 6, plain numbers ('0.003', not '3×10⁻³')."""
    if log:
        decades = math.log10(float(values.max()) / float(values.min())) if values.size else 1.0
        axis.set_major_locator(mticker.LogLocator(subs=(1.0, 2.0, 5.0) if decades < 2.5 else (1.0,)))
        axis.set_minor_formatter(mticker.NullFormatter())
    else:
        axis.set_major_locator(mticker.MaxNLocator(6))
    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))


def sweep_figure(
    jobs: list[dict[str, Any]],
    x: str,
    y: str,
    hue: Optional[str],
    path: str | Path,
    title: str,
    others: Sequence[str] = (),
) -> Optional[Path]:
    """Metric ``y`` of the finished ``jobs`` against swept key ``x`` (or 'job'), coloured by swept key ``hue``;
    ``others``: swept keys that also vary (named under the figure). None when no job has a numeric ``y``.

    Args:
        jobs: the jobs' rows (swept keys and metrics).
        x: swept key on the x axis, or "job".
        y: metric on the y axis (lowest is marked best).
        hue: swept key that colours the points; None: one colour.
        path: the PNG file to write.
        title: the figure's title (the job count and best value are added).
        others: other swept keys that vary, named under the figure.

    Returns:
        ``path`` as a `Path`, or None.
    """
    pts = [j for j in jobs if is_number(j.get(y))]
    if not pts:
        return None
    ys = np.array([float(j[y]) for j in pts])
    fig = Figure(figsize=(6.6, 4.4), layout="constrained")
    ax = fig.add_subplot()
    xs = _place_x(ax, pts, x, hue)
    legend_title = _draw_points(fig, ax, pts, xs, ys, hue)
    best = int(np.argmin(ys))
    ax.scatter([xs[best]], [ys[best]], s=160, facecolors="none", edgecolors="k", linewidths=1.4, zorder=4, label="best")
    if wants_log(y, ys) and not _LR.search(y):
        ax.set_yscale("log")
    _format_axis(ax.yaxis, ax.get_yscale() == "log", ys)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.grid(alpha=0.3)
    where = f"{x} = {_short(pts[best].get(x))}" + (f", {hue} = {_short(pts[best].get(hue))}" if hue else "")
    ax.set_title(f"{title}: {len(pts)} jobs\nbest {y} = {ys[best]:.4g} at {where}", fontsize=9)
    ax.legend(fontsize=8, title=legend_title, title_fontsize=8, loc="best")
    if others:
        fig.text(
            0.01,
            0.005,
            "also varied, not shown: " + ", ".join(others),
            fontsize=7,
            color="0.35",
            ha="left",
            va="bottom",
        )
        engine = fig.get_layout_engine()
        assert isinstance(engine, ConstrainedLayoutEngine)
        engine.set(rect=(0.0, 0.05, 1.0, 0.95))
    return save_png(fig, path)


def _place_x(ax: Any, pts: list[dict[str, Any]], x: str, hue: Optional[str]) -> np.ndarray:
    """X positions of the points: values on a (log) number line, or category indices (jittered when coloured)."""
    raw: list[Any] = [j.get(x) if x != "job" else j.get("job") for j in pts]
    if x != "job" and all(is_number(v) for v in raw):
        xs = np.array([float(v) for v in raw])
        log = wants_log(x, xs)
        if log:
            ax.set_xscale("log")
        _format_axis(ax.xaxis, log, xs)
        return xs
    cats = _categories(raw)
    index = np.array([cats.index(str(v)) for v in raw], float)
    if hue:  # spread points of one category a little, so that colours do not hide each other
        rng = np.random.default_rng(0)
        index = index + rng.uniform(-0.12, 0.12, index.size)
    long = sum(len(c) for c in cats) > 40
    ax.set_xticks(range(len(cats)), cats, rotation=30 if long else 0, ha="right" if long else "center")
    ax.set_xlim(-0.5, len(cats) - 0.5)
    return index


def _draw_points(
    fig: Figure, ax: Any, pts: list[dict[str, Any]], xs: np.ndarray, ys: np.ndarray, hue: Optional[str]
) -> Optional[str]:
    """Scatter the points: one colour; a colour per category of ``hue``; or a colour scale of a numeric ``hue``.
    Returns the legend's title (``hue`` when its categories are in the legend)."""
    if hue is None:
        ax.scatter(xs, ys, s=36, alpha=0.85, color="C0", zorder=3, label="job")
        return None
    values: list[Any] = [j.get(hue) for j in pts]
    if all(is_number(v) for v in values):
        h = np.array([float(v) for v in values])
        norm = LogNorm(h.min(), h.max()) if wants_log(hue, h) and h.min() < h.max() else Normalize(h.min(), h.max())
        sc = ax.scatter(xs, ys, c=h, cmap="viridis", norm=norm, s=36, alpha=0.9, zorder=3, label="job")
        cb = fig.colorbar(sc, ax=ax)
        cb.set_label(hue)
        _format_axis(cb.ax.yaxis, isinstance(norm, LogNorm), h)
        return None
    for i, cat in enumerate(_categories(values)):
        sel = np.array([str(v) == cat for v in values])
        ax.scatter(xs[sel], ys[sel], s=36, alpha=0.9, color=f"C{i % 10}", zorder=3, label=cat)
    return hue
