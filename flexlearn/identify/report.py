"""Fit-quality figure of an identification: predictions against measurements and the whitened residuals."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flexlearn.atomic import atomic_path

__all__ = ["write_fit_figure"]


def write_fit_figure(problem: Any, path: str | Path, title: str = "") -> Path:
    """``fit.png``: (left) predicted vs measured [measurement units] with the identity line; (right) the
    histogram of the whitened residuals against the standard normal density (a good fit overlays it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with torch.no_grad():
        pred = problem.predict(problem.params.values()).detach().numpy()
    meas = problem.measured.detach().numpy()
    sigma = problem.sigma.numpy() if torch.is_tensor(problem.sigma) else float(problem.sigma)
    r = (pred - meas) / sigma
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.8))
    a.plot(meas, pred, ".", ms=2, alpha=0.4)
    lo, hi = float(min(meas.min(), pred.min())), float(max(meas.max(), pred.max()))
    a.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    a.set_xlabel("measured")
    a.set_ylabel("predicted")
    b.hist(r, bins=60, density=True, alpha=0.7)
    x = np.linspace(-4, 4, 200)
    b.plot(x, np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi), "k-", lw=0.8)
    b.set_xlabel("whitened residual")
    b.set_ylabel("density")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as p:
        fig.savefig(p, format="png", dpi=110)
    plt.close(fig)
    return path
