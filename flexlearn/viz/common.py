"""Shared helpers of the figures: atomic PNG writes with matplotlib's Agg canvas (no pyplot, no global state)."""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from flexlearn.atomic import atomic_path


def figure_title(fig: Figure) -> str:
    """What a figure says it shows: its suptitle, else the titles of its panels joined by ' | '.

    Args:
        fig: the figure.

    Returns:
        The title ('' when the figure has none).
    """
    top = fig.get_suptitle()
    if top:
        return top
    return " | ".join(t for ax in fig.axes if (t := ax.get_title()))


def save_png(fig: Figure, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Write ``fig`` as PNG to ``path`` atomically (the temporary name ends in .tmp, so the format is explicit), its
    `figure_title` in the file's ``Title`` text field (what an image viewer's properties and ``PIL`` read back).

    Args:
        fig: the figure (given an Agg canvas here).
        path: the PNG file to write.
        dpi: resolution [dots per inch].

    Returns:
        ``path`` as a `Path`.
    """
    path = Path(path)
    FigureCanvasAgg(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, metadata={"Title": figure_title(fig)})
    return path
