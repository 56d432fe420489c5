"""The environment checked before anything is written or allocated: FLEXLEARN_ROOT, memory of user-set sizes,
strict JSON, checkpoints written beside their target whatever TMPDIR is."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import flexlearn.apps.simulate  # noqa: F401  (imported outside a test, as the apps are)
from flexlearn import config
from flexlearn.atomic import json_text, write_json_atomic
from flexlearn.errors import ConfigError
from tests.data.console import call_app


def strict(text: str):
    def refuse(name: str) -> None:
        raise ValueError(name)

    return json.loads(text, parse_constant=refuse)


def run_simulate(root: Path, env_root: str, *args: str) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("flexlearn-simulate")
    env = dict(os.environ, FLEXLEARN_ROOT=env_root, OMP_NUM_THREADS="1")
    return subprocess.run([str(script), *args], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def one_error(err: str, app: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{app}: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    return lines[0]


@pytest.mark.parametrize("kind", ["file", "missing-parent-file", "full"])
def test_a_root_that_cannot_hold_a_run_is_one_line(tmp_path, kind, monkeypatch):
    target = tmp_path / "root"
    if kind == "file":
        target.write_text("x")
    elif kind == "missing-parent-file":
        target.write_text("x")
        target = target / "below"
    else:
        target.mkdir()
        monkeypatch.setattr(config.shutil, "disk_usage", lambda p: type("U", (), {"free": 10 * 2**20})())
    with pytest.raises(ConfigError, match="FLEXLEARN_ROOT") as info:
        config.check_root(str(target), "FLEXLEARN_ROOT")
    assert str(target).split("/")[-1] in str(info.value)
    assert ("disk is full" if kind == "full" else "not a directory") in str(info.value)


def test_a_read_only_root_is_refused(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr(config.os, "access", lambda p, mode: Path(p) != ro)  # root bypasses chmod: simulate it
    with pytest.raises(ConfigError, match="not writable"):
        config.check_root(str(ro), "FLEXLEARN_ROOT")


def test_flexlearn_root_through_the_command(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = run_simulate(tmp_path, str(afile), "sim.n_poses=10")
    assert proc.returncode == 2 and "FLEXLEARN_ROOT" in one_error(proc.stderr, "flexlearn-simulate")
    assert "not a directory" in proc.stderr
    # empty means unset: the working directory is the root, nothing goes to /
    proc = run_simulate(tmp_path, "", "sim.n_poses=20", f"output={tmp_path}/raw")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "logs" / "simulate").is_dir() and (tmp_path / "raw").is_dir()


@pytest.mark.parametrize(
    "override,key",
    [
        ("sim.n_poses=1000000000", "sim.n_poses"),
        ("+sim.accelerometer.rate=1e12", "sim.accelerometer.rate"),
    ],
)
def test_sizes_beyond_the_machine_are_refused_with_the_estimate(tmp_path, monkeypatch, capsys, override, key):
    code, _, err = call_app("simulate", tmp_path, [override, f"output={tmp_path}/raw"], monkeypatch, capsys)
    line = one_error(err, "flexlearn-simulate")
    assert code == 2 and key in line and "GiB of memory" in line and "available" in line, line
    assert not (tmp_path / "raw").exists()


@pytest.mark.parametrize(
    "app,override,key",
    [
        ("cosserat", "cosserat.n_elements=100000000", "cosserat.n_elements"),
        ("cosserat", "cosserat.n_elements=20000 cosserat.scheme=implicit", "cosserat.n_elements"),
        ("cpr", "cpr.rod.n_elements=1000000", "cpr.rod.n_elements"),
        ("cpr", "n_phases=1000000000", "n_phases × substeps"),
    ],
)
def test_rod_and_robot_sizes_beyond_the_machine_are_refused_with_the_estimate(
    tmp_path, monkeypatch, capsys, app, override, key
):
    code, _, err = call_app(app, tmp_path, [*override.split(), "mcap=false"], monkeypatch, capsys)
    line = one_error(err, f"flexlearn-{app}")
    assert code == 2 and f"'{key}'" in line and "GiB of memory" in line and "available" in line, line


def test_an_allocation_no_check_foresaw_is_one_line_naming_the_sizes(monkeypatch):
    from flexlearn.apps.runner import out_of_memory_message

    monkeypatch.setattr("sys.argv", ["flexlearn-x", "a.n=9", "-m", "hydra.run.dir=/x"])
    torch_says = RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
        "allocate 800000008 bytes. Error code 12 (Cannot allocate memory)"
    )
    line = out_of_memory_message(torch_says)
    assert line.startswith("out of memory: an allocation of 0.745 GiB failed") and line.endswith("(a.n=9)"), line
    assert out_of_memory_message(MemoryError()).startswith("out of memory: an allocation failed")
    assert out_of_memory_message(RuntimeError("shape mismatch")) == ""  # other errors stay bugs


def test_memory_estimate_is_above_the_measured_peak_and_not_far():
    """The estimate holds what the simulation really allocates (tracemalloc peak), within a factor of three."""
    import tracemalloc

    from flexlearn.jobs.runs import sweep_memory_bytes
    from flexlearn.sim.rig import RigConfig, simulate_sweep

    rig = config.from_dict(RigConfig, {"n_poses": 8000}, "sim")
    tracemalloc.start()
    simulate_sweep(rig)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= sweep_memory_bytes(rig) <= 3 * peak


def test_json_is_strict_with_the_reason_beside_each_null(tmp_path):
    doc = {"a": math.nan, "b": [1.0, math.inf], "c": {"d": -math.inf}, "ok": 1.5}
    write_json_atomic(tmp_path / "m.json", doc)
    back = strict((tmp_path / "m.json").read_text())
    assert back["a"] is None and back["a_null_reason"] == "nan"
    assert back["b"] == [1.0, None] and back["b_null_reason"] == "[1]: inf"
    assert back["c"] == {"d": None, "d_null_reason": "-inf"} and back["ok"] == 1.5
    assert "NaN" not in json_text(doc) and "Infinity" not in json_text(doc)


def test_checkpoints_are_written_beside_their_target_whatever_tmpdir(tmp_path, monkeypatch):
    import torch

    from flexlearn.tasks.checkpoints import atomic_checkpoint_io, read_checkpoint

    elsewhere = tmp_path / "tmpfs"
    elsewhere.mkdir()
    monkeypatch.setenv("TMPDIR", str(elsewhere))
    renames = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda s, d: renames.append((Path(s), Path(d))) or real(s, d))
    target = tmp_path / "ckpts" / "last.ckpt"
    io = atomic_checkpoint_io()
    for epoch in range(2):
        io.save_checkpoint({"epoch": epoch, "state_dict": {"w": torch.ones(3)}}, target)
    assert read_checkpoint(target)["epoch"] == 1
    assert [d for _, d in renames] == [target, target]
    assert all(s.parent == target.parent for s, _ in renames), renames
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in target.parent.iterdir()) == ["last.ckpt"]
