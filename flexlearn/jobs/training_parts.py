"""What a training run is built from, checked from its config: the task with its model (`build_task`) and the data
module of its prepared dataset (`build_datamodule`), and the checks that run before any work (`check_before_work`:
the apps run them before the config tree is printed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from flexlearn.config import check, from_dict, split_target, to_plain_dict
from flexlearn.jobs.runs import check_sweep_memory

if TYPE_CHECKING:
    from flexlearn.data.datamodule import DirectionDataModule
    from flexlearn.data.sources import DataConfig
    from flexlearn.tasks.direction import DirectionTask

__all__ = ["build_datamodule", "build_task", "check_before_work", "check_model_config", "checked_data_config"]


def check_model_config(cfg: DictConfig) -> tuple[type[DirectionTask], dict[str, Any]]:
    """The task class (the ``task`` group's ``_target_``, a `DirectionTask`: identification tasks run through
    `flexlearn.identify.run`) and its checked constructor arguments: the group's other
    keys, ``max_epochs`` (``trainer.max_epochs``) and ``model`` (the ``model`` group, its ``_target_`` and
    arguments checked by `flexlearn.tasks.direction_model.model_spec`). Nothing is built; a bad key or value
    raises `ConfigError` naming it.

    Args:
        cfg: the composed config (its ``task``, ``model`` and ``trainer.max_epochs``).
    """
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
    (model sizes are checked before any layer is allocated).

    Args:
        cfg: the composed config (its ``task``, ``model`` and ``trainer.max_epochs``).
        n_modules: the dataset's module count (0: one module; not passed to the task).
    """
    cls, args = check_model_config(cfg)
    return cls(**args, n_modules=n_modules) if n_modules else cls(**args)


def checked_data_config(cfg: DictConfig) -> DataConfig:
    """The ``data`` group as a checked `DataConfig`; a simulated sweep's memory checked too (`check_sweep_memory`).

    Args:
        cfg: the composed config (its ``data``).

    Returns:
        The data config.

    Raises:
        ConfigError: naming the key and value of the first problem.
    """
    from flexlearn.data.sources import DataConfig  # heavy import off the start-up path

    data = from_dict(DataConfig, cfg.data, "data")
    if data.source == "sim":
        from flexlearn.sim.rig_config import RigConfig  # heavy import off the start-up path (numpy, the sim)

        check_sweep_memory(from_dict(RigConfig, dict(data.sim), "data.sim"), "data.sim")
    return data


def check_before_work(cfg: DictConfig) -> None:
    """What a training run checks before any work, so that a bad value is refused before the config is printed:
    the ``data`` group (`checked_data_config`) and the task with its model, built once on its own (a task with
    module maps waits for the dataset's module count). An identification run checks its own.

    Args:
        cfg: the composed config, `check_run_config` passed.

    Raises:
        ConfigError: naming the key and value of the first problem.
    """
    from flexlearn.identify.run import is_identification  # heavy import off the start-up path

    if is_identification(cfg):
        return
    checked_data_config(cfg)
    if cfg.task.get("module_maps") is None:
        build_task(cfg, 0)


def build_datamodule(cfg: DictConfig) -> DirectionDataModule:
    """Prepare (simulate/process/cache) the dataset the ``data`` group names and wrap it.

    Args:
        cfg: the composed config (its ``data``, ``paths.cache_dir`` and ``seed``).
    """
    # heavy imports off the start-up path (torch, Lightning)
    from flexlearn.data.datamodule import DirectionDataModule
    from flexlearn.data.sources import prepare_dataset

    data = checked_data_config(cfg)
    path = prepare_dataset(data, cfg.paths.cache_dir)
    return DirectionDataModule(
        path, batch_size=data.batch_size, eval_batch_size=data.eval_batch_size, seed=int(cfg.seed)
    )
