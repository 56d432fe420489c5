"""Run an exported robot bundle — ExecuTorch ``.pte`` or torch.export ``.pt2`` program set — with the methods of the
TorchScript bundle (`flexlearn.runtime.deploy.DeployBundle`): ``set_reference``, ``attitude``, ``magnetometer``,
``control``, ``set_target``.

The exported programs hold the fused shape estimator (`flexlearn.runtime.fusion.graph`, written by
`flexlearn.runtime.executorch_export.bundle_artifacts`); the tip-height PID (`height_control`,
Python floats only) runs here, built from the metadata's ``controller`` and ``controller_clock`` settings, on the
height of the latest accepted attitude sweep (as ``DeployBundle.control`` does).

Used by ``scripts/pi_runner.py``. Standard library + torch (+ ``executorch`` for a ``.pte``), and the modules of
this package (``pikit`` in the kit). A ``.pt2`` needs flexlearn: its archive is inspected before `torch.export`
loads it.
Every file's manifest is verified first unless ``trust_unverified=True``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Tuple

import torch

from . import manifest
from .family import CheckpointError as _LoadBase  # flexlearn's error family inside flexlearn
from .height_control import HeightPID, HeightPIDSettings

METHODS = ("set_reference", "attitude", "magnetometer", "correct")


class BundleLoadError(_LoadBase, ValueError):  # type: ignore[valid-type,misc]
    """A program bundle that cannot be loaded or run here; the message names the file and the reason."""


class ProgramBundle:
    """`DeployBundle`'s methods over exported estimator methods (name → callable of tensors) and a `HeightPID`."""

    def __init__(self, methods: Dict[str, Callable[..., Any]], meta: Dict[str, Any], keep: Any = None) -> None:
        self.methods = methods
        self.meta = meta
        self._keep = keep  # a .pte program: its methods point into it
        try:
            settings = HeightPIDSettings(**meta.get("controller", {}), **meta.get("controller_clock", {}))
            self.controller = HeightPID(settings)
        except (TypeError, ValueError) as exc:
            raise BundleLoadError(f"bundle metadata 'controller': {exc}") from None
        self.height = 0.0  # [m] of the latest accepted attitude sweep (0 before the first)

    def _call(self, name: str, *args: Any) -> list:
        out = self.methods[name](*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def set_reference(self, quats: torch.Tensor) -> None:
        """Robot hanging straight: q⁰ (N + 1, 4); resets the estimator's filter and the controller.

        Args:
            quats: module quaternions (N + 1, 4) (w, x, y, z), body → world.
        """
        self._call("set_reference", quats.to(torch.float64))
        self.controller.reset()

    def attitude(self, t: float, quats: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """T [s], quats (N + 1, 4) → (points (N + 1, 3) [m], h () [m], flags (N,) int64).

        Args:
            t: time of the frame [s].
            quats: module quaternions (N + 1, 4).

        Returns:
            ``(points (N + 1, 3) [m], h () [m], flags (N,) int64)``; ``h`` is kept for :meth:`control`.
        """
        pts, h, flags = self._call("attitude", torch.tensor(t, dtype=torch.float64), quats.to(torch.float64))[:3]
        self.height = float(h)
        return pts, h, flags

    def magnetometer(self, t: float, mags: torch.Tensor, coil: int) -> torch.Tensor:
        """T [s], mags (N, 3) [T], firing coil (−1: none) → mask (N,) of corrections applied. The program's
        round says whether a pulse ended; only then is its correction (the direction model and the heading
        filter, ~10× a round) run.

        Args:
            t: time of the round [s].
            mags: raw readings (N, 3) [T] of receivers 1..N.
            coil: the firing module (−1: none).

        Returns:
            The mask (N,) bool of magnetic corrections applied (all False when no pulse ended).
        """
        pending = self._call(
            "magnetometer",
            torch.tensor(t, dtype=torch.float64),
            mags.to(torch.float64),
            torch.tensor(int(coil), dtype=torch.int64),
        )[0]
        if bool(pending):
            return self._call("correct", pending)[0]
        return torch.zeros(mags.shape[0], dtype=torch.bool)

    def control(self, t: float, spool: float) -> Tuple[float, int]:
        """Spool velocity [m/s] and status from the latest estimated height (`HeightPID.step`).

        Args:
            t: time [s].
            spool: spool position [m of tendon].

        Returns:
            ``(v [m/s], status)``.
        """
        return self.controller.step(t, self.height, spool)

    def set_target(self, target: float) -> None:
        """Set the controller's tip-height target (a non-finite one is refused, `HeightPID.set_target`).

        Args:
            target: the tip height [m].
        """
        self.controller.set_target(target)


def read_verified(path: str | Path, trust_unverified: bool = False) -> bytes:
    """The bytes of ``path`` after its manifest check (the bytes read are the bytes hashed).

    Args:
        path: the model file.
        trust_unverified: skip the manifest check.

    Returns:
        The file's bytes.

    Raises:
        BundleLoadError: the file cannot be read.
        UntrustedArtifactError: its manifest is missing or does not match, or the file changed while read.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise BundleLoadError(f"model file '{path}': cannot read it ({exc.strerror or exc})") from None
    if trust_unverified:
        return data
    record = manifest.verify_manifest(path)
    if hashlib.sha256(data).hexdigest() != str(record.get("sha256", "")).lower():
        raise manifest.UntrustedArtifactError(f"model file '{path}': changed while it was being loaded")
    return data


def load_pte_methods(data: bytes, path: str | Path) -> Tuple[Dict[str, Callable[..., Any]], Dict[str, Any], Any]:
    """(methods, metadata, program) of verified ``.pte`` bytes (ExecuTorch, InternalConsistency verification).

    Args:
        data: the ``.pte`` bytes, already verified.
        path: the file they came from (named in errors).

    Returns:
        ``(methods, metadata, program)``: `METHODS` → callables of tensors (returning lists), the metadata, and
        the program the methods point into (keep it alive while they are used).

    Raises:
        BundleLoadError: ExecuTorch is not installed, or the bytes are not a flexlearn ExecuTorch bundle.
    """
    try:
        from executorch.runtime import Runtime, Verification  # optional: only a .pte needs ExecuTorch
    except ImportError:
        raise BundleLoadError(
            f"model file '{path}': a .pte needs the ExecuTorch runtime (pip install executorch; "
            f"see requirements-pi.txt)"
        ) from None
    try:
        with native_log_filtered(EXECUTORCH_STARTUP_NOISE):
            program = Runtime.get().load_program(data, verification=Verification.InternalConsistency)
            meta = json.loads(program.load_method("metadata_json").execute([])[0])
            methods = {name: _bind(program.load_method(name)) for name in METHODS}
    except (RuntimeError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise BundleLoadError(f"model file '{path}': not a flexlearn ExecuTorch bundle ({exc})") from None
    return methods, meta, program


EXECUTORCH_STARTUP_NOISE = (
    "[cpuinfo_utils.cpp:",  # the CPU-model probe: no MIDR register file (containers, qemu), core count mismatch
    "InternalConsistency verification requested but not available",  # runtimes built without it (1.0.x)
)
"""Lines ExecuTorch's C++ runtime prints on stderr while it starts, none a fault of the bundle: the runner drops
them (`native_log_filtered`); docs/raspberry_pi.md explains them once."""


@contextlib.contextmanager
def native_log_filtered(noise: Tuple[str, ...]) -> Iterator[None]:
    """Capture what native code writes to file descriptor 2 while the body runs; pass on every line that contains
    none of ``noise``.

    Args:
        noise: substrings of the lines to drop.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 (an embedded interpreter): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [ln for ln in captured.read().decode("utf-8", "replace").splitlines(True)
                    if not any(n in ln for n in noise)]  # fmt: skip
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def _bind(method: Any) -> Callable[..., Any]:
    """``method.execute`` as a function of tensors; its first call (where the runtime's CPU probe prints) filtered."""
    calls = [0]

    def call(*inputs: Any) -> Any:
        if calls[0]:
            return method.execute(list(inputs))
        calls[0] = 1
        with native_log_filtered(EXECUTORCH_STARTUP_NOISE):
            return method.execute(list(inputs))

    return call


def load_program_bundle(path: str | Path, *, trust_unverified: bool = False) -> Tuple[ProgramBundle, Dict[str, Any]]:
    """A ``.pte`` or ``.pt2`` bundle as a `ProgramBundle` and its metadata (manifest verified unless opted out).

    Args:
        path: the ``.pte`` or ``.pt2`` bundle.
        trust_unverified: skip the manifest check.

    Returns:
        ``(bundle, metadata)``.

    Raises:
        BundleLoadError: another suffix, metadata of another kind, or a file that cannot be loaded here.
        UntrustedArtifactError: the manifest is missing or does not match.
    """
    path = Path(path)
    if path.suffix == ".pte":
        methods, meta, program = load_pte_methods(read_verified(path, trust_unverified), path)
    elif path.suffix == ".pt2":
        try:
            from ..program_loading import load_bundle_program  # optional: absent in the kit (no parent package)
        except ImportError:
            raise BundleLoadError(
                f"model file '{path}': a .pt2 bundle needs flexlearn installed (its archive is "
                f"inspected before loading); on the Pi use the .pte or .pt bundle"
            ) from None
        try:
            methods, meta = load_bundle_program(path, trust_unverified=trust_unverified)
        except Exception as exc:  # a refused file stays a refusal; anything else is named as unloadable
            if isinstance(exc, manifest.UntrustedArtifactError):
                raise
            raise BundleLoadError(f"model file '{path}': cannot load it ({str(exc).splitlines()[0][:200]})") from None
        program = None
    else:
        raise BundleLoadError(f"model file '{path}': expected a .pte or .pt2 bundle")
    if meta.get("kind") != "flexlearn-seed002-bundle" or sorted(meta.get("methods", {})) != sorted(METHODS):
        raise BundleLoadError(
            f"model file '{path}': metadata kind {meta.get('kind')!r} with methods "
            f"{sorted(meta.get('methods', {}))}, expected a flexlearn-seed002-bundle program"
        )
    return ProgramBundle(methods, meta, program), meta
