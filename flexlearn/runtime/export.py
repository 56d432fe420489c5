"""Save and load deployable models: TorchScript (scripted, frozen) and `torch.export` (.pt2) archives.

Both carry a ``metadata.json`` extra file (input units, schema version, training metrics, config,
package version). The files load with torch alone (`torch.jit.load`, `torch.export.load`); the loaders here
add the checks below.

A model file is code (loading or calling it runs what its author put in it). Every export therefore writes
the sidecar manifest ``<file>.manifest.json`` (`flexlearn.runtime.pikit.manifest`: SHA-256, size, kind, versions)
and every loader verifies it first, refusing a missing or mismatching manifest unless the caller passes
``trust_unverified=True``. ``.pt2`` archives are also inspected before `torch.export.load` sees them: entries
it would unpickle (``use_pickle`` weights or constants, opaque/custom objects, sample inputs that need more
than the weights-only unpickler), compiled libraries and graph strings it would evaluate (operator targets
outside ``torch.ops``, symbolic expressions beyond plain sympy arithmetic) are refused with or without the
opt-out. Exports are byte-reproducible (saved to memory, so no temporary name ends up in the archive) and a
set of files is written all-or-nothing, each manifest naming the whole set (`write_artifacts`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import torch
import torch.jit._recursive as recursive

import flexlearn
from flexlearn.atomic import (
    OutputPathError,
    fsync_path,
    guard_output_file,
    remove_stale_temporaries,
    signals_deferred,
)
from flexlearn.errors import CheckpointError
from flexlearn.runtime.pikit.manifest import manifest_path, verify_manifest
from flexlearn.runtime.pikit.set_commit import end_commit, finish_commits, write_journal
from flexlearn.runtime.program_archive import check_program_archive

METADATA_FILE = "metadata.json"


class ManifestText(NamedTuple):
    """The manifest of an artifact: its bytes' SHA-256 (hex) and the JSON text of ``<file>.manifest.json``."""

    sha256: str
    text: str


@dataclasses.dataclass(frozen=True)
class Artifact:
    """One file of an export: its final ``path``, its bytes and its manifest ``kind``."""

    path: Path
    data: bytes
    kind: str


def versions() -> dict[str, str]:
    """``flexlearn_version`` and ``torch_version`` (recorded in metadata and manifests)."""
    return {"flexlearn_version": str(getattr(flexlearn, "__version__", "unknown")), "torch_version": torch.__version__}


def manifest_text(art: "Artifact", members: dict[str, str]) -> ManifestText:
    """The manifest of ``art`` (`flexlearn.runtime.pikit.manifest`): file name, SHA-256, size, kind, versions and,
    for a set of several files, ``set`` (every file of the set → SHA-256).

    Args:
        art: the artifact (its final path and bytes).
        members: the export set (empty: a file on its own).

    Returns:
        Its hash and the manifest text.
    """
    digest = hashlib.sha256(art.data).hexdigest()
    record: dict[str, Any] = {"file": Path(art.path).name, "sha256": digest, "bytes": len(art.data), "kind": art.kind}
    record.update(versions())
    if len(members) > 1:
        record["set"] = dict(members)
    return ManifestText(digest, json.dumps(record, indent=2, sort_keys=True) + "\n")


def _metadata_json(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, sort_keys=True, default=float)


# ------------------------------------------------------------------------------------------------- writing
def check_output_path(path: str | Path, inputs: Iterable[str | Path] = ()) -> Path:
    """`flexlearn.atomic.guard_output_file`: refuse (`OutputPathError`, nothing touched) an output that is a
    directory, a symlink, below an existing file, protected, or one of ``inputs``.

    Args:
        path: the output file.
        inputs: the run's input files, never overwritten.

    Returns:
        ``path`` as a `Path`.

    Raises:
        OutputPathError: the output may not be written.
    """
    return guard_output_file(path, inputs)


def _stage(final: Path, data: bytes, tag: str = "") -> Path:
    """Write ``data`` to a fresh temporary file beside ``final`` (usual permissions, fsynced); the name
    ``.<name>.tmp-<pid>-`` lets `flexlearn.atomic.remove_stale_temporaries` clean up after a killed writer."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{final.name}.tmp-{os.getpid()}-{tag}", dir=final.parent)
    except OSError as exc:
        raise OutputPathError(f"output '{final}': cannot be written ({exc.strerror or exc})") from exc
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _backup(final: Path) -> Path:
    """A temporary ``-old-`` copy of an existing ``final`` (a hard link where the file system allows)."""
    bak = _stage(final, b"", "old-")
    try:
        bak.unlink()
        os.link(final, bak)
    except OSError:
        shutil.copy2(final, bak)
    return bak


def _commit(staged: Sequence[tuple[Path, Path]]) -> None:
    """Rename each (temporary, final) pair in; on any failure put every replaced file back."""
    done: list[tuple[Path | None, Path]] = []  # (backup of the previous file or None, final) renamed in
    backups: list[Path] = []
    try:
        for tmp, final in staged:
            bak = _backup(final) if final.exists() else None
            if bak is not None:
                backups.append(bak)
            try:
                os.replace(tmp, final)
            except OSError as exc:
                raise OutputPathError(
                    f"output '{final}': cannot be replaced ({exc.strerror or exc}); the previous files are kept"
                ) from exc
            done.append((bak, final))
    except BaseException:
        for bak, final in reversed(done):
            if bak is None:
                final.unlink(missing_ok=True)
            else:
                os.replace(bak, final)
        raise
    finally:
        for bak in backups:
            bak.unlink(missing_ok=True)


def _check_targets(artifacts: Sequence[Artifact], inputs: list) -> None:
    """Refuse (nothing touched) an output path that is guarded, an input, or a file flexlearn did not export."""
    for art in artifacts:
        check_output_path(art.path, inputs)
        check_output_path(manifest_path(art.path), inputs)
        if Path(art.path).is_file() and not manifest_path(art.path).is_file():  # not an export of ours
            raise OutputPathError(
                f"output '{art.path}': an existing file that flexlearn did not export (no "
                f"'{manifest_path(art.path).name}' beside it); remove it yourself or choose "
                f"another folder"
            )


def _make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"output '{path}': its folder cannot be created ({exc.strerror or exc})") from exc


def _finish_earlier_commits(folders: Iterable[Path]) -> None:
    """Complete the commits that killed writers left in ``folders`` (`pikit.set_commit.finish_commits`); refuse
    to write beside a commit that is still running."""
    for folder in folders:
        if not folder.is_dir():
            continue
        try:
            pending = finish_commits(folder)
        except OSError as exc:
            raise OutputPathError(
                f"output folder '{folder}': an interrupted export cannot be completed ({exc.strerror or exc})"
            ) from exc
        if pending:
            raise OutputPathError(
                f"output folder '{folder}': another export is committing into it ('{pending[0].name}' names a "
                f"running process); wait for it, or remove that file if no export runs"
            )


def write_artifacts(artifacts: Sequence[Artifact], inputs: Iterable[str | Path] = ()) -> list[Path]:
    """Write every artifact and its manifest ``<file>.manifest.json`` as one export set: all land or none.

    Output paths are checked first (`check_output_path`, against ``inputs`` too; an existing file is replaced only
    when a manifest beside it shows an earlier export, so a file of the user's own of that name is kept). Leftovers
    of killed writers are removed (`remove_stale_temporaries`). All files are written to temporary names in their
    folders and fsynced; then, with SIGINT and SIGTERM held back, one journal naming every rename is written (the
    commit, `flexlearn.runtime.pikit.set_commit`), every file is renamed in and only after them every manifest,
    each naming the whole set with its hashes (``set``, `flexlearn.runtime.pikit.manifest`), and the journal is
    removed. A SIGKILL between two renames leaves the journal: the next loader or export completes the renames,
    so the folder holds the old set or the new one at every instant. On an error the temporaries are removed and
    replaced files are restored.

    Args:
        artifacts: the files of the export set.
        inputs: the run's input files, never overwritten.

    Returns:
        The paths written, in the order of ``artifacts``.

    Raises:
        OutputPathError: an output may not be written, or a rename failed (the previous files are kept).
    """
    inputs = list(inputs)
    _finish_earlier_commits({Path(a.path).parent for a in artifacts})
    _check_targets(artifacts, inputs)
    staged: list[tuple[Path, Path]] = []
    try:
        for art in artifacts:
            path = Path(art.path)
            _make_folder(path)
            for final in (path, manifest_path(path)):
                remove_stale_temporaries(final)
            staged.append((_stage(path, art.data), path))
        members = {Path(a.path).name: manifest_text(a, {}).sha256 for a in artifacts}
        for art in artifacts:
            side = manifest_text(art, members).text.encode()
            staged.append((_stage(manifest_path(art.path), side), manifest_path(art.path)))
        with signals_deferred():  # the journal is the commit; then files first, manifests last
            journal = write_journal(Path(artifacts[0].path).parent, staged)
            try:
                _commit(staged)
                for folder in {final.parent for _, final in staged}:
                    fsync_path(folder)
            finally:
                end_commit(journal)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    return [Path(a.path) for a in artifacts]


class _SortedSet(set):
    """A set that iterates in a fixed order (sorted by type name and repr)."""

    def __iter__(self) -> Iterator[Any]:
        return iter(sorted(set.__iter__(self), key=lambda v: (type(v).__name__, repr(v))))


@contextlib.contextmanager
def _hash_seed_independent() -> Iterator[None]:
    """`torch.jit.script` collects a module's constants (``__constants__``, ``Final``) in a Python set, so the
    order of the generated code (e.g. ``in_features``/``out_features`` of ``nn.Linear``) follows the per-process
    string hash seed; while scripting, its sets iterate in sorted order instead."""
    saved = vars(recursive).get("set")
    recursive.set = _SortedSet  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if saved is None:
            delattr(recursive, "set")
        else:
            recursive.set = saved  # type: ignore[attr-defined]


def script(module: torch.nn.Module) -> torch.jit.ScriptModule:
    """`torch.jit.script` of ``module`` (eval mode) whose code does not depend on the process's hash seed.

    Args:
        module: the module to script (switched to eval mode).

    Returns:
        The scripted module.
    """
    with _hash_seed_independent():
        return torch.jit.script(module.eval())


def script_artifact(
    scripted: torch.jit.ScriptModule, path: str | Path, metadata: dict[str, Any], kind: str
) -> Artifact:
    """The bytes of a TorchScript archive of ``scripted`` with ``metadata.json`` (saved in memory).

    Args:
        scripted: the scripted (or frozen) module.
        path: the file the artifact will be written to.
        metadata: the contents of ``metadata.json``.
        kind: the manifest kind.

    Returns:
        The artifact.
    """
    buf = io.BytesIO()
    torch.jit.save(scripted, buf, _extra_files={METADATA_FILE: _metadata_json(metadata)})
    return Artifact(Path(path), buf.getvalue(), kind)


def torchscript_artifact(module: torch.nn.Module, path: str | Path, metadata: dict[str, Any]) -> Artifact:
    """``module`` (eval mode) scripted and frozen, as an `Artifact` of kind "torchscript".

    Args:
        module: the module to export.
        path: the file the artifact will be written to.
        metadata: the contents of ``metadata.json``.

    Returns:
        The artifact.
    """
    frozen = torch.jit.freeze(script(module))
    return script_artifact(frozen, path, metadata, "torchscript")


def program_artifact(
    module: torch.nn.Module, example: torch.Tensor, path: str | Path, metadata: dict[str, Any]
) -> Artifact:
    """A `torch.export` program of ``module`` with a dynamic leading batch dimension (kind "program").

    ``example`` is an input of shape (B, ...) with B ≥ 2 (a batch of 1 would be specialised).

    Args:
        module: the one-input module to export (switched to eval mode).
        example: an example input (B, ...), B ≥ 2.
        path: the file the artifact will be written to.
        metadata: the contents of ``metadata.json``.

    Returns:
        The artifact.
    """
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(module.eval(), (example,), dynamic_shapes=({0: batch},))
    buf = io.BytesIO()
    torch.export.save(program, buf, extra_files={METADATA_FILE: _metadata_json(metadata)})
    return Artifact(Path(path), buf.getvalue(), "program")


def export_torchscript(module: torch.nn.Module, path: str | Path, metadata: dict[str, Any]) -> Path:
    """Script, freeze and save ``module`` (eval mode) to ``path`` with ``metadata`` and its manifest.

    Args:
        module: the module to export.
        path: the output file.
        metadata: the contents of ``metadata.json``.

    Returns:
        The path written.
    """
    return write_artifacts([torchscript_artifact(module, path, metadata)])[0]


def export_program(module: torch.nn.Module, example: torch.Tensor, path: str | Path, metadata: dict[str, Any]) -> Path:
    """Save a `torch.export` program (.pt2) of ``module`` (see `program_artifact`) with its manifest.

    Args:
        module: the one-input module to export.
        example: an example input (B, ...), B ≥ 2.
        path: the output file.
        metadata: the contents of ``metadata.json``.

    Returns:
        The path written.
    """
    return write_artifacts([program_artifact(module, example, path, metadata)])[0]


# ------------------------------------------------------------------------------------------------- loading
def read_verified(path: str | Path, *, trust_unverified: bool = False) -> bytes:
    """The bytes of model file ``path`` after `verify_manifest` (the bytes read are the bytes checked).

    Args:
        path: the model file.
        trust_unverified: skip the manifest check.

    Returns:
        The file's bytes.

    Raises:
        CheckpointError: the file is missing, or its manifest is missing or does not match
            (`UntrustedArtifactError`).
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"model file '{path}': not found")
    data = path.read_bytes()
    verify_manifest(path, trust_unverified=trust_unverified, data=data)
    return data


def load_torchscript(
    path: str | Path, *, trust_unverified: bool = False
) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """Load a TorchScript archive and its metadata (CPU) after verifying its manifest.

    ``trust_unverified=True`` skips the manifest check (only for files you trust: a model file is code).

    Args:
        path: the TorchScript file.
        trust_unverified: skip the manifest check.

    Returns:
        ``(module, metadata)``.
    """
    return load_torchscript_bytes(read_verified(path, trust_unverified=trust_unverified), path)


def load_torchscript_bytes(data: bytes, path: str | Path) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """`torch.jit.load` of already verified bytes (CPU) and their metadata; ``path`` names them in errors.

    Args:
        data: the archive's bytes.
        path: the file they came from.

    Returns:
        ``(module, metadata)``; metadata ``{}`` when the archive has none.

    Raises:
        CheckpointError: the bytes are not a loadable TorchScript archive.
    """
    extra = {METADATA_FILE: ""}
    try:
        module = torch.jit.load(io.BytesIO(data), map_location="cpu", _extra_files=extra)
        meta = json.loads(extra[METADATA_FILE] or "{}")
    except (RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"model file '{path}': not a loadable TorchScript archive ({first})") from exc
    return module, meta


def load_program(path: str | Path, *, trust_unverified: bool = False) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Load a .pt2 program as a callable module and its metadata, after verifying its manifest and
    inspecting the archive (`check_program_archive`, done even with ``trust_unverified=True``).

    Args:
        path: the .pt2 file.
        trust_unverified: skip the manifest check (not the archive inspection).

    Returns:
        ``(module, metadata)``: the program as a module taking any leading input shape, and its metadata.
    """
    data = read_verified(path, trust_unverified=trust_unverified)
    check_program_archive(data, path)
    extra = {METADATA_FILE: ""}
    program = torch.export.load(io.BytesIO(data), extra_files=extra)
    return _AnyLeadingShape(program), json.loads(extra[METADATA_FILE] or "{}")


class _AnyLeadingShape(torch.nn.Module):
    """A one-input program of `program_artifact` (input (B, ...) with B dynamic) taking any leading shape, as the
    metadata's ``(..., 3)`` promises: the leading dimensions are flattened into B and restored on the output
    ((3,) → (1, 3) → (3,); (A, B, 3) → (A·B, 3) → (A, B, ...))."""

    def __init__(self, program: torch.export.ExportedProgram) -> None:
        super().__init__()
        self.program = program.module()
        user = set(program.graph_signature.user_inputs)
        shapes = [n.meta["val"].shape for n in program.graph.nodes if n.op == "placeholder" and n.name in user]
        self.rank = len(shapes[0]) if len(shapes) == 1 else None

    def forward(self, *args: Any) -> Any:
        x = args[0] if len(args) == 1 else None
        if self.rank is None or not isinstance(x, torch.Tensor) or x.dim() == self.rank or x.dim() < self.rank - 1:
            return self.program(*args)
        lead = x.shape[: x.dim() - self.rank + 1]
        y = self.program(x.reshape(-1, *x.shape[x.dim() - self.rank + 1 :]))
        return y.reshape(*lead, *y.shape[1:]) if isinstance(y, torch.Tensor) else y
