"""The one atomic switch of an export set: a write-ahead journal of its renames, completed by whoever comes next.

A set of files (``direction_model.pt``, ``.pt2``, their manifests) cannot be renamed in at once. The writer
therefore stages every file under a temporary name beside its target (fsynced), then writes one journal,
``.flexlearn-commit-<pid>.json``, that names every (temporary, target) pair; that single rename is the commit.
Before it, the folder holds the old set whole; after it, the new set is the targets already renamed plus the
temporaries the journal names. The writer then renames the files in and removes the journal. A writer killed
in between (SIGKILL, power loss) leaves the journal: the next loader or writer of the folder completes the
renames (`finish_commits`), so what loads is always the old set or the new one, never a mix.

A journal whose writer is still running (same host and boot, its pid alive) is waited for; one written on
another host is taken as abandoned after `FOREIGN_GRACE_S`. Standard library only (the Pi kit carries it).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Sequence

JOURNAL_PREFIX = ".flexlearn-commit-"
FOREIGN_GRACE_S = 60.0  # s: a journal from another host older than this is abandoned


def _boot_id() -> str:
    """This boot's id (Linux); '' elsewhere. A pid from an earlier boot is dead whatever runs under it now."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host.

    Args:
        pid: the process id.

    Returns:
        True when it exists (or exists under another user).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_folder(folder: str | os.PathLike) -> None:
    """Flush a folder's entries (its renames) to disk; a no-op where folders cannot be opened (Windows).

    Args:
        folder: the folder.
    """
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def journal_path(folder: str | os.PathLike, pid: int | None = None) -> Path:
    """The journal a writer (default: this process) keeps in ``folder`` while it commits a set.

    Args:
        folder: the set's folder.
        pid: the writer's process id.

    Returns:
        ``folder/.flexlearn-commit-<pid>.json``.
    """
    return Path(folder) / f"{JOURNAL_PREFIX}{os.getpid() if pid is None else pid}.json"


def write_journal(folder: str | os.PathLike, renames: Sequence[tuple[Path, Path]]) -> Path:
    """Commit a staged set: write, fsync and rename in the journal naming every (temporary, target) pair.

    Args:
        folder: the set's folder (the journal's home; pairs elsewhere are stored as absolute paths).
        renames: the (staged temporary, target) pairs, temporaries already fsynced.

    Returns:
        The journal's path (remove it with `end_commit` once every pair is renamed).
    """
    folder = Path(folder)
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "boot_id": _boot_id(),
        "renames": [[os.path.relpath(tmp, folder), os.path.relpath(final, folder)] for tmp, final in renames],
    }
    path = journal_path(folder)
    staging = path.with_name(path.name + ".part")
    with open(staging, "w", encoding="utf-8") as f:
        f.write(json.dumps(record, indent=1))
        f.flush()
        os.fsync(f.fileno())
    os.replace(staging, path)
    fsync_folder(folder)
    return path


def end_commit(journal: Path) -> None:
    """Remove a finished commit's journal (every pair renamed), durably.

    Args:
        journal: the path `write_journal` returned.
    """
    fsync_folder(journal.parent)
    journal.unlink(missing_ok=True)
    fsync_folder(journal.parent)


def _abandoned(record: dict, journal: Path) -> bool:
    """Whether the journal's writer is gone: its pid is dead on this host and boot, or it is foreign and old."""
    if record.get("host") != socket.gethostname():
        return time.time() - journal.stat().st_mtime > FOREIGN_GRACE_S
    if record.get("boot_id", "") != _boot_id():
        return True
    pid = record.get("pid")
    return not isinstance(pid, int) or not pid_alive(pid)


def _roll_forward(folder: Path, record: dict) -> None:
    """Rename every staged temporary the journal names that is still there onto its target."""
    for tmp, final in record.get("renames", []):
        with contextlib.suppress(FileNotFoundError):  # renamed already (by the writer or another reader)
            os.replace(folder / tmp, folder / final)


def _remove_dead_parts(folder: Path) -> None:
    """Remove journals that a killed writer was still writing (``.part``: never committed)."""
    for part in folder.glob(f"{JOURNAL_PREFIX}*.json.part"):
        pid = part.name[len(JOURNAL_PREFIX) : -len(".json.part")]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            part.unlink(missing_ok=True)


def finish_commits(folder: str | os.PathLike, wait_s: float = 5.0) -> list[Path]:
    """Complete the commits in ``folder`` that a killed writer left half-done; wait for ones still running.

    Args:
        folder: the set's folder.
        wait_s: how long to wait (s) for a live writer to finish its renames.

    Returns:
        The journals of live writers still there after ``wait_s`` (normally none).

    Raises:
        OSError: a target cannot be written (a read-only folder): the new set stays under its temporaries.
    """
    folder = Path(folder)
    deadline = time.monotonic() + wait_s
    while True:
        pending = []
        for journal in sorted(folder.glob(f"{JOURNAL_PREFIX}*.json")):
            try:
                record = json.loads(journal.read_text(encoding="utf-8"))
                if not _abandoned(record, journal):
                    pending.append(journal)
                    continue
            except FileNotFoundError:
                continue  # finished meanwhile
            except ValueError:
                record = {}  # unreadable: its rename never happened (written whole or not at all); nothing to do
            _roll_forward(folder, record)
            end_commit(journal)
        if not pending or time.monotonic() >= deadline:
            _remove_dead_parts(folder)
            return pending
        time.sleep(0.01)
