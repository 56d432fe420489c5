"""Load trained direction models from Lightning checkpoints without executing pickled code.

Checkpoints are untrusted input: any failure to read one (a text file, a truncated archive, a pickle
with code in it) and any bad hyper-parameter in it (unknown key, wrong type, a layer too wide to
allocate) is a `CheckpointError` naming the file — checked before a model is built.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch

from flexlearn.errors import CheckpointError
from flexlearn.models.direction_mlp import DirectionMLP, validate_hparams

CHECKPOINT_INFO_KEY = "flexlearn"


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` with errors that name the file and the problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # the unpickler of a hostile file can raise anything
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: not a loadable checkpoint (corrupt, truncated or unsafe: {first})") from exc
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise CheckpointError(f"{path}: not a Lightning checkpoint (no 'state_dict')")
    bad = [k for k, v in ckpt["state_dict"].items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f"{path}: 'state_dict' entry {bad[0]!r} is not a named tensor")
    if not isinstance(ckpt.get("hyper_parameters", {}), dict):
        raise CheckpointError(f"{path}: 'hyper_parameters' is not a mapping")
    return ckpt


def model_hparams(ckpt: Mapping[str, Any], path: str | Path) -> dict[str, Any]:
    """The validated `DirectionMLP` arguments under ``hyper_parameters.model`` of a read checkpoint."""
    hp = ckpt.get("hyper_parameters") or {}
    if "model" not in hp:
        raise CheckpointError(f"{path}: checkpoint has no 'hyper_parameters.model'; not a direction-task checkpoint")
    try:
        return validate_hparams(hp["model"], where="hyper_parameters.model")
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc


def check_resumable(path: str | Path, model_config: Mapping[str, Any], state: Mapping[str, torch.Tensor],
                    training: bool = True) -> None:
    """Refuse to resume from (``training``) or test ``path`` unless it is a checkpoint of the configured model.

    ``model_config`` is the run's ``model`` group (validated), ``state`` the new task's state dict;
    the checkpoint's model hyper-parameters and its weight names and shapes must match them. To resume
    training it must also hold the optimiser, scheduler and loop states.
    """
    ckpt = read_checkpoint(path)
    missing = [k for k in ("optimizer_states", "lr_schedulers", "loops", "epoch") if k not in ckpt]
    if training and missing:
        raise CheckpointError(f"{path}: cannot resume training from it: no {missing} (a weights-only or "
                              "exported file); pass a last.ckpt written by flexlearn-train")
    stored = model_hparams(ckpt, path)
    diff = sorted(k for k in stored if stored[k] != model_config.get(k))
    if diff:
        shown = ", ".join(f"model.{k} = {stored[k]!r} (config: {model_config.get(k)!r})" for k in diff)
        raise CheckpointError(f"{path}: trained with {shown}; resume with the same model settings")
    wrong = state_mismatch(ckpt["state_dict"], state)
    if wrong:
        raise CheckpointError(f"{path}: weights do not match the configured model ({wrong})")


def state_mismatch(theirs: Mapping[str, torch.Tensor], ours: Mapping[str, torch.Tensor]) -> str:
    """'' when ``theirs`` has exactly the names and shapes of ``ours``, else the first difference in words."""
    missing, unexpected = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
    if missing or unexpected:
        return f"missing {missing[0]!r}" if missing else f"unexpected {unexpected[0]!r}"
    shapes = [k for k in sorted(ours) if tuple(theirs[k].shape) != tuple(ours[k].shape)]
    if shapes:
        k = shapes[0]
        return f"{k!r} has shape {tuple(theirs[k].shape)}, expected {tuple(ours[k].shape)}"
    return ""


def load_direction_model(path: str | Path) -> tuple[DirectionMLP, dict[str, Any]]:
    """Rebuild the `DirectionMLP` stored in a `DirectionTask` checkpoint; return (model in eval mode, info).

    ``info`` holds what training recorded under the checkpoint's ``flexlearn`` key (dataset path,
    schema version, config) plus ``hyper_parameters``.
    """
    ckpt = read_checkpoint(path)
    model = DirectionMLP(**model_hparams(ckpt, path))
    state = {k.removeprefix("net."): v for k, v in ckpt["state_dict"].items() if k.startswith("net.")}
    wrong = state_mismatch(state, model.state_dict())
    if wrong:
        raise CheckpointError(f"{path}: weights do not match the model in its hyper_parameters ({wrong})")
    model.load_state_dict(state, strict=True)
    bad = [k for k, v in model.state_dict().items() if not bool(torch.isfinite(v).all())]
    if bad:
        raise CheckpointError(f"{path}: weight {bad[0]!r} is not finite; the checkpoint holds a diverged model")
    raw_info = ckpt.get(CHECKPOINT_INFO_KEY)
    info = dict(raw_info) if isinstance(raw_info, dict) else {}
    info["hyper_parameters"] = ckpt.get("hyper_parameters") or {}
    return model.eval(), info
