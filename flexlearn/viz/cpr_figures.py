"""The end-effector figure of ``flexlearn-cpr`` (``trajectory.png``; the result dict of
:func:`flexlearn.physics.lse.experiments.run_experiments`, seed 003's Experiments I and II): the continuum parallel
robot driven through its samples without load, then with its platform pulled by a cable over a pulley.

Three panels, millimetres: the platform's path seen from above (LSE solid, shooting baseline hollow and
dashed, the pulley and the direction of its pull drawn for the pulled run), its height per sample, and the
LSE–shooting distance per sample on a log axis (absent when the run had no baseline). The titles say this in
plain words; the experiments' numbers in the paper are in the docstrings, not on the figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from flexlearn.atomic import atomic_path

EXPERIMENTS = (
    ("experiment_I", "no load", "C0", "o"),
    ("experiment_II", "pulled over a pulley", "C3", "s"),
)


def _mm(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=float) * 1e3


def write_trajectory_figure(result: Mapping[str, Any], path: str | Path) -> Path:
    """Draw the figure described in the module docstring into ``path`` (PNG, written atomically).

    Args:
        result: the experiments' result dict: ``experiment_I`` and ``experiment_II`` with ``ee_positions_m``
            (n, 3) [m] (and optionally ``shooting_positions_m``, ``lse_vs_shooting_at_samples_m`` [m]), plus the
            optional ``pulley_position_m`` [m], ``pulley_tension_N`` [N], ``n_rods``, ``elements_per_rod``.
        path: the PNG file to write.

    Returns:
        ``path`` as a `Path`.
    """
    import matplotlib  # heavy, and only drawing needs it: off the import path of flexlearn.viz

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use("Agg") (headless backend)

    shooting = any(result[name].get("shooting_positions_m") for name, *_ in EXPERIMENTS)
    fig, ax = plt.subplots(1, 3 if shooting else 2, figsize=(15 if shooting else 10, 4.6))
    for name, label, colour, marker in EXPERIMENTS:
        p = _mm(result[name]["ee_positions_m"])
        k = np.arange(1, len(p) + 1)
        ax[0].plot(p[:, 0], p[:, 1], "-", color=colour, marker=marker, ms=5, label=f"{label}, LSE")
        ax[1].plot(k, p[:, 2], "-", color=colour, marker=marker, ms=5, label=f"{label}, LSE")
        for j, q in enumerate(p):
            ax[0].annotate(str(j + 1), q[:2], fontsize=7, xytext=(3, 3), textcoords="offset points", color=colour)
        s = result[name].get("shooting_positions_m")
        if s:
            s = _mm(s)
            ax[0].plot(
                s[:, 0],
                s[:, 1],
                "--",
                color=colour,
                marker=marker,
                mfc="none",
                ms=9,
                lw=0.8,
                label=f"{label}, shooting",
            )
            ax[1].plot(
                k, s[:, 2], "--", color=colour, marker=marker, mfc="none", ms=9, lw=0.8, label=f"{label}, shooting"
            )
            d = _mm(result[name]["lse_vs_shooting_at_samples_m"])
            ax[2].semilogy(k, np.maximum(d, 1e-9), "-", color=colour, marker=marker, ms=5, label=label)
    ax[0].set(xlabel="x [mm]", ylabel="y [mm]", title="end-effector path, top view")
    _draw_pulley(ax[0], result)
    ax[0].set_aspect("equal", adjustable="datalim")
    ax[0].legend(fontsize=7, loc="best")
    ax[1].set(xlabel="sample", ylabel="z [mm]", title="end-effector height")
    ax[1].legend(fontsize=7, loc="best")
    if shooting:
        ax[2].set(xlabel="sample", ylabel="|LSE − shooting| [mm]", title="LSE against the shooting baseline")
        ax[2].grid(True, which="major", alpha=0.3)
        ax[2].legend(fontsize=7)
    n = len(result["experiment_I"]["ee_positions_m"])
    fig.suptitle(
        f"Continuum parallel robot in simulation ({result.get('n_rods', '?')} rods, "
        f"{result.get('elements_per_rod', '?')} strain elements each): its platform over {n} samples, "
        "without load and pulled by a cable over a pulley",
        fontsize=11,
    )
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png", metadata={"Title": fig.get_suptitle()})
    plt.close(fig)
    return path


def _draw_pulley(ax: Any, result: Mapping[str, Any]) -> None:
    """The pulley (top view) and an arrow from the mean position of the pulled run toward it (the tension's
    horizontal direction), labelled with the tension [N]."""
    pulley = result.get("pulley_position_m")
    if pulley is None:
        return
    c = _mm(pulley)
    p2 = _mm(result["experiment_II"]["ee_positions_m"]).mean(axis=0)
    d = c[:2] - p2[:2]
    span = np.ptp(_mm(result["experiment_I"]["ee_positions_m"])[:, :2], axis=0).max() or 10.0
    if np.linalg.norm(d) > 0:
        tip = p2[:2] + d / np.linalg.norm(d) * 0.35 * span
        ax.annotate("", xy=tip, xytext=p2[:2], arrowprops=dict(arrowstyle="->", color="C3", lw=1.5))
    tension = result.get("pulley_tension_N")
    text = f"pulley at ({c[0]:.0f}, {c[1]:.0f}, {c[2]:.0f}) mm"
    text += f", {tension:.3g} N; arrow: its pull" if tension is not None else "; arrow: its pull"
    ax.set_xlabel(f"x [mm]\n{text}", fontsize=9)
