"""Ingesting recordings of a simulated sweep gives exactly the training pairs of the direct simulator path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flexlearn.data.dataset import DirectionDataset
from flexlearn.data.process import process_sweep
from flexlearn.ingest import topic_map
from flexlearn.ingest.recording import ingest_recording, read_recording
from flexlearn.ingest.topic_map import load_ingest_config
from flexlearn.ingest.writers import sweep_messages, write_rosbag, write_serial
from flexlearn.sensing.streams import RawSweep, quantize_times

from .conftest import assert_same_pairs


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bag_yields_the_direct_training_pairs(storage, recordings, ros_map, direct_dataset, sim_raw, tmp_path):
    out = ingest_recording(recordings[storage], tmp_path / "ds", ros_map, report=False)
    ds = DirectionDataset.load(out.dataset)
    assert_same_pairs(ds, direct_dataset)
    assert len(ds) < len(sim_raw.pose_id)  # the faults dropped some poses: the same ones on both paths
    # The raw streams are those of the sweep at nanosecond resolution, stale repeats and NaN polls included.
    raw, q = RawSweep.load(out.output / "raw"), quantize_times(sim_raw)
    for name in (
        "mag_t",
        "mag",
        "accel_t",
        "accel",
        "coil_t",
        "coil_on",
        "pose_id",
        "pose_t_start",
        "pose_t_end",
        "target",
    ):
        np.testing.assert_array_equal(getattr(raw, name), getattr(q, name), err_msg=name)
    assert np.isnan(raw.mag).any()


def test_ns_time_resolution_changes_the_pairs_negligibly(direct_dataset, sim_raw):
    exact = process_sweep(sim_raw).dataset  # times at full resolution, the same hand tumble
    np.testing.assert_array_equal(exact.pose_id, direct_dataset.pose_id)
    # |ΔB| ≈ 1e-4 T and the noise of one sample 6e-7 T: rounding stamps to 1 ns moves ΔB by ~1e-15 T.
    np.testing.assert_allclose(direct_dataset.delta_b, exact.delta_b, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(direct_dataset.label, exact.label)


def test_mocap_and_imu_extras(recordings, ros_map, sim_raw, tmp_path):
    out = ingest_recording(recordings["mcap"], tmp_path / "ds", ros_map, report=False)
    import pyarrow.parquet as pq

    mocap = pq.read_table(out.output / "raw" / "mocap.parquet")
    assert mocap.num_rows == len(sim_raw.pose_id)
    # the IMU reported no orientation: computed by the attitude filter, one per IMU message, and recorded so
    assert pq.read_table(out.output / "raw" / "orientation.parquet").num_rows == len(sim_raw.accel_t)
    note = json.loads((out.output / "raw" / "meta.json").read_text())["imu_orientation"]
    assert note["orientation"] == "computed" and note["mode"].startswith("accelerometer only"), note
    # the sweep has no gyroscope: its IMU messages mark the angular velocity as none (REP 145), so no 'rate'
    assert not (out.output / "raw" / "rate.parquet").exists()
    # The motion-capture direction per pose (R(q)·e averaged over the hold window) is the simulator's true one.
    from flexlearn.data.sessions import load_session

    u = load_session(out.output).directions()
    truth = np.stack([sim_raw.truth[f"u_{c}"] for c in "xyz"], axis=-1)
    np.testing.assert_allclose(u, truth, rtol=0, atol=1e-12)


def test_std_bool_coil_map_and_other_joint(tmp_path, sim_raw, direct_dataset):
    tm = topic_map("rig_ros2_bool", ["ingest.sensor_module=4", "ingest.coil_module=3"])
    specs = tm.topic_specs()
    assert specs["coil"].topic == "/flexlearn/m3/coil" and specs["mag"].topic == "/flexlearn/m4/magnetic_field"
    assert "mocap" not in specs
    msgs, store = sweep_messages(sim_raw, tm)
    bag = write_rosbag(tmp_path / "bag", msgs, store, "mcap")
    # Bool has no header: the coil switches carry the bag's receive time (stamp + latency), not the switch time.
    raw, _, _, _ = read_recording(bag, tm)
    shift = np.round((raw.coil_t - quantize_times(sim_raw).coil_t) * 1e9)
    assert np.all(shift == 2_000_000)


SI_SERIAL = {
    "format": "auto",
    "serial": {
        "time_field": "t",
        "time_unit": "s",
        "kind_field": "type",
        "streams": {
            "mag": {"kind": "mag", "fields": ["mx", "my", "mz"]},
            "accel": {"kind": "acc", "fields": ["ax", "ay", "az"]},
            "coil": {"kind": "coil", "fields": ["on"]},
            "poses": {"kind": "pose", "fields": ["pose_id", "t_start", "t_end", "tx", "ty", "tz"]},
            "tumble": {"kind": "tumble", "fields": ["mx", "my", "mz"], "unit": "T"},
        },
    },
}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_serial_dump_in_si_yields_the_direct_training_pairs(fmt, sim_raw, direct_dataset, tmp_path):
    tm = load_ingest_config(SI_SERIAL)
    dump = write_serial(quantize_times(sim_raw), tmp_path / f"dump.{fmt}", tm, fmt)
    out = ingest_recording(dump, tmp_path / "ds", tm, report=False)
    assert_same_pairs(DirectionDataset.load(out.dataset), direct_dataset)


def test_serial_dump_in_microtesla_and_g(sim_raw, direct_dataset, tmp_path):
    tm = topic_map("serial")
    dump = write_serial(quantize_times(sim_raw), tmp_path / "dump.csv", tm, "csv")
    head = dump.read_text().splitlines()[:40]
    assert head[0].startswith("t,type,mx,my,mz,ax,ay,az,on,pose_id")
    ds = DirectionDataset.load(ingest_recording(dump, tmp_path / "ds", tm, report=False).dataset)
    np.testing.assert_array_equal(ds.pose_id, direct_dataset.pose_id)
    # µT → T and g → m/s² once at ingest: equal up to the rounding of the two scalings.
    np.testing.assert_allclose(ds.delta_b, direct_dataset.delta_b, rtol=1e-12, atol=1e-18)
    np.testing.assert_allclose(ds.label, direct_dataset.label, rtol=0, atol=1e-14)


def test_ingestion_is_idempotent(recordings, ros_map, tmp_path):
    out_dir = tmp_path / "ds"
    first = ingest_recording(recordings["sqlite3"], out_dir, ros_map, report=False)
    stamp = (out_dir / "dataset.parquet").stat().st_mtime_ns
    again = ingest_recording(recordings["sqlite3"], out_dir, ros_map, report=False)
    assert not first.up_to_date and again.up_to_date
    assert (out_dir / "dataset.parquet").stat().st_mtime_ns == stamp
    forced = ingest_recording(recordings["sqlite3"], out_dir, ros_map, report=False, force=True)
    assert not forced.up_to_date
    assert forced.summary["fingerprint"] == first.summary["fingerprint"]
    info = json.loads((out_dir / "ingest.json").read_text())
    assert info["streams"]["messages"]["mag"] == len(RawSweep.load(out_dir / "raw").mag_t)
    # A different topic map (here: another processing config) is a different fingerprint: re-ingested.
    from flexlearn.data.processing_config import ProcessingConfig

    other = ingest_recording(recordings["sqlite3"], out_dir, ros_map, ProcessingConfig(settle_time=0.02), report=False)
    assert not other.up_to_date and other.summary["fingerprint"] != first.summary["fingerprint"]


def test_progress_bars_only_on_a_terminal(capsys):
    from flexlearn.ingest.records import progress

    assert list(progress(range(5), 5, "reading")) == list(range(5))  # stderr is not a terminal under pytest
    assert capsys.readouterr().err == ""
    assert list(progress(range(5), 5, "reading", enabled=True)) == list(range(5))
    assert "reading" in capsys.readouterr().err


def test_a_recorded_gyroscope_round_trips_and_zeros_marked_none_are_no_gyroscope(sim_raw, ros_map, tmp_path):
    """A sweep with a rate stream: the writer puts it in the IMU messages and ingestion gives it back exactly."""
    import pyarrow.parquet as pq

    rate = np.random.default_rng(0).normal(scale=2e-3, size=sim_raw.accel.shape)
    raw = RawSweep(streams={**sim_raw.streams, "rate": {"t": sim_raw.accel_t.copy(), "rate": rate}}, meta=sim_raw.meta)
    msgs, store = sweep_messages(raw, ros_map)
    out = ingest_recording(write_rosbag(tmp_path / "bag", msgs, store, "mcap"), tmp_path / "ds", ros_map, report=False)
    table = pq.read_table(out.output / "raw" / "rate.parquet")
    got = np.stack([table.column(c).to_numpy() for c in ("wx", "wy", "wz")], -1)
    np.testing.assert_array_equal(got, rate)
    note = json.loads((out.output / "raw" / "meta.json").read_text())["imu_orientation"]
    assert note["mode"].startswith("6-axis"), note


@pytest.mark.parametrize("fmt", ["mcap", "csv", "jsonl"])
def test_the_writers_record_the_hand_tumble(fmt, sim_raw, ros_map, tmp_path):
    """A sweep's hand tumble goes on the map's tumble topic (or serial records of kind tumble, in µT) before the sweep,
    and ingestion gives back the same readings, which processing then fits (W from the tumble)."""
    tumble = np.asarray(sim_raw.meta["tumble"]["mag"])
    if fmt == "mcap":
        tm = ros_map
        msgs, store = sweep_messages(sim_raw, tm)
        rec = write_rosbag(tmp_path / "bag", msgs, store, "mcap")
    else:
        tm = topic_map("serial")
        rec = write_serial(quantize_times(sim_raw), tmp_path / f"dump.{fmt}", tm, fmt)
    out = ingest_recording(rec, tmp_path / "ds", tm, report=False)
    got = np.asarray(json.loads((out.output / "raw" / "meta.json").read_text())["tumble"]["mag"])
    if fmt == "mcap":  # float64 in the message: bit for bit
        np.testing.assert_array_equal(got, tumble)
    else:  # written in µT as text, read back to T: the rounding of the two scalings
        np.testing.assert_allclose(got, tumble, rtol=1e-14, atol=0)
    assert DirectionDataset.load(out.dataset).meta["calibration"]["source"] == "tumble"
