"""Hostile inputs to the torch-only Pi runner (scripts/pi_runner.py): bad lines, NaN targets and times, clock jumps
under --realtime, unbounded statistics, and the integrity manifest of the bundle. Each test reproduces one defect."""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import random
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.deploy import build_bundle, export_bundle
from flexlearn.runtime.pikit.manifest import manifest_path, manifest_record

ROOT = Path(__file__).resolve().parents[2]
N = 2
Q = [[1.0, 0.0, 0.0, 0.0]] * (N + 1)
M = [[1e-5, 2e-5, 3e-5]] * N


def _load_runner():
    spec = importlib.util.spec_from_file_location("pi_runner", ROOT / "scripts" / "pi_runner.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def runner():
    return _load_runner()


def _write_manifest(path: Path) -> None:
    manifest_path(path).write_text(json.dumps(manifest_record(path, "torchscript")))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    path = tmp_path_factory.mktemp("bundle") / "bundle.pt"
    export_bundle(build_bundle(DirectionMLP(hidden=(8,)), N), path)
    _write_manifest(path)
    return path


def _line(**fr) -> bytes:
    return json.dumps(fr).encode()


def _att(t):
    return _line(type="att", t=t, q=Q)


def _strict(text: str):
    """json.loads that refuses NaN / Infinity (what a standard JSON reader does)."""

    def bad(name):
        raise ValueError(f"invalid JSON constant {name}")

    return json.loads(text, parse_constant=bad)


def _main(runner, capsys, tmp_path, bundle, lines, *args):
    log = tmp_path / "frames.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    rc = runner.main([str(bundle), "--log", str(log), "--out", str(out), *args])
    err = capsys.readouterr().err.strip().splitlines()
    recs = [_strict(x) for x in out.read_text().splitlines()] if out.exists() else []
    return rc, recs, err


BAD_LINES = [
    b'{"type": "mag", "t": 0.5, "coil": 1e999, "m": [[0, 0, 0], [0, 0, 0]]}',  # number outside float64
    b'{"type": "att", "t": 0.5, "q": [[1e999, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]}',
    b'{"type": "att", "t": ' + b"9" * 400 + b', "q": [[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]}',
    b'{"type": "att", "t": 0.5, "q": [[' + b"9" * 400 + b", 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]}",
    b"[" * 100_000 + b"]" * 100_000,  # nested 100 000 deep
    b'{"type": "att", "t": 0.5, "q": "\xff\xfe"}',  # not UTF-8
    b'{"type": "att", "t": Infinity, "q": [[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]}',
    b'{"type": "att", "t": 0.5, "q": "abcd"}',  # wrong types and shapes
    b'{"type": "att", "t": 0.5, "q": [[1, 0, 0, 0], [1, 0, 0, 0]]}',
    b'{"type": "att", "t": 0.5, "q": [[1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]}',
    b'{"type": "att", "t": 0.5, "q": [[[1], 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]}',
    b'{"type": "mag", "t": 0.5, "coil": "x", "m": [[0, 0, 0], [0, 0, 0]]}',
    b'{"type": "mag", "t": 0.5, "coil": 1, "m": {"a": 1}}',
    b'{"type": "att", "t": "soon", "q": [[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]}',
    b'{"type": "att", "q": [[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]}',
    b'{"type": "target", "t": 0.5, "h": "high"}',
    b'{"type": ["att"], "t": 0.5}',
    b"[1, 2, 3]",
    b"not json",
    b'{"type": "att", "t": 0.5, "q": [' + b"0.1, " * 300_000 + b"0]}",  # a line over 1 MiB
]


def test_bad_lines_are_skipped_and_counted_never_fatal(runner, capsys, tmp_path, bundle):
    """Each of these lines used to stop the runner (exit 1) or was a silent mis-parse."""
    lines = [_line(type="ref", t=0.0, q=Q)]
    for k, bad in enumerate(BAD_LINES):
        lines += [_att(0.06 * (k + 1)), bad]
    lines.append(_att(10.0))
    rc, recs, err = _main(runner, capsys, tmp_path, bundle, lines)
    counts = json.loads(err[-1])
    assert rc == 0
    assert counts["bad"] == len(BAD_LINES) and sum(counts["bad_reasons"].values()) == len(BAD_LINES)
    assert counts["att"] == len(recs) == len(BAD_LINES) + 1
    assert {"number_out_of_range", "too_deep", "not_utf8", "field_q", "too_long"} <= set(counts["bad_reasons"])
    named = [x for x in err if "skipped" in x]
    assert len(named) == 10 and "outside float64" in named[0]  # the first ones are named on stderr


def test_fuzzed_lines_never_stop_the_runner(runner, capsys, tmp_path, bundle):
    rng = random.Random(7)
    good = [_att(0.06 * k) for k in range(1, 5)] + [_line(type="mag", t=0.3, coil=1, m=M)]
    lines = [_line(type="ref", t=0.0, q=Q)]
    for _ in range(300):
        b = bytearray(rng.choice(good))
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            op = rng.random()
            if op < 0.5:
                b[i] = rng.randrange(256)
            elif op < 0.75:
                del b[i:]
            else:
                b[i:i] = b[i : i + rng.randint(1, 8)]
        lines.append(bytes(b).replace(b"\n", b" "))
    rc, recs, err = _main(runner, capsys, tmp_path, bundle, lines)
    counts = json.loads(err[-1])
    assert rc == 0 and counts["att"] == len(recs) and counts["bad"] > 0
    assert all(all(math.isfinite(c) for p in r["points"] for c in p) for r in recs)


def test_nan_target_never_reaches_the_spool(runner, capsys, tmp_path, bundle):
    """{"type": "target", "h": NaN} used to give spool velocity NaN with status ACTIVE on every later frame."""
    lines = [_line(type="ref", t=0.0, q=Q)]
    for k in range(1, 80):
        t = 0.06 * k
        lines += [_line(type="spool", t=t, pos=0.001), _att(t)]
        if k == 50:
            lines.append(b'{"type": "target", "t": 3.0, "h": NaN}')
    rc, recs, err = _main(runner, capsys, tmp_path, bundle, lines, "--control")
    assert rc == 0 and len(recs) == 79
    assert all(isinstance(r["v"], float) and math.isfinite(r["v"]) for r in recs)  # strict JSON: no NaN
    assert any(r["v"] > 0.0 for r in recs[50:])  # still controlling on the last valid target
    counts = json.loads(err[-1])
    assert counts["bad_target"] == 1 and any("target" in x and "refused" in x for x in err)


def test_output_is_valid_json_for_a_missing_time(runner, capsys, tmp_path, bundle):
    """A NaN frame time used to be written as "t": NaN (not JSON)."""
    lines = [
        _line(type="ref", t=0.0, q=Q),
        _att(0.06),
        b'{"type": "att", "t": NaN, "q": ' + json.dumps(Q).encode() + b"}",
        _att(0.12),
    ]
    rc, recs, _ = _main(runner, capsys, tmp_path, bundle, lines)
    assert rc == 0 and [r["t"] for r in recs] == [0.06, None, 0.12]
    assert all(f & 16 for f in recs[1]["flags"])  # TIME_ORDER: the frame was not used


def test_realtime_pacing_caps_a_forward_jump(runner, monkeypatch):
    """--realtime used to sleep through a jump of the frame clock (to t = 1e6: 11.6 days)."""
    now = [100.0]
    sleeps = []

    def sleep(d):
        sleeps.append(d)
        now[0] += d

    monkeypatch.setattr(runner.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(runner.time, "sleep", sleep)
    frames = [{"type": "att", "t": t} for t in (0.0, 0.06, 0.12, 1e6, 1e6 + 0.06, 1e6 + 0.12, 5.0, 5.06)]
    assert list(runner.paced(iter(frames), True)) == frames
    assert max(sleeps) <= 1.0 and sum(sleeps) < 1.5
    assert sleeps[-1] == pytest.approx(0.06)  # paced again after each jump


def _held_by_runner_code() -> int:
    """Bytes still held that were allocated in the runner's own code (pi_runner.py, the pikit package): another
    thread of the test process (a pytest-xdist worker's channel) allocates in its own files, not in these."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, "*pi_runner.py"), tracemalloc.Filter(True, "*pikit*")]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


def test_latency_statistics_are_bounded(runner, tmp_path, bundle):
    """The runner kept every frame's latency in a list (~37 B per frame, for ever). Memory that the runner's own code
    allocated and still holds is probed after a garbage collection, 3,200 frames apart: the frames in flight and the
    output file's buffer differ between any two probes by tens of kB at most, bounded noise beside the ≈ 118 kB
    such a leak adds. All of the process's memory was probed before: in a full parallel run, allocations of other
    threads once made that 66 kB."""

    class Source:  # lines made on demand; memory probed
        def __init__(self, n):
            self.n, self.k, self.mem = n, 0, {}

        def readline(self, size=-1):
            self.k += 1
            if self.k in (400, 3600):
                gc.collect()
                self.mem[self.k] = _held_by_runner_code()
            if self.k == 1:
                return json.dumps({"type": "ref", "t": 0.0, "q": Q}) + "\n"
            return json.dumps({"type": "att", "t": 0.001 * self.k, "q": Q}) + "\n" if self.k <= self.n else ""

        def __iter__(self):
            return iter(self.readline, "")

    src = Source(4000)
    tracemalloc.start()
    try:
        counts = runner.run(str(bundle), src, out=str(tmp_path / "o.jsonl"))
    finally:
        tracemalloc.stop()
    assert counts["att"] == 3999
    assert src.mem[3600] - src.mem[400] < 60_000  # bytes over 3200 frames


def test_latency_statistics_quantiles(runner):
    stats = runner.LatencyStats()
    rng = random.Random(1)
    xs = [rng.lognormvariate(math.log(40e-6), 0.5) for _ in range(20000)]
    for x in xs:
        stats.add(x)
    xs.sort()
    assert stats.quantile(0.5) == pytest.approx(xs[len(xs) // 2], rel=0.015)
    assert stats.quantile(0.99) == pytest.approx(xs[int(0.99 * len(xs))], rel=0.015)
    assert len(stats.hist) == runner.LatencyStats.BINS and stats.max == xs[-1]


# ------------------------------------------------------------------------------------------- manifest
def test_bundle_without_valid_manifest_is_refused(runner, capsys, tmp_path, bundle):
    lines = [_line(type="ref", t=0.0, q=Q), _att(0.06)]
    bare = tmp_path / "bare.pt"
    shutil.copy(bundle, bare)
    rc, recs, err = _main(runner, capsys, tmp_path, bare, lines)
    assert rc == 2 and recs == [] and len(err) == 1
    assert "bare.pt" in err[0] and "manifest" in err[0]
    swapped = tmp_path / "swapped.pt"
    shutil.copy(bundle, swapped)
    _write_manifest(swapped)
    with open(swapped, "ab") as f:
        f.write(b"\0")  # changed after export
    rc, _, err = _main(runner, capsys, tmp_path, swapped, lines)
    assert rc == 2 and len(err) == 1 and "swapped.pt" in err[0] and "SHA-256" in err[0]
    rc, recs, err = _main(runner, capsys, tmp_path, bare, lines, "--trust-unverified")
    assert rc == 0 and len(recs) == 1 and "--trust-unverified" in err[0]
    rc, recs, _ = _main(runner, capsys, tmp_path, bundle, lines)
    assert rc == 0 and len(recs) == 1


def test_an_output_that_is_an_input_is_refused_before_it_is_truncated(runner, capsys, tmp_path, bundle):
    """``--out`` naming the log (also by another path or a hard link), the bundle or its manifest truncated that file
    on open (the log read as empty, 0 outputs, exit 0); now refused by name, every input unchanged. An ``--out``
    that is a directory or lies in a missing folder ended in a traceback; now one line."""
    log = tmp_path / "frames.jsonl"
    log.write_bytes(_line(type="ref", t=0.0, q=Q) + b"\n" + _att(0.06) + b"\n")
    (tmp_path / "link.jsonl").hardlink_to(log)
    before = {p: p.read_bytes() for p in (log, bundle, manifest_path(bundle))}
    for out, named in (
        (log, "--log"),
        (tmp_path / "sub" / ".." / "frames.jsonl", "--log"),
        (tmp_path / "link.jsonl", "--log"),
        (bundle, "the bundle"),
        (manifest_path(bundle), "the bundle's manifest"),
    ):
        rc = runner.main([str(bundle), "--log", str(log), "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and named in err[0] and "choose another output" in err[0], err
    assert all(p.read_bytes() == b for p, b in before.items())
    for out in (tmp_path, tmp_path / "no_such_folder" / "o.jsonl"):  # tracebacks before: IsADirectory, NotFound
        rc = runner.main([str(bundle), "--log", str(log), "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "does not exist" in err[0], err
    assert runner.main([str(bundle), "--log", str(log), "--out", str(tmp_path / "out.jsonl")]) == 0


def test_manifest_check_runs_with_torch_alone(tmp_path, bundle):
    """On the Pi there is no flexlearn: the runner imports the package pikit/ beside it (as the kit lays it out)."""
    shutil.copy(ROOT / "scripts" / "pi_runner.py", tmp_path)
    shutil.copytree(ROOT / "flexlearn" / "runtime" / "pikit", tmp_path / "pikit")
    shutil.copy(bundle, tmp_path / "b.pt")
    (tmp_path / "f.jsonl").write_bytes(_line(type="ref", t=0.0, q=Q) + b"\n" + _att(0.06) + b"\n")
    code = """
import importlib.abc, runpy, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "flexlearn":
            raise ImportError("no flexlearn on the Pi")
sys.meta_path.insert(0, Block())
sys.path.insert(0, ".")
m = runpy.run_path("pi_runner.py", run_name="pi_runner")
args = ["--log", "f.jsonl", "--out", "o.jsonl"]
print("RC", m["main"](["b.pt"] + args))
open("b.pt.manifest.json", "w").write(__import__("json").dumps({"sha256": m["_manifest_module"]().sha256_file("b.pt")}))
print("RC", m["main"](["b.pt"] + args), m["_manifest_module"]().__file__)
"""
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.stdout.split("\n")[:2] == ["RC 2", f"RC 0 {tmp_path / 'pikit' / 'manifest.py'}"], res.stdout + res.stderr
    assert "no manifest" in res.stderr
