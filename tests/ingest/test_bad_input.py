"""Bad recordings: one clear line naming file/topic/column, non-zero exit, no partial output; recoverable faults
(a few duplicates, a short gap) dropped and counted."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from flexlearn.data.dataset import DirectionDataset
from flexlearn.ingest import topic_map
from flexlearn.ingest.recording import ingest_recording
from flexlearn.ingest.records import NS
from flexlearn.ingest.writers import sweep_messages, write_rosbag, write_serial
from flexlearn.sensing.streams import quantize_times
from tests.data.console import data_error

from .conftest import assert_clean_failure, assert_same_pairs, run_app

MAG = "/flexlearn/m1/magnetic_field"
IMU = "/flexlearn/m1/imu"


@pytest.fixture(scope="module")
def messages(sim_raw, ros_map):
    return sweep_messages(sim_raw, ros_map)


def _bag(tmp_path: Path, msgs, store, name: str = "bag", storage: str = "mcap") -> Path:
    return write_rosbag(tmp_path / name, sorted(msgs, key=lambda m: m.receive_ns), store, storage)


def _restamp(m, dt_ns: int, header: bool = True, receive: bool = True):
    """Message ``m`` with its header stamp and/or receive time moved by ``dt_ns``."""
    msg = m.msg
    if header:
        ns = msg.header.stamp.sec * NS + msg.header.stamp.nanosec + dt_ns
        stamp = dataclasses.replace(msg.header.stamp, sec=ns // NS, nanosec=ns % NS)
        msg = dataclasses.replace(msg, header=dataclasses.replace(msg.header, stamp=stamp))
    return dataclasses.replace(m, msg=msg, receive_ns=m.receive_ns + (dt_ns if receive else 0))


def test_missing_topic_is_named_and_no_output_is_written(messages, ros_map, tmp_path):
    msgs, store = messages
    bag = _bag(tmp_path, [m for m in msgs if m.topic != MAG], store)
    out = tmp_path / "out"
    proc = run_app("ingest", tmp_path, f"input={bag}", f"output={out}")
    assert_clean_failure(proc, str(bag), f"topic '{MAG}'", "sensor_msgs/msg/MagneticField", "not in the recording")
    assert not out.exists() and not any(p.name.startswith(".out") for p in tmp_path.iterdir())


def test_wrong_message_type_is_named(messages, ros_map, tmp_path):
    msgs, store = messages
    swapped = [dataclasses.replace(m, topic=MAG) if m.topic == IMU else m for m in msgs if m.topic != MAG]
    bag = _bag(tmp_path, swapped, store)
    data_error(
        lambda: ingest_recording(bag, tmp_path / "out", ros_map),
        f"topic '{MAG}' carries sensor_msgs/msg/Imu, expected sensor_msgs/msg/MagneticField",
    )


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_truncated_bag_fails_and_keeps_the_previous_dataset(storage, recordings, ros_map, tmp_path):
    out = tmp_path / "out"
    ingest_recording(recordings[storage], out, ros_map, report=False)
    before = (out / "dataset.parquet").read_bytes()
    bad = tmp_path / "truncated"
    shutil.copytree(recordings[storage], bad)
    f = next(p for p in bad.iterdir() if p.suffix in (".mcap", ".db3"))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    if storage == "mcap":  # through the command line once: exit status 2, one line
        proc = run_app("ingest", tmp_path, f"input={bad}", f"output={out}", "force=true")
        assert_clean_failure(proc, str(bad), "truncated")
    else:
        data_error(lambda: ingest_recording(bad, out, ros_map, force=True), str(bad), "truncated")
    assert (out / "dataset.parquet").read_bytes() == before


def test_corrupt_mcap_chunk_is_named(recordings, ros_map, tmp_path):
    bad = tmp_path / "corrupt"
    shutil.copytree(recordings["mcap"], bad)
    f = next(bad.glob("*.mcap"))
    data = bytearray(f.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 2000):
        data[i] ^= 0x5A
    f.write_bytes(bytes(data))
    data_error(lambda: ingest_recording(bad, tmp_path / "out", ros_map), str(bad), "corrupt")


def test_backward_jump_of_the_sensor_clock_is_an_error(messages, ros_map, tmp_path):
    msgs, store = messages
    cut = msgs[len(msgs) // 2].receive_ns
    jumped = [_restamp(m, -3 * NS, receive=False) if m.receive_ns > cut else m for m in msgs]
    bag = _bag(tmp_path, jumped, store)
    data_error(
        lambda: ingest_recording(bag, tmp_path / "out", ros_map),
        f"topic '{MAG}'",
        "clock jump at message",
        "-3.000 s against the bag's clock",
    )


def test_backward_step_of_the_whole_system_clock_is_an_error(messages, ros_map, tmp_path):
    """Every clock (sensors, bag, rig controller) steps back 3 s: the bag re-sorts the data, the hold windows
    overlap."""
    msgs, store = messages
    cut = msgs[len(msgs) // 2].receive_ns

    def step(m):
        m = _restamp(m, -3 * NS)
        if m.topic == "/flexlearn/rig/hold":

            def back(t):
                return dataclasses.replace(t, sec=t.sec - 3)

            m = dataclasses.replace(
                m, msg=dataclasses.replace(m.msg, t_start=back(m.msg.t_start), t_end=back(m.msg.t_end))
            )
        return m

    bag = _bag(tmp_path, [step(m) if m.receive_ns > cut else m for m in msgs], store)
    data_error(
        lambda: ingest_recording(bag, tmp_path / "out", ros_map), "topic '/flexlearn/rig/hold'", "overlap", "clock jump"
    )


def test_backward_jump_in_a_serial_dump_is_an_error(sim_raw, tmp_path):
    tm = topic_map("serial")
    dump = write_serial(quantize_times(sim_raw), tmp_path / "dump.csv", tm, "csv")
    lines = dump.read_text().splitlines()
    k = len(lines) // 2
    for i in range(k, len(lines)):
        t, rest = lines[i].split(",", 1)
        lines[i] = f"{float(t) - 3.0!r},{rest}"
    dump.write_text("\n".join(lines) + "\n")
    data_error(
        lambda: ingest_recording(dump, tmp_path / "out", tm),
        str(dump),
        "records of kind 'mag'",
        "clock jumps back by 2.99",
    )


def test_forward_clock_jump_is_an_error(messages, ros_map, tmp_path):
    msgs, store = messages
    cut = msgs[len(msgs) // 2].receive_ns
    bag = _bag(tmp_path, [_restamp(m, 10 * NS) if m.receive_ns > cut else m for m in msgs], store)
    data_error(lambda: ingest_recording(bag, tmp_path / "out", ros_map), "clock jumps forward by 10.0", "max_gap")


def test_sensor_clock_jump_against_bag_clock_is_an_error(messages, ros_map, tmp_path):
    msgs, store = messages
    cut = msgs[len(msgs) // 2].receive_ns
    bag = _bag(
        tmp_path, [_restamp(m, NS, receive=False) if m.topic == IMU and m.receive_ns > cut else m for m in msgs], store
    )
    data_error(
        lambda: ingest_recording(bag, tmp_path / "out", ros_map),
        f"topic '{IMU}'",
        "clock jump at message",
        "+1.000 s",
        "max_clock_jump",
    )


def test_a_few_duplicates_are_dropped_and_counted(messages, ros_map, direct_dataset, tmp_path):
    msgs, store = messages
    mags = [i for i, m in enumerate(msgs) if m.topic == MAG]
    dup = [dataclasses.replace(msgs[i], receive_ns=msgs[i].receive_ns + 1000) for i in mags[100:103]]
    bag = _bag(tmp_path, msgs + dup, store)
    out = ingest_recording(bag, tmp_path / "out", ros_map, report=False)
    assert_same_pairs(DirectionDataset.load(out.dataset), direct_dataset)
    info = json.loads((tmp_path / "out" / "ingest.json").read_text())
    assert info["streams"]["dropped"]["mag"]["duplicate"] == 3


def test_many_duplicates_are_an_error(messages, ros_map, tmp_path):
    msgs, store = messages
    mags = [m for m in msgs if m.topic == MAG]
    bag = _bag(tmp_path, msgs + mags[: len(mags) // 10], store)
    data_error(
        lambda: ingest_recording(bag, tmp_path / "out", ros_map),
        f"topic '{MAG}'",
        "duplicates",
        "max_duplicate_fraction",
    )


def test_short_gap_is_counted_and_its_poses_reported(messages, ros_map, sim_raw, tmp_path):
    msgs, store = messages
    t0 = int(np.round(sim_raw.pose_t_start[5] * 1e9)) + 1_700_000_000 * NS
    hole = [m for m in msgs if not (m.topic == MAG and t0 <= m.receive_ns < t0 + 150_000_000)]
    bag = _bag(tmp_path, hole, store)
    out = ingest_recording(bag, tmp_path / "out", ros_map, report=False)
    info = out.summary
    assert info["streams"]["dropped"]["mag"]["gap"] == 1
    assert 0.12 < info["streams"]["gap_time_s"]["mag"] < 0.16
    assert (
        5
        in info["poses"]["dropped_pose_ids"]["missing_coil_off"] + info["poses"]["dropped_pose_ids"]["too_few_coil_on"]
    )


def test_csv_missing_column_is_named(sim_raw, tmp_path):
    tm = topic_map("serial")
    dump = write_serial(quantize_times(sim_raw), tmp_path / "dump.csv", tm, "csv")
    lines = dump.read_text().splitlines()
    drop = lines[0].split(",").index("mz")
    dump.write_text("\n".join(",".join(c for j, c in enumerate(line.split(",")) if j != drop) for line in lines))
    proc = run_app("ingest", tmp_path, f"input={dump}", f"output={tmp_path / 'out'}", "ingest=serial")
    assert_clean_failure(proc, str(dump), "column 'mz' missing", "stream 'mag'")
    assert not (tmp_path / "out").exists()


def test_jsonl_record_lacking_a_field_is_named(sim_raw, tmp_path):
    tm = topic_map("serial")
    dump = write_serial(quantize_times(sim_raw), tmp_path / "dump.jsonl", tm, "jsonl")
    lines = dump.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "coil")
    rec = json.loads(lines[k])
    del rec["on"]
    lines[k] = json.dumps(rec)
    dump.write_text("\n".join(lines) + "\n")
    data_error(
        lambda: ingest_recording(dump, tmp_path / "out", tm),
        str(dump),
        f"line {k + 1}",
        "record of kind 'coil' lacks field 'on'",
    )


def test_unknown_custom_type_asks_for_its_definition(recordings, tmp_path):
    from flexlearn.errors import ConfigError

    tm = dataclasses.replace(topic_map("rig_ros2"), msg_definitions={})
    with pytest.raises(ConfigError, match="flexlearn_msgs/msg/CoilState.*msg_definitions"):
        ingest_recording(recordings["mcap"], tmp_path / "out", tm)
