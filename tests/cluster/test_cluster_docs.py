"""Every command of docs/cluster.md (its ``bash`` blocks, in order) runs against a local cluster started by the
page's own first command and stopped by its last.

Changes made to run them here: the cluster folder is a fresh one instead of ``/tmp/flexlearn-slurm``; the
training commands get small data (``data.sim.n_poses=400 trainer.max_epochs=2``) and every flexlearn command
``logger=none`` and the session's dataset cache; ``SWEEP_DIR`` is the directory of the sweep before it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.local_cluster import ROOT, cluster_folder, stop_cluster

DOC = ROOT / "docs" / "cluster.md"
SMALL = ["data.sim.n_poses=400", "trainer.max_epochs=2"]


def doc_commands() -> list[str]:
    """The commands of the page's ``bash`` blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S)
    return [c.strip() for b in blocks for c in b.replace("\\\n", " ").splitlines() if c.strip()]


def test_the_page_lists_a_cluster_start_sweeps_and_a_stop():
    commands = doc_commands()
    assert commands[0].startswith("scripts/local_slurm.sh start ")
    assert commands[-1].startswith("scripts/local_slurm.sh stop ")
    assert sum(c.startswith("flexlearn-train") for c in commands) == 4


@pytest.mark.slow
def test_every_command_of_the_page_runs(tmp_path, cache_dir):
    if os.geteuid() != 0:
        pytest.skip("a local SLURM cluster needs root (munged runs as the munge user, slurmd as root)")
    folder = cluster_folder()
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), WANDB_MODE="offline", OMP_NUM_THREADS="1")
    bin_dir = Path(sys.executable).parent
    sweep_dir = None
    try:
        for command in doc_commands():
            argv = shlex.split(command.replace("/tmp/flexlearn-slurm", str(folder)))
            if argv[0] == "export":
                key, _, value = argv[1].partition("=")
                env[key] = value
                continue
            if argv[0].startswith("flexlearn-"):
                argv[0] = str(bin_dir / argv[0])
                argv = [a.replace("SWEEP_DIR", str(sweep_dir)) for a in argv]
                if argv[0].endswith("flexlearn-train"):
                    small = [] if any(a.startswith("experiment=identify") for a in argv) else SMALL
                    argv += [*small, "logger=none", f"paths.cache_dir={cache_dir}"]
            elif argv[0].startswith("scripts/"):
                argv = ["bash", str(ROOT / argv[0]), *argv[1:]]
            proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode == 3 and "start" in argv:
                pytest.skip(f"the local SLURM cluster did not start: {proc.stderr.strip().splitlines()[-1]}")
            assert proc.returncode == 0, (command, proc.stdout[-2000:], proc.stderr[-2000:])
            if argv[0] == "sinfo":
                assert "idle" in proc.stdout, proc.stdout
            if "flexlearn-" in argv[0]:
                assert re.search(r"^best run: job \d+ ", proc.stdout, flags=re.M), (command, proc.stdout[-2000:])
                found = re.search(r"^  summary:\s+(\S+)/summary\.md", proc.stdout, flags=re.M)
                assert found, proc.stdout[-2000:]
                sweep_dir = found[1]
    finally:
        stop_cluster(folder)
    assert not any(str(folder) in _cmdline(p) for p in os.listdir("/proc") if p.isdigit())


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
