"""Parquet reading with errors that name the file (shared by raw streams and datasets)."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from flexlearn.errors import DataError


def read_parquet(path: Path, what: str) -> pa.Table:
    """Read ``path`` as a Parquet table; a missing or unreadable file raises `DataError` naming it.

    ``what`` says what the file should be, for the message (e.g. "dataset file", "stream file 'mag'").
    """
    if not path.is_file():
        raise DataError(f"{path}: {what} not found")
    try:
        return pq.read_table(path)
    except Exception as exc:  # pyarrow raises several exception types for corrupt files
        raise DataError(f"{path}: {what} cannot be read as Parquet ({exc})") from exc
