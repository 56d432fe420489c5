"""Training curves from a Lightning CSVLogger ``metrics.csv``: one panel per logged quantity against the epoch,
log-scaled where the values span decades (losses, errors, learning rates); quantities that stay constant over
the run (sample counts, a zero invalid fraction) get a note under the figure instead of a flat panel.
"""

from __future__ import annotations

import csv
import math
import re
import textwrap
from pathlib import Path
from typing import NamedTuple, Optional

import matplotlib.ticker as mticker
import numpy as np
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from flexlearn.errors import ArgumentError, DataError
from flexlearn.viz.common import save_png

INDEX_COLUMNS = ("step", "epoch")
_SPLITS = ("train", "val", "valid", "validation", "test")


def read_metrics_csv(metrics_csv) -> dict[str, np.ndarray]:
    """Columns of a Lightning CSVLogger ``metrics.csv`` as float arrays (R,), NaN where a row leaves a cell blank.

    Raises DataError naming the file if it is missing, empty or holds a non-numeric value.

    Args:
        metrics_csv: path of the ``metrics.csv``.

    Returns:
        Column name -> values (R,).

    Raises:
        DataError: the file is missing, empty or holds a non-numeric value.
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
                    raise DataError(
                        f"metrics file {path}, line {lineno}, column {h!r}: {cell!r} is not a number"
                    ) from None
    return {h: np.asarray(v, dtype=float) for h, v in cols.items()}


def group_key(column: str) -> str:
    """'train/loss_step', 'val/loss' -> 'loss': the series of one quantity share a subplot.

    Args:
        column: a ``metrics.csv`` column name.

    Returns:
        The quantity, without split prefix and ``_step``/``_epoch`` suffix.
    """
    key = re.sub(rf"^({'|'.join(_SPLITS)})[/_]", "", column)
    return re.sub(r"_(step|epoch)$", "", key)


def quantity_label(key: str) -> str:
    """'ang_err_median_deg' -> 'median angular error [deg]'; 'loss' -> 'loss'.

    Args:
        key: a quantity (`group_key`).

    Returns:
        Its axis label in words, with the unit in brackets when the key ends in ``_deg`` or ``_rad``.
    """
    m = re.match(r"(.*)_(deg|rad)$", key)
    name, unit = (m[1], m[2]) if m else (key, "")
    stat = re.match(r"ang_err_(mean|median|rms|p95)$", name)
    if stat:
        name = f"{stat[1] if stat[1] != 'rms' else 'RMS'} angular error"
    return f"{name.replace('_', ' ')} [{unit}]" if unit else name.replace("_", " ")


def epoch_axis(cols: dict[str, np.ndarray], x: str = "epoch") -> tuple[np.ndarray, str]:
    """X values (R,) of every row and their label. ``x='epoch'``: epochs completed (a value logged at the end of
    epoch e sits at e + 1, a per-step value at its fraction of the epoch); ``x='step'``: the global step. Falls
    back to the other column, then to the row index, when one is absent or blank.

    Args:
        cols: the columns of `read_metrics_csv`.
        x: "epoch" or "step".

    Returns:
        (x values (R,), axis label: "epoch", "step" or "row").
    """

    def usable(c: str) -> bool:
        return c in cols and bool(np.isfinite(cols[c]).any())

    n = len(next(iter(cols.values()))) if cols else 0
    if x == "epoch" and usable("epoch"):
        epoch = cols["epoch"]
        if usable("step"):
            step = cols["step"]
            ends = [np.nanmax(step[epoch == e]) for e in np.unique(epoch[np.isfinite(epoch)])]
            per_epoch = float(np.median(np.diff([-1.0, *ends]))) if ends else 1.0
            if per_epoch > 0:
                return (step + 1.0) / per_epoch, "epoch"
        return epoch + 1.0, "epoch"
    for name in (x, *[c for c in INDEX_COLUMNS if c != x]):
        if usable(name):
            return (cols[name] + 1.0, "epoch") if name == "epoch" else (cols[name], name)
    return np.arange(n, dtype=float), "row"


def _constant(values: np.ndarray) -> bool:
    v = values[np.isfinite(values)]
    return v.size == 0 or bool(np.all(v == v[0]))


def log_scaled(key: str, values: list[np.ndarray]) -> bool:
    """Log y for positive losses, errors and learning rates, and for any positive quantity spanning > 20×.

    Args:
        key: the quantity or panel name.
        values: the panel's series (NaN ignored).

    Returns:
        True for a log y axis.
    """
    v = np.concatenate([x[np.isfinite(x)] for x in values]) if values else np.zeros(0)
    if v.size == 0 or not (v > 0).all():
        return False
    return bool(re.search(r"loss|err|lr", key)) or float(v.max() / v.min()) > 20


_ERROR = re.compile(r"ang_err_(mean|median|rms|p95)_deg$")
_STAT_COLOURS = {"median": "C0", "p95": "C3", "mean": "C2", "rms": "C1"}
_SPLIT_COLOURS = {"train": "C0", "val": "C1", "valid": "C1", "validation": "C1"}


def panel_of(quantity: str) -> str:
    """The panel a quantity is drawn in: every angular-error statistic shares one, the rest one each.

    Args:
        quantity: a quantity (`group_key`).

    Returns:
        The panel's name (its y label).
    """
    return "angular error [deg]" if _ERROR.match(quantity) else quantity_label(quantity)


def plan_panels(
    cols: dict[str, np.ndarray], metrics: list[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """(quantities, panels, constant quantities): the ``metrics`` columns grouped by quantity (train/val/test of
    one together), the panels drawn (losses first; all angular-error statistics in one) and the quantities that
    stay constant over the run, which get a note instead of a panel (unless nothing varies).

    Args:
        cols: the columns of `read_metrics_csv`.
        metrics: the metric columns to draw.

    Returns:
        (quantity -> columns, panel -> columns, constant quantities).
    """
    groups: dict[str, list[str]] = {}
    for c in metrics:
        groups.setdefault(group_key(c), []).append(c)
    flat = [q for q, m in groups.items() if all(_constant(cols[c]) for c in m)]
    if len(flat) == len(groups):
        flat = []  # nothing varies: draw everything rather than an empty figure
    panels: dict[str, list[str]] = {}
    for q in sorted((q for q in groups if q not in flat), key=lambda q: (0 if "loss" in q else 1, q)):
        panels.setdefault(panel_of(q), []).extend(groups[q])
    return groups, panels, flat


MONITOR = "val/ang_err_median_deg"


def best_row(cols: dict[str, np.ndarray], monitor: str = MONITOR, mode: str = "min") -> Optional[int]:
    """The row of ``metrics.csv`` that logged the best ``monitor`` value (the first one, as a ModelCheckpoint keeps
    the first of equal scores): the epoch whose weights the best checkpoint holds. None when it was not logged.

    Args:
        cols: the columns of `read_metrics_csv`.
        monitor: the metric the checkpoint was chosen by.
        mode: "min" or "max", the checkpoint callback's.

    Returns:
        The row index, or None.

    Raises:
        ArgumentError: ``mode`` is neither "min" nor "max".
    """
    if mode not in ("min", "max"):
        raise ArgumentError(f"mode must be 'min' or 'max' (as the checkpoint callback's), got {mode!r}")
    if monitor not in cols or not np.isfinite(cols[monitor]).any():
        return None
    v = np.where(np.isfinite(cols[monitor]), cols[monitor], np.inf if mode == "min" else -np.inf)
    return int(np.argmin(v) if mode == "min" else np.argmax(v))


def plot_training_curves(
    metrics_csv, path, x: str = "epoch", title: str = "Training curves", monitor: str = MONITOR, mode: str = "min"
) -> dict[str, list[str]]:
    """Plot the metric columns of a Lightning ``metrics.csv`` against ``x`` ('epoch' or 'step'), saved as PNG:
    one panel for the losses, one for the angular-error statistics, one for each other quantity; train and val
    as lines, test (one value, scored with the best checkpoint) as a star at the best epoch, the epoch of the best
    ``monitor`` value (`best_row`; ``mode`` 'min' or 'max', as the checkpoint callback chose it), which a dotted
    line marks in every panel. Quantities constant over the run are listed under the figure instead of drawn.
    Returns {quantity: [columns]} of every quantity (train/val/test of one quantity together).

    Args:
        metrics_csv: path of the ``metrics.csv``.
        path: the PNG file to write.
        x: "epoch" or "step".
        title: the figure's title (the file name and best checkpoint are added).
        monitor: the metric the best checkpoint was chosen by.
        mode: "min" or "max", the checkpoint callback's.

    Returns:
        Quantity -> its columns.

    Raises:
        DataError: the file cannot be read or has no metric column with values.
    """
    fig, groups = training_curves_figure(metrics_csv, x, title, monitor, mode)
    save_png(fig, path)
    return groups


def training_curves_figure(  # long: one panel per quantity, the best-epoch marks and the note of constants
    metrics_csv, x: str = "epoch", title: str = "Training curves", monitor: str = MONITOR, mode: str = "min"
) -> tuple[Figure, dict[str, list[str]]]:
    """The figure of `plot_training_curves` (not saved) and its {quantity: [columns]}.

    Args:
        metrics_csv: path of the ``metrics.csv``.
        x: "epoch" or "step".
        title: the figure's title (the file name and best checkpoint are added).
        monitor: the metric the best checkpoint was chosen by.
        mode: "min" or "max", the checkpoint callback's.

    Returns:
        (figure, quantity -> its columns).

    Raises:
        DataError: the file cannot be read or has no metric column with values.
    """
    cols = read_metrics_csv(metrics_csv)
    metrics = [c for c in cols if c not in INDEX_COLUMNS and np.isfinite(cols[c]).any()]
    if not metrics:
        raise DataError(
            f"metrics file {metrics_csv} has no metric columns with values (columns: {', '.join(cols) or 'none'})"
        )
    xs, x_label = epoch_axis(cols, x)
    row = best_row(cols, monitor, mode)
    best = BestMark(float(xs[row]), x_label) if row is not None and np.isfinite(xs[row]) else None
    groups, panels, flat = plan_panels(cols, metrics)
    ncols = min(2, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    note = ""
    if flat:
        notes = [f"{c} = {cols[c][np.isfinite(cols[c])][0]:g}" for q in flat for c in groups[q]]
        note = textwrap.fill("constant over the run (not drawn): " + ", ".join(notes), width=int(19 * 5.4 * ncols))
    note_h = 0.18 * (note.count("\n") + 1) + 0.1 if note else 0.0
    fig = Figure(figsize=(5.4 * ncols, 3.6 * nrows + note_h), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (name, members) in zip(axes, panels.items()):
        _draw_panel(ax, name, members, cols, xs, x_label, best)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    if note:
        engine = fig.get_layout_engine()
        assert isinstance(engine, ConstrainedLayoutEngine)
        engine.set(rect=(0.0, note_h / fig.get_figheight(), 1.0, 1.0 - note_h / fig.get_figheight()))
        fig.text(0.01, 0.01, note, fontsize=7.5, ha="left", va="bottom", color="0.3")
    where = f"; best checkpoint at {best.words()}, by {monitor}" if best is not None else ""
    fig.suptitle(f"{title} ({Path(metrics_csv).name}{where})", fontsize=11)
    return fig, groups


class BestMark(NamedTuple):
    """Where the best checkpoint sits on the x axis: ``x`` (an epoch counted from 1, or a step) and the axis."""

    x: float
    axis: str

    def words(self) -> str:
        """'epoch 59' / 'step 5900'."""
        return f"{self.axis} {self.x:.0f}" if self.axis in ("epoch", "step") else f"{self.axis} {self.x:g}"


def _series_style(column: str, panel_is_error: bool) -> tuple[str, str]:
    """(colour, label) of a column: errors coloured by statistic, other quantities by split."""
    split = column.split("/")[0] if "/" in column else ""
    m = _ERROR.search(column)
    if panel_is_error and m:
        stat = m[1]
        return _STAT_COLOURS[stat], f"{split} {stat if stat != 'rms' else 'RMS'}".strip()
    return _SPLIT_COLOURS.get(split, "C2"), column


def _draw_panel(  # long: one series style per kind of column
    ax,
    name: str,
    members: list[str],
    cols: dict[str, np.ndarray],
    xs: np.ndarray,
    x_label: str,
    best: Optional[BestMark],
) -> None:
    """One panel: each member column against ``xs``; a single-value series (test, scored with the best checkpoint)
    as a star at the best epoch ``best`` (where it was logged when unknown), which a dotted line marks."""
    if best is not None:
        ax.axvline(best.x, color="0.45", linestyle=":", linewidth=1.0, label=f"best checkpoint ({best.words()})")
    is_error = name.startswith("angular error")
    stats = list(_STAT_COLOURS)

    def rank(c: str) -> tuple[int, int]:
        m = _ERROR.search(c)
        return (c.startswith("test"), stats.index(m[1]) if m else 0)

    for c in sorted(members, key=rank):
        ok = np.isfinite(cols[c]) & np.isfinite(xs)
        colour, label = _series_style(c, is_error)
        if ok.sum() == 1:
            ax.plot(
                [best.x] if best is not None and c.startswith("test") else xs[ok],
                cols[c][ok],
                marker="*",
                markersize=12,
                linestyle="none",
                color=colour,
                markeredgecolor="k",
                markeredgewidth=0.6,
                label=f"{label} (best checkpoint)",
            )
        elif c.endswith("_step"):  # per-step values: a light, thin trace behind the per-epoch ones
            ax.plot(xs[ok], cols[c][ok], linewidth=0.8, alpha=0.45, color=colour, label=label)
        else:
            ax.plot(
                xs[ok],
                cols[c][ok],
                marker="." if ok.sum() < 50 else None,
                markersize=4,
                linewidth=1.4,
                color=colour,
                label=label,
            )
    values = np.concatenate([cols[c][np.isfinite(cols[c])] for c in members])
    if log_scaled(name, [cols[c] for c in members]):
        ax.set_yscale("log")
        if is_error or float(values.max() / values.min()) < 100:  # 0.5, 1, 2, 5 read better than 10^k
            ax.yaxis.set_major_locator(mticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    ax.set_ylabel(name)
    ax.set_xlabel(x_label)
    if x_label == "epoch":
        ax.xaxis.set_major_locator(mticker.MaxNLocator(integer=True))
    ax.set_title(name.split(" [")[0], fontsize=10)
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    ax.legend(fontsize=8, ncols=2 if len(members) > 4 else 1)
