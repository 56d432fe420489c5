"""Shared fixtures: one small simulated sweep, its recordings (rosbag2 MCAP/sqlite3, CSV, JSON lines)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flexlearn.config import from_dict
from flexlearn.data.process import process_sweep
from flexlearn.ingest import topic_map
from flexlearn.ingest.writers import sweep_messages, write_rosbag
from flexlearn.sensing.streams import quantize_times
from flexlearn.sim.rig import simulate_sweep
from flexlearn.sim.rig_config import RigConfig

N_POSES = 40
# Faults raised so that a 40-pose sweep has dropped poses, NaN polls and saturation to carry through.
SIM = {"n_poses": N_POSES, "seed": 3, "faults": {"nan_rate": 0.01, "short_pulse_rate": 0.05, "swing_rate": 0.05}}


@pytest.fixture(scope="session")
def sim_raw():
    return simulate_sweep(from_dict(RigConfig, SIM))


@pytest.fixture(scope="session")
def direct_dataset(sim_raw):
    """The direct simulator path: the sweep as a recording of it holds it (times at the ns resolution of a
    recording; the simulated hand tumble, which the writers record on the map's tumble topic), processed."""
    return process_sweep(quantize_times(sim_raw)).dataset


@pytest.fixture(scope="session")
def ros_map():
    return topic_map("rig_ros2")


@pytest.fixture(scope="session")
def recordings(tmp_path_factory, sim_raw, ros_map) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recordings")
    msgs, store = sweep_messages(sim_raw, ros_map)
    return {st: write_rosbag(root / f"sweep_{st}", msgs, store, st) for st in ("mcap", "sqlite3")}


def assert_same_pairs(a, b) -> None:
    """Bitwise-identical training pairs: ids, ΔB, labels, splits and coil-on counts."""
    np.testing.assert_array_equal(a.pose_id, b.pose_id)
    np.testing.assert_array_equal(a.delta_b, b.delta_b)
    np.testing.assert_array_equal(a.label, b.label)
    np.testing.assert_array_equal(a.split, b.split)
    np.testing.assert_array_equal(a.n_coil_on, b.n_coil_on)


def run_app(module: str, root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLEXLEARN_ROOT=str(root), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", f"flexlearn.apps.{module}", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_clean_failure(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit status 2, one error line on stderr naming every needle, no traceback."""
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, proc.stderr[-2000:]
    for needle in needles:
        assert needle in errors[0], errors[0]
