"""Load trained direction models from Lightning checkpoints without executing pickled code."""
from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from flexlearn.errors import CheckpointError
from flexlearn.models.direction_mlp import DirectionMLP

CHECKPOINT_INFO_KEY = "flexlearn"


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` with errors that name the file and the problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: not a loadable checkpoint (corrupt, truncated or unsafe: {first})") from exc
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise CheckpointError(f"{path}: not a Lightning checkpoint (no 'state_dict')")
    return ckpt


def load_direction_model(path: str | Path) -> tuple[DirectionMLP, dict[str, Any]]:
    """Rebuild the `DirectionMLP` stored in a `DirectionTask` checkpoint; return (model in eval mode, info).

    ``info`` holds what training recorded under the checkpoint's ``flexlearn`` key (dataset path,
    schema version, config) plus ``hyper_parameters``.
    """
    ckpt = read_checkpoint(path)
    hp = ckpt.get("hyper_parameters") or {}
    if "model" not in hp:
        raise CheckpointError(f"{path}: checkpoint has no 'hyper_parameters.model'; not a direction-task checkpoint")
    model = DirectionMLP(**hp["model"])
    state = {k.removeprefix("net."): v for k, v in ckpt["state_dict"].items() if k.startswith("net.")}
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{path}: weights do not match the model in its hyper_parameters ({exc})") from exc
    info = dict(ckpt.get(CHECKPOINT_INFO_KEY) or {})
    info["hyper_parameters"] = hp
    return model.eval(), info
