"""Sweep planner: uniform over the cap in cos λ and θ, per-cell quotas, the mechanical limit; coverage vs the plan."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from flexlearn.config import from_dict
from flexlearn.errors import ConfigError
from flexlearn.ingest.plan import (
    PlanConfig,
    compare_coverage,
    plan_sweep,
    read_plan_targets,
    recorded_directions,
    write_plan,
)
from flexlearn.ingest.recording import ingest_recording
from flexlearn.sim.targets import cell_quotas, fibonacci_cells

from .conftest import run_app


def test_plan_is_uniform_stratified_and_inside_the_limit():
    cfg = PlanConfig(n_poses=3000, max_colatitude_deg=25.0, mechanical_limit_deg=26.0, n_cells=60, seed=4)
    plan = plan_sweep(cfg)
    lam, th = plan.colatitude_azimuth()
    assert np.degrees(lam).max() <= 25.0
    # uniform over the cap: cos λ ~ U[cos λmax, 1], θ ~ U[−π, π)
    c = math.cos(math.radians(25.0))
    assert stats.kstest((np.cos(lam) - c) / (1 - c), "uniform").pvalue > 0.01
    assert stats.kstest((th + math.pi) / (2 * math.pi), "uniform").pvalue > 0.01
    # every Fibonacci cell holds exactly its quota (∝ its solid angle)
    centres = fibonacci_cells(60, math.radians(25.0))
    np.testing.assert_array_equal(np.bincount(plan.cell, minlength=60), cell_quotas(3000, centres, math.radians(25.0)))


def test_nearest_order_visits_the_same_targets_with_shorter_moves():
    rnd = plan_sweep(PlanConfig(n_poses=400, n_cells=40))
    near = plan_sweep(PlanConfig(n_poses=400, n_cells=40, order="nearest"))

    def key(u):
        return np.round(u, 12)[np.lexsort(np.round(u, 12).T)]

    np.testing.assert_array_equal(key(rnd.target), key(near.target))

    def path(u):
        return np.arccos(np.clip(np.sum(u[1:] * u[:-1], axis=1), -1, 1)).sum()

    assert path(near.target) < 0.5 * path(rnd.target)


@pytest.mark.parametrize("suffix", [".csv", ".yaml"])
def test_plan_file_round_trip(suffix, tmp_path):
    plan = plan_sweep(PlanConfig(n_poses=50, n_cells=10))
    f = write_plan(plan, tmp_path / f"targets{suffix}")
    np.testing.assert_array_equal(read_plan_targets(f), plan.target)


def test_plan_beyond_mechanical_limit_is_rejected():
    with pytest.raises(ConfigError, match="max_colatitude_deg.*mechanical_limit_deg = 30.0"):
        from_dict(PlanConfig, {"max_colatitude_deg": 31.0}, "plan")


def test_coverage_names_the_cells_of_dropped_poses(recordings, ros_map, sim_raw, tmp_path):
    """The recorded sweep's own targets as the plan: under-filled cells are exactly those that lost poses."""
    out = ingest_recording(recordings["mcap"], tmp_path / "s", ros_map, report=False)
    kept = recorded_directions(out.output, use_mocap=False)
    assert 0 < len(kept) < len(sim_raw.target)
    cov = compare_coverage(sim_raw.target, kept, n_cells=8, max_colatitude=math.radians(29.5), min_fill=1.0)
    assert cov.planned.sum() == len(sim_raw.target) and cov.recorded.sum() == len(kept)
    lost = set(np.flatnonzero(cov.recorded < cov.planned).tolist())
    assert set(cov.under.tolist()) == lost and lost
    # with motion capture, the measured directions (≈ 0.3° from the targets) are used
    measured = recorded_directions(out.output)
    assert 0 < np.degrees(np.arccos(np.clip(np.sum(measured * kept, axis=1), -1, 1))).max() < 2.0


def test_plan_app_writes_targets_and_coverage(recordings, ros_map, tmp_path):
    proc = run_app("plan", tmp_path, "plan.n_poses=40", "plan.n_cells=8", f"output={tmp_path / 't.csv'}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(read_plan_targets(tmp_path / "t.csv")) == 40
    session = ingest_recording(recordings["mcap"], tmp_path / "s", ros_map, report=False).output
    proc = run_app(
        "plan",
        tmp_path,
        "plan.n_poses=40",
        "plan.n_cells=8",
        f"plan_file={tmp_path / 't.csv'}",
        f"compare=[{session}]",
        f"coverage_dir={tmp_path / 'cov'}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "cov" / "coverage.png").read_bytes()[:4] == b"\x89PNG"
    assert "| cell |" in (tmp_path / "cov" / "coverage.md").read_text()
