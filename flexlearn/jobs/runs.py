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
import json
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import flexlearn
from flexlearn.atomic import atomic_path
from flexlearn.config import check, check_memory, did_you_mean, is_rank_zero, run_name, to_plain_dict
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
    "mcap",
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
        overrides, the seeds (`run_seeds`), the dataset (path, SHA-256, source), package versions and the git
        commit of the source (`source_revision`).
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
        "source": source_revision(),
    }
    if dataset_path is not None:
        run["dataset"] = {
            "path": str(dataset_path),
            "sha256": file_sha256(dataset_path),
            "source": (config.get("data") or {}).get("source"),
        }
    return {**config, "run": run}


def source_revision() -> Optional[dict[str, Any]]:
    """The git commit of the flexlearn source a run executes, and whether tracked files differ from it.

    Returns:
        ``{"commit": <sha>, "dirty": bool}``, or None when flexlearn is not run from a git checkout (an installed
        wheel) or git is not available.
    """
    root = Path(flexlearn.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        git = ["git", "-C", str(root)]
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        changes = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0 or changes.returncode != 0:
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(changes.stdout.strip())}


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


RESUMABLE_APPS = ("flexlearn-train", "flexlearn-pipeline")
RUN_POINTER = "run.json"
"""File in a run's checkpoint folder naming the run directory it belongs to (written when training starts)."""
RESUME_DROPPED = ("ckpt_path", "paths.checkpoint_dir", "resume")  # set again by `resume_arguments`


def override_key(item: str) -> str:
    """The key of a command-line override: ``+a.b=1`` → ``a.b``; ``~a`` → ``a``; a flag (``-m``) → itself.

    Args:
        item: one command-line argument.

    Returns:
        The override's key.
    """
    return item.split("=", 1)[0].lstrip("+~")


def current_app(task_name: str = "") -> str:
    """The command this process runs (``flexlearn-train``, ``flexlearn-pipeline``): the program name when it is a
    flexlearn command, else ``flexlearn-<task_name>`` for a resumable task, else ``flexlearn-train``.

    Args:
        task_name: the config's ``task_name`` ('': none).

    Returns:
        The command's name.
    """
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if name.startswith("flexlearn-"):
        return name
    return f"flexlearn-{task_name}" if f"flexlearn-{task_name}" in RESUMABLE_APPS else "flexlearn-train"


def resume_command(app: str, run_dir: str | Path) -> str:
    """The command line that continues the run in ``run_dir`` (``<app> resume=<run_dir>``).

    Args:
        app: the command's name.
        run_dir: the run directory.

    Returns:
        The shell-quoted command line.
    """
    return f"{app} resume={shlex.quote(str(run_dir))}"


def _run_dir_of(args: list[str]) -> Optional[Path]:
    """The run directory a resume names: ``resume=<run dir | its last.ckpt>`` or ``ckpt_path=<.../last.ckpt>``
    (a training run's; the run directory is read from the checkpoint folder's `RUN_POINTER`). None: no resume
    (a ``ckpt_path`` to another file, or to a checkpoint without a pointer, starts a new run as before)."""
    given = {override_key(a): a.split("=", 1)[1] for a in args if "=" in a}
    if "resume" in given:
        target = Path(given["resume"]).expanduser()
        if target.is_file():
            target = _pointed_run(target) or target
        if not (target / ".hydra" / "overrides.yaml").is_file():
            raise ConfigError(
                f"config 'resume' = {given['resume']!r}: not a run directory (no .hydra/overrides.yaml in it); "
                "give the run directory a training run printed"
            )
        return target
    ckpt, train = given.get("ckpt_path"), given.get("train", "true").lower()
    if ckpt and Path(ckpt).name == "last.ckpt" and train != "false":
        return _pointed_run(Path(ckpt).expanduser())
    return None


def checkpoint_run_metrics(ckpt: str | Path) -> Optional[dict[str, Any]]:
    """The ``metrics.json`` of the training run a checkpoint belongs to (found through its `RUN_POINTER`).

    Args:
        ckpt: a checkpoint path.

    Returns:
        The run's metrics, or None when the checkpoint names no run or the run wrote no readable metrics.
    """
    try:
        run = _pointed_run(Path(ckpt).expanduser())
        doc = json.loads((run / "metrics.json").read_text(encoding="utf-8")) if run is not None else None
    except (ConfigError, OSError, UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _pointed_run(ckpt: Path) -> Optional[Path]:
    """The run directory named by the `RUN_POINTER` beside checkpoint ``ckpt`` (None without one)."""
    pointer = ckpt.parent / RUN_POINTER
    try:
        doc = yaml.safe_load(pointer.read_text(encoding="utf-8")) if pointer.is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"file '{pointer}': cannot be read ({exc}); resume with resume=<run directory>") from exc
    out = doc.get("output_dir") if isinstance(doc, dict) else None
    if pointer.is_file() and not isinstance(out, str):
        raise ConfigError(f"file '{pointer}': key 'output_dir' = {out!r}: expected the run directory")
    return Path(out) if out and Path(out).is_dir() else None


def resume_arguments(args: list[str], app: str) -> list[str]:
    """The command-line overrides that continue a run, from those the user typed.

    ``<app> resume=<run dir>`` (or ``ckpt_path=<run's checkpoints>/last.ckpt``) becomes the run's saved overrides
    (``.hydra/overrides.yaml``) with the user's own overrides on top (a larger ``trainer.max_epochs``, ...), plus
    ``ckpt_path=<last.ckpt>``, ``paths.checkpoint_dir=<its folder>`` and ``hydra.run.dir=<run dir>``: the run
    continues in its own directory and logger run, and no new directory is made.

    Args:
        args: the command line after the program name.
        app: the command (`RESUMABLE_APPS` resume; other commands get ``args`` back unchanged).

    Returns:
        The arguments to compose the run with (``args`` itself when nothing is resumed).

    Raises:
        ConfigError: a ``resume`` that is no run directory, a run without ``last.ckpt``, a multirun resume.
    """
    if app not in RESUMABLE_APPS:
        return args
    run_dir = _run_dir_of(args)
    if run_dir is None:
        return args
    if any(a in ("-m", "--multirun") for a in args):
        raise ConfigError(f"config 'resume' = '{run_dir}': a run is resumed alone; drop -m/--multirun")
    saved = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text(encoding="utf-8")) or []
    record = run_dir / "config.yaml"
    config = yaml.safe_load(record.read_text(encoding="utf-8")) if record.is_file() else {}
    ckpt_dir = _checkpoint_dir(config, run_dir)
    last = ckpt_dir / "last.ckpt"
    if not last.is_file():
        raise ConfigError(
            f"config 'resume' = '{run_dir}': no last.ckpt in '{ckpt_dir}' (the run stopped before its first epoch "
            "ended); start it again instead"
        )
    typed = [a for a in args if override_key(a) != "resume"]
    keys = {override_key(a) for a in typed}
    kept = [str(a) for a in saved if override_key(str(a)) not in keys | set(RESUME_DROPPED)]
    extra = [f"ckpt_path={last}", f"paths.checkpoint_dir={ckpt_dir}", f"hydra.run.dir={run_dir}"]
    return [*kept, *[a for a in typed if override_key(a) not in RESUME_DROPPED], *extra]


def _checkpoint_dir(config: Any, run_dir: Path) -> Path:
    """The checkpoint folder of a run from its recorded config (``callbacks.last_checkpoint.dirpath``, else
    ``paths.checkpoint_dir``)."""
    config = config if isinstance(config, dict) else {}
    last = ((config.get("callbacks") or {}).get("last_checkpoint") or {}).get("dirpath")
    path = last or (config.get("paths") or {}).get("checkpoint_dir")
    if not isinstance(path, str) or not path:
        raise ConfigError(f"config 'resume' = '{run_dir}': its config.yaml names no checkpoint folder")
    return Path(path)


# Memory of a simulated sweep (flexlearn.sim.rig), measured with tracemalloc at the default rates (13.9 kB per
# pose from 10,000 to 30,000 poses; 200 B per accelerometer sample at 1 kHz) and rounded up.
SWEEP_BASE_BYTES = 64e6
SWEEP_BYTES_PER_POSE = 1e3
SWEEP_BYTES_PER_ACCEL_SAMPLE = 200.0
SWEEP_BYTES_PER_MAG_SAMPLE = 40.0  # per master poll and per magnetometer conversion


def sweep_memory_bytes(rig: Any) -> float:
    """Estimated peak memory [bytes] of simulating the sweep of ``rig`` (a `flexlearn.sim.rig_config.RigConfig`).

    The sweep lasts at most T = n_poses · (move + jitter + hold + max_pulses·(off + pulse) + off) [s]; memory is
    a base plus a cost per pose, per accelerometer sample (T·rate) and per poll (T/poll_period) and
    magnetometer conversion (T·rate): an upper estimate (about 20 % above the measured peak at the defaults).

    Args:
        rig: the checked rig configuration.

    Returns:
        Bytes (may be inf for absurd rates).
    """
    a = rig.acquisition
    slot = a.move_duration + a.move_jitter + a.hold_delay + a.max_pulses * (a.off_window + a.pulse) + a.off_window
    t_total = float(rig.n_poses) * slot
    mag = t_total / a.poll_period + t_total * rig.magnetometer.rate
    return (
        SWEEP_BASE_BYTES
        + SWEEP_BYTES_PER_POSE * rig.n_poses
        + SWEEP_BYTES_PER_ACCEL_SAMPLE * t_total * rig.accelerometer.rate
        + SWEEP_BYTES_PER_MAG_SAMPLE * mag
    )


def check_sweep_memory(rig: Any, where: str = "sim") -> None:
    """Refuse (`ConfigError` naming ``<where>.n_poses`` or the sensor rate that dominates) a simulated sweep
    that would need more memory than the machine has available (`sweep_memory_bytes`), before it starts.

    Args:
        rig: the sweep's `RigConfig`.
        where: the config key of the rig, for the message.

    Raises:
        ConfigError: the estimated memory exceeds what is available.
    """
    need = sweep_memory_bytes(rig)
    slot_rate = {
        f"{where}.accelerometer.rate": rig.accelerometer.rate * SWEEP_BYTES_PER_ACCEL_SAMPLE,
        f"{where}.magnetometer.rate": rig.magnetometer.rate * SWEEP_BYTES_PER_MAG_SAMPLE,
        f"{where}.acquisition.poll_period": SWEEP_BYTES_PER_MAG_SAMPLE / rig.acquisition.poll_period,
    }
    rates = {f"{where}.accelerometer.rate": 100.0, f"{where}.magnetometer.rate": 90.0}
    key = max(slot_rate, key=lambda k: slot_rate[k])
    value: Any = {
        f"{where}.accelerometer.rate": rig.accelerometer.rate,
        f"{where}.magnetometer.rate": rig.magnetometer.rate,
        f"{where}.acquisition.poll_period": rig.acquisition.poll_period,
    }[key]
    if key in rates and value <= 10 * rates[key]:  # ordinary rates: the pose count is what is too large
        key, value = f"{where}.n_poses", rig.n_poses
    check_memory(key, value, need, f"simulating {rig.n_poses} poses")
