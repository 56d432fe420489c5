"""Run an identification from a composed ``train`` config whose ``task`` group is an ``identify_*`` task.

``cfg.task``: ``_target_`` (`IdentificationTask` or a subclass), ``problem_type`` (modal | cosserat | lse),
``problem`` (the problem's config dataclass fields) and the task's constructor arguments ``method``, ``lam0``,
``lr``, ``tol``, ``max_rel_std`` (unknown ones are `ConfigError`s naming them). The trainer group
drives the iterations (``trainer.max_epochs`` = maximum optimiser iterations); callbacks and loggers
come from their groups; without an ``EpochLines`` among them one is added, so logs and pipes get one line per
iteration (cost, LM damping, horizon). Writes ``metrics.json`` (the ``id/…`` report plus ``output_dir``) and
``identification.json`` (the same with per-iteration costs and the configuration); with
``figures=true`` also ``fit.png`` (:func:`flexlearn.identify.report.write_fit_figure`); with ``mcap=true``, a problem
whose recording is simulated and that can show it (``write_recording_mcap``, the flexible link's) writes
``recording.mcap`` for a robotics viewer.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any, Callable

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from omegaconf import DictConfig, OmegaConf

from flexlearn.atomic import write_json_atomic
from flexlearn.config import from_dict, instantiate_group, split_target, target_class, to_plain_dict
from flexlearn.errors import ConfigError
from flexlearn.identify.fit import IdentificationProblem
from flexlearn.identify.report import write_fit_figure
from flexlearn.identify.task import IdentificationTask
from flexlearn.tasks.callbacks import EpochLines

log = logging.getLogger(__name__)

__all__ = ["is_identification", "build_problem", "build_identification", "identify", "PROBLEMS"]


def _modal(d: dict) -> IdentificationProblem:
    from flexlearn.identify.modal import ModalIdConfig, ModalLinkProblem  # lazy: only the chosen problem's physics

    return ModalLinkProblem(from_dict(ModalIdConfig, d, "task.problem"))


def _cosserat(d: dict) -> IdentificationProblem:
    from flexlearn.identify.cosserat import CosseratIdConfig, CosseratTipProblem  # lazy: numba rod kernels

    return CosseratTipProblem(from_dict(CosseratIdConfig, d, "task.problem"))


def _lse(d: dict) -> IdentificationProblem:
    from flexlearn.identify.lse import CprStiffnessProblem, LseIdConfig  # lazy: numba kernels, ~0.6 s to load

    return CprStiffnessProblem(from_dict(LseIdConfig, d, "task.problem"))


PROBLEMS: dict[str, Callable[[dict[str, Any]], IdentificationProblem]] = {
    "modal": _modal,
    "cosserat": _cosserat,
    "lse": _lse,
}
ID_EPOCH_KEYS = ("id/cost", "id/lambda", "id/horizon")  # what an iteration's line shows (those logged)


def is_identification(cfg: DictConfig) -> bool:
    """True when the ``task`` group's ``_target_`` is an `IdentificationTask` (conf/task/identify_*.yaml).

    Args:
        cfg: the run's composed config.

    Returns:
        Whether the run is an identification.
    """
    task = cfg.get("task")
    target = task.get("_target_") if isinstance(task, DictConfig) else None
    if not isinstance(target, str):
        return False
    return issubclass(target_class(target, "task", L.LightningModule), IdentificationTask)


def build_problem(problem_type: Any, problem: Any) -> IdentificationProblem:
    """The identification problem ``PROBLEMS[problem_type]`` built from the ``task.problem`` mapping.

    Args:
        problem_type: a key of `PROBLEMS` ('modal', 'cosserat' or 'lse').
        problem: the ``task.problem`` mapping; None: empty (every default).

    Returns:
        The built problem.

    Raises:
        ConfigError: an unknown ``problem_type``, or a bad key or value in ``problem``.
    """
    if problem_type not in PROBLEMS:
        raise ConfigError(f"config 'task.problem_type' = {problem_type!r}: must be one of {sorted(PROBLEMS)}")
    return PROBLEMS[problem_type](to_plain_dict(problem or {}, "task.problem"))


def build_identification(task_cfg: Any) -> tuple[IdentificationTask, IdentificationProblem]:
    """The ``task`` group's `IdentificationTask` (its ``_target_``) and the problem it fits; every key is checked
    (unknown ones and bad values are `ConfigError`s naming ``task.<key>``) before the recording is made.

    Args:
        task_cfg: the ``task`` config group (``_target_``, ``problem_type``, ``problem`` and the task's options).

    Returns:
        (the task, its problem).

    Raises:
        ConfigError: an unknown key or a bad value.
    """
    cls, args = split_target(task_cfg, "task", IdentificationTask)
    problem = build_problem(args.pop("problem_type", None), args.pop("problem", None))
    return cls(problem, **args), problem


def identify(cfg: DictConfig) -> dict[str, Any]:
    """Simulate (or load) the recording, fit, report; return the metrics written to ``metrics.json``.

    Args:
        cfg: the run's composed config (``task``, ``trainer``, ``paths.output_dir``, ``seed``, ``figures`` ...).

    Returns:
        The metrics (the task's report, ``output_dir`` and, with figures, their paths).
    """
    output_dir = Path(cfg.paths.output_dir)
    L.seed_everything(int(cfg.seed), workers=True, verbose=False)
    task, problem = build_identification(cfg.task)
    callbacks = instantiate_group(cfg.get("callbacks"), "callbacks")
    if not any(isinstance(c, EpochLines) for c in callbacks):
        callbacks.append(EpochLines(keys=ID_EPOCH_KEYS))  # one line per iteration when no progress bar is shown
    loggers = instantiate_group(cfg.get("logger"), "logger")
    has_ckpt = any(isinstance(c, ModelCheckpoint) for c in callbacks)
    trainer: L.Trainer = instantiate(
        cfg.trainer, callbacks=callbacks, logger=loggers or False, enable_checkpointing=has_ckpt
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(configure_optimizers|num_workers|does not have many workers).*")
        trainer.fit(task)
    results: dict[str, Any] = task.report()
    if not task.converged:
        log.warning("identification stopped at trainer.max_epochs = %s before converging", trainer.max_epochs)
    results["output_dir"] = str(output_dir)
    if cfg.get("figures", False) and trainer.is_global_zero:
        names = ", ".join(f"{s.name} = {results[f'id/{s.name}']:.4g}" for s in problem.params.specs)
        results["figures"] = {"fit": str(write_fit_figure(problem, output_dir / "fit.png", names))}
    write_mcap = getattr(problem, "write_recording_mcap", None)
    if cfg.get("mcap", False) and write_mcap is not None and trainer.is_global_zero:
        output_dir.mkdir(parents=True, exist_ok=True)
        written = write_mcap(output_dir / "recording.mcap")
        if written is not None:
            results["mcap"] = str(written)
    if trainer.is_global_zero:
        write_json_atomic(
            output_dir / "identification.json",
            {**results, "cost_history": task.history, "config": OmegaConf.to_container(cfg.task, resolve=True)},
        )
        write_json_atomic(output_dir / "metrics.json", results)
    return results
