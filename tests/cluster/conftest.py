"""A real single-node SLURM cluster for the tests of this folder, started once per test session.

`slurm_cluster` runs ``scripts/local_slurm.sh start`` in a fresh folder (munged, slurmctld, slurmd; the script
installs Debian's slurm-wlm and munge when they are missing and it runs as root) and ``stop`` at the end of the
session, also when a test failed or the run was interrupted: the script stops exactly the daemons whose pid files
it wrote, after cancelling the cluster's jobs. Where the cluster cannot start (not root, no apt-get, a daemon that
does not come up) the tests that need it skip with the script's reason.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.cluster.local_cluster import Cluster, cluster_folder, start_cluster, stop_cluster


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    """The session's cluster (started on first use, stopped at the end of the session whatever happened)."""
    folder = cluster_folder()
    try:
        cluster = start_cluster(folder)
    except BaseException:
        stop_cluster(folder)  # a start cut short (skip, interrupt) may have left a daemon behind
        raise
    try:
        yield cluster
    finally:
        stop_cluster(folder)
