"""Invalidate numba's on-disk cache of a group of modules whose compiled functions call each other.

numba keys a cached function on its own source file's time stamp and size only, so a compiled function that
calls (or inlines) a function from another file keeps stale machine code after that other file is edited.
A group of such modules shares one fingerprint (SHA-256 of their sources and of the files they call into)
stored next to numba's cache files (their ``__pycache__``, or under ``$NUMBA_CACHE_DIR`` when set); when it
differs, the group's ``*.nbi``/``*.nbc`` files are removed, before anything is compiled or loaded. Groups are
layered: a group that calls another lists it in ``depends`` and is refreshed by its edits, while an edit inside the
upper group leaves the lower one cached. A group's files may lie in several folders (names relative to one
directory); each file's cache is found in its own folder. A reinstalled package gets new time stamps and needs none
of this; an edited checkout does.

:func:`cold_modules` tells which kernel modules will compile on their first call (nothing valid cached), so an
app can say so before a long silent compile (``flexlearn-warmup`` compiles them all ahead).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import ModuleType
from typing import Iterable

__all__ = ["refresh_numba_cache", "cold_modules"]


def refresh_numba_cache(
    directory: str | Path, modules: tuple[str, ...], group: str, depends: tuple[str, ...] = ()
) -> bool:
    """Remove the cache files of ``modules`` when their sources, or those of ``depends`` (files whose kernels
    they call, cached by their own group), changed since the stamp ``<group>.numba-stamp`` was written.

    Args:
        directory: the folder the names are relative to; the stamp lies in its numba cache directory
            (`numba_cache_dir`).
        modules: ``.py`` files without the suffix, relative to ``directory`` (``"elements"``,
            ``"../fused"``); each one's cache files are looked for in its own folder's cache directory.
        group: the stamp's name.
        depends: files named like ``modules`` whose sources enter the fingerprint but whose cache is kept (they
            never call into the group).

    Returns:
        True when files were removed. Never raises: a read-only or concurrently cleaned directory leaves numba's
        own behaviour.
    """
    try:
        directory = Path(directory)
        digest = hashlib.sha256()
        for name in tuple(depends) + tuple(modules):
            digest.update((directory / f"{name}.py").read_bytes())
        fingerprint = digest.hexdigest()
        cache = numba_cache_dir(directory)
        stamp = cache / f"{group}.numba-stamp"
        if stamp.is_file() and stamp.read_text().strip() == fingerprint:
            return False
        removed = False
        for name in modules:
            source = (directory / f"{name}.py").resolve()
            module_cache = numba_cache_dir(source.parent)
            if not module_cache.is_dir():
                continue
            for pattern in (f"{source.stem}.*.nbi", f"{source.stem}.*.nbc"):
                for f in module_cache.glob(pattern):
                    f.unlink(missing_ok=True)
                    removed = True
        cache.mkdir(parents=True, exist_ok=True)
        stamp.write_text(fingerprint + "\n")
        return removed
    except OSError:
        return False


def numba_cache_dir(directory: str | Path) -> Path:
    """Where numba caches the kernels of the ``.py`` files in ``directory``: ``$NUMBA_CACHE_DIR/<dir>_<sha1>`` when
    that variable is set (numba's `UserProvidedCacheLocator`: the directory's name and the SHA-1 of its absolute
    path), else ``directory/__pycache__``.

    Args:
        directory: the folder of the kernel source files.

    Returns:
        The cache folder (it may not exist yet).
    """
    directory = Path(directory)
    user = os.environ.get("NUMBA_CACHE_DIR")
    if not user:
        return directory / "__pycache__"
    absolute = os.path.dirname(os.path.abspath(directory / "x.py"))
    return Path(user) / f"{os.path.basename(absolute)}_{hashlib.sha1(absolute.encode()).hexdigest()}"


def cold_modules(modules: Iterable[ModuleType]) -> list[str]:
    """Names of the ``modules`` whose numba functions (``cache=True``, defined there) have nothing valid in
    numba's on-disk cache, i.e. whose first call in this process compiles. A module with at least one cached
    function counts as warm (functions a run never calls stay uncached). Never raises: a numba without the
    cache internals read here gives an empty list.

    Args:
        modules: the kernel modules to check (imported).

    Returns:
        The names of the cold modules, in the order given.
    """
    cold = []
    for module in modules:
        found, warm = False, False
        for obj in vars(module).values():
            cache = getattr(obj, "_cache", None)
            py_func = getattr(obj, "py_func", None)
            if cache is None or py_func is None or getattr(py_func, "__module__", None) != module.__name__:
                continue
            if getattr(obj, "targetoptions", {}).get("inline") == "always":  # compiled into callers, never cached
                continue
            cache_file = getattr(cache, "_cache_file", None)
            if cache_file is None:  # caching disabled for this function
                continue
            found = True
            try:
                if cache_file._load_index():
                    warm = True
                    break
            except Exception:
                return []
        if found and not warm:
            cold.append(module.__name__)
    return cold
