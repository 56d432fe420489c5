"""Shared behaviour of the command-line applications: readable errors instead of stack traces.

`hydra_app` is the ``@hydra.main`` of every app, with these additions:

- an override of a key the config does not have (``task.lrr=1``) or of a config group option that does not
  exist (``trainer=gpuu``) ends in one line naming the closest valid keys and exit status 2, instead of Hydra's
  hint to add the typo with ``+``;
- the environment is checked first: ``FLEXLEARN_ROOT`` set but empty counts as unset; a root (or
  ``paths.root_dir``) that is not a directory, not writable or on a full disk is one line and exit status 2;
- ``resume=<run dir>`` (train, pipeline) is expanded into the run's saved overrides (`flexlearn.jobs.runs`);
- SIGINT (Ctrl-C) and SIGTERM end the command at a safe point with one line saying what was kept and the
  command that resumes or reruns it, and exit status 128 + the signal number (130, 143). Every output is
  written whole or not at all (`flexlearn.atomic`), so an interrupted command leaves the previous version.

Apps import Lightning, torch and matplotlib inside their main function, so ``--help`` answers at once.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

import flexlearn.config  # noqa: F401  (registers the OmegaConf resolvers the configs use: run_tag, relpath)
from flexlearn.apps.console import show_config
from flexlearn.apps.interrupts import interruptions
from flexlearn.apps.run_status import CommandError, run_with_status
from flexlearn.config import check_root, closest, in_multirun
from flexlearn.errors import ConfigError, FlexlearnError
from flexlearn.jobs.runs import TRAIN_KEYS, check_run_config, override_key, resume_arguments
from flexlearn.progress import set_enabled

# flexlearn/conf/, found through the package, so an installed wheel works from any directory; a directory of
# your own is added with --config-dir. Absolute: console-script entry points would otherwise resolve a
# relative config_path as a Python module.
CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")
MAX_LISTED = 24  # keys or options listed in an error message at most


@contextlib.contextmanager
def readable_errors(app: str) -> Iterator[None]:
    """Turn a `FlexlearnError`, or a required config value left out (``???``), into one line on stderr and exit
    status 2.

    Args:
        app: the command's name, which starts the error line.
    """
    try:
        yield
    except FlexlearnError as exc:
        message = str(exc)
    except MissingMandatoryValue as exc:
        key = getattr(exc, "full_key", None) or "?"
        message = f"config '{key}' is required: add {key}=... to the command"
    except (MemoryError, RuntimeError) as exc:
        message = out_of_memory_message(exc)
        if not message:
            raise
    else:
        return
    print(f"{app}: error: {message}", file=sys.stderr)
    raise CommandError(message)


_ALLOCATION = re.compile(r"(?:can't allocate memory|not enough memory)[^0-9]*?(?:allocate )?(\d+) bytes")


def out_of_memory_message(exc: BaseException) -> str:
    """The one line for a run that ran out of memory (a size no check foresaw): the bytes it asked for, what the
    machine has, and the sizes set on the command line; '' when ``exc`` is not an allocation failure.

    Args:
        exc: a `MemoryError`, or torch's allocator `RuntimeError` ("DefaultCPUAllocator: can't allocate memory").

    Returns:
        The message, or ''.
    """
    text = str(exc)
    if not isinstance(exc, MemoryError) and "can't allocate memory" not in text and "not enough memory" not in text:
        return ""
    asked = _ALLOCATION.search(text)
    failed = f"an allocation of {int(asked.group(1)) / 2**30:.3g} GiB failed" if asked else "an allocation failed"
    avail = flexlearn.config.available_memory()
    have = f"{avail / 2**30:.3g} GiB" if avail is not None else "unknown"
    sizes = " ".join(a for a in sys.argv[1:] if "=" in a and not a.startswith("hydra.")) or "the config's defaults"
    return f"out of memory: {failed} (available when it failed: {have}); lower the sizes ({sizes})"


def require_values(cfg: DictConfig) -> None:
    """Raise `ConfigError` naming every required value (``???``) the command did not give.

    Args:
        cfg: the composed config.

    Raises:
        ConfigError: one or more required values left out.
    """
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(
            f"config {', '.join(repr(k) for k in missing)} {'is' if len(missing) == 1 else 'are'} "
            "required: add " + " ".join(f"{k}=..." for k in missing) + " to the command"
        )


def use_progress(cfg: DictConfig) -> None:
    """Progress bars (flexlearn.progress) follow the config's ``progress`` (true | false | auto; absent: auto,
    drawn when stderr is a terminal).

    Args:
        cfg: the composed config (its ``progress`` key, if any).
    """
    value = cfg.get("progress", None)
    set_enabled(value if isinstance(value, (bool, str)) else None)


def threads_per_parallel_job() -> Optional[int]:
    """In a job of a joblib multirun (``hydra/launcher=local_parallel``): limit torch, OpenMP and MKL to
    cores // n_jobs threads (at least 1) so parallel jobs do not oversubscribe the cores; returns that number
    (None elsewhere: nothing changed)."""
    if not in_multirun():
        return None
    launcher = HydraConfig.get().launcher
    if "joblib" not in str(launcher.get("_target_", "")).lower():
        return None
    cores = os.cpu_count() or 1
    n_jobs = int(launcher.get("n_jobs") or 1)
    n_jobs = cores if n_jobs < 1 else n_jobs
    threads = max(1, cores // n_jobs)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch  # heavy import off the start-up path

    torch.set_num_threads(threads)
    return threads


def start_run(
    cfg: DictConfig, known: tuple[str, ...] = TRAIN_KEYS, checks: Optional[Callable[[DictConfig], None]] = None
) -> None:
    """The preamble of the apps that make a run directory (train, pipeline, eval), run once per command.

    Every required value given, the run config checked (`flexlearn.jobs.runs.check_run_config`: before the
    config is printed and Lightning or torch is imported), the app's own ``checks`` (the values only the job's
    objects check, e.g. the learning rate), then the config tree shown and saved: a refused value is the only thing
    printed. The app then calls the job's ``run_*`` entry.

    Args:
        cfg: the composed config.
        known: the accepted top-level keys (`flexlearn.jobs.runs.TRAIN_KEYS` or ``EVAL_KEYS``).
        checks: more checks before the tree (`flexlearn.jobs.training_parts.check_before_work`); None: none.

    Raises:
        ConfigError: a required value left out, or a bad key or value.
    """
    require_values(cfg)
    check_run_config(cfg, known)
    if checks is not None:
        checks(cfg)
    show_config(cfg, cfg.paths.output_dir)


def check_before_training(cfg: DictConfig) -> None:
    """`flexlearn.jobs.training_parts.check_before_work` for `start_run`, imported when called (torch, Lightning).

    Args:
        cfg: the composed config.
    """
    from flexlearn.jobs.training_parts import check_before_work  # heavy import off the start-up path

    check_before_work(cfg)


def sweep_value(value: float) -> float:
    """The value a sweeper minimises: a non-finite metric becomes +inf so it ranks last, not crashes.

    Args:
        value: the run's metric.

    Returns:
        ``value`` if finite, else +inf.
    """
    return value if math.isfinite(value) else math.inf


def hydra_app(app: str, config_name: str) -> Callable[[Callable[[DictConfig], Any]], Callable[..., Any]]:
    """``@hydra.main`` on flexlearn/conf/<config_name>.yaml, reporting a misspelled key or group option as
    ``<app>: error: ...`` (closest valid names) with exit status 2.

    Args:
        app: the command's name, which starts the error lines.
        config_name: the primary config's name (flexlearn/conf/<config_name>.yaml).

    Returns:
        The decorator that turns a ``main(cfg)`` into the command's entry point.
    """

    def wrap(task_fn: Callable[[DictConfig], Any]) -> Callable[..., Any]:
        @functools.wraps(task_fn)
        def task_with_status(cfg: DictConfig) -> Any:
            return run_with_status(app, task_fn, cfg)

        hydra_main = hydra.main(version_base="1.3", config_path=CONF_DIR, config_name=config_name)(task_with_status)

        @functools.wraps(task_fn)
        def main(cfg_passthrough: Optional[DictConfig] = None) -> Any:
            with interruptions(app):
                with readable_errors(app):
                    prepare_command(app)
                with _composition_errors(app):
                    return hydra_main(cfg_passthrough)

        return main

    return wrap


def prepare_command(app: str) -> None:
    """What every app does before Hydra composes its config (and makes its run directory).

    ``FLEXLEARN_ROOT`` set but empty is removed (unset: the working directory is the root); the root a run
    writes under (``paths.root_dir=`` on the command line, else ``FLEXLEARN_ROOT``, else the working directory)
    is checked (`flexlearn.config.check_root`); ``resume=`` is expanded (`flexlearn.jobs.runs.resume_arguments`)
    into ``sys.argv``.

    Args:
        app: the command's name.

    Raises:
        ConfigError: a root that is no writable directory with free space; a bad ``resume``.
    """
    if "FLEXLEARN_ROOT" in os.environ and not os.environ["FLEXLEARN_ROOT"].strip():
        del os.environ["FLEXLEARN_ROOT"]
    args = sys.argv[1:]
    if any(a in ("-h", "--help", "--hydra-help", "--info", "-c", "--cfg") for a in args):
        return
    given = [a.split("=", 1)[1] for a in args if "=" in a and override_key(a) == "paths.root_dir"]
    if given:
        check_root(given[-1], "paths.root_dir")
    elif os.environ.get("FLEXLEARN_ROOT"):
        check_root(os.environ["FLEXLEARN_ROOT"], "FLEXLEARN_ROOT")
    else:
        check_root(os.getcwd(), "the working directory (FLEXLEARN_ROOT is not set)")
    sys.argv[1:] = resume_arguments(args, app)


@contextlib.contextmanager
def _composition_errors(app: str) -> Iterator[None]:
    """Catch Hydra's composition errors before Hydra prints them (its ``run_and_report`` wraps every step of
    a run: compose, --help, --cfg, run, multirun); HYDRA_FULL_ERROR=1 keeps Hydra's own report."""
    try:
        import hydra._internal.utils as internal  # optional: Hydra's private module, absent from other layouts
        from hydra.errors import ConfigCompositionException, MissingConfigException  # optional: as above
    except ImportError:  # pragma: no cover - a Hydra laid out differently: its own messages
        yield
        return
    original = internal.run_and_report

    def run_and_report(func: Callable[[], Any]) -> Any:
        def guarded() -> Any:
            try:
                return func()
            except (ConfigCompositionException, MissingConfigException) as exc:
                message = composition_error_message(exc)
                if message is None or os.environ.get("HYDRA_FULL_ERROR") == "1":
                    raise
                print(f"{app}: error: {message}", file=sys.stderr)
                sys.exit(2)
            except FlexlearnError as exc:  # raised while Hydra sets a run up (a launcher's or sweeper's config)
                print(f"{app}: error: {exc}", file=sys.stderr)
                sys.exit(2)

        return original(guarded)

    internal.run_and_report = run_and_report
    try:
        yield
    finally:
        internal.run_and_report = original


def composition_error_message(exc: BaseException) -> Optional[str]:
    """One line for an override of a missing key or of a missing group option (closest names, the keys or
    options there are); None for any other composition error (Hydra's own message is kept).

    Args:
        exc: the exception Hydra raised while composing the config.

    Returns:
        The message (without the ``<app>: error:`` prefix), or None.
    """
    options = getattr(exc, "options", None)
    missing_file = getattr(exc, "missing_cfg_file", None)
    if options and missing_file and "/" in str(missing_file):
        group, _, name = str(missing_file).rpartition("/")
        near = closest(name, options)
        hint = f"; did you mean '{group}={near[0]}'?" if near else ""
        return f"config group '{group}' has no option '{name}'{hint} (options: {_listed(options)})"
    cause = exc.__cause__
    full_key = getattr(cause, "full_key", None)
    parent = getattr(cause, "parent_node", None)
    if not full_key or not isinstance(parent, DictConfig):
        return None
    typed = re.match(r"Could not override '([^']+)'", str(exc))
    key = typed[1] if typed and typed[1].startswith(str(full_key)) else str(full_key)
    where, _, name = str(full_key).rpartition(".")
    keys = [str(k) for k in parent.keys()]
    near = closest(name, keys)
    listed = [k for k in keys if where or k != "hydra"]
    scope = f"keys of '{where}'" if where else "top-level keys"
    if near:
        fixed = f"{where + '.' if where else ''}{near[0]}{key[len(str(full_key)) :]}"
        return f"config key '{key}' does not exist; did you mean '{fixed}'? ({scope}: {_listed(listed)})"
    deeper = _nested_match(parent._get_root(), key)
    if deeper:
        return f"config key '{key}' does not exist; did you mean '{deeper}'? ({scope}: {_listed(listed)})"
    return (
        f"config key '{key}' does not exist ({scope}: {_listed(listed)}); a key the config does not list "
        f"is added with a leading '+'"
    )


def _nested_match(root: Any, key: str) -> Optional[str]:
    """The full path of a deeper config key whose last components are spelled most like ``key``
    (``rod.n_elemnts`` → ``cpr.rod.n_elements``, ``n_elements`` → ``cpr.rod.n_elements``), or None."""

    def paths(node: Any, prefix: str) -> Iterator[str]:
        if isinstance(node, dict):
            for k, v in node.items():
                if prefix or k != "hydra":
                    yield from paths(v, f"{prefix}{k}.")
        elif prefix:
            yield prefix[:-1]

    typed = key.split(".")
    suffixes: dict[str, str] = {}
    container = OmegaConf.to_container(root, resolve=False) if isinstance(root, DictConfig) else {}
    for path in paths(container, ""):
        parts = path.split(".")
        tail = parts[-len(typed) :]
        if len(parts) > len(typed) and all(closest(t, [c]) for t, c in zip(typed, tail)):  # each part alike
            suffixes.setdefault(".".join(tail), path)
    near = closest(key, suffixes)
    return suffixes[near[0]] if near else None


def _listed(names: Any) -> str:
    names = [str(n) for n in names]
    more = f", ... ({len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else ""
    return ", ".join(names[:MAX_LISTED]) + more
