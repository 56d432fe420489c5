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
from flexlearn.jobs.train import EVAL_KEYS, check_run_config, file_sha256, record_run, run_record


def evaluate_checkpoint(ckpt_path: str | Path, cfg: DictConfig) -> dict[str, Any]:
    """Test metrics and figures of a checkpoint on the test split of its dataset (or ``cfg.dataset_path``).

    Predictions that are no usable direction score 180° and are counted in ``test/invalid_fraction``.
    ``config.yaml`` in the output directory records the config, the dataset's and the checkpoint's SHA-256.
    """
    import torch

    from flexlearn.data.datamodule import DirectionDataModule
    from flexlearn.metrics import angular_error_deg, angular_error_summary, invalid_direction
    from flexlearn.tasks.checkpoints import load_direction_model

    check_run_config(cfg, EVAL_KEYS)
    check(isinstance(ckpt_path, (str, Path)), "ckpt_path", ckpt_path, "expected a file path")
    model, info = load_direction_model(ckpt_path)
    dataset_path = cfg.get("dataset_path") or info.get("dataset_path")
    if not dataset_path or not isinstance(dataset_path, (str, Path)):
        raise ConfigError("config 'dataset_path' = None: the checkpoint records no dataset; pass dataset_path=...")
    dm = DirectionDataModule(dataset_path)
    dm.require("test")
    output_dir = Path(cfg.paths.output_dir)
    record = run_record(cfg, dataset_path)
    record["run"]["checkpoint"] = {"path": str(ckpt_path), "sha256": file_sha256(ckpt_path)}
    record_run(record, output_dir, [])
    test = dm.split("test")
    with torch.no_grad():
        pred = model(test.delta_b)
    results: dict[str, Any] = angular_error_summary(angular_error_deg(pred.double(), test.label.double()), "test/",
                                                    invalid=invalid_direction(pred))
    metrics_csv = cfg.get("metrics_csv") or info.get("metrics_csv")
    if metrics_csv and not cfg.get("metrics_csv") and not Path(metrics_csv).exists():
        metrics_csv = None  # the training run's log was moved or deleted: skip the training-curve figure
    from flexlearn.viz.direction_figures import write_evaluation_figures

    figures = write_evaluation_figures(test.label.numpy(), pred.numpy(), output_dir / "figures",
                                       metrics_csv=Path(metrics_csv) if metrics_csv else None)
    results.update(ckpt_path=str(ckpt_path), dataset_path=str(dataset_path), output_dir=str(output_dir),
                   figures={k: str(v) for k, v in figures.items()})
    write_json_atomic(output_dir / "metrics.json", results)
    return results
