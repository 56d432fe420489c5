"""Processed direction dataset: one row per kept pose, (ΔB, label) pairs for the direction MLP (seed 002, III-B1).

The on-disk form is one Parquet file whose schema metadata carries everything needed to interpret and
reproduce it; `datasets/README.md` documents it. `flexlearn.data.process.process_sweep` builds a
`DirectionDataset` from a `flexlearn.sensing.streams.RawSweep`.

Splits are stored as strings ('train', 'val', 'test'): a NumPy ``<U5`` array in memory and a (dictionary-
encoded) Parquet string column on disk, so that any Parquet reader shows them without a code table.
A pose's split is a pure function of (pose_id, split seed, fractions) — see `assign_splits` — so it does
not change when the sweep is reprocessed with other filters.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import flexlearn
from flexlearn.atomic import atomic_path
from flexlearn.errors import DataError
from flexlearn.tables import column_values, parse_json_object, read_parquet

DATASET_SCHEMA_VERSION = 1
METADATA_KEY = b"flexlearn"
SPLITS = ("train", "val", "test")
LABEL_NORM_TOL = 1e-6
_AXES = ("x", "y", "z")

# Vector fields: attribute -> (unit of each component column, frame). Columns are f"{name}_{x|y|z}".
VECTORS: dict[str, tuple[str, str]] = {
    "delta_b": ("T", "child sensor frame"),
    "label": ("1", "child sensor frame"),
    "truth_label": ("1", "child sensor frame"),
    "truth_u": ("1", "parent frame"),
    "truth_delta_b": ("T", "child sensor frame"),
    "target": ("1", "parent frame"),
}
SCALARS: dict[str, str] = {"pose_id": "-", "split": "-", "n_coil_on": "1", "module": "-"}
REQUIRED = ("pose_id", "delta_b", "label", "split", "n_coil_on")
OPTIONAL = ("truth_label", "truth_u", "truth_delta_b", "target", "module")
UNIT_VECTORS = ("label", "truth_label", "truth_u")
# Column kinds checked on load (`flexlearn.tables.column_values`; vectors are "float"): no nulls, no text or
# booleans where numbers are due. Integer columns are read as "number" so that `_coerce` names a float dtype.
_KINDS = {"pose_id": "number", "n_coil_on": "number", "split": "str", "module": "number"}


def _columns(name: str) -> list[str]:
    return [f"{name}_{a}" for a in _AXES] if name in VECTORS else [name]


def column_units() -> dict[str, str]:
    """Unit string of every column that may appear on disk ('T' tesla, '1' dimensionless, '-' id/category)."""
    units = dict(SCALARS)
    for name, (unit, _) in VECTORS.items():
        units.update({c: unit for c in _columns(name)})
    return units


def _jsonable(obj: Any) -> Any:
    """`json.dumps` default: NumPy scalars and arrays become Python numbers and lists."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def assign_splits(pose_id: np.ndarray, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0) -> np.ndarray:
    """Split name per pose, (N,) ``<U5``, from a hash of (seed, pose_id): deterministic and stable.

    Each pose draws u = splitmix64(pose_id + seed·φ) / 2^64 ∈ [0, 1) and falls in 'train' if u < f_train,
    'val' if u < f_train + f_val, else 'test'. A pose's split therefore depends on nothing but its id and
    the seed (not on which other poses survive filtering); the realised fractions are binomial around
    ``fractions`` (±0.3 % at 15,000 poses).

    Args:
        pose_id: pose ids (N,) int.
        fractions: (f_train, f_val, f_test).
        seed: the split's seed.

    Returns:
        The split names (N,) ``<U5``.
    """
    x = np.asarray(pose_id).astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        z = x + np.uint64(seed % 2**64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53
    edges = np.cumsum(np.asarray(fractions, dtype=np.float64))[:-1]
    return np.asarray(SPLITS)[np.searchsorted(edges, u, side="right")]


@dataclass
class DirectionDataset:
    """(ΔB, label) pairs of N kept poses. Row order: hold-window start time of the sweep.

    Attributes:
        pose_id: (N,) int64, unique, as in the raw sweep's pose table.
        delta_b: (N, 3) float64 [T], coil field at the magnetometer (ambient removed), child sensor frame.
        label: (N, 3) float64 unit, parent axis (from the child toward the parent) in the child sensor frame,
            the normalised mean stationary specific force (seed 002, III-B1).
        split: (N,) str, one of `SPLITS`.
        n_coil_on: (N,) int64, accepted coil-on samples averaged into ``delta_b``.
        truth_label, truth_u: optional (N, 3) float64 unit; true label (child frame) and true child
            direction (parent frame), from ``raw.truth`` of simulated sweeps.
        truth_delta_b: optional (N, 3) float64 [T], noise-free coil field (simulated sweeps).
        target: optional (N, 3) float64, the commanded child axis in the parent frame (straight = −z) from the
            raw pose table: the commanded bend acos(−target_z) is what evaluation bands are taken by.
        module: optional (N,) int64, index of the module a row was recorded on (datasets of several modules,
            `merge_modules`); absent for a one-module sweep.
        meta: JSON-serialisable dict: 'source' (raw.meta), 'provenance', 'processing' (config),
            'report' (drop report); after `load` also the file-level keys (schema_version, units, ...).
        per_pose: column -> (N,) float64, the hold-window means of registered ``per_pose`` streams
            (`flexlearn.sensing.stream_schema.StreamSchema.per_pose`), named ``<stream>_<column>``; NaN where a
            window held no finite sample. Listed with their units under 'per_pose_units' in the metadata.
        per_pose_units: column of ``per_pose`` -> unit.
    """

    pose_id: np.ndarray
    delta_b: np.ndarray
    label: np.ndarray
    split: np.ndarray
    n_coil_on: np.ndarray
    truth_label: Optional[np.ndarray] = None
    truth_u: Optional[np.ndarray] = None
    truth_delta_b: Optional[np.ndarray] = None
    target: Optional[np.ndarray] = None
    module: Optional[np.ndarray] = None
    meta: dict[str, Any] = field(default_factory=dict)
    per_pose: dict[str, np.ndarray] = field(default_factory=dict)
    per_pose_units: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._coerce()
        self.validate()

    def _coerce(self, source: str = "dataset") -> None:
        """Cast the columns to int64 (pose_id, n_coil_on), str (split) and float64 (vectors)."""
        # column -> (target dtype, accepted source dtype kinds)
        casts = {
            "pose_id": (np.int64, "iu"),
            "n_coil_on": (np.int64, "iu"),
            "split": (str, "UO"),
            "module": (np.int64, "iu"),
            **{n: (np.float64, "iuf") for n in VECTORS},
        }
        for name, (dtype, kinds) in casts.items():
            value = getattr(self, name)
            if value is None:
                continue
            value = np.asarray(value)
            if value.dtype.kind not in kinds:
                raise DataError(
                    f"{source}: column(s) {_columns(name)} have dtype {value.dtype}, expected {np.dtype(dtype).name}"
                )
            setattr(self, name, value.astype(dtype))
        for name, value in self.per_pose.items():
            value = np.asarray(value)
            if value.dtype.kind not in "iuf":
                raise DataError(f"{source}: column '{name}' has dtype {value.dtype}, expected float64")
            self.per_pose[name] = value.astype(np.float64)

    def __len__(self) -> int:
        return int(self.pose_id.shape[0])

    def validate(self, source: str = "dataset") -> None:
        """Check shapes, finiteness, unit-norm labels, split names and unique ids; `DataError` names the column.

        Args:
            source: what the messages name (a file path, or "dataset").

        Raises:
            DataError: a column has the wrong shape, a non-finite value, a bad split name or a non-unit label.
        """
        n = len(self)

        def fail(msg: str) -> None:
            raise DataError(f"{source}: {msg}")

        if self.pose_id.shape != (n,) or len(np.unique(self.pose_id)) != n:
            fail("column 'pose_id' must be a 1-D array of unique integers")
        for name in ("split", "n_coil_on", "module"):
            if getattr(self, name) is not None and getattr(self, name).shape != (n,):
                fail(f"column '{name}' has shape {getattr(self, name).shape}, expected ({n},)")
        if self.module is not None and n and int(self.module.min()) < 0:
            i = int(np.argmin(self.module))
            fail(f"column 'module' has value {int(self.module[i])} at row {i}; module indices are >= 0")
        bad = ~np.isin(self.split, SPLITS)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            fail(f"column 'split' has value {str(self.split[i])!r} at row {i}; expected one of {SPLITS}")
        fixed = set(column_units())
        for name, value in self.per_pose.items():
            if name in fixed or name not in self.per_pose_units or value.shape != (n,):
                fail(
                    f"column '{name}' (per pose): shape {value.shape}, expected ({n},), a unit in per_pose_units "
                    f"({self.per_pose_units.get(name)!r}) and a name apart from the dataset's own columns"
                )
        for name in VECTORS:
            value = getattr(self, name)
            if value is None:
                continue
            if value.shape != (n, 3):
                fail(f"columns {_columns(name)} have shape {value.shape}, expected ({n}, 3)")
            nonfinite = np.argwhere(~np.isfinite(value))
            if nonfinite.size:
                i, k = (int(v) for v in nonfinite[0])
                fail(
                    f"column '{name}_{_AXES[k]}' has non-finite value {value[i, k]} at row {i} "
                    f"(pose_id {self.pose_id[i]})"
                )
            if name in UNIT_VECTORS and n:
                err = np.abs(np.linalg.norm(value, axis=1) - 1.0)
                if err.max() > LABEL_NORM_TOL:
                    i = int(np.argmax(err))
                    fail(
                        f"columns {_columns(name)} are not unit vectors: norm {1.0 + err[i]:.9g} at row {i} "
                        f"(pose_id {self.pose_id[i]})"
                    )

    def subset(self, name: str) -> "DirectionDataset":
        """The rows of split ``name`` ('train', 'val' or 'test') as a new dataset sharing ``meta``.

        Args:
            name: the split.

        Returns:
            The split's rows as a `DirectionDataset`.

        Raises:
            DataError: ``name`` is not one of `SPLITS`.
        """
        if name not in SPLITS:
            raise DataError(f"dataset: unknown split {name!r}; expected one of {SPLITS}")
        return self.take(np.flatnonzero(self.split == name))

    def take(self, rows: np.ndarray) -> "DirectionDataset":
        """The dataset restricted to ``rows`` (index array or boolean mask).

        Args:
            rows: row indices (K,) or a boolean mask (N,).

        Returns:
            A new `DirectionDataset` sharing ``meta``.
        """
        kw: dict[str, Any] = {
            n: (None if getattr(self, n) is None else getattr(self, n)[rows]) for n in (*REQUIRED, *OPTIONAL)
        }
        return DirectionDataset(
            **kw,
            meta=self.meta,
            per_pose={k: v[rows] for k, v in self.per_pose.items()},
            per_pose_units=dict(self.per_pose_units),
        )

    # ------------------------------------------------------------------ disk
    def to_table(self) -> pa.Table:
        """Arrow table of the columns, with the ``flexlearn`` schema metadata (see datasets/README.md)."""
        arrays: dict[str, Any] = {}
        for name in (*REQUIRED, *OPTIONAL):
            value = getattr(self, name)
            if value is None:
                continue
            if name in VECTORS:
                arrays.update({c: np.ascontiguousarray(value[:, k]) for k, c in enumerate(_columns(name))})
            else:
                arrays[name] = pa.array(value.tolist(), type=pa.string()) if name == "split" else value
        arrays.update({c: np.ascontiguousarray(v) for c, v in self.per_pose.items()})
        table = pa.table(arrays)
        units = {**column_units(), **self.per_pose_units}
        header = {
            "schema_version": DATASET_SCHEMA_VERSION,
            "flexlearn_version": flexlearn.__version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "units": {c: units[c] for c in table.column_names},
            "frames": {n: VECTORS[n][1] for n in VECTORS if getattr(self, n) is not None},
            "splits": list(SPLITS),
            **({"per_pose_units": dict(self.per_pose_units)} if self.per_pose else {}),
        }
        body = {k: v for k, v in self.meta.items() if k not in header and k != "per_pose_units"}
        text = json.dumps({**body, **header}, sort_keys=True, default=_jsonable)
        return table.replace_schema_metadata({METADATA_KEY: text.encode()})

    def save(self, path: str | Path) -> Path:
        """Write one Parquet file atomically (temporary file beside ``path``, then rename); return the path.

        Args:
            path: the Parquet file to write.

        Returns:
            ``path`` as a `Path`.
        """
        path = Path(path)
        table = self.to_table()
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "DirectionDataset":
        """Read and validate a dataset file; any problem raises `DataError` naming file, column and value.

        Args:
            path: the Parquet file.

        Returns:
            The validated `DirectionDataset`.

        Raises:
            DataError: missing metadata or columns, an unsupported schema_version, wrong units or invalid values.
        """
        path = Path(path)
        table = read_parquet(path, "dataset file")
        raw_meta = (table.schema.metadata or {}).get(METADATA_KEY)
        if raw_meta is None:
            raise DataError(f"{path}: no '{METADATA_KEY.decode()}' schema metadata; not a flexlearn dataset")
        meta = parse_json_object(raw_meta, str(path), f"'{METADATA_KEY.decode()}' metadata")
        version = meta.get("schema_version")
        if version != DATASET_SCHEMA_VERSION:
            raise DataError(
                f"{path}: schema_version {version!r} is not supported (this flexlearn "
                f"{flexlearn.__version__} reads schema_version {DATASET_SCHEMA_VERSION})"
            )
        names = set(table.column_names)
        missing = [c for n in REQUIRED for c in _columns(n) if c not in names]
        if missing:
            raise DataError(f"{path}: missing column(s) {missing}")
        expected, stored = column_units(), meta.get("units", {})
        if not isinstance(stored, dict):
            raise DataError(
                f"{path}: 'units' in the '{METADATA_KEY.decode()}' metadata is {stored!r}, expected a "
                "JSON object (column -> unit)"
            )
        for c in table.column_names:
            if c in expected and stored.get(c) != expected[c]:
                raise DataError(
                    f"{path}: column '{c}' has unit {stored.get(c)!r} in the metadata, expected {expected[c]!r}"
                )
        kw: dict[str, Any] = {}
        for name in (*REQUIRED, *OPTIONAL):
            cols = _columns(name)
            present = [c for c in cols if c in names]
            if not present:
                continue
            if len(present) != len(cols):
                raise DataError(f"{path}: column(s) {sorted(set(cols) - set(present))} missing beside {present}")
            data = [column_values(table.column(c), _KINDS.get(name, "float"), str(path), c) for c in cols]
            kw[name] = np.stack(data, axis=-1) if name in VECTORS else data[0]
        per_pose_units = meta.get("per_pose_units", {})
        if not isinstance(per_pose_units, dict):
            raise DataError(
                f"{path}: 'per_pose_units' in the '{METADATA_KEY.decode()}' metadata is "
                f"{per_pose_units!r}, expected a JSON object (column -> unit)"
            )
        missing = sorted(c for c in per_pose_units if c not in names)
        if missing:
            raise DataError(f"{path}: missing column(s) {missing} (listed in per_pose_units)")
        ds = cls.__new__(cls)
        for name in (*REQUIRED, *OPTIONAL):
            setattr(ds, name, kw.get(name))
        ds.meta = meta
        ds.per_pose = {c: column_values(table.column(c), "float", str(path), c) for c in per_pose_units}
        ds.per_pose_units = {c: str(u) for c, u in per_pose_units.items()}
        ds._coerce(source=str(path))
        ds.validate(source=str(path))
        return ds


def merge_modules(datasets: Sequence["DirectionDataset"]) -> "DirectionDataset":
    """One dataset of several modules' sweeps with a ``module`` column (row i of ``datasets[k]`` → module k).

    Each row keeps its split; pose ids become ``k · stride + pose_id`` (stride a power of ten above every id) so
    that they stay unique. ``meta['modules']`` lists the sources' module seeds and calibrations.

    Args:
        datasets: single-module datasets, in module order.

    Returns:
        The merged `DirectionDataset`.

    Raises:
        DataError: ``datasets`` is empty, or one of them already holds several modules.
    """
    if not datasets:
        raise DataError("merge_modules: no datasets given")
    for k, d in enumerate(datasets):
        if d.module is not None and len(np.unique(d.module)) > 1:
            raise DataError(
                f"merge_modules: dataset {k} already holds several modules (column 'module': "
                f"{sorted(set(d.module.tolist()))}); merge the single-module datasets"
            )
    top = max(int(d.pose_id.max()) if len(d) else 0 for d in datasets)
    stride = 10 ** len(str(top + 1))
    cat = lambda name: np.concatenate([getattr(d, name) for d in datasets])  # noqa: E731
    kw: dict[str, Any] = {n: cat(n) for n in REQUIRED if n != "pose_id"}
    kw["pose_id"] = np.concatenate([k * stride + d.pose_id for k, d in enumerate(datasets)])
    for n in ("truth_label", "truth_u", "truth_delta_b", "target"):
        kw[n] = cat(n) if all(getattr(d, n) is not None for d in datasets) else None
    kw["module"] = np.concatenate([np.full(len(d), k, np.int64) for k, d in enumerate(datasets)])
    modules = [
        {
            "seed": ((d.meta.get("source") or {}).get("module") or {}).get("seed"),
            "calibration": d.meta.get("calibration"),
            "n": len(d),
        }
        for d in datasets
    ]
    units = {c: u for c, u in datasets[0].per_pose_units.items() if all(d.per_pose_units.get(c) == u for d in datasets)}
    return DirectionDataset(
        **kw,
        meta={"modules": modules, "pose_id_stride": stride},
        per_pose={c: np.concatenate([d.per_pose[c] for d in datasets]) for c in units},
        per_pose_units=units,
    )
