"""Content fingerprints of files: what identifies a dataset or checkpoint, whatever its path or timestamp."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK_BYTES = 1 << 20  # read at a time


def update_with_file(h: "hashlib._Hash", path: str | Path) -> None:
    """Feed a file's bytes into the hash ``h``, streamed in `CHUNK_BYTES` chunks.

    Args:
        h: a hashlib hash object.
        path: the file to read.
    """
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            h.update(chunk)


def file_sha256(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes.

    Args:
        path: the file to read.

    Returns:
        The hex digest (64 characters).
    """
    h = hashlib.sha256()
    update_with_file(h, path)
    return h.hexdigest()
