"""Integrity manifests of exported model files: a sidecar ``<file>.manifest.json`` with the file's SHA-256.

A TorchScript or ``.pt2`` file is code: loading or calling it can run whatever its author put in it. The
manifest does not make an untrusted file safe; it makes sure the file that is loaded is, byte for byte, the
file that flexlearn exported (no corruption, no swap on the way to the robot). Loaders verify it by default
and refuse a missing or mismatching manifest unless the caller opts out explicitly.

Sidecar layout (JSON object)::

    {"file": "direction_model.pt", "sha256": "<64 hex>", "bytes": 12345,
     "flexlearn_version": "...", "torch_version": "...", "kind": "torchscript" | "program" | ...,
     "set": {"direction_model.pt": "<64 hex>", "direction_model.pt2": "<64 hex>", ...}}

Export sets: the files of one export (``direction_model.pt``, ``.pt2``, ``robot_bundle.pt``; a kit's ``.pt`` and
``.pte``) land by one rename each after a journal of those renames is committed (`set_commit`); a loader first
completes a commit that a killed writer left (`verify_manifest`), so it reads the old set or the new one. Every
manifest also names every file of its set with its hash (``set``): a file loads only when its own hash and every
sibling of its set that is present match its manifest, so a mix made by hand (files of two exports copied into
one folder) is refused too (a sibling that is absent, a set copied in part, is allowed). A folder-wide set (the
Pi kit) has one ``kit.json`` with the same ``set`` field, written last (`verify_set`).

This module uses the standard library only, so that the Raspberry Pi runner (torch alone) can load it by
file path.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

from .family import CheckpointError as _TrustBase  # flexlearn's error family inside flexlearn
from .set_commit import finish_commits

MANIFEST_SUFFIX = ".manifest.json"


class UntrustedArtifactError(_TrustBase, ValueError):  # type: ignore[valid-type,misc]
    """A model file has no manifest, or its bytes do not match the manifest's SHA-256."""


def manifest_path(path: str | os.PathLike) -> Path:
    """The sidecar of ``path``: ``<path>.manifest.json`` in the same folder.

    Args:
        path: the model file.

    Returns:
        The sidecar's path.
    """
    path = Path(path)
    return path.with_name(path.name + MANIFEST_SUFFIX)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in ``chunk``-byte blocks.

    Args:
        path: the file.
        chunk: the block size [bytes].

    Returns:
        The hex digest.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_record(path: str | os.PathLike, kind: str, versions: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The manifest of the file at ``path`` (hash and size now), with ``kind`` and version strings.

    Args:
        path: the file.
        kind: its kind ("torchscript", "program", ...).
        versions: version strings to record (None: none).

    Returns:
        The record: ``file``, ``sha256``, ``bytes``, ``kind`` and the versions.
    """
    path = Path(path)
    return {
        "file": path.name,
        "sha256": sha256_file(path),
        "bytes": path.stat().st_size,
        "kind": kind,
        **(versions or {}),
    }


def verify_manifest(
    path: str | os.PathLike, trust_unverified: bool = False, data: Optional[bytes] = None
) -> dict[str, Any]:
    """Check ``path`` against its sidecar manifest; return the manifest (``{}`` when opted out).

    ``data``: the file's bytes when the caller has read them already (they are what is hashed, so the bytes
    checked are the bytes loaded). Raises `UntrustedArtifactError` naming the file and the reason (no
    manifest, unreadable manifest, wrong file name or hash) unless ``trust_unverified`` is true, in which
    case nothing is checked.

    Args:
        path: the model file.
        trust_unverified: skip every check.
        data: the file's bytes, already read (None: read the file).

    Returns:
        The manifest record (``{}`` with ``trust_unverified``).

    Raises:
        UntrustedArtifactError: no manifest, an unreadable one, a wrong file name or hash, or a mismatching
            sibling of its export set (`check_siblings`).
    """
    path = Path(path)
    _finish_interrupted_export(path)
    if trust_unverified:
        return {}
    side = manifest_path(path)
    hint = "re-export it with flexlearn, or pass the explicit opt-out if you trust this file"
    if not side.is_file():
        raise UntrustedArtifactError(
            f"model file '{path}': no manifest '{side.name}' beside it; a model file is "
            f"code, so it is not loaded unverified ({hint})"
        )
    try:
        record = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UntrustedArtifactError(f"manifest '{side}': unreadable ({exc})") from exc
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        raise UntrustedArtifactError(f"manifest '{side}': field 'sha256' missing or not a string")
    if record.get("file") not in (None, path.name):
        raise UntrustedArtifactError(
            f"manifest '{side}': field 'file' = {record.get('file')!r}, but the model file is '{path.name}'"
        )
    actual = sha256_file(path) if data is None else hashlib.sha256(data).hexdigest()
    if actual != record["sha256"].lower():
        raise UntrustedArtifactError(
            f"model file '{path}': SHA-256 {actual} does not match its manifest "
            f"({record['sha256']}); the file was changed after export ({hint})"
        )
    check_siblings(path, record)
    return record


def _finish_interrupted_export(path: Path) -> None:
    """Complete an export of ``path``'s set that was killed inside its renames (`set_commit.finish_commits`)."""
    try:
        finish_commits(path.parent)
    except OSError as exc:
        raise UntrustedArtifactError(
            f"model file '{path}': an export into its folder was interrupted inside its commit and cannot be "
            f"completed here ({exc.strerror or exc}); make the folder writable or export again"
        ) from exc


def check_siblings(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Refuse ``path`` when a file of its export set (``record["set"]``) lies beside it with other bytes.

    Args:
        path: the verified model file.
        record: its manifest.

    Raises:
        UntrustedArtifactError: a malformed ``set`` field, or a sibling of another (or an interrupted) export.
    """
    members = record.get("set", {})
    side = manifest_path(path)
    if not isinstance(members, dict) or not all(isinstance(v, str) for v in members.values()):
        raise UntrustedArtifactError(f"manifest '{side}': field 'set' is not an object of file name -> SHA-256")
    for name, digest in sorted(members.items()):
        sibling = Path(path).with_name(name)
        if name == Path(path).name or Path(name).name != name or not sibling.is_file():
            continue  # itself (checked above), a name with folders (ignored), or a part of the set not copied
        if sha256_file(sibling) != digest.lower():
            raise UntrustedArtifactError(
                f"model file '{path}': its export set names '{name}' with SHA-256 {digest[:12]}..., but the file "
                f"beside it differs: the two come from different exports (or an export was interrupted); "
                f"export again into this folder"
            )


KIT_MANIFEST = "kit.json"


def verify_set(folder: str | os.PathLike, manifest_name: str = KIT_MANIFEST) -> dict[str, Any]:
    """Check every file that the set manifest ``folder/manifest_name`` names (written last by the kit writer).

    Args:
        folder: the kit folder.
        manifest_name: its set manifest.

    Returns:
        The set manifest.

    Raises:
        UntrustedArtifactError: a missing or unreadable manifest, a missing file or one with other bytes.
    """
    side = Path(folder) / manifest_name
    try:
        record = json.loads(side.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UntrustedArtifactError(
            f"kit '{folder}': no '{manifest_name}' (the kit was not written completely, or not by flexlearn-export)"
        ) from None
    except (OSError, ValueError) as exc:
        raise UntrustedArtifactError(f"manifest '{side}': unreadable ({exc})") from exc
    members = record.get("set") if isinstance(record, dict) else None
    if not isinstance(members, dict) or not members:
        raise UntrustedArtifactError(f"manifest '{side}': field 'set' missing or empty")
    for name, digest in sorted(members.items()):
        file = Path(folder) / name
        if not isinstance(digest, str) or ".." in Path(name).parts or Path(name).is_absolute():
            raise UntrustedArtifactError(f"manifest '{side}': field 'set' entry {name!r} is malformed")
        if not file.is_file():
            raise UntrustedArtifactError(f"kit '{folder}': file '{name}' of '{manifest_name}' is missing")
        if sha256_file(file) != digest.lower():
            raise UntrustedArtifactError(
                f"kit '{folder}': file '{name}' differs from '{manifest_name}' (changed after export, or a mix "
                f"of two kits); write the kit again"
            )
    return record
