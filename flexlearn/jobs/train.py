"""Training job: fit and test the direction model (or run an identification) from a composed Hydra config.

`train(cfg)` is kept apart from the ``@hydra.main`` entry points (flexlearn.apps) so that tests and
sweeps can call it directly. Each run writes ``metrics.json`` in its output directory, with
``status: ok`` — or ``status: diverged`` and the error when the loss, the network output or a metric
became non-finite; such a run raises `TrainingDivergedError` and exports nothing.

The composed config is checked before anything is built (`flexlearn.jobs.runs.check_run_config`): unknown
top-level keys, unknown ``paths`` or ``trainer`` keys, a ``seed`` that is not an integer in [0, 2³²), a
``trainer.max_epochs`` < 1 and bad ``model``/``task`` values are `ConfigError`s that name the key.

Resuming (``ckpt_path=<run>/last.ckpt``; the apps expand ``resume=<run dir>`` into the run's saved overrides,
`flexlearn.jobs.runs.resume_arguments`) checks that the file is a full training checkpoint of the configured
model and that ``trainer.max_epochs`` is not below the epochs it holds, then writes the checkpoints of the
continued run into that checkpoint's own directory, so the best score and best checkpoint recorded before the
interruption carry over; the CSV log is appended and a wandb run resumed. ``last.ckpt`` is written at every
epoch (conf/callbacks/default.yaml), atomically whatever ``$TMPDIR`` is
(`flexlearn.tasks.checkpoints.atomic_checkpoint_io`). Run directories are unique (the ``run_tag`` resolver of
`flexlearn.config`); the checkpoint folder holds ``run.json`` naming its run directory.

SIGINT or SIGTERM while fitting (`graceful_stop`) ends the epoch, writes ``last.ckpt`` and stops; a second
signal stops at once. ``metrics.json`` then holds ``status: interrupted``, the epochs saved and the resume
command (`record_interruption`), and `flexlearn.errors.Interrupted` reaches the app.

Every run records itself (`flexlearn.jobs.runs.record_run`): ``config.yaml`` in the run directory holds the
resolved config and a ``run`` block (name, overrides, seeds, dataset path and SHA-256, package versions), and
the same is logged to every logger (``log_hyperparams``: the wandb run config, the CSV logger's ``hparams.yaml``).

Lightning, torch and the data stack are imported when a job runs, not with this module, so that the
command-line apps answer ``--help`` and report config errors at once.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from hydra.utils import instantiate
from omegaconf import DictConfig

from flexlearn.atomic import atomic_path, write_json_atomic
from flexlearn.config import instantiate_group, is_rank_zero, to_plain_dict
from flexlearn.errors import ConfigError, Interrupted
from flexlearn.jobs.runs import (
    RUN_POINTER,
    check_run_config,
    current_app,
    record_run,
    resume_command,
    run_record,
)
from flexlearn.jobs.training_parts import build_datamodule, build_task, check_model_config
from flexlearn.jobs.transfer import transfer_metrics

if TYPE_CHECKING:
    import lightning as L
    import torch

    from flexlearn.data.datamodule import DirectionDataModule
    from flexlearn.tasks.direction import DirectionTask

log = logging.getLogger(__name__)

# Only epoch-level metrics are logged, so an epoch shorter than log_every_n_steps loses nothing.
warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")
# Run directories are unique; the only run that finds its checkpoint folder (it holds the run.json pointer) or its
# CSV log filled is a resumed one, which continues them: CSV rows are appended, nothing is deleted.
warnings.filterwarnings("ignore", message=r".*Checkpoint directory .* exists and is not empty.*")
warnings.filterwarnings("ignore", message=r".*Experiment logs directory .* exists and is not empty.*")
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


def _float_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    import torch  # heavy import off the start-up path

    return {k: float(v.item() if isinstance(v, torch.Tensor) else v) for k, v in metrics.items()}


def train(cfg: DictConfig, extra_callbacks: Optional[list[L.Callback]] = None) -> dict[str, Any]:
    """Fit, test and (optionally) export; return the metrics dict also written to ``metrics.json``.

    ``extra_callbacks`` are added to those of the ``callbacks`` group (for programmatic use).

    Keys: ``status`` (``ok``), ``train/…``, ``val/…`` (last epoch), ``test/ang_err_{mean,median,rms,p95}_deg``
    and ``test/invalid_fraction`` (best checkpoint), plus ``best_ckpt``, ``best_score`` (the best checkpoint's
    ``optimized_metric``: what a sweep optimises), ``last_ckpt``, ``dataset_path`` and ``output_dir``. A run
    whose loss, network output or metrics become non-finite writes ``status: diverged`` and raises
    `TrainingDivergedError` (nothing is exported). SIGINT/SIGTERM: ``status: interrupted`` (`record_interruption`).

    An identification task (``task.kind: identify``, conf/task/identify_*.yaml) is run by
    :func:`flexlearn.identify.run.identify` instead (``id/…`` metrics).

    Args:
        cfg: the composed config, checked here (`check_run_config`).
        extra_callbacks: added to those of the ``callbacks`` group (None: none).
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
        Interrupted: SIGINT or SIGTERM (`graceful_stop`); ``metrics.json`` then says ``status: interrupted`` with
            the epochs ``last.ckpt`` holds and the command that resumes the run.
    """
    from flexlearn.identify.run import identify, is_identification  # heavy import off the start-up path

    route_lightning_logs()
    output_dir = Path(cfg.paths.output_dir)
    stop = StopRequest()
    try:
        if is_identification(cfg):
            record_run(run_record(cfg), output_dir, [])
            return identify(cfg)
        trainer, task, dm, ckpt_path, loggers = _set_up(
            cfg, output_dir, [*(extra_callbacks or []), graceful_stop(stop)]
        )
        try:
            return _run(cfg, trainer, task, dm, ckpt_path, loggers, output_dir)
        finally:
            _finish_wandb(loggers)
    except Interrupted as exc:
        raise record_interruption(cfg, output_dir, exc, stop) from None


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
        results["figures"] = _write_figures(dm.split("test").label, task.test_predictions, output_dir, loggers, cfg)
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


class StopRequest:
    """Where a graceful stop of a training run stands (`graceful_stop`).

    Attributes:
        signum: the signal received while fitting (None: none yet).
        saved_epochs: epochs completed in the newest checkpoint written (what a resume starts after).
        trainer: the trainer being fitted (its checkpoint callbacks name ``last.ckpt``).
        fitting: True between the start and the end of ``trainer.fit``.
    """

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.saved_epochs = 0
        self.trainer: Optional[L.Trainer] = None
        self.fitting = False

    def handle(self, signum: int, _frame: Any) -> None:
        """Signal handler: the first SIGINT/SIGTERM while fitting asks for a stop at the end of this epoch (after
        ``last.ckpt`` is written); another one, or one outside fitting, raises `Interrupted` at once.

        Args:
            signum: the signal's number.
            _frame: the interrupted stack frame (not read).
        """
        if self.signum is None and self.fitting:
            self.signum = signum
            log.warning(
                "%s: stopping at the end of this epoch, once last.ckpt is written (again: stop now)",
                signal.Signals(signum).name,
            )
            return
        raise Interrupted(signum)


def graceful_stop(request: StopRequest) -> L.Callback:
    """A callback that installs `StopRequest.handle` for SIGINT and SIGTERM while the trainer fits (over the
    handlers Lightning sets, which it restores when fitting ends), stops training at the end of the epoch in which
    a signal came (``trainer.should_stop``, after the checkpoints of that epoch) and then raises `Interrupted`.

    Args:
        request: the stop state the callback and the handler share.
    """
    import lightning as L  # heavy import off the start-up path

    class GracefulStop(L.Callback):
        def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            request.trainer, request.fitting = trainer, True
            request.saved_epochs = int(trainer.current_epoch)  # a resumed run starts with its checkpoint's epochs
            if threading.current_thread() is threading.main_thread():
                for s in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(s, request.handle)

        def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            if request.signum is not None:
                trainer.should_stop = True

        def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, ckpt: dict[str, Any]) -> None:
            request.saved_epochs = int(ckpt.get("epoch", -1)) + 1

        def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            request.fitting = False
            if request.signum is not None:
                raise Interrupted(request.signum)

        def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
            request.fitting = False

    return GracefulStop()


def record_interruption(cfg: DictConfig, output_dir: Path, exc: Interrupted, stop: StopRequest) -> Interrupted:
    """Write ``metrics.json`` with ``status: interrupted`` (the signal, the epochs ``last.ckpt`` holds, the resume
    command) and return the `Interrupted` the app reports: where the run stopped and how to resume it.

    Args:
        cfg: the run's config.
        output_dir: the run directory.
        exc: the interruption caught.
        stop: the graceful-stop state of the run (its trainer, the epochs saved).

    Returns:
        An `Interrupted` of the same signal with ``detail`` and ``resume`` filled in.
    """
    last = _checkpoint_paths(stop.trainer)[1] if stop.trainer is not None else ""
    resumed = str(cfg.get("ckpt_path") or "")
    last = last or (resumed if Path(resumed).name == "last.ckpt" else "")
    last = last if last and Path(last).is_file() and stop.saved_epochs > 0 else ""
    resume = resume_command(current_app(str(cfg.get("task_name", ""))), output_dir) if last else ""
    epochs = cfg.trainer.get("max_epochs") if "trainer" in cfg else None
    record = {
        "status": "interrupted",
        "signal": exc.signal_name,
        "epochs": stop.saved_epochs,
        "max_epochs": epochs,
        "last_ckpt": last,
        "output_dir": str(output_dir),
        "resume": resume,
    }
    if is_rank_zero() and output_dir.is_dir():
        write_json_atomic(output_dir / "metrics.json", record)
    if last:
        detail = f"run {output_dir} stopped after epoch {stop.saved_epochs}/{epochs} (saved in {last})"
        return Interrupted(exc.signum, detail, f"resume with: {resume}")
    return Interrupted(exc.signum, f"run {output_dir} stopped before its first checkpoint; nothing to resume")


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

    from flexlearn.tasks.checkpoints import atomic_checkpoint_io  # heavy import off the start-up path

    L.seed_everything(int(cfg.seed), workers=True, verbose=False)
    check_model_config(cfg)  # before the dataset is simulated or processed
    dm = build_datamodule(cfg)
    dm.require(*(["train", "val"] if cfg.get("train", True) else []), *(["test"] if cfg.get("test", True) else []))
    task = build_task(cfg, dm.n_modules if cfg.task.get("module_maps") is not None else 0)
    ckpt_path, done = _checked_ckpt_path(cfg, task)
    resume_dir = Path(ckpt_path).resolve().parent if ckpt_path and cfg.get("train", True) else None
    callbacks = instantiate_group(_checkpoints_into(cfg, resume_dir), "callbacks") + list(extra_callbacks or [])
    loggers = instantiate_group(_resumed_loggers(cfg, output_dir, resume_dir), "logger")
    if resume_dir is not None:
        _keep_csv_rows(loggers, done)
    record_run(run_record(cfg, dm.dataset_path), output_dir, loggers)
    if cfg.get("train", True) and is_rank_zero():
        _point_to_run(Path(resume_dir or cfg.paths.checkpoint_dir), output_dir)
    plugins = [] if cfg.trainer.get("plugins") else [atomic_checkpoint_io()]
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, plugins=plugins)
    return RunSetUp(trainer, task, dm, ckpt_path, loggers)


def _point_to_run(ckpt_dir: Path, output_dir: Path) -> None:
    """Write `RUN_POINTER` in the checkpoint folder: ``ckpt_path=<it>/last.ckpt`` then resumes this run."""
    write_json_atomic(ckpt_dir / RUN_POINTER, {"output_dir": str(output_dir.resolve())})


def _keep_csv_rows(loggers: list[Any], done: int) -> None:
    """Let the CSV loggers of a resumed run append to their ``metrics.csv``.

    Rows of epochs >= ``done`` (logged after the checkpoint resumed from was written: work a kill lost, which
    the resumed run does again) are dropped, so every epoch appears once. Lightning's CSV writer deletes an
    existing file when it starts, so the file is moved aside while the writer starts and put back (a file left
    aside by a kill at that instant is put back by the next resume)."""
    import csv as csv_module  # standard library, needed only on resume

    for lg in loggers:
        if type(lg).__name__ != "CSVLogger":
            continue
        csv = Path(lg.log_dir) / "metrics.csv"
        aside = csv.with_name(".metrics.csv.resume")
        if aside.is_file() and not csv.exists():
            aside.replace(csv)
        if not csv.is_file():
            continue
        with csv.open(newline="", encoding="utf-8") as f:
            reader = csv_module.DictReader(f)
            header = list(reader.fieldnames or [])
            rows = [r for r in reader if not (r.get("epoch") or "").isdigit() or int(r["epoch"]) < done]
        with atomic_path(csv) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
            writer_out = csv_module.DictWriter(f, fieldnames=header)
            writer_out.writeheader()
            writer_out.writerows(rows)
        csv.replace(aside)
        try:
            writer = lg.experiment  # starts the writer now, while the file is aside
        finally:
            aside.replace(csv)
        # the writer rewrites the file under the header it knows when new columns come: it must know the old ones
        writer.metrics_keys = sorted({k for k in header if k} | set(writer.metrics_keys))


def _resumed_loggers(cfg: DictConfig, output_dir: Path, resume_dir: Optional[Path]) -> Optional[DictConfig]:
    """The ``logger`` group; when a run continues in its own directory, the wandb logger resumes the run's wandb
    run (its id, read from ``<run>/wandb/*run-<time>-<id>``) and the CSV logger appends (it does by itself)."""
    group = cfg.get("logger")
    if not group or resume_dir is None or not (output_dir / "wandb").is_dir():
        return group
    runs = sorted((output_dir / "wandb").glob("*run-*-*"), key=lambda p: p.stat().st_mtime)
    plain = to_plain_dict(group, "logger")
    for node in plain.values():
        if isinstance(node, dict) and str(node.get("_target_", "")).endswith("WandbLogger") and runs:
            node.setdefault("id", runs[-1].name.rsplit("-", 1)[-1])
            node.setdefault("resume", "allow")
    return DictConfig(plain)


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
    score = _best_score(trainer, str(cfg.optimized_metric))
    if score is not None:
        results["best_score"] = score
    return results


def _best_score(trainer: L.Trainer, metric: str) -> Optional[float]:
    """The best value of ``metric`` a ModelCheckpoint monitoring it recorded (its best checkpoint's score; the
    value a sweep optimises), None when no callback monitors it."""
    from lightning.pytorch.callbacks import ModelCheckpoint  # heavy import off the start-up path

    for c in trainer.checkpoint_callbacks:
        if isinstance(c, ModelCheckpoint) and c.monitor == metric and c.best_model_score is not None:
            return float(c.best_model_score)
    return None


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


def _checked_ckpt_path(cfg: DictConfig, task: DirectionTask) -> tuple[Optional[str], int]:
    """(``cfg.ckpt_path`` after checking that it can be resumed from (training) or tested (test only), the epochs
    it holds); (None, 0) without one."""
    ckpt = cfg.get("ckpt_path")
    if not ckpt:
        return None, 0
    from flexlearn.tasks.checkpoints import check_resumable  # heavy import off the start-up path (torch)

    model = dict(task.hparams["model"])
    stored = check_resumable(ckpt, model, task.state_dict(), training=bool(cfg.get("train", True)))
    done = int(stored.get("epoch", -1)) + 1
    epochs = int(cfg.trainer.max_epochs)
    if cfg.get("train", True) and done > epochs:
        raise ConfigError(
            f"config 'trainer.max_epochs' = {epochs}: the checkpoint {ckpt} has already trained {done} epochs; "
            f"continue with trainer.max_epochs={max(done + 1, 2 * done)} (or more), or test it with train=false"
        )
    return str(ckpt), done


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


def _write_figures(
    label: torch.Tensor, pred: torch.Tensor, out_dir: Path, loggers: list[Any], cfg: DictConfig
) -> dict[str, str]:
    """The evaluation figures of the test poses; the curves mark the epoch chosen by the run's own monitor."""
    from flexlearn.viz.direction_figures import write_evaluation_figures  # heavy import off the start-up path

    csv = next((Path(lg.log_dir) / "metrics.csv" for lg in loggers if type(lg).__name__ == "CSVLogger"), None)
    checkpoint = (cfg.get("callbacks") or {}).get("model_checkpoint") or {}
    paths = write_evaluation_figures(
        label.numpy(),
        pred.numpy(),
        out_dir / "figures",
        metrics_csv=csv if csv is not None and csv.exists() else None,
        monitor=str(cfg.get("optimized_metric") or checkpoint.get("monitor") or "val/ang_err_median_deg"),
        mode=str(checkpoint.get("mode") or "min"),
    )
    return {k: str(v) for k, v in paths.items()}
