"""Dataset quality report of one or more recorded sessions: PNG figures and a Markdown summary.

A *session* is an ingested dataset directory (``raw/``, ``dataset.parquet``, ``ingest.json``; see
`flexlearn.ingest.recording`) or a bare raw sweep directory (processed with the default config); its loading and
numbers are in `flexlearn.data.sessions`, the figures and the Markdown here. The report shows, per session and
side by side:

* coverage over the cap: kept and dropped poses at (λ cos θ, λ sin θ), λ the bend angle; Fibonacci cells
  holding fewer than ``min_fill`` of their share (`flexlearn.sim.targets.cell_quotas` of the kept count). The
  cap is each session's own (`session_cap_deg`: ``meta.json`` rig.max_colatitude, else the largest commanded
  bend) unless ``max_colatitude_deg`` is given;
* |ΔB| against the bend angle, with binned medians (the coil field falls with the bend; a session whose
  curve departs from the first one's points at a changed rig, coil current or sensor);
* noise: per pose, the std of the accepted coil-off magnetometer samples about their mean (the samples
  processing fits the ambient field to, `flexlearn.data.quality.select`), of the specific force over the
  hold window and of the rate gyro (if recorded);
* dropped poses by reason (`flexlearn.data.quality.REASONS`) and dropped messages by reason (ingestion);
* differences between sessions: kept fraction, median |ΔB| and noise, ambient field, and the largest
  relative difference of the binned |ΔB|(λ) medians from the first session.

Units: fields in T in the data, shown in µT (ΔB) and nT (noise); angles in degrees on the figures.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from flexlearn.atomic import atomic_path, prepare_output_dir, write_json_atomic
from flexlearn.data import quality as q
from flexlearn.data.sessions import (
    Session,
    bend_angle_deg,
    binned_median,
    dataset_rows,
    load_session,
    noise_per_pose,
    session_cap_deg,
    session_stats,
)
from flexlearn.errors import DataError
from flexlearn.sim.targets import fibonacci_cells

FIGURES = {"coverage": "coverage.png", "delta_b": "delta_b_vs_bend.png", "noise": "noise.png", "drops": "dropped.png"}
BIN_DEG = 5.0  # width of the bend-angle bins of the |ΔB|(λ) medians [deg]


# ------------------------------------------------------------------------------------------------- figures
def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return path


def _fig_coverage(sessions: list[Session], caps_deg: list[float], path: Path) -> Path:
    n = len(sessions)
    fig = Figure(figsize=(4.2 * n, 4.2))
    for i, s in enumerate(sessions):
        ax = fig.add_subplot(1, n, i + 1)
        u = s.directions()
        lam, th = np.radians(bend_angle_deg(u)), np.arctan2(u[:, 1], u[:, 0])
        x, y = np.degrees(lam) * np.cos(th), np.degrees(lam) * np.sin(th)
        k = s.kept
        ax.scatter(x[k], y[k], s=4, c="tab:blue", label=f"kept ({int(k.sum())})")
        ax.scatter(x[~k], y[~k], s=14, c="tab:red", marker="x", label=f"dropped ({int((~k).sum())})")
        c = np.linspace(0, 2 * math.pi, 200)
        ax.plot(caps_deg[i] * np.cos(c), caps_deg[i] * np.sin(c), "k-", lw=0.8)
        ax.set_aspect("equal")
        ax.set_xlabel("λ cos θ [deg]")
        ax.set_ylabel("λ sin θ [deg]")
        ax.set_title(f"{s.name}: coverage")
        ax.legend(loc="upper right", fontsize=7)
    return _save(fig, path)


def _fig_delta_b(sessions: list[Session], edges: np.ndarray, path: Path) -> Path:
    fig = Figure(figsize=(6.0, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    mid = 0.5 * (edges[1:] + edges[:-1])
    for i, s in enumerate(sessions):
        lam = bend_angle_deg(s.directions()[dataset_rows(s)])
        db = np.linalg.norm(s.dataset.delta_b, axis=1) * 1e6
        color = f"C{i % 10}"
        ax.scatter(lam, db, s=3, alpha=0.4, c=color)
        ax.plot(mid, binned_median(lam, db, edges), "-o", ms=3, c=color, label=f"{s.name} (binned median)")
    ax.set_xlabel("bend angle λ [deg]")
    ax.set_ylabel("|ΔB| [µT]")
    ax.set_title("coil field magnitude vs bend angle")
    ax.legend(fontsize=7)
    return _save(fig, path)


NOISE_PERCENTILES = (0.5, 99.5)  # histogram range of the noise figure: outliers beyond are counted, not drawn
NOISE_FENCE = 3.0  # ... and never beyond the quartiles ± NOISE_FENCE interquartile ranges


def robust_range(
    values: Sequence[np.ndarray], percentiles: tuple[float, float] = NOISE_PERCENTILES, fence: float = NOISE_FENCE
) -> Optional[tuple[float, float]]:
    """(lo, hi) histogram range of the finite ``values`` of all sessions.

    Their ``percentiles``, kept within the quartiles ± ``fence`` interquartile ranges (so that a few per cent of
    wild outliers do not stretch it), widened by 5 % where the data reach.

    Args:
        values: one array per session.
        percentiles: (low, high) percentiles.
        fence: interquartile ranges allowed beyond the quartiles.

    Returns:
        (lo, hi), or None when every value is the same (a degenerate stream).
    """
    v = np.concatenate([np.asarray(x, float)[np.isfinite(x)] for x in values]) if values else np.zeros(0)
    if v.size == 0 or v.min() == v.max():
        return None
    lo, hi = (float(x) for x in np.percentile(v, percentiles))
    q1, q3 = (float(x) for x in np.percentile(v, (25.0, 75.0)))
    lo, hi = max(lo, q1 - fence * (q3 - q1)), min(hi, q3 + fence * (q3 - q1))
    if hi <= lo:  # most values are equal: show the whole range
        lo, hi = float(v.min()), float(v.max())
    pad = 0.05 * (hi - lo)
    return max(float(v.min()), lo - pad), min(float(v.max()), hi + pad)


def _noise_panel(ax, series: list[tuple[int, str, np.ndarray]], label: str, unit: str) -> None:
    """One noise histogram: bins shared by the sessions over `robust_range`, outliers counted in the legend,
    each session's median dashed; a stream whose values are all equal gets a note, not a spike."""
    flat = [(i, n, v) for i, n, v in series if v.size and v.min() == v.max()]
    live = [(i, n, v) for i, n, v in series if v.size and v.min() != v.max()]
    rng = robust_range([v for _, _, v in live])
    if rng is not None:
        edges = np.linspace(rng[0], rng[1], 31)
        for i, name, v in live:
            out = int(((v < rng[0]) | (v > rng[1])).sum())
            extra = f"; {out} beyond the axis, max {v.max():.3g}" if out else ""
            ax.hist(
                v[(v >= rng[0]) & (v <= rng[1])],
                bins=edges,
                histtype="step",
                color=f"C{i % 10}",
                linewidth=1.3,
                label=f"{name} (median {np.median(v):.3g}{extra})",
            )
            ax.axvline(float(np.median(v)), color=f"C{i % 10}", linestyle="--", linewidth=0.9)
        ax.set_xlim(*rng)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.35)  # room for the legend
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.set_ylabel("poses")
        for _, name, v in flat:
            ax.plot([], [], " ", label=f"{name}: constant {v[0]:.3g} {unit} ({v.size} poses)")
        for _, name, v in series:
            if not v.size:
                ax.plot([], [], " ", label=f"{name}: no finite values")
        ax.legend(fontsize=7, loc="upper right")
    else:
        notes = [f"{name}: all {v.size} poses = {v[0]:.3g} {unit}" for _, name, v in flat]
        text = "\n".join(notes) + "\n(a constant stream: sensor idle\nor not recorded?)" if notes else ""
        text += "".join(f"\n{name}: no finite values" for _, name, v in series if not v.size)
        text = text.strip() or "no data"
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="0.3")
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_xlabel(label)


def noise_figure(sessions: Sequence[Any], noise: list[dict[str, np.ndarray]], path: Path) -> Path:
    """``noise.png``: per-pose noise histograms of the sessions, one panel per sensor (`_noise_panel`).

    Args:
        sessions: the sessions (anything with a ``name``).
        noise: per session, the per-pose noise by sensor ("mag" [T], "accel" [m/s²], "rate" [rad/s] if recorded).
        path: the PNG file written.

    Returns:
        The figure's path.
    """
    kinds = [
        ("mag", 1e9, "magnetometer, coil-off std [nT]", "nT"),
        ("accel", 1.0, "accelerometer, hold std [m/s²]", "m/s²"),
    ]
    if any("rate" in nz for nz in noise):
        kinds.append(("rate", 1.0, "gyro, hold std [rad/s]", "rad/s"))
    fig = Figure(figsize=(4.8 * len(kinds), 3.8))
    for j, (key, scale, label, unit) in enumerate(kinds):
        series = [
            (i, s.name, np.asarray(nz[key], float)[np.isfinite(nz[key])] * scale)
            for i, (s, nz) in enumerate(zip(sessions, noise))
            if nz.get(key) is not None
        ]
        _noise_panel(fig.add_subplot(1, len(kinds), j + 1), series, label, unit)
    fig.suptitle(
        f"per-pose noise; axes span the {NOISE_PERCENTILES[0]:g}–{NOISE_PERCENTILES[1]:g} percentiles of all "
        f"sessions, within the quartiles ± {NOISE_FENCE:g} IQR (outliers counted in the legend); dashed: "
        "medians",
        fontsize=9,
    )
    return _save(fig, path)


def _fig_drops(sessions: list[Session], path: Path) -> Path:
    fig = Figure(figsize=(7.0, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / max(len(sessions), 1)
    x = np.arange(len(q.REASONS))
    for i, s in enumerate(sessions):
        counts = s.dataset.meta.get("report", {}).get("dropped_counts", {})
        ax.bar(x + i * width, [counts.get(r, 0) for r in q.REASONS], width, label=s.name, color=f"C{i % 10}")
    ax.set_xticks(x + 0.4 - width / 2, q.REASONS, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("dropped poses")
    ax.set_title("dropped poses by reason")
    ax.legend(fontsize=7)
    return _save(fig, path)


def _table_row(label: str, values: list[Any]) -> str:
    """One Markdown table row: the label, then the values."""
    return f"| {label} | " + " | ".join(str(v) for v in values) + " |"


def _sessions_section(head: str, rule: str, stats: list[dict[str, Any]], diffs: list[float]) -> list[str]:
    """The "Sessions" table of the report: poses, noise, ambient field, bend and |ΔB| differences per session."""
    row = _table_row
    return [
        "## Sessions",
        "",
        head,
        rule,
        row("poses (kept / total)", [f"{s['kept']} / {s['poses']}" for s in stats]),
        row("kept fraction", [f"{s['kept_fraction']:.1%}" for s in stats]),
        row("median \\|ΔB\\| [µT]", [f"{s['delta_b_median_uT']:.3f}" for s in stats]),
        row("magnetometer noise [nT]", [f"{s['mag_noise_nT']:.1f}" for s in stats]),
        row("accelerometer noise [m/s²]", [f"{s['accel_noise_mps2']:.4f}" for s in stats]),
        row("gyro noise [rad/s]", [f"{s['rate_noise_radps']:.4g}" if "rate_noise_radps" in s else "–" for s in stats]),
        row("ambient \\|B\\| median [µT]", [f"{s['ambient_uT']:.2f}" for s in stats]),
        row("largest bend kept [deg]", [f"{s['bend_max_deg']:.1f}" for s in stats]),
        row(
            "positioning error, median [deg] (mocap)",
            [f"{s['positioning_error_deg_median']:.3f}" if "positioning_error_deg_median" in s else "–" for s in stats],
        ),
        row(
            "binned \\|ΔB\\|(λ): largest difference from first session",
            [f"{d:.1%}" if math.isfinite(d) else "–" for d in diffs],
        ),
        "",
    ]


# ------------------------------------------------------------------------------------------------ markdown
def _markdown(
    names: list[str],
    stats: list[dict[str, Any]],
    edges: np.ndarray,
    diffs: list[float],
    figures: dict[str, str],
    min_fill: float,
    n_cells: int,
) -> str:
    lines = ["# Dataset quality report", ""]
    head = "| | " + " | ".join(names) + " |"
    rule = "|---" * (len(names) + 1) + "|"
    row = _table_row
    lines += _sessions_section(head, rule, stats, diffs)
    lines += [
        "## Coverage",
        "",
        f"![coverage]({figures['coverage']})",
        "",
        f"Fibonacci cells ({n_cells}) of each session's cap holding fewer than {min_fill:.0%} of their share of "
        "the kept poses:",
        "",
    ]
    lines += [
        f"- {n} (cap {s['cap_deg']:.1f}°, {s['cap_source']}): {len(s['under_covered_cells'])} cell(s) "
        f"{s['under_covered_cells'][:20]}" + (" …" if len(s["under_covered_cells"]) > 20 else "")
        for n, s in zip(names, stats)
    ]
    lines += [
        "",
        "## |ΔB| against bend angle",
        "",
        f"![delta_b]({figures['delta_b']})",
        "",
        "| λ bin [deg] | " + " | ".join(f"{n} [µT]" for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for i in range(len(edges) - 1):
        vals = [s["delta_b_binned_uT"][i] for s in stats]
        if all(not math.isfinite(v) for v in vals):
            continue
        lines.append(
            f"| {edges[i]:.0f}–{edges[i + 1]:.0f} | "
            + " | ".join(f"{v:.3f}" if math.isfinite(v) else "–" for v in vals)
            + " |"
        )
    lines += [
        "",
        "## Noise",
        "",
        f"![noise]({figures['noise']})",
        "",
        "## Dropped",
        "",
        f"![dropped]({figures['drops']})",
        "",
        "Poses, by reason:",
        "",
        head,
        rule,
    ]
    for r in q.REASONS:
        lines.append(row(r, [s["dropped_poses"].get(r, 0) for s in stats]))
    lines += ["", "Messages (ingestion), by stream and reason:", "", head, rule]
    keys = sorted({(st, r) for s in stats for st, rs in s["dropped_messages"].items() for r in rs})
    for st, r in keys:
        lines.append(row(f"{st}: {r}", [s["dropped_messages"].get(st, {}).get(r, 0) for s in stats]))
    lines += ["", "Samples (processing):", "", head, rule]
    for k in sorted({k for s in stats for k in s["samples"]}):
        lines.append(row(k, [s["samples"].get(k, "–") for s in stats]))
    return "\n".join(lines) + "\n"


def write_report(
    session_dirs: Sequence[str | Path],
    out_dir: str | Path,
    names: Optional[Sequence[str]] = None,
    max_colatitude_deg: Optional[float] = None,
    n_cells: int = 64,
    min_fill: float = 0.5,
) -> dict[str, Any]:
    """Write ``report.md``, ``report.json`` and the PNG figures of the sessions into ``out_dir``; return the numbers.

    Args:
        session_dirs: the session directories.
        out_dir: the output directory.
        names: the sessions' names; None: the directory names.
        max_colatitude_deg: the cap of the coverage check for every session [deg]; None: each session's own
            (`session_cap_deg`).
        n_cells: cells of the coverage grid.
        min_fill: a cell is under-filled below this fraction of its quota.

    Returns:
        The report's numbers.

    Raises:
        DataError: when no session is given.
    """
    if not session_dirs:
        raise DataError("report: no session given")
    out = prepare_output_dir(out_dir, inputs=session_dirs)  # refused before any session is read
    names = list(names) if names else [Path(d).name for d in session_dirs]
    sessions = [load_session(Path(d), n) for d, n in zip(session_dirs, names)]
    caps = [(max_colatitude_deg, "option") if max_colatitude_deg else session_cap_deg(s) for s in sessions]
    edges = np.arange(0.0, max(c for c, _ in caps) + BIN_DEG, BIN_DEG)
    stats = []
    for s, (cap_deg, source) in zip(sessions, caps):
        centres = fibonacci_cells(n_cells, math.radians(cap_deg))
        st = session_stats(s, centres, math.radians(cap_deg), min_fill, edges)
        stats.append({**st, "cap_deg": float(cap_deg), "cap_source": source})
    base = np.asarray(stats[0]["delta_b_binned_uT"])
    diffs = []
    for st in stats:
        cur = np.asarray(st["delta_b_binned_uT"])
        rel = np.abs(cur - base) / np.abs(base)
        diffs.append(float(np.nanmax(rel)) if np.any(np.isfinite(rel)) else float("nan"))
    noise = [noise_per_pose(s) for s in sessions]
    _fig_coverage(sessions, [c for c, _ in caps], out / FIGURES["coverage"])
    _fig_delta_b(sessions, edges, out / FIGURES["delta_b"])
    noise_figure(sessions, noise, out / FIGURES["noise"])
    _fig_drops(sessions, out / FIGURES["drops"])
    md = _markdown(names, stats, edges, diffs, FIGURES, min_fill, n_cells)
    with atomic_path(out / "report.md") as tmp:
        tmp.write_text(md)
    result = {
        "sessions": dict(zip(names, stats)),
        "delta_b_difference_from_first": dict(zip(names, diffs)),
        "bin_edges_deg": edges.tolist(),
        "n_cells": n_cells,
        "min_fill": min_fill,
        "figures": {k: str(out / v) for k, v in FIGURES.items()},
        "markdown": str(out / "report.md"),
    }
    write_json_atomic(out / "report.json", result)
    return result
