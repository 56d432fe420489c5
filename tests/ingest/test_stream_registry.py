"""A stream declared once in the registry (`flexlearn.sensing.streams.register_stream`) flows from a recording
(serial dump or rosbag2) through the raw sweep's save/load to a dataset column, with the strict checks of the
built-in streams: bad values are a `DataError` naming file, column and value."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flexlearn.config import to_dict
from flexlearn.data.dataset import DirectionDataset
from flexlearn.data.process import process_sweep
from flexlearn.errors import ConfigError, DataError
from flexlearn.ingest import topic_map
from flexlearn.ingest.recording import ingest_recording, read_recording
from flexlearn.ingest.records import NS
from flexlearn.ingest.topic_map import load_ingest_config
from flexlearn.ingest.writers import (
    DEFAULT_EPOCH_NS,
    DEFAULT_LATENCY_NS,
    Message,
    sweep_messages,
    write_rosbag,
    write_serial,
)
from flexlearn.sensing.stream_schema import Field, StreamSchema, time_field
from flexlearn.sensing.streams import STREAMS, RawSweep, quantize_times, register_stream, unregister_stream
from tests.data.console import data_error

TEMPERATURE = StreamSchema(
    "temperature",
    (time_field(), Field("celsius", unit="degC", nullable=True, ros="temperature")),
    continuous=True,
    per_pose=True,
)
SERIAL_TEMP = {"kind": "temp", "fields": ["centi_c"], "scale": 0.01}


@pytest.fixture
def temperature():
    register_stream(TEMPERATURE)
    yield TEMPERATURE
    unregister_stream("temperature")


@pytest.fixture
def warm_raw(sim_raw, temperature) -> RawSweep:
    """The sweep at ns resolution with a board temperature at 10 Hz rising 25 → 26 °C, and one hold window
    (the last) without temperature samples."""
    raw = quantize_times(sim_raw)
    raw.meta.pop("tumble", None)
    last = int(np.argmax(raw.pose_t_start))
    t = np.round(np.arange(0.0, raw.pose_t_end.max() + 0.1, 0.1) * 1e9) * 1e-9
    t = t[(t < raw.pose_t_start[last]) | (t > raw.pose_t_end[last])]
    raw.streams["temperature"] = {"t": t, "celsius": 25.0 + t / t[-1]}
    raw.validate()
    return raw


def expected_means(raw: RawSweep) -> dict[int, float]:
    """pose_id -> mean temperature over its hold window, by a loop over poses (NaN if none)."""
    t, c = raw.streams["temperature"]["t"], raw.streams["temperature"]["celsius"]
    out = {}
    for pid, a, b in zip(raw.pose_id.tolist(), raw.pose_t_start, raw.pose_t_end):
        inside = (t >= a) & (t <= b)
        out[pid] = float(c[inside].mean()) if inside.any() else float("nan")
    return out


def serial_map():
    cfg = to_dict(topic_map("serial"))
    cfg["serial"]["streams"]["temperature"] = SERIAL_TEMP
    return load_ingest_config(cfg)


def test_registered_stream_saves_loads_and_becomes_a_dataset_column(warm_raw, tmp_path):
    loaded = RawSweep.load(warm_raw.save(tmp_path / "raw"))
    assert pq.read_table(tmp_path / "raw" / "temperature.parquet").column_names == ["t", "celsius"]
    np.testing.assert_array_equal(loaded.streams["temperature"]["celsius"], warm_raw.streams["temperature"]["celsius"])
    ds = process_sweep(loaded).dataset
    ds = DirectionDataset.load(ds.save(tmp_path / "d.parquet"))
    want = expected_means(warm_raw)
    np.testing.assert_allclose(ds.per_pose["temperature_celsius"], [want[int(i)] for i in ds.pose_id], rtol=1e-12)
    assert ds.per_pose_units == {"temperature_celsius": "degC"}
    # The built-in columns are those of the sweep without the stream.
    base = process_sweep(
        dataclasses.replace(warm_raw, streams={k: v for k, v in warm_raw.streams.items() if k != "temperature"})
    ).dataset
    np.testing.assert_array_equal(ds.delta_b, base.delta_b)
    assert base.per_pose == {}


def test_serial_dump_with_the_stream_is_ingested(warm_raw, tmp_path):
    tm = serial_map()
    dump = write_serial(warm_raw, tmp_path / "dump.csv", tm)
    assert dump.read_text().splitlines()[0].endswith(",centi_c")
    out = ingest_recording(dump, tmp_path / "s", tm, report=False)
    raw = RawSweep.load(out.output / "raw")
    np.testing.assert_allclose(
        raw.streams["temperature"]["celsius"], warm_raw.streams["temperature"]["celsius"], rtol=1e-12
    )
    ds = DirectionDataset.load(out.dataset)
    want = expected_means(warm_raw)
    got = ds.per_pose["temperature_celsius"]
    np.testing.assert_allclose(got, [want[int(i)] for i in ds.pose_id], rtol=1e-9)
    last = int(warm_raw.pose_id[np.argmax(warm_raw.pose_t_start)])
    assert np.isnan(got[ds.pose_id == last]).all() and last in ds.pose_id  # the window without samples: NaN
    assert np.isfinite(got[ds.pose_id != last]).all()


def test_rosbag_topic_of_the_stream_is_ingested(warm_raw, tmp_path):
    cfg = to_dict(topic_map("rig_ros2"))
    cfg["topics"]["temperature"] = {"topic": "/flexlearn/m1/temperature", "type": "sensor_msgs/msg/Temperature"}
    tm = load_ingest_config(cfg)
    msgs, store = sweep_messages(warm_raw, tm)
    T = store.types
    for t, c in zip(warm_raw.streams["temperature"]["t"], warm_raw.streams["temperature"]["celsius"]):
        ns = DEFAULT_EPOCH_NS + int(round(t * 1e9))
        header = T["std_msgs/msg/Header"](
            stamp=T["builtin_interfaces/msg/Time"](sec=ns // NS, nanosec=ns % NS), frame_id=""
        )
        msgs.append(
            Message(
                "/flexlearn/m1/temperature",
                "sensor_msgs/msg/Temperature",
                ns + DEFAULT_LATENCY_NS,
                T["sensor_msgs/msg/Temperature"](header=header, temperature=float(c), variance=0.0),
            )
        )
    msgs.sort(key=lambda m: m.receive_ns)
    bag = write_rosbag(tmp_path / "bag", msgs, store)
    raw, tables, _, _ = read_recording(bag, tm)
    np.testing.assert_array_equal(raw.streams["temperature"]["t"], warm_raw.streams["temperature"]["t"])
    np.testing.assert_array_equal(raw.streams["temperature"]["celsius"], warm_raw.streams["temperature"]["celsius"])
    # the sweep has no gyroscope, so its IMU messages carry none (REP 145) and no 'rate' table is written
    assert set(tables) == {"temperature", "orientation", "mocap"}


def test_bad_values_of_the_stream_name_file_column_and_value(warm_raw, tmp_path):
    tm = serial_map()
    dump = write_serial(warm_raw, tmp_path / "dump.csv", tm)
    lines = dump.read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if ",temp," in line)
    lines[i] = lines[i].rsplit(",", 1)[0] + ",warm"
    dump.write_text("\n".join(lines) + "\n")
    data_error(lambda: read_recording(dump, tm), str(dump), "'centi_c'", "'warm'", f"line {i + 1}")

    raw_dir = warm_raw.save(tmp_path / "raw")
    f = raw_dir / "temperature.parquet"
    table = pq.read_table(f)
    pq.write_table(table.set_column(1, "celsius", pa.array(["hot"] * table.num_rows)), f)
    data_error(lambda: RawSweep.load(raw_dir), str(f), "column 'celsius'", "'hot'")


def test_registry_refuses_clashes_and_unknown_streams(warm_raw, tmp_path):
    register_stream(TEMPERATURE)  # the same declaration again: no-op
    with pytest.raises(ConfigError, match="stream 'temperature' is already registered"):
        register_stream(dataclasses.replace(TEMPERATURE, per_pose=False))
    with pytest.raises(ConfigError, match="built in"):
        unregister_stream("mag")
    with pytest.raises(ConfigError, match=r"attribute\(s\) \['mag_t'\]"):
        register_stream(StreamSchema("mag2", (time_field(),), attrs=(("mag_t", "t"),)))
    with pytest.raises(DataError, match="stream 'humidity' is not registered"):
        RawSweep(streams={**warm_raw.streams, "humidity": {"t": np.zeros(1)}}, meta={})
    with pytest.raises(DataError, match="stream 'temperature': field 't' decreases at index"):
        RawSweep(streams={**warm_raw.streams, "temperature": {"t": np.array([1.0, 0.0]), "celsius": np.ones(2)}})
    # Without the registration a sweep with the table still loads (the table is left alone), as before.
    raw_dir = warm_raw.save(tmp_path / "raw")
    unregister_stream("temperature")
    try:
        assert "temperature" not in RawSweep.load(raw_dir).streams and "temperature" not in STREAMS
    finally:
        register_stream(TEMPERATURE)
