"""Calibration job (`flexlearn-calibrate`): a trained direction model fitted to new modules (seed 002, III-B3).

Per module (one input each, receiver 1..N in order): its recording — a raw sweep directory (simulated; processed
here, the hand-tumble in ``meta.json`` giving W), a `flexlearn-ingest` output directory (its dataset, or its
``raw/`` processed again when ``processing`` overrides are given) or a processed dataset file — and at most
``n_poses`` stationary poses of its ``split`` within the trained cap fit the alignment A
(`flexlearn.sensing.module_cal`). A module without a tumble is refused unless ``require_tumble=false``: then its
W is the identity (its ΔB as measured; A absorbs what it can of the gain and soft iron). The
output is one ``flexlearn-calibration/1`` file (`flexlearn.runtime.pikit.calibration_file`) for this model: the exporter
(``bundle.calibration=...``) and ``scripts/pi_runner.py --calibration`` take it and refuse it for another model,
schema or module count.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np
import pyarrow.parquet as pq
from omegaconf import DictConfig

from flexlearn.atomic import write_json_atomic
from flexlearn.config import check, from_dict, to_plain_dict
from flexlearn.data.dataset import METADATA_KEY, DirectionDataset
from flexlearn.data.process import process_sweep
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.errors import DataError
from flexlearn.runtime.pikit.calibration_file import CALIBRATION_SCHEMA, CalibrationFileError, check_calibration
from flexlearn.sensing.streams import RawSweep

log = logging.getLogger(__name__)
INGESTED_RAW = "raw"  # the raw sweep inside a flexlearn-ingest output directory (flexlearn.ingest.recording.RAW_DIR)
CALIBRATE_KEYS = (
    "paths",
    "hydra",
    "task_name",
    "ckpt_path",
    "inputs",
    "n_poses",
    "kind",
    "max_colatitude",
    "split",
    "seed",
    "output",
    "processing",
    "require_tumble",
    "json",  # how the app prints its summary
)


@dataclass(frozen=True)
class CalibrationFit:
    """How one module's alignment A is fitted (seed 002, III-B3; `flexlearn.sensing.module_cal.fit_input_map`).

    Attributes:
        n_poses: stationary poses the fit uses at most (0: no fit, A = I).
        kind: ``linear`` (a 3×3 map) or ``rotation``.
        max_colatitude: poses whose label lies within this angle [rad] of straight (the trained cap).
        split: the split the poses are drawn from (``train``: the test split stays unseen).
        seed: seed of the random draw of the poses.
        require_tumble: refuse a recording without its tumble calibration W.
    """

    n_poses: int
    kind: str = "linear"
    max_colatitude: float = math.radians(29.5)
    split: str = "train"
    seed: int = 0
    require_tumble: bool = True


class ModuleScore(NamedTuple):
    """What `evaluate_module` returns for one module.

    Attributes:
        metrics: angular-error metrics with their prefix, overall and per colatitude band.
        label: (N, 3) test labels (unit parent axes, float64 tensor).
        pred: (N, 3) predictions (float64 tensor).
        entry: the calibration entry of `fit_module`, or None when uncalibrated.
    """

    metrics: dict[str, Any]
    label: Any
    pred: Any
    entry: Optional[dict[str, Any]]


def _is_raw_sweep(path: str | Path) -> bool:
    """A raw sweep directory (its ``meta.json`` holds the tumble), processed here; else a dataset file/folder."""
    return Path(path).is_dir() and (Path(path) / "meta.json").is_file()


def _is_ingested(path: str | Path) -> bool:
    """A `flexlearn-ingest` output directory: its dataset and the raw sweep it was processed from."""
    p = Path(path)
    return p.is_dir() and (p / "dataset.parquet").is_file() and _is_raw_sweep(p / INGESTED_RAW)


def _reprocessable(path: str | Path) -> bool:
    """Whether ``processing`` overrides can act on the input: a raw sweep, or an ingested directory's raw sweep."""
    return _is_raw_sweep(path) or _is_ingested(path)


def module_dataset(path: str | Path, processing: Optional[dict[str, Any]] = None):
    """The `DirectionDataset` of one module: a dataset file as is, a raw sweep directory processed (tumble → W), an
    ingested directory's dataset (or, with ``processing`` overrides, its raw sweep processed again with the
    ingestion's processing config and the overrides).

    Args:
        path: a raw sweep directory, a flexlearn-ingest output directory or a dataset file (.parquet).
        processing: overrides of the processing config for raw inputs (None or empty: the defaults, or for an
            ingested directory its dataset as is).

    Returns:
        The module's `DirectionDataset`.

    Raises:
        DataError: ``path`` is none of these.
    """
    p = Path(path)
    if _is_raw_sweep(p):
        return process_sweep(RawSweep.load(p), from_dict(ProcessingConfig, processing or {}, "processing")).dataset
    if _is_ingested(p) and processing:
        used = DirectionDataset.load(p / "dataset.parquet").meta.get("processing") or {}
        merged = {**(used if isinstance(used, dict) else {}), **processing}
        return process_sweep(RawSweep.load(p / INGESTED_RAW), from_dict(ProcessingConfig, merged, "processing")).dataset
    if p.is_dir() and (p / "dataset.parquet").is_file():
        p = p / "dataset.parquet"
    if not p.is_file():
        raise DataError(
            f"{p}: not a raw sweep directory (meta.json), a flexlearn-ingest output directory (dataset.parquet and "
            "raw/) nor a dataset file (.parquet)"
        )
    return DirectionDataset.load(p)


def calibration_rows(ds: Any, n_poses: int, max_colatitude: float, split: str = "train", seed: int = 0) -> np.ndarray:
    """Row indices of at most ``n_poses`` poses of ``split`` whose label lies within ``max_colatitude`` [rad] of
    straight, drawn at random (``seed``) so that they spread over the cap as a user's few poses would.

    Args:
        ds: the module's `DirectionDataset`.
        n_poses: the most poses to draw.
        max_colatitude: the largest angle of a label from straight [rad].
        split: the split the poses are drawn from.
        seed: the seed of the draw.

    Returns:
        The sorted row indices (at most ``n_poses``).
    """
    col = np.arccos(np.clip(ds.label[:, 2], -1.0, 1.0))
    rows = np.flatnonzero((ds.split == split) & (col <= max_colatitude))
    rng = np.random.default_rng(seed)
    return np.sort(rng.permutation(rows)[:n_poses])


def fit_module(model: Any, ds: Any, fit: CalibrationFit, source: str = "") -> dict[str, Any]:
    """One module's calibration entry (see the module docstring).

    Args:
        model: the trained direction model.
        ds: the module's `DirectionDataset` (ΔB (N, 3) [T], labels (N, 3)).
        fit: how A is fitted.
        source: the module's recording, named in errors and in the entry.

    Returns:
        ``{W, offset, A, source, module_seed, tumble, fit}``: W (3×3) and offset (3,) [T] of the tumble, A (3×3).

    Raises:
        DataError: the recording has no tumble calibration and ``fit.require_tumble`` is set.
    """
    from flexlearn.sensing.module_cal import fit_input_map  # heavy import off the start-up path (torch)

    cal = ds.meta.get("calibration") if isinstance(ds.meta, dict) else None
    if cal is None and fit.require_tumble:
        raise DataError(f"{source or 'module'}: no tumble calibration (W) in the recording; {NO_TUMBLE_FIX}")
    rows = calibration_rows(ds, fit.n_poses, fit.max_colatitude, fit.split, fit.seed)
    a, report = fit_input_map(model, ds.delta_b[rows], ds.label[rows], kind=fit.kind, where=source or "calibration")
    w = np.asarray(cal["W"]) if cal else np.eye(3)
    offset = np.asarray(cal["offset"]) if cal else np.zeros(3)
    src = ds.meta.get("source", {}) if isinstance(ds.meta, dict) else {}
    module = src.get("module", {}) if isinstance(src, dict) else {}
    return {
        "W": w.tolist(),
        "offset": offset.tolist(),
        "A": a.tolist(),
        "source": source,
        "module_seed": module.get("seed"),
        "tumble": (cal or {}).get("quality"),
        "fit": {**report, "pose_ids": ds.pose_id[rows].tolist()},
    }


def trained_with_tumble(info: dict[str, Any]) -> Optional[bool]:
    """Whether the checkpoint's training dataset had its ΔB tumble-corrected (W applied), from the dataset file's
    metadata; None when the file is gone or unreadable (nothing to check against).

    Args:
        info: the checkpoint's information (`load_direction_model`; its ``dataset_path``).

    Returns:
        True or False, or None when unknown.
    """
    path = info.get("dataset_path")
    if not path:
        return None
    try:
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta[METADATA_KEY]).get("calibration") is not None
    except (OSError, KeyError, ValueError, TypeError):
        return None


NO_TUMBLE_FIX = (
    "record the module's hand tumble and ingest it with the recording (docs/ingest.md, 'Record the hand tumble': "
    "ingest.topics.tumble, ingest.serial.streams.tumble or ingest.tumble_recording=<recording>), or set "
    "require_tumble=false (W = identity)"
)


def _check_convention(trained: Optional[bool], ds: Any, source: str, require_tumble: bool = True) -> None:
    """Refuse a module whose ΔB convention (W applied or not) differs from the model's training data, naming the
    override that fixes it; a module without a tumble passes with ``require_tumble`` false (W = identity)."""
    meta = ds.meta if isinstance(ds.meta, dict) else {}
    has = meta.get("calibration") is not None
    if trained is None or has == trained:
        return
    tumble = meta.get("source", {}).get("tumble") if isinstance(meta.get("source"), dict) else None
    if trained and not tumble:  # nothing to correct with: W = identity, or record the tumble
        if not require_tumble:
            log.warning("%s: no tumble in the recording; W = identity (require_tumble=false)", source)
            return
        raise DataError(
            f"{source}: the model was trained on tumble-corrected fields but this module has no tumble "
            f"calibration (W); {NO_TUMBLE_FIX}"
        )
    raise DataError(
        f"{source}: the model was trained on {'tumble-corrected' if trained else 'uncorrected'} "
        f"fields but this module's are {'tumble-corrected' if has else 'uncorrected'}; process it "
        f"with +processing.soft_iron={'tumble' if trained else 'none'}"
    )


def calibration_document(
    modules: Sequence[dict[str, Any]], fingerprint: str, ckpt_path: str, kind: str = "rotation"
) -> dict[str, Any]:
    """The ``flexlearn-calibration/1`` object of per-module entries (`fit_module`); ``kind`` of the fitted A
    (``linear`` is declared as ``"alignment": "stretch"``, a rotation as ``"rotation"``).

    Args:
        modules: the per-module entries, in input order.
        fingerprint: the model's fingerprint (`flexlearn.runtime.bundle_inputs.model_fingerprint`).
        ckpt_path: the checkpoint the entries were fitted with.
        kind: the kind of A: ``rotation`` or ``linear``.

    Returns:
        The calibration document (JSON-ready).
    """
    return {
        "schema": CALIBRATION_SCHEMA,
        "alignment": "stretch" if kind == "linear" else "rotation",
        "model_fingerprint": fingerprint,
        "checkpoint": str(ckpt_path),
        "n_modules": len(modules),
        "W": [m["W"] for m in modules],
        "offset": [m["offset"] for m in modules],
        "A": [m["A"] for m in modules],
        "removes": "gain, soft iron (W, tumble); sensor/board tilt, magnetometer-vs-accelerometer axes and the "
        "first-order field-map change of joint, sensor and coil placement (A, poses)",
        "modules": [{k: v for k, v in m.items() if k not in ("W", "offset", "A")} for m in modules],
    }


def _check_loadable(doc: dict[str, Any], inputs: Sequence[str], kind: str) -> None:
    """Refuse a fit that the exporter and the Pi runner would refuse to load (`check_calibration`: W symmetric
    positive definite with det ≈ 1, A a rotation or a bounded stretch, offsets bounded), before anything is written.

    Args:
        doc: the calibration document about to be written.
        inputs: the module recordings, receiver 1..N in order.
        kind: the alignment fitted ('linear' or 'rotation').

    Raises:
        DataError: naming the module's recording, the field and the problem, and what to change.
    """
    try:
        check_calibration(doc, len(inputs), doc.get("model_fingerprint"), "fitted calibration")
    except CalibrationFileError as exc:
        found = re.search(r"of receiver (\d+)", str(exc))
        source = inputs[int(found.group(1)) - 1] if found else ", ".join(inputs)
        hint = (
            "fit a rotation only (kind=rotation), or use a model that fits its training data better"
            if kind == "linear"
            else "check that the recording is of this module and that the model fits its training data"
        )
        raise DataError(f"{source}: {exc}; nothing was written: {hint}") from None


def calibrate(cfg: DictConfig) -> dict[str, Any]:
    """The `flexlearn-calibrate` job: fit every input module, write ``cfg.output``; return a summary.

    Args:
        cfg: the composed config (flexlearn/conf/calibrate.yaml with the command's overrides).

    Returns:
        ``{calibration, n_modules, median_residual_deg, tumble_coverage}``: the file written, the module count, each
        module's median residual after the fit [deg] and its tumble coverage (None without a tumble).

    Raises:
        ConfigError: an unknown key or a bad value.
        DataError: an input that is not a module recording, or a ΔB convention that differs from the model's.
    """
    # heavy imports off the start-up path (torch)
    from flexlearn.runtime.bundle_inputs import model_fingerprint
    from flexlearn.tasks.checkpoints import load_direction_model

    extra = sorted(set(cfg) - set(CALIBRATE_KEYS))
    check(not extra, "<top level>", extra, f"unknown key(s); known keys: {list(CALIBRATE_KEYS)}")
    inputs = cfg.inputs
    inputs = [str(inputs)] if isinstance(inputs, (str, Path)) else [str(p) for p in inputs]
    check(len(inputs) >= 1, "inputs", inputs, "expected one recording per module")
    n_poses = cfg.n_poses
    check(
        isinstance(n_poses, int) and not isinstance(n_poses, bool) and 1 <= n_poses <= 50,
        "n_poses",
        n_poses,
        "must be an integer in [1, 50] (a minute of stationary poses)",
    )
    check(cfg.kind in ("rotation", "linear"), "kind", cfg.kind, "must be 'rotation' or 'linear'")
    model, info = load_direction_model(cfg.ckpt_path)
    trained = trained_with_tumble(info)
    processing = to_plain_dict(cfg.processing, "processing") if cfg.get("processing") else {}
    check(
        not processing or any(_reprocessable(p) for p in inputs),
        "processing",
        processing,
        "is only read for raw sweep inputs (meta.json) and flexlearn-ingest output directories (raw/); "
        "these inputs are processed datasets: process them again with the overrides (flexlearn-process)",
    )
    fit = CalibrationFit(
        n_poses=n_poses,
        kind=cfg.kind,
        max_colatitude=float(cfg.max_colatitude),
        split=str(cfg.split),
        seed=int(cfg.seed),
        require_tumble=bool(cfg.require_tumble),
    )
    modules = []
    for p in inputs:
        ds = module_dataset(p, processing)
        _check_convention(trained, ds, p, fit.require_tumble)
        modules.append(fit_module(model, ds, fit, source=p))
    doc = calibration_document(modules, model_fingerprint(model), str(cfg.ckpt_path), fit.kind)
    _check_loadable(doc, inputs, fit.kind)
    out = Path(cfg.output)
    write_json_atomic(out, doc)
    return {
        "calibration": str(out),
        "n_modules": len(modules),
        "median_residual_deg": [m["fit"]["median_residual_deg_after"] for m in modules],
        "tumble_coverage": [(m["tumble"] or {}).get("coverage") for m in modules],
    }


def evaluate_module(model: Any, ds: Any, fit: CalibrationFit, prefix: str = "test/") -> ModuleScore:
    """Score ``model`` on the test split of one module's dataset, after fitting its calibration on at most
    ``fit.n_poses`` poses of the train split (0: uncalibrated, A = I).

    W is already in the dataset (processing applied the module's tumble), so no tumble is required here.

    Args:
        model: the trained direction model.
        ds: the module's `DirectionDataset`.
        fit: how A is fitted (its ``split`` and ``require_tumble`` are not read: the train split, no tumble).
        prefix: prefix of the metric names.

    Returns:
        The metrics with ``prefix`` — overall and per colatitude band, `flexlearn.metrics.band_summary` —, the
        test labels (N, 3), predictions (N, 3) and the calibration entry or None.

    Raises:
        DataError: the test split is empty.
    """
    import torch  # heavy imports off the start-up path (torch)

    from flexlearn.metrics import (  # heavy (torch), see above
        angular_error_deg,
        angular_error_summary,
        band_summary,
        commanded_bend_deg,
        invalid_direction,
    )

    fit = replace(fit, split="train", require_tumble=False)
    entry = fit_module(model, ds, fit) if fit.n_poses > 0 else None
    a = np.asarray(entry["A"]) if entry else np.eye(3)
    test = ds.subset("test")
    if len(test) == 0:
        raise DataError("dataset: the test split is empty; nothing to score")
    with torch.no_grad():
        pred = model(torch.as_tensor(test.delta_b @ a.T, dtype=torch.float32)).double()
    label = torch.as_tensor(test.label, dtype=torch.float64)
    err = angular_error_deg(pred, label)
    metrics: dict[str, Any] = angular_error_summary(err, prefix, invalid=invalid_direction(pred))
    bend = None if test.target is None else commanded_bend_deg(torch.as_tensor(test.target))
    metrics.update(band_summary(err, label, prefix, bend_deg=bend))
    if entry:
        metrics[f"{prefix}calibration_poses"] = entry["fit"]["n_poses"]
    return ModuleScore(metrics, label, pred, entry)
