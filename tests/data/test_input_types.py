"""Wrong column types in raw-stream tables and non-object metadata: a `DataError` naming file, column and value,
never a silent misreading (null coil state read as off, "false" read as true, 100.5 read as pose 100).

Through ``flexlearn-process``: one line on stderr and exit status 2, no traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flexlearn.data.dataset import METADATA_KEY, DirectionDataset
from flexlearn.data.process import process_sweep
from flexlearn.errors import DataError
from flexlearn.sensing.streams import RawSweep
from tests.data.console import assert_clean_failure, data_error, run_console
from tests.data.streams_factory import make_sweep


@pytest.fixture(scope="module")
def sweep() -> RawSweep:
    return make_sweep(4)


@pytest.fixture
def raw_dir(sweep, tmp_path) -> Path:
    return sweep.save(tmp_path / "raw")


def set_column(raw_dir: Path, table: str, column: str, make) -> Path:
    """Replace ``column`` of ``<table>.parquet`` by ``make(old values as a Python list)`` (an Arrow array)."""
    f = raw_dir / f"{table}.parquet"
    t = pq.read_table(f)
    t = t.set_column(t.column_names.index(column), column, make(t.column(column).to_pylist()))
    pq.write_table(t, f)
    return f


def with_null(values: list, row: int = 1) -> list:
    return [None if i == row else v for i, v in enumerate(values)]


def load_fails(raw_dir: Path, *needles: str) -> str:
    return data_error(lambda: RawSweep.load(raw_dir), *needles)


# table, column, new column from the old values, words the message must hold (besides file and column)
BAD_COLUMNS = {
    "coil_state_with_null": ("coil", "on", lambda v: pa.array(with_null(v), pa.bool_()), ("null", "row 1")),
    "coil_state_as_text": (
        "coil",
        "on",
        lambda v: pa.array(["true" if x else "false" for x in v]),
        ("string", "'true'", "booleans"),
    ),
    "coil_state_2": ("coil", "on", lambda v: pa.array([2 if x else 0 for x in v]), ("value 2", "row 0")),
    "coil_state_half": ("coil", "on", lambda v: pa.array([0.5 if x else 0.0 for x in v]), ("value 0.5",)),
    "pose_id_fractional": ("poses", "pose_id", lambda v: pa.array([x + 0.5 for x in v]), ("100.5", "row 0")),
    "pose_id_beyond_int64": (
        "poses",
        "pose_id",
        lambda v: pa.array([2**63 + x for x in v], pa.uint64()),
        ("beyond the int64 range",),
    ),
    "pose_id_boolean": ("poses", "pose_id", lambda v: pa.array([x % 2 == 0 for x in v]), ("bool", "integers")),
    "pose_id_with_null": ("poses", "pose_id", lambda v: pa.array(with_null(v), pa.int64()), ("null",)),
    "target_with_null": ("poses", "target_x", lambda v: pa.array(with_null(v), pa.float64()), ("null", "row 1")),
    "field_as_numeric_text": ("mag", "mx", lambda v: pa.array([repr(x) for x in v]), ("string", "numbers")),
    "field_as_text": ("mag", "mx", lambda v: pa.array(["abc"] * len(v)), ("string", "'abc'")),
    "time_as_boolean": ("accel", "t", lambda v: pa.array([x > 0 for x in v]), ("bool", "numbers")),
    "time_with_null": ("coil", "t", lambda v: pa.array(with_null(v), pa.float64()), ("null",)),
    "truth_as_text": ("truth", "db_x", lambda v: pa.array([str(x) for x in v]), ("string",)),
}


@pytest.mark.parametrize("case", sorted(BAD_COLUMNS))
def test_wrong_column_type_in_a_raw_table_is_named(case, raw_dir):
    table, column, make, needles = BAD_COLUMNS[case]
    f = set_column(raw_dir, table, column, make)
    load_fails(raw_dir, str(f), f"column '{column}'", *needles)


def test_exact_integer_floats_and_zero_one_integers_are_accepted(sweep, raw_dir):
    set_column(raw_dir, "poses", "pose_id", lambda v: pa.array([float(x) for x in v]))
    set_column(raw_dir, "coil", "on", lambda v: pa.array([int(x) for x in v], pa.int8()))
    set_column(raw_dir, "mag", "t", lambda v: pa.array(v, pa.float32()).cast(pa.float64()))
    loaded = RawSweep.load(raw_dir)
    assert loaded.pose_id.dtype == np.int64 and loaded.coil_on.dtype == bool
    np.testing.assert_array_equal(loaded.pose_id, sweep.pose_id)
    np.testing.assert_array_equal(loaded.coil_on, sweep.coil_on)


def test_null_reading_is_a_failed_conversion(sweep, raw_dir):
    set_column(raw_dir, "mag", "my", lambda v: pa.array(with_null(v, 5), pa.float64()))
    loaded = RawSweep.load(raw_dir)
    assert np.isnan(loaded.mag[5, 1]) and np.isfinite(np.delete(loaded.mag, 5, axis=0)).all()


@pytest.mark.parametrize("text, kind", [("[1, 2]", "array"), ('"rig"', "string"), ("7", "number"), ("null", "null")])
def test_raw_metadata_that_is_not_an_object_is_named(raw_dir, text, kind):
    (raw_dir / "meta.json").write_text(text)
    load_fails(raw_dir, str(raw_dir / "meta.json"), "raw sweep metadata", f"JSON {kind}", "expected a JSON object")


def test_process_command_names_a_null_coil_state(raw_dir, tmp_path):
    """Class 1 through the console command: before, the null read as "off" and a dataset was written."""
    f = set_column(raw_dir, "coil", "on", lambda v: pa.array(with_null(v, 2), pa.bool_()))
    out = tmp_path / "x.parquet"
    proc = run_console("flexlearn-process", tmp_path, f"input={raw_dir}", f"output={out}")
    assert_clean_failure(proc, str(f), "column 'on'", "null", "row 2")
    assert not out.exists()


def test_process_command_names_a_text_column_and_non_object_metadata(sweep, tmp_path):
    """Class 2 through the console command: before, a ValueError / AttributeError traceback and exit 1."""
    text_dir = sweep.save(tmp_path / "raw_text")
    f = set_column(text_dir, "mag", "mz", lambda v: pa.array(["n/a"] * len(v)))
    proc = run_console("flexlearn-process", tmp_path, f"input={text_dir}", f"output={tmp_path / 'x.parquet'}")
    assert_clean_failure(proc, str(f), "column 'mz'", "'n/a'")
    meta_dir = sweep.save(tmp_path / "raw_meta")
    (meta_dir / "meta.json").write_text("[]")
    proc = run_console("flexlearn-process", tmp_path, f"input={meta_dir}", f"output={tmp_path / 'x.parquet'}")
    assert_clean_failure(proc, str(meta_dir / "meta.json"), "JSON array")
    assert not (tmp_path / "x.parquet").exists()


# ---------------------------------------------------------------------------------------------- datasets
@pytest.fixture(scope="module")
def ds() -> DirectionDataset:
    return process_sweep(make_sweep(12, hold=0.45, gap=0.05)).dataset


def rewrite(path: Path, table_fn=lambda t: t, meta_text=None) -> None:
    table = pq.read_table(path)
    if meta_text is not None:
        table = table.replace_schema_metadata({METADATA_KEY: meta_text.encode()})
    pq.write_table(table_fn(table), path)


@pytest.mark.parametrize("text, kind", [("[1, 2]", "array"), ('"x"', "string"), ("3", "number")])
def test_dataset_metadata_that_is_not_an_object_is_named(ds, tmp_path, text, kind):
    path = ds.save(tmp_path / "d.parquet")
    rewrite(path, meta_text=text)
    with pytest.raises(DataError, match=rf"d\.parquet: 'flexlearn' metadata is a JSON {kind} .*expected a JSON object"):
        DirectionDataset.load(path)


def test_dataset_units_that_are_not_an_object_are_named(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    meta = json.loads(pq.read_table(path).schema.metadata[METADATA_KEY])
    rewrite(path, meta_text=json.dumps({**meta, "units": "SI"}))
    with pytest.raises(DataError, match=r"d\.parquet: 'units' .* is 'SI', expected a JSON object"):
        DirectionDataset.load(path)


def test_dataset_count_beyond_int64_is_named(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    huge = pa.array([2**63 + int(n) for n in ds.n_coil_on], pa.uint64())
    rewrite(path, table_fn=lambda t: t.set_column(t.column_names.index("n_coil_on"), "n_coil_on", huge))
    with pytest.raises(
        DataError, match=r"d\.parquet: column 'n_coil_on' has value \d+ beyond the int64 range at row 0"
    ):
        DirectionDataset.load(path)


def test_dataset_null_value_is_named(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    col = pa.array(with_null(ds.delta_b[:, 2].tolist(), 3), pa.float64())
    rewrite(path, table_fn=lambda t: t.set_column(t.column_names.index("delta_b_z"), "delta_b_z", col))
    with pytest.raises(DataError, match=r"d\.parquet: column 'delta_b_z' has a missing \(null\) value at row 3"):
        DirectionDataset.load(path)


# ---------------------------------------------------------------------------------------------- the check itself
@pytest.mark.parametrize(
    "values, kind, expected",
    [
        (pa.array([1, 2]), "float", np.array([1.0, 2.0])),
        (pa.array([1.0, None]), "int", None),
        (pa.array([3.0, -4.0]), "int", np.array([3, -4])),
        (pa.array([1, 0], pa.uint8()), "bool", np.array([True, False])),
        (pa.array(["a", "b"]).dictionary_encode(), "str", np.array(["a", "b"], dtype=object)),
        (pa.chunked_array([[1.5], [2.5]]), "int", None),
        (pa.array([float("nan")]), "int", None),
        (pa.array([float("inf")]), "bool", None),
        (pa.array([None, None]), "float", None),
        (pa.array([[1.0]]), "float", None),
    ],
)
def test_column_values(values, kind, expected):
    from flexlearn.tables import column_values

    if expected is None:
        with pytest.raises(DataError, match=r"^f\.parquet: column 'c' .*expected"):
            column_values(values, kind, "f.parquet", "c")
    else:
        out = column_values(values, kind, "f.parquet", "c")
        assert out.dtype == expected.dtype
        np.testing.assert_array_equal(out, expected)
