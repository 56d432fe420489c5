"""Export and load of the scripted flexible-arm controller (`flexlearn.runtime.arm.controller`): TorchScript
archive with ``metadata.json`` (config, state layout, fault bits, units) and a manifest, loadable with plain
torch on the Pi."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Optional

import torch

from flexlearn.config import check, check_finite, from_dict
from flexlearn.errors import CheckpointError
from flexlearn.runtime.arm.config import ArmControllerConfig
from flexlearn.runtime.arm.controller import ArmController
from flexlearn.runtime.arm.outputs import FAULT_BITS, state_layout
from flexlearn.runtime.export import check_output_path, load_torchscript, script, script_artifact, write_artifacts

__all__ = ["export_arm_controller", "export_arm_controller_from_config", "load_arm_controller"]


def _check_export_settings(cfg: ArmControllerConfig) -> None:
    """Check the ranges `ArmControllerConfig.validate` leaves open, before anything is built or written.

    Args:
        cfg: the controller settings.

    Raises:
        ConfigError: a non-finite angle, time or sensor range, or a negative or non-finite gravity [m/s²].
    """
    check_finite(cfg, "arm_controller", "theta0", "thetaf", "t0", "duration", "acc_range", "gyr_range")
    check(
        math.isfinite(cfg.gravity) and cfg.gravity >= 0,
        "arm_controller.gravity",
        cfg.gravity,
        "must be a finite acceleration >= 0 [m/s^2]",
    )


def export_arm_controller(
    controller: ArmController, path: str | Path, cfg: ArmControllerConfig, extra: Optional[dict[str, Any]] = None
) -> Path:
    """Script and save ``controller`` atomically with its metadata and manifest.

    The archive holds ``metadata.json`` (config, state layout, fault bits, units); the manifest
    ``<path>.manifest.json`` has kind "arm_controller"; :func:`load_arm_controller` reads both. Not frozen:
    ``step_joints``, ``desired`` and ``reset`` stay callable and the state buffers stay mutable.

    Args:
        controller: the controller to save (usually ``ArmController.build(cfg)``).
        path: the file to write.
        cfg: its settings (recorded in the metadata).
        extra: more metadata entries (override the defaults).

    Returns:
        The path written.

    Raises:
        ConfigError: settings out of range (`_check_export_settings`).
    """
    _check_export_settings(cfg)
    meta = {
        "kind": "flexible_arm_controller",
        "schema": 1,
        "seed": "000 eq. (45)",
        "config": dataclasses.asdict(cfg),
        "state_layout": state_layout(controller.n_modes_total),
        "faults": dict(FAULT_BITS),
        "inputs": {"frame": "(S, 6) [acc m/s^2 | gyr rad/s], link frames per the estimator", "t": "s"},
        "outputs": {"torque": "(2,) N m", "state": "see state_layout", "fault": "int64 bit mask"},
    }
    meta.update(extra or {})
    art = script_artifact(script(controller), path, meta, "arm_controller")
    return write_artifacts([art])[0]


def export_arm_controller_from_config(overrides: Optional[Any], path: str | Path) -> Path:
    """Build the controller from ``ArmControllerConfig`` overrides and export it.

    The hook of ``flexlearn-export target=arm_controller``. Everything is checked before anything is written.

    Args:
        overrides: a mapping or OmegaConf node of `ArmControllerConfig` keys.
        path: the file to write.

    Returns:
        The path written.

    Raises:
        ConfigError: unknown keys or out-of-range values.
    """
    cfg = from_dict(ArmControllerConfig, overrides, "arm_controller")
    _check_export_settings(cfg)
    check_output_path(path)
    return export_arm_controller(ArmController.build(cfg), path, cfg)


def load_arm_controller(
    path: str | Path, *, trust_unverified: bool = False
) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """Load an exported controller and its metadata with plain torch, after verifying its manifest.

    Args:
        path: the controller file.
        trust_unverified: skip the manifest check; only for files you trust (a model file is code).

    Returns:
        (the scripted controller, its metadata).

    Raises:
        CheckpointError: the file is not a flexible-arm controller (or cannot be loaded).
        UntrustedArtifactError: the manifest is missing or does not match.
    """
    module, meta = load_torchscript(path, trust_unverified=trust_unverified)
    if meta.get("kind") != "flexible_arm_controller":
        raise CheckpointError(
            f"model file '{path}': metadata kind {meta.get('kind')!r}, expected 'flexible_arm_controller'"
        )
    return module, meta
