#!/usr/bin/env python
"""Raspberry Pi runner for a flexlearn seed-002 bundle: frames in → backbone, tip height, spool command out.

Imports only torch (+ pyserial for ``--serial``, + rclpy when ``--ros`` and it is installed). One torch thread.

    python pi_runner.py bundle.pt --log frames.jsonl [--realtime] [--out poses.jsonl | --csv poses.csv]
    python pi_runner.py bundle.pt --serial /dev/ttyACM0 --baud 921600 [--format bin] [--control] [--ros]

``--format bin`` reads the binary protocol ``flexlearn-binframes/1`` (fixed little-endian frames with a sync word
and CRC-32, documented in flexlearn/runtime/serial_frames.py; copy that file next to this one on the Pi).

Frame protocol ``flexlearn-frames/1``: UTF-8 JSON lines, one frame per line, times in seconds (monotonic clock of
the master, float), SI units; missing values may be ``null`` (read as NaN: the estimator holds and flags them).
  {"type": "ref",   "t": 0.0, "q": [[w, x, y, z], ...]}       N+1 quaternions, robot hanging straight (q⁰)
  {"type": "att",   "t": 0.06, "q": [[w, x, y, z], ...]}      one attitude sweep, base module first
  {"type": "mag",   "t": 0.063, "coil": 2, "m": [[x, y, z], ...]}   one magnetometer round of receivers 1..N [T];
                                                               coil = module whose coil is on (−1: none)
  {"type": "spool", "t": 0.07, "pos": 0.0123}                 spool take-up [m of tendon] (for --control)
  {"type": "target", "t": 0.0, "h": 0.040}                    new tip-height target [m]
If no "ref" frame arrives, the first "att" frame is the reference. Lines that fail to parse are counted and skipped.
Output (one per "att" frame): {"t", "h", "points" (N+1)×3, "flags" (N), and with --control "v", "status"} as JSON
lines, or CSV columns t, h, v, status, flags_or, p0x..pNz.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import IO, Iterator, Optional

import torch

NAN = float("nan")


def _num(x) -> float:
    return NAN if x is None else float(x)


def _rows(v, width: int) -> torch.Tensor:
    return torch.tensor([[_num(c) for c in (r if r is not None else [None] * width)] for r in v], dtype=torch.float64)


def read_lines(source: IO) -> Iterator[dict]:
    """Frames of the JSON-lines protocol; unparsable lines give {"type": "bad"}."""
    for line in source:
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        line = line.strip()
        if not line:
            continue
        try:
            fr = json.loads(line)
            fr["t"] = float(fr["t"])
        except (ValueError, KeyError, TypeError):
            yield {"type": "bad"}
            continue
        yield fr


def _serial_frames_module():
    """`flexlearn.runtime.serial_frames` (stdlib only): from an installed flexlearn, else serial_frames.py copied
    next to this script, else the repository copy."""
    try:
        from flexlearn.runtime import serial_frames
        return serial_frames
    except ImportError:
        import importlib.util
        from pathlib import Path
        here = Path(__file__).resolve().parent
        for cand in (here / "serial_frames.py", here.parent / "flexlearn" / "runtime" / "serial_frames.py"):
            if cand.exists():
                spec = importlib.util.spec_from_file_location("serial_frames", cand)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                return mod
        raise


def read_binary(source: IO, stats: dict, chunk: int = 4096) -> Iterator[dict]:
    """Frames of the binary protocol ``flexlearn-binframes/1`` (see serial_frames.py); parser counters → ``stats``.

    Reads what is available (a serial port's ``in_waiting``, at least one byte) or ``chunk`` bytes from a file.
    """
    parser = _serial_frames_module().FrameParser()
    stats.update(parser.stats)
    while True:
        waiting = getattr(source, "in_waiting", None)
        data = source.read(max(1, waiting) if waiting is not None else chunk)
        if not data:
            return
        frames = parser.feed(data)
        stats.update(parser.stats)
        yield from frames


def paced(frames: Iterator[dict], realtime: bool) -> Iterator[dict]:
    """With ``realtime``, sleep so that frame times map onto wall-clock time (replaying a log)."""
    t_wall0: Optional[float] = None
    t_log0 = 0.0
    for fr in frames:
        t = fr.get("t", NAN)
        if realtime and isinstance(t, float) and math.isfinite(t):
            if t_wall0 is None:
                t_wall0, t_log0 = time.monotonic(), t
            delay = (t - t_log0) - (time.monotonic() - t_wall0)
            if delay > 0:
                time.sleep(delay)
        yield fr


class Outputs:
    """JSON-lines or CSV writer, plus optional ROS 2 publishers (height, backbone as PoseArray, spool command)."""

    def __init__(self, path: Optional[str], csv: bool, ros: bool) -> None:
        self.f = open(path, "w") if path else sys.stdout
        self.csv = csv
        self.header = False
        self.ros = None
        if ros:
            try:
                import rclpy
                from geometry_msgs.msg import Pose, PoseArray
                from std_msgs.msg import Float64
                rclpy.init()
                node = rclpy.create_node("flexlearn_shape")
                self.ros = (node, node.create_publisher(Float64, "tip_height", 10),
                            node.create_publisher(PoseArray, "backbone", 10),
                            node.create_publisher(Float64, "spool_velocity", 10), Float64, Pose, PoseArray)
            except ImportError:
                print("rclpy not available: ROS 2 publishing disabled", file=sys.stderr)

    def write(self, t: float, pts: torch.Tensor, h: float, flags: torch.Tensor, v: Optional[float],
              status: Optional[int]) -> None:
        if self.csv:
            if not self.header:
                cols = ["t", "h", "v", "status", "flags_or"] + [f"p{i}{c}" for i in range(pts.shape[0]) for c in "xyz"]
                self.f.write(",".join(cols) + "\n")
                self.header = True
            f_or = 0
            for x in flags.tolist():
                f_or |= int(x)
            vals = [t, h, NAN if v is None else v, -1 if status is None else status, f_or] + pts.reshape(-1).tolist()
            self.f.write(",".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in vals) + "\n")
        else:
            rec = {"t": t, "h": h, "points": [[round(c, 6) for c in p] for p in pts.tolist()], "flags": flags.tolist()}
            if v is not None:
                rec["v"], rec["status"] = v, status
            self.f.write(json.dumps(rec) + "\n")
        if self.ros is not None:
            node, pub_h, pub_b, pub_v, f64, pose_t, arr_t = self.ros
            m = f64()
            m.data = h
            pub_h.publish(m)
            arr = arr_t()
            arr.header.frame_id = "robot_base"
            for p in pts.tolist():
                ps = pose_t()
                ps.position.x, ps.position.y, ps.position.z = p
                arr.poses.append(ps)
            pub_b.publish(arr)
            if v is not None:
                m2 = f64()
                m2.data = v
                pub_v.publish(m2)

    def close(self) -> None:
        if self.f is not sys.stdout:
            self.f.close()


def run(bundle_path: str, source: IO, realtime: bool = False, out: Optional[str] = None, csv: bool = False,
        control: bool = False, ros: bool = False, binary: bool = False) -> dict:
    """Process every frame of ``source`` (JSON lines, or binary frames with ``binary``); returns counters.

    Torch-only. With ``binary`` the counters include the parser's (``bad_crc``, ``bad_header``, ``skipped_bytes``,
    ``dropped``, ``frames``)."""
    torch.set_num_threads(1)
    extra = {"metadata.json": ""}
    bundle = torch.jit.load(bundle_path, map_location="cpu", _extra_files=extra)
    meta = json.loads(extra["metadata.json"] or "{}")
    n = int(meta.get("n_segments", 9))
    writer = Outputs(out, csv, ros)
    counts = {"att": 0, "mag": 0, "bad": 0, "ref": 0, "spool": 0, "target": 0, "outputs": 0, "corrections": 0}
    have_ref = False
    spool = NAN
    lat = []
    with torch.inference_mode():
        link: dict = {}
        frames = read_binary(source, link) if binary else read_lines(source)
        for fr in paced(frames, realtime):
            kind = fr.get("type", "bad")
            try:
                if kind == "ref" or (kind == "att" and not have_ref):
                    bundle.set_reference(_rows(fr["q"], 4).reshape(n + 1, 4))
                    have_ref = True
                    counts["ref"] += 1
                    if kind == "ref":
                        continue
                if kind == "att":
                    t0 = time.perf_counter()
                    pts, h, flags = bundle.attitude(fr["t"], _rows(fr["q"], 4).reshape(n + 1, 4))
                    v = status = None
                    if control:
                        v, status = bundle.control(fr["t"], spool)
                    lat.append(time.perf_counter() - t0)
                    writer.write(fr["t"], pts, float(h), flags, v, status)
                    counts["att"] += 1
                    counts["outputs"] += 1
                elif kind == "mag":
                    applied = bundle.magnetometer(fr["t"], _rows(fr["m"], 3).reshape(n, 3), int(fr.get("coil", -1)))
                    counts["corrections"] += int(applied.sum())
                    counts["mag"] += 1
                elif kind == "spool":
                    spool = _num(fr.get("pos"))
                    counts["spool"] += 1
                elif kind == "target":
                    bundle.set_target(float(fr["h"]))
                    counts["target"] += 1
                else:
                    counts["bad"] += 1
            except (KeyError, ValueError, TypeError, RuntimeError):
                counts["bad"] += 1
    writer.close()
    counts.update({f"link_{k}": v for k, v in link.items()})
    if lat:
        lat.sort()
        counts["attitude_us_median"] = 1e6 * lat[len(lat) // 2]
    return counts


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--log", help="recorded frames (JSON lines)")
    src.add_argument("--serial", help="serial device, e.g. /dev/ttyACM0 (needs pyserial)")
    ap.add_argument("--baud", type=int, default=921600)
    ap.add_argument("--format", choices=("jsonl", "bin"), default="jsonl",
                    help="frame protocol: JSON lines (flexlearn-frames/1) or binary (flexlearn-binframes/1)")
    ap.add_argument("--realtime", action="store_true", help="replay a log at real time (default: as fast as possible)")
    ap.add_argument("--out", default=None, help="output file (default stdout)")
    ap.add_argument("--csv", action="store_true", help="CSV instead of JSON lines")
    ap.add_argument("--control", action="store_true", help="also run the tip-height controller")
    ap.add_argument("--ros", action="store_true", help="publish to ROS 2 when rclpy is present")
    a = ap.parse_args(argv)
    if a.serial:
        import serial  # pyserial
        source = serial.Serial(a.serial, a.baud, timeout=None)
    else:
        source = open(a.log, "rb" if a.format == "bin" else "r")
    try:
        counts = run(a.bundle, source, a.realtime, a.out, a.csv, a.control, a.ros, binary=a.format == "bin")
    finally:
        source.close()
    print(json.dumps(counts), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
