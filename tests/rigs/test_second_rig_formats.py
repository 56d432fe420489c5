"""A second rig (conf/data/sim_rig_b.yaml) recorded by other loggers in every documented format goes through the
documented ``flexlearn-ingest`` command and gives the training pairs the simulator's own sweep gives when it is
processed directly (the recording carries no more and no less: tumble, parts, units, clock)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from flexlearn.data.dataset import DirectionDataset
from flexlearn.data.process import process_sweep
from flexlearn.sensing.parts import SensorParts
from flexlearn.sensing.streams import quantize_times
from flexlearn.sim.rig import simulate_sweep

from .loggers import WRITERS, Event, LoggerOptions, Recording, cdr_message

CONF = Path(__file__).resolve().parents[2] / "flexlearn" / "conf"


def rig_sim(rig: str, **over) -> dict:
    """The ``sim`` block of ``conf/data/<rig>.yaml`` as the simulator reads it."""
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose("train", [f"data={rig}"])
    return {**OmegaConf.to_container(cfg.data.sim, resolve=True), **over}


def ingest(rec: Recording, out: Path, root: Path, *extra: str) -> subprocess.CompletedProcess:
    """The documented command, as a user runs it (a fresh process; the map the logger's recording needs)."""
    env = dict(os.environ, FLEXLEARN_ROOT=str(root), OMP_NUM_THREADS="1")
    args = [*rec.ingest_args(), f"input={rec.path}", f"output={out}", *extra]
    return subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.ingest", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


PARTS = ["sensor/magnetometer=lis3mdl_4g", "sensor/imu=lsm6dsox"]
"""The second rig's chips, named as a user names them (conf/sensor presets)."""


@pytest.fixture(scope="module")
def rig_b():
    """A small sweep of the second rig with more faults than usual, and the simulator's own processing of it
    with the parts an ingestion checks against (its default parts: ``flexlearn-ingest`` takes no ``sensor``)."""
    faults = {"nan_rate": 0.01, "saturation_rate": 0.004, "short_pulse_rate": 0.05, "swing_rate": 0.05}
    raw = simulate_sweep(rig_sim("sim_rig_b", n_poses=60, seed=5, faults=faults))
    return raw, process_sweep(quantize_times(raw), parts=SensorParts.default()).dataset


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_each_logger_format_ingests_to_the_simulators_own_pairs(fmt, rig_b, tmp_path):
    raw, direct = rig_b
    rec = WRITERS[fmt](raw, tmp_path / "rec", LoggerOptions(seed=1))
    proc = ingest(rec, tmp_path / "session", tmp_path, "report=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    ds = DirectionDataset.load(tmp_path / "session" / "dataset.parquet")
    np.testing.assert_array_equal(ds.pose_id, direct.pose_id)
    np.testing.assert_array_equal(ds.split, direct.split)
    np.testing.assert_array_equal(ds.n_coil_on, direct.n_coil_on)
    # rosbag2: ns stamps and float64 values, exact but for the sums' order; serial dumps: printed decimals
    rtol = 1e-12 if fmt in ("mcap", "sqlite3") else 2e-5
    scale = np.abs(direct.delta_b).max()
    np.testing.assert_allclose(ds.delta_b, direct.delta_b, rtol=0, atol=rtol * scale)
    np.testing.assert_allclose(ds.label, direct.label, rtol=0, atol=max(rtol, 1e-6))
    # the hand tumble travelled with the recording: the same W as the simulator's own tumble gives
    assert ds.meta["calibration"] is not None and direct.meta["calibration"] is not None
    np.testing.assert_allclose(ds.meta["calibration"]["W"], direct.meta["calibration"]["W"], atol=1e-5)


def test_ingestion_checks_against_the_parts_the_user_names(rig_b, tmp_path):
    raw, _ = rig_b
    rec = WRITERS["mcap"](raw, tmp_path / "rec", LoggerOptions(seed=1))
    proc = ingest(rec, tmp_path / "session", tmp_path, "report=false", *PARTS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ds = DirectionDataset.load(tmp_path / "session" / "dataset.parquet")
    direct = process_sweep(quantize_times(raw)).dataset  # the sweep's own parts (meta 'sensor'): clipping at 479 µT
    np.testing.assert_array_equal(ds.pose_id, direct.pose_id)


def test_hand_written_cdr_matches_rosbags_serializer():
    """The sqlite3 logger's own CDR bytes equal what rosbags serializes for the same message."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    T = store.types
    e = Event("mag", 1_733_390_000 * 10**9 + 17, 0, {"field": [1.5e-5, -2.25e-5, 4.0e-5]})
    msg = T["sensor_msgs/msg/MagneticField"](
        header=T["std_msgs/msg/Header"](
            stamp=T["builtin_interfaces/msg/Time"](sec=1_733_390_000, nanosec=17), frame_id="m3"
        ),
        magnetic_field=T["geometry_msgs/msg/Vector3"](x=1.5e-5, y=-2.25e-5, z=4.0e-5),
        magnetic_field_covariance=np.zeros(9),
    )
    assert cdr_message(e, "m3") == bytes(store.serialize_cdr(msg, "sensor_msgs/msg/MagneticField"))
    imu = Event("imu", 5 * 10**9 + 3, 0, {"accel": [0.1, -0.2, 9.8], "gyro": [0.01, 0.02, -0.03]})
    Vector3, Quaternion = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    msg = T["sensor_msgs/msg/Imu"](
        header=T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=5, nanosec=3), frame_id="abc"),
        orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0]),
        angular_velocity=Vector3(x=0.01, y=0.02, z=-0.03),
        angular_velocity_covariance=np.zeros(9),
        linear_acceleration=Vector3(x=0.1, y=-0.2, z=9.8),
        linear_acceleration_covariance=np.zeros(9),
    )
    assert cdr_message(imu, "abc") == bytes(store.serialize_cdr(msg, "sensor_msgs/msg/Imu"))
