"""Fit-quality figure of an identification: the recording over time with the fitted model (and the model at
the true parameters, for simulated data), predictions against measurements in physical units, and the
whitened residuals against the standard normal density; the parameters with units and truths as a caption.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from flexlearn.atomic import atomic_path

__all__ = ["write_fit_figure", "measurement_series"]

MAX_CHANNELS = 3  # channels drawn over time (first, middle, last)


@dataclass
class Series:
    """Measurements as channels over an axis: ``x`` (T,), ``channels`` names (C,), ``scale`` from the problem's
    SI unit to the unit shown, ``unit`` (shown) and the labels of the axis and the quantity."""

    x: np.ndarray
    x_label: str
    channels: list[str]
    scale: float
    unit: str
    quantity: str
    segments: tuple[tuple[float, str], ...] = ()  # (start x, name) of consecutive experiments

    def shape(self, flat: np.ndarray) -> np.ndarray:
        """(M,) measurement vector -> (T, C) in the shown unit.

        Args:
            flat: measurements or predictions (M,) = (T·C,), in the problem's SI unit.

        Returns:
            The channels (T, C), scaled to ``unit``.
        """
        return np.asarray(flat, float).reshape(len(self.x), len(self.channels)) * self.scale


def measurement_series(problem: Any) -> Series:
    """How a problem's measurement vector is laid out: IMU slopes over time (modal), the tip position over time
    (Cosserat), end-effector positions along the actuation path (continuum parallel robot); else one channel
    over the measurement index.

    Args:
        problem: an identification problem (its ``measured`` and the attributes that tell its kind).

    Returns:
        The `Series`.
    """
    m = int(problem.measured.numel())
    if all(hasattr(problem, a) for a in ("theta", "xi", "dt")):  # flexible link: (T, S) IMU slopes [rad]
        xi = [float(v) for v in problem.xi]
        t = np.arange(m // len(xi)) * float(problem.dt)
        return Series(t, "time [s]", [f"IMU at ξ = {v:g} m" for v in xi], 1e3, "mrad", "IMU slope")
    if hasattr(problem, "full_measured") and hasattr(problem, "cfg"):  # rod: (K, 3) tip positions [m]
        step = float(problem.cfg.dt) * int(problem.cfg.record_every)
        return Series(np.arange(m // 3) * step, "time [s]", ["tip x", "tip y", "tip z"], 1e3, "mm", "tip position")
    if hasattr(problem, "thetas"):  # CPR: (K·E, 3) end-effector positions [m], experiment after experiment
        k = len(problem.thetas)
        names = list(getattr(getattr(problem, "cfg", None), "experiments", ()))
        return Series(
            np.arange(m // 3, dtype=float),
            "actuation sample",
            ["x", "y", "z"],
            1e3,
            "mm",
            "end-effector position",
            tuple((float(i * k), n) for i, n in enumerate(names)),
        )
    return Series(
        np.arange(m, dtype=float), "measurement index", ["measurement"], 1.0, "measurement units", "measurement"
    )


def _parameter_caption(problem: Any, values: np.ndarray) -> str:
    """'EI = 7.51e+04 N m^2 (truth 7.43e+04, +1.1 %)  ·  ...' for every identified parameter."""
    parts = []
    for spec, v in zip(problem.params.specs, values):
        unit = f" {spec.unit}" if spec.unit else ""
        truth = f" (truth {spec.truth:.4g}, {100 * (v / spec.truth - 1):+.1f} %)" if spec.truth else ""
        parts.append(f"{spec.name} = {v:.4g}{unit}{truth}")
    return "   ·   ".join(parts)


def _truth_prediction(problem: Any) -> Optional[np.ndarray]:
    """The model at the true parameters (simulated data with every truth known), else None."""
    specs = problem.params.specs
    if not all(s.truth for s in specs):
        return None
    with torch.no_grad():
        return problem.predict(torch.tensor([float(s.truth) for s in specs], dtype=torch.float64)).numpy()


def write_fit_figure(problem: Any, path: str | Path, title: str = "") -> Path:
    """``fit.png``: (top) the measurements over time (dots), the fitted model (line) and, for simulated data, the
    model at the true parameters (dashed), one panel per channel for at most `MAX_CHANNELS` channels (first, middle,
    last); (bottom left) predicted against measured with the identity line; (bottom right) the whitened residuals
    against the standard normal density. The caption lists every parameter with its unit and truth. ``title`` is
    a heading above it (a title that only repeats the parameter values, as ``name = value``, is left out).

    Args:
        problem: the identification problem at its fitted estimate.
        path: the PNG file to write (atomically).
        title: heading above the caption; "" for none.

    Returns:
        ``path`` as a `Path`.
    """
    import matplotlib  # heavy (~1 s) and needed only with figures=true

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen

    truth = _truth_prediction(problem)  # first: a problem may warm-start from its last evaluation
    with torch.no_grad():
        values = problem.params.values().detach().numpy()
        pred = problem.predict(problem.params.values()).detach().numpy()
    meas = problem.measured.detach().numpy()
    sigma = problem.sigma.numpy() if torch.is_tensor(problem.sigma) else float(problem.sigma)
    series = measurement_series(problem)
    shown = sorted(
        {int(round(i)) for i in np.linspace(0, len(series.channels) - 1, min(len(series.channels), MAX_CHANNELS))}
    )
    fig = plt.figure(figsize=(10, 3.6 + 1.5 * len(shown)), layout="constrained")
    grid = fig.add_gridspec(len(shown) + 2, 2, height_ratios=(*[1.0] * len(shown), 1.4, 1.4))
    top = [fig.add_subplot(grid[i, :]) for i in range(len(shown))]
    _time_panels(top, shown, series, meas, pred, truth)
    _scatter_panel(fig.add_subplot(grid[len(shown) :, 0]), series, meas, pred)
    _residual_panel(fig.add_subplot(grid[len(shown) :, 1]), (pred - meas) / sigma, sigma, series)
    caption = _parameter_caption(problem, values)
    repeats = title and all(f"{s.name} =" in title for s in problem.params.specs)
    fig.suptitle((f"{title}\n" if title and not repeats else "") + caption, fontsize=9)
    path = Path(path)
    with atomic_path(path) as p:
        fig.savefig(p, format="png", dpi=110)
    plt.close(fig)
    return path


def _time_panels(
    axes: list[Any], shown: list[int], s: Series, meas: np.ndarray, pred: np.ndarray, truth: Optional[np.ndarray]
) -> None:
    """One panel per shown channel (own y range): measured dots, fitted line, model at the true parameters."""
    m, p = s.shape(meas), s.shape(pred)
    t = s.shape(truth) if truth is not None else None
    for k, (ax, c) in enumerate(zip(axes, shown)):
        ax.plot(s.x, m[:, c], ".", ms=2.5 if len(s.x) > 200 else 6, alpha=0.5, color="C0", label="measured")
        ax.plot(s.x, p[:, c], "-", lw=1.3, color="C3", label="fitted model")
        if t is not None:
            ax.plot(s.x, t[:, c], "--", lw=1.0, color="k", alpha=0.7, label="model at true parameters")
        for start, name in s.segments:
            ax.axvline(start - 0.5, color="0.5", lw=0.8)
            if k == 0:
                ax.text(start - 0.4, 0.06, name, transform=ax.get_xaxis_transform(), fontsize=7, color="0.3")
        ax.set_ylabel(f"{s.channels[c]}\n[{s.unit}]", fontsize=8)
        ax.grid(alpha=0.3)
        if k < len(axes) - 1:
            ax.tick_params(labelbottom=False)
    axes[0].set_title(
        f"{s.quantity} over {s.x_label.split(' [')[0]}"
        + (f" ({len(shown)} of {len(s.channels)} channels)" if len(shown) < len(s.channels) else ""),
        fontsize=9,
    )
    axes[0].legend(fontsize=7, ncols=3, loc="best")
    axes[-1].set_xlabel(s.x_label)


def _scatter_panel(ax: Any, s: Series, meas: np.ndarray, pred: np.ndarray) -> None:
    m, p = s.shape(meas), s.shape(pred)
    for c, name in enumerate(s.channels):
        ax.plot(
            m[:, c],
            p[:, c],
            ".",
            ms=2 if m.size > 600 else 6,
            alpha=0.5,
            color=f"C{c % 10}",
            label=name if len(s.channels) <= 6 else None,
        )
    lo, hi = float(min(m.min(), p.min())), float(max(m.max(), p.max()))
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="identity")
    ax.set_xlabel(f"measured {s.quantity} [{s.unit}]")
    ax.set_ylabel(f"predicted {s.quantity} [{s.unit}]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", markerscale=3)


def _residual_panel(ax: Any, r: np.ndarray, sigma: Any, s: Series) -> None:
    r = np.asarray(r, float)
    r = r[np.isfinite(r)]
    lim = max(4.0, float(np.percentile(np.abs(r), 99.5))) if r.size else 4.0
    ax.hist(np.clip(r, -lim, lim), bins=60, range=(-lim, lim), density=True, alpha=0.7, label="residuals")
    x = np.linspace(-lim, lim, 200)
    ax.plot(x, np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi), "k-", lw=0.9, label="N(0, 1)")
    sig = float(np.mean(sigma)) * s.scale
    ax.set_xlabel(f"whitened residual (predicted − measured) / σ,  σ = {sig:.3g} {s.unit}")
    ax.set_ylabel("density")
    ax.set_title(f"residual std {np.std(r):.2f} (1 for a fit at the noise level)" if r.size else "", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
