"""Starting and stopping a local single-node SLURM cluster (scripts/local_slurm.sh) for the tests of this folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "local_slurm.sh"


class Cluster(NamedTuple):
    """A running local cluster: its folder and the environment that points SLURM's commands at it."""

    folder: Path
    env: dict[str, str]


def cluster_folder() -> Path:
    """A new folder for a cluster, reachable by the munge user (pytest's tmp folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="flexlearn-slurm-", dir="/tmp"))
    folder.chmod(0o755)
    return folder


def start_cluster(folder: Path) -> Cluster:
    """Start a cluster in ``folder``; skip the test with the script's reason when it cannot run here."""
    if shutil.which("bash") is None:
        pytest.skip("a local SLURM cluster needs bash")
    if os.geteuid() != 0:
        pytest.skip("a local SLURM cluster needs root (munged runs as the munge user, slurmd as root)")
    proc = subprocess.run(["bash", str(SCRIPT), "start", str(folder)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no reason given"])[-1]
        pytest.skip(f"the local SLURM cluster did not start: {reason}")
    env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"))
    return Cluster(folder, env)


def stop_cluster(folder: Path) -> None:
    """Stop the cluster of ``folder`` (its jobs, then its daemons) and remove the folder."""
    subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], capture_output=True, text=True, timeout=120)
    shutil.rmtree(folder, ignore_errors=True)
