"""Export jobs: a trained checkpoint to deployable files (TorchScript, torch.export) and the robot bundle."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import torch
from omegaconf import DictConfig, OmegaConf

import flexlearn
from flexlearn.data.dataset import DATASET_SCHEMA_VERSION
from flexlearn.errors import ConfigError
from flexlearn.runtime.export import export_program, export_torchscript
from flexlearn.tasks.checkpoints import load_direction_model


def export_checkpoint(ckpt_path: str | Path, out_dir: str | Path, metrics: Optional[dict[str, Any]] = None,
                      cfg: Optional[DictConfig] = None) -> dict[str, str]:
    """Write ``direction_model.pt`` (TorchScript, frozen) and ``direction_model.pt2`` (torch.export)."""
    model, info = load_direction_model(ckpt_path)
    out_dir = Path(out_dir)
    metadata = {
        "model": "DirectionMLP",
        "input": {"name": "delta_b", "units": "T", "frame": "child sensor", "shape": "(..., 3)"},
        "output": {"name": "parent_axis", "units": "unit vector", "frame": "child sensor", "shape": "(..., 3)"},
        "dataset_schema_version": DATASET_SCHEMA_VERSION,
        "flexlearn_version": flexlearn.__version__,
        "torch_version": torch.__version__,
        "checkpoint": str(ckpt_path),
        "hyper_parameters": info.get("hyper_parameters"),
        "training_metrics": {k: v for k, v in (metrics or {}).items()
                             if isinstance(v, float) and math.isfinite(v)},
        "config": OmegaConf.to_container(cfg, resolve=False) if cfg is not None else None,
    }
    ts = export_torchscript(model, out_dir / "direction_model.pt", metadata)
    example = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float32) * 1e-4
    pt2 = export_program(model, example, out_dir / "direction_model.pt2", metadata)
    return {"torchscript": str(ts), "program": str(pt2)}


def export_robot_bundle(ckpt_path: str | Path, out_dir: str | Path, bundle: DictConfig) -> str:
    """Write ``robot_bundle.pt``: fused estimator + height controller + the checkpoint's model + calibration."""
    from flexlearn.runtime.deploy import export_deploy_bundle

    model, info = load_direction_model(ckpt_path)
    opts = OmegaConf.to_container(bundle, resolve=True)
    try:
        path = export_deploy_bundle(model, Path(out_dir) / "robot_bundle.pt", n_segments=int(opts["n_segments"]),
                                    length=float(opts["length"]), calibration=opts.get("calibration"),
                                    estimator=opts.get("estimator") or None,
                                    controller=opts.get("controller") or None,
                                    metadata={"checkpoint": str(ckpt_path), "checkpoint_info": info,
                                              "flexlearn_version": flexlearn.__version__})
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"config 'bundle': {exc}") from exc
    return str(path)
