"""The journal of an export set's commit (`flexlearn.runtime.pikit.set_commit`): a commit whose writer is dead is
completed by the next loader, one whose writer runs is waited for (and an export beside it refused), a journal of
an earlier boot is dead whatever pid it names, and a folder that cannot be written is one line naming the file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flexlearn.atomic import OutputPathError
from flexlearn.runtime.export import Artifact, write_artifacts
from flexlearn.runtime.pikit import set_commit
from flexlearn.runtime.pikit.manifest import UntrustedArtifactError, verify_manifest

NAMES = ("a.pt", "b.pt2")


def _set(folder: Path, tag: bytes) -> None:
    folder.mkdir(exist_ok=True)
    write_artifacts([Artifact(folder / n, tag + n.encode(), "x") for n in NAMES])


def _half_committed(tmp_path: Path, pid: int, boot_id: str | None = None) -> Path:
    """The old set in ``tmp_path/out`` with the new one staged and journalled by writer ``pid``, and the first
    rename done (the folder is a mix until the commit is completed). Returns the folder."""
    folder, new = tmp_path / "out", tmp_path / "new"
    _set(folder, b"old")
    _set(new, b"new")
    files = [n for n in NAMES] + [n + ".manifest.json" for n in NAMES]
    pairs = []
    for name in files:
        tmp = folder / f".{name}.tmp-{pid}-x"
        shutil.copyfile(new / name, tmp)
        pairs.append((tmp, folder / name))
    journal = set_commit.write_journal(folder, pairs)
    record = json.loads(journal.read_text())
    record["pid"] = pid
    record["boot_id"] = record["boot_id"] if boot_id is None else boot_id
    journal.unlink()
    set_commit.journal_path(folder, pid).write_text(json.dumps(record))
    os.replace(*pairs[0])
    return folder


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _contents(folder: Path) -> set[bytes]:
    return {(folder / n).read_bytes()[:3] for n in NAMES if verify_manifest(folder / n)}


def test_a_commit_whose_writer_died_is_completed_by_the_loader(tmp_path):
    folder = _half_committed(tmp_path, _dead_pid())
    assert _contents(folder) == {b"new"}
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_a_journal_of_an_earlier_boot_is_dead_whatever_runs_under_its_pid(tmp_path):
    folder = _half_committed(tmp_path, os.getppid(), boot_id="an-earlier-boot")  # a live pid, another boot
    assert _contents(folder) == {b"new"}


def test_a_running_commit_is_waited_for_and_an_export_beside_it_refused(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folder = _half_committed(tmp_path, sleeper.pid)
        assert set_commit.finish_commits(folder, wait_s=0.05) == [set_commit.journal_path(folder, sleeper.pid)]
        with pytest.raises(OutputPathError, match="another export is committing") as info:
            _set(folder, b"fix")
        assert "\n" not in str(info.value)
    finally:
        sleeper.kill()
        sleeper.wait()
    _set(folder, b"fix")  # the writer is gone: its commit is completed, then replaced
    assert _contents(folder) == {b"fix"}


def test_a_commit_that_cannot_be_completed_is_one_line_naming_the_file(tmp_path):
    folder = _half_committed(tmp_path, _dead_pid())
    (folder / NAMES[1]).unlink()
    (folder / NAMES[1]).mkdir()  # a target that cannot be replaced (as a read-only folder, also for root)
    with pytest.raises(UntrustedArtifactError, match="interrupted inside its commit") as info:
        verify_manifest(folder / NAMES[0])
    assert "\n" not in str(info.value) and NAMES[0] in str(info.value)
