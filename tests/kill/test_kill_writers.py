"""A sample of the kill harness in the default suite: writers of a JSON file, a set of files and a training
checkpoint killed (SIGKILL, SIGTERM, SIGINT) at sampled instants leave the old or the new complete version, and
the next writer cleans up and commits. `scripts/kill_harness.py` runs hundreds of these."""

from __future__ import annotations

import random

import pytest

from flexlearn.atomic import atomic_path

CASES = [(kind, sig) for kind in ("json", "dir", "ckpt") for sig in ("SIGKILL", "SIGTERM", "SIGINT")]


@pytest.mark.parametrize("kind,sig", CASES)
def test_a_killed_writer_leaves_a_whole_version(kill_harness, tmp_path, kind, sig):
    rng = random.Random(f"{kind}-{sig}")
    target = tmp_path / {"json": "metrics.json", "dir": "set", "ckpt": "last.ckpt"}[kind]
    for _ in range(2):  # the second trial starts from the state the first kill left
        trial = kill_harness.writer_trial(kind, target, sig, rng.uniform(0.0, 0.05))
        assert trial["violation"] == "", trial
        assert trial["exit"] == (-9 if sig == "SIGKILL" else 128 + (15 if sig == "SIGTERM" else 2)), trial
    assert kill_harness.temporaries(target) == []


def test_the_harness_finds_a_half_written_file(kill_harness, tmp_path):
    """The check can fail: a truncated JSON file or a mixed set is reported, not taken as a version."""
    target = tmp_path / "metrics.json"
    kill_harness.write_version("json", target, 3)
    target.write_text(target.read_text()[:100])
    with pytest.raises(ValueError):
        kill_harness.read_version("json", target)
    folder = tmp_path / "set"
    kill_harness.write_version("dir", folder, 1)
    first = (folder / "part0.bin").read_bytes()
    kill_harness.write_version("dir", folder, 2)
    (folder / "part0.bin").write_bytes(first)  # one file of the old set beside the new ones
    with pytest.raises(ValueError, match="part0.bin"):
        kill_harness.read_version("dir", folder)


def test_temporaries_of_a_dead_writer_are_removed_by_the_next_one(kill_harness, tmp_path):
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    target = tmp_path / "out.json"
    (tmp_path / f".out.json.tmp-{dead.pid}-abc.json").write_text("{")
    with atomic_path(target) as tmp:
        tmp.write_text("{}")
    assert kill_harness.temporaries(target) == []
