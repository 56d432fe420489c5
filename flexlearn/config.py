"""Typed configuration blocks built from plain dicts (or OmegaConf nodes), validated when loaded.

Every block is a frozen-free dataclass; `from_dict` rejects unknown keys and wrong types with a
`ConfigError` that names the key path, and each block's own ``validate()`` checks ranges.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import math
import os
import secrets
import shutil
import sys
import typing
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, TypeVar

from omegaconf import DictConfig, OmegaConf

from flexlearn.errors import ConfigError, FlexlearnError

T = TypeVar("T")


def is_finite_number(v: Any) -> bool:
    """True for a finite int or float (not a bool, NaN or ±inf): what a numeric config value or metric must be.

    Args:
        v: the value to test.

    Returns:
        Whether ``v`` is a finite int or float.
    """
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check(condition: bool, where: str, value: Any, requirement: str) -> None:
    """Raise `ConfigError` "<where> = <value>: <requirement>" unless ``condition`` holds.

    Args:
        condition: what must hold.
        where: the config key, for the message.
        value: the key's value, for the message.
        requirement: what the value must be, for the message.

    Raises:
        ConfigError: ``condition`` is false.
    """
    if not condition:
        raise ConfigError(f"config '{where}' = {value!r}: {requirement}")


def check_positive(obj: Any, where: str, *keys: str) -> None:
    """Each ``obj.<key>`` must be a positive finite number; the error names ``where.key``.

    Args:
        obj: the config block (a dataclass or any object with these attributes).
        where: the block's key path, for the message.
        *keys: the attribute names to check.

    Raises:
        ConfigError: a value is not positive or not finite.
    """
    for key in keys:
        v = getattr(obj, key)
        check(math.isfinite(v) and v > 0, f"{where}.{key}", v, "must be a positive finite number")


def check_non_negative(obj: Any, where: str, *keys: str) -> None:
    """Each ``obj.<key>`` must be a finite number ≥ 0; the error names ``where.key``.

    Args:
        obj: the config block (a dataclass or any object with these attributes).
        where: the block's key path, for the message.
        *keys: the attribute names to check.

    Raises:
        ConfigError: a value is negative or not finite.
    """
    for key in keys:
        v = getattr(obj, key)
        check(math.isfinite(v) and v >= 0, f"{where}.{key}", v, "must be a non-negative finite number")


def check_finite(obj: Any, where: str, *keys: str) -> None:
    """Each ``obj.<key>`` (a number or a tuple of numbers) must be finite; the error names ``where.key``.

    Args:
        obj: the config block (a dataclass or any object with these attributes).
        where: the block's key path, for the message.
        *keys: the attribute names to check.

    Raises:
        ConfigError: a value (or one of a tuple's) is NaN or ±inf.
    """
    for key in keys:
        v = getattr(obj, key)
        values = v if isinstance(v, tuple) else (v,)
        check(all(math.isfinite(x) for x in values), f"{where}.{key}", v, "must be finite")


def closest(name: str, candidates: Iterable[str], n: int = 1) -> list[str]:
    """The ``n`` candidates spelled most like ``name`` (difflib ratio >= 0.6), best first.

    Args:
        name: the misspelt name.
        candidates: the valid names.
        n: how many to return at most.

    Returns:
        Up to ``n`` close candidates; empty when none is close.
    """
    return difflib.get_close_matches(str(name), [str(c) for c in candidates], n=n, cutoff=0.6)


def did_you_mean(unknown: Iterable[str], known: Iterable[str]) -> str:
    """The hint "; did you mean 'x'?" naming the closest known key of each unknown one ('' when none is close).

    Args:
        unknown: the keys that were not recognised.
        known: the valid keys.

    Returns:
        The hint, or '' when no known key is close.
    """
    known = list(known)
    pairs = [(u, m[0]) for u in unknown for m in [closest(u, known)] if m]
    if not pairs:
        return ""
    return "; did you mean " + ", ".join(f"{m!r}" + (f" (for {u!r})" if len(pairs) > 1 else "") for u, m in pairs) + "?"


def from_dict(cls: type[T], data: Mapping[str, Any] | None, where: str = "") -> T:
    """Build dataclass ``cls`` from ``data``; nested dataclass fields are built recursively.

    Unknown keys raise `ConfigError` naming the full key path (``where.key``). After construction the
    block's ``validate()`` (if any) is called.

    Args:
        cls: the dataclass to build.
        data: its values (a mapping or an OmegaConf node); None: all defaults.
        where: the block's key path, for messages ('': the class name).

    Returns:
        The built and validated block.

    Raises:
        ConfigError: ``data`` is not a mapping, has an unknown key or a value of the wrong type, or fails
            ``validate()``.
    """
    if data is None:
        data = {}
    if hasattr(data, "items") and not isinstance(data, dict):  # OmegaConf DictConfig
        data = OmegaConf.to_container(data, resolve=True)  # type: ignore[assignment]
    if not isinstance(data, Mapping):
        raise ConfigError(f"config '{where or cls.__name__}' must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"config '{where or cls.__name__}': unknown key(s) {unknown}"
            f"{did_you_mean(unknown, fields)}; known keys: {sorted(fields)}"
        )
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        path = f"{where}.{name}" if where else name
        hint = hints[name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            kwargs[name] = from_dict(hint, value, path)
        else:
            kwargs[name] = _coerce(hint, value, path)
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate()
    return obj


def _coerce(hint: Any, value: Any, path: str) -> Any:
    """Check a scalar or tuple value against its annotation; ints are accepted where floats are."""
    origin = typing.get_origin(hint)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"config '{path}' = {value!r}: expected a number")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config '{path}' = {value!r}: expected an integer")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"config '{path}' = {value!r}: expected true or false")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"config '{path}' = {value!r}: expected a string")
        return value
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config '{path}' = {value!r}: expected a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], v, f"{path}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(f"config '{path}' = {value!r}: expected {len(args)} values")
        return tuple(_coerce(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is typing.Union:
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _coerce(members[0], value, path)
    return value


def to_dict(obj: Any) -> dict[str, Any]:
    """The dataclass as a plain nested dict (tuples become lists), for metadata and logging.

    Args:
        obj: a dataclass instance.

    Returns:
        Its fields as a nested dict of plain values.
    """

    def conv(v: Any) -> Any:
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    return conv(dataclasses.asdict(obj))


MIN_FREE_BYTES = 200 * 2**20
"""Free space a run's root needs at the start (logs, config, the first checkpoints): less is a full disk."""


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"


def check_root(value: Optional[str], source: str) -> Optional[Path]:
    """Check the folder a command writes its logs, cache and checkpoints under, before anything is written.

    Args:
        value: the folder (``$FLEXLEARN_ROOT``, a ``paths.root_dir=`` override or the working directory); an empty
            or blank value means "not set" and returns None.
        source: how the user gave it, for the message (``FLEXLEARN_ROOT``, ``paths.root_dir``).

    Returns:
        The folder, or None when ``value`` is empty.

    Raises:
        ConfigError: the folder (or its nearest existing parent, when it is to be created) is not a directory,
            is not writable, or its file system has less than `MIN_FREE_BYTES` free.
    """
    if value is None or not str(value).strip():
        return None
    path = Path(str(value)).expanduser()
    existing = next((p for p in [path, *path.parents] if p.exists()), None)
    where = f"{source} = {str(value)!r}"
    if existing is None or not existing.is_dir():
        shown = "" if existing == path else f" ('{existing}' is a file)"
        raise ConfigError(f"{where}: not a directory{shown}; give a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{where}: '{existing}' is not writable; give a folder you can write")
    try:
        free = shutil.disk_usage(existing).free
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc})") from exc
    if free < MIN_FREE_BYTES:
        raise ConfigError(
            f"{where}: its disk is full ({_gib(free)} free, at least {_gib(MIN_FREE_BYTES)} needed); free space "
            "or give another folder"
        )
    return path


def available_memory() -> Optional[int]:
    """Bytes of memory this process can still allocate without swapping: ``MemAvailable`` of /proc/meminfo,
    capped by a cgroup (container) limit; the physical memory where /proc is absent; None when unknown."""
    avail: Optional[int] = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        try:
            avail = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = None
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit = int(Path(limit_file).read_text().strip())
            used = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if 0 < limit < 2**60:
            avail = max(0, limit - used) if avail is None else min(avail, max(0, limit - used))
        break
    return avail


def check_memory(where: str, value: Any, need_bytes: float, what: str = "") -> None:
    """Refuse a user-set size whose estimated memory exceeds what the machine has available, before allocation.

    Args:
        where: the config key of the size (``sim.n_poses``).
        value: its value, for the message.
        need_bytes: the estimated bytes the work needs at that size.
        what: the work, for the message (``simulating the sweep``).

    Raises:
        ConfigError: ``need_bytes`` is not finite or above `available_memory` (unknown memory: never).
    """
    avail = available_memory()
    if math.isfinite(need_bytes) and (avail is None or need_bytes <= avail):
        return
    shown = _gib(need_bytes) if math.isfinite(need_bytes) else "more than any machine has"
    raise ConfigError(
        f"config '{where}' = {value!r}: {what + ' ' if what else ''}needs about {shown} of memory, this machine has "
        f"{_gib(avail) if avail is not None else 'less'} available; lower it"
    )


TARGET_PACKAGES: tuple[str, ...] = ("flexlearn",)
"""Top-level packages whose classes a ``_target_`` may name, in configs and in checkpoints: importing and calling
any dotted path read from a file would run any code. A package built on flexlearn adds itself here."""


def target_class(target: Any, where: str, base: type[T]) -> type[T]:
    """The class a ``_target_`` (``"package.module.Class"``) names, imported; it must lie in one of
    `TARGET_PACKAGES` and subclass ``base``. Else `ConfigError` "config '<where>._target_' = <value>: <why>".

    Args:
        target: the ``_target_`` value.
        where: the key path of the mapping that holds it, for messages.
        base: the class the target must subclass.

    Returns:
        The imported class.

    Raises:
        ConfigError: ``target`` is not a dotted path inside `TARGET_PACKAGES`, cannot be imported, is no class or
            not a subclass of ``base``.
    """
    key = f"{where}._target_"
    check(isinstance(target, str) and bool(target), key, target, "required: the dotted path of a class")
    parts = target.split(".")
    check(all(p.isidentifier() for p in parts), key, target, "must be a dotted path of names (no space, no empty part)")
    check(parts[0] in TARGET_PACKAGES, key, target, f"must name a class inside {list(TARGET_PACKAGES)}")
    obj: Any = None
    for n in range(len(parts) - 1, 0, -1):  # the longest importable module prefix, then attributes
        module = ".".join(parts[:n])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module + ".").startswith(exc.name + "."):
                continue  # no module of that name: a shorter prefix, then attributes
            raise ConfigError(f"config '{key}' = {target!r}: importing {module} failed ({exc})") from exc
        except Exception as exc:  # the module itself is broken: a syntax error, an error raised at import
            raise ConfigError(
                f"config '{key}' = {target!r}: importing {module} failed ({type(exc).__name__}: {exc})"
            ) from exc
        for name in parts[n:]:
            obj = getattr(obj, name, None)
        break
    check(obj is not None, key, target, "no such class")
    check(isinstance(obj, type), key, target, f"no such class (it names a {type(obj).__name__})")
    check(issubclass(obj, base), key, target, f"must be a subclass of {base.__module__}.{base.__qualname__}")
    return obj  # type: ignore[return-value]  # checked: a subclass of base


def target_arguments(cls: type, args: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``args`` checked as the constructor arguments of ``cls``, before anything is built: by the class's own
    ``validate_hparams(args, where) -> dict`` when it has one (its `ValueError`/`ConfigError` names the key),
    else by the names of its ``__init__`` parameters. Returns the (normalised) arguments.

    Args:
        cls: the class to be built.
        args: the arguments given beside ``_target_``.
        where: the key path of the mapping, for messages.

    Returns:
        The checked (and, by ``validate_hparams``, normalised) arguments.

    Raises:
        ConfigError: an unknown argument or a value the class refuses.
    """
    validate = getattr(cls, "validate_hparams", None)
    if callable(validate):
        try:
            return dict(validate(dict(args), where))
        except ValueError as exc:
            raise ConfigError(f"config {exc}") from exc
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(args)
    known = [k for k, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(args) - set(known))
    check(not unknown, where, unknown, f"unknown key(s){did_you_mean(unknown, known)}; known keys: {known}")
    return dict(args)


def split_target(node: Any, where: str, base: type[T], default: str | None = None) -> tuple[type[T], dict[str, Any]]:
    """(class, checked constructor arguments) of a config mapping with a ``_target_`` (``default`` when it has
    none) and the arguments beside it; see `target_class` and `target_arguments`. ``node`` is a mapping or an
    OmegaConf node; errors name ``where``.

    Args:
        node: the mapping (or OmegaConf node) with ``_target_`` and the arguments.
        where: its key path, for messages.
        base: the class the target must subclass.
        default: the ``_target_`` used when ``node`` has none (None: ``_target_`` is required).

    Returns:
        The class and its checked constructor arguments.

    Raises:
        ConfigError: ``node`` is not a mapping, or a bad target or argument.
    """
    plain = to_plain_dict(node, where)
    cls = target_class(plain.pop("_target_", default), where, base)
    return cls, target_arguments(cls, plain, where)


def to_plain_dict(node: Any, where: str) -> dict[str, Any]:
    """A mapping or OmegaConf ``DictConfig`` as a plain, resolved dict; anything else is a `ConfigError`.

    Args:
        node: a mapping or an OmegaConf ``DictConfig``.
        where: its key path, for the message.

    Returns:
        A dict with string keys and resolved values.

    Raises:
        ConfigError: ``node`` is not a mapping.
    """
    plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    if not isinstance(plain, Mapping):
        raise ConfigError(f"config '{where}' = {plain!r}: expected a mapping")
    return {str(k): v for k, v in plain.items()}


def instantiate_group(group: Any, name: str) -> list[Any]:
    """Instantiate every entry of a callbacks/logger group; an entry is a mapping with a ``_target_``, or null
    (disabled). Anything else (e.g. a misspelt ``+callbacks.foo=1``) raises `ConfigError` naming it.

    Args:
        group: the group's node (key -> entry); empty or None: no entries.
        name: the group's key (``callbacks``, ``logger``), for messages.

    Returns:
        The instantiated objects, in the group's order, disabled entries left out.

    Raises:
        ConfigError: an entry is neither a mapping with a ``_target_`` nor null, or its constructor fails.
    """
    from hydra.utils import instantiate  # Hydra only under a Hydra run: off the runtime's start-up path

    if not group:
        return []
    out = []
    for key, node in group.items():
        if node is None:
            continue
        if not (isinstance(node, DictConfig) and "_target_" in node):
            raise ConfigError(f"config '{name}.{key}' = {node!r}: expected a mapping with a _target_ (or null)")
        try:
            out.append(instantiate(node))
        except Exception as exc:  # hydra wraps constructor errors; name the entry
            if isinstance(exc.__cause__, FlexlearnError):  # the constructor's own message names the problem
                raise exc.__cause__ from None
            raise ConfigError(f"config '{name}.{key}': cannot be instantiated ({exc})") from exc
    return out


def in_multirun() -> bool:
    """True inside a job of a Hydra multirun (sweep)."""
    try:
        from hydra.core.hydra_config import HydraConfig  # Hydra only under a Hydra run: off the runtime's start-up
        from hydra.types import RunMode  # path (the runtime and physics import this module)

        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # pragma: no cover - Hydra config without a mode
        return False


def job_label() -> str:
    """'job <n>' inside a multirun job, '' otherwise: tags the lines of jobs whose output interleaves."""
    if not in_multirun():
        return ""
    from hydra.core.hydra_config import HydraConfig  # Hydra only under a Hydra run (see `in_multirun`)

    return f"job {HydraConfig.get().job.num}"


def is_rank_zero() -> bool:
    """False in the processes of ranks > 0 of a multi-process (DDP, SLURM) run: they print and write nothing."""
    return all(os.environ.get(k, "0") in ("", "0") for k in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"))


def interactive() -> bool:
    """True when stdout is a terminal and this is no multirun job: progress bars and model summaries then,
    one plain line per epoch otherwise (``${interactive:}`` in conf/trainer/default.yaml)."""
    return bool(getattr(sys.stdout, "isatty", lambda: False)()) and not in_multirun()


RUN_NAME_SKIP = ("paths.", "hydra.", "logger")  # overrides left out of run names (locations, logging)


def run_name(task_name: str, max_len: int = 128) -> str:
    """``<task_name> <override> ...``: the run (or multirun job) name loggers show, from the Hydra overrides
    of this job, leaving out paths, Hydra and logger settings (``${run_name:${task_name}}``).

    Args:
        task_name: the run's task name, the first word.
        max_len: the longest name in characters; a longer one is cut and ends in "…".

    Returns:
        The run name.
    """
    try:
        from hydra.core.hydra_config import HydraConfig  # Hydra only under a Hydra run (see `in_multirun`)

        overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    except Exception:  # pragma: no cover - Hydra config without overrides
        overrides = []
    kept = [o for o in overrides if not o.lstrip("+~").startswith(RUN_NAME_SKIP)]
    name = " ".join([str(task_name), *kept])
    return name if len(name) <= max_len else name[: max_len - 1] + "…"


def _register_resolvers() -> None:
    """OmegaConf resolvers used by flexlearn/conf: ``${flexlearn_root:}`` (``$FLEXLEARN_ROOT``, blank = unset: ``.``),
    ``${relpath:path,start}`` (path relative to start),
    ``${run_tag:}`` (``<pid>-<4 hex>``, the suffix that makes run directories unique), ``${interactive:}``
    (`interactive`) and ``${run_name:<task name>}`` (`run_name`)."""
    if not OmegaConf.has_resolver("run_tag"):  # unique per process, shared by its multirun jobs and DDP ranks
        tag = f"{os.getpid()}-{secrets.token_hex(2)}"
        OmegaConf.register_new_resolver("run_tag", lambda: tag, use_cache=True)
    if not OmegaConf.has_resolver("flexlearn_root"):  # $FLEXLEARN_ROOT; unset or blank: the working directory
        OmegaConf.register_new_resolver("flexlearn_root", lambda: os.environ.get("FLEXLEARN_ROOT", "").strip() or ".")
    if not OmegaConf.has_resolver("relpath"):
        OmegaConf.register_new_resolver("relpath", lambda path, start: os.path.relpath(str(path), str(start)))
    if not OmegaConf.has_resolver("interactive"):
        OmegaConf.register_new_resolver("interactive", interactive)
    if not OmegaConf.has_resolver("run_name"):
        OmegaConf.register_new_resolver("run_name", run_name)


_register_resolvers()
