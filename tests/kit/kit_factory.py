"""Helpers of the Pi kit tests: a small direction-model checkpoint, the bundle options of a small robot."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
N = 4  # modules of the kit's robot (a small bundle: quick to script and to run)


def write_checkpoint(path: Path, seed: int) -> Path:
    """A checkpoint of an untrained DirectionMLP (hidden 16, 16) with weights from ``seed``."""
    from flexlearn.models.direction_mlp import DirectionMLP

    torch.manual_seed(seed)
    model = DirectionMLP(hidden=(16, 16))
    hp = {"_target_": "flexlearn.models.direction_mlp.DirectionMLP", "hidden": [16, 16]}
    state = {"net." + k: v for k, v in model.state_dict().items()}
    torch.save({"state_dict": state, "hyper_parameters": {"model": hp}}, path)
    return path


def bundle_config(**over):
    """The ``bundle`` block of conf/export.yaml for an N-module robot without calibration."""
    base = {"enabled": True, "n_segments": N, "length": 0.029, "calibration": "identity", "estimator": {}}
    return OmegaConf.create({**base, "controller": {}, "format": "pt", **over})
