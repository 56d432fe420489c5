"""Evaluation job: test metrics and figures of a trained checkpoint (``flexlearn-eval``).

Torch and the data stack are imported when the job runs, not with this module (fast ``--help``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from flexlearn.atomic import write_json_atomic
from flexlearn.config import check
from flexlearn.errors import ConfigError
from flexlearn.fingerprint import file_sha256
from flexlearn.jobs.calibrate import CalibrationFit, evaluate_module
from flexlearn.jobs.runs import EVAL_KEYS, check_run_config, record_run, run_record


def evaluate_checkpoint(ckpt_path: str | Path, cfg: DictConfig) -> dict[str, Any]:
    """Test metrics and figures of a checkpoint on the test split of its dataset (or ``cfg.dataset_path``).

    With ``calibration.n_poses`` = K > 0 the model is first calibrated to the dataset's module on K poses of its
    train split within the trained cap (`flexlearn.jobs.calibrate.evaluate_module`; the test split stays unseen),
    as a user does for a module the model was not trained on. Metrics include every bend band
    (``test/col_<lo>-<hi>/...``, ``test/cap/...``, ``test/past_cap/...``), by the commanded bend where the
    dataset records it (``bands_by``; each band then also gives the label's median angle), the cap being the
    sweep's own. A relative dataset path in the checkpoint is found from any working directory
    (`resolve_dataset_path`). Predictions that are no usable
    direction score 180° and are counted in ``test/invalid_fraction``. ``config.yaml`` in the output directory
    records the config, the dataset's and the checkpoint's SHA-256.

    Args:
        ckpt_path: the checkpoint of a `DirectionTask` run.
        cfg: the composed ``eval`` config (checked here, `flexlearn.jobs.runs.check_run_config`).

    Returns:
        The metrics also written to ``metrics.json`` in ``cfg.paths.output_dir``, with the figures' paths.

    Raises:
        ConfigError: a bad key or value of ``cfg``, or no dataset to score on.
    """
    check_run_config(cfg, EVAL_KEYS)
    return run_evaluation(ckpt_path, cfg)


def resolve_dataset_path(recorded: Any, ckpt_path: str | Path) -> Path:
    """The dataset a checkpoint records, found from any working directory.

    An absolute path is taken as is. A relative one (recorded relative to the directory training ran in) is
    tried from the working directory, then from the checkpoint's directory and each directory above it.

    Args:
        recorded: the dataset path the checkpoint records (None or not a string: none recorded).
        ckpt_path: the checkpoint's path.

    Returns:
        The first existing candidate.

    Raises:
        ConfigError: no dataset recorded, or none found; the message names ``dataset_path=`` and where it looked.
    """
    if not recorded or not isinstance(recorded, str):
        raise ConfigError(
            f"config 'dataset_path' = None: the checkpoint {ckpt_path} records no dataset; pass dataset_path=<file>"
        )
    path = Path(recorded).expanduser()
    if path.is_absolute():
        candidates = [path]
    else:
        ckpt_dir = Path(ckpt_path).expanduser().resolve().parent
        candidates = [Path.cwd() / path, *(d / path for d in (ckpt_dir, *ckpt_dir.parents))]
    for c in candidates:
        if c.exists():
            return c
    raise ConfigError(
        f"config 'dataset_path' = None: the dataset the checkpoint records, '{recorded}', is not found "
        f"(from {Path.cwd()} nor above {Path(ckpt_path).parent}); pass dataset_path=<file>"
    )


def commanded_bands(ds: Any, label: Any, pred: Any, prefix: str = "test/") -> dict[str, Any]:
    """Band metrics of the test split by the commanded bend (the dataset's ``target``), with the label's angle
    beside each band, and the cap the sweep was planned to (``meta.json`` rig.max_colatitude, else 29.5°).
    Empty when the dataset records no commanded target (the bands then stay by the label's colatitude).

    Args:
        ds: the evaluated `DirectionDataset` (its test split is scored).
        label: the test labels (N, 3), a tensor.
        pred: the predicted directions (N, 3), a tensor.
        prefix: prefix of the metric names.

    Returns:
        The band metrics with ``bands_by`` and ``cap_deg`` [deg], or only ``bands_by`` without a commanded target.
    """
    import math  # with torch: heavy imports off the start-up path

    import torch

    from flexlearn.data.sweep_meta import sweep_cap
    from flexlearn.metrics import CAP_DEG, angular_error_deg, band_summary, commanded_bend_deg

    test = ds.subset("test")
    if test.target is None:
        return {"bands_by": "label colatitude"}
    src = ds.meta.get("source") if isinstance(ds.meta, dict) else None
    cap = sweep_cap(src)
    cap_deg = math.degrees(cap) if cap is not None else CAP_DEG
    err = angular_error_deg(pred.double(), label.double())
    bend = commanded_bend_deg(torch.as_tensor(test.target))
    out: dict[str, Any] = band_summary(err, label, prefix, bend_deg=bend, cap_deg=cap_deg)
    out.update(bands_by="commanded bend", cap_deg=cap_deg)
    return out


def run_evaluation(ckpt_path: str | Path, cfg: DictConfig) -> dict[str, Any]:
    """`evaluate_checkpoint` on a config `check_run_config` has passed (the app checks it before printing it).

    Args:
        ckpt_path: the checkpoint of a `DirectionTask` run.
        cfg: the composed ``eval`` config, already checked.

    Returns:
        The metrics also written to ``metrics.json`` in ``cfg.paths.output_dir``, with the figures' paths.

    Raises:
        ConfigError: a bad ``ckpt_path`` or ``calibration.n_poses``, or no dataset to score on.
    """
    # heavy imports off the start-up path (torch, Lightning, matplotlib)
    from flexlearn.data.datamodule import DirectionDataModule
    from flexlearn.tasks.checkpoints import load_direction_model
    from flexlearn.viz.direction_figures import write_evaluation_figures

    check(isinstance(ckpt_path, (str, Path)), "ckpt_path", ckpt_path, "expected a file path")
    cal = cfg.get("calibration") or {}
    n_poses = cal.get("n_poses", 0)
    check(
        isinstance(n_poses, int) and not isinstance(n_poses, bool) and 0 <= n_poses <= 50,
        "calibration.n_poses",
        n_poses,
        "must be an integer in [0, 50] (0: no calibration)",
    )
    model, info = load_direction_model(ckpt_path)
    dataset_path = cfg.get("dataset_path") or resolve_dataset_path(info.get("dataset_path"), ckpt_path)
    dm = DirectionDataModule(dataset_path)
    dm.require("test")
    output_dir = Path(cfg.paths.output_dir)
    record = run_record(cfg, dataset_path)
    record["run"]["checkpoint"] = {"path": str(ckpt_path), "sha256": file_sha256(ckpt_path)}
    record_run(record, output_dir, [])
    fit = CalibrationFit(
        n_poses=n_poses,
        kind=str(cal.get("kind", "linear")),
        max_colatitude=float(cal.get("max_colatitude", 0.5149)),
        seed=int(cal.get("seed", 0)),
    )
    results, label, pred, entry = evaluate_module(model, dm.dataset, fit)
    results.update(commanded_bands(dm.dataset, label, pred))
    if entry is not None:
        results["calibration"] = {k: entry[k] for k in ("A", "W", "fit")}
    metrics_csv = cfg.get("metrics_csv") or info.get("metrics_csv")
    if metrics_csv and not cfg.get("metrics_csv") and not Path(metrics_csv).exists():
        metrics_csv = None  # the training run's log was moved or deleted: skip the training-curve figure
    figures = write_evaluation_figures(
        label.numpy(),
        pred.float().numpy(),
        output_dir / "figures",
        metrics_csv=Path(metrics_csv) if metrics_csv else None,
    )
    results.update(
        ckpt_path=str(ckpt_path),
        dataset_path=str(dataset_path),
        output_dir=str(output_dir),
        figures={k: str(v) for k, v in figures.items()},
    )
    write_json_atomic(output_dir / "metrics.json", results)
    return results
