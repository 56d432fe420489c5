"""Dataset file format: round trip, validation errors that name file/column/value, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import flexlearn
from flexlearn.data import dataset as dataset_mod
from flexlearn.data.dataset import DATASET_SCHEMA_VERSION, METADATA_KEY, SPLITS, DirectionDataset, assign_splits
from flexlearn.data.process import process_sweep
from flexlearn.errors import DataError
from tests.data.streams_factory import make_sweep


@pytest.fixture(scope="module")
def ds() -> DirectionDataset:
    return process_sweep(make_sweep(30, hold=0.45, gap=0.05)).dataset


def rewrite(path: Path, table_fn=lambda t: t, meta_fn=lambda m: m) -> None:
    """Rewrite a saved dataset with its table and/or its flexlearn metadata changed."""
    table = pq.read_table(path)
    meta = meta_fn(json.loads(table.schema.metadata[METADATA_KEY]))
    table = table_fn(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}))
    pq.write_table(table, path)


def set_column(table: pa.Table, name: str, values) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values))


def test_round_trip(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    back = DirectionDataset.load(path)
    for name in ("pose_id", "delta_b", "label", "split", "n_coil_on", "truth_label", "truth_u", "truth_delta_b"):
        np.testing.assert_array_equal(getattr(back, name), getattr(ds, name), err_msg=name)
    assert back.pose_id.dtype == np.int64 and back.delta_b.dtype == np.float64
    meta = back.meta
    assert meta["schema_version"] == DATASET_SCHEMA_VERSION and meta["flexlearn_version"] == flexlearn.__version__
    assert meta["units"]["delta_b_x"] == "T" and meta["units"]["label_z"] == "1"
    assert meta["source"]["rig"] == {"pivot_spacing_m": 0.029}
    assert meta["provenance"]["generator"] == "streams_factory"
    assert meta["processing"]["settle_time"] == 0.015 and meta["processing"]["split_fractions"] == [0.8, 0.1, 0.1]
    assert meta["report"]["n_kept"] == 30 and "created" in meta
    assert set(pq.read_table(path).column_names) >= {"pose_id", "delta_b_x", "label_y", "split", "truth_u_z"}


def test_round_trip_without_truth(ds, tmp_path):
    plain = DirectionDataset(ds.pose_id, ds.delta_b, ds.label, ds.split, ds.n_coil_on, meta={"note": 1})
    back = DirectionDataset.load(plain.save(tmp_path / "plain.parquet"))
    assert back.truth_label is None and back.truth_u is None and back.meta["note"] == 1
    np.testing.assert_array_equal(back.delta_b, ds.delta_b)


def test_subset(ds):
    parts = {s: ds.subset(s) for s in SPLITS}
    assert sum(len(p) for p in parts.values()) == len(ds)
    for name, part in parts.items():
        assert np.all(part.split == name)
        np.testing.assert_array_equal(part.delta_b, ds.delta_b[ds.split == name])
    with pytest.raises(DataError, match="unknown split 'training'"):
        ds.subset("training")


def test_assign_splits_fractions_and_determinism():
    ids = np.arange(20_000)
    s = assign_splits(ids, (0.8, 0.1, 0.1), seed=3)
    np.testing.assert_array_equal(s, assign_splits(ids, (0.8, 0.1, 0.1), seed=3))
    np.testing.assert_array_equal(s[5000:], assign_splits(ids[5000:], (0.8, 0.1, 0.1), seed=3))
    frac = [np.mean(s == name) for name in SPLITS]
    np.testing.assert_allclose(frac, [0.8, 0.1, 0.1], atol=0.015)
    assert np.mean(s != assign_splits(ids, (0.8, 0.1, 0.1), seed=4)) > 0.2
    assert set(assign_splits(ids, (1.0, 0.0, 0.0)).tolist()) == {"train"}


def test_constructor_validates(ds):
    with pytest.raises(DataError, match="column 'split' has value 'training' at row 0"):
        DirectionDataset(ds.pose_id, ds.delta_b, ds.label, np.full(len(ds), "training"), ds.n_coil_on)
    bad = ds.label.copy()
    bad[3] *= 1.01
    with pytest.raises(DataError, match=r"not unit vectors: norm 1.01.* row 3"):
        DirectionDataset(ds.pose_id, ds.delta_b, bad, ds.split, ds.n_coil_on)
    with pytest.raises(DataError, match="pose_id"):
        DirectionDataset(np.zeros(len(ds), int), ds.delta_b, ds.label, ds.split, ds.n_coil_on)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.parquet: dataset file not found"):
        DirectionDataset.load(tmp_path / "nope.parquet")


def test_a_directory_instead_of_the_dataset_file_says_what_to_give(ds, tmp_path):
    """A raw sweep or an ingested folder given where the dataset file belongs was "dataset file not found" although
    the path exists; the message now says what it is and what to give instead."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"empty: a directory, not a dataset file$"):
        DirectionDataset.load(empty)
    ds.save(tmp_path / "ingested" / "dataset.parquet")
    with pytest.raises(DataError, match=r"give the file in it, .*ingested/dataset\.parquet"):
        DirectionDataset.load(tmp_path / "ingested")
    make_sweep(5, hold=0.45, gap=0.05).save(tmp_path / "raw")
    with pytest.raises(DataError, match=r"raw sweep \(meta\.json\): process it first"):
        DirectionDataset.load(tmp_path / "raw")


def test_corrupt_file(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(DataError, match=r"d\.parquet: dataset file cannot be read as Parquet"):
        DirectionDataset.load(path)


def test_foreign_parquet_file(tmp_path):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    with pytest.raises(DataError, match="not a flexlearn dataset"):
        DirectionDataset.load(path)


def test_wrong_schema_version(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    rewrite(path, meta_fn=lambda m: {**m, "schema_version": 99})
    with pytest.raises(DataError, match=r"d\.parquet: schema_version 99 is not supported"):
        DirectionDataset.load(path)


def test_missing_column(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    rewrite(path, table_fn=lambda t: t.drop_columns(["label_y"]))
    with pytest.raises(DataError, match=r"missing column\(s\) \['label_y'\]"):
        DirectionDataset.load(path)


def test_nan_value(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    values = ds.delta_b[:, 1].copy()
    values[2] = np.nan
    rewrite(path, table_fn=lambda t: set_column(t, "delta_b_y", values))
    with pytest.raises(
        DataError,
        match=rf"d\.parquet: column 'delta_b_y' has non-finite value nan at row 2 "
        rf"\(pose_id {ds.pose_id[2]}\)",
    ):
        DirectionDataset.load(path)


def test_wrong_unit(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    rewrite(path, meta_fn=lambda m: {**m, "units": {**m["units"], "delta_b_z": "uT"}})
    with pytest.raises(DataError, match="column 'delta_b_z' has unit 'uT'.*expected 'T'"):
        DirectionDataset.load(path)


def test_wrong_column_type(ds, tmp_path):
    path = ds.save(tmp_path / "d.parquet")
    rewrite(path, table_fn=lambda t: set_column(t, "pose_id", ds.pose_id.astype(float)))
    with pytest.raises(DataError, match=r"column\(s\) \['pose_id'\] have dtype float64"):
        DirectionDataset.load(path)


def test_failed_save_leaves_previous_file_intact(ds, tmp_path, monkeypatch):
    path = ds.save(tmp_path / "d.parquet")
    before = path.read_bytes()

    def broken_write(table, where, **kw):
        Path(where).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(dataset_mod.pq, "write_table", broken_write)
    with pytest.raises(OSError, match="disk full"):
        ds.subset("train").save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.parquet"]
    assert len(DirectionDataset.load(path)) == len(ds)


def test_dataset_source_accepts_file_or_ingest_directory(ds, tmp_path):
    from flexlearn.data.sources import DataConfig, prepare_dataset

    saved = ds.save(tmp_path / "monday" / "dataset.parquet")
    for path in (saved, saved.parent):
        assert prepare_dataset(DataConfig(source="dataset", path=str(path)), tmp_path / "cache") == saved
    with pytest.raises(DataError, match=r"empty: dataset file not found \(data.path"):
        prepare_dataset(DataConfig(source="dataset", path=str(tmp_path / "empty")), tmp_path / "cache")


def test_a_cache_entry_another_job_writes_meanwhile_is_used(tmp_path, monkeypatch):
    """Two jobs of a sweep simulate the same cache entry at once: the one that commits second finds the other's
    directory where its own should go (the rename fails: directory not empty) and uses that entry."""
    import shutil

    import flexlearn.atomic as atomic
    from flexlearn.data.sources import DataConfig, prepare_dataset

    data = DataConfig(source="sim", sim={"n_poses": 30, "seed": 4})
    first = prepare_dataset(data, tmp_path / "first")  # what the other job wrote
    (entry,) = (tmp_path / "first" / "sweeps").iterdir()
    real_replace = atomic._replace

    def other_job_commits_first(src, dst):
        if dst.name == entry.name and not dst.exists():
            shutil.copytree(entry, dst)  # the other job's commit lands between this one's check and its rename
        real_replace(src, dst)

    monkeypatch.setattr(atomic, "_replace", other_job_commits_first)
    second = prepare_dataset(data, tmp_path / "second")
    assert second.name == first.name
    assert DirectionDataset.load(second).delta_b.tolist() == DirectionDataset.load(first).delta_b.tolist()
    assert not [p for p in (tmp_path / "second" / "sweeps").iterdir() if p.name.startswith(".")]  # no temporaries
