"""Integrity manifests of exported model files: a sidecar ``<file>.manifest.json`` with the file's SHA-256.

A TorchScript or ``.pt2`` file is code: loading or calling it can run whatever its author put in it. The
manifest does not make an untrusted file safe; it makes sure the file that is loaded is, byte for byte, the
file that flexlearn exported (no corruption, no swap on the way to the robot). Loaders verify it by default
and refuse a missing or mismatching manifest unless the caller opts out explicitly.

Sidecar layout (JSON object)::

    {"file": "direction_model.pt", "sha256": "<64 hex>", "bytes": 12345,
     "flexlearn_version": "...", "torch_version": "...", "kind": "torchscript" | "program" | ...}

This module uses the standard library only, so that the Raspberry Pi runner (torch alone) can load it by
file path.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional

try:  # inside the package: the error is a CheckpointError (applications print one line, exit 2)
    from flexlearn.errors import CheckpointError as _TrustBase
except ImportError:  # loaded by file path on the Pi (torch only)
    _TrustBase = ValueError  # type: ignore[misc,assignment]

MANIFEST_SUFFIX = ".manifest.json"


class UntrustedArtifactError(_TrustBase):  # type: ignore[valid-type,misc]
    """A model file has no manifest, or its bytes do not match the manifest's SHA-256."""


def manifest_path(path: str | os.PathLike) -> Path:
    """The sidecar of ``path``: ``<path>.manifest.json`` in the same folder."""
    path = Path(path)
    return path.with_name(path.name + MANIFEST_SUFFIX)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in ``chunk``-byte blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_record(path: str | os.PathLike, kind: str, versions: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The manifest of the file at ``path`` (hash and size now), with ``kind`` and version strings."""
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
    """
    if trust_unverified:
        return {}
    path = Path(path)
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
    return record
