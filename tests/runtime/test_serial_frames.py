"""Binary frame protocol flexlearn-binframes/1: round trip, corruption and resynchronisation, the Pi runner path."""

from __future__ import annotations

import ast
import importlib.util
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from flexlearn.replay import frames
from flexlearn.runtime.deploy import build_bundle, export_bundle
from flexlearn.runtime.pikit import serial_frames as sf
from flexlearn.runtime.pikit.manifest import manifest_path, manifest_record
from flexlearn.sensing.magcal import fit_ellipsoid
from flexlearn.sim import shape_scenarios as scenarios
from flexlearn.sim.robot import simulate_robot

ROOT = Path(__file__).resolve().parents[2]
Q = [[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, -0.5, 0.5], [0.0, 0.0, 0.0, 1.0]]
M = [[1e-5, -2.5e-5, 4.0e-5], [None, 3e-6, -7e-6]]


def _frames():
    return [
        sf.encode_frame("ref", 0.0, 0, q=Q),
        sf.encode_frame("att", 0.06, 1, q=Q),
        sf.encode_frame("mag", 0.063, 2, m=M, coil=1),
        sf.encode_frame("spool", 0.07, 3, value=0.0123),
        sf.encode_frame("target", 0.08, 4, value=0.04),
    ]


def test_layout_and_round_trip():
    raw = _frames()
    att = raw[1]
    sync, ver, kind, length, seq = struct.unpack_from("<2sBBHH", att)
    assert (sync, ver, kind, length, seq) == (b"\xa5\x5a", 1, 2, 8 + 16 * 3, 1)
    assert len(att) == 8 + length + 4
    assert struct.unpack_from("<I", att, 8 + length)[0] == __import__("zlib").crc32(att[2 : 8 + length])
    p = sf.FrameParser()
    out = p.feed(b"".join(raw))
    assert [f["type"] for f in out] == ["ref", "att", "mag", "spool", "target"]
    assert out[1]["t"] == 0.06 and np.allclose(out[1]["q"], Q)
    assert out[2]["coil"] == 1 and np.isnan(out[2]["m"][1][0])
    assert np.allclose(np.nan_to_num(out[2]["m"]), np.nan_to_num(np.array(M, dtype=float)), rtol=1e-6, atol=0)
    assert out[3]["pos"] == 0.0123 and out[4]["h"] == 0.04
    assert p.stats == {
        "frames": 5,
        "bad_crc": 0,
        "bad_header": 0,
        "skipped_bytes": 0,
        "dropped": 0,
        "duplicates": 0,
        "reordered": 0,
        "seq_resets": 0,
        "bad_time": 0,
    }


def test_byte_by_byte_feed_equals_bulk():
    raw = b"".join(_frames())
    p = sf.FrameParser()
    out = [f for k in range(len(raw)) for f in p.feed(raw[k : k + 1])]
    assert json.dumps(out) == json.dumps(sf.FrameParser().feed(raw))  # NaN-aware equality
    assert len(out) == 5 and p.stats["frames"] == 5


def test_corruption_resync_and_counters():
    raw = _frames()
    bad_payload = bytearray(raw[1])
    bad_payload[20] ^= 0x40  # a flipped bit in a quaternion
    bad_length = bytearray(raw[2])
    bad_length[4:6] = struct.pack("<H", 4000)  # corrupted length field: must not swallow frames
    stream = (
        b"\x00\xa5\xff garbage" + raw[0] + bytes(bad_payload) + b"\xa5\x5a\x01" + bytes(bad_length) + raw[3] + raw[4]
    )
    p = sf.FrameParser()
    out = []
    for k in range(0, len(stream), 7):  # arbitrary chunking
        out += p.feed(stream[k : k + 7])
    assert [f["type"] for f in out] == ["ref", "spool", "target"]
    assert p.stats["bad_crc"] == 1  # the flipped bit
    assert p.stats["bad_header"] >= 2  # truncated candidate + the bad length
    assert p.stats["dropped"] == 2  # seq 1 and 2 lost
    assert p.stats["skipped_bytes"] >= len(b"\x00\xa5\xff garbage")


def test_encode_rejects_bad_rows():
    with pytest.raises(ValueError, match="expected 4 values"):
        sf.encode_frame("att", 0.0, q=[[1.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="kind"):
        sf.encode_frame("pose", 0.0)


def test_serial_frames_is_stdlib_only():
    """The Pi path must not need flexlearn or numpy: serial_frames.py imports only the standard library."""
    tree = ast.parse((ROOT / "flexlearn/runtime/pikit/serial_frames.py").read_text())
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert mods <= set(sys.stdlib_module_names) | {"__future__"}, mods


def test_pi_runner_binary_log_matches_json_lines(tmp_path, direction_model):
    rec = simulate_robot(scenarios.scenario("2d_curl", period=5.0), 5.0)
    w = torch.stack([fit_ellipsoid(rec.cal[j])[0] for j in range(9)])
    bundle = tmp_path / "bundle.pt"
    export_bundle(
        build_bundle(direction_model, 9, soft_iron=w, estimator={"full_scale": rec.meta["full_scale"]}), bundle
    )
    manifest_path(bundle).write_text(json.dumps(manifest_record(bundle, "torchscript")))  # pi_runner verifies it
    frames.write_frames_jsonl(rec, tmp_path / "f.jsonl")
    frames.write_frames_binary(rec, tmp_path / "f.bin")
    raw = bytearray((tmp_path / "f.bin").read_bytes())
    raw[:0] = b"noise\xa5\x5a"  # junk before the first frame
    (tmp_path / "f.bin").write_bytes(bytes(raw))
    spec = importlib.util.spec_from_file_location("pi_runner", ROOT / "scripts/pi_runner.py")
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    cj = runner.run(str(bundle), open(tmp_path / "f.jsonl"), out=str(tmp_path / "j.jsonl"))
    cb = runner.run(str(bundle), open(tmp_path / "f.bin", "rb"), out=str(tmp_path / "b.jsonl"), binary=True)
    assert cb["att"] == cj["att"] == rec.att_t.size and cb["bad"] == 0
    assert cb["corrections"] == cj["corrections"] > 0
    assert cb["link_frames"] == len(rec.frames()) + 1 and cb["link_dropped"] == 0 and cb["link_skipped_bytes"] >= 5
    pj = np.array([json.loads(x)["points"] for x in (tmp_path / "j.jsonl").read_text().splitlines()])
    pb = np.array([json.loads(x)["points"] for x in (tmp_path / "b.jsonl").read_text().splitlines()])
    assert np.abs(pj - pb).max() < 2e-5  # float32 quaternions/readings on the wire [m]
