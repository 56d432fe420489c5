"""`flexlearn-frames` streams parsed by the Pi runner, and the runner's messages for a dry run that lacks
spool frames or the binary parser."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEGMENTS = 9


def _load_runner(path: Path):
    spec = importlib.util.spec_from_file_location(f"pi_runner_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def runner():
    return _load_runner(ROOT / "scripts" / "pi_runner.py")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    from flexlearn.models.direction_mlp import DirectionMLP
    from flexlearn.runtime.deploy import build_bundle, export_bundle
    from flexlearn.runtime.pikit.manifest import manifest_path, manifest_record

    path = tmp_path_factory.mktemp("bundle") / "bundle.pt"
    export_bundle(build_bundle(DirectionMLP(hidden=(8,)), SEGMENTS), path)
    manifest_path(path).write_text(json.dumps(manifest_record(path, "torchscript")))
    return path


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    """1.5 s of 2d_curl as JSON lines and as binary frames, with what flexlearn-frames printed."""
    from flexlearn.apps.frames import main

    d = tmp_path_factory.mktemp("frames")
    printed = {}
    for name in ("f.jsonl", "f.bin"):
        out = io.StringIO()
        stdout, sys.stdout = sys.stdout, out
        try:
            assert main(["--out", str(d / name), "--duration", "1.5", "--period", "3"]) == 0
        finally:
            sys.stdout = stdout
        printed[name] = json.loads(out.getvalue().strip().splitlines()[-1])
    return d, printed


def test_frames_command_streams_parse_with_the_runner(runner, streams, bundle):
    d, printed = streams
    assert printed["f.bin"]["format"] == "bin" and printed["f.jsonl"]["format"] == "jsonl"
    n_att = printed["f.jsonl"]["frames"]["att"]
    assert n_att > 10 and printed["f.bin"]["frames"] == printed["f.jsonl"]["frames"]
    with open(d / "f.jsonl", "rb") as f:
        kinds = [fr["type"] for fr in runner.read_lines(f)]
    assert kinds[0] == "ref" and kinds.count("att") == n_att
    stats: dict = {}
    with open(d / "f.bin", "rb") as f:
        frames = list(runner.read_binary(f, stats))
    assert [fr["type"] for fr in frames] == kinds and stats["bad_crc"] == 0
    for name, binary in (("f.jsonl", False), ("f.bin", True)):
        with open(d / name, "rb") as f:
            counts = runner.run(str(bundle), f, out=str(d / f"{name}.out"), binary=binary)
        assert counts["bad"] == 0 and counts["outputs"] == n_att, counts


def test_control_without_spool_frames_warns_once(runner, streams, bundle, capsys):
    d, printed = streams
    with open(d / "f.jsonl", "rb") as f:
        counts = runner.run(str(bundle), f, out=str(d / "control.out"), control=True)
    err = capsys.readouterr().err
    assert err.count("no 'spool' frame") == 1 and "holds" in err
    assert counts["spool"] == 0 and counts["outputs"] == printed["f.jsonl"]["frames"]["att"]


def test_binary_frames_without_the_parser_fail_with_one_line(tmp_path, bundle, monkeypatch, capsys):
    """A kit copied without pikit/serial_frames.py names the missing file in one line (exit 2)."""
    shutil.copy(ROOT / "scripts" / "pi_runner.py", tmp_path / "pi_runner.py")
    shutil.copytree(ROOT / "flexlearn" / "runtime" / "pikit", tmp_path / "pikit")
    (tmp_path / "pikit" / "serial_frames.py").unlink()
    for name in [m for m in sys.modules if m == "pikit" or m.startswith("pikit.")]:
        monkeypatch.delitem(sys.modules, name)  # the kit's own package, not one an earlier test loaded
    monkeypatch.setitem(sys.modules, "flexlearn.runtime.pikit.serial_frames", None)  # no flexlearn fallback
    monkeypatch.syspath_prepend(str(tmp_path))
    lone = _load_runner(tmp_path / "pi_runner.py")
    assert Path(lone.PIKIT.__file__).parent == tmp_path / "pikit"
    (tmp_path / "capture.bin").write_bytes(b"\xa5\x5a" + bytes(40))
    status = lone.main([str(bundle), "--log", str(tmp_path / "capture.bin"), "--format", "bin"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "serial_frames.py" in err[0], err
    for name in [m for m in sys.modules if m == "pikit" or m.startswith("pikit.")]:
        monkeypatch.delitem(sys.modules, name)
