"""Atomic, guarded file and directory writes: write under a temporary name in the same folder, then rename.

Every writer of flexlearn goes through this module, so the guarantees hold everywhere:

- A crash (or an exception while writing) never leaves a half-written file or directory in place of an
  existing one; the previous version stays as it was.
- An output is checked *before anything is touched* (`guard_output_dir`, `guard_output_file`): it must not
  be a symlink, an existing file where a directory is expected (or the reverse), the file system root, the
  home directory, the working directory, a repository root, or a path that equals or contains one of the
  command's inputs, or an existing file inside an input directory (a recording's own files are never replaced;
  new files and flexlearn's own directories there are allowed). A directory is only ever replaced as a whole when
  it carries the marker file ``.flexlearn-output`` that flexlearn writes into every directory it creates, or is
  empty; any other existing directory is refused. The refusal is an `OutputPathError`: one line, exit status 2.
- Temporary names carry the writer's process id; a later writer removes the leftovers of writers that
  died (``kill -9``), so they do not pile up.
- Durable: the new content is flushed to disk (``fsync``) before the rename, and the folder after it, so a
  power cut or ``kill -9`` at any instant leaves either the old complete file or the new complete file.
- JSON is strict (`json_text`, the one JSON writer): NaN and ±inf are written as ``null`` with the reason beside
  them (``"<key>_null_reason": "inf"``), so strict readers (``JSON.parse``, jq) accept every file.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import math
import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from flexlearn.errors import FlexlearnError

OUTPUT_MARKER = ".flexlearn-output"
_Paths = Iterable[str | os.PathLike]


class OutputPathError(FlexlearnError):
    """An output path that flexlearn refuses to write, named with the reason; nothing was touched."""


def _is_repository_root(path: Path) -> bool:
    return (path / ".git").exists() or (path / "pyproject.toml").is_file() and (path / "flexlearn").is_dir()


def _protected_reason(resolved: Path) -> str | None:
    """Why ``resolved`` (an absolute, symlink-free path) must never be an output, or None."""
    if resolved == Path(resolved.anchor):
        return "it is the file system root"
    if resolved == Path.home().resolve():
        return "it is the home directory"
    if resolved == Path.cwd().resolve():
        return "it is the working directory"
    if resolved.is_dir() and _is_repository_root(resolved):
        return "it is a repository root"
    return None


def _check_against_inputs(path: Path, resolved: Path, inputs: _Paths) -> None:
    for item in inputs:
        inp = Path(item).resolve()
        if resolved == inp:
            raise OutputPathError(f"output '{path}': it is the input '{item}'; choose another output")
        if resolved in inp.parents:
            raise OutputPathError(
                f"output '{path}': it contains the input '{item}', which replacing it "
                f"would delete; choose another output"
            )
        if inp in resolved.parents and inp.is_dir() and resolved.is_file():
            raise OutputPathError(
                f"output '{path}': an existing file inside the input directory '{item}' (one of "
                f"the input's own files, for all flexlearn knows); choose an output outside it"
            )


def _check_common(path: Path, inputs: _Paths) -> Path:
    """Checks shared by files and directories; return the resolved path."""
    if path.is_symlink():
        raise OutputPathError(f"output '{path}': it is a symbolic link; give the real path")
    resolved = path.resolve()
    reason = _protected_reason(resolved)
    if reason is not None:
        raise OutputPathError(f"output '{path}': {reason}; give a new directory below it")
    _check_against_inputs(path, resolved, inputs)
    for parent in resolved.parents:  # an existing file in the middle of the path: mkdir would fail
        if parent.exists():
            if not parent.is_dir():
                raise OutputPathError(f"output '{path}': '{parent}' is a file, not a directory")
            break
    return resolved


def guard_output_dir(path: str | os.PathLike, inputs: _Paths = ()) -> Path:
    """Refuse (`OutputPathError`) a directory output that a writer must not create or replace.

    An existing ``path`` must be a directory that is empty or carries `OUTPUT_MARKER`.

    Args:
        path: the output directory.
        inputs: the command's inputs, which ``path`` must not be or contain.

    Returns:
        ``path`` as a `Path`.

    Raises:
        OutputPathError: ``path`` is refused (with the reason).
    """
    path = Path(path)
    _check_common(path, inputs)
    if path.exists():
        if not path.is_dir():
            raise OutputPathError(f"output '{path}': it is an existing file, not a directory")
        if not (path / OUTPUT_MARKER).exists() and any(path.iterdir()):
            raise OutputPathError(
                f"output '{path}': an existing directory that flexlearn did not write (no "
                f"'{OUTPUT_MARKER}' in it); choose a new or empty directory, or remove it yourself"
            )
    return path


def guard_output_file(path: str | os.PathLike, inputs: _Paths = ()) -> Path:
    """Refuse (`OutputPathError`) a file output that is a directory, a symlink, protected or an input.

    Args:
        path: the output file.
        inputs: the command's inputs, which ``path`` must not be or contain.

    Returns:
        ``path`` as a `Path`.

    Raises:
        OutputPathError: ``path`` is refused (with the reason).
    """
    path = Path(path)
    _check_common(path, inputs)
    if path.is_dir():
        raise OutputPathError(f"output '{path}': it is a directory; give a file name")
    return path


def mark_output_dir(path: str | os.PathLike) -> None:
    """Write the marker that lets a later run replace or write into ``path``.

    Args:
        path: an existing directory that flexlearn writes.
    """
    (Path(path) / OUTPUT_MARKER).write_text("written by flexlearn; the directory may be replaced by a later run\n")


def prepare_output_dir(path: str | os.PathLike, inputs: _Paths = ()) -> Path:
    """Guard, create (if needed) and mark a directory that a job writes files into (not replaced whole).

    Args:
        path: the output directory.
        inputs: the command's inputs, which ``path`` must not be or contain.

    Returns:
        ``path`` as a `Path`, existing and marked.

    Raises:
        OutputPathError: ``path`` is refused or cannot be created.
    """
    path = guard_output_dir(path, inputs)
    try:
        path.mkdir(parents=True, exist_ok=True)
        mark_output_dir(path)
    except OSError as exc:
        raise OutputPathError(f"output '{path}': cannot be written ({exc.strerror or exc})") from exc
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(target: Path) -> None:
    """Clean up after writers of ``target`` that died (``kill -9``): their ``.<name>.tmp-<pid>-*`` leftovers.

    A writer killed between the two renames of a directory swap leaves the previous version under an
    ``-old-`` name and no ``target``: that version is put back instead of being removed.

    Args:
        target: the output file or directory whose leftovers (in its folder) are cleaned up.
    """
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.tmp-(\d+)-")
    with contextlib.suppress(OSError):
        for entry in sorted(target.parent.iterdir()):
            m = pattern.match(entry.name)
            if not m or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
                continue
            with contextlib.suppress(OSError):
                if "-old-" in entry.name and not target.exists():
                    os.replace(entry, target)
                elif entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()


def _usual_mode(is_dir: bool) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if is_dir else 0o666) & ~umask


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"output '{path}': its folder cannot be created ({exc.strerror or exc})") from exc


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, inputs: _Paths = ()) -> Iterator[Path]:
    """Yield a temporary file path beside ``path``; on success rename it onto ``path``.

    ``path`` is checked with `guard_output_file` first. On an exception the temporary file is removed and
    ``path`` is left untouched.

    Args:
        path: the output file (its folder is created).
        inputs: the command's inputs, which ``path`` must not be or contain.

    Yields:
        The temporary file's path (same folder and suffix as ``path``), for the body to write.

    Raises:
        OutputPathError: ``path`` is refused, or the temporary file or the rename fails.
    """
    path = guard_output_file(path, inputs)
    _make_parent(path)
    remove_stale_temporaries(path)
    try:  # the temporary name keeps the suffix, so writers that infer a format from it still work
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-{os.getpid()}-", suffix=path.suffix, dir=path.parent)
    except OSError as exc:
        raise OutputPathError(f"output '{path}': cannot be written ({exc.strerror or exc})") from exc
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, _usual_mode(False))  # mkstemp creates 0600
    try:
        yield tmp_path
        fsync_path(tmp_path)
        with signals_deferred():
            _replace(tmp_path, path)
        fsync_path(path.parent)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while the body runs (a commit's renames), then deliver them.

    A signal mask is not enough in a process with other threads (torch starts some): the kernel hands a
    process-directed signal to any thread that does not block it, and Python then runs the handler in the main
    thread at once, inside the body. So, in the main thread, handlers that only record the signal replace the
    current ones for the body; afterwards the previous handlers are put back and each recorded signal is raised
    again. Elsewhere (not the main thread) nothing is held. SIGKILL cannot be held: `remove_stale_temporaries`
    repairs a killed file or directory swap, and an export set's manifests make its half-way states unloadable.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    kinds = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in kinds}
    try:
        yield
    finally:
        for kind, handler in previous.items():
            signal.signal(kind, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


def _replace(src: Path, dst: Path) -> None:
    try:
        os.replace(src, dst)
    except OSError as exc:
        raise OutputPathError(f"output '{dst}': cannot be replaced ({exc.strerror or exc})") from exc


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, inputs: _Paths = ()) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; on success it replaces ``path`` as a whole.

    ``path`` is checked with `guard_output_dir` first (an existing directory is replaced only if flexlearn
    wrote it, or it is empty). The new directory carries `OUTPUT_MARKER`. An existing ``path`` is swapped
    out only after the new directory is complete; if the swap fails half-way the old one is put back.

    Args:
        path: the output directory (its folder is created).
        inputs: the command's inputs, which ``path`` must not be or contain.

    Yields:
        The temporary directory (already marked), for the body to fill.

    Raises:
        OutputPathError: ``path`` is refused, or the temporary directory cannot be created.
    """
    path = guard_output_dir(path, inputs)
    _make_parent(path)
    remove_stale_temporaries(path)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-{os.getpid()}-", dir=path.parent))
    except OSError as exc:
        raise OutputPathError(f"output '{path}': cannot be written ({exc.strerror or exc})") from exc
    try:
        os.chmod(tmp, _usual_mode(True))  # mkdtemp creates 0700
        mark_output_dir(tmp)
        yield tmp
        fsync_tree(tmp)
        with signals_deferred():
            _swap_in(tmp, path)
        fsync_path(path.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


_RENAME_EXCHANGE = 2  # renameat2 flag (Linux >= 3.15): swap two paths in one step
_AT_FDCWD = -100


def exchange_paths(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``).

    Args:
        a: an existing file or directory.
        b: another one, on the same file system.

    Returns:
        True when swapped; False where the call does not exist or the file system does not support it (nothing
        was changed: the caller falls back to two renames).

    Raises:
        OSError: the swap was refused for another reason (permissions, a missing path).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(b))


def _swap_in(tmp: Path, path: Path) -> None:
    """Move the finished ``tmp`` onto ``path``: an existing ``path`` is exchanged with ``tmp`` in one atomic step
    where the system can (a kill at any instant leaves the old or the new directory at ``path``), else moved aside
    first and put back on failure; the old version is removed last."""
    if not path.exists():
        _replace(tmp, path)
        return
    try:
        swapped = exchange_paths(tmp, path)
    except OSError as exc:
        raise OutputPathError(f"output '{path}': cannot be replaced ({exc.strerror or exc})") from exc
    if swapped:  # tmp now holds the previous version
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-{os.getpid()}-old-", dir=path.parent))
    old.rmdir()
    _replace(path, old)
    try:
        _replace(tmp, path)
    except OutputPathError:
        os.replace(old, path)  # put the previous version back
        raise
    shutil.rmtree(old, ignore_errors=True)


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a file's (or a folder's: its entries, i.e. a rename in it) content to disk.

    Args:
        path: an existing file or directory. A file system that cannot sync a directory is skipped silently.
    """
    flags = os.O_RDONLY | (os.O_DIRECTORY if Path(path).is_dir() and hasattr(os, "O_DIRECTORY") else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # e.g. a directory on a file system without directory fsync
        pass
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """`fsync_path` every file and folder under ``root`` (files first, ``root`` last).

    Args:
        root: the directory to flush.
    """
    for folder, _, files in os.walk(os.fspath(root), topdown=False):
        for name in files:
            fsync_path(Path(folder) / name)
        fsync_path(folder)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, inputs: _Paths = ()) -> None:
    """Write ``data`` to ``path`` atomically and durably (`atomic_path`: temporary beside ``path``, fsync, rename).

    The temporary lies in ``path``'s own folder, whatever ``TMPDIR`` is, so the switch is one rename on one
    file system: never a copy that a kill could truncate.

    Args:
        path: the file to write (its folder is created).
        data: the complete new content.
        inputs: the command's inputs, which ``path`` must not be or contain (`guard_output_file`).

    Raises:
        OutputPathError: ``path`` is refused or cannot be written (full disk, read-only folder).
    """
    with atomic_path(path, inputs) as tmp:
        try:
            with open(tmp, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise OutputPathError(f"output '{path}': cannot be written ({exc.strerror or exc})") from exc


NULL_REASON_SUFFIX = "_null_reason"
"""Key suffix of the reason written beside a value that JSON cannot hold (NaN, ±inf written as ``null``)."""


def _number_reason(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _plain(obj: Any) -> Any:
    """NumPy and torch scalars and arrays as Python numbers and lists; paths as strings; others unchanged."""
    if isinstance(obj, (str, bool, int, float, type(None), dict, list, tuple)):
        return obj
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        return tolist()
    try:
        return float(obj)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{type(obj).__name__} is not JSON serialisable") from exc


def strict_json(obj: Any) -> Any:
    """``obj`` with every NaN/±inf replaced by ``None`` and the reason written beside it.

    In a mapping, a non-finite ``value`` of ``key`` becomes ``null`` and ``key + "_null_reason"`` holds
    ``"nan"``, ``"inf"`` or ``"-inf"``; a list holding non-finite numbers gets ``null`` in their places and the
    reason beside the list's key, ``"[i]: nan, [j]: inf"``. NumPy and torch values become Python numbers.

    Args:
        obj: any nesting of mappings, lists, tuples, numbers, strings, arrays and tensors.

    Returns:
        A structure `json.dumps(..., allow_nan=False)` accepts.
    """
    return _strict(obj)[0]


def _strict(obj: Any) -> tuple[Any, str]:
    """(strict copy of ``obj``, the reason its non-finite numbers were nulled; '' when none were)."""
    obj = _plain(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None, _number_reason(obj)
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            clean, reason = _strict(value)
            out[str(key)] = clean
            if reason and f"{key}{NULL_REASON_SUFFIX}" not in obj:
                out[f"{key}{NULL_REASON_SUFFIX}"] = reason
        return out, ""
    if isinstance(obj, (list, tuple)):
        items = [_strict(v) for v in obj]
        reasons = [f"[{i}]: {r}" for i, (_, r) in enumerate(items) if r]
        shown = ", ".join(reasons[:8]) + (f", ... ({len(reasons) - 8} more)" if len(reasons) > 8 else "")
        return [v for v, _ in items], shown
    return obj, ""


def json_text(obj: Any, indent: Optional[int] = 2) -> str:
    """The JSON text flexlearn writes: strict (`strict_json`: no NaN or Infinity), keys sorted, newline-ended.

    Args:
        obj: what to write (see `strict_json`).
        indent: spaces per level; None for one line.

    Returns:
        Text that any strict JSON parser accepts.
    """
    return json.dumps(strict_json(obj), indent=indent, sort_keys=True, allow_nan=False) + "\n"


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented strict JSON (`json_text`) to ``path`` atomically and durably.

    Args:
        path: the JSON file (its folder is created).
        obj: what to write (see `strict_json`).

    Raises:
        OutputPathError: ``path`` is refused or cannot be written.
    """
    with atomic_path(path) as tmp:
        tmp.write_text(json_text(obj))
