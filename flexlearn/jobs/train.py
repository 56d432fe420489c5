"""Training job: fit and test the direction model (or run an identification) from a composed Hydra config.

`train(cfg)` is kept apart from the ``@hydra.main`` entry points (flexlearn.apps) so that tests and
sweeps can call it directly. Each run writes ``metrics.json`` in its output directory, with
``status: ok`` — or ``status: diverged`` and the error when the loss, the network output or a metric
became non-finite; such a run raises `TrainingDivergedError` and exports nothing.

The composed config is checked before anything is built: unknown top-level keys, unknown ``paths`` or
``trainer`` keys, a ``seed`` that is not an integer in [0, 2³²), a ``trainer.max_epochs`` < 1 and bad
``model``/``task`` values are `ConfigError`s that name the key.

Resuming (``ckpt_path=<run>/last.ckpt``) checks that the file is a full training checkpoint of the
configured model, then writes the checkpoints of the continued run into that checkpoint's own directory,
so the best score and best checkpoint recorded before the interruption carry over; ``last.ckpt`` is
written at every epoch (conf/callbacks/default.yaml). Run directories are unique (the ``run_tag``
resolver of `flexlearn.config`).
"""
from __future__ import annotations

import inspect
import logging
import math
import warnings
from pathlib import Path
from typing import Any, Optional

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from flexlearn.atomic import write_json_atomic
from flexlearn.config import check, from_dict, instantiate_group
from flexlearn.data.datamodule import DirectionDataModule
from flexlearn.data.sources import DataConfig, prepare_dataset
from flexlearn.errors import ConfigError
from flexlearn.models.direction_mlp import validate_hparams
from flexlearn.tasks.callbacks import TrainingDivergedError
from flexlearn.tasks.checkpoints import check_resumable
from flexlearn.tasks.direction import DirectionTask, validate_task_hparams

log = logging.getLogger(__name__)

# Only epoch-level metrics are logged, so an epoch shorter than log_every_n_steps loses nothing.
warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")


TRAIN_KEYS = ("data", "model", "task", "callbacks", "logger", "trainer", "paths", "hydra", "task_name", "seed",
              "train", "test", "ckpt_path", "figures", "export", "optimized_metric")
EVAL_KEYS = ("paths", "hydra", "task_name", "ckpt_path", "dataset_path", "metrics_csv")
PATHS_KEYS = ("root_dir", "log_dir", "cache_dir", "output_dir", "checkpoint_dir")
# Trainer arguments a config may set (callbacks and loggers come from their own groups).
TRAINER_KEYS = tuple(sorted(set(inspect.signature(L.Trainer.__init__).parameters) - {"self", "callbacks", "logger"}))
SEED_RANGE = (0, 2**32 - 1)


def _unknown(node: Any, known: tuple[str, ...], where: str) -> None:
    extra = sorted(set(node or {}) - set(known))
    if extra:
        raise ConfigError(f"config '{where}': unknown key(s) {extra}; known keys: {list(known)}")


def check_run_config(cfg: DictConfig, known: tuple[str, ...] = TRAIN_KEYS) -> None:
    """Refuse unknown keys (top level, ``paths``, ``trainer``) and bad ``seed``/flags/``trainer.max_epochs``.

    ``known`` lists the accepted top-level keys: `TRAIN_KEYS` (train, pipeline) or `EVAL_KEYS` (eval).
    """
    _unknown(cfg, known, "<top level>")
    _unknown(cfg.get("paths"), PATHS_KEYS, "paths")
    ckpt = cfg.get("ckpt_path")
    check(ckpt is None or isinstance(ckpt, str), "ckpt_path", ckpt, "expected a file path")
    if "trainer" not in known:
        return
    _unknown({k for k in cfg.trainer if k != "_target_"}, TRAINER_KEYS, "trainer")
    epochs = cfg.trainer.get("max_epochs")
    check(isinstance(epochs, int) and not isinstance(epochs, bool) and epochs >= 1, "trainer.max_epochs",
          epochs, "must be an integer >= 1")
    seed = cfg.get("seed")
    check(isinstance(seed, int) and not isinstance(seed, bool) and SEED_RANGE[0] <= seed <= SEED_RANGE[1],
          "seed", seed, f"must be an integer in [{SEED_RANGE[0]}, {SEED_RANGE[1]}]")
    for flag in ("train", "test", "figures", "export"):
        check(isinstance(cfg.get(flag, False), bool), flag, cfg.get(flag), "expected true or false")


def build_task(cfg: DictConfig) -> DirectionTask:
    """The LightningModule from the ``model`` and ``task`` groups; bad keys or values raise `ConfigError`.

    Model sizes are validated before any layer is allocated (`validate_hparams`).
    """
    model = OmegaConf.to_container(cfg.model, resolve=True)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    try:
        model = validate_hparams(model, "model")
    except ValueError as exc:
        raise ConfigError(f"config {exc}") from exc
    validate_task_hparams(task, cfg.trainer.max_epochs)
    return DirectionTask(model=model, max_epochs=cfg.trainer.max_epochs, **task)


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

    Keys: ``status`` (``ok``), ``train/…``, ``val/…`` (last epoch), ``test/ang_err_{mean,median,rms,p95}_deg``
    and ``test/invalid_fraction`` (best checkpoint), plus ``best_ckpt``, ``last_ckpt``, ``dataset_path`` and
    ``output_dir``. A run whose loss, network output or metrics become non-finite writes ``status: diverged``
    and raises `TrainingDivergedError` (nothing is exported).

    An identification task (``task.kind: identify``, conf/task/identify_*.yaml) is run by
    :func:`flexlearn.identify.run.identify` instead (``id/…`` metrics).
    """
    from flexlearn.identify.run import is_identification

    check_run_config(cfg)
    if is_identification(cfg):
        from flexlearn.identify.run import identify

        return identify(cfg)
    output_dir = Path(cfg.paths.output_dir)
    L.seed_everything(int(cfg.seed), workers=True, verbose=False)
    dm = build_datamodule(cfg)
    dm.require(*(["train", "val"] if cfg.get("train", True) else []), *(["test"] if cfg.get("test", True) else []))
    task = build_task(cfg)
    ckpt_path = _checked_ckpt_path(cfg, task)
    resume_dir = Path(ckpt_path).resolve().parent if ckpt_path and cfg.get("train", True) else None
    callbacks = instantiate_group(_checkpoints_into(cfg, resume_dir), "callbacks") + list(extra_callbacks or [])
    loggers = instantiate_group(cfg.get("logger"), "logger")
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    try:
        with warnings.catch_warnings():
            if resume_dir is not None:  # continuing in the checkpoint's own directory is the point
                warnings.filterwarnings("ignore", message=r".*Checkpoint directory .* exists and is not empty.*")
            results = _fit_and_test(cfg, trainer, task, dm, ckpt_path)
    except TrainingDivergedError as exc:
        if trainer.is_global_zero:
            write_json_atomic(output_dir / "metrics.json", {
                "status": "diverged", "error": str(exc), str(cfg.optimized_metric): math.inf,
                "output_dir": str(output_dir), "epochs": int(trainer.current_epoch)})
        raise
    results.update(status="ok", dataset_path=str(dm.dataset_path), output_dir=str(output_dir),
                   epochs=int(trainer.current_epoch), world_size=int(trainer.world_size))
    for key in ("val/invalid_fraction", "test/invalid_fraction"):
        if results.get(key, 0.0) > 0:
            log.warning("%s = %.3g: the model gives no usable direction for these inputs (scored 180°)",
                        key, results[key])
    if cfg.get("figures", False) and task.test_predictions is not None:
        results["figures"] = _write_figures(dm.split("test").label, task.test_predictions, output_dir, loggers)
    if cfg.get("export", False) and results["best_ckpt"]:
        from flexlearn.jobs.export import export_checkpoint

        results["exports"] = export_checkpoint(results["best_ckpt"], output_dir / "export", results, cfg)
    if trainer.is_global_zero:  # one writer under multi-process (DDP) training
        write_json_atomic(output_dir / "metrics.json", results)
    return results


def _fit_and_test(cfg: DictConfig, trainer: L.Trainer, task: DirectionTask, dm: DirectionDataModule,
                  ckpt_path: Optional[str]) -> dict[str, Any]:
    """Fit (resuming from ``ckpt_path``), test the best checkpoint; every float metric must be finite."""
    if cfg.get("train", True):
        trainer.fit(task, datamodule=dm, ckpt_path=ckpt_path, weights_only=True)
    results: dict[str, Any] = _float_metrics(dict(trainer.callback_metrics))
    best, last = _checkpoint_paths(trainer)
    if cfg.get("test", True):
        trainer.test(task, datamodule=dm, ckpt_path=best or ckpt_path, weights_only=True, verbose=False)
        results.update(_float_metrics({k: v for k, v in trainer.callback_metrics.items() if k.startswith("test/")}))
    bad = sorted(k for k, v in results.items() if not math.isfinite(v))
    if bad:
        raise TrainingDivergedError(f"non-finite metrics {bad}; the run is not usable (lower task.lr or check "
                                    "the data)")
    results.update(best_ckpt=best, last_ckpt=last)
    return results


def _checkpoint_paths(trainer: L.Trainer) -> tuple[str, str]:
    """(best, last) checkpoint paths: the monitored callback's best, the every-epoch ``last.ckpt``."""
    ckpts = list(trainer.checkpoint_callbacks)
    best = next((c.best_model_path for c in ckpts if c.monitor and c.best_model_path), "") or \
        next((c.best_model_path for c in ckpts if c.best_model_path), "")
    last = next((c.last_model_path for c in ckpts if c.last_model_path), "") or \
        next((c.best_model_path for c in ckpts if not c.monitor and c.best_model_path), "")
    return best, last


def _checked_ckpt_path(cfg: DictConfig, task: DirectionTask) -> Optional[str]:
    """``cfg.ckpt_path`` after checking that it can be resumed from (training) or tested (test only)."""
    ckpt = cfg.get("ckpt_path")
    if not ckpt:
        return None
    model = dict(task.hparams["model"])
    check_resumable(ckpt, model, task.state_dict(), training=bool(cfg.get("train", True)))
    return str(ckpt)


def _checkpoints_into(cfg: DictConfig, resume_dir: Optional[Path]) -> Optional[DictConfig]:
    """The ``callbacks`` group, with every ModelCheckpoint's ``dirpath`` set to ``resume_dir`` when resuming."""
    group = cfg.get("callbacks")
    if not group or resume_dir is None:
        return group
    plain = OmegaConf.to_container(group, resolve=True)
    for node in plain.values():
        if isinstance(node, dict) and str(node.get("_target_", "")).endswith("ModelCheckpoint"):
            node["dirpath"] = str(resume_dir)
    log.info("resuming: checkpoints go to %s", resume_dir)
    return OmegaConf.create(plain)


def _write_figures(label: torch.Tensor, pred: torch.Tensor, out_dir: Path, loggers: list[Any]) -> dict[str, str]:
    from flexlearn.viz.direction_figures import write_evaluation_figures

    csv = next((Path(lg.log_dir) / "metrics.csv" for lg in loggers if type(lg).__name__ == "CSVLogger"), None)
    paths = write_evaluation_figures(label.numpy(), pred.numpy(), out_dir / "figures",
                                     metrics_csv=csv if csv is not None and csv.exists() else None)
    return {k: str(v) for k, v in paths.items()}
