"""The Raspberry Pi kit: one folder, every file verified, a self-check that runs without flexlearn, refusals as one
line; the runtime package it carries is the one flexlearn imports."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flexlearn.errors import ConfigError, FlexlearnError
from flexlearn.runtime.pikit import selfcheck
from flexlearn.runtime.pikit.manifest import UntrustedArtifactError, verify_set
from tests.kit.kit_factory import ROOT, bundle_config, write_checkpoint

# Runs the kit's runner with every import of flexlearn refused (a Pi has none), from a folder outside the repository.
NO_FLEXLEARN = """
import importlib.abc, runpy, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "flexlearn":
            raise ImportError("no flexlearn on the Pi")
sys.meta_path.insert(0, Block())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _run(kit: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", NO_FLEXLEARN, str(kit / "pi_runner.py"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_kit_holds_everything_and_names_it(kit):
    record = verify_set(kit)
    files = {str(p.relative_to(kit)) for p in kit.rglob("*") if p.is_file()} - {".flexlearn-output"}
    assert set(record["set"]) == files - {"kit.json"}
    for name in ("pi_runner.py", "arm_runner.py", "requirements.txt", "README.md", "robot_bundle.pt"):
        assert name in files
    pikit = ROOT / "flexlearn" / "runtime" / "pikit"
    assert {f"pikit/{p.name}" for p in pikit.glob("*.py")} <= files  # one source: the package flexlearn imports
    assert {f"pikit/foxglove_schemas/{p.name}" for p in (pikit / "foxglove_schemas").glob("*.json")} <= files
    assert record["bundles"] == ["robot_bundle.pt"] and "torch >=" in record["torch_loads"]
    req = (kit / "requirements.txt").read_text()
    names = {line.split(";")[0].split("=")[0].split(">")[0].strip() for line in req.splitlines() if line[:1].isalpha()}
    assert names == {"torch", "numpy", "pyserial", "typing-extensions"}, req  # all that --no-deps installs
    readme = (kit / "README.md").read_text()
    assert "pi_runner.py --self-check" in readme and "pip install --no-deps -r requirements.txt" in readme


def test_self_check_passes_without_flexlearn_outside_the_repository(kit, tmp_path):
    res = _run(kit, "--self-check", "--self-check-out", str(tmp_path / "out.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["passed"] and report["bundles"]["robot_bundle.pt"]["max_abs_diff"] <= selfcheck.TOL
    produced = json.loads((tmp_path / "out.json").read_text())["bundles"]["robot_bundle.pt"]
    expected = json.loads((kit / "selfcheck" / "expected.json").read_text())["bundles"]["robot_bundle.pt"]
    assert len(produced) == len(expected) > 20
    assert any(r["status"] != expected[0]["status"] for r in expected)  # the controller leaves its first state
    assert sum('coil": -1' not in line for line in (kit / "selfcheck" / "frames.jsonl").read_text().splitlines()) > 50


def test_the_runner_in_a_kit_takes_its_bundle_and_warms_up(kit, tmp_path):
    out, mcap = tmp_path / "poses.jsonl", tmp_path / "run.mcap"
    frames = str(kit / "selfcheck" / "frames.jsonl")
    res = _run(kit, "--log", frames, "--control", "--out", str(out), "--mcap", str(mcap), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    counts = json.loads(res.stderr.strip().splitlines()[-1])
    assert counts["outputs"] == len(out.read_text().splitlines()) > 20 and counts["bad"] == 0
    assert counts["warmup_frames"] > 100 and counts["warmup_s"] > 0
    # the kit's own MCAP writer (no flexlearn): one backbone per output, read back with the format's library
    reader = pytest.importorskip("mcap.reader")
    with open(mcap, "rb") as f:
        topics = [c.topic for _, c, _ in reader.make_reader(f).iter_messages()]
    assert topics.count("/robot/backbone") == topics.count("/robot/status") == counts["outputs"]


def test_a_changed_or_mixed_kit_is_refused_with_one_line(kit, tmp_path):
    from flexlearn.jobs.export import export_kit

    other = tmp_path / "other"
    export_kit(write_checkpoint(tmp_path / "m1.ckpt", 1), other, bundle_config())
    mixed = tmp_path / "mixed"
    shutil.copytree(kit, mixed)
    for name in ("robot_bundle.pt", "robot_bundle.pt.manifest.json"):  # a bundle of another export, with its manifest
        shutil.copy(other / name, mixed / name)
    changed = tmp_path / "changed"
    shutil.copytree(kit, changed)
    with open(changed / "pikit" / "outputs.py", "a") as f:
        f.write("\n# edited\n")
    for folder, name in ((mixed, "robot_bundle.pt"), (changed, "pikit/outputs.py")):
        res = _run(folder, "--self-check", cwd=tmp_path)
        err = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(err) == 1 and name in err[0] and "kit.json" in err[0], res.stderr
    (changed / "kit.json").unlink()  # an interrupted writer never leaves this: the folder is swapped in whole
    res = _run(changed, "--self-check", cwd=tmp_path)
    assert res.returncode == 2 and "--self-check runs in a kit" in res.stderr and len(res.stderr.splitlines()) == 1


def test_a_self_check_that_differs_names_the_record():
    rec = {"t": 0.1, "h": 0.01, "points": [[0.0, 0.0, 0.0]], "flags": [0], "v": 0.0, "status": 1}
    same = selfcheck.compare_records([rec], [dict(rec)])
    assert same["passed"] and same["max_abs_diff"] == 0.0
    moved = selfcheck.compare_records([rec], [{**rec, "h": 0.01 + 2e-6}])
    assert not moved["passed"] and "record 0" in moved["first_problem"] and moved["max_abs_diff"] == pytest.approx(2e-6)
    flagged = selfcheck.compare_records([rec], [{**rec, "flags": [4]}])
    assert not flagged["passed"] and not flagged["flags_identical"]
    assert not selfcheck.compare_records([rec], [])["passed"]
    assert not selfcheck.compare_records([rec], [{**rec, "h": None}])["passed"]


def test_bundle_format_is_checked_and_pte_needs_executorch(tmp_path):
    from flexlearn.jobs.export import export_kit

    ckpt = write_checkpoint(tmp_path / "m.ckpt", 0)
    with pytest.raises(ConfigError, match="bundle.format"):
        export_kit(ckpt, tmp_path / "k1", bundle_config(format="onnx"))
    try:
        import executorch  # noqa: F401  (optional: the .pte path)
    except ImportError:
        with pytest.raises(FlexlearnError, match="ExecuTorch") as info:
            export_kit(ckpt, tmp_path / "k2", bundle_config(format="pte"))
        assert "\n" not in str(info.value)
        assert not (tmp_path / "k2").exists()
        pytest.skip("executorch is not installed: the .pte kit is refused with one line (checked); not built")
    export_kit(ckpt, tmp_path / "k2", bundle_config(format="both"))
    res = _run(tmp_path / "k2", "--self-check", cwd=tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout.splitlines()[-1])["passed"], res.stderr[-2000:]


def test_the_kit_package_imports_nothing_of_flexlearn():
    """Each module of pikit imports the standard library, torch (executorch in a function) and its siblings
    relatively; a step out of the package (``..``) only inside ``try`` or a function, where the kit's top-level
    copy gets an ImportError."""
    optional = {"executorch", "serial", "rclpy", "geometry_msgs", "std_msgs"}  # imported where used (--serial, --ros)
    allowed = set(sys.stdlib_module_names) | {"__future__", "torch"} | optional
    for path in sorted((ROOT / "flexlearn" / "runtime" / "pikit").glob("*.py")):
        tree = ast.parse(path.read_text())
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, (ast.Try, ast.FunctionDef)) for n in ast.walk(t)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= allowed, (path.name, ast.dump(node))
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    assert node.module.split(".")[0] in allowed, (path.name, node.module)
                elif node.level > 1:
                    assert id(node) in guarded, (path.name, node.module)


def test_a_missing_set_file_is_named(kit, tmp_path):
    copy = tmp_path / "k"
    shutil.copytree(kit, copy)
    (copy / "README.md").unlink()
    with pytest.raises(UntrustedArtifactError, match="README.md.*missing"):
        verify_set(copy)


# Writes a kit over an existing one and ends as SIGKILL would (no cleanup) just before or just after the folder swap
# (`flexlearn.atomic.atomic_dir`: the finished folder is exchanged with the old one in one step).
KILL_KIT = """
import os, sys
import flexlearn.atomic as atomic
from flexlearn.jobs.export import export_kit
from tests.kit.kit_factory import bundle_config
real, when = atomic.exchange_paths, sys.argv[3]
def exchange(a, b):
    if when == "before":
        os._exit(137)
    real(a, b)
    os._exit(137)
atomic.exchange_paths = exchange
export_kit(sys.argv[1], sys.argv[2], bundle_config())
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_kill_around_the_kit_swap_leaves_a_whole_kit(kit, tmp_path, when):
    from flexlearn.jobs.export import export_kit

    target = tmp_path / "kit"
    shutil.copytree(kit, target)
    old = verify_set(target)["set"]
    ckpt = write_checkpoint(tmp_path / "m1.ckpt", 1)
    res = subprocess.run(
        [sys.executable, "-c", KILL_KIT, str(ckpt), str(target), when], cwd=ROOT, capture_output=True, timeout=300
    )
    assert res.returncode == 137, res.stderr[-2000:]
    now = verify_set(target)["set"]  # a whole kit is in place: the old one, or (after the swap) the new one
    assert now == old if when == "before" else now != old
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")], "the killed writer left its folder"
    export_kit(ckpt, target, bundle_config())  # the next export cleans up and puts a whole kit in place
    assert verify_set(target)["set"] != old
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_torch_that_cannot_load_the_bundle_is_named_with_both_versions(kit, monkeypatch):
    """What torch 2.9.1 says of a bundle whose code calls torch.broadcast_shapes (checked under qemu), as one line."""
    import torch

    from flexlearn.runtime.pikit import compat, runner

    def old_torch_load(*args, **kwargs):
        raise RuntimeError("\nUnknown builtin op: aten::broadcast_shapes.\nCould not find any similar ops")

    exported_by = torch.__version__
    monkeypatch.setattr(torch.jit, "load", old_torch_load)
    monkeypatch.setattr(torch, "__version__", "2.9.1+cpu")
    with pytest.raises(runner.RunnerError) as info:
        runner.load_checked(str(kit / "robot_bundle.pt"))
    text = str(info.value)
    assert (
        "\n" not in text
        and "2.9.1+cpu" in text
        and f"written by torch {exported_by}" in text
        and "broadcast_shapes" in text
    )
    with pytest.raises(compat.TorchVersionError, match=r"torch 2\.1\.0.*torch>=2\.9"):
        compat.check_torch("2.1.0", "2.13.0", "b.pt")
    assert compat.required_torch("x = torch.broadcast_shapes(a, b)") == (2, 13)
    assert compat.required_torch("x = torch.broadcast_tensors(a, b)") == compat.TORCH_MIN


def test_native_start_up_lines_are_dropped_and_other_lines_kept(tmp_path):
    """What native code writes on file descriptor 2 while a program bundle starts passes through the filter but
    for the runtime's known start-up lines (`program_bundle.EXECUTORCH_STARTUP_NOISE`)."""
    code = (
        "import os, sys\n"
        "from flexlearn.runtime.pikit.program_bundle import EXECUTORCH_STARTUP_NOISE, native_log_filtered\n"
        "with native_log_filtered(EXECUTORCH_STARTUP_NOISE):\n"
        "    os.write(2, b'[cpuinfo_utils.cpp:109] Failed to open midr file\\n')\n"
        "    os.write(2, b'a real error line\\n')\n"
        "    os.write(2, b'[program.cpp:153] InternalConsistency verification requested but not available\\n')\n"
        "os.write(2, b'after\\n')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0 and res.stderr == "a real error line\nafter\n", res.stderr
