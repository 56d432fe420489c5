"""`flexlearn-cpr`: the config composes into the seed-003 robot; a short run writes JSON + PNG into its run
directory; a bad robot config fails with one line naming the field."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from flexlearn.apps.runner import CONF_DIR
from flexlearn.physics.lse import CPRModel

RUN_FILES = [
    "experiments.json",
    "shapes_exp1.mcap",
    "shapes_exp1.png",
    "shapes_exp2.mcap",
    "shapes_exp2.png",
    "trajectory.png",
]
"""What a run writes into its run directory (figures, results and the playable shapes)."""


def run_app(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLEXLEARN_ROOT=str(root), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.cpr", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_config_composes_into_the_default_robot():
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="cpr", overrides=["cpr.rod.n_elements=3"])
    model = CPRModel.from_config(cfg.cpr)
    assert (model.n_rods, model.n_elements) == (6, 3)
    assert cfg.substeps >= 1 and cfg.shooting_steps == 40


def test_run_writes_json_and_figures(tmp_path):
    out = tmp_path / "run"
    proc = run_app(
        tmp_path,
        "cpr.rod.n_elements=2",
        "n_phases=2",
        "substeps=10",
        "shooting_steps=null",
        f"hydra.run.dir={out}",
        f"output_dir={out}",
        "json=true",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    files = sorted(Path(f).name for f in info["files"])
    assert files == RUN_FILES
    assert all((out / f).stat().st_size > 0 for f in files)
    result = json.loads((out / "experiments.json").read_text())
    assert len(result["experiment_II"]["ee_positions_m"]) == 3 and result["elements_per_rod"] == 2
    # the robot over the samples, read back with the format's own library: one frame per sample (1 s apart),
    # the six rods and the platform in each, and the sample's end-effector position beside them
    reader = pytest.importorskip("mcap.reader")
    with open(out / "shapes_exp2.mcap", "rb") as f:
        messages = [(c.topic, m.log_time, json.loads(m.data)) for _, c, m in reader.make_reader(f).iter_messages()]
    scenes = [(t, msg["entities"][0]["id"]) for topic, t, msg in messages if topic == "/cpr_exp2/backbone"]
    assert {t for t, _ in scenes} == {0, 10**9, 2 * 10**9}
    assert sorted({e for _, e in scenes}) == sorted([f"cpr_exp2/rod{r}" for r in range(6)] + ["cpr_exp2/platform"])
    samples = [msg for topic, _, msg in messages if topic == "/cpr_exp2/sample"]
    ee = result["experiment_II"]["ee_positions_m"]
    np.testing.assert_allclose([s["ee_position_m"] for s in samples], ee, rtol=0, atol=1e-15)
    last = [msg for topic, t, msg in messages if topic == "/cpr_exp2/backbone" and t == 2 * 10**9]
    platform = next(m["entities"][0] for m in last if m["entities"][0]["id"].endswith("platform"))
    points = platform["lines"][0]["points"]
    assert len(points) == 7 and points[0] == points[-1]  # closed through the six rod tips


def test_run_ends_with_a_summary_and_the_run_directory(tmp_path):
    """Without json=true: per experiment its solves and speed (and the LSE–shooting gap when the baseline runs),
    the files, the next step, and the run directory as the last line (what a script or a person reads)."""
    out = tmp_path / "run"
    proc = run_app(
        tmp_path,
        "cpr.rod.n_elements=2",
        "n_phases=2",
        "substeps=4",
        "shooting_steps=null",
        f"hydra.run.dir={out}",
        f"output_dir={out}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-2:] == ["run directory:", str(out)]
    text = "\n".join(lines)
    for name in ("experiment_I", "experiment_II"):
        assert re.search(name + r": \d+ LSE solves in [0-9.]+ s \(\d+ solves/s\); no shooting baseline", text), text
    files = next(line for line in lines if line.startswith("files: "))
    assert sorted(files[7:].split(", ")) == RUN_FILES
    assert "next: open trajectory.png" in text
    assert not any(line.lstrip().startswith("{") for line in lines)  # the JSON stays in experiments.json


def test_bad_robot_config_fails_naming_the_field(tmp_path):
    proc = run_app(tmp_path, "cpr.rod.youngs_modulus=-1.0", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2
    assert "youngs_modulus" in proc.stderr and "Traceback" not in proc.stderr
