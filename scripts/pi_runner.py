#!/usr/bin/env python
"""Raspberry Pi runner for a flexlearn seed-002 bundle: frames in → backbone, tip height, spool command out.

Imports only torch (+ pyserial for ``--serial``, + rclpy when ``--ros`` and it is installed). One torch thread.

    python pi_runner.py bundle.pt --log frames.jsonl [--realtime] [--out poses.jsonl] [--csv]
    python pi_runner.py bundle.pt --serial /dev/ttyACM0 --baud 921600 [--format bin] [--control] [--ros]
    python pi_runner.py arm_controller.pt --arm --log imu.jsonl     # the flexible-arm controller (arm_runner.py)
    python pi_runner.py bundle.pte --serial /dev/ttyACM0 ...     # the ExecuTorch program (needs executorch)

Bundle formats, by suffix: ``.pt`` TorchScript (`torch.jit.load`); ``.pte`` ExecuTorch program of the estimator
(needs ``executorch``), ``.pt2`` torch.export program set (needs flexlearn: the archive is inspected first); both
load through ``flexlearn/runtime/program_bundle.py`` (copy it with ``height_control.py`` and ``time_base.py``: the
tip-height PID runs beside the program). The three give the same outputs (to 1e-6 m, same flags; tested).

Integrity: the bundle (any format) must have its manifest ``bundle.pt.manifest.json`` (SHA-256, written by the
exporter) beside it; a missing or mismatching manifest refuses the file (one line on stderr, exit status 2).
``--trust-unverified`` skips the check (explicit opt-out, warned on stderr). Copy ``flexlearn/runtime/manifest.py``
next to this script (and ``serial_frames.py`` for ``--format bin``); both are standard library only.

``--format bin`` reads the binary protocol ``flexlearn-binframes/1`` (fixed little-endian frames with a sync word
and CRC-32, documented in flexlearn/runtime/serial_frames.py).

Frame protocol ``flexlearn-frames/1``: UTF-8 JSON lines, one frame per line, times in seconds (monotonic clock of
the master, float), SI units; missing values may be ``null`` (read as NaN: the estimator holds and flags them).
  {"type": "ref",   "t": 0.0, "q": [[w, x, y, z], ...]}       N+1 quaternions, robot hanging straight (q⁰)
  {"type": "att",   "t": 0.06, "q": [[w, x, y, z], ...]}      one attitude sweep, base module first
  {"type": "mag",   "t": 0.063, "coil": 2, "m": [[x, y, z], ...]}   one magnetometer round of receivers 1..N [T];
                                                               coil = module whose coil is on (−1: none)
  {"type": "spool", "t": 0.07, "pos": 0.0123}                 spool take-up [m of tendon] (for --control)
  {"type": "target", "t": 0.0, "h": 0.040}                    new tip-height target [m]
If no "ref" frame arrives, the first "att" frame is the reference. A bad line or frame never stops the runner: it
is skipped and counted (``bad``, by reason in ``bad_reasons``; the first few are named on stderr) — not UTF-8,
not JSON, nested too deeply, longer than 1 MiB, a number outside float64 (1e999, ±Infinity, a 400-digit integer),
an unknown type, a field of the wrong type or shape. A non-finite target is refused by the controller (it keeps
the last valid one; counted as ``bad_target``). The master's clock may restart: the bundle resynchronises.
Output (one per "att" frame): {"t", "h", "points" (N+1)×3, "flags" (N), and with --control "v", "status"} as JSON
lines (always valid JSON: a missing number is null), or CSV columns t, h, v, status, flags_or, p0x..pNz. The summary
(counters, latency median/p99 from a fixed-size histogram) goes to stderr as one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import IO, Callable, Iterator, Optional

import torch

NAN = float("nan")
MAX_WAIT = 1.0  # --realtime: longest sleep for one frame [s]; a larger jump re-anchors pacing
REPORT_BAD = 10  # bad frames named on stderr (the rest are only counted)
HOLD = 3  # controller status HOLD (flexlearn.runtime.height_control)
NO_SPOOL_WARN_AFTER = 20  # --control: warn once after this many attitude frames without a spool frame
KINDS = ("ref", "att", "mag", "spool", "target")


class RunnerError(Exception):
    """A fatal setup problem (unreadable bundle or metadata): one line on stderr, exit status 2."""


@functools.lru_cache(maxsize=None)
def _runtime_module(name: str):
    """`flexlearn.runtime.<name>` (stdlib-only modules): from an installed flexlearn, else ``<name>.py`` copied next
    to this script, else the repository copy."""
    try:
        return importlib.import_module(f"flexlearn.runtime.{name}")
    except ImportError:
        here = Path(__file__).resolve().parent
        key = f"flexlearn_runtime_{name}"  # registered: program_bundle.py finds the same module object
        if key in sys.modules:
            return sys.modules[key]
        for cand in (here / f"{name}.py", here.parent / "flexlearn" / "runtime" / f"{name}.py"):
            if cand.exists():
                spec = importlib.util.spec_from_file_location(key, cand)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                sys.modules[key] = mod
                return mod
        raise


def _serial_frames_module():  # binary protocol parser
    try:
        return _runtime_module("serial_frames")
    except ImportError:
        raise RunnerError(
            "--format bin needs the binary frame parser serial_frames.py next to pi_runner.py "
            "(copy flexlearn/runtime/serial_frames.py; standard library only)"
        ) from None


def _manifest_module():  # integrity manifests of model files
    return _runtime_module("manifest")


try:  # JSON-lines protocol: decoding, bad-line reasons
    _frame_lines = _runtime_module("frame_lines")
except ImportError:
    sys.exit(
        "pi_runner: error: frame_lines.py must lie next to pi_runner.py (copy flexlearn/runtime/frame_lines.py; "
        "standard library only)"
    )
BadFrame, decode_line, read_lines = _frame_lines.BadFrame, _frame_lines.decode_line, _frame_lines.read_lines


def read_binary(source: IO, stats: dict, chunk: int = 4096) -> Iterator[dict]:
    """Frames of the binary protocol ``flexlearn-binframes/1`` (see serial_frames.py); parser counters → ``stats``.
    Reads what is available (a serial port's ``in_waiting``, at least one byte) or ``chunk`` bytes from a file."""
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


# ------------------------------------------------------------------------------------------ frame checks
def _num(x, field: str) -> float:
    """A JSON number or null (NaN) as float; anything else is a `BadFrame` naming ``field``."""
    if x is None:
        return NAN
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise BadFrame(f"field_{field}", f"field '{field}': {type(x).__name__} {_short(x)} is not a number")
    try:
        return float(x)
    except OverflowError:
        raise BadFrame("number_out_of_range", f"field '{field}': number outside float64") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _short(x) -> str:
    s = repr(x)
    return s if len(s) <= 40 else s[:37] + "..."


def _rows(v, rows: int, width: int, field: str) -> torch.Tensor:
    """``rows`` × ``width`` numbers (a row may be null: all NaN) → float64 tensor (rows, width); else `BadFrame`."""
    if not isinstance(v, list) or len(v) != rows:
        got = f"{len(v)} rows" if isinstance(v, list) else f"{type(v).__name__} {_short(v)}"
        raise BadFrame(f"field_{field}", f"field '{field}': expected {rows} rows of {width} numbers, got {got}")
    flat = []
    for r in v:
        if r is None:
            flat.extend([NAN] * width)
        elif isinstance(r, list) and len(r) == width:
            flat.extend(_num(c, field) for c in r)
        else:
            raise BadFrame(f"field_{field}", f"field '{field}': row {_short(r)} is not {width} numbers or null")
    return torch.tensor(flat, dtype=torch.float64).reshape(rows, width)


def _coil(x) -> int:
    if x is None:
        return -1
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if isinstance(x, bool) or not isinstance(x, int) or not -32768 <= x <= 32767:
        raise BadFrame("field_coil", f"field 'coil': {_short(x)} is not a module index (int16, −1: none)")
    return x


def check_frame(fr: dict, n: int) -> dict:
    """A decoded frame → a typed one (``t`` float, tensors of the right shapes; ``n`` segments); raises `BadFrame`
    naming the field. A NaN time is kept (the estimator flags TIME_ORDER)."""
    kind = fr.get("type")
    if kind == "bad":
        raise BadFrame(fr.get("reason", "bad"), fr.get("message", "bad frame"))
    if not isinstance(kind, str) or kind not in KINDS:
        raise BadFrame("type", f"field 'type': {_short(kind)} is not one of {', '.join(KINDS)}")
    if "t" not in fr:
        raise BadFrame("field_t", "field 't' missing")
    out = {"type": kind, "t": _num(fr["t"], "t")}
    if kind in ("ref", "att"):
        out["q"] = _rows(fr.get("q"), n + 1, 4, "q")
    elif kind == "mag":
        out["m"] = _rows(fr.get("m"), n, 3, "m")
        out["coil"] = _coil(fr.get("coil", -1))
    elif kind == "spool":
        out["pos"] = _num(fr.get("pos"), "pos")
    else:
        if "h" not in fr:
            raise BadFrame("field_h", "field 'h' missing")
        out["h"] = _num(fr["h"], "h")
    return out


# ------------------------------------------------------------------------------------ pacing, statistics
def paced(
    frames: Iterator[dict],
    realtime: bool,
    max_wait: float = MAX_WAIT,
    clock: Optional[Callable[[], float]] = None,
    sleep: Optional[Callable[[float], None]] = None,
) -> Iterator[dict]:
    """With ``realtime``, sleep so that frame times map onto wall-clock time (replaying a log).

    A frame more than ``max_wait`` [s] ahead of (or behind) the pacing clock is a jump of the master's clock (or a
    stall): wait at most ``max_wait`` and re-anchor the pacing on that frame. ``clock`` / ``sleep`` default to
    `time.monotonic` / `time.sleep`.
    """
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    t_wall0: Optional[float] = None
    t_log0 = 0.0
    for fr in frames:
        t = fr.get("t", NAN)
        if realtime and isinstance(t, float) and math.isfinite(t):
            now = clock()
            if t_wall0 is None:
                t_wall0, t_log0 = now, t
            delay = (t - t_log0) - (now - t_wall0)
            if abs(delay) > max_wait:
                if delay > 0:
                    sleep(max_wait)
                t_wall0, t_log0 = clock(), t
            elif delay > 0:
                sleep(delay)
        yield fr


class LatencyStats:
    """Bounded latency statistics [s]: count, mean, max and a histogram with log-spaced bins (ratio 1.02, from 0.1 µs
    to ~100 s) for quantiles (within 1 %); constant memory however many samples are added."""

    LO = 1e-7
    LOG_RATIO = math.log(1.02)
    BINS = 1050

    def __init__(self) -> None:
        self.hist = [0] * self.BINS
        self.n, self.total, self.max = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        i = int(math.log(x / self.LO) / self.LOG_RATIO) if x > self.LO else 0
        self.hist[min(i, self.BINS - 1)] += 1
        self.n += 1
        self.total += x
        self.max = max(self.max, x)

    def quantile(self, q: float) -> float:
        """The sample of rank ⌊q n⌋ (q = 0.5: the upper median), as its bin's geometric centre [s]."""
        if self.n == 0:
            return NAN
        rank = min(int(q * self.n), self.n - 1)
        cum = 0
        for i, c in enumerate(self.hist):
            cum += c
            if cum > rank:
                return self.LO * math.exp((i + 0.5) * self.LOG_RATIO)
        return self.max

    def summary(self, prefix: str) -> dict:
        if self.n == 0:
            return {}
        return {
            f"{prefix}_us_median": 1e6 * self.quantile(0.5),
            f"{prefix}_us_p99": 1e6 * self.quantile(0.99),
            f"{prefix}_us_mean": 1e6 * self.total / self.n,
            f"{prefix}_us_max": 1e6 * self.max,
        }


# ---------------------------------------------------------------------------------------------- output
def _json_num(x: Optional[float]) -> Optional[float]:
    return x if x is None or math.isfinite(x) else None


def _json_safe(x):
    if isinstance(x, float):
        return _json_num(x)
    if isinstance(x, (list, dict)):
        return [_json_safe(c) for c in x] if isinstance(x, list) else {k: _json_safe(v) for k, v in x.items()}
    return x


class Outputs:
    """JSON-lines or CSV writer, plus optional ROS 2 publishers (height, backbone as PoseArray, spool command)."""

    def __init__(self, path: Optional[str], csv: bool, ros: bool) -> None:
        self.f = open(path, "w") if path else sys.stdout
        self.csv = csv
        self.header = False
        self.ros = None
        if ros:
            try:
                import rclpy  # optional: ROS 2 only with --ros
                from geometry_msgs.msg import Pose, PoseArray  # optional: ROS 2
                from std_msgs.msg import Float64  # optional: ROS 2

                rclpy.init()
                node = rclpy.create_node("flexlearn_shape")
                self.ros = (
                    node,
                    node.create_publisher(Float64, "tip_height", 10),
                    node.create_publisher(PoseArray, "backbone", 10),
                    node.create_publisher(Float64, "spool_velocity", 10),
                    Float64,
                    Pose,
                    PoseArray,
                )
            except ImportError:
                print("rclpy not available: ROS 2 publishing disabled", file=sys.stderr)

    def write(
        self, t: float, pts: torch.Tensor, h: float, flags: torch.Tensor, v: Optional[float], status: Optional[int]
    ) -> None:
        if self.csv:
            if not self.header:
                cols = ["t", "h", "v", "status", "flags_or"] + [f"p{i}{c}" for i in range(pts.shape[0]) for c in "xyz"]
                self.f.write(",".join(cols) + "\n")
                self.header = True
            f_or = functools.reduce(lambda acc, x: acc | int(x), flags.tolist(), 0)
            vals = [t, h, NAN if v is None else v, -1 if status is None else status, f_or] + pts.reshape(-1).tolist()
            self.f.write(",".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in vals) + "\n")
        else:
            rec = {
                "t": _json_num(t),
                "h": _json_num(h),
                "points": [[round(c, 6) for c in p] for p in pts.tolist()],
                "flags": flags.tolist(),
            }
            if v is not None:
                rec["v"], rec["status"] = _json_num(v), status
            try:
                text = json.dumps(rec, allow_nan=False)
            except ValueError:  # a non-finite number somewhere: null, never NaN
                text = json.dumps(_json_safe(rec), allow_nan=False)
            self.f.write(text + "\n")
        if self.ros is not None:
            self._publish(pts, h, v)

    def _publish(self, pts: torch.Tensor, h: float, v: Optional[float]) -> None:
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


# ------------------------------------------------------------------------------------------------- run
def load_checked(bundle_path: str, trust_unverified: bool = False):
    """Verify the manifest (unless ``trust_unverified``), then load the bundle → (module, metadata, N).

    ``.pte`` / ``.pt2`` bundles load through ``program_bundle.py`` (same methods as the TorchScript bundle).
    Raises the manifest module's ``UntrustedArtifactError`` or `RunnerError`, each naming the file and the reason.
    """
    if trust_unverified:
        print(
            f"pi_runner: WARNING: --trust-unverified: '{bundle_path}' is loaded without checking its manifest; "
            "a model file is code, load only files you trust",
            file=sys.stderr,
        )
    if bundle_path.lower().endswith((".pte", ".pt2")):
        try:
            programs = _runtime_module("program_bundle")
        except ImportError:
            raise RunnerError(
                f"model file '{bundle_path}': program_bundle.py is not next to pi_runner.py (copy "
                "flexlearn/runtime/program_bundle.py, height_control.py and time_base.py)"
            ) from None
        try:
            bundle, meta = programs.load_program_bundle(bundle_path, trust_unverified=trust_unverified)
        except programs.BundleLoadError as exc:
            raise RunnerError(str(exc)) from None
    else:
        if not trust_unverified:
            try:
                manifest = _manifest_module()
            except ImportError:
                raise RunnerError(
                    f"model file '{bundle_path}': cannot verify it: flexlearn is not installed and "
                    "manifest.py is not next to pi_runner.py (copy flexlearn/runtime/manifest.py)"
                ) from None
            manifest.verify_manifest(bundle_path)
        extra = {"metadata.json": ""}
        try:
            bundle = torch.jit.load(bundle_path, map_location="cpu", _extra_files=extra)
            meta = json.loads(extra["metadata.json"] or "{}")
        except (OSError, RuntimeError, ValueError) as exc:
            raise RunnerError(f"model file '{bundle_path}': cannot load ({_first_line(exc)})") from None
    n = meta.get("n_segments", 9)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise RunnerError(f"model file '{bundle_path}': metadata n_segments = {n!r} is not a positive integer")
    return bundle, meta, n


class _Runner:
    """Per-frame dispatch onto the bundle; counters in ``counts``."""

    def __init__(self, bundle, writer: Outputs, control: bool) -> None:
        self.bundle, self.writer, self.control = bundle, writer, control
        self.counts = {
            "att": 0,
            "mag": 0,
            "bad": 0,
            "ref": 0,
            "spool": 0,
            "target": 0,
            "outputs": 0,
            "corrections": 0,
            "bad_target": 0,
            "bad_reasons": {},
        }
        self.have_ref = False
        self.spool = NAN
        self.lat = LatencyStats()
        self.seen = 0
        self.warned_spool = False

    def bad(self, reason: str, message: str) -> None:
        c = self.counts
        c["bad"] += 1
        c["bad_reasons"][reason] = c["bad_reasons"].get(reason, 0) + 1
        if c["bad"] <= REPORT_BAD:
            more = " (further bad frames are only counted)" if c["bad"] == REPORT_BAD else ""
            print(f"pi_runner: frame {self.seen} skipped: {message}{more}", file=sys.stderr)

    def frame(self, fr: dict) -> None:
        """One typed frame (`check_frame`)."""
        kind, t, c = fr["type"], fr["t"], self.counts
        if kind == "ref" or (kind == "att" and not self.have_ref):
            self.bundle.set_reference(fr["q"])
            self.have_ref = True
            c["ref"] += 1
            if kind == "ref":
                return
        if kind == "att":
            t0 = time.perf_counter()
            pts, h, flags = self.bundle.attitude(t, fr["q"])
            v = status = None
            if self.control:
                if c["spool"] == 0 and c["att"] == NO_SPOOL_WARN_AFTER and not self.warned_spool:
                    self.warned_spool = True
                    print(
                        f"pi_runner: warning: --control, but no 'spool' frame in the first {c['att']} attitude "
                        "frames: the controller holds (status 3, v = 0) until spool positions arrive; send "
                        '{"type": "spool", "t": ..., "pos": ...} frames (docs/raspberry_pi.md)',
                        file=sys.stderr,
                        flush=True,
                    )
                v, status = self.bundle.control(t, self.spool)
                if not math.isfinite(v):  # an older bundle's controller: never pass NaN on
                    v, status = 0.0, HOLD
            self.lat.add(time.perf_counter() - t0)
            self.writer.write(t, pts, float(h), flags, v, status)
            c["att"] += 1
            c["outputs"] += 1
        elif kind == "mag":
            applied = self.bundle.magnetometer(t, fr["m"], fr["coil"])
            c["corrections"] += int(applied.sum())
            c["mag"] += 1
        elif kind == "spool":
            self.spool = fr["pos"]
            c["spool"] += 1
        else:
            h = fr["h"]
            self.bundle.set_target(h)
            c["target"] += 1
            if not (math.isfinite(h) and abs(h) < 1e3):
                c["bad_target"] += 1
                if c["bad_target"] <= REPORT_BAD:
                    print(
                        f"pi_runner: frame {self.seen}: target h = {h} refused, the last valid target stays",
                        file=sys.stderr,
                    )


def _typed(frames: Iterator[dict], n: int) -> Iterator[dict]:
    for fr in frames:
        try:
            yield check_frame(fr, n)
        except BadFrame as exc:
            yield {"type": "bad", "t": NAN, "reason": exc.reason, "message": str(exc)}


def apply_calibration(bundle, meta: dict, n: int, path: str) -> None:
    """Replace the bundle's A_i W_i by a flexlearn-calibrate file (calibration_file.py beside this script)."""
    try:
        aw = _runtime_module("calibration_file").bundle_aw(path, n, meta.get("model_fingerprint"))
        bundle.estimator.aw.copy_(torch.tensor(aw, dtype=torch.float64))
    except (ImportError, ValueError, AttributeError) as exc:
        raise RunnerError(f"--calibration '{path}': {_first_line(exc)}") from None


def run(
    bundle_path: str,
    source: IO,
    realtime: bool = False,
    out: Optional[str] = None,
    csv: bool = False,
    control: bool = False,
    ros: bool = False,
    binary: bool = False,
    trust_unverified: bool = False,
    calibration: Optional[str] = None,
) -> dict:
    """Process every frame of ``source`` (JSON lines, or binary frames with ``binary``); returns counters.

    Torch-only. The bundle's manifest is verified first (`load_checked`). With ``binary`` the counters include the
    parser's (``link_bad_crc``, ``link_dropped``, ``link_duplicates``, ...). Bad lines and frames are counted in
    ``bad`` (by reason in ``bad_reasons``), never fatal.
    """
    torch.set_num_threads(1)
    if binary:
        _serial_frames_module()  # a missing parser: one line before anything is loaded
    bundle, meta, n = load_checked(bundle_path, trust_unverified)
    if calibration:
        apply_calibration(bundle, meta, n, calibration)
    writer = Outputs(out, csv, ros)
    runner = _Runner(bundle, writer, control)
    link: dict = {}
    try:
        with torch.inference_mode():
            frames = read_binary(source, link) if binary else read_lines(source)
            for fr in paced(_typed(frames, n), realtime):
                runner.seen += 1
                if fr["type"] == "bad":
                    runner.bad(fr["reason"], fr["message"])
                    continue
                try:
                    runner.frame(fr)
                except OSError:
                    raise  # the output failed: not a bad frame
                except Exception as exc:  # never stop on one frame
                    runner.bad("error", f"{fr['type']} frame: {type(exc).__name__}: {_first_line(exc)}")
    finally:
        writer.close()
    counts = runner.counts
    counts.update({f"link_{k}": v for k, v in link.items()})
    counts.update(runner.lat.summary("attitude"))
    return counts


def run_arm_mode(path: str, source: IO, out: Optional[str], trust_unverified: bool = False) -> dict:
    """``--arm``: the flexible-arm controller on ``imu`` frames (``arm_runner.run_arm``); returns its counters."""
    try:
        arm = _runtime_module("arm_runner")
    except ImportError:
        raise RunnerError("--arm needs arm_runner.py next to pi_runner.py (copy scripts/arm_runner.py)") from None
    controller, meta, _ = load_checked(path, trust_unverified)
    try:
        arm.check_metadata(meta, path)
    except ValueError as exc:
        raise RunnerError(str(exc)) from None
    f = open(out, "w") if out else sys.stdout
    try:
        return arm.run_arm(controller, meta, source, f)
    finally:
        if f is not sys.stdout:
            f.close()


def _is_untrusted(exc: Exception) -> bool:
    """Whether ``exc`` is the manifest module's ``UntrustedArtifactError`` (a refused model file)."""
    try:
        return isinstance(exc, _manifest_module().UntrustedArtifactError)
    except ImportError:
        return False


def _bad_output(a: argparse.Namespace) -> Optional[str]:
    """Why ``--out`` cannot be written (a directory, a missing folder) or must not be (an input: "w" truncates)."""
    if not a.out:
        return None
    if os.path.isdir(a.out) or not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        return "is a directory or lies in a folder that does not exist"
    inputs = {
        "--log": a.log,
        "the bundle": a.bundle,
        "the bundle's manifest": a.bundle + ".manifest.json",
        "--calibration": a.calibration,
        "--serial": a.serial,
    }

    def same(p: str) -> bool:
        return os.path.realpath(p) == os.path.realpath(a.out) or (
            os.path.exists(p) and os.path.exists(a.out) and os.path.samefile(p, a.out)
        )

    return next((f"is {k} '{p}'" for k, p in inputs.items() if p and same(p)), None)


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle", help="bundle file: .pt (TorchScript), .pte (ExecuTorch) or .pt2 (torch.export)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--log", help="recorded frames (JSON lines)")
    src.add_argument("--serial", help="serial device, e.g. /dev/ttyACM0 (needs pyserial)")
    ap.add_argument("--baud", type=int, default=921600)
    ap.add_argument(
        "--format",
        choices=("jsonl", "bin"),
        default="jsonl",
        help="frame protocol: JSON lines (flexlearn-frames/1) or binary (flexlearn-binframes/1)",
    )
    ap.add_argument("--realtime", action="store_true", help="replay a log at real time (default: as fast as possible)")
    ap.add_argument("--out", default=None, help="output file (default stdout)")
    ap.add_argument("--csv", action="store_true", help="CSV instead of JSON lines")
    ap.add_argument("--control", action="store_true", help="also run the tip-height controller")
    ap.add_argument(
        "--arm",
        action="store_true",
        help="the file is a flexible-arm controller: imu frames in, torques "
        "out (arm_runner.py beside this script; docs/arm_controller.md)",
    )
    ap.add_argument("--ros", action="store_true", help="publish to ROS 2 when rclpy is present")
    ap.add_argument(
        "--calibration",
        default=None,
        help="receiver calibration file from flexlearn-calibrate (replaces "
        "the bundle's; refused for another model or module count)",
    )
    ap.add_argument(
        "--trust-unverified",
        action="store_true",
        help="load the bundle without its manifest check (explicit opt-out; a model file is code)",
    )
    a = ap.parse_args(argv)
    reason = _bad_output(a)  # before anything is opened
    if reason:
        print(f"pi_runner: --out '{a.out}' {reason}; choose another output", file=sys.stderr)
        return 2
    try:
        if a.serial:
            import serial  # pyserial

            source = serial.Serial(a.serial, a.baud, timeout=None)
        else:
            source = open(a.log, "rb")
    except OSError as exc:
        print(f"pi_runner: cannot open '{a.serial or a.log}': {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        if a.arm:
            counts = run_arm_mode(a.bundle, source, a.out, a.trust_unverified)
        else:
            counts = run(
                a.bundle,
                source,
                a.realtime,
                a.out,
                a.csv,
                a.control,
                a.ros,
                binary=a.format == "bin",
                trust_unverified=a.trust_unverified,
                calibration=a.calibration,
            )
    except Exception as exc:
        if not (isinstance(exc, RunnerError) or _is_untrusted(exc)):
            raise
        print(f"pi_runner: refused: {exc}", file=sys.stderr)
        return 2
    finally:
        source.close()
    print(json.dumps(_json_safe(counts)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
