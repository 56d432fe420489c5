"""Hostile input to the stream registry (`flexlearn.sensing.streams`) and to ``_target_`` selection
(`flexlearn.config.target_class`): every bad declaration, table or target is an error naming it, and no table
already written is lost by a load and re-save."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import flexlearn.config
from flexlearn.atomic import OutputPathError
from flexlearn.data.process import process_sweep
from flexlearn.errors import CheckpointError, ConfigError, DataError
from flexlearn.jobs.training_parts import build_task
from flexlearn.sensing.stream_schema import Field, StreamSchema, time_field
from flexlearn.sensing.streams import RawSweep, quantize_times, register_stream, unregister_stream
from flexlearn.sim.rig import simulate_sweep
from flexlearn.tasks.checkpoints import load_direction_model
from flexlearn.tasks.direction_model import model_spec

MLP = "flexlearn.models.direction_mlp.DirectionMLP"
HUMID = StreamSchema("humid", (time_field(), Field("rh", unit="1")), continuous=True, per_pose=True)


@pytest.fixture(scope="module")
def raw() -> RawSweep:
    sweep = quantize_times(simulate_sweep({"n_poses": 8, "seed": 1}))
    sweep.meta.pop("tumble", None)
    return sweep


@pytest.fixture
def humid():
    register_stream(HUMID)
    yield HUMID
    unregister_stream("humid")


def with_humid(raw: RawSweep, rh: np.ndarray) -> RawSweep:
    return RawSweep(streams={**raw.streams, "humid": {"t": np.arange(float(rh.size)), "rh": rh}}, meta=dict(raw.meta))


@pytest.mark.parametrize(
    "fields, attrs, needle",
    [
        ((time_field(), Field("a", ("c", "c"))), (), r"field or column name\(s\) \['c'\] repeated"),
        ((time_field(), Field("v", ("t",))), (), r"field or column name\(s\) \['t'\] repeated"),  # over the time
        ((time_field(), Field("v"), Field("v")), (), r"field or column name\(s\) \['v'\] repeated"),
        ((time_field(), Field("v", ("",))), (), r"field\(s\) \['v'\].*non-blank column"),
        ((time_field(), Field("a/b")), (), r"field\(s\) \['a/b'\]"),
        ((Field("t", kind="bool"),), (), "field 't' is the sample time"),
        ((time_field(),), (("zz", "nope"),), r"attribute\(s\) \['zz'\] name no field"),
    ],
)
def test_register_refuses_layouts_that_cannot_be_one_table(fields, attrs, needle):
    with pytest.raises(ConfigError, match=rf"stream 'bad': {needle}"):
        register_stream(StreamSchema("bad", fields, attrs=attrs))
    with pytest.raises(ConfigError, match="not registered"):
        from flexlearn.sensing.streams import stream_schema

        stream_schema("bad")


@pytest.mark.parametrize("name", ["../x", "a/b", "", "x.parquet"])
def test_register_refuses_path_like_names(name):
    with pytest.raises(ConfigError, match="expected an identifier"):
        register_stream(StreamSchema(name, (time_field(),)))


def test_register_refuses_a_name_that_is_another_file_on_case_insensitive_disks():
    with pytest.raises(ConfigError, match=r"stream 'Mag': its file Mag\.parquet is mag\.parquet"):
        register_stream(StreamSchema("Mag", (time_field(),)))


def test_per_pose_column_named_like_a_dataset_column_is_refused(raw):
    register_stream(StreamSchema("label", (time_field(), Field("x", unit="1")), per_pose=True))
    try:
        sweep = RawSweep(streams={**raw.streams, "label": {"t": np.arange(5.0), "x": np.arange(5.0)}}, meta=raw.meta)
        with pytest.raises(ConfigError, match="stream 'label', column 'x': its per-pose column 'label_x' is one of"):
            process_sweep(sweep)
    finally:
        unregister_stream("label")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_value_in_a_non_nullable_field_is_named(raw, humid, tmp_path, bad):
    with pytest.raises(DataError, match=rf"stream 'humid': field 'rh' has the non-finite value {bad} at index 2"):
        with_humid(raw, np.array([0.1, 0.2, bad, 0.3]))
    good = with_humid(raw, np.array([0.1, 0.2, 0.25, 0.3])).save(tmp_path / "raw")
    table = pq.read_table(good / "humid.parquet")
    pq.write_table(table.set_column(1, "rh", pa.array([0.1, 0.2, bad, 0.3])), good / "humid.parquet")
    with pytest.raises(DataError, match=rf"{tmp_path / 'raw'}: stream 'humid': field 'rh' has the non-finite value"):
        RawSweep.load(good)


def test_per_pose_stream_without_samples_gives_nan_columns(raw, humid):
    ds = process_sweep(with_humid(raw, np.zeros(0))).dataset
    assert ds.per_pose["humid_rh"].shape == ds.pose_id.shape and np.isnan(ds.per_pose["humid_rh"]).all()


def test_table_of_a_registered_stream_missing_a_column_names_file_and_column(raw, humid, tmp_path):
    d = with_humid(raw, np.full(4, 0.2)).save(tmp_path / "raw")
    pq.write_table(pq.read_table(d / "humid.parquet").drop(["rh"]), d / "humid.parquet")
    with pytest.raises(DataError, match=r"humid\.parquet: missing column\(s\) \['rh'\]"):
        RawSweep.load(d)


def test_table_of_an_unregistered_stream_survives_load_and_resave(raw, tmp_path):
    register_stream(HUMID)
    try:
        d = with_humid(raw, np.linspace(0.1, 0.4, 4)).save(tmp_path / "raw")
    finally:
        unregister_stream("humid")
    before = (d / "humid.parquet").read_bytes()
    loaded = RawSweep.load(d)  # a process that never registered 'humid'
    assert "humid" not in loaded.streams and set(loaded.unregistered) == {"humid"}
    loaded.save(d)  # over the directory it came from
    quantize_times(loaded).save(tmp_path / "copy")  # and a derived copy elsewhere
    assert (d / "humid.parquet").read_bytes() == before
    register_stream(HUMID)
    try:
        np.testing.assert_array_equal(RawSweep.load(tmp_path / "copy").streams["humid"]["rh"], np.linspace(0.1, 0.4, 4))
    finally:
        unregister_stream("humid")


def test_saving_a_stream_unregistered_since_is_named_and_writes_nothing(raw, tmp_path):
    register_stream(HUMID)
    sweep = with_humid(raw, np.full(4, 0.2))
    unregister_stream("humid")
    with pytest.raises(DataError, match=r"raw sweep to save: stream 'humid' is not registered"):
        sweep.save(tmp_path / "raw")
    assert not (tmp_path / "raw").exists()


def test_resave_never_replaces_a_directory_flexlearn_did_not_write(raw, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(OutputPathError, match="did not write"):
        raw.save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    d = raw.save(tmp_path / "raw")
    raw.save(d)  # a flexlearn directory is replaced as a whole
    assert RawSweep.load(d).mag.shape == raw.mag.shape


def test_resave_refuses_to_drop_a_users_files_in_a_sweep_directory(raw, tmp_path):
    d = raw.save(tmp_path / "raw")
    (d / "notes.txt").write_text("keep")
    (d / "figures").mkdir()
    with pytest.raises(DataError, match=r"lose \['figures', 'notes.txt'\]"):
        raw.save(d)
    assert (d / "notes.txt").read_text() == "keep" and (d / "figures").is_dir()
    assert RawSweep.load(d).mag.shape == raw.mag.shape  # the sweep itself untouched


@pytest.fixture
def broken_module():
    """A module inside flexlearn whose import fails; its text is set by the test."""
    from pathlib import Path

    path = Path(flexlearn.config.__file__).parent / "_hostile_target_probe.py"
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.parametrize(
    "target, needle",
    [
        (f" {MLP}", "dotted path of names"),
        (f"{MLP} ", "dotted path of names"),
        ("flexlearn..DirectionMLP", "dotted path of names"),
        ("flexlearn.models.", "dotted path of names"),
        ("flexlearn.config.to_dict", r"no such class \(it names a function\)"),
        ("flexlearn.errors.ConfigError", "subclass of torch.nn"),
        (["flexlearn", "x"], "required: the dotted path"),
    ],
)
def test_bad_target_strings_are_named(target, needle):
    with pytest.raises(ConfigError, match=rf"config 'model\._target_' = .*{needle}"):
        model_spec({"_target_": target})


@pytest.mark.parametrize(
    "text, needle",
    [
        ("raise RuntimeError('boom at import')\n", r"RuntimeError: boom at import"),
        ("import no_such_dependency_xyz\nclass X: pass\n", "No module named 'no_such_dependency_xyz'"),
        ("def f(:\n", "SyntaxError"),
    ],
)
def test_target_module_failing_on_import_is_a_config_error(broken_module, text, needle):
    broken_module.write_text(text)
    with pytest.raises(ConfigError, match=rf"importing flexlearn\._hostile_target_probe failed \(.*{needle}"):
        model_spec({"_target_": "flexlearn._hostile_target_probe.X"})


@pytest.mark.parametrize(
    "model, needle",
    [
        ({"_target_": ["flexlearn", "models"]}, r"_target_' = \['flexlearn', 'models'\]: required"),
        ({"_target_": MLP, "hidden": "wide"}, "hidden"),
        ({"_target_": MLP, "widht": 3}, r"unknown key\(s\) \['widht'\]"),
    ],
)
def test_tampered_checkpoint_targets_are_checkpoint_errors(tmp_path, model, needle):
    path = tmp_path / "t.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"model": model}}, path)
    with pytest.raises(CheckpointError, match=rf"t\.ckpt: .*{needle}"):
        load_direction_model(path)


def test_cli_target_null_is_named(compose_cfg):
    with pytest.raises(ConfigError, match=r"model\._target_' = None: required"):
        build_task(compose_cfg("train", ["model._target_=null"]))
