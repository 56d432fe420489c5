"""Calibration job (`flexlearn-calibrate`): a trained direction model fitted to new modules (seed 002, III-B3).

Per module (one input each, receiver 1..N in order): its recording — a raw sweep directory (simulated or ingested;
processed here, the hand-tumble in ``meta.json`` giving W) or a processed dataset file — and at most ``n_poses``
stationary poses of its ``split`` within the trained cap fit the alignment A (`flexlearn.sensing.module_cal`). The
output is one ``flexlearn-calibration/1`` file (`flexlearn.runtime.calibration_file`) for this model: the exporter
(``bundle.calibration=...``) and ``scripts/pi_runner.py --calibration`` take it and refuse it for another model,
schema or module count.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
from omegaconf import DictConfig

from flexlearn.atomic import write_json_atomic
from flexlearn.config import check, from_dict, to_plain_dict
from flexlearn.errors import DataError

CALIBRATE_KEYS = ("paths", "hydra", "task_name", "ckpt_path", "inputs", "n_poses", "kind", "max_colatitude", "split",
                  "seed", "output", "processing", "require_tumble")


def _is_raw_sweep(path: str | Path) -> bool:
    """A raw sweep directory (its ``meta.json`` holds the tumble), processed here; else a dataset file/folder."""
    return Path(path).is_dir() and (Path(path) / "meta.json").is_file()


def module_dataset(path: str | Path, processing: Optional[dict[str, Any]] = None):
    """The `DirectionDataset` of one module: a dataset file as is, a raw sweep directory processed (tumble → W)."""
    from flexlearn.data.dataset import DirectionDataset
    from flexlearn.data.process import ProcessingConfig, process_sweep
    from flexlearn.sensing.streams import RawSweep

    p = Path(path)
    if _is_raw_sweep(p):
        return process_sweep(RawSweep.load(p), from_dict(ProcessingConfig, processing or {}, "processing")).dataset
    if p.is_dir() and (p / "dataset.parquet").is_file():
        p = p / "dataset.parquet"
    if not p.is_file():
        raise DataError(f"{p}: not a raw sweep directory (meta.json) nor a dataset file (.parquet)")
    return DirectionDataset.load(p)


def calibration_rows(ds: Any, n_poses: int, max_colatitude: float, split: str = "train", seed: int = 0) -> np.ndarray:
    """Row indices of at most ``n_poses`` poses of ``split`` whose label lies within ``max_colatitude`` [rad] of
    straight, drawn at random (``seed``) so that they spread over the cap as a user's few poses would."""
    col = np.arccos(np.clip(ds.label[:, 2], -1.0, 1.0))
    rows = np.flatnonzero((ds.split == split) & (col <= max_colatitude))
    rng = np.random.default_rng(seed)
    return np.sort(rng.permutation(rows)[:n_poses])


def fit_module(model: Any, ds: Any, n_poses: int, kind: str = "linear", max_colatitude: float = math.radians(29.5),
               split: str = "train", seed: int = 0, require_tumble: bool = True, source: str = "") -> dict[str, Any]:
    """One module's calibration entry {W, offset, A, tumble, fit, source} (see the module docstring)."""
    from flexlearn.sensing.module_cal import fit_input_map

    cal = ds.meta.get("calibration") if isinstance(ds.meta, dict) else None
    if cal is None and require_tumble:
        raise DataError(f"{source or 'module'}: no tumble calibration (W) in the recording; record the module "
                        "tumbled in the ambient field (meta.json 'tumble') or set require_tumble=false")
    rows = calibration_rows(ds, n_poses, max_colatitude, split, seed)
    a, report = fit_input_map(model, ds.delta_b[rows], ds.label[rows], kind=kind, where=source or "calibration")
    w = np.asarray(cal["W"]) if cal else np.eye(3)
    offset = np.asarray(cal["offset"]) if cal else np.zeros(3)
    src = ds.meta.get("source", {}) if isinstance(ds.meta, dict) else {}
    module = src.get("module", {}) if isinstance(src, dict) else {}
    return {"W": w.tolist(), "offset": offset.tolist(), "A": a.tolist(), "source": source,
            "module_seed": module.get("seed"), "tumble": (cal or {}).get("quality"),
            "fit": {**report, "pose_ids": ds.pose_id[rows].tolist()}}


def trained_with_tumble(info: dict[str, Any]) -> Optional[bool]:
    """Whether the checkpoint's training dataset had its ΔB tumble-corrected (W applied), from the dataset file's
    metadata; None when the file is gone or unreadable (nothing to check against)."""
    import pyarrow.parquet as pq

    from flexlearn.data.dataset import METADATA_KEY

    path = info.get("dataset_path")
    if not path:
        return None
    try:
        meta = pq.read_schema(path).metadata or {}
        return json.loads(meta[METADATA_KEY]).get("calibration") is not None
    except (OSError, KeyError, ValueError, TypeError):
        return None


def _check_convention(trained: Optional[bool], ds: Any, source: str) -> None:
    """Refuse a module whose ΔB convention (W applied or not) differs from the model's training data."""
    has = (ds.meta.get("calibration") if isinstance(ds.meta, dict) else None) is not None
    if trained is not None and has != trained:
        raise DataError(f"{source}: the model was trained on {'tumble-corrected' if trained else 'uncorrected'} "
                        f"fields but this module's are {'tumble-corrected' if has else 'uncorrected'}; process it "
                        f"with +processing.soft_iron={'tumble' if trained else 'none'}")


def calibration_document(modules: Sequence[dict[str, Any]], fingerprint: str, ckpt_path: str) -> dict[str, Any]:
    """The ``flexlearn-calibration/1`` object of per-module entries (`fit_module`)."""
    from flexlearn.runtime.calibration_file import CALIBRATION_SCHEMA

    return {"schema": CALIBRATION_SCHEMA, "model_fingerprint": fingerprint, "checkpoint": str(ckpt_path),
            "n_modules": len(modules), "W": [m["W"] for m in modules], "offset": [m["offset"] for m in modules],
            "A": [m["A"] for m in modules],
            "removes": "gain, soft iron (W, tumble); sensor/board tilt, magnetometer-vs-accelerometer axes and the "
                       "first-order field-map change of joint, sensor and coil placement (A, poses)",
            "modules": [{k: v for k, v in m.items() if k not in ("W", "offset", "A")} for m in modules]}


def calibrate(cfg: DictConfig) -> dict[str, Any]:
    """The `flexlearn-calibrate` job: fit every input module, write ``cfg.output``; return a summary."""
    from flexlearn.runtime.deploy import model_fingerprint
    from flexlearn.tasks.checkpoints import load_direction_model

    extra = sorted(set(cfg) - set(CALIBRATE_KEYS))
    check(not extra, "<top level>", extra, f"unknown key(s); known keys: {list(CALIBRATE_KEYS)}")
    inputs = cfg.inputs
    inputs = [str(inputs)] if isinstance(inputs, (str, Path)) else [str(p) for p in inputs]
    check(len(inputs) >= 1, "inputs", inputs, "expected one recording per module")
    n_poses = cfg.n_poses
    check(isinstance(n_poses, int) and not isinstance(n_poses, bool) and 1 <= n_poses <= 50, "n_poses", n_poses,
          "must be an integer in [1, 50] (a minute of stationary poses)")
    check(cfg.kind in ("rotation", "linear"), "kind", cfg.kind, "must be 'rotation' or 'linear'")
    model, info = load_direction_model(cfg.ckpt_path)
    trained = trained_with_tumble(info)
    processing = to_plain_dict(cfg.processing, "processing") if cfg.get("processing") else {}
    check(not processing or any(_is_raw_sweep(p) for p in inputs), "processing", processing, "is only read for raw sweep inputs (meta.json); "
          "these inputs are processed datasets: process them again with the overrides (flexlearn-process)")
    modules = []
    for p in inputs:
        ds = module_dataset(p, processing)
        _check_convention(trained, ds, p)
        modules.append(fit_module(model, ds, n_poses, cfg.kind, float(cfg.max_colatitude), str(cfg.split),
                                  int(cfg.seed), bool(cfg.require_tumble), source=p))
    doc = calibration_document(modules, model_fingerprint(model), str(cfg.ckpt_path))
    out = Path(cfg.output)
    write_json_atomic(out, doc)
    return {"calibration": str(out), "n_modules": len(modules),
            "median_residual_deg": [m["fit"]["median_residual_deg_after"] for m in modules],
            "tumble_coverage": [(m["tumble"] or {}).get("coverage") for m in modules]}


def evaluate_module(model: Any, ds: Any, n_poses: int = 0, kind: str = "linear",
                    max_colatitude: float = math.radians(29.5), seed: int = 0, prefix: str = "test/"
                    ) -> tuple[dict[str, Any], Any, Any, Optional[dict[str, Any]]]:
    """Score ``model`` on the test split of one module's dataset, after fitting its calibration on at most
    ``n_poses`` poses of the train split (0: uncalibrated, A = I). Returns (metrics with ``prefix`` — overall and
    per colatitude band, `flexlearn.metrics.band_summary` —, test labels (N, 3), predictions (N, 3), the
    calibration entry or None). W is already in the dataset (processing applied the module's tumble)."""
    import torch

    from flexlearn.metrics import angular_error_deg, angular_error_summary, band_summary, invalid_direction

    entry = fit_module(model, ds, n_poses, kind, max_colatitude, "train", seed, require_tumble=False) \
        if n_poses > 0 else None
    a = np.asarray(entry["A"]) if entry else np.eye(3)
    test = ds.subset("test")
    if len(test) == 0:
        raise DataError("dataset: the test split is empty; nothing to score")
    with torch.no_grad():
        pred = model(torch.as_tensor(test.delta_b @ a.T, dtype=torch.float32)).double()
    label = torch.as_tensor(test.label, dtype=torch.float64)
    err = angular_error_deg(pred, label)
    metrics: dict[str, Any] = angular_error_summary(err, prefix, invalid=invalid_direction(pred))
    metrics.update(band_summary(err, label, prefix))
    if entry:
        metrics[f"{prefix}calibration_poses"] = entry["fit"]["n_poses"]
    return metrics, label, pred, entry
