"""Load trained direction models from Lightning checkpoints without executing pickled code.

Checkpoints are untrusted input: any failure to read one (a text file, a truncated archive, a pickle
with code in it) and any bad hyper-parameter in it (unknown key, wrong type, a layer too wide to
allocate, a ``_target_`` outside flexlearn) is a `CheckpointError` naming the file — checked before a model is
built. The model class is the ``_target_`` stored in ``hyper_parameters.model`` (`flexlearn.tasks.direction_model`);
checkpoints written before models were chosen by config have none and hold a `DirectionMLP` (`LEGACY_TARGET`).

Training writes its checkpoints through `atomic_checkpoint_io`: the bytes go to a temporary file beside the
target (never to ``$TMPDIR``, which may be another file system), are flushed to disk and renamed onto it, so a kill
at any instant leaves the previous complete ``last.ckpt`` or the new one, never a truncated file.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Mapping, Optional

import torch

from flexlearn.atomic import write_bytes_atomic
from flexlearn.errors import CheckpointError, ConfigError
from flexlearn.tasks.direction_model import LEGACY_TARGET, build_model, model_spec

CHECKPOINT_INFO_KEY = "flexlearn"


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` with errors that name the file and the problem.

    Args:
        path: the checkpoint file.

    Returns:
        The checkpoint dict (on the CPU), with a ``state_dict`` of named tensors.

    Raises:
        CheckpointError: no such file, not loadable, or not a Lightning checkpoint.
    """
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
    """The checked model spec (``_target_`` and constructor arguments, `model_spec`) under
    ``hyper_parameters.model`` of a read checkpoint; without a ``_target_`` the model is `LEGACY_TARGET`.

    Args:
        ckpt: the checkpoint read (`read_checkpoint`).
        path: its file, named in errors.

    Returns:
        The model spec (``_target_`` and arguments).

    Raises:
        CheckpointError: no ``hyper_parameters.model``, or a bad spec.
    """
    hp = ckpt.get("hyper_parameters") or {}
    if "model" not in hp:
        raise CheckpointError(f"{path}: checkpoint has no 'hyper_parameters.model'; not a direction-task checkpoint")
    try:
        return model_spec(hp["model"], where="hyper_parameters.model", default=LEGACY_TARGET)
    except ConfigError as exc:
        raise CheckpointError(f"{path}: {str(exc).removeprefix('config ')}") from exc


def check_resumable(
    path: str | Path, model_config: Mapping[str, Any], state: Mapping[str, torch.Tensor], training: bool = True
) -> dict[str, Any]:
    """Refuse to resume from (``training``) or test ``path`` unless it is a checkpoint of the configured model.

    ``model_config`` is the run's ``model`` group (validated), ``state`` the new task's state dict;
    the checkpoint's model hyper-parameters and its weight names and shapes must match them. To resume
    training it must also hold the optimiser, scheduler and loop states. Returns the checkpoint read.

    Args:
        path: the checkpoint file.
        model_config: the run's validated ``model`` group.
        state: the new task's state dict.
        training: whether training resumes from it (else it is only tested).

    Returns:
        The checkpoint read.

    Raises:
        CheckpointError: the checkpoint is unreadable, lacks the training states, or holds another model.
    """
    ckpt = read_checkpoint(path)
    missing = [k for k in ("optimizer_states", "lr_schedulers", "loops", "epoch") if k not in ckpt]
    if training and missing:
        raise CheckpointError(
            f"{path}: cannot resume training from it: no {missing} (a weights-only or "
            "exported file); pass a last.ckpt written by flexlearn-train"
        )
    stored = model_hparams(ckpt, path)
    diff = sorted(k for k in set(stored) | set(model_config) if stored.get(k) != model_config.get(k))
    if diff:
        shown = ", ".join(f"model.{k} = {stored.get(k)!r} (config: {model_config.get(k)!r})" for k in diff)
        raise CheckpointError(f"{path}: trained with {shown}; resume with the same model settings")
    wrong = state_mismatch(ckpt["state_dict"], state)
    if wrong:
        raise CheckpointError(f"{path}: weights do not match the configured model ({wrong})")
    return ckpt


def state_mismatch(theirs: Mapping[str, torch.Tensor], ours: Mapping[str, torch.Tensor]) -> str:
    """'' when ``theirs`` has exactly the names and shapes of ``ours``, else the first difference in words.

    Args:
        theirs: the loaded state dict.
        ours: the model's state dict.

    Returns:
        '' or the first difference.
    """
    missing, unexpected = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
    if missing or unexpected:
        return f"missing {missing[0]!r}" if missing else f"unexpected {unexpected[0]!r}"
    shapes = [k for k in sorted(ours) if tuple(theirs[k].shape) != tuple(ours[k].shape)]
    if shapes:
        k = shapes[0]
        return f"{k!r} has shape {tuple(theirs[k].shape)}, expected {tuple(ours[k].shape)}"
    return ""


def load_direction_model(path: str | Path) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Rebuild the direction model stored in a `DirectionTask` checkpoint (the class its
    ``hyper_parameters.model._target_`` names); return (model in eval mode, info).

    ``info`` holds what training recorded under the checkpoint's ``flexlearn`` key (dataset path,
    schema version, config) plus ``hyper_parameters`` and ``model_target`` (the class rebuilt).

    Args:
        path: the checkpoint file.

    Returns:
        The model in eval mode and ``info``.

    Raises:
        CheckpointError: the checkpoint is unreadable, its model cannot be built, or its weights do not match or
            are not finite.
    """
    ckpt = read_checkpoint(path)
    spec = model_hparams(ckpt, path)
    try:
        model = build_model(spec, where="hyper_parameters.model")
    except (ConfigError, ValueError, TypeError) as exc:
        raise CheckpointError(f"{path}: cannot build {spec['_target_']} from 'hyper_parameters.model' ({exc})") from exc
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
    info["model_target"] = spec["_target_"]
    return model.eval(), info


def atomic_checkpoint_io() -> Any:
    """A Lightning ``CheckpointIO`` (``Trainer(plugins=[...])``) that saves every checkpoint atomically and durably.

    ``save_checkpoint`` serialises with ``torch.save`` in memory, then `flexlearn.atomic.write_bytes_atomic`:
    a temporary beside the target in the same folder, ``fsync``, one rename, ``fsync`` of the folder; the
    leftovers of a killed writer are removed by the next save. Loading and removing are Lightning's own.

    Returns:
        An ``AtomicCheckpointIO`` (a ``lightning.pytorch.plugins.io.TorchCheckpointIO``).
    """
    from lightning.pytorch.plugins.io import TorchCheckpointIO  # heavy import off the start-up path (Lightning)

    class AtomicCheckpointIO(TorchCheckpointIO):
        def save_checkpoint(
            self, checkpoint: dict[str, Any], path: str | Path, storage_options: Optional[Any] = None
        ) -> None:
            buf = io.BytesIO()
            torch.save(checkpoint, buf)
            write_bytes_atomic(path, buf.getvalue())

    return AtomicCheckpointIO()
