"""Recordings written by other loggers (rosbags' own Writer, the csv module, JSON lines by hand): the hand tumble in
every format, optional streams skipped with one line, unit mistakes named with the override that fixes them (and
that override working), the dry run ``inspect=true``, and bad paths."""

from __future__ import annotations

import copy
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from flexlearn.data.dataset import DirectionDataset
from flexlearn.data.process import process_sweep
from flexlearn.errors import ConfigError, DataError
from flexlearn.ingest import topic_map
from flexlearn.ingest.recording import ingest_recording
from flexlearn.sensing.streams import quantize_times

from .conftest import assert_clean_failure, run_app
from .loggers import Logger, write_bag, write_csv, write_jsonl

SERIAL = Logger(field_per_tesla=1e6, accel_per_si=1.0 / 9.80665)  # what the shipped serial map reads: µT, g


@pytest.fixture(scope="module")
def direct(sim_raw):
    """The sweep processed directly, its hand tumble applied (W)."""
    return process_sweep(quantize_times(sim_raw)).dataset


def _write(raw, root: Path, fmt: str, opt: Logger | None = None) -> tuple[Path, str]:
    """A recording of ``raw`` in format ``fmt`` by another logger, and the map that reads it."""
    if fmt in ("mcap", "sqlite3"):
        return write_bag(raw, root / f"bag_{fmt}", fmt, opt), "rig_ros2_bool"
    writer = write_csv if fmt == "csv" else write_jsonl
    return writer(raw, root / f"dump.{fmt}", opt or SERIAL), "serial"


def _assert_close_pairs(ds, ref) -> None:
    np.testing.assert_array_equal(ds.pose_id, ref.pose_id)
    np.testing.assert_allclose(ds.delta_b, ref.delta_b, rtol=1e-9, atol=1e-18)
    np.testing.assert_allclose(ds.label, ref.label, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("fmt", ["mcap", "sqlite3", "csv", "jsonl"])
def test_every_format_carries_the_hand_tumble(fmt, sim_raw, direct, tmp_path):
    rec, name = _write(sim_raw, tmp_path, fmt)
    out = ingest_recording(rec, tmp_path / "out", topic_map(name), report=False)
    ds = DirectionDataset.load(out.dataset)
    assert ds.meta["calibration"] is not None and direct.meta["calibration"] is not None
    np.testing.assert_allclose(ds.meta["calibration"]["W"], direct.meta["calibration"]["W"], rtol=1e-9, atol=1e-12)
    _assert_close_pairs(ds, direct)
    assert "tumble" in ds.meta["source"]["tumble"]["source"] and out.summary["streams"]["messages"]["tumble"] == 400


@pytest.mark.parametrize("fmt", ["mcap", "csv"])
def test_tumble_from_a_separate_recording(fmt, sim_raw, direct, tmp_path):
    """``ingest.tumble_recording``: the tumble recorded on its own, on the magnetometer's topic (record kind)."""
    main, name = _write(sim_raw, tmp_path, fmt, Logger(tumble=False) if fmt == "mcap" else _serial(tumble=False))
    tumble_dir = tmp_path / "tumble"
    tumble_dir.mkdir()
    if fmt == "mcap":  # only the tumble, published on the magnetometer topic
        opt = Logger(leave_out=("mag", "imu", "coil", "poses"))
        opt.topics["tumble"] = opt.topics["mag"]
        tumble = write_bag(sim_raw, tumble_dir / "tumble_m1", "mcap", opt)
    else:
        lines = [line for line in write_csv(sim_raw, tumble_dir / "all.csv", SERIAL).read_text().splitlines()]
        tumble = tumble_dir / "tumble.csv"
        tumble.write_text("\n".join([lines[0]] + [ln.replace(",tumble,", ",mag,") for ln in lines if ",tumble," in ln]))
    tm = topic_map(name, [f"ingest.tumble_recording={tumble}"])
    ds = DirectionDataset.load(ingest_recording(main, tmp_path / "out", tm, report=False).dataset)
    np.testing.assert_allclose(ds.meta["calibration"]["W"], direct.meta["calibration"]["W"], rtol=1e-9, atol=1e-12)
    _assert_close_pairs(ds, direct)


def _serial(**kw) -> Logger:
    return Logger(**{"field_per_tesla": 1e6, "accel_per_si": 1.0 / 9.80665, **kw})


def test_missing_optional_streams_are_skipped_with_one_line_each(sim_raw, tmp_path, caplog):
    bag = write_bag(sim_raw, tmp_path / "bag", "mcap", Logger(tumble=False, coil_custom=True))
    with caplog.at_level(logging.WARNING, logger="flexlearn.ingest"):
        out = ingest_recording(bag, tmp_path / "out", topic_map("rig_ros2"), report=False)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 2, lines
    assert any("'/mocap/m1/pose'" in ln and "ingest.topics.mocap=null" in ln for ln in lines)
    assert any("'/flexlearn/m1/tumble'" in ln and "ingest.topics.tumble=null" in ln for ln in lines)
    assert set(out.summary["streams"]["skipped"]) == {"mocap", "tumble"}
    assert DirectionDataset.load(out.dataset).meta["calibration"] is None  # no tumble: W = identity


def test_an_optional_topic_of_another_type_names_the_override_that_drops_it(sim_raw, tmp_path):
    opt = Logger(coil_custom=True)
    opt.topics["tumble"] = "/mocap/m1/pose"  # a MagneticField on the motion-capture topic
    bag = write_bag(sim_raw, tmp_path / "bag", "mcap", opt)
    tm = topic_map("rig_ros2", ["ingest.topics.tumble=null"])
    with pytest.raises(DataError, match=r"carries sensor_msgs/msg/MagneticField.*ingest.topics.mocap=null"):
        ingest_recording(bag, tmp_path / "out", tm, report=False)
    tm = topic_map("rig_ros2", ["ingest.topics.tumble=null", "ingest.topics.mocap=null"])
    assert ingest_recording(bag, tmp_path / "out", tm, report=False).dataset.is_file()


def test_a_required_topic_under_another_name_names_the_topic_override(sim_raw, tmp_path):
    opt = Logger()
    opt.topics["mag"] = "/m1/mag"
    bag = write_bag(sim_raw, tmp_path / "bag", "mcap", opt)
    with pytest.raises(DataError, match=r"'/flexlearn/m1/magnetic_field'.*ingest.topics.mag.topic=/m1/mag$"):
        ingest_recording(bag, tmp_path / "out", topic_map("rig_ros2_bool"), report=False)
    tm = topic_map("rig_ros2_bool", ["ingest.topics.mag.topic=/m1/mag"])
    assert ingest_recording(bag, tmp_path / "out", tm, report=False).dataset.is_file()


def _fix_until_ingested(rec: Path, name: str, out: Path, expect: list[str]) -> list[str]:
    """Ingest, applying the ``set key=value ...`` each error ends in, until it goes through; return the overrides."""
    overrides: list[str] = []
    for _ in range(4):
        try:
            ingest_recording(rec, out, topic_map(name, overrides), report=False)
            return overrides
        except DataError as exc:
            assert "\n" not in str(exc)
            m = re.search(r"set ((?:\S+=\S+ ?)+)$", str(exc))
            assert m, str(exc)
            overrides += m[1].split()
    raise AssertionError(f"still failing after {overrides}")


UNIT_CASES = {
    "mT": (
        _serial(),
        dict(field_per_tesla=1e3),
        ["ingest.serial.streams.mag.unit=mT", "ingest.serial.streams.tumble.unit=mT"],
    ),
    "gauss": (
        _serial(),
        dict(field_per_tesla=1e4),
        ["ingest.serial.streams.mag.unit=G", "ingest.serial.streams.tumble.unit=G"],
    ),
    "T": (
        _serial(),
        dict(field_per_tesla=1.0),
        ["ingest.serial.streams.mag.unit=T", "ingest.serial.streams.tumble.unit=T"],
    ),
    "nT": (
        _serial(),
        dict(field_per_tesla=1e9),
        ["ingest.serial.streams.mag.unit=nT", "ingest.serial.streams.tumble.unit=nT"],
    ),
    "m/s2": (_serial(), dict(accel_per_si=1.0), ["ingest.serial.streams.accel.unit=m/s2"]),
    "mg": (_serial(), dict(accel_per_si=1e3 / 9.80665), ["ingest.serial.streams.accel.unit=mg"]),
    "ms": (_serial(), dict(time_unit="ms"), ["ingest.serial.time_unit=ms"]),
    "us": (_serial(), dict(time_unit="us"), ["ingest.serial.time_unit=us"]),
    "ns": (_serial(), dict(time_unit="ns"), ["ingest.serial.time_unit=ns"]),
}


@pytest.mark.parametrize("case", sorted(UNIT_CASES))
def test_serial_unit_mistakes_name_the_override_that_fixes_them(case, sim_raw, direct, tmp_path):
    base, change, expect = UNIT_CASES[case]
    opt = Logger(**{**base.__dict__, **change})
    rec = write_csv(sim_raw, tmp_path / "dump.csv", opt)
    assert _fix_until_ingested(rec, "serial", tmp_path / "out", expect) == expect
    _assert_close_pairs(DirectionDataset.load(tmp_path / "out" / "dataset.parquet"), direct)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_rosbag_field_in_microtesla_names_the_topic_unit_key(storage, sim_raw, direct, tmp_path):
    bag = write_bag(sim_raw, tmp_path / "bag", storage, Logger(field_per_tesla=1e6))
    expect = ["ingest.topics.mag.unit=uT", "ingest.topics.tumble.unit=uT"]
    assert _fix_until_ingested(bag, "rig_ros2_bool", tmp_path / "out", expect) == expect
    _assert_close_pairs(DirectionDataset.load(tmp_path / "out" / "dataset.parquet"), direct)


def test_imu_in_g_and_a_wrong_declared_rate_name_their_keys(sim_raw, direct, tmp_path):
    bag = write_bag(sim_raw, tmp_path / "bag", "mcap", Logger(accel_per_si=1.0 / 9.80665))
    tm = ["ingest.topics.mag.rate_hz=50"]
    with pytest.raises(
        DataError, match=r"200\.0\d* Hz, but ingest.topics.mag.rate_hz = 50; set ingest.topics.mag.rate_hz=200"
    ):
        ingest_recording(bag, tmp_path / "out", topic_map("rig_ros2_bool", tm), report=False)
    tm = ["ingest.topics.mag.rate_hz=200"]
    with pytest.raises(DataError, match=r"median \|specific force\| 0\.99.*set ingest.topics.imu.unit=g$"):
        ingest_recording(bag, tmp_path / "out", topic_map("rig_ros2_bool", tm), report=False)
    out = ingest_recording(
        bag, tmp_path / "out", topic_map("rig_ros2_bool", [*tm, "ingest.topics.imu.unit=g"]), report=False
    )
    assert any("unit=g, converted to m/s^2" in line for line in out.summary["streams"]["conversions"])
    _assert_close_pairs(DirectionDataset.load(out.dataset), direct)


def test_unit_errors_from_the_command_line_are_one_line(sim_raw, tmp_path):
    rec = write_csv(sim_raw, tmp_path / "ms.csv", _serial(time_unit="ms"))
    proc = run_app("ingest", tmp_path, f"input={rec}", f"output={tmp_path / 'out'}", "ingest=serial")
    assert_clean_failure(proc, str(rec), "records of kind 'mag'", "set ingest.serial.time_unit=ms")
    assert not (tmp_path / "out").exists()
    proc = run_app("ingest", tmp_path, f"input={rec}", "ingest=rig_ros2", "ingest.topics.mag.unit=uTT")
    assert_clean_failure(proc, "ingest.topics.mag.unit", "'uTT'", "uT")


def test_unknown_units_and_keys_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"ingest.serial.time_unit' = 'min'"):
        topic_map("serial", ["ingest.serial.time_unit=min"])
    with pytest.raises(ConfigError, match=r"ingest.topics.coil.unit' = 'T'.*no field a unit applies to"):
        topic_map("rig_ros2", ["+ingest.topics.coil.unit=T"])
    with pytest.raises(ConfigError, match=r"ingest.topics.mag.rate_unit.*only an 'imu' topic"):
        topic_map("rig_ros2", ["+ingest.topics.mag.rate_unit=deg/s"])


def test_inspect_lists_topics_streams_rates_units_and_what_is_missing(sim_raw, tmp_path):
    bag = write_bag(sim_raw, tmp_path / "bag", "sqlite3", Logger(coil_custom=True, field_per_tesla=1e6))
    out = tmp_path / "never"
    proc = run_app("ingest", tmp_path, f"input={bag}", f"output={out}", "inspect=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout
    assert "rosbag2 (db3), 6 topics" in text and "nothing written" in text
    rows = {ln.split()[0]: ln for ln in text.splitlines() if ln.startswith("  /")}
    assert rows["/flexlearn/m1/magnetic_field"].split()[1:5] == [
        "sensor_msgs/msg/MagneticField",
        str(len(sim_raw.mag_t)),
        "200",
        "mag",
    ]
    assert "set ingest.topics.mag.unit=uT" in rows["/flexlearn/m1/magnetic_field"]
    assert rows["/flexlearn/m1/imu"].split()[2:5] == [str(len(sim_raw.accel_t)), "100", "imu"]
    assert "ok" in rows["/flexlearn/m1/imu"] and rows["/flexlearn/rig/hold"].split()[2] == str(len(sim_raw.pose_id))
    assert "missing: /mocap/m1/pose (stream 'mocap', optional: skipped)" in text
    assert not out.exists()


def test_inspect_of_a_serial_dump_names_the_unit_fix(sim_raw, tmp_path):
    rec = write_jsonl(sim_raw, tmp_path / "d.jsonl", _serial(field_per_tesla=1e3, tumble=False))
    proc = run_app("ingest", tmp_path, f"input={rec}", "ingest=serial", "inspect=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WRONG UNIT" in proc.stdout and "set ingest.serial.streams.mag.unit=mT" in proc.stdout
    assert "missing: tumble (stream 'tumble', optional: skipped)" in proc.stdout


def test_empty_and_bare_directories_are_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"empty: the directory is empty; expected a rosbag2 recording"):
        ingest_recording(tmp_path / "empty", tmp_path / "out", topic_map("rig_ros2"))
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "x_0.mcap").write_bytes(b"\x89MCAP0\r\n")
    with pytest.raises(DataError, match=r"holds \['x_0.mcap'\] but no metadata.yaml"):
        ingest_recording(tmp_path / "bare", tmp_path / "out", topic_map("rig_ros2"))
    proc = run_app("ingest", tmp_path, f"input={tmp_path / 'empty'}", "inspect=true")
    assert_clean_failure(proc, "the directory is empty")


def test_a_poor_tumble_names_its_source_and_how_to_go_without_it(sim_raw, tmp_path):
    raw = copy.copy(sim_raw)
    raw.meta = {**sim_raw.meta, "tumble": {"mag": sim_raw.meta["tumble"]["mag"][:30]}}
    bag = write_bag(raw, tmp_path / "bag", "mcap")
    with pytest.raises(DataError, match=r"topic '/flexlearn/m1/tumble'.*30 finite tumble readings.*tumble=null"):
        ingest_recording(bag, tmp_path / "out", topic_map("rig_ros2_bool"), report=False)
    rec = write_csv(raw, tmp_path / "d.csv", SERIAL)
    proc = run_app("ingest", tmp_path, f"input={rec}", f"output={tmp_path / 'out'}", "ingest=serial")
    assert_clean_failure(proc, "records of kind 'tumble'", "30 finite", "ingest.serial.streams.tumble=null")
    assert not (tmp_path / "out").exists()


def test_a_missing_or_mismatched_tumble_recording_names_the_key(sim_raw, tmp_path):
    bag = write_bag(sim_raw, tmp_path / "bag", "mcap", Logger(tumble=False))
    with pytest.raises(DataError, match=r"'ingest.tumble_recording' = '.*nowhere': recording not found"):
        ingest_recording(
            bag, tmp_path / "out", topic_map("rig_ros2_bool", [f"ingest.tumble_recording={tmp_path}/nowhere"])
        )
    dump = write_csv(sim_raw, tmp_path / "t.csv", SERIAL)
    tm = topic_map("rig_ros2_bool", [f"ingest.tumble_recording={dump}"])
    with pytest.raises(ConfigError, match=r"ingest.tumble_recording.*a csv recording, but the map.*rosbag2"):
        ingest_recording(bag, tmp_path / "out", tm, report=False)


def test_inspect_reads_a_separate_tumble_recording(sim_raw, tmp_path):
    rec = write_csv(sim_raw, tmp_path / "d.csv", _serial(tumble=False))
    proc = run_app(
        "ingest", tmp_path, f"input={rec}", "ingest=serial", f"ingest.tumble_recording={rec}", "inspect=true"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"tumble: from the separate recording {rec} (ingest.tumble_recording): {len(sim_raw.mag_t)} readings" in (
        proc.stdout
    )
    assert "missing:" not in proc.stdout  # the recording's own tumble records are not looked for
