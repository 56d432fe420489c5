"""Sweep planning: target lists over the spherical cap for the rig's tendon controller, and coverage checks.

A plan is ``n_poses`` child directions uniform over the cap λ ≤ λmax (cos λ ~ U[cos λmax, 1], θ ~ U[−π, π)),
stratified over equal-solid-angle Fibonacci cells with per-cell quotas (seed 002, III-B1; the sampler is
`flexlearn.sim.targets.sample_cap_targets`), inside the joint's mechanical limit. It is written as CSV (one
row per target) or YAML (settings + list of targets). λ is the bend angle; θ the bend direction.

`compare_coverage` counts, per cell, the planned targets and the poses a recorded sweep kept, and names the
cells filled below ``min_fill`` of their plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import yaml
from pyarrow import csv as pa_csv

from flexlearn.atomic import atomic_path, prepare_output_dir, write_json_atomic
from flexlearn.config import check, to_dict
from flexlearn.errors import DataError
from flexlearn.sim.targets import assign_cells, fibonacci_cells, sample_cap_targets

PLAN_COLUMNS = ("pose_id", "cell", "target_x", "target_y", "target_z", "colatitude_deg", "azimuth_deg")
ORDERS = ("random", "nearest")


@dataclass
class PlanConfig:
    """Sweep plan settings (angles in degrees at this edge; radians inside).

    Attributes:
        n_poses: number of targets.
        max_colatitude_deg: largest bend angle λmax of the plan.
        mechanical_limit_deg: the joint's mechanical limit; λmax must not exceed it.
        n_cells: Fibonacci cells for stratification (and for coverage checks).
        seed: random seed of the sampler.
        order: visiting order: ``random`` (as drawn) or ``nearest`` (greedy nearest neighbour from the
            straight pose, shortening the rig's moves).
    """

    n_poses: int = 2000
    max_colatitude_deg: float = 29.5
    mechanical_limit_deg: float = 30.0
    n_cells: int = 250
    seed: int = 0
    order: str = "random"

    def validate(self) -> None:
        check(self.n_poses >= 1, "plan.n_poses", self.n_poses, "must be >= 1")
        check(
            0 < self.mechanical_limit_deg < 90,
            "plan.mechanical_limit_deg",
            self.mechanical_limit_deg,
            "must be in (0, 90) degrees",
        )
        check(
            0 < self.max_colatitude_deg <= self.mechanical_limit_deg,
            "plan.max_colatitude_deg",
            self.max_colatitude_deg,
            f"must be in (0, mechanical_limit_deg = {self.mechanical_limit_deg}]",
        )
        check(
            1 <= self.n_cells <= self.n_poses, "plan.n_cells", self.n_cells, f"must be in [1, n_poses = {self.n_poses}]"
        )
        check(self.order in ORDERS, "plan.order", self.order, f"expected one of {ORDERS}")

    @property
    def max_colatitude(self) -> float:
        return math.radians(self.max_colatitude_deg)


@dataclass
class Plan:
    """Targets (P, 3) unit directions in the parent frame (straight = −z), their cells (P,) and the settings."""

    target: np.ndarray
    cell: np.ndarray
    cfg: PlanConfig

    def colatitude_azimuth(self) -> tuple[np.ndarray, np.ndarray]:
        """Bend angle λ and direction θ [rad], (P,) each."""
        return np.arccos(np.clip(-self.target[:, 2], -1.0, 1.0)), np.arctan2(self.target[:, 1], self.target[:, 0])


def _nearest_order(u: np.ndarray) -> np.ndarray:
    """Greedy nearest-neighbour tour over directions u (P, 3), starting nearest to the straight pose."""
    p = u.shape[0]
    left = np.ones(p, dtype=bool)
    order = np.empty(p, dtype=np.int64)
    cur = np.array([0.0, 0.0, -1.0])
    for k in range(p):
        d = np.where(left, u @ cur, -np.inf)
        i = int(np.argmax(d))
        order[k], left[i], cur = i, False, u[i]
    return order


def plan_sweep(cfg: PlanConfig) -> Plan:
    """The target list of ``cfg``: uniform over the cap, stratified over Fibonacci cells with quotas.

    Args:
        cfg: the plan config (validated here).

    Returns:
        The `Plan`: unit targets (P, 3) and their cells (P,).

    Raises:
        ConfigError: an invalid ``cfg``.
        DataError: a target beyond the mechanical limit.
    """
    cfg.validate()
    target = sample_cap_targets(cfg.n_poses, cfg.max_colatitude, cfg.n_cells, cfg.seed)
    if cfg.order == "nearest":
        target = target[_nearest_order(target)]
    colat = np.arccos(np.clip(-target[:, 2], -1.0, 1.0))
    limit = math.radians(cfg.mechanical_limit_deg)
    if np.any(colat > limit + 1e-12):  # cannot happen with a valid config; guards the rig all the same
        raise DataError(f"plan: target beyond the mechanical limit {cfg.mechanical_limit_deg} deg")
    cell = assign_cells(target, fibonacci_cells(cfg.n_cells, cfg.max_colatitude))
    return Plan(target=target, cell=cell, cfg=cfg)


def plan_rows(plan: Plan) -> dict[str, np.ndarray]:
    """Column name -> (P,) array, in `PLAN_COLUMNS` order.

    Args:
        plan: the plan.

    Returns:
        The columns (angles in [deg]).
    """
    lam, th = plan.colatitude_azimuth()
    return {
        "pose_id": np.arange(plan.target.shape[0]),
        "cell": plan.cell,
        "target_x": plan.target[:, 0],
        "target_y": plan.target[:, 1],
        "target_z": plan.target[:, 2],
        "colatitude_deg": np.degrees(lam),
        "azimuth_deg": np.degrees(th),
    }


def write_plan(plan: Plan, path: str | Path) -> Path:
    """Write the plan as CSV (``*.csv``) or YAML (``*.yaml``/``*.yml``), atomically.

    Args:
        plan: the plan.
        path: the file written; its suffix picks the format.

    Returns:
        ``path``.
    """
    path = Path(path)
    rows = plan_rows(plan)
    if path.suffix == ".csv":
        with atomic_path(path) as tmp, open(tmp, "w") as f:
            f.write(",".join(PLAN_COLUMNS) + "\n")
            for i in range(plan.target.shape[0]):
                f.write(
                    ",".join(
                        str(int(rows[c][i])) if c in ("pose_id", "cell") else repr(float(rows[c][i]))
                        for c in PLAN_COLUMNS
                    )
                    + "\n"
                )
    elif path.suffix in (".yaml", ".yml"):
        doc = {
            "plan": to_dict(plan.cfg),
            "columns": list(PLAN_COLUMNS),
            "targets": [
                [int(rows[c][i]) if c in ("pose_id", "cell") else float(rows[c][i]) for c in PLAN_COLUMNS]
                for i in range(plan.target.shape[0])
            ],
        }
        with atomic_path(path) as tmp:
            tmp.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=200))
    else:
        raise DataError(f"{path}: unknown plan format (expected .csv, .yaml or .yml)")
    return path


def read_plan_targets(path: str | Path) -> np.ndarray:
    """Targets (P, 3) of a plan file written by `write_plan` (CSV or YAML); errors name file and column.

    Args:
        path: the plan file (``*.csv``; any other suffix is read as YAML).

    Returns:
        The targets (P, 3), float64.

    Raises:
        DataError: the file is missing or unreadable, or lacks the target columns.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: plan file not found")
    if path.suffix == ".csv":
        try:
            table = pa_csv.read_csv(path)
        except Exception as exc:
            raise DataError(f"{path}: cannot be read as CSV ({str(exc).splitlines()[0]})") from exc
        cols = table.column_names
        missing = [c for c in ("target_x", "target_y", "target_z") if c not in cols]
        if missing:
            raise DataError(f"{path}: column(s) {missing} missing; columns present: {cols}")
        u = np.stack([table.column(c).to_numpy() for c in ("target_x", "target_y", "target_z")], axis=-1)
    else:
        doc = yaml.safe_load(path.read_text())
        if not isinstance(doc, dict) or "targets" not in doc or "columns" not in doc:
            raise DataError(f"{path}: expected a YAML plan with 'columns' and 'targets'")
        idx = [doc["columns"].index(c) for c in ("target_x", "target_y", "target_z")]
        u = np.asarray([[row[i] for i in idx] for row in doc["targets"]], dtype=np.float64)
    return u.astype(np.float64)


@dataclass
class Coverage:
    """Per-cell planned and recorded counts and the under-filled cells.

    Attributes:
        centres: (C, 3) cell centres. planned, recorded: (C,) counts. fill: (C,) recorded / planned (inf where
        nothing was planned). under: indices of cells with fill < min_fill, most under-filled first.
    """

    centres: np.ndarray
    planned: np.ndarray
    recorded: np.ndarray
    min_fill: float

    @property
    def fill(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.planned > 0, self.recorded / np.maximum(self.planned, 1), np.inf)

    @property
    def under(self) -> np.ndarray:
        f = self.fill
        idx = np.flatnonzero(f < self.min_fill)
        return idx[np.argsort(f[idx], kind="stable")]

    def summary(self) -> dict[str, Any]:
        lam = np.degrees(np.arccos(np.clip(-self.centres[:, 2], -1, 1)))
        th = np.degrees(np.arctan2(self.centres[:, 1], self.centres[:, 0]))
        return {
            "cells": int(self.centres.shape[0]),
            "planned": int(self.planned.sum()),
            "recorded": int(self.recorded.sum()),
            "min_fill": self.min_fill,
            "under_filled": [
                {
                    "cell": int(i),
                    "colatitude_deg": round(float(lam[i]), 2),
                    "azimuth_deg": round(float(th[i]), 1),
                    "planned": int(self.planned[i]),
                    "recorded": int(self.recorded[i]),
                }
                for i in self.under
            ],
        }


def compare_coverage(
    planned: np.ndarray, recorded: np.ndarray, n_cells: int, max_colatitude: float, min_fill: float = 0.8
) -> Coverage:
    """Per-cell counts of ``planned`` (P, 3) and ``recorded`` (R, 3) directions on ``n_cells`` Fibonacci cells.

    Args:
        planned: planned directions (P, 3).
        recorded: recorded directions (R, 3).
        n_cells: number of Fibonacci cells.
        max_colatitude: the cap of the cells.
        min_fill: a cell is under-filled below this fraction of planned.

    Returns:
        The `Coverage`.
    """
    centres = fibonacci_cells(n_cells, max_colatitude)

    def count(u: np.ndarray) -> np.ndarray:
        return np.bincount(assign_cells(u, centres), minlength=n_cells) if len(u) else np.zeros(n_cells, int)

    return Coverage(centres=centres, planned=count(planned), recorded=count(recorded), min_fill=min_fill)


def recorded_directions(session: str | Path, use_mocap: bool = True) -> np.ndarray:
    """Directions (N, 3) of the poses kept in an ingested session directory (or a raw sweep directory).

    The commanded target of each kept pose, or, if the session holds motion capture and ``use_mocap``, the
    mean measured direction over its hold window (see `flexlearn.data.sessions.load_session`).

    Args:
        session: the session directory.
        use_mocap: use the motion capture where the session holds it.

    Returns:
        The directions (N, 3).
    """
    from flexlearn.data.sessions import load_session  # the processing stack, kept off the plan-writing path

    s = load_session(Path(session))
    return s.directions(use_mocap)[s.kept]


def cell_fill_of(session_dirs: list[Path], plan_file: Optional[Path], cfg: PlanConfig, min_fill: float) -> Coverage:
    """Coverage of the kept poses of ``session_dirs`` against ``plan_file`` (or the plan ``cfg`` describes).

    Args:
        session_dirs: the session directories.
        plan_file: the plan file; None: the plan of ``cfg``.
        cfg: the plan settings (cells and cap).
        min_fill: a cell is under-filled below this fraction of planned.

    Returns:
        The `Coverage`.
    """
    planned = read_plan_targets(plan_file) if plan_file else plan_sweep(cfg).target
    rec = [recorded_directions(d) for d in session_dirs]
    recorded = np.concatenate(rec) if rec else np.zeros((0, 3))
    return compare_coverage(planned, recorded, cfg.n_cells, cfg.max_colatitude, min_fill)


def write_coverage(cov: Coverage, out_dir: str | Path, max_colatitude_deg: float) -> dict[str, str]:
    """Write ``coverage.json``, ``coverage.md`` (under-filled cells) and ``coverage.png`` (fill per cell).

    Args:
        cov: the coverage.
        out_dir: the output directory.
        max_colatitude_deg: the cap of the cells [deg].

    Returns:
        The files written by name.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # matplotlib kept off the plan-writing path
    from matplotlib.figure import Figure  # matplotlib kept off the plan-writing path

    out = prepare_output_dir(out_dir)
    summary = cov.summary()
    write_json_atomic(out / "coverage.json", summary)
    lines = [
        "# Sweep coverage against the plan",
        "",
        f"{summary['recorded']} kept poses against {summary['planned']} planned, in {summary['cells']} "
        f"Fibonacci cells; under-filled: recorded < {cov.min_fill:.0%} of planned.",
        "",
        "| cell | λ [deg] | θ [deg] | planned | recorded |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {c['cell']} | {c['colatitude_deg']} | {c['azimuth_deg']} | {c['planned']} | {c['recorded']} |"
        for c in summary["under_filled"]
    ]
    if not summary["under_filled"]:
        lines.append("| – | – | – | – | – |")
    with atomic_path(out / "coverage.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    lam = np.degrees(np.arccos(np.clip(-cov.centres[:, 2], -1, 1)))
    th = np.arctan2(cov.centres[:, 1], cov.centres[:, 0])
    fig = Figure(figsize=(5.2, 4.4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    fill = np.minimum(np.where(np.isfinite(cov.fill), cov.fill, 1.0), 1.5)
    sc = ax.scatter(lam * np.cos(th), lam * np.sin(th), c=fill, cmap="RdYlGn", vmin=0.0, vmax=1.5, s=60)
    fig.colorbar(sc, ax=ax, label="recorded / planned")
    c = np.linspace(0, 2 * math.pi, 200)
    ax.plot(max_colatitude_deg * np.cos(c), max_colatitude_deg * np.sin(c), "k-", lw=0.8)
    ax.set_aspect("equal")
    ax.set_xlabel("λ cos θ [deg]")
    ax.set_ylabel("λ sin θ [deg]")
    ax.set_title("cell fill of the recorded sweep")
    fig.tight_layout()
    with atomic_path(out / "coverage.png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return {
        "json": str(out / "coverage.json"),
        "markdown": str(out / "coverage.md"),
        "figure": str(out / "coverage.png"),
    }
