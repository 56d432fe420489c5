"""Export jobs: a trained checkpoint to deployable files (TorchScript, torch.export) and the robot bundle.

Every option (bundle settings, calibration, controller settings, output folder) is checked and every file is
built in memory before anything is written; the set (each file with its manifest ``<file>.manifest.json``)
then lands all together or not at all (`flexlearn.runtime.export.write_artifacts`), so a failed export leaves
the previous files as they were.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any, Optional

import torch
from omegaconf import DictConfig, OmegaConf

import flexlearn
from flexlearn.config import check, to_plain_dict
from flexlearn.data.dataset import DATASET_SCHEMA_VERSION
from flexlearn.errors import ConfigError, FlexlearnError
from flexlearn.jobs.runs import checkpoint_run_metrics
from flexlearn.runtime.arm.export import export_arm_controller_from_config
from flexlearn.runtime.deploy import BundleOptions, bundle_artifact, checked_bundle
from flexlearn.runtime.export import (
    Artifact,
    check_output_path,
    program_artifact,
    torchscript_artifact,
    write_artifacts,
)
from flexlearn.runtime.kit import write_kit
from flexlearn.tasks.checkpoints import load_direction_model

BUNDLE_FORMATS = {"pt": (".pt",), "pte": (".pte",), "both": (".pt", ".pte")}
SELFCHECK_SECONDS = 3.0  # simulated stream of the kit's self-check [s]


def _outputs(out_dir: str | Path, names: list[str], inputs: list[str | Path]) -> Path:
    """``out_dir`` as a Path, after checking each planned output in it (`check_output_path`: an existing file
    in place of the folder, a directory or symlink in place of a file, an input) before anything is read."""
    out = Path(out_dir)
    for name in names:
        check_output_path(out / name, inputs)
    return out


def _direction_metadata(
    ckpt_path: str | Path, info: dict[str, Any], metrics: Optional[dict[str, Any]], cfg: Optional[DictConfig]
) -> dict[str, Any]:
    return {
        "model": str(info["model_target"]).rsplit(".", 1)[-1],  # the class name, e.g. DirectionMLP
        "model_target": info["model_target"],  # the class the checkpoint's hyper_parameters.model._target_ names
        "input": {"name": "delta_b", "units": "T", "frame": "child sensor", "shape": "(..., 3)"},
        "output": {"name": "parent_axis", "units": "unit vector", "frame": "child sensor", "shape": "(..., 3)"},
        "dataset_schema_version": DATASET_SCHEMA_VERSION,
        "flexlearn_version": flexlearn.__version__,
        "torch_version": torch.__version__,
        "checkpoint": str(ckpt_path),
        "hyper_parameters": info.get("hyper_parameters"),
        "training_metrics": {k: v for k, v in (metrics or {}).items() if isinstance(v, float) and math.isfinite(v)},
        "config": _exported_config(cfg),
    }


PRINTING_KEYS = ("json", "progress")
"""Top-level keys that set how a command prints, not what it writes: left out of the exported config, so the
same export with another way of printing gives the same bytes."""


def _exported_config(cfg: Optional[DictConfig]) -> Optional[dict[str, Any]]:
    """The run's config as stored in a model file's metadata (unresolved), without `PRINTING_KEYS`."""
    if cfg is None:
        return None
    out = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(out, dict), "a composed config is a mapping"
    return {str(k): v for k, v in out.items() if k not in PRINTING_KEYS}


def _calibration_input(bundle: Optional[DictConfig]) -> list[str]:
    """The calibration file of the ``bundle`` options, if one is named (an input outputs must not replace)."""
    cal = bundle.get("calibration") if bundle is not None else None
    return [str(cal)] if isinstance(cal, (str, Path)) and str(cal) != "identity" else []


def _bundle_files(bundle: DictConfig | dict[str, Any]) -> tuple[str, ...]:
    """The bundle files ``bundle.format`` asks for (``pt``, ``pte`` or ``both``) as suffixes."""
    fmt = bundle.get("format", "pt")
    check(fmt in BUNDLE_FORMATS, "bundle.format", fmt, "one of 'pt' (TorchScript), 'pte' (ExecuTorch), 'both'")
    return BUNDLE_FORMATS[fmt]


def _bundle_artifacts(
    model: torch.nn.Module,
    info: dict[str, Any],
    ckpt_path: str | Path,
    out_dir: Path,
    bundle: DictConfig | dict[str, Any],
) -> list[Artifact]:
    """Validate the ``bundle`` options and build ``robot_bundle.pt`` and/or ``.pte`` in memory (`ConfigError`s)."""
    opts = to_plain_dict(bundle, "bundle")
    suffixes = _bundle_files(opts)
    if opts.get("calibration") is None:
        raise ConfigError(
            "config 'bundle.calibration' is not set: give the receivers' calibration file "
            "(flexlearn-calibrate) or bundle.calibration=identity to deploy without one"
        )
    try:
        built, extra, rest = checked_bundle(
            model,
            BundleOptions(
                n_segments=int(opts["n_segments"]),
                length=float(opts["length"]),
                calibration=opts.get("calibration"),
                estimator=opts.get("estimator") or None,
                controller=opts.get("controller") or None,
            ),
        )
        meta = {
            **extra,
            "checkpoint": str(ckpt_path),
            "checkpoint_info": info,
            "flexlearn_version": flexlearn.__version__,
        }
        ts = bundle_artifact(built, out_dir / "robot_bundle.pt", meta, rest)
    except FlexlearnError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"config 'bundle': {exc}") from exc
    arts = [ts] if ".pt" in suffixes else []
    if ".pte" in suffixes:
        from flexlearn.runtime.executorch_export import pte_bundle_artifact  # torch.export machinery: only for .pte

        arts.append(pte_bundle_artifact(built, ts))
    return arts


def _bundle_names(bundle: Optional[DictConfig]) -> list[str]:
    return [f"robot_bundle{s}" for s in _bundle_files(bundle)] if bundle is not None else []


def export_checkpoint(
    ckpt_path: str | Path,
    out_dir: str | Path,
    metrics: Optional[dict[str, Any]] = None,
    cfg: Optional[DictConfig] = None,
    bundle: Optional[DictConfig] = None,
) -> dict[str, str]:
    """Write ``direction_model.pt`` (TorchScript, frozen), ``direction_model.pt2`` (torch.export) and, with
    ``bundle`` options, ``robot_bundle.pt`` and/or ``.pte`` (``bundle.format``), each with its manifest, as one
    all-or-nothing set.

    Args:
        ckpt_path: the checkpoint of a `DirectionTask` run.
        out_dir: the folder the files are written into.
        metrics: the run's metrics, whose finite floats go into the files' metadata (None: none).
        cfg: the run's config, stored in the metadata (None: none).
        bundle: the ``bundle`` options (None: no robot bundle).

    Returns:
        {what: path} (``torchscript``, ``program``, and ``bundle`` / ``bundle_pte`` with a bundle).

    Raises:
        ConfigError: a bad bundle option.
        OutputPathError: an output is refused or cannot be written.
    """
    inputs = [ckpt_path, *_calibration_input(bundle)]
    out = _outputs(out_dir, ["direction_model.pt", "direction_model.pt2"] + _bundle_names(bundle), inputs)
    model, info = load_direction_model(ckpt_path)
    bundles = _bundle_artifacts(model, info, ckpt_path, out, bundle) if bundle is not None else []
    arts = {("bundle" if a.path.suffix == ".pt" else "bundle_pte"): a for a in bundles}
    metadata = _direction_metadata(ckpt_path, info, metrics, cfg)
    example = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float32) * 1e-4
    arts = {
        "torchscript": torchscript_artifact(model, out / "direction_model.pt", metadata),
        "program": program_artifact(model, example, out / "direction_model.pt2", metadata),
        **arts,
    }
    write_artifacts(list(arts.values()), inputs)
    return {k: str(a.path) for k, a in arts.items()}


def export_robot_bundle(ckpt_path: str | Path, out_dir: str | Path, bundle: DictConfig) -> str:
    """Write ``robot_bundle.pt`` (+ manifest): fused estimator + height controller + the checkpoint's model +
    calibration.

    Args:
        ckpt_path: the checkpoint of a `DirectionTask` run.
        out_dir: the folder the bundle is written into.
        bundle: the ``bundle`` options.

    Returns:
        The path of the first bundle file written.

    Raises:
        ConfigError: a bad bundle option.
        OutputPathError: an output is refused or cannot be written.
    """
    inputs = [ckpt_path, *_calibration_input(bundle)]
    out = _outputs(out_dir, _bundle_names(bundle), inputs)
    model, info = load_direction_model(ckpt_path)
    return str(write_artifacts(_bundle_artifacts(model, info, ckpt_path, out, bundle), inputs)[0])


def selfcheck_frames(n_segments: int, length: float, seconds: float = SELFCHECK_SECONDS) -> bytes:
    """The kit's recorded stream: a simulated ``3d_curl`` of ``n_segments`` modules (attitude sweeps, magnetometer
    rounds with coil pulses) with a height target and spool positions added, as JSON lines.

    Args:
        n_segments: the robot's module count.
        length: the pivot spacing L [m].
        seconds: the simulated duration [s].

    Returns:
        The frame stream (UTF-8 JSON lines).
    """
    from flexlearn.replay.frames import write_frames_jsonl  # simulation stack: only for a kit
    from flexlearn.sim.robot import simulate_robot
    from flexlearn.sim.shape_scenarios import scenario

    rec = simulate_robot(
        scenario("3d_curl", n=n_segments, period=6.0, seed=0),
        seconds,
        {"seed": 0, "robot": {"n_segments": n_segments, "length": length}},
    )
    with tempfile.TemporaryDirectory() as tmp:
        write_frames_jsonl(rec, Path(tmp) / "frames.jsonl")
        lines = (Path(tmp) / "frames.jsonl").read_text().splitlines()
    out = lines[:1] + ['{"type": "target", "t": 0.0, "h": 0.004}']
    for line in lines[1:]:
        out.append(line)
        if line.startswith('{"type": "att"'):
            t = float(line.split('"t": ', 1)[1].split(",", 1)[0])
            out.append(f'{{"type": "spool", "t": {t!r}, "pos": {round(0.002 * t, 9)!r}}}')
    return ("\n".join(out) + "\n").encode()


def export_kit(ckpt_path: str | Path, kit_dir: str | Path, bundle: DictConfig) -> dict[str, str]:
    """Write the Raspberry Pi kit (`flexlearn.runtime.kit`): the bundle(s) of ``bundle``, the runner and its runtime
    package, requirements, README and the self-check; returns {what: path}.

    Args:
        ckpt_path: the checkpoint of a `DirectionTask` run.
        kit_dir: the kit folder (written as a whole).
        bundle: the ``bundle`` options (``n_segments``, ``length``, ``calibration``, ``format``, ...).

    Returns:
        ``kit``: the kit folder, and each bundle file's path in it by its suffix (``pt``, ``pte``).

    Raises:
        ConfigError: a bad bundle option.
        OutputPathError: ``kit_dir`` is refused or cannot be written.
    """
    inputs = [ckpt_path, *_calibration_input(bundle)]
    model, info = load_direction_model(ckpt_path)
    arts = _bundle_artifacts(model, info, ckpt_path, Path(kit_dir), bundle)
    frames = selfcheck_frames(int(bundle.n_segments), float(bundle.length))
    cal = _calibration_input(bundle)
    path = write_kit(kit_dir, arts, frames, int(bundle.n_segments), Path(cal[0]) if cal else None, inputs)
    return {"kit": str(path), **{a.path.suffix.lstrip("."): str(path / a.path.name) for a in arts}}


def export_from_config(cfg: DictConfig) -> dict[str, str]:
    """The `flexlearn-export` job: ``target=checkpoint`` (direction model files, and the robot bundle with
    ``bundle.enabled=true``) or ``target=arm_controller``; returns {what: path}.

    Args:
        cfg: the composed config (flexlearn/conf/export.yaml with the command's overrides).

    Returns:
        {what: path} of the files written (`export_checkpoint`, `export_kit`, or ``arm_controller``).

    Raises:
        ConfigError: a bad target, an option the target does not read, or a missing ``ckpt_path``.
    """
    target = cfg.get("target", "checkpoint")
    check(target in ("checkpoint", "arm_controller"), "export.target", target, "one of 'checkpoint', 'arm_controller'")
    # options that the chosen export would not read are refused, not ignored: the user meant something else
    check(
        target == "checkpoint" or OmegaConf.is_missing(cfg, "ckpt_path"),
        "ckpt_path",
        cfg.get("ckpt_path"),
        "is not read with export.target=arm_controller (the controller is built from its config, no checkpoint)",
    )
    check(
        not cfg.get("kit") or target == "checkpoint",
        "kit",
        cfg.get("kit"),
        "is written for export.target=checkpoint (the robot bundle); the arm controller has no kit",
    )
    check(
        bool(cfg.bundle.enabled) or bool(cfg.get("kit")) or cfg.bundle.get("calibration") is None,
        "bundle.calibration",
        cfg.bundle.get("calibration"),
        "is only read for the robot bundle: add bundle.enabled=true",
    )
    if target == "arm_controller":
        out = _outputs(cfg.out_dir, [cfg.arm_controller_file], [])
        return {
            "arm_controller": str(export_arm_controller_from_config(cfg.arm_controller, out / cfg.arm_controller_file))
        }
    check(not OmegaConf.is_missing(cfg, "ckpt_path"), "ckpt_path", "???", "required: the checkpoint to export")
    if cfg.get("kit"):
        return export_kit(cfg.ckpt_path, cfg.kit, cfg.bundle)
    bundle = cfg.bundle if cfg.bundle.enabled else None
    metrics = checkpoint_run_metrics(cfg.ckpt_path)  # the training run's figures travel with its model
    return export_checkpoint(cfg.ckpt_path, cfg.out_dir, metrics=metrics, cfg=cfg, bundle=bundle)
