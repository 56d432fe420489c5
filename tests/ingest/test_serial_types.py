"""Wrong field types and out-of-range times in serial dumps (CSV, JSON lines): a `DataError` naming the file,
the record kind, the column, the line and the value, never a silent misreading (coil state 2 read as on,
pose 100.5 read as pose 100) nor an overflow traceback (times beyond the int64 nanosecond range).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from flexlearn.ingest import topic_map
from flexlearn.ingest.recording import read_recording
from flexlearn.ingest.serial import read_serial
from flexlearn.ingest.writers import write_serial
from flexlearn.sensing.streams import quantize_times
from tests.data.console import assert_clean_failure, data_error, run_console
from tests.data.streams_factory import make_sweep


@pytest.fixture(scope="module")
def serial_map():
    return topic_map("serial")


@pytest.fixture(scope="module")
def small_raw():
    return quantize_times(make_sweep(4))


def csv_dump(raw, serial_map, path: Path, kind: str, column: str, value: str, which: int = 0) -> tuple[Path, int]:
    """A CSV dump of ``raw`` with field ``column`` of the ``which``-th record of ``kind`` set to ``value``.

    Returns the file and the (1-based) line number of the edited record.
    """
    write_serial(raw, path, serial_map, "csv")
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    k = [i for i, line in enumerate(lines) if line.split(",")[1] == kind][which]
    cells = lines[k].split(",")
    cells[header.index(column)] = value
    lines[k] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    return path, k + 1


# record kind, column, bad value, words the message must hold (besides file, column and line)
BAD_FIELDS = {
    "coil_state_2": ("coil", "on", "2", ("records of kind 'coil'", "value 2", "booleans")),
    "coil_state_half": ("coil", "on", "0.5", ("value 0.5",)),
    "coil_state_nan": ("coil", "on", "nan", ("value nan",)),
    "pose_id_fractional": ("pose", "pose_id", "100.5", ("records of kind 'pose'", "100.5", "integers")),
    "pose_id_beyond_int64": ("pose", "pose_id", "1e19", ("1e+19",)),
    "target_as_text": ("pose", "tx", "up", ("string", "'up'", "numbers")),
    "time_beyond_int64_ns": ("mag", "t", "1e12", ("field 't' = 1000000000000.0 s", "outside the range")),
    "time_far_negative": ("acc", "t", "-9.3e9", ("field 't' = -9300000000.0 s", "outside the range")),
    "time_infinite": ("mag", "t", "inf", ("field 't' = inf", "not a finite time")),
    "hold_start_beyond_int64_ns": ("pose", "t_start", "1e300", ("field 't_start' = 1e+300", "outside the range")),
    "hold_end_nan": ("pose", "t_end", "nan", ("field 't_end' = nan", "not a finite time")),
}


@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_wrong_field_in_a_csv_dump_is_named(case, small_raw, serial_map, tmp_path):
    kind, column, value, needles = BAD_FIELDS[case]
    dump, line = csv_dump(small_raw, serial_map, tmp_path / "dump.csv", kind, column, value, which=1)
    needles = needles if column in ("t", "t_start", "t_end") else (f"column '{column}'", *needles)
    data_error(lambda: read_recording(dump, serial_map), str(dump), f"line {line}", *needles)


def test_exact_integer_pose_id_and_true_false_coil_state_are_accepted(small_raw, serial_map, tmp_path):
    write_serial(small_raw, tmp_path / "ref.csv", serial_map, "csv")
    ref = read_serial(tmp_path / "ref.csv", serial_map, "csv")
    dump, _ = csv_dump(small_raw, serial_map, tmp_path / "dump.csv", "pose", "pose_id", "101.0", which=1)
    lines = dump.read_text().splitlines()
    on = lines[0].split(",").index("on")
    lines[1:] = [
        ",".join(("true" if c == "1" else "false") if j == on and c else c for j, c in enumerate(line.split(",")))
        for line in lines[1:]
    ]
    dump.write_text("\n".join(lines) + "\n")
    got = read_serial(dump, serial_map, "csv")
    np.testing.assert_array_equal(got["poses"].values["pose_id"], ref["poses"].values["pose_id"])
    np.testing.assert_array_equal(got["coil"].values["on"], ref["coil"].values["on"])
    assert got["poses"].values["pose_id"].dtype == np.int64 and got["coil"].values["on"].dtype == bool


@pytest.mark.parametrize(
    "field, value, needles",
    [
        ("on", 2, ("records of kind 'coil'", "column 'on'", "value 2")),
        ("pose_id", 3.5, ("records of kind 'pose'", "column 'pose_id'", "3.5")),
        ("t", 1e19, ("field 't' = 1e+19 s", "outside the range")),
    ],
)
def test_wrong_field_in_a_jsonl_dump_is_named(small_raw, serial_map, tmp_path, field, value, needles):
    dump = write_serial(small_raw, tmp_path / "dump.jsonl", serial_map, "jsonl")
    lines = dump.read_text().splitlines()
    kind = {"on": "coil", "pose_id": "pose", "t": "coil"}[field]
    k = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == kind)
    lines[k] = json.dumps({**json.loads(lines[k]), field: value})
    dump.write_text("\n".join(lines) + "\n")
    data_error(lambda: read_serial(dump, serial_map, "jsonl"), str(dump), f"line {k + 1}", *needles)


def test_ingest_command_names_times_beyond_the_int64_range(small_raw, serial_map, tmp_path):
    """Class 2 through the console command: every time shifted by 9.3e9 s overflowed int64 (traceback, exit 1)."""
    dump = write_serial(small_raw, tmp_path / "dump.csv", serial_map, "csv")
    lines = dump.read_text().splitlines()
    header = lines[0].split(",")
    shift = [header.index(c) for c in ("t", "t_start", "t_end")]
    lines[1:] = [
        ",".join(repr(float(c) + 9.3e9) if j in shift and c else c for j, c in enumerate(line.split(",")))
        for line in lines[1:]
    ]
    dump.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    proc = run_console("flexlearn-ingest", tmp_path, f"input={dump}", f"output={out}", "ingest=serial", "report=false")
    assert_clean_failure(proc, str(dump), "line 2", "field 't' = 9300000000.0 s", "outside the range")
    assert not out.exists()


def test_ingest_command_names_a_fractional_pose_id(small_raw, serial_map, tmp_path):
    """Class 1 through the console command: pose 101.5 was read as pose 101 and a dataset was written."""
    dump, line = csv_dump(small_raw, serial_map, tmp_path / "dump.csv", "pose", "pose_id", "101.5", which=1)
    out = tmp_path / "out"
    proc = run_console("flexlearn-ingest", tmp_path, f"input={dump}", f"output={out}", "ingest=serial", "report=false")
    assert_clean_failure(proc, str(dump), f"line {line}", "column 'pose_id'", "101.5")
    assert not out.exists()
