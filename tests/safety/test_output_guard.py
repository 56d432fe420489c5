"""Output-path guard: no writer deletes or overwrites what it did not write (flexlearn.atomic)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flexlearn import atomic
from flexlearn.atomic import (
    OUTPUT_MARKER,
    OutputPathError,
    atomic_dir,
    atomic_path,
    guard_output_dir,
    guard_output_file,
    remove_stale_temporaries,
)
from flexlearn.config import from_dict
from flexlearn.ingest import topic_map
from flexlearn.ingest.recording import ingest_recording
from flexlearn.ingest.writers import sweep_messages, write_rosbag
from flexlearn.sim.rig import simulate_sweep
from flexlearn.sim.rig_config import RigConfig

REPO = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """A small rosbag2 recording beside a user's unrelated file, in its own folder."""
    root = tmp_path_factory.mktemp("user_data")
    raw = simulate_sweep(from_dict(RigConfig, {"n_poses": 12, "seed": 1}))
    msgs, store = sweep_messages(raw, topic_map("rig_ros2"))
    (root / "notes.txt").write_text("lab notebook\n")
    return write_rosbag(root / "bag", msgs, store, "mcap")


@pytest.mark.parametrize("where", ["itself", "parent"])
def test_ingest_into_the_recording_or_its_parent_is_refused_and_deletes_nothing(recording, where):
    target = recording if where == "itself" else recording.parent
    before = _tree(recording.parent)
    with pytest.raises(OutputPathError, match="input"):
        ingest_recording(recording, target, topic_map("rig_ros2"))
    assert _tree(recording.parent) == before


def test_ingest_cli_refuses_the_recordings_folder_in_one_line(recording, tmp_path):
    before = _tree(recording.parent)
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.ingest", f"input={recording}", f"output={recording.parent}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "contains the input" in proc.stderr
    assert _tree(recording.parent) == before


def test_an_output_file_inside_an_input_directory_is_refused(tmp_path):
    """An existing file inside an input folder (``flexlearn-calibrate inputs=[sweep] output=sweep/poses.parquet``) was
    replaced by the output: one of the recording's own files. The guard refuses it by name (the process CLI too);
    new files there (``cd sweep && flexlearn-process input=.`` writes logs/ below it) stay allowed."""
    sweep = tmp_path / "sweep"
    raw = simulate_sweep(from_dict(RigConfig, {"n_poses": 12, "seed": 1}))
    raw.save(sweep)
    before = _tree(sweep)
    for name in ("poses.parquet", "mag.parquet", "meta.json"):
        with pytest.raises(OutputPathError, match="inside the input directory"):
            guard_output_file(sweep / name, inputs=[sweep])
    guard_output_file(sweep / "new.json", inputs=[sweep])  # a new file replaces nothing
    guard_output_dir(sweep / "logs", inputs=[sweep])  # nor does a new run directory
    guard_output_file(tmp_path / "calibration.json", inputs=[sweep])  # beside it is fine
    guard_output_file(tmp_path / "d.parquet", inputs=[sweep / "mag.parquet"])  # a file input has no inside
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.process", f"input={sweep}", f"output={sweep / 'mag.parquet'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and "inside the input directory" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert _tree(sweep) == before


@pytest.mark.parametrize("make", ["root", "home", "cwd", "repo"])
def test_protected_directories_are_refused(make, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = {"root": Path("/"), "home": Path.home(), "cwd": Path("."), "repo": REPO}[make]
    with pytest.raises(OutputPathError):
        guard_output_dir(path)
    with pytest.raises(OutputPathError):
        with atomic_dir(path):
            pass


def test_a_foreign_directory_is_refused_and_kept(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "thesis.tex").write_text("keep me")
    with pytest.raises(OutputPathError, match="did not write"):
        with atomic_dir(out) as tmp:
            (tmp / "new.txt").write_text("x")
    assert (out / "thesis.tex").read_text() == "keep me"
    assert not (out / "new.txt").exists()


def test_own_output_is_replaced_and_marked_with_usual_permissions(tmp_path):
    out = tmp_path / "sweep"
    for content in ("first", "second"):
        with atomic_dir(out) as tmp:
            (tmp / "data.txt").write_text(content)
    assert (out / "data.txt").read_text() == "second"
    assert (out / OUTPUT_MARKER).exists()
    umask = os.umask(0)
    os.umask(umask)
    assert (out.stat().st_mode & 0o777) == (0o777 & ~umask)
    assert [p.name for p in tmp_path.iterdir()] == ["sweep"]  # no temporaries, no *.old left beside it


def test_empty_existing_directory_may_be_used(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    with atomic_dir(out) as tmp:
        (tmp / "a").write_text("1")
    assert (out / "a").read_text() == "1"


def test_existing_file_and_symlink_outputs_are_refused_untouched(tmp_path):
    file = tmp_path / "data.parquet"
    file.write_text("precious")
    with pytest.raises(OutputPathError, match="existing file"):
        guard_output_dir(file)
    link = tmp_path / "link"
    link.symlink_to(file)
    with pytest.raises(OutputPathError, match="symbolic link"):
        with atomic_path(link) as tmp:
            tmp.write_text("x")
    with pytest.raises(OutputPathError, match="is a directory"):
        guard_output_file(tmp_path)
    with pytest.raises(OutputPathError, match="is a file"):
        guard_output_dir(file / "sub")
    assert file.read_text() == "precious" and link.is_symlink()


def test_failed_swap_puts_the_previous_version_back(tmp_path, monkeypatch):
    out = tmp_path / "out"
    with atomic_dir(out) as tmp:
        (tmp / "v").write_text("old")
    real_replace = os.replace
    calls = []

    def flaky(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # the rename of the new version onto the output
            raise PermissionError(1, "Operation not permitted")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    monkeypatch.setattr(atomic, "exchange_paths", lambda a, b: False)  # a system without renameat2: two renames
    with pytest.raises(OutputPathError, match="cannot be replaced"):
        with atomic_dir(out) as tmp:
            (tmp / "v").write_text("new")
    monkeypatch.setattr(os, "replace", real_replace)
    assert (out / "v").read_text() == "old"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_a_killed_writer_are_removed_or_restored(tmp_path):
    pid = _dead_pid()
    (tmp_path / f".sweep.tmp-{pid}-abcd").mkdir()  # a half-written new version
    old = tmp_path / f".sweep.tmp-{pid}-old-efgh"  # killed between the two renames: only copy of the output
    old.mkdir()
    (old / "v").write_text("previous")
    (old / OUTPUT_MARKER).write_text("")
    (tmp_path / f".m.json.tmp-{pid}-xyz.json").write_text("{")
    guard = tmp_path / f".sweep.tmp-{os.getpid()}-live"  # this process's own: left alone
    guard.mkdir()
    with atomic_path(tmp_path / "m.json") as tmp:
        tmp.write_text("{}")
    assert not (tmp_path / f".m.json.tmp-{pid}-xyz.json").exists()
    remove_stale_temporaries(tmp_path / "sweep")
    assert (tmp_path / "sweep" / "v").read_text() == "previous"
    with atomic_dir(tmp_path / "sweep") as tmp:
        (tmp / "v").write_text("next")
    assert (tmp_path / "sweep" / "v").read_text() == "next"
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["m.json", "sweep", guard.name]), names


def test_report_refuses_an_output_that_holds_its_sessions(recording, tmp_path):
    from flexlearn.data.report import write_report

    with pytest.raises(OutputPathError, match="contains the input"):
        write_report([recording], recording.parent)


def test_directory_swap_is_one_exchange_where_the_system_has_it(tmp_path, monkeypatch):
    """With renameat2(RENAME_EXCHANGE) the new directory replaces the old one in one step: no instant without one."""
    out = tmp_path / "out"
    with atomic_dir(out) as tmp:
        (tmp / "v").write_text("old")
    probe_a, probe_b = tmp_path / "a", tmp_path / "b"
    probe_a.mkdir(), probe_b.mkdir()
    (probe_a / "x").write_text("a")
    if not atomic.exchange_paths(probe_a, probe_b):
        pytest.skip("this system or file system has no renameat2(RENAME_EXCHANGE)")
    assert (probe_b / "x").read_text() == "a" and not (probe_a / "x").exists()
    calls = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda s, d: calls.append((s, d)) or real_replace(s, d))
    with atomic_dir(out) as tmp:
        (tmp / "v").write_text("new")
    assert (out / "v").read_text() == "new"
    assert calls == [], "an existing directory is exchanged, not moved aside by renames"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "out"]
