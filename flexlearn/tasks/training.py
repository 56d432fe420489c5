"""Training, evaluation and export of the direction model from a composed Hydra config.

`train(cfg)` is kept apart from the ``@hydra.main`` entry points (flexlearn.apps) so that tests and
sweeps can call it directly. Each run writes ``metrics.json`` in its output directory.
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any, Optional

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from flexlearn.atomic import write_json_atomic
from flexlearn.config import from_dict
from flexlearn.data.datamodule import DirectionDataModule
from flexlearn.data.sources import DataConfig, prepare_dataset
from flexlearn.errors import ConfigError
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.tasks.checkpoints import load_direction_model
from flexlearn.tasks.direction import DirectionTask
from flexlearn.tasks.metrics import angular_error_deg, angular_error_summary

log = logging.getLogger(__name__)

# Only epoch-level metrics are logged, so an epoch shorter than log_every_n_steps loses nothing.
warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")


def _instantiate_group(group: Optional[DictConfig], name: str) -> list[Any]:
    """Instantiate every entry of a callbacks/logger group that has a ``_target_``."""
    if not group:
        return []
    out = []
    for key, node in group.items():
        if isinstance(node, DictConfig) and "_target_" in node:
            try:
                out.append(instantiate(node))
            except Exception as exc:  # hydra wraps constructor errors; name the entry
                raise ConfigError(f"config '{name}.{key}': cannot be instantiated ({exc})") from exc
    return out


def build_task(cfg: DictConfig) -> DirectionTask:
    """The LightningModule from the ``model`` and ``task`` groups; bad keys raise `ConfigError`."""
    model = OmegaConf.to_container(cfg.model, resolve=True)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    try:
        DirectionMLP(**model)  # validates model keys and values before Lightning sees them
        return DirectionTask(model=model, max_epochs=int(cfg.trainer.max_epochs), **task)
    except TypeError as exc:
        raise ConfigError(f"config 'model'/'task': {exc}") from exc
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def build_datamodule(cfg: DictConfig) -> DirectionDataModule:
    """Prepare (simulate/process/cache) the dataset the ``data`` group names and wrap it."""
    data = from_dict(DataConfig, cfg.data, "data")
    path = prepare_dataset(data, cfg.paths.cache_dir)
    return DirectionDataModule(path, batch_size=data.batch_size, eval_batch_size=data.eval_batch_size,
                               seed=int(cfg.seed))


def _float_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v.item() if isinstance(v, torch.Tensor) else v) for k, v in metrics.items()}


def train(cfg: DictConfig, extra_callbacks: Optional[list[L.Callback]] = None) -> dict[str, Any]:
    """Fit, test and (optionally) export; return the metrics dict also written to ``metrics.json``.

    ``extra_callbacks`` are added to those of the ``callbacks`` group (for programmatic use).

    Keys: ``train/…``, ``val/…`` (last epoch), ``test/ang_err_{mean,median,rms,p95}_deg`` (best
    checkpoint), plus ``best_ckpt``, ``last_ckpt``, ``dataset_path`` and ``output_dir``.

    An identification task (``task.kind: identify``, conf/task/identify_*.yaml) is run by
    :func:`flexlearn.identify.run.identify` instead (``id/…`` metrics).
    """
    from flexlearn.identify.run import is_identification

    if is_identification(cfg):
        from flexlearn.identify.run import identify

        return identify(cfg)
    output_dir = Path(cfg.paths.output_dir)
    L.seed_everything(int(cfg.seed), workers=True, verbose=False)
    dm = build_datamodule(cfg)
    task = build_task(cfg)
    callbacks = _instantiate_group(cfg.get("callbacks"), "callbacks") + list(extra_callbacks or [])
    loggers = _instantiate_group(cfg.get("logger"), "logger")
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)

    if cfg.get("train", True):
        trainer.fit(task, datamodule=dm, ckpt_path=cfg.get("ckpt_path"), weights_only=True)
    results: dict[str, Any] = _float_metrics(dict(trainer.callback_metrics))
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    last = trainer.checkpoint_callback.last_model_path if trainer.checkpoint_callback else ""
    if cfg.get("test", True):
        test_ckpt = best or cfg.get("ckpt_path")
        trainer.test(task, datamodule=dm, ckpt_path=test_ckpt, weights_only=True, verbose=False)
        results.update(_float_metrics({k: v for k, v in trainer.callback_metrics.items() if k.startswith("test/")}))
    results.update(best_ckpt=best, last_ckpt=last, dataset_path=str(dm.dataset_path), output_dir=str(output_dir),
                   epochs=int(trainer.current_epoch), world_size=int(trainer.world_size))
    if cfg.get("figures", False) and task.test_predictions is not None:
        results["figures"] = _write_figures(dm.split("test").label, task.test_predictions, output_dir, loggers)
    if cfg.get("export", False) and best:
        from flexlearn.jobs.export import export_checkpoint

        results["exports"] = export_checkpoint(best, output_dir / "export", results, cfg)
    if trainer.is_global_zero:  # one writer under multi-process (DDP) training
        write_json_atomic(output_dir / "metrics.json", results)
    return results


def _write_figures(label: torch.Tensor, pred: torch.Tensor, out_dir: Path, loggers: list[Any]) -> dict[str, str]:
    from flexlearn.viz.direction_figures import write_evaluation_figures

    csv = next((Path(lg.log_dir) / "metrics.csv" for lg in loggers if type(lg).__name__ == "CSVLogger"), None)
    paths = write_evaluation_figures(label.numpy(), pred.numpy(), out_dir / "figures",
                                     metrics_csv=csv if csv is not None and csv.exists() else None)
    return {k: str(v) for k, v in paths.items()}


def evaluate_checkpoint(ckpt_path: str | Path, cfg: DictConfig) -> dict[str, Any]:
    """Test metrics and figures of a checkpoint on the test split of its dataset (or ``cfg.dataset_path``)."""
    model, info = load_direction_model(ckpt_path)
    dataset_path = cfg.get("dataset_path") or info.get("dataset_path")
    if not dataset_path:
        raise ConfigError("config 'dataset_path' = None: the checkpoint records no dataset; pass dataset_path=...")
    dm = DirectionDataModule(dataset_path)
    test = dm.split("test")
    with torch.no_grad():
        pred = model(test.delta_b)
    results: dict[str, Any] = angular_error_summary(angular_error_deg(pred.double(), test.label.double()), "test/")
    output_dir = Path(cfg.paths.output_dir)
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
