"""Export and load of the scripted flexible-arm controller (`flexlearn.runtime.arm.controller`): TorchScript
archive with ``metadata.json`` (config, state layout, fault bits, units) and a manifest, loadable with plain
torch on the Pi."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import torch

from flexlearn.config import check

if TYPE_CHECKING:
    from flexlearn.runtime.arm.controller import ArmController, ArmControllerConfig

__all__ = ["export_arm_controller", "export_arm_controller_from_config", "load_arm_controller"]


def _check_export_settings(cfg: "ArmControllerConfig") -> None:
    """Ranges `ArmControllerConfig.validate` leaves open, checked before anything is built or written."""
    from flexlearn.config import check_finite

    check_finite(cfg, "arm_controller", "theta0", "thetaf", "t0", "duration", "acc_range", "gyr_range")
    check(math.isfinite(cfg.gravity) and cfg.gravity >= 0, "arm_controller.gravity", cfg.gravity,
          "must be a finite acceleration >= 0 [m/s^2]")


def export_arm_controller(controller: "ArmController", path: str | Path, cfg: "ArmControllerConfig",
                          extra: Optional[dict[str, Any]] = None) -> Path:
    """Script and save ``controller`` atomically with ``metadata.json`` (config, state layout, fault bits,
    units) and the manifest ``<path>.manifest.json`` (kind "arm_controller"), readable by
    :func:`load_arm_controller`. Not frozen: ``step_joints``, ``desired`` and ``reset`` stay callable and
    the state buffers stay mutable."""
    from flexlearn.runtime.arm.controller import (FAULT_BAD_TIME, FAULT_BAD_TORQUE, FAULT_LOST_FRAME,
                                                  FAULT_NONFINITE, FAULT_SATURATED, FAULT_TORQUE_LIMIT,
                                                  state_layout)
    from flexlearn.runtime.export import script, script_artifact, write_artifacts

    _check_export_settings(cfg)
    meta = {"kind": "flexible_arm_controller", "schema": 1, "seed": "000 eq. (45)",
            "config": dataclasses.asdict(cfg), "state_layout": state_layout(controller.n_modes_total),
            "faults": {"lost_frame": FAULT_LOST_FRAME, "nonfinite": FAULT_NONFINITE, "saturated": FAULT_SATURATED,
                       "torque_limit": FAULT_TORQUE_LIMIT, "bad_torque": FAULT_BAD_TORQUE, "bad_time": FAULT_BAD_TIME},
            "inputs": {"frame": "(S, 6) [acc m/s^2 | gyr rad/s], link frames per the estimator", "t": "s"},
            "outputs": {"torque": "(2,) N m", "state": "see state_layout", "fault": "int64 bit mask"}}
    meta.update(extra or {})
    art = script_artifact(script(controller), path, meta, "arm_controller")
    return write_artifacts([art])[0]


def export_arm_controller_from_config(overrides: Optional[Any], path: str | Path) -> Path:
    """Build the controller from ``ArmControllerConfig`` overrides (a mapping or OmegaConf node; unknown
    keys and out-of-range values raise :class:`~flexlearn.errors.ConfigError`) and export it to ``path``
    (``flexlearn-export target=arm_controller``); everything is checked before anything is written."""
    from flexlearn.config import from_dict
    from flexlearn.runtime.arm.controller import ArmController, ArmControllerConfig
    from flexlearn.runtime.export import check_output_path

    cfg = from_dict(ArmControllerConfig, overrides, "arm_controller")
    _check_export_settings(cfg)
    check_output_path(path)
    return export_arm_controller(ArmController.build(cfg), path, cfg)


def load_arm_controller(path: str | Path, *, trust_unverified: bool = False
                        ) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """Load an exported controller and its metadata with plain torch, after verifying its manifest
    (``trust_unverified=True`` skips that, only for files you trust: a model file is code)."""
    from flexlearn.errors import CheckpointError
    from flexlearn.runtime.export import load_torchscript

    module, meta = load_torchscript(path, trust_unverified=trust_unverified)
    if meta.get("kind") != "flexible_arm_controller":
        raise CheckpointError(f"model file '{path}': metadata kind {meta.get('kind')!r}, expected "
                              f"'flexible_arm_controller'")
    return module, meta
