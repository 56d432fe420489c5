"""The Pi runner's engine: load a bundle after its checks, warm it up, and drive it frame by frame.

``scripts/pi_runner.py`` is the command line around it; the kit writer (`flexlearn.runtime.kit`) records the
self-check's expected outputs through the same code. Standard library + torch (+ executorch for a ``.pte``).

Loading (`load_checked`): the file's manifest and its export set are verified first (`manifest`), then the torch
version is checked against what the bundle needs (`compat`), then the file is loaded. Warm-up (`warm_up`): before
the first frame, a copy of the loaded bundle (the copy shares the compiled methods, not the state) runs a short
stream, so that TorchScript's profiling and optimisation passes happen before the robot's first frame rather than
on it; the bundle's own state is untouched.
"""

from __future__ import annotations

import copy
import json
import math
import sys
import time
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Optional

import torch

from . import calibration_file, compat, manifest, program_bundle
from .family import ConfigError
from .frame_checks import first_line
from .outputs import LatencyStats

NAN = float("nan")
REPORT_BAD = 10  # bad frames named on stderr (the rest are only counted)
HOLD = 3  # controller status HOLD (height_control)
NO_SPOOL_WARN_AFTER = 20  # --control: warn once after this many attitude frames without a spool frame
WARMUP_FRAMES = 400  # frames of the warm-up stream (≈ 2 s of a nine-module robot)


class RunnerError(ConfigError):  # type: ignore[valid-type,misc]
    """A fatal setup problem (unreadable bundle or metadata): one line on stderr, exit status 2 (in flexlearn's
    error family inside flexlearn, `family`)."""


def binary_parser() -> Any:
    """A `serial_frames.FrameParser`; `RunnerError` naming the file when the kit lacks it."""
    try:
        from . import serial_frames  # only --format bin needs the binary parser
    except ImportError:
        raise RunnerError(
            "--format bin needs the binary frame parser pikit/serial_frames.py beside pi_runner.py "
            "(write the kit again with flexlearn-export ... kit=<dir>)"
        ) from None
    return serial_frames.FrameParser()


def read_binary(source: IO, stats: dict, chunk: int = 4096) -> Iterator[dict]:
    """Frames of the binary protocol ``flexlearn-binframes/1`` (`serial_frames`); parser counters → ``stats``.
    Reads what is available (a serial port's ``in_waiting``, at least one byte) or ``chunk`` bytes from a file.

    Args:
        source: a binary file or serial port.
        stats: updated in place with the parser's counters.
        chunk: bytes per read from a file (a source without ``in_waiting``).

    Yields:
        The decoded frame objects.

    Raises:
        RunnerError: the kit lacks the binary parser.
    """
    parser = binary_parser()
    stats.update(parser.stats)
    while True:
        waiting = getattr(source, "in_waiting", None)
        data = source.read(max(1, waiting) if waiting is not None else chunk)
        if not data:
            return
        frames = parser.feed(data)
        stats.update(parser.stats)
        yield from frames


def _warn(text: str) -> None:
    print(f"pi_runner: {text}", file=sys.stderr, flush=True)


def load_checked(bundle_path: str, trust_unverified: bool = False):
    """Verify the manifest and export set (unless ``trust_unverified``), check torch, load → (module, metadata, N).

    ``.pte`` / ``.pt2`` bundles load through `program_bundle` (same methods as the TorchScript bundle).
    Raises the manifest's ``UntrustedArtifactError``, ``compat.TorchVersionError`` or `RunnerError`, each naming
    the file and the reason.

    Args:
        bundle_path: the bundle file (``.pt``, ``.pte`` or ``.pt2``).
        trust_unverified: skip the manifest check (a warning is printed).

    Returns:
        ``(bundle, metadata, n)``: the loaded bundle, its metadata and its segment count N.
    """
    if trust_unverified:
        _warn(
            f"WARNING: --trust-unverified: '{bundle_path}' is loaded without checking its manifest; "
            "a model file is code, load only files you trust"
        )
    if bundle_path.lower().endswith((".pte", ".pt2")):
        try:
            bundle, meta = program_bundle.load_program_bundle(bundle_path, trust_unverified=trust_unverified)
        except program_bundle.BundleLoadError as exc:
            raise RunnerError(str(exc)) from None
    else:
        record = {} if trust_unverified else manifest.verify_manifest(bundle_path)
        compat.check_torch(torch.__version__, record.get("torch_version"), bundle_path)
        extra = {"metadata.json": ""}
        try:
            bundle = torch.jit.load(bundle_path, map_location="cpu", _extra_files=extra)
            meta = json.loads(extra["metadata.json"] or "{}")
        except (OSError, RuntimeError, ValueError) as exc:
            raise RunnerError(
                f"model file '{bundle_path}': written by torch {record.get('torch_version', 'unknown')}, cannot load "
                f"with torch {torch.__version__} here ({first_line(exc)}); loads with {compat.supported_range()}"
            ) from None
    n = meta.get("n_segments", 9)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise RunnerError(f"model file '{bundle_path}': metadata n_segments = {n!r} is not a positive integer")
    return bundle, meta, n


def apply_calibration(bundle, meta: dict, n: int, path: str) -> None:
    """Replace the bundle's A_i W_i by a flexlearn-calibrate file (`calibration_file`: shape, model and physics).

    Args:
        bundle: the loaded TorchScript bundle (its ``estimator.aw`` is overwritten).
        meta: its metadata (``model_fingerprint`` is checked when present).
        n: its segment count N.
        path: the calibration file.

    Raises:
        RunnerError: a file that does not fit, or a bundle without ``estimator.aw``.
    """
    try:
        aw = calibration_file.bundle_aw(path, n, meta.get("model_fingerprint"))
        bundle.estimator.aw.copy_(torch.tensor(aw, dtype=torch.float64))
    except (ValueError, AttributeError) as exc:
        raise RunnerError(f"--calibration '{path}': {first_line(exc)}") from None


class FrameRunner:
    """Per-frame dispatch onto the bundle; counters in ``counts``; ``writer.write(t, pts, h, flags, v, status)``."""

    def __init__(self, bundle, writer: Any, control: bool, quiet: bool = False) -> None:
        self.bundle, self.writer, self.control, self.quiet = bundle, writer, control, quiet
        self.counts: dict = {k: 0 for k in ("att", "mag", "bad", "ref", "spool", "target", "outputs")}
        self.counts.update({"corrections": 0, "bad_target": 0, "bad_reasons": {}})
        self.have_ref = False
        self.spool = NAN
        self.lat = LatencyStats()
        self.seen = 0
        self.warned_spool = False

    def bad(self, reason: str, message: str) -> None:
        """Count a skipped frame; name the first `REPORT_BAD` on stderr.

        Args:
            reason: the short reason key counted in ``bad_reasons``.
            message: what is printed.
        """
        c = self.counts
        c["bad"] += 1
        c["bad_reasons"][reason] = c["bad_reasons"].get(reason, 0) + 1
        if c["bad"] <= REPORT_BAD and not self.quiet:
            more = " (further bad frames are only counted)" if c["bad"] == REPORT_BAD else ""
            _warn(f"frame {self.seen} skipped: {message}{more}")

    def _attitude(self, t: float, q: torch.Tensor) -> None:
        c = self.counts
        t0 = time.perf_counter()
        pts, h, flags = self.bundle.attitude(t, q)
        v = status = None
        if self.control:
            if c["spool"] == 0 and c["att"] == NO_SPOOL_WARN_AFTER and not self.warned_spool and not self.quiet:
                self.warned_spool = True
                _warn(
                    f"warning: --control, but no 'spool' frame in the first {c['att']} attitude frames: the "
                    "controller holds (status 3, v = 0) until spool positions arrive; send "
                    '{"type": "spool", "t": ..., "pos": ...} frames (docs/raspberry_pi.md)'
                )
            v, status = self.bundle.control(t, self.spool)
            if not math.isfinite(v):  # an older bundle's controller: never pass NaN on
                v, status = 0.0, HOLD
        self.lat.add(time.perf_counter() - t0)
        self.writer.write(t, pts, float(h), flags, v, status)
        c["att"] += 1
        c["outputs"] += 1

    def frame(self, fr: dict) -> None:
        """One typed frame (`frame_checks.check_frame`).

        Args:
            fr: the typed frame (not a bad one).
        """
        kind, t, c = fr["type"], fr["t"], self.counts
        if kind == "ref" or (kind == "att" and not self.have_ref):
            self.bundle.set_reference(fr["q"])
            self.have_ref = True
            c["ref"] += 1
            if kind == "ref":
                return
        if kind == "att":
            self._attitude(t, fr["q"])
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
                if c["bad_target"] <= REPORT_BAD and not self.quiet:
                    _warn(f"frame {self.seen}: target h = {h} refused, the last valid target stays")

    def process(self, frames: Iterable[dict]) -> None:
        """Every typed frame of ``frames``; a bad one is counted, an error in one frame never stops the run.

        Args:
            frames: the typed frames (`frame_checks.typed`), bad ones included.

        Raises:
            OSError: the output failed.
        """
        for fr in frames:
            self.seen += 1
            if fr["type"] == "bad":
                self.bad(fr["reason"], fr["message"])
                continue
            try:
                self.frame(fr)
            except OSError:
                raise  # the output failed: not a bad frame
            except Exception as exc:  # never stop on one frame
                self.bad("error", f"{fr['type']} frame: {type(exc).__name__}: {first_line(exc)}")


class Recorder:
    """A writer that keeps full-precision records in ``records`` (the self-check's outputs)."""

    def __init__(self) -> None:
        self.records: list = []

    def write(self, t, pts, h, flags, v, status) -> None:
        """One record: ``t``, ``h``, ``points``, ``flags`` and, with the controller, ``v`` and ``status``.

        Args:
            t: time of the frame [s].
            pts: backbone points (N + 1, 3) [m].
            h: tip height [m].
            flags: per-segment flag words (N,).
            v: the tendon velocity command [m/s] (None: no controller).
            status: the controller status (None: no controller).
        """
        rec = {"t": t, "h": h, "points": pts.tolist(), "flags": flags.tolist()}
        if v is not None:
            rec["v"], rec["status"] = v, status
        self.records.append({k: (None if isinstance(x, float) and not math.isfinite(x) else x) for k, x in rec.items()})


class _NullWriter:
    def write(self, *args: Any) -> None:
        pass


def synthetic_frames(n: int, count: int = WARMUP_FRAMES) -> Iterator[dict]:
    """A plausible typed stream for ``n`` segments: reference, attitude sweeps every 60 ms, magnetometer rounds every
    3 ms with coil pulses (each module in turn), spool positions and a target — the warm-up's inputs.

    Args:
        n: the segment count N.
        count: the number of magnetometer rounds.

    Yields:
        Typed frames (`frame_checks.check_frame` form).
    """
    q = torch.zeros(n + 1, 4, dtype=torch.float64)
    q[:, 0] = 1.0
    earth = torch.tensor([2e-5, 0.0, -4e-5], dtype=torch.float64).expand(n, 3)
    yield {"type": "ref", "t": 0.0, "q": q}
    yield {"type": "target", "t": 0.0, "h": 0.0}
    t, k = 0.0, 0
    while k < count:
        t += 0.003
        k += 1
        pulse = int(t / 0.3)
        coil = pulse % n if (t % 0.3) > 0.06 and (t % 0.3) < 0.072 else -1
        m = earth.clone()
        if coil >= 0:
            m[coil] += 1e-5
        yield {"type": "mag", "t": t, "coil": coil, "m": m}
        if k % 20 == 0:
            yield {"type": "att", "t": t, "q": q}
            yield {"type": "spool", "t": t, "pos": 0.0}


def warm_up(bundle, frames: Iterable[dict], control: bool) -> float:
    """Run ``frames`` through a copy of ``bundle`` (shared compiled methods, separate state); returns seconds taken.

    A bundle that cannot be copied (a program bundle) is warmed by nothing: its methods are ahead-of-time compiled.

    Args:
        bundle: the loaded bundle (left untouched).
        frames: the warm-up's typed frames (e.g. `synthetic_frames`).
        control: run the controller too.

    Returns:
        The time taken [s] (0 for a program bundle).
    """
    if not isinstance(bundle, torch.jit.ScriptModule):
        return 0.0
    t0 = time.perf_counter()
    twin = FrameRunner(copy.deepcopy(bundle), _NullWriter(), control, quiet=True)
    with torch.inference_mode():
        twin.process(frames)
    return time.perf_counter() - t0


def kit_frames_path(bundle_path: str) -> Optional[Path]:
    """The kit's recorded frames beside ``bundle_path`` (``selfcheck/frames.jsonl``), if any.

    Args:
        bundle_path: the bundle file in the kit folder.

    Returns:
        The frames file, or None when there is none.
    """
    path = Path(bundle_path).resolve().parent / "selfcheck" / "frames.jsonl"
    return path if path.is_file() else None
