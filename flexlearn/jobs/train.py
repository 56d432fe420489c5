"""Training job: fit and test the direction model (or run an identification) from a composed Hydra config.

`train(cfg)` is kept apart from the ``@hydra.main`` entry points (flexlearn.apps) so that tests and
sweeps can call it directly. Each run writes ``metrics.json`` in its output directory, with
``status: ok`` — or ``status: diverged`` and the error when the loss, the network output or a metric
became non-finite; such a run raises `TrainingDivergedError` and exports nothing.

The composed config is checked before anything is built (`flexlearn.jobs.runs.check_run_config`): unknown
top-level keys, unknown ``paths`` or ``trainer`` keys, a ``seed`` that is not an integer in [0, 2³²), a
``trainer.max_epochs`` < 1 and bad ``model``/``task`` values are `ConfigError`s that name the key.

Resuming (``ckpt_path=<run>/last.ckpt``) checks that the file is a full training checkpoint of the
configured model, then writes the checkpoints of the continued run into that checkpoint's own directory,
so the best score and best checkpoint recorded before the interruption carry over; ``last.ckpt`` is
written at every epoch (conf/callbacks/default.yaml). Run directories are unique (the ``run_tag``
resolver of `flexlearn.config`).

Every run records itself (`flexlearn.jobs.runs.record_run`): ``config.yaml`` in the run directory holds the
resolved config and a ``run`` block (name, overrides, seeds, dataset path and SHA-256, package versions), and
the same is logged to every logger (``log_hyperparams``: the wandb run config, the CSV logger's ``hparams.yaml``).

Lightning, torch and the data stack are imported when a job runs, not with this module, so that the
command-line apps answer ``--help`` and report config errors at once.
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from hydra.utils import instantiate
from omegaconf import DictConfig

from flexlearn.atomic import write_json_atomic
from flexlearn.config import check, from_dict, instantiate_group, is_rank_zero, split_target, to_plain_dict
from flexlearn.jobs.runs import check_run_config, record_run, run_record
from flexlearn.jobs.transfer import transfer_metrics

if TYPE_CHECKING:
    import lightning as L
    import torch

    from flexlearn.data.datamodule import DirectionDataModule
    from flexlearn.tasks.direction import DirectionTask

log = logging.getLogger(__name__)

# Only epoch-level metrics are logged, so an epoch shorter than log_every_n_steps loses nothing.
warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")
# A deprecation inside Lightning's own code (torch >= 2.10), nothing a user can act on.
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")


class _NoTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("💡 Tip")


def route_lightning_logs() -> None:
    """Print each Lightning message once. Imported after Hydra set up logging (the apps import it late), Lightning
    propagates its messages to the root handlers (console, the run's log file) and also prints them through its
    own console handler: that one is removed. Lightning's advertising tips are dropped."""
    import lightning  # noqa: F401  (sets up its loggers; heavy import off the start-up path)

    if logging.getLogger().handlers:
        top = logging.getLogger("lightning")
        for handler in [h for h in top.handlers if type(h) is logging.StreamHandler]:
            top.removeHandler(handler)
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _NoTips) for f in rank_zero.filters):
        rank_zero.addFilter(_NoTips())


def check_model_config(cfg: DictConfig) -> tuple[type[DirectionTask], dict[str, Any]]:
    """The task class (the ``task`` group's ``_target_``, a `DirectionTask`: identification tasks run through
    `flexlearn.identify.run`) and its checked constructor arguments: the group's other
    keys, ``max_epochs`` (``trainer.max_epochs``) and ``model`` (the ``model`` group, its ``_target_`` and
    arguments checked by `flexlearn.tasks.direction_model.model_spec`). Nothing is built; a bad key or value
    raises `ConfigError` naming it."""
    # heavy imports off the start-up path (torch, Lightning)
    from flexlearn.tasks.direction import DirectionTask
    from flexlearn.tasks.direction_model import model_spec

    task = to_plain_dict(cfg.task, "task")
    injected = {"max_epochs", "model", "n_modules"}
    check(
        not injected & set(task),
        "task",
        sorted(injected & set(task)),
        "set by trainer.max_epochs, the model group and the dataset, not in the task group",
    )
    model = model_spec(cfg.model, "model")
    cls, args = split_target({**task, "max_epochs": cfg.trainer.max_epochs}, "task", DirectionTask)
    return cls, {**args, "model": model}


def build_task(cfg: DictConfig, n_modules: int = 0) -> DirectionTask:
    """The LightningModule the ``task`` group's ``_target_`` names, built with the ``model`` group and the
    dataset's module count (``n_modules``: 0 for a one-module dataset); bad keys or values raise `ConfigError`
    (model sizes are checked before any layer is allocated)."""
    cls, args = check_model_config(cfg)
    return cls(**args, n_modules=n_modules) if n_modules else cls(**args)


def build_datamodule(cfg: DictConfig) -> DirectionDataModule:
    """Prepare (simulate/process/cache) the dataset the ``data`` group names and wrap it."""
    # heavy imports off the start-up path (torch, Lightning)
    from flexlearn.data.datamodule import DirectionDataModule
    from flexlearn.data.sources import DataConfig, prepare_dataset

    data = from_dict(DataConfig, cfg.data, "data")
    path = prepare_dataset(data, cfg.paths.cache_dir)
    return DirectionDataModule(
        path, batch_size=data.batch_size, eval_batch_size=data.eval_batch_size, seed=int(cfg.seed)
    )


def _float_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    import torch  # heavy import off the start-up path

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
    check_run_config(cfg)
    return run_training(cfg, extra_callbacks)


def run_training(cfg: DictConfig, extra_callbacks: Optional[list[L.Callback]] = None) -> dict[str, Any]:
    """`train` on a config `check_run_config` has passed (the apps check it before they print it).

    Args:
        cfg: the composed, checked config.
        extra_callbacks: added to those of the ``callbacks`` group.

    Returns:
        The metrics dict also written to ``metrics.json`` (see `train`).

    Raises:
        TrainingDivergedError: the loss, the network output or a metric became non-finite.
    """
    from flexlearn.identify.run import identify, is_identification  # heavy import off the start-up path

    route_lightning_logs()
    if is_identification(cfg):
        record_run(run_record(cfg), Path(cfg.paths.output_dir), [])
        return identify(cfg)
    output_dir = Path(cfg.paths.output_dir)
    trainer, task, dm, ckpt_path, loggers = _set_up(cfg, output_dir, extra_callbacks)
    try:
        return _run(cfg, trainer, task, dm, ckpt_path, loggers, output_dir)
    finally:
        _finish_wandb(loggers)


def _run(
    cfg: DictConfig,
    trainer: L.Trainer,
    task: DirectionTask,
    dm: DirectionDataModule,
    ckpt_path: Optional[str],
    loggers: list[Any],
    output_dir: Path,
) -> dict[str, Any]:
    """Fit, test, figures, export and ``metrics.json`` of a set-up run (see `train`)."""
    from flexlearn.jobs.export import export_checkpoint  # heavy imports off the start-up path (torch, Lightning)
    from flexlearn.tasks.callbacks import TrainingDivergedError

    try:
        with warnings.catch_warnings():
            if ckpt_path and cfg.get("train", True):  # continuing in the checkpoint's own directory is the point
                warnings.filterwarnings("ignore", message=r".*Checkpoint directory .* exists and is not empty.*")
            results = _fit_and_test(cfg, trainer, task, dm, ckpt_path)
    except TrainingDivergedError as exc:
        if trainer.is_global_zero:
            write_json_atomic(
                output_dir / "metrics.json",
                {
                    "status": "diverged",
                    "error": str(exc),
                    str(cfg.optimized_metric): math.inf,
                    "output_dir": str(output_dir),
                    "epochs": int(trainer.current_epoch),
                },
            )
        raise
    results.update(
        status="ok",
        dataset_path=str(dm.dataset_path),
        output_dir=str(output_dir),
        epochs=int(trainer.current_epoch),
        world_size=int(trainer.world_size),
    )
    if cfg.get("test", True) and task.test_predictions is not None:
        results.update(_held_out(cfg, task, dm, output_dir))
    for key in ("val/invalid_fraction", "test/invalid_fraction"):
        if results.get(key, 0.0) > 0:
            log.warning(
                "%s = %.3g: the model gives no usable direction for these inputs (scored 180°)", key, results[key]
            )
    if cfg.get("figures", False) and task.test_predictions is not None:
        results["figures"] = _write_figures(dm.split("test").label, task.test_predictions, output_dir, loggers)
    if cfg.get("export", False) and results["best_ckpt"]:
        results["exports"] = export_checkpoint(results["best_ckpt"], output_dir / "export", results, cfg)
    if trainer.is_global_zero:  # one writer under multi-process (DDP) training
        write_json_atomic(output_dir / "metrics.json", results)
    return results


def _held_out(cfg: DictConfig, task: DirectionTask, dm: DirectionDataModule, output_dir: Path) -> dict[str, Any]:
    """Held-out poses per colatitude band (``test/col_…``, ``test/cap``, ``test/past_cap``) and held-out modules
    (``test_module/…``, `flexlearn.jobs.transfer`)."""
    from flexlearn.metrics import angular_error_deg, band_summary  # heavy import off the start-up path (torch)

    label = dm.split("test").label.double()
    if task.test_predictions is None:
        return {}
    out = band_summary(angular_error_deg(task.test_predictions.double(), label), label, "test/")
    out.update(transfer_metrics(cfg, task.net, output_dir))
    return out


def _finish_wandb(loggers: list[Any]) -> None:
    """End the wandb runs now (their summary is printed before the app's result, not at interpreter exit)."""
    for lg in loggers:
        if type(lg).__name__ == "WandbLogger" and is_rank_zero() and getattr(lg, "_experiment", None) is not None:
            lg.experiment.finish()


class RunSetUp(NamedTuple):
    """What `_set_up` builds for one training run.

    Attributes:
        trainer: the Lightning trainer (callbacks and loggers attached).
        task: the `DirectionTask` to fit.
        dm: the data module of the prepared dataset.
        ckpt_path: the checked checkpoint to resume from or test (None: none).
        loggers: the Lightning loggers of the ``logger`` group.
    """

    trainer: L.Trainer
    task: DirectionTask
    dm: DirectionDataModule
    ckpt_path: Optional[str]
    loggers: list[Any]


def _set_up(cfg: DictConfig, output_dir: Path, extra_callbacks: Optional[list[L.Callback]]) -> RunSetUp:
    """Seed, check the model config, prepare the data, build the task, callbacks, loggers and trainer, and
    record the run (``config.yaml``, logger hyper-parameters). Returns them as a `RunSetUp`."""
    import lightning as L  # heavy import off the start-up path

    L.seed_everything(int(cfg.seed), workers=True, verbose=False)
    check_model_config(cfg)  # before the dataset is simulated or processed
    dm = build_datamodule(cfg)
    dm.require(*(["train", "val"] if cfg.get("train", True) else []), *(["test"] if cfg.get("test", True) else []))
    task = build_task(cfg, dm.n_modules if cfg.task.get("module_maps") is not None else 0)
    ckpt_path = _checked_ckpt_path(cfg, task)
    resume_dir = Path(ckpt_path).resolve().parent if ckpt_path and cfg.get("train", True) else None
    callbacks = instantiate_group(_checkpoints_into(cfg, resume_dir), "callbacks") + list(extra_callbacks or [])
    loggers = instantiate_group(cfg.get("logger"), "logger")
    record_run(run_record(cfg, dm.dataset_path), output_dir, loggers)
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    return RunSetUp(trainer, task, dm, ckpt_path, loggers)


def _fit_and_test(
    cfg: DictConfig, trainer: L.Trainer, task: DirectionTask, dm: DirectionDataModule, ckpt_path: Optional[str]
) -> dict[str, Any]:
    """Fit (resuming from ``ckpt_path``), test the best checkpoint; every float metric must be finite."""
    from flexlearn.tasks.callbacks import TrainingDivergedError  # heavy import off the start-up path

    if cfg.get("train", True):
        trainer.fit(task, datamodule=dm, ckpt_path=ckpt_path, weights_only=True)
    results: dict[str, Any] = _float_metrics(dict(trainer.callback_metrics))
    best, last = _checkpoint_paths(trainer)
    if cfg.get("test", True):
        trainer.test(task, datamodule=dm, ckpt_path=best or ckpt_path, weights_only=True, verbose=False)
        results.update(_float_metrics({k: v for k, v in trainer.callback_metrics.items() if k.startswith("test/")}))
    bad = sorted(k for k, v in results.items() if not math.isfinite(v))
    if bad:
        raise TrainingDivergedError(
            f"non-finite metrics {bad}; the run is not usable (lower task.lr or check the data)"
        )
    results.update(best_ckpt=best, last_ckpt=last)
    return results


def _checkpoint_paths(trainer: L.Trainer) -> tuple[str, str]:
    """(best, last) checkpoint paths: the monitored callback's best, the every-epoch ``last.ckpt``."""
    from lightning.pytorch.callbacks import ModelCheckpoint  # heavy import off the start-up path

    ckpts = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)]
    best = next((c.best_model_path for c in ckpts if c.monitor and c.best_model_path), "") or next(
        (c.best_model_path for c in ckpts if c.best_model_path), ""
    )
    last = next((c.last_model_path for c in ckpts if c.last_model_path), "") or next(
        (c.best_model_path for c in ckpts if not c.monitor and c.best_model_path), ""
    )
    return best, last


def _checked_ckpt_path(cfg: DictConfig, task: DirectionTask) -> Optional[str]:
    """``cfg.ckpt_path`` after checking that it can be resumed from (training) or tested (test only)."""
    ckpt = cfg.get("ckpt_path")
    if not ckpt:
        return None
    from flexlearn.tasks.checkpoints import check_resumable  # heavy import off the start-up path (torch)

    model = dict(task.hparams["model"])
    check_resumable(ckpt, model, task.state_dict(), training=bool(cfg.get("train", True)))
    return str(ckpt)


def _checkpoints_into(cfg: DictConfig, resume_dir: Optional[Path]) -> Optional[DictConfig]:
    """The ``callbacks`` group, with every ModelCheckpoint's ``dirpath`` set to ``resume_dir`` when resuming."""
    group = cfg.get("callbacks")
    if not group or resume_dir is None:
        return group
    plain = to_plain_dict(group, "callbacks")
    for node in plain.values():
        if isinstance(node, dict) and str(node.get("_target_", "")).endswith("ModelCheckpoint"):
            node["dirpath"] = str(resume_dir)
    log.info("resuming: checkpoints go to %s", resume_dir)
    return DictConfig(plain)


def _write_figures(label: torch.Tensor, pred: torch.Tensor, out_dir: Path, loggers: list[Any]) -> dict[str, str]:
    from flexlearn.viz.direction_figures import write_evaluation_figures  # heavy import off the start-up path

    csv = next((Path(lg.log_dir) / "metrics.csv" for lg in loggers if type(lg).__name__ == "CSVLogger"), None)
    paths = write_evaluation_figures(
        label.numpy(), pred.numpy(), out_dir / "figures", metrics_csv=csv if csv is not None and csv.exists() else None
    )
    return {k: str(v) for k, v in paths.items()}
