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

Every run records itself: ``config.yaml`` in the run directory holds the resolved config and a ``run``
block (name, overrides, seeds, dataset path and SHA-256, package versions), and the same is logged to every
logger (``log_hyperparams``: the wandb run config, the CSV logger's ``hparams.yaml``).

Lightning, torch and the data stack are imported when a job runs, not with this module, so that the
command-line apps answer ``--help`` and report config errors at once.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import logging
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from omegaconf import DictConfig

from flexlearn.atomic import atomic_path, write_json_atomic
from flexlearn.config import (check, did_you_mean, from_dict, instantiate_group, is_rank_zero, run_name, split_target,
                              to_plain_dict)
from flexlearn.errors import ConfigError
from flexlearn.fingerprint import file_sha256

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


TRAIN_KEYS = ("data", "model", "task", "callbacks", "logger", "trainer", "paths", "hydra", "task_name", "seed",
              "train", "test", "ckpt_path", "figures", "export", "optimized_metric", "transfer")
EVAL_KEYS = ("paths", "hydra", "task_name", "ckpt_path", "dataset_path", "metrics_csv", "calibration")
PATHS_KEYS = ("root_dir", "log_dir", "cache_dir", "output_dir", "checkpoint_dir")
SEED_RANGE = (0, 2**32 - 1)
_NOT_TRAINER_KEYS = {"self", "callbacks", "logger"}  # callbacks and loggers come from their own groups


@functools.lru_cache(maxsize=None)
def trainer_keys() -> tuple[str, ...]:
    """Arguments of ``lightning.Trainer`` a ``trainer`` config may set, read from Lightning's source file
    (importing Lightning takes seconds); from its signature if the source cannot be parsed."""
    try:
        spec = importlib.util.find_spec("lightning")
        if spec is None or spec.origin is None:
            raise ImportError("lightning has no source file")
        source = Path(spec.origin).parent / "pytorch" / "trainer" / "trainer.py"
        tree = ast.parse(source.read_text(encoding="utf-8"))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Trainer")
        init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        names = {a.arg for a in [*init.args.args, *init.args.kwonlyargs]}
    except Exception:  # pragma: no cover - a Lightning laid out differently
        import inspect

        import lightning as L

        names = set(inspect.signature(L.Trainer.__init__).parameters)
    return tuple(sorted(names - _NOT_TRAINER_KEYS))


def _unknown(node: Any, known: tuple[str, ...], where: str) -> None:
    extra = sorted(set(node or {}) - set(known))
    if extra:
        raise ConfigError(f"config '{where}': unknown key(s) {extra}{did_you_mean(extra, known)}; "
                          f"known keys: {list(known)}")


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
    _unknown({k for k in cfg.trainer if k != "_target_"}, trainer_keys(), "trainer")
    epochs = cfg.trainer.get("max_epochs")
    check(isinstance(epochs, int) and not isinstance(epochs, bool) and epochs >= 1, "trainer.max_epochs",
          epochs, "must be an integer >= 1")
    seed = cfg.get("seed")
    check(isinstance(seed, int) and not isinstance(seed, bool) and SEED_RANGE[0] <= seed <= SEED_RANGE[1],
          "seed", seed, f"must be an integer in [{SEED_RANGE[0]}, {SEED_RANGE[1]}]")
    for flag in ("train", "test", "figures", "export"):
        check(isinstance(cfg.get(flag, False), bool), flag, cfg.get(flag), "expected true or false")


class _NoTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("💡 Tip")


def route_lightning_logs() -> None:
    """Print each Lightning message once. Imported after Hydra set up logging (the apps import it late), Lightning
    propagates its messages to the root handlers (console, the run's log file) and also prints them through its
    own console handler: that one is removed. Lightning's advertising tips are dropped."""
    import lightning  # noqa: F401  (sets up its loggers)

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
    from flexlearn.tasks.direction import DirectionTask
    from flexlearn.tasks.direction_model import model_spec

    task = to_plain_dict(cfg.task, "task")
    injected = {"max_epochs", "model", "n_modules"}
    check(not injected & set(task), "task", sorted(injected & set(task)),
          "set by trainer.max_epochs, the model group and the dataset, not in the task group")
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
    from flexlearn.data.datamodule import DirectionDataModule
    from flexlearn.data.sources import DataConfig, prepare_dataset

    data = from_dict(DataConfig, cfg.data, "data")
    path = prepare_dataset(data, cfg.paths.cache_dir)
    return DirectionDataModule(path, batch_size=data.batch_size, eval_batch_size=data.eval_batch_size,
                               seed=int(cfg.seed))


def run_record(cfg: DictConfig, dataset_path: Optional[str | Path] = None) -> dict[str, Any]:
    """What makes this run reproducible: the resolved config (without ``hydra``) and a ``run`` block with the
    run name, the command-line overrides, the seeds, the dataset (path and SHA-256) and package versions."""
    from importlib import metadata

    import flexlearn

    config = to_plain_dict(cfg, "<top level>")
    config.pop("hydra", None)
    overrides: list[str] = []
    try:
        from hydra.core.hydra_config import HydraConfig

        overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    except Exception:  # pragma: no cover - Hydra config without overrides
        pass
    versions = {"flexlearn": flexlearn.__version__}
    for pkg in ("torch", "lightning"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:  # pragma: no cover
            pass
    run: dict[str, Any] = {"name": run_name(str(cfg.get("task_name", ""))), "overrides": overrides,
                           "seeds": _seeds(config), "versions": versions}
    if dataset_path is not None:
        run["dataset"] = {"path": str(dataset_path), "sha256": file_sha256(dataset_path),
                          "source": (config.get("data") or {}).get("source")}
    return {**config, "run": run}


def _seeds(config: dict[str, Any]) -> dict[str, Any]:
    """Every seed of a run: ``seed`` (weights, batch order) and the simulation and split seeds of the data."""
    seeds: dict[str, Any] = {"seed": config["seed"]} if "seed" in config else {}
    data = config.get("data")
    if isinstance(data, dict):
        if data.get("source", "sim") == "sim":
            seeds["data.sim.seed"] = (data.get("sim") or {}).get("seed", 0)
        seeds["data.processing.split_seed"] = (data.get("processing") or {}).get("split_seed", 0)
    return seeds


def record_run(record: dict[str, Any], output_dir: Path, loggers: list[Any]) -> None:
    """Write ``config.yaml`` (rank zero) and log the record to every logger (``log_hyperparams``)."""
    import yaml

    if is_rank_zero():
        with atomic_path(output_dir / "config.yaml") as tmp:
            tmp.write_text(yaml.safe_dump(record, sort_keys=False, allow_unicode=True))
    for lg in loggers:
        lg.log_hyperparams(record)


def _float_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    import torch

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
    route_lightning_logs()
    if is_identification(cfg):
        from flexlearn.identify.run import identify

        record_run(run_record(cfg), Path(cfg.paths.output_dir), [])
        return identify(cfg)
    output_dir = Path(cfg.paths.output_dir)
    trainer, task, dm, ckpt_path, loggers = _set_up(cfg, output_dir, extra_callbacks)
    try:
        return _run(cfg, trainer, task, dm, ckpt_path, loggers, output_dir)
    finally:
        _finish_wandb(loggers)


def _run(cfg: DictConfig, trainer: L.Trainer, task: DirectionTask, dm: DirectionDataModule,
         ckpt_path: Optional[str], loggers: list[Any], output_dir: Path) -> dict[str, Any]:
    """Fit, test, figures, export and ``metrics.json`` of a set-up run (see `train`)."""
    from flexlearn.tasks.callbacks import TrainingDivergedError

    try:
        with warnings.catch_warnings():
            if ckpt_path and cfg.get("train", True):  # continuing in the checkpoint's own directory is the point
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
    if cfg.get("test", True) and task.test_predictions is not None:
        results.update(_held_out(cfg, task, dm, output_dir))
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


def _held_out(cfg: DictConfig, task: DirectionTask, dm: DirectionDataModule, output_dir: Path) -> dict[str, Any]:
    """Held-out poses per colatitude band (``test/col_…``, ``test/cap``, ``test/past_cap``) and held-out modules
    (``test_module/…``, `flexlearn.jobs.transfer`)."""
    from flexlearn.jobs.transfer import transfer_metrics
    from flexlearn.metrics import angular_error_deg, band_summary

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


def _set_up(cfg: DictConfig, output_dir: Path, extra_callbacks: Optional[list[L.Callback]]) -> tuple:
    """Seed, check the model config, prepare the data, build the task, callbacks, loggers and trainer, and
    record the run (``config.yaml``, logger hyper-parameters). Returns (trainer, task, dm, ckpt_path, loggers)."""
    import lightning as L
    from hydra.utils import instantiate

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
    return trainer, task, dm, ckpt_path, loggers


def _fit_and_test(cfg: DictConfig, trainer: L.Trainer, task: DirectionTask, dm: DirectionDataModule,
                  ckpt_path: Optional[str]) -> dict[str, Any]:
    """Fit (resuming from ``ckpt_path``), test the best checkpoint; every float metric must be finite."""
    from flexlearn.tasks.callbacks import TrainingDivergedError

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
    from lightning.pytorch.callbacks import ModelCheckpoint

    ckpts = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)]
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
    from flexlearn.tasks.checkpoints import check_resumable

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
    from flexlearn.viz.direction_figures import write_evaluation_figures

    csv = next((Path(lg.log_dir) / "metrics.csv" for lg in loggers if type(lg).__name__ == "CSVLogger"), None)
    paths = write_evaluation_figures(label.numpy(), pred.numpy(), out_dir / "figures",
                                     metrics_csv=csv if csv is not None and csv.exists() else None)
    return {k: str(v) for k, v in paths.items()}
