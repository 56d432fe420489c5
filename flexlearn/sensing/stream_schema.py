"""How a raw sensor stream is laid out: its fields (`Field`) and its schema (`StreamSchema`).

A stream is a mapping of named fields, each an (N,) array (one on-disk column) or an (N, k) array (k columns, in
order), of kind ``float`` (float64), ``int`` (int64) or ``bool``, in SI units (``s`` marks a time; ``1`` or ``-``
dimensionless). A `StreamSchema` names the stream's fields and how it is recorded, checked (shapes, finite values,
non-decreasing time ``t`` [s], a unique key) and processed. The registry of streams (`STREAMS`, `register_stream`)
and the raw sweep that holds them (`RawSweep`) are in `flexlearn.sensing.streams`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Optional

import numpy as np

from flexlearn.errors import ConfigError

__all__ = ["DIMENSIONLESS", "FIELD_KINDS", "Field", "StreamSchema", "time_field"]

FIELD_KINDS = ("float", "int", "bool")
_DTYPES = {"float": np.float64, "int": np.int64, "bool": np.bool_}
DIMENSIONLESS = ("1", "-")  # units of a field that a serial ``scale`` never multiplies


@dataclass(frozen=True)
class Field:
    """One quantity of a stream: in memory an (N,) array (one column) or (N, k) array (k columns, in order).

    Attributes:
        name: key in the stream's mapping, e.g. ``t``, ``mag``, ``on``. ``t`` is the sample time [s].
        columns: on-disk column per component (default ``(name,)``).
        kind: ``float``, ``int`` or ``bool`` (checked on load and at ingest by `flexlearn.tables`).
        unit: SI unit; ``s`` marks a time (shifted to the time origin at ingest, rounded by
            `flexlearn.sensing.streams.quantize_times`), ``1`` or ``-`` dimensionless (a serial ``scale``
            multiplies only other ``float`` fields).
        nullable: a null (a failed conversion) reads as NaN instead of being an error.
        ros: attribute path of the value in a rosbag2 message (``magnetic_field``; a width-3 field reads
            ``.x .y .z``, width 4 ``.w .x .y .z``); empty: the topic map's ``field`` names it.
        doc: one line for the reader (frame, meaning).
    """

    name: str
    columns: tuple[str, ...] = ()
    kind: str = "float"
    unit: str = "-"
    nullable: bool = False
    ros: str = ""
    doc: str = ""

    def __post_init__(self) -> None:
        if not self.columns:
            object.__setattr__(self, "columns", (self.name,))
        if self.kind not in FIELD_KINDS:
            raise ConfigError(f"stream field '{self.name}': kind {self.kind!r}, expected one of {FIELD_KINDS}")

    @property
    def width(self) -> int:
        return len(self.columns)

    @property
    def is_time(self) -> bool:
        return self.unit == "s"

    @property
    def scaled(self) -> bool:
        """A serial dump's per-stream ``scale`` converts this field to SI."""
        return self.kind == "float" and not self.is_time and self.unit not in DIMENSIONLESS

    def shape(self, n: int) -> tuple[int, ...]:
        """The field's array shape for ``n`` samples.

        Args:
            n: samples.

        Returns:
            (n,) for one column, (n, k) for k.
        """
        return (n,) if self.width == 1 else (n, self.width)


def time_field(doc: str = "sample time") -> Field:
    """The ``t`` field [s] of a time-stamped stream.

    Args:
        doc: its line for the reader.

    Returns:
        The `Field`.
    """
    return Field("t", unit="s", doc=doc)


@dataclass(frozen=True)
class StreamSchema:
    """How one stream is laid out, checked, recorded and processed; declared once, in `STREAMS`.

    Attributes:
        name: stream name = table file stem (``<name>.parquet``) = topic-map / serial-map key.
        fields: the stream's `Field` s, in column order.
        required: every raw sweep holds it (else optional: absent table, absent key).
        continuous: sampled at a steady rate (ingest checks gaps and forward clock jumps).
        key: a field whose values are unique (``pose_id``), or empty.
        stamp: the field a recorded message or serial record is stamped with (``t``; ``t_end`` for a hold
            window, published when the hold ends); empty: never recorded (``truth``).
        per_pose: processing adds the mean of every ``float`` field over each hold window to the dataset,
            as columns ``<stream>_<column>`` (NaN where a window holds no finite sample).
        attrs: `RawSweep` attribute -> field (``mag_t`` -> ``t``): a keyword of the `RawSweep` constructor, and
            attribute access for the built-in streams.
        check: extra consistency rule: returns a message, or None when the stream is fine.
        doc: one line for the reader.
    """

    name: str
    fields: tuple[Field, ...]
    required: bool = False
    continuous: bool = False
    key: str = ""
    stamp: str = "t"
    per_pose: bool = False
    attrs: tuple[tuple[str, str], ...] = ()
    check: Optional[Callable[[Mapping[str, np.ndarray]], Optional[str]]] = None
    doc: str = ""

    @property
    def timed(self) -> bool:
        return any(f.name == "t" for f in self.fields)

    @property
    def values(self) -> tuple[Field, ...]:
        """The fields a record carries besides its time stamp ``t``."""
        return tuple(f for f in self.fields if f.name != "t")

    @property
    def kinds(self) -> dict[str, str]:
        """Column -> kind, as `flexlearn.tables.read_columns` checks it."""
        return {c: f.kind for f in self.fields for c in f.columns}

    @property
    def units(self) -> dict[str, str]:
        """Column -> unit."""
        return {c: f.unit for f in self.fields for c in f.columns}

    @property
    def nullable(self) -> tuple[str, ...]:
        return tuple(c for f in self.fields if f.nullable for c in f.columns)

    def to_columns(self, data: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Field arrays -> contiguous column arrays (ints as int64, booleans as bool; floats as given).

        Args:
            data: field name -> (N,) or (N, k) array.

        Returns:
            Column name -> (N,) array.
        """
        out: dict[str, np.ndarray] = {}
        for f in self.fields:
            a = np.asarray(data[f.name])
            if f.kind != "float":
                a = a.astype(_DTYPES[f.kind])
            parts = [a] if f.width == 1 else [a[:, j] for j in range(f.width)]
            out.update({c: np.ascontiguousarray(p) for c, p in zip(f.columns, parts)})
        return out

    def from_columns(self, cols: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Column arrays -> field arrays ((N,) or (N, k)).

        Args:
            cols: column name -> (N,) array.

        Returns:
            Field name -> array.
        """
        return {
            f.name: cols[f.columns[0]] if f.width == 1 else np.stack([cols[c] for c in f.columns], axis=-1)
            for f in self.fields
        }

    def validate(self, data: Mapping[str, np.ndarray]) -> Optional[str]:
        """The first problem of ``data`` (shapes, time stamps, unique key, ``check``).

        Args:
            data: field name -> array.

        Returns:
            A message naming the stream and field, or None when the stream is fine.
        """
        missing = [f.name for f in self.fields if f.name not in data]
        if missing or set(data) - {f.name for f in self.fields}:
            return f"stream '{self.name}': fields {sorted(data)}, expected {[f.name for f in self.fields]}"
        n = np.shape(data[self.fields[0].name])[0] if np.ndim(data[self.fields[0].name]) else -1
        shapes = {f.name: np.shape(data[f.name]) for f in self.fields}
        if any(shapes[f.name] != f.shape(n) for f in self.fields):
            want = {f.name: f.shape(n) for f in self.fields}
            return f"stream '{self.name}': field shapes {shapes} differ, expected {want}"
        if self.key and len(np.unique(data[self.key])) != n:
            return f"stream '{self.name}': field '{self.key}' values are not unique"
        for f in self.fields:  # NaN is a failed conversion: only a nullable field may hold one; ±inf none
            if f.kind != "float" or f.nullable or f.name == "t":
                continue
            bad = np.flatnonzero(~np.isfinite(np.asarray(data[f.name], np.float64)).reshape(n, f.width).any(-1))
            if bad.size:
                return (
                    f"stream '{self.name}': field '{f.name}' has the non-finite value "
                    f"{np.asarray(data[f.name])[bad[0]].tolist()} at index {bad[0]}; only a nullable field may "
                    "hold NaN"
                )
        if self.timed:
            t = np.asarray(data["t"])
            if not np.all(np.isfinite(t)):
                return f"stream '{self.name}': field 't' has non-finite time stamps"
            bad = np.flatnonzero(np.diff(t) < 0) if t.size > 1 else np.zeros(0, np.int64)
            if bad.size:
                return f"stream '{self.name}': field 't' decreases at index {bad[:1].tolist()}"
        return self.check(data) if self.check is not None else None
