"""meta.json of a raw sweep: typed fields, one line per problem, exit 2 without a traceback; units and parts
chosen on the command line of flexlearn-process."""

from __future__ import annotations

import dataclasses
import json

import pytest

from flexlearn.data.process import process_sweep
from flexlearn.data.sweep_meta import check_meta, meta_problems, sweep_cap
from flexlearn.errors import DataError
from tests.data.console import assert_clean_failure, run_console
from tests.data.streams_factory import make_sweep


def _tumble(n: int = 4) -> dict:
    return {"mag": [[1e-5 * i, 2e-5, -3e-5] for i in range(n)], "units": "T"}


def test_good_meta_has_no_problems():
    assert meta_problems({"tumble": _tumble(), "rig": {"max_colatitude": 0.5}, "units": {"mag": "T"}}, "m") == []


@pytest.mark.parametrize(
    ("tumble", "needle"),
    [
        ({"mag": [[1e-5, 2e-5, "3e-5 T"]]}, "row 0 value 2 = '3e-5 T': expected a finite number"),
        ({"mag": [[1e-5, 2e-5]]}, "row 0 = [1e-05, 2e-05]: expected 3 numbers (got 2)"),
        ({"mag": ["abc"]}, "row 0 = 'abc': expected 3 numbers (got not a list)"),
        ({"mag": [[1e-5, None, 1e-5]]}, "row 0 value 1 = None"),
        ({"mag": [[1e-5, True, 1e-5]]}, "row 0 value 1 = True"),
        ({"mag": "1,2,3"}, "field 'tumble.mag' = '1,2,3': expected a list"),
        ({"mag": [], "units": "furlong"}, "field 'tumble.units' = 'furlong'"),
        ("readings", "field 'tumble' = 'readings'"),
    ],
)
def test_malformed_tumble_is_named(tumble, needle):
    with pytest.raises(DataError) as info:
        check_meta({"tumble": tumble}, "sweep/meta.json")
    assert needle in str(info.value) and str(info.value).startswith("sweep/meta.json: field 'tumble")


def test_every_problem_is_one_line():
    meta = {"tumble": {"mag": [[1, 2], [1, "x", 3], [1, 2, 3]]}, "rig": {"max_colatitude": "30deg"}, "units": 3}
    lines = meta_problems(meta, "m.json")
    assert len(lines) == 4 and all("\n" not in line and line.startswith("m.json: field '") for line in lines)


def test_sweep_cap_reads_the_rig_and_ignores_what_is_not_a_cap():
    assert sweep_cap({"rig": {"max_colatitude": 0.7}}) == 0.7
    assert sweep_cap({"rig": {"max_colatitude": "x"}}) is None and sweep_cap({}) is None


def test_process_sweep_refuses_a_ragged_tumble_before_any_work():
    raw = make_sweep(2)
    raw = dataclasses.replace(raw, meta=dict(raw.meta, tumble={"mag": [[1e-5, 2e-5, 3e-5]] * 20 + [[1e-5]]}))
    with pytest.raises(DataError, match=r"row 20 = \[1e-05\]: expected 3 numbers \(got 1\)"):
        process_sweep(raw)


@pytest.fixture()
def saved(tmp_path):
    raw = make_sweep(4)
    raw.save(tmp_path / "sweep")
    return tmp_path


def _edit_meta(path, **fields):
    meta = json.loads((path / "meta.json").read_text())
    meta.update(fields)
    (path / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("fields", "needles"),
    [
        ({"tumble": {"mag": [[1e-5, "x", 1e-5]]}}, ("meta.json", "tumble.mag", "'x'")),
        ({"tumble": {"mag": [[1e-5, 1e-5]]}}, ("meta.json", "tumble.mag", "got 2")),
        ({"sensor": {"magnetometer": 1, "imu": 1}}, ("meta.json", "sensor.magnetometer", "= 1")),
    ],
)
def test_cli_bad_meta_is_exit_2_naming_the_file(saved, fields, needles):
    _edit_meta(saved / "sweep", **fields)
    proc = run_console("flexlearn-process", saved, "input=sweep", "output=out.parquet")
    line = assert_clean_failure(proc, *needles)
    assert "sweep" in line


def test_cli_times_in_ms_name_the_key_and_convert_with_it(saved):
    raw = make_sweep(4)
    k = 1e3
    ms = dataclasses.replace(
        raw,
        mag_t=raw.mag_t * k,
        accel_t=raw.accel_t * k,
        coil_t=raw.coil_t * k,
        pose_t_start=raw.pose_t_start * k,
        pose_t_end=raw.pose_t_end * k,
    )
    ms.save(saved / "ms")
    proc = run_console("flexlearn-process", saved, "input=ms", "output=a.parquet")
    assert_clean_failure(proc, "stream 'accel'", "field 't'", "+processing.time_unit=ms")
    proc = run_console("flexlearn-process", saved, "input=ms", "output=b.parquet", "+processing.time_unit=ms")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "times converted from ms to s (processing.time_unit=ms)" in proc.stdout + proc.stderr


def test_cli_sensor_parts_decide_the_clip_level(saved):
    raw = make_sweep(4)
    mag = raw.mag.copy()
    w = (raw.mag_t >= raw.pose_t_start[1]) & (raw.mag_t <= raw.pose_t_end[1])
    mag[w, 0] = 4.7891e-4
    meta = {k: v for k, v in raw.meta.items() if k != "sensor"}  # no parts of its own: the config decides
    dataclasses.replace(raw, mag=mag, meta=meta).save(saved / "clip")
    args = ["input=clip", "+processing.max_accel_std=0.05", "+processing.min_kept_fraction=0.1"]
    # The noise-free accelerometer of this sweep passes the default IMU part's stuck test only as the whole
    # stream varies between poses; the per-axis test sees bit-identical samples in every pose.
    proc = run_console("flexlearn-process", saved, *args, "output=a.parquet", "sensor/magnetometer=lis3mdl_4g")
    assert proc.returncode == 2 and "accel_stuck" in proc.stderr, proc.stderr[-2000:]
    args.append("sensor/imu=bno055")  # its 0.01 m/s^2 LSB is above its noise: identical samples are plausible
    proc = run_console("flexlearn-process", saved, *args, "output=b.parquet", "sensor/magnetometer=lis3mdl_4g")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "saturated: 1" in proc.stdout + proc.stderr
    proc = run_console("flexlearn-process", saved, *args, "output=c.parquet")
    assert proc.returncode == 0 and "saturated" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
