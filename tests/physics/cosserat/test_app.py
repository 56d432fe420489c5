"""`flexlearn-cosserat`: every experiment of conf/cosserat/ loads through Hydra; a run writes the tip
trajectory (JSON, CSV, PNG) into its run directory; bad values fail with one line naming the field."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from flexlearn.apps.runner import CONF_DIR
from flexlearn.errors import ConfigError
from flexlearn.physics.cosserat.experiments import load_experiment
from flexlearn.physics.cosserat.tip_output import run_experiment, write_tip_trajectory

NAMES = sorted(p.stem for p in (Path(CONF_DIR) / "cosserat").glob("*.yaml"))


def run_app(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, FLEXLEARN_ROOT=str(root), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.cosserat", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("name", NAMES)
def test_every_experiment_composes_and_validates(name):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="cosserat", overrides=[f"cosserat={name}"])
    exp = load_experiment(cfg.cosserat, "cosserat")
    assert exp.name == name and exp.dt > 0


def test_run_writes_tip_trajectory(tmp_path):
    proc = run_app(tmp_path, "cosserat=pdms_tipmagnet", "max_duration=0.0018", "cosserat.record_every=3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    files = [Path(f) for f in info["files"]]
    # the tip trajectory (JSON, CSV, PNG) and the whole rod as MCAP (the app's default mcap=true)
    assert [f.suffix for f in files] == [".json", ".csv", ".png", ".mcap"]
    assert all(f.stat().st_size > 0 for f in files)
    doc = json.loads(files[0].read_text())
    steps = 20  # 0.0018 s / 9e-5 s
    assert doc["steps"] == steps and len(doc["times_s"]) == len(range(0, steps + 1, 3)) + 1  # and the last step
    rows = list(csv.reader(files[1].open()))
    assert rows[0] == ["t_s", "x_m", "y_m", "z_m"] and len(rows) == len(doc["times_s"]) + 1
    assert [float(x) for x in rows[-1][1:]] == pytest.approx(doc["tip_m"][-1], rel=1e-12)
    assert doc["config"]["youngs_modulus"] == pytest.approx(364.5e3)


@pytest.mark.parametrize(
    "override, needle",
    [
        ("cosserat.youngs_modulus=-3", "youngs_modulus"),
        ("+cosserat.field.frequency=-1", "field.frequency"),
    ],
)
def test_bad_values_name_the_field(tmp_path, override, needle):
    proc = run_app(tmp_path, override, "max_duration=0.001")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and needle in proc.stderr, proc.stderr[-2000:]
    assert not list(tmp_path.rglob("*_tip.*"))


def test_bad_run_options_are_rejected(tmp_path):

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="cosserat", overrides=["+cosserat.colour=red"])
    with pytest.raises(ConfigError, match="colour"):
        load_experiment(cfg.cosserat, "cosserat")
    exp = load_experiment(compose_default(), "cosserat")
    with pytest.raises(ConfigError, match="max_duration"):
        run_experiment(exp, max_duration=-1.0)
    tr, info = run_experiment(exp, max_duration=2 * exp.dt)
    with pytest.raises(ConfigError, match="formats"):
        write_tip_trajectory(tmp_path, tr, exp, info, ["xlsx"])


def compose_default():
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="cosserat").cosserat
