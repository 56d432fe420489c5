"""Run an identification from a composed ``train`` config whose ``task`` group is an ``identify_*`` task.

``cfg.task``: ``kind: identify``, ``problem_type`` (modal | cosserat | lse), ``problem`` (the problem's
config dataclass fields), ``method``, ``lam0``, ``lr``, ``tol``, ``max_rel_std``. The trainer group
drives the iterations (``trainer.max_epochs`` = maximum optimiser iterations); callbacks and loggers
come from their groups; without an ``EpochLines`` among them one is added, so logs and pipes get one line per
iteration (cost, LM damping, horizon). Writes ``metrics.json`` (the ``id/…`` report plus ``output_dir``) and
``identification.json`` (the same with per-iteration costs and the configuration); with
``figures=true`` also ``fit.png`` (:func:`flexlearn.identify.report.write_fit_figure`).
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any, Callable

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from flexlearn.atomic import write_json_atomic
from flexlearn.config import from_dict, instantiate_group
from flexlearn.errors import ConfigError
from flexlearn.identify.fit import IdentificationProblem
from flexlearn.identify.task import IdentificationTask
from flexlearn.tasks.callbacks import EpochLines

log = logging.getLogger(__name__)

__all__ = ["is_identification", "build_problem", "identify", "PROBLEMS"]


def _modal(d: dict) -> IdentificationProblem:
    from flexlearn.identify.modal import ModalIdConfig, ModalLinkProblem
    return ModalLinkProblem(from_dict(ModalIdConfig, d, "task.problem"))


def _cosserat(d: dict) -> IdentificationProblem:
    from flexlearn.identify.cosserat import CosseratIdConfig, CosseratTipProblem
    return CosseratTipProblem(from_dict(CosseratIdConfig, d, "task.problem"))


def _lse(d: dict) -> IdentificationProblem:
    from flexlearn.identify.lse import CprStiffnessProblem, LseIdConfig
    return CprStiffnessProblem(from_dict(LseIdConfig, d, "task.problem"))


PROBLEMS: dict[str, Callable[[dict], IdentificationProblem]] = {"modal": _modal, "cosserat": _cosserat, "lse": _lse}
ID_EPOCH_KEYS = ("id/cost", "id/lambda", "id/horizon")  # what an iteration's line shows (those logged)
_TASK_KEYS = {"kind", "problem_type", "problem", "method", "lam0", "lr", "tol", "max_rel_std"}


def is_identification(cfg: DictConfig) -> bool:
    task = cfg.get("task")
    return task is not None and task.get("kind") == "identify"


def build_problem(task_cfg: DictConfig | dict) -> IdentificationProblem:
    t = OmegaConf.to_container(task_cfg, resolve=True) if isinstance(task_cfg, DictConfig) else dict(task_cfg)
    if not isinstance(t, dict):
        raise ConfigError(f"config 'task' = {t!r}: must be a mapping")
    unknown = sorted(set(t) - _TASK_KEYS)
    if unknown:
        raise ConfigError(f"config 'task': unknown keys {unknown} (allowed: {sorted(_TASK_KEYS)})")
    kind = t.get("problem_type")
    if kind not in PROBLEMS:
        raise ConfigError(f"config 'task.problem_type' = {kind!r}: must be one of {sorted(PROBLEMS)}")
    return PROBLEMS[kind](t.get("problem") or {})


def identify(cfg: DictConfig) -> dict[str, Any]:
    """Simulate (or load) the recording, fit, report; return the metrics written to ``metrics.json``."""
    output_dir = Path(cfg.paths.output_dir)
    L.seed_everything(int(cfg.seed), workers=True, verbose=False)
    problem = build_problem(cfg.task)
    t = cfg.task
    task = IdentificationTask(problem, method=str(t.get("method", "lm")), lam0=float(t.get("lam0", 1e-2)),
                              lr=float(t.get("lr", 0.05)), tol=float(t.get("tol", 1e-9)),
                              max_rel_std=float(t.get("max_rel_std", 0.1)))
    callbacks = instantiate_group(cfg.get("callbacks"), "callbacks")
    if not any(isinstance(c, EpochLines) for c in callbacks):
        callbacks.append(EpochLines(keys=ID_EPOCH_KEYS))  # one line per iteration when no progress bar is shown
    loggers = instantiate_group(cfg.get("logger"), "logger")
    has_ckpt = any(type(c).__name__ == "ModelCheckpoint" for c in callbacks)
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False,
                                     enable_checkpointing=has_ckpt)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*(configure_optimizers|num_workers|does not have many workers).*")
        trainer.fit(task)
    results: dict[str, Any] = task.report()
    if not task.converged:
        log.warning("identification stopped at trainer.max_epochs = %s before converging", trainer.max_epochs)
    results["output_dir"] = str(output_dir)
    if cfg.get("figures", False) and trainer.is_global_zero:
        from flexlearn.identify.report import write_fit_figure

        names = ", ".join(f"{s.name} = {results[f'id/{s.name}']:.4g}" for s in problem.params.specs)
        results["figures"] = {"fit": str(write_fit_figure(problem, output_dir / "fit.png", names))}
    if trainer.is_global_zero:
        write_json_atomic(output_dir / "identification.json",
                          {**results, "cost_history": task.history,
                           "config": OmegaConf.to_container(cfg.task, resolve=True)})
        write_json_atomic(output_dir / "metrics.json", results)
    return results
