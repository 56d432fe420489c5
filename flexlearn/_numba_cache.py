"""Invalidate numba's on-disk cache of a group of modules whose compiled functions call each other.

numba keys a cached function on its own source file's time stamp and size only, so a compiled function that
calls (or inlines) a function from another file keeps stale machine code after that other file is edited.
A group of such modules shares one fingerprint (SHA-256 of their sources) stored next to numba's cache files
in their ``__pycache__``; when it differs, the group's ``*.nbi``/``*.nbc`` files are removed, before anything is
compiled or loaded. A reinstalled package gets new time stamps and needs none of this; an edited checkout does.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["refresh_numba_cache"]


def refresh_numba_cache(directory: str | Path, modules: tuple[str, ...], group: str) -> bool:
    """Remove the cache files of ``modules`` (names of ``.py`` files in ``directory``) when their sources changed
    since the stamp ``__pycache__/<group>.numba-stamp`` was written. Returns True when files were removed.
    Never raises: a read-only or concurrently cleaned directory leaves numba's own behaviour."""
    try:
        directory = Path(directory)
        digest = hashlib.sha256()
        for name in modules:
            digest.update((directory / f"{name}.py").read_bytes())
        fingerprint = digest.hexdigest()
        cache = directory / "__pycache__"
        stamp = cache / f"{group}.numba-stamp"
        if stamp.is_file() and stamp.read_text().strip() == fingerprint:
            return False
        removed = False
        if cache.is_dir():
            for name in modules:
                for pattern in (f"{name}.*.nbi", f"{name}.*.nbc"):
                    for f in cache.glob(pattern):
                        f.unlink(missing_ok=True)
                        removed = True
        cache.mkdir(exist_ok=True)
        stamp.write_text(fingerprint + "\n")
        return removed
    except OSError:
        return False
