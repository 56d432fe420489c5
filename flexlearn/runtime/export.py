"""Save and load deployable models: TorchScript (scripted, frozen) and `torch.export` (.pt2) archives.

Both carry a ``metadata.json`` extra file (input units, schema version, training metrics, config,
package version). Loading needs nothing but torch: the Raspberry Pi runner uses `load_torchscript`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from flexlearn.atomic import atomic_path

METADATA_FILE = "metadata.json"


def export_torchscript(module: torch.nn.Module, path: str | Path, metadata: dict[str, Any]) -> Path:
    """Script, freeze and save ``module`` (eval mode) to ``path`` atomically with ``metadata``."""
    scripted = torch.jit.script(module.eval())
    frozen = torch.jit.freeze(scripted)
    extra = {METADATA_FILE: json.dumps(metadata, sort_keys=True, default=float)}
    with atomic_path(path) as tmp:
        torch.jit.save(frozen, str(tmp), _extra_files=extra)
    return Path(path)


def load_torchscript(path: str | Path) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """Load a TorchScript archive and its metadata (CPU)."""
    extra = {METADATA_FILE: ""}
    module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    return module, json.loads(extra[METADATA_FILE] or "{}")


def export_program(module: torch.nn.Module, example: torch.Tensor, path: str | Path,
                   metadata: dict[str, Any]) -> Path:
    """Save a `torch.export` program (.pt2) of ``module`` with a dynamic leading batch dimension.

    ``example`` is an input of shape (B, ...) with B ≥ 2 (a batch of 1 would be specialised).
    """
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(module.eval(), (example,), dynamic_shapes=({0: batch},))
    extra = {METADATA_FILE: json.dumps(metadata, sort_keys=True, default=float)}
    with atomic_path(path) as tmp:
        torch.export.save(program, str(tmp), extra_files=extra)
    return Path(path)


def load_program(path: str | Path) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Load a .pt2 program as a callable module and its metadata."""
    extra = {METADATA_FILE: ""}
    program = torch.export.load(str(path), extra_files=extra)
    return program.module(), json.loads(extra[METADATA_FILE] or "{}")
