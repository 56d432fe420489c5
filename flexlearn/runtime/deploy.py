"""The deployment bundle: estimator + height controller + direction model + calibration in one TorchScript file.

`DeployBundle` (scriptable) wraps a `FusedEstimator` (which owns the direction model and the per-receiver
calibration A_i W_i) and a `HeightPID`. `export_bundle` scripts it and saves it (not frozen: the estimator's state
lives in mutable buffers/attributes) with a ``metadata.json`` extra file; `load_bundle` needs nothing but torch,
which is what `scripts/pi_runner.py` uses on the Raspberry Pi.

Metadata: ``schema_version``, ``kind`` = "flexlearn-seed002-bundle", ``n_segments``, ``length_m``, the estimator and
controller settings, ``calibration`` (per receiver: W, offset, A, fit quality if given), ``frame_protocol``,
``flexlearn_version``, ``torch_version``, and whatever the caller adds (training metrics, config).

Hook for the export CLI (`flexlearn-export`, not wired here): `export_deploy_bundle(model, out, ...)` with the
model from `flexlearn.tasks.checkpoints.load_direction_model` (runtime code does not import tasks).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Tuple

import torch
from torch import Tensor, nn

from flexlearn.runtime.fusion import FusedEstimator
from flexlearn.runtime.height_control import HeightPID

BUNDLE_SCHEMA_VERSION = 1
METADATA_FILE = "metadata.json"
FRAME_PROTOCOL = "flexlearn-frames/1 (see scripts/pi_runner.py)"


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
        self.estimator.set_reference(quats)
        self.controller.reset()

    @torch.jit.export
    def attitude(self, t: float, quats: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        return self.estimator.attitude(t, quats)

    @torch.jit.export
    def magnetometer(self, t: float, mags: Tensor, coil: int) -> Tensor:
        return self.estimator.magnetometer(t, mags, coil)

    @torch.jit.export
    def control(self, t: float, spool: float) -> Tuple[float, int]:
        return self.controller.step(t, float(self.estimator.height), spool)

    @torch.jit.export
    def set_target(self, target: float) -> None:
        self.controller.set_target(target)

    def forward(self, t: float, quats: Tensor, mags: Tensor, coil: int) -> Tuple[Tensor, Tensor, Tensor]:
        self.estimator.magnetometer(t, mags, coil)
        return self.estimator.attitude(t, quats)


def build_bundle(model: nn.Module, n_segments: int = 9, length: float = 0.029, soft_iron: Optional[Tensor] = None,
                 alignment: Optional[Tensor] = None, estimator: Optional[dict[str, Any]] = None,
                 controller: Optional[dict[str, Any]] = None) -> DeployBundle:
    """Assemble the eager bundle; ``estimator``/``controller`` are keyword overrides of the two modules."""
    est = FusedEstimator(model.eval(), n_segments=n_segments, length=length, soft_iron=soft_iron,
                         alignment=alignment, **(estimator or {}))
    return DeployBundle(est, HeightPID(**(controller or {})))


def _versions() -> dict[str, str]:
    try:
        import flexlearn
        fv = str(getattr(flexlearn, "__version__", "unknown"))
    except Exception:  # pragma: no cover
        fv = "unknown"
    return {"flexlearn_version": fv, "torch_version": torch.__version__}


def export_bundle(bundle: DeployBundle, path: str | Path, metadata: Optional[dict[str, Any]] = None,
                  calibration: Optional[dict[str, Any]] = None) -> Path:
    """Script ``bundle`` and save it atomically to ``path`` with metadata (see the module docstring)."""
    from flexlearn.atomic import atomic_path

    est = bundle.estimator
    aw = est.aw.tolist()
    meta = {"schema_version": BUNDLE_SCHEMA_VERSION, "kind": "flexlearn-seed002-bundle",
            "n_segments": est.n, "length_m": est.length, "frame_protocol": FRAME_PROTOCOL,
            "estimator": {"mode": est.mode, "sigma_b": est.sigma_b2 ** 0.5, "sigma_m": est.sigma_m2 ** 0.5,
                          "p0": est.p0, "twist_damping": est.twist_damping, "settle_s": est.settle,
                          "min_fresh": est.min_fresh, "full_scale_T": est.full_scale,
                          "reference": "body" if est.body_ref else "world",
                          "bias_model": est.bias_model, "gate": est.gate, "sigma_align": est.sigma_align,
                          "travel_noise": est.travel_noise},
            "controller": {k: getattr(bundle.controller, k) for k in
                           ("target", "kp", "ki", "kd", "tau_d", "i_band", "v_max", "a_max", "settle",
                            "reject_above")},
            "calibration": {"aw": aw, **(calibration or {})},
            "units": {"time": "s", "quaternion": "(w, x, y, z) body->world", "mag": "T", "length": "m",
                      "spool": "m of tendon", "velocity": "m/s"},
            **_versions(), **(metadata or {})}
    scripted = torch.jit.script(bundle.eval())
    with atomic_path(path) as tmp:
        torch.jit.save(scripted, str(tmp), _extra_files={METADATA_FILE: json.dumps(meta, sort_keys=True,
                                                                                   default=float)})
    return Path(path)


def load_bundle(path: str | Path) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """Load a bundle and its metadata (CPU, torch only); checks the schema version."""
    extra = {METADATA_FILE: ""}
    module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    meta = json.loads(extra[METADATA_FILE] or "{}")
    if meta.get("schema_version") != BUNDLE_SCHEMA_VERSION:
        raise ValueError(f"{path}: bundle schema_version {meta.get('schema_version')!r}, expected "
                         f"{BUNDLE_SCHEMA_VERSION}")
    return module, meta


def _check_kwargs(cls: type, kwargs: Optional[dict[str, Any]], where: str, reserved: tuple[str, ...]) -> dict[str, Any]:
    """Reject unknown or reserved keys with a message that names them (config validation at the edge)."""
    import inspect

    kwargs = dict(kwargs or {})
    allowed = set(inspect.signature(cls.__init__).parameters) - {"self", *reserved}
    bad = sorted(set(kwargs) - allowed)
    if bad:
        raise ValueError(f"{where}: unknown key(s) {bad}; allowed: {sorted(allowed)}")
    return kwargs


def export_deploy_bundle(model: nn.Module, out_path: str | Path, n_segments: int = 9, length: float = 0.029,
                         calibration: Optional[dict[str, Any] | str | Path] = None,
                         estimator: Optional[dict[str, Any]] = None, controller: Optional[dict[str, Any]] = None,
                         metadata: Optional[dict[str, Any]] = None) -> Path:
    """CLI hook (`flexlearn-export`): trained direction model (+ calibration) → one bundle file.

    ``calibration``: a dict or a JSON file with per-receiver ``W`` (N, 3, 3), optional ``A`` (N, 3, 3),
    ``offset`` (N, 3) and ``quality`` (e.g. `EllipsoidQuality.as_dict()` from `flexlearn.sensing.magcal`).
    ``estimator`` / ``controller``: keyword overrides of `FusedEstimator` / `HeightPID`; unknown keys fail with
    a message naming them. ``metadata`` is merged into the bundle's metadata (checkpoint path, training info).
    """
    if int(n_segments) < 1:
        raise ValueError(f"n_segments = {n_segments}: must be >= 1")
    if not float(length) > 0.0:
        raise ValueError(f"length = {length}: must be > 0 [m]")
    est_kw = _check_kwargs(FusedEstimator, estimator, "estimator",
                           ("model", "n_segments", "length", "soft_iron", "alignment"))
    ctl_kw = _check_kwargs(HeightPID, controller, "controller", ())
    cal: dict[str, Any] = {}
    if isinstance(calibration, (str, Path)):
        cal = json.loads(Path(calibration).read_text())
    elif calibration is not None:
        cal = dict(calibration)
    w = torch.tensor(cal["W"], dtype=torch.float64) if "W" in cal else None
    a = torch.tensor(cal["A"], dtype=torch.float64) if "A" in cal else None
    for name, m in (("W", w), ("A", a)):
        if m is not None and tuple(m.shape) != (n_segments, 3, 3):
            raise ValueError(f"calibration.{name}: shape {tuple(m.shape)}, expected ({n_segments}, 3, 3)")
    bundle = build_bundle(model, n_segments, length, w, a, est_kw, ctl_kw)
    return export_bundle(bundle, out_path, metadata, {k: v for k, v in cal.items() if k not in ("W", "A")})
