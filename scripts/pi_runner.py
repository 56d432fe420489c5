#!/usr/bin/env python
"""Raspberry Pi runner for a flexlearn seed-002 bundle: frames in → backbone, tip height, spool command out.

Imports only torch (+ pyserial for ``--serial``, + rclpy when ``--ros`` and it is installed). One torch thread.

    python pi_runner.py bundle.pt --log frames.jsonl [--realtime] [--out poses.jsonl] [--csv] [--mcap run.mcap]
    python pi_runner.py bundle.pt --serial /dev/ttyACM0 --baud 921600 [--format bin] [--control] [--ros]
    python pi_runner.py arm_controller.pt --arm --log imu.jsonl     # the flexible-arm controller (arm_runner.py)
    python pi_runner.py bundle.pte --serial /dev/ttyACM0 ...     # the ExecuTorch program (needs executorch)

    python pi_runner.py --self-check                             # in a kit: recorded frames → expected outputs

The kit (``flexlearn-export ... kit=<dir>``) is one folder: this script, the package ``pikit/`` it imports (the
runtime modules, standard library + torch; from the repository they are ``flexlearn.runtime.pikit``), the
bundle(s) with their manifests, ``requirements.txt``, ``README.md``, ``selfcheck/`` and ``kit.json``, which names
every file of the kit with its SHA-256 and is written last: in a kit, every file is verified before anything is
loaded, and a kit mixed from two exports is refused. Without a bundle argument the kit's first bundle runs.

Bundle formats, by suffix: ``.pt`` TorchScript (`torch.jit.load`); ``.pte`` ExecuTorch program of the estimator
(needs ``executorch``), ``.pt2`` torch.export program set (needs flexlearn: the archive is inspected first); both
load through ``pikit/program_bundle.py`` (the tip-height PID runs beside the program). The three give the same
outputs (to 1e-6 m, same flags; tested).

Integrity: the bundle (any format) must have its manifest ``bundle.pt.manifest.json`` (SHA-256, written by the
exporter) beside it, and every file of its export set present beside it must match; otherwise the file is refused
(one line on stderr, exit status 2). ``--trust-unverified`` skips the check (explicit opt-out, warned on stderr).
A TorchScript bundle loads with the torch versions of ``pikit/compat.py`` (an older torch is refused naming both).
Before the first frame a copy of the bundle runs a short stream (the kit's recorded frames, else a synthetic one),
so the first seconds keep the steady-state latency (``--no-warmup`` skips it).

``--format bin`` reads the binary protocol ``flexlearn-binframes/1`` (fixed little-endian frames with a sync word
and CRC-32, documented in pikit/serial_frames.py).

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
(counters, latency median/p99 from a fixed-size histogram) goes to stderr as one JSON line. ``--mcap run.mcap`` also
writes the outputs as an MCAP file that Foxglove plays (the backbone as a scene on ``/robot/backbone``, the rest of
each output on ``/robot/status``; standard library only: ``pikit/foxglove.py``); it is ``run.mcap.partial`` until
the run ends (Ctrl-C included).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time  # noqa: F401  (tests pace the runner through this module's clock)
from pathlib import Path
from typing import IO, Optional

import torch

HERE = Path(__file__).resolve().parent


def _import_pikit():
    """The runtime package: ``pikit/`` beside this script (the kit), else flexlearn's own copy."""
    if (HERE / "pikit" / "__init__.py").is_file():
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        return importlib.import_module("pikit")
    try:
        return importlib.import_module("flexlearn.runtime.pikit")
    except ImportError:
        sys.exit(
            "pi_runner: error: the package folder pikit/ must lie beside pi_runner.py (write a kit with "
            "flexlearn-export ... kit=<dir>, or install flexlearn)"
        )


PIKIT = _import_pikit()


def _runtime_module(name: str):
    """The runtime module ``pikit.<name>`` (or ``flexlearn.runtime.pikit.<name>``); ``arm_runner`` from beside
    this script."""
    if name == "arm_runner":
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))
        return importlib.import_module("arm_runner")
    return importlib.import_module(f"{PIKIT.__name__}.{name}")


_frame_lines = _runtime_module("frame_lines")
_frame_checks = _runtime_module("frame_checks")
_outputs = _runtime_module("outputs")
_engine = _runtime_module("runner")
_selfcheck = _runtime_module("selfcheck")
BadFrame, decode_line, read_lines = _frame_lines.BadFrame, _frame_lines.decode_line, _frame_lines.read_lines
check_frame, KINDS = _frame_checks.check_frame, _frame_checks.KINDS
LatencyStats, Outputs, paced = _outputs.LatencyStats, _outputs.Outputs, _outputs.paced
RunnerError, load_checked, apply_calibration = _engine.RunnerError, _engine.load_checked, _engine.apply_calibration
read_binary = _engine.read_binary
NAN = float("nan")


def _manifest_module():  # integrity manifests of model files
    return _runtime_module("manifest")


def _kit_manifest() -> Optional[dict]:
    """``kit.json`` beside this script after checking every file it names; None outside a kit."""
    if not (HERE / _manifest_module().KIT_MANIFEST).is_file():
        return None
    return _manifest_module().verify_set(HERE)


def _warm(bundle, n: int, control: bool, bundle_path: str) -> dict:
    frames_path = _engine.kit_frames_path(bundle_path)
    if frames_path is not None:
        with open(frames_path, "rb") as f:
            frames = list(_frame_checks.typed(read_lines(f), n))
    else:
        frames = list(_engine.synthetic_frames(n))
    return {"warmup_s": round(_engine.warm_up(bundle, frames, control), 3), "warmup_frames": len(frames)}


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
    warmup: bool = True,
    mcap: Optional[str] = None,
) -> dict:
    """Process every frame of ``source`` (JSON lines, or binary frames with ``binary``); returns counters.

    Torch-only. The bundle's manifest is verified first (`load_checked`), then a copy of it is warmed up. With
    ``binary`` the counters include the parser's (``link_bad_crc``, ``link_dropped``, ...). Bad lines and frames
    are counted in ``bad`` (by reason in ``bad_reasons``), never fatal. ``mcap``: also write the outputs there.
    """
    torch.set_num_threads(1)
    if binary:
        _engine.binary_parser()  # a missing parser: one line before anything is loaded
    bundle, meta, n = load_checked(bundle_path, trust_unverified)
    if calibration:
        apply_calibration(bundle, meta, n, calibration)
    warm = _warm(bundle, n, control, bundle_path) if warmup else {}
    writer = Outputs(out, csv, ros, mcap)
    runner = _engine.FrameRunner(bundle, writer, control)
    link: dict = {}
    try:
        with torch.inference_mode():
            frames = read_binary(source, link) if binary else read_lines(source)
            runner.process(paced(_frame_checks.typed(frames, n), realtime))
    finally:
        writer.close()
    counts = runner.counts
    counts.update({f"link_{k}": v for k, v in link.items()})
    counts.update(runner.lat.summary("attitude"))
    counts.update(warm)
    return counts


def self_check(kit: dict, out: Optional[str]) -> dict:
    """Run every bundle of the kit over ``selfcheck/frames.jsonl`` with the controller and compare the records with
    ``selfcheck/expected.json`` (`pikit.selfcheck`); ``out``: also write this run's records there."""
    torch.set_num_threads(1)
    folder = HERE / _selfcheck.FOLDER
    expected = _selfcheck.load_json(folder / _selfcheck.EXPECTED, "self-check file").get("bundles", {})
    produced, report = {}, {"machine": platform.machine(), "python": platform.python_version()}
    report.update({"torch": torch.__version__, "bundles": {}})
    for name in kit.get("bundles", []):
        bundle, meta, n = load_checked(str(HERE / name))
        recorder = _engine.Recorder()
        runner = _engine.FrameRunner(bundle, recorder, control=True, quiet=True)
        with open(folder / _selfcheck.FRAMES, "rb") as f, torch.inference_mode():
            runner.process(_frame_checks.typed(read_lines(f), n))
        produced[name] = recorder.records
        report["bundles"][name] = _selfcheck.compare_records(expected.get(name, []), recorder.records)
    report["passed"] = bool(report["bundles"]) and all(r["passed"] for r in report["bundles"].values())
    if out:
        Path(out).write_text(json.dumps({**report, "bundles": produced}))
    return report


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


def _refused(exc: Exception) -> bool:
    """Whether ``exc`` is a refusal to print as one line (a setup error, an untrusted file, an old torch)."""
    mods = (_manifest_module(), _runtime_module("compat"))
    return isinstance(exc, (RunnerError, mods[0].UntrustedArtifactError, mods[1].TorchVersionError))


def _bad_output(a: argparse.Namespace, path: Optional[str]) -> Optional[str]:
    """Why an output ``path`` (``--out``, ``--mcap``) cannot be written (a directory, a missing folder) or must not be
    (an input: "w" truncates)."""
    if not path:
        return None
    if os.path.isdir(path) or not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        return "is a directory or lies in a folder that does not exist"
    inputs = {
        "--log": a.log,
        "the bundle": a.bundle,
        "the bundle's manifest": a.bundle + ".manifest.json",
        "--calibration": a.calibration,
        "--serial": a.serial,
        "--out": a.out if path != a.out else None,
    }

    def same(p: str) -> bool:
        return os.path.realpath(p) == os.path.realpath(path) or (
            os.path.exists(p) and os.path.exists(path) and os.path.samefile(p, path)
        )

    return next((f"is {k} '{p}'" for k, p in inputs.items() if p and same(p)), None)


def build_parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle", nargs="?", help="bundle file: .pt, .pte or .pt2 (in a kit: default its first bundle)")
    ap.add_argument("--log", help="recorded frames (JSON lines, or binary with --format bin)")
    ap.add_argument("--serial", help="serial device, e.g. /dev/ttyACM0 (needs pyserial)")
    ap.add_argument("--baud", type=int, default=921600)
    ap.add_argument("--format", choices=("jsonl", "bin"), default="jsonl", help="frame protocol (JSON lines, binary)")
    ap.add_argument("--realtime", action="store_true", help="replay a log at real time (default: as fast as possible)")
    ap.add_argument("--out", default=None, help="output file (default stdout)")
    ap.add_argument("--csv", action="store_true", help="CSV instead of JSON lines")
    ap.add_argument("--mcap", default=None, help="also write the outputs as an MCAP file (Foxglove)")
    ap.add_argument("--control", action="store_true", help="also run the tip-height controller")
    ap.add_argument("--arm", action="store_true", help="the file is a flexible-arm controller (arm_runner.py)")
    ap.add_argument("--ros", action="store_true", help="publish to ROS 2 when rclpy is present")
    ap.add_argument("--calibration", default=None, help="receiver calibration file from flexlearn-calibrate")
    ap.add_argument("--trust-unverified", action="store_true", help="skip the manifest check (a model file is code)")
    ap.add_argument("--no-warmup", action="store_true", help="skip the warm-up run before the first frame")
    ap.add_argument("--self-check", action="store_true", help="in a kit: run the recorded frames, compare outputs")
    ap.add_argument("--self-check-out", default=None, help="with --self-check: write this run's records (JSON)")
    return ap


def _source(a: argparse.Namespace):
    if a.serial:
        import serial  # pyserial: only for --serial

        return serial.Serial(a.serial, a.baud, timeout=None)
    return open(a.log, "rb")


def _dispatch(a: argparse.Namespace, kit: Optional[dict]) -> int:
    """Open the source and run; the exit status."""
    try:
        source = _source(a)
    except OSError as exc:
        print(f"pi_runner: cannot open '{a.serial or a.log}': {exc.strerror or exc}", file=sys.stderr)
        return 2
    except ImportError:
        print("pi_runner: --serial needs pyserial (pip install pyserial)", file=sys.stderr)
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
                warmup=not a.no_warmup,
                mcap=a.mcap,
            )
    finally:
        source.close()
    print(json.dumps(_outputs.json_safe(counts)), file=sys.stderr)
    return 0


def main(argv: Optional[list] = None) -> int:
    """Parse, check, run; the exit status (0 done, 1 self-check failed, 2 refused with one line on stderr)."""
    ap = build_parser()
    a = ap.parse_args(argv)
    try:
        kit = _kit_manifest()
        if a.self_check:
            if kit is None:
                raise RunnerError(f"--self-check runs in a kit: no kit.json beside '{HERE / 'pi_runner.py'}'")
            report = self_check(kit, a.self_check_out)
            print(json.dumps(_outputs.json_safe(report)))
            return 0 if report["passed"] else 1
        if not a.bundle and kit and kit.get("bundles"):
            a.bundle = str(HERE / kit["bundles"][0])
        if not a.bundle or not (a.log or a.serial) or (a.log and a.serial):
            ap.print_usage(sys.stderr)
            print("pi_runner: error: give a bundle (outside a kit) and one of --log or --serial", file=sys.stderr)
            return 2
        for flag, path in (("--out", a.out), ("--mcap", a.mcap)):
            reason = _bad_output(a, path)  # before anything is opened
            if reason:
                print(f"pi_runner: {flag} '{path}' {reason}; choose another output", file=sys.stderr)
                return 2
        return _dispatch(a, kit)
    except Exception as exc:
        if not _refused(exc):
            raise
        print(f"pi_runner: refused: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
