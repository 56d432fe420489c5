"""The deployment bundle: estimator + height controller + direction model + calibration in one TorchScript file.

`DeployBundle` (scriptable) wraps a `FusedEstimator` (which owns the direction model and the per-receiver
calibration A_i W_i) and a `HeightPID`. `export_bundle` scripts it and saves it (not frozen: the estimator's state
lives in mutable buffers/attributes) with a ``metadata.json`` extra file. The file loads with torch alone (as
`scripts/pi_runner.py` does on the Raspberry Pi); `load_bundle` adds the schema and manifest checks.

Metadata: ``schema_version``, ``kind`` = "flexlearn-seed002-bundle", ``n_segments``, ``length_m``, the estimator and
controller settings, ``calibration`` (per receiver: W, offset, A, fit quality if given), ``frame_protocol``,
``flexlearn_version``, ``torch_version``, and whatever the caller adds (training metrics, config).

Hook for the export CLI (`flexlearn-export bundle.enabled=true`): `export_deploy_bundle(model, out, ...)` with
the model from `flexlearn.tasks.checkpoints.load_direction_model` (runtime code does not import tasks). Every
option and the calibration are checked (keys, ranges, shapes; errors name the key or file and the value;
`flexlearn.runtime.bundle_inputs`) before anything is scripted or written; the file gets its manifest
``<file>.manifest.json`` (`flexlearn.runtime.export`) and `load_bundle` verifies it (opt-out:
``trust_unverified=True``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

import torch
from torch import Tensor, nn

from flexlearn.errors import CheckpointError
from flexlearn.runtime.bundle_inputs import (
    CONTROLLER_RULES,
    ESTIMATOR_RULES,
    BundleConfigError,
    check_settings,
    is_number,
    load_calibration,
    model_fingerprint,
)
from flexlearn.runtime.export import (
    Artifact,
    load_torchscript_bytes,
    read_verified,
    script,
    script_artifact,
    versions,
    write_artifacts,
)
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.options import EstimatorSettings
from flexlearn.runtime.pikit.calibration_file import CALIBRATION_SCHEMA
from flexlearn.runtime.pikit.height_control import HeightPID, HeightPIDSettings
from flexlearn.runtime.program_archive import archive_entries

BUNDLE_SCHEMA_VERSION = 1
METADATA_FILE = "metadata.json"
FRAME_PROTOCOL = "flexlearn-frames/1 (see scripts/pi_runner.py)"


class BundleSchemaError(CheckpointError, ValueError):
    """A bundle file has another schema version than this flexlearn reads."""


class DeployBundle(nn.Module):
    """Per-frame entry points for the Pi runner; all TorchScript-compatible.

    * `set_reference(quats (N+1, 4))` — robot hanging straight (q⁰);
    * `attitude(t, quats)` → (points (N+1, 3) [m], h () [m], flags (N,) int64);
    * `magnetometer(t, mags (N, 3) [T], coil)` → mask (N,) of magnetic corrections applied;
    * `control(t, spool [m])` → (v [m/s], status) from the latest estimated height;
    * `forward(t, quats, mags, coil)` — one fused step (magnetometer round + attitude sweep).
    """

    def __init__(self, estimator: FusedEstimator, controller: HeightPID) -> None:
        super().__init__()
        self.estimator = estimator
        self.controller = controller
        self.n_segments = estimator.n

    @torch.jit.export
    def set_reference(self, quats: Tensor) -> None:
        """Record the reference q⁰ (robot hanging straight) and reset the estimator and the controller.

        Args:
            quats: module quaternions (N + 1, 4) (w, x, y, z), body → world.
        """
        self.estimator.set_reference(quats)
        self.controller.reset()

    @torch.jit.export
    def attitude(self, t: float, quats: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One attitude sweep (`FusedEstimator.attitude`) → (points (N + 1, 3) [m], h () [m], flags (N,)).

        Args:
            t: time of the frame [s].
            quats: module quaternions (N + 1, 4).

        Returns:
            ``(points (N + 1, 3) [m], h () [m], flags (N,) int64)``.
        """
        return self.estimator.attitude(t, quats)

    @torch.jit.export
    def magnetometer(self, t: float, mags: Tensor, coil: int) -> Tensor:
        """One magnetometer round (`FusedEstimator.magnetometer`) → mask (N,) of magnetic corrections applied.

        Args:
            t: time of the round [s].
            mags: raw readings (N, 3) [T] of receivers 1..N.
            coil: the firing module (−1: none).

        Returns:
            The mask (N,) bool of the corrections applied.
        """
        return self.estimator.magnetometer(t, mags, coil)

    @torch.jit.export
    def control(self, t: float, spool: float) -> Tuple[float, int]:
        """One controller step (`HeightPID.step`) on the latest estimated tip height → (v [m/s], status).

        Args:
            t: time [s].
            spool: spool position [m of tendon].

        Returns:
            ``(v [m/s], status)``.
        """
        return self.controller.step(t, float(self.estimator.height), spool)

    @torch.jit.export
    def set_target(self, target: float) -> None:
        """Set the controller's tip-height target (a non-finite one is refused, `HeightPID.set_target`).

        Args:
            target: the tip height [m].
        """
        self.controller.set_target(target)

    def forward(self, t: float, quats: Tensor, mags: Tensor, coil: int) -> Tuple[Tensor, Tensor, Tensor]:
        """One fused step (magnetometer round, then attitude sweep) → the sweep's (points, h, flags).

        Args:
            t: time of the frame [s].
            quats: module quaternions (N + 1, 4).
            mags: raw magnetometer readings (N, 3) [T] of receivers 1..N.
            coil: the firing module (−1: none).
        """
        self.estimator.magnetometer(t, mags, coil)
        return self.estimator.attitude(t, quats)


def build_bundle(
    model: nn.Module,
    n_segments: int = 9,
    length: float = 0.029,
    soft_iron: Optional[Tensor] = None,
    alignment: Optional[Tensor] = None,
    estimator: Optional[dict[str, Any]] = None,
    controller: Optional[dict[str, Any]] = None,
) -> DeployBundle:
    """Assemble the eager bundle; ``estimator``/``controller`` are keyword overrides of the two modules.

    Args:
        model: the direction model (set to eval mode).
        n_segments: N joints.
        length: pivot spacing L [m].
        soft_iron: per-receiver soft-iron matrices W (N, 3, 3) (None: identity).
        alignment: per-receiver alignments A (N, 3, 3) (None: identity).
        estimator: overrides of `EstimatorSettings` fields (None: the defaults).
        controller: overrides of `HeightPIDSettings` fields (None: the defaults).

    Returns:
        The bundle (not scripted).
    """
    settings = EstimatorSettings(n_segments=n_segments, length=length, **(estimator or {}))
    est = FusedEstimator(model.eval(), settings, soft_iron=soft_iron, alignment=alignment)
    return DeployBundle(est, HeightPID(HeightPIDSettings(**(controller or {}))))


def bundle_artifact(
    bundle: DeployBundle,
    path: str | Path,
    metadata: Optional[dict[str, Any]] = None,
    calibration: Optional[dict[str, Any]] = None,
) -> Artifact:
    """Script ``bundle`` (not frozen) with its metadata (see the module docstring) as an `Artifact`.

    Args:
        bundle: the eager bundle.
        path: the file the artifact will be written to.
        metadata: extra metadata entries (they override the generated ones).
        calibration: extra entries of the metadata's ``calibration`` (beside ``aw``).

    Returns:
        The artifact, of kind "bundle".
    """
    est = bundle.estimator
    meta = {
        "schema_version": BUNDLE_SCHEMA_VERSION,
        "kind": "flexlearn-seed002-bundle",
        "n_segments": est.n,
        "length_m": est.length,
        "frame_protocol": FRAME_PROTOCOL,
        "estimator": {
            "mode": est.mode,
            "sigma_b": est.sigma_b2**0.5,
            "sigma_m": est.sigma_m2**0.5,
            "p0": est.p0,
            "twist_damping": est.twist_damping,
            "settle_s": est.settle,
            "min_fresh": est.min_fresh,
            "full_scale_T": est.full_scale,
            "reference": "body" if est.body_ref else "world",
            "bias_model": est.bias_model,
            "gate": est.gate,
            "sigma_align": est.sigma_align,
            "travel_noise": est.travel_noise,
            "confidence": json.loads(est.confidence_json),
        },
        "controller": {
            k: getattr(bundle.controller, k)
            for k in ("target", "kp", "ki", "kd", "tau_d", "i_band", "v_max", "a_max", "settle", "reject_above")
        },
        "calibration": {"aw": est.aw.tolist(), **(calibration or {})},
        "units": {
            "time": "s",
            "quaternion": "(w, x, y, z) body->world",
            "mag": "T",
            "length": "m",
            "spool": "m of tendon",
            "velocity": "m/s",
        },
        **versions(),
        **(metadata or {}),
    }
    return script_artifact(script(bundle), path, meta, "bundle")


def export_bundle(
    bundle: DeployBundle,
    path: str | Path,
    metadata: Optional[dict[str, Any]] = None,
    calibration: Optional[dict[str, Any]] = None,
) -> Path:
    """Script ``bundle`` and save it with its metadata and manifest (written atomically).

    Args:
        bundle: the eager bundle.
        path: the output file.
        metadata: extra metadata entries (`bundle_artifact`).
        calibration: extra entries of the metadata's ``calibration``.

    Returns:
        The path written.
    """
    return write_artifacts([bundle_artifact(bundle, path, metadata, calibration)])[0]


def bundle_metadata(data: bytes, path: str | Path) -> dict[str, Any]:
    """The ``metadata.json`` of a bundle archive, read from the zip (nothing of the model runs).

    Args:
        data: the archive's bytes.
        path: its file (named in errors).

    Returns:
        The metadata.

    Raises:
        CheckpointError: metadata.json is not valid JSON.
        BundleSchemaError: another schema version than `BUNDLE_SCHEMA_VERSION`.
    """
    raw = archive_entries(data, path, only=f"extra/{METADATA_FILE}")[1].get(f"extra/{METADATA_FILE}", b"{}")
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        raise CheckpointError(f"bundle '{path}': metadata.json is not valid JSON ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("schema_version") != BUNDLE_SCHEMA_VERSION:
        found = meta.get("schema_version") if isinstance(meta, dict) else meta
        raise BundleSchemaError(f"bundle '{path}': schema_version {found!r}, expected {BUNDLE_SCHEMA_VERSION}")
    return meta


def load_bundle(path: str | Path, *, trust_unverified: bool = False) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """Load a bundle and its metadata (CPU, torch only): manifest (`verify_manifest`; ``trust_unverified=True``
    skips it, only for files you trust: a bundle is code), schema version, then the module. A readable
    bundle of another schema version is named as such even without a manifest.

    Args:
        path: the bundle file.
        trust_unverified: skip the manifest check.

    Returns:
        ``(module, metadata)``: the scripted bundle (CPU) and its ``metadata.json``.

    Raises:
        CheckpointError: the file is missing, unverified (`UntrustedArtifactError`) or not a loadable bundle.
        BundleSchemaError: another schema version than `BUNDLE_SCHEMA_VERSION`.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"bundle '{path}': not found")
    try:
        bundle_metadata(path.read_bytes(), path)
    except BundleSchemaError:
        raise
    except (CheckpointError, OSError):
        pass  # unreadable: the manifest check below names the problem
    data = read_verified(path, trust_unverified=trust_unverified)
    meta = bundle_metadata(data, path)
    module, _ = load_torchscript_bytes(data, path)
    return module, meta


@dataclasses.dataclass(frozen=True)
class BundleOptions:
    """What a deploy bundle is built from besides the direction model (`prepare_deploy_bundle`).

    Args:
        n_segments: N joints.
        length: pivot spacing L [m].
        calibration: a dict or a JSON file with per-receiver ``W`` (N, 3, 3), optional ``A`` (N, 3, 3),
            ``offset`` (N, 3) [T] and ``quality`` (e.g. `EllipsoidQuality.as_dict()` from `flexlearn.sensing.magcal`);
            ``"identity"`` or None: no calibration (`load_calibration`).
        estimator: overrides of `EstimatorSettings` (not ``n_segments``, ``length``), checked by `ESTIMATOR_RULES`.
        controller: overrides of `HeightPIDSettings`, checked by `CONTROLLER_RULES`.
        where: the config path errors name (``<where>.<key>``).
    """

    n_segments: int = 9
    length: float = 0.029
    calibration: Optional[Mapping[str, Any] | str | Path] = None
    estimator: Optional[Mapping[str, Any]] = None
    controller: Optional[Mapping[str, Any]] = None
    where: str = "bundle"


def prepare_deploy_bundle(
    model: nn.Module,
    out_path: str | Path,
    options: BundleOptions = BundleOptions(),
    metadata: Optional[dict[str, Any]] = None,
) -> Artifact:
    """Validate every option and the calibration, then build and script the bundle; nothing is written.

    Args:
        model: the trained direction model.
        out_path: where the bundle will be written.
        options: N, L, calibration and the settings overrides (`BundleOptions`).
        metadata: merged into the bundle's metadata (checkpoint path, training info).

    Returns:
        The scripted bundle as an `Artifact` (write it with `write_artifacts`).

    Raises:
        BundleConfigError: an option or the calibration is unknown, malformed or out of range; the message names
            ``<where>.<key>`` (or the calibration file and field) and the value.
    """
    bundle, extra, rest = checked_bundle(model, options)
    return bundle_artifact(bundle, out_path, {**extra, **(metadata or {})}, rest)


def checked_bundle(model: nn.Module, options: BundleOptions = BundleOptions()) -> tuple[DeployBundle, dict, dict]:
    """Validate every option and the calibration, then build the bundle (eager; not scripted, nothing written).

    Args:
        model: the trained direction model.
        options: N, L, calibration and the settings overrides (`BundleOptions`).

    Returns:
        (the `DeployBundle`, metadata it adds: model fingerprint and calibration schema, the calibration's other
        fields for the metadata).

    Raises:
        BundleConfigError: as `prepare_deploy_bundle`.
    """
    n_segments, length, where = options.n_segments, options.length, options.where
    if isinstance(n_segments, bool) or not hasattr(n_segments, "__index__") or int(n_segments) < 1:
        raise BundleConfigError(f"config '{where}.n_segments' = {n_segments!r}: must be an integer >= 1")
    n_segments = int(n_segments)
    if not (is_number(length) and math.isfinite(length) and length > 0):
        raise BundleConfigError(f"config '{where}.length' = {length!r}: must be a finite length > 0 [m]")
    est_kw = check_settings(
        EstimatorSettings, options.estimator, f"{where}.estimator", ("n_segments", "length"), ESTIMATOR_RULES
    )
    ctl_kw = check_settings(HeightPIDSettings, options.controller, f"{where}.controller", (), CONTROLLER_RULES)
    fingerprint = model_fingerprint(model)
    w, a, rest = load_calibration(options.calibration, n_segments, where, fingerprint)
    bundle = build_bundle(model, n_segments, float(length), w, a, est_kw, ctl_kw)
    return bundle, {"model_fingerprint": fingerprint, "calibration_schema": CALIBRATION_SCHEMA}, rest


def export_deploy_bundle(
    model: nn.Module,
    out_path: str | Path,
    options: BundleOptions = BundleOptions(),
    metadata: Optional[dict[str, Any]] = None,
) -> Path:
    """CLI hook (`flexlearn-export`): trained direction model (+ calibration) → one bundle file + manifest.

    Unknown keys and out-of-range values of ``options`` (`ESTIMATOR_RULES`, `CONTROLLER_RULES`) fail with a message
    naming them, before anything is written.

    Args:
        model: the trained direction model.
        out_path: the bundle file to write.
        options: N, L, calibration and the settings overrides (`BundleOptions`).
        metadata: merged into the bundle's metadata (checkpoint path, training info).

    Returns:
        The path written.

    Raises:
        BundleConfigError: see `prepare_deploy_bundle`.
    """
    return write_artifacts([prepare_deploy_bundle(model, out_path, options, metadata)])[0]
