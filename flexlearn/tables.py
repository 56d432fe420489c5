"""Reading tables and JSON metadata strictly, with errors that name the file, the column and the value.

Every reader of a table (raw-stream Parquet files, serial CSV / JSON-lines dumps, dataset files) converts its
columns with `column_values` (or `read_columns`), one check of the column's type shared by all of them. The
expected *kinds*:

| kind     | accepted Arrow types                                   | returned NumPy array      |
| -------- | ------------------------------------------------------ | ------------------------- |
| "float"  | integer or floating point (not boolean, not text)      | float64                   |
| "number" | integer or floating point                              | int64 or float64 (as is)  |
| "int"    | integer; floating point only if every value is an exact integer (``float_ints``) | int64 |
| "bool"   | boolean; integer or floating point only if every value is 0 or 1 | bool            |
| "str"    | string (plain, large or dictionary-encoded)            | object (str)              |

A null (missing) value is an error, except in a ``nullable`` "float" column, where it reads as NaN (e.g. a
failed sensor conversion). Integers must fit int64. Anything else is a `DataError` naming the file, the
column, the offending value and its row (or line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flexlearn.errors import ArgumentError, DataError

INT64_MAX = 2**63 - 1
KINDS = ("float", "number", "int", "bool", "str")
_EXPECTED = {
    "float": "numbers",
    "number": "numbers",
    "int": "integers",
    "bool": "booleans (true/false or 0/1)",
    "str": "strings",
}
# Arrow type categories each kind accepts (before the value checks).
_ACCEPTS = {
    "float": ("int", "float"),
    "number": ("int", "float"),
    "int": ("int", "float"),
    "bool": ("bool", "int", "float"),
    "str": ("str",),
}


def read_parquet(path: Path, what: str) -> pa.Table:
    """Read ``path`` as a Parquet table; a missing or unreadable file raises `DataError` naming it.

    ``what`` says what the file should be, for the message (e.g. "dataset file", "stream file 'mag'").

    Args:
        path: the Parquet file.
        what: what the file should be, for messages.

    Returns:
        The table.

    Raises:
        DataError: ``path`` is a directory, is missing, or cannot be read as Parquet.
    """
    if path.is_dir():  # a common slip: the folder instead of the file in it, or a raw sweep instead of its dataset
        hint = (
            "; it holds a raw sweep (meta.json): process it first, flexlearn-process input=<it>"
            if (path / "meta.json").is_file()
            else f"; give the file in it, {path / 'dataset.parquet'}"
            if (path / "dataset.parquet").is_file()
            else ""
        )
        raise DataError(f"{path}: a directory, not a {what}{hint}")
    if not path.is_file():
        raise DataError(f"{path}: {what} not found")
    try:
        return pq.read_table(path)
    except Exception as exc:  # pyarrow raises several exception types for corrupt files
        raise DataError(f"{path}: {what} cannot be read as Parquet ({exc})") from exc


def parse_json_object(text: str | bytes, where: str, what: str) -> dict[str, Any]:
    """``text`` parsed as JSON, which must be an object; else `DataError` "<where>: <what> is not ...".

    ``where`` names the file, ``what`` the document (e.g. "raw sweep metadata").

    Args:
        text: the JSON document.
        where: the file, for messages.
        what: the document, for messages.

    Returns:
        The parsed object.

    Raises:
        DataError: ``text`` is not valid JSON (or not UTF-8) or not a JSON object.
    """
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{where}: {what} is not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise DataError(f"{where}: {what} is a JSON {_json_type(value)} ({_short(value)}), expected a JSON object")
    return value


def _json_type(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _category(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_null(t):
        return "null"
    return "other"


def _example(arr: pa.Array, locate: Callable[[int], str]) -> str:
    """The text " (e.g. <value> at <its place>)" for a column of the wrong type, or "" when every value is null.

    The value is the first one that is not a number written as text (in a text column: the culprit of a
    CSV column that would otherwise be numeric), else the first non-null one.
    """
    values = arr.to_pylist()
    valid = [i for i, v in enumerate(values) if v is not None]
    if not valid:
        return ""
    culprit = next((i for i in valid if isinstance(values[i], str) and not _is_number_text(values[i])), valid[0])
    return f" (e.g. {_short(values[culprit])} at {locate(culprit)})"


def _is_number_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _flat(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


def column_values(
    values: pa.Array | pa.ChunkedArray,
    kind: str,
    where: str,
    column: str,
    *,
    nullable: bool = False,
    float_ints: bool = True,
    locate: Optional[Callable[[int], str]] = None,
) -> np.ndarray:
    """The Arrow column ``values`` as a NumPy array of ``kind`` (see the module docstring), checked strictly.

    Args:
        values: the Arrow column (chunked or not; a dictionary column is decoded).
        kind: one of `KINDS`.
        where: the file (and context) for messages, e.g. "/x/raw/coil.parquet".
        column: the column's name, for messages.
        nullable: "float" only: a null reads as NaN instead of being an error.
        float_ints: "int" only: accept a floating-point column whose values are all exact integers.
        locate: row index -> its place in the file for messages (default "row <i>", e.g. "line <n>").

    Raises:
        DataError: wrong type, null, non-integer, out-of-range or non-0/1 value, naming file, column and value.
        ArgumentError: ``kind`` is not one of `KINDS`.
    """
    if kind not in KINDS:
        raise ArgumentError(f"unknown column kind {kind!r}; expected one of {KINDS}")
    arr = _flat(values)
    locate = locate or (lambda i: f"row {i}")

    def fail(i: int, problem: str) -> DataError:
        return DataError(f"{where}: column '{column}' {problem} at {locate(i)}; expected {_EXPECTED[kind]}")

    cat = _category(arr.type)
    null_ok = nullable and kind == "float"
    if cat == "null" and len(arr) and not null_ok:
        raise fail(0, "has a missing (null) value")
    if cat not in _ACCEPTS[kind] + (("null",) if kind == "float" else ()) or (
        kind == "int" and cat == "float" and not float_ints
    ):
        raise DataError(
            f"{where}: column '{column}' holds {arr.type} values{_example(arr, locate)}, expected {_EXPECTED[kind]}"
        )
    if arr.null_count and not null_ok:
        raise fail(int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0]), "has a missing (null) value")
    return _convert(arr, cat, kind, fail)


def _convert(arr: pa.Array, cat: str, kind: str, fail: Callable[[int, str], DataError]) -> np.ndarray:
    """``arr`` (type category ``cat``, already accepted for ``kind``) as NumPy, checking values (0/1, int64)."""
    if kind == "str":
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)
    if kind == "float" or (kind == "number" and cat == "float"):
        return np.asarray(arr.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False), dtype=np.float64)
    if cat == "bool":
        return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)
    v = arr.to_numpy(zero_copy_only=False)
    if kind == "bool":
        bad = np.flatnonzero((v != 0) & (v != 1))
        if bad.size:
            raise fail(int(bad[0]), f"has value {v[bad[0]].item()!r}")
        return v == 1
    if cat == "int":  # "int" or "number" from an integer column: must fit int64
        bad = np.flatnonzero(v > INT64_MAX) if v.dtype == np.uint64 else np.empty(0, dtype=np.int64)
        if bad.size:
            raise fail(int(bad[0]), f"has value {int(v[bad[0]])} beyond the int64 range")
        return v.astype(np.int64)
    with np.errstate(invalid="ignore"):  # "int" from exact-integer floats
        bad = np.flatnonzero(~np.isfinite(v) | (v != np.round(v)) | (np.abs(v) >= 2.0**63))
    if bad.size:
        raise fail(int(bad[0]), f"has value {float(v[bad[0]])!r} (not an integer in the int64 range)")
    return v.astype(np.int64)


def read_columns(
    table: pa.Table,
    path: str | Path,
    kinds: Mapping[str, str],
    *,
    nullable: Collection[str] = (),
    float_ints: bool = True,
) -> dict[str, np.ndarray]:
    """Columns ``kinds`` (name -> kind) of ``table`` read by `column_values`; a missing one names the file.

    ``nullable``: the "float" columns in which a null reads as NaN.

    Args:
        table: the Arrow table.
        path: its file, for messages.
        kinds: column name -> kind (one of `KINDS`).
        nullable: the "float" columns in which a null reads as NaN.
        float_ints: "int" columns only: accept a floating-point column whose values are all exact integers.

    Returns:
        Column name -> NumPy array (see `column_values`).

    Raises:
        DataError: a column is missing, or `column_values` rejects a column.
        ArgumentError: a kind is not one of `KINDS`.
    """
    missing = [c for c in kinds if c not in table.column_names]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}")
    return {
        c: column_values(table.column(c), k, str(path), c, nullable=c in nullable, float_ints=float_ints)
        for c, k in kinds.items()
    }
