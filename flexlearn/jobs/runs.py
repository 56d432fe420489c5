"""Run bookkeeping shared by the jobs (train, evaluate, pipeline): the config check of a run and its record.

`check_run_config` refuses, before anything is built, unknown top-level keys, unknown ``paths`` or ``trainer``
keys, a ``seed`` that is not an integer in [0, 2³²), a ``trainer.max_epochs`` < 1 and flags that are not
booleans (`ConfigError` naming the key). `run_record` is what makes a run reproducible (the resolved config and
a ``run`` block: name, overrides, seeds, dataset path and SHA-256, package versions); `record_run` writes it as
``config.yaml`` in the run directory and logs it to every logger.

Imports neither torch nor Lightning (Lightning's ``Trainer`` arguments are read from its source file), so the
apps check a config at once.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import flexlearn
from flexlearn.atomic import atomic_path
from flexlearn.config import check, did_you_mean, is_rank_zero, run_name, to_plain_dict
from flexlearn.errors import ConfigError
from flexlearn.fingerprint import file_sha256

TRAIN_KEYS = (
    "data",
    "model",
    "task",
    "callbacks",
    "logger",
    "trainer",
    "paths",
    "hydra",
    "task_name",
    "seed",
    "train",
    "test",
    "ckpt_path",
    "figures",
    "export",
    "optimized_metric",
    "transfer",
)
EVAL_KEYS = ("paths", "hydra", "task_name", "ckpt_path", "dataset_path", "metrics_csv", "calibration")
PATHS_KEYS = ("root_dir", "log_dir", "cache_dir", "output_dir", "checkpoint_dir")
SEED_RANGE = (0, 2**32 - 1)
NOT_TRAINER_KEYS = {"self", "callbacks", "logger"}  # callbacks and loggers come from their own groups


@functools.lru_cache(maxsize=None)
def trainer_keys() -> tuple[str, ...]:
    """Arguments of ``lightning.Trainer`` a ``trainer`` config may set.

    Read from Lightning's source file (importing Lightning takes seconds); from its signature if the source
    cannot be parsed.

    Returns:
        The argument names, sorted, without ``self``, ``callbacks`` and ``logger``.
    """
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
        import lightning as L  # heavy import off the start-up path (only when the source cannot be parsed)

        names = set(inspect.signature(L.Trainer.__init__).parameters)
    return tuple(sorted(names - NOT_TRAINER_KEYS))


def _refuse_unknown(node: Any, known: tuple[str, ...], where: str) -> None:
    extra = sorted(set(node or {}) - set(known))
    if extra:
        raise ConfigError(
            f"config '{where}': unknown key(s) {extra}{did_you_mean(extra, known)}; known keys: {list(known)}"
        )


def check_run_config(cfg: DictConfig, known: tuple[str, ...] = TRAIN_KEYS) -> None:
    """Refuse unknown keys (top level, ``paths``, ``trainer``) and bad ``seed``/flags/``trainer.max_epochs``.

    Args:
        cfg: the composed config of a run.
        known: the accepted top-level keys: `TRAIN_KEYS` (train, pipeline) or `EVAL_KEYS` (eval; no
            ``trainer``, ``seed`` or flags to check).

    Raises:
        ConfigError: naming the first key at fault, its value and what is expected.
    """
    _refuse_unknown(cfg, known, "<top level>")
    _refuse_unknown(cfg.get("paths"), PATHS_KEYS, "paths")
    ckpt = cfg.get("ckpt_path")
    check(ckpt is None or isinstance(ckpt, str), "ckpt_path", ckpt, "expected a file path")
    if "trainer" not in known:
        return
    _refuse_unknown({k for k in cfg.trainer if k != "_target_"}, trainer_keys(), "trainer")
    epochs = cfg.trainer.get("max_epochs")
    check(
        isinstance(epochs, int) and not isinstance(epochs, bool) and epochs >= 1,
        "trainer.max_epochs",
        epochs,
        "must be an integer >= 1",
    )
    seed = cfg.get("seed")
    check(
        isinstance(seed, int) and not isinstance(seed, bool) and SEED_RANGE[0] <= seed <= SEED_RANGE[1],
        "seed",
        seed,
        f"must be an integer in [{SEED_RANGE[0]}, {SEED_RANGE[1]}]",
    )
    for flag in ("train", "test", "figures", "export"):
        check(isinstance(cfg.get(flag, False), bool), flag, cfg.get(flag), "expected true or false")


def run_record(cfg: DictConfig, dataset_path: Optional[str | Path] = None) -> dict[str, Any]:
    """What makes this run reproducible.

    Args:
        cfg: the composed config of the run.
        dataset_path: the dataset file the run reads, recorded with its SHA-256 (None: no dataset block).

    Returns:
        The resolved config (without ``hydra``) and a ``run`` block with the run name, the command-line
        overrides, the seeds (`run_seeds`), the dataset (path, SHA-256, source) and package versions.
    """
    config = to_plain_dict(cfg, "<top level>")
    config.pop("hydra", None)
    overrides: list[str] = []
    try:
        overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    except Exception:  # pragma: no cover - Hydra config without overrides
        pass
    versions = {"flexlearn": flexlearn.__version__}
    for pkg in ("torch", "lightning"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:  # pragma: no cover
            pass
    run: dict[str, Any] = {
        "name": run_name(str(cfg.get("task_name", ""))),
        "overrides": overrides,
        "seeds": run_seeds(config),
        "versions": versions,
    }
    if dataset_path is not None:
        run["dataset"] = {
            "path": str(dataset_path),
            "sha256": file_sha256(dataset_path),
            "source": (config.get("data") or {}).get("source"),
        }
    return {**config, "run": run}


def run_seeds(config: dict[str, Any]) -> dict[str, Any]:
    """Every seed of a run.

    Args:
        config: the run's config as a plain dict.

    Returns:
        ``seed`` (weights, batch order) and the simulation and split seeds of the data, by their config keys.
    """
    seeds: dict[str, Any] = {"seed": config["seed"]} if "seed" in config else {}
    data = config.get("data")
    if isinstance(data, dict):
        if data.get("source", "sim") == "sim":
            seeds["data.sim.seed"] = (data.get("sim") or {}).get("seed", 0)
        seeds["data.processing.split_seed"] = (data.get("processing") or {}).get("split_seed", 0)
    return seeds


def record_run(record: dict[str, Any], output_dir: Path, loggers: list[Any]) -> None:
    """Write ``config.yaml`` (rank zero) and log the record to every logger (``log_hyperparams``).

    Args:
        record: a `run_record` (possibly extended, e.g. with the checkpoint evaluated).
        output_dir: the run directory.
        loggers: Lightning loggers (empty for a run without them).
    """
    if is_rank_zero():
        with atomic_path(output_dir / "config.yaml") as tmp:
            tmp.write_text(yaml.safe_dump(record, sort_keys=False, allow_unicode=True))
    for lg in loggers:
        lg.log_hyperparams(record)
