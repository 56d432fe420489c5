"""pi_runner --arm: the exported flexible-arm controller on a short IMU frame stream, with bad lines and frames."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _runner():
    spec = importlib.util.spec_from_file_location("pi_runner_arm", ROOT / "scripts" / "pi_runner.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(theta, noise, rng):
    """A rigid arm at θ: gravity seen by the 2 + 3 IMUs (acc m/s², gyr 0), plus noise."""
    g = 9.81
    angs = [theta[0]] * 2 + [theta[0] + theta[1]] * 3
    return [
        [
            rng.gauss(0, noise),
            g * math.sin(a) + rng.gauss(0, noise),
            g * math.cos(a) + rng.gauss(0, noise),
            rng.gauss(0, 1e-3),
            rng.gauss(0, 1e-3),
            rng.gauss(0, 1e-3),
        ]
        for a in angs
    ]


@pytest.fixture(scope="module")
def controller_file(tmp_path_factory):
    from flexlearn.runtime.arm.config import ArmControllerConfig
    from flexlearn.runtime.arm.controller import ArmController
    from flexlearn.runtime.arm.export import export_arm_controller

    cfg = ArmControllerConfig()
    return export_arm_controller(ArmController.build(cfg), tmp_path_factory.mktemp("arm") / "arm.pt", cfg)


def test_arm_mode_steps_the_controller_and_flags_bad_frames(controller_file, tmp_path, capsys):
    import random

    from flexlearn.runtime.arm.config import ArmControllerConfig
    from flexlearn.runtime.arm.controller import ArmController
    from flexlearn.runtime.arm.outputs import FAULT_LOST_FRAME, FAULT_NONFINITE

    rng = random.Random(0)
    lines, frames = [], []
    for k in range(200):
        t = k * 1e-3
        rows = _rows((0.2, -0.6), 0.02, rng)
        if k == 50:
            rows[1][2] = None  # a missing sample
        if k == 80:
            rows = rows[:3]  # a lost IMU
        lines.append(json.dumps({"type": "imu", "t": t, "frame": rows}))
        frames.append((t, rows))
        if k == 120:
            lines.append("{not json")
            lines.append(json.dumps({"type": "att", "t": t}))
    (tmp_path / "imu.jsonl").write_text("\n".join(lines) + "\n")
    status = _runner().main(
        [str(controller_file), "--arm", "--log", str(tmp_path / "imu.jsonl"), "--out", str(tmp_path / "tau.jsonl")]
    )
    assert status == 0
    counts = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert counts["frames"] == 200 and counts["bad"] == 2
    assert counts["faults"]["nonfinite"] >= 1 and counts["faults"]["lost_frame"] >= 1
    out = [json.loads(x) for x in (tmp_path / "tau.jsonl").read_text().splitlines()]
    assert len(out) == 200 and all(all(math.isfinite(v) for v in r["tau"]) for r in out)
    assert out[50]["fault"] & FAULT_NONFINITE and out[80]["fault"] & FAULT_LOST_FRAME
    assert out[80]["tau"] == out[79]["tau"]  # a lost frame holds the last valid torques
    # the runner's torques are the controller's own on the same frames
    ref = ArmController.build(ArmControllerConfig())
    ref_out = []
    with torch.inference_mode():
        for t, rows in frames:
            x = torch.tensor([[math.nan if v is None else v for v in r] for r in rows], dtype=torch.float64)
            ref_out.append(ref(x, t)[0].tolist())
    assert max(abs(a - b) for r, e in zip(out, ref_out) for a, b in zip(r["tau"], e)) < 1e-9


def test_arm_mode_refuses_a_robot_bundle(tmp_path, capsys):
    from flexlearn.models.direction_mlp import DirectionMLP
    from flexlearn.runtime.deploy import build_bundle, export_bundle
    from flexlearn.runtime.pikit.manifest import manifest_path, manifest_record

    path = tmp_path / "bundle.pt"
    export_bundle(build_bundle(DirectionMLP(hidden=(8,)), 2), path)
    manifest_path(path).write_text(json.dumps(manifest_record(path, "torchscript")))
    (tmp_path / "imu.jsonl").write_text("")
    assert _runner().main([str(path), "--arm", "--log", str(tmp_path / "imu.jsonl")]) == 2
    assert "expected 'flexible_arm_controller'" in capsys.readouterr().err
