"""Typed configuration blocks built from plain dicts (or OmegaConf nodes), validated when loaded.

Every block is a frozen-free dataclass; `from_dict` rejects unknown keys and wrong types with a
`ConfigError` that names the key path, and each block's own ``validate()`` checks ranges.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Mapping, TypeVar

from flexlearn.errors import ConfigError

T = TypeVar("T")


def check(condition: bool, where: str, value: Any, requirement: str) -> None:
    """Raise `ConfigError` "<where> = <value>: <requirement>" unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"config '{where}' = {value!r}: {requirement}")


def check_positive(obj: Any, where: str, *keys: str) -> None:
    """Each ``obj.<key>`` must be a positive finite number; the error names ``where.key``."""
    for key in keys:
        v = getattr(obj, key)
        check(math.isfinite(v) and v > 0, f"{where}.{key}", v, "must be a positive finite number")


def check_non_negative(obj: Any, where: str, *keys: str) -> None:
    """Each ``obj.<key>`` must be a finite number ≥ 0; the error names ``where.key``."""
    for key in keys:
        v = getattr(obj, key)
        check(math.isfinite(v) and v >= 0, f"{where}.{key}", v, "must be a non-negative finite number")


def check_finite(obj: Any, where: str, *keys: str) -> None:
    """Each ``obj.<key>`` (a number or a tuple of numbers) must be finite; the error names ``where.key``."""
    for key in keys:
        v = getattr(obj, key)
        values = v if isinstance(v, tuple) else (v,)
        check(all(math.isfinite(x) for x in values), f"{where}.{key}", v, "must be finite")


def from_dict(cls: type[T], data: Mapping[str, Any] | None, where: str = "") -> T:
    """Build dataclass ``cls`` from ``data``; nested dataclass fields are built recursively.

    Unknown keys raise `ConfigError` naming the full key path (``where.key``). After construction the
    block's ``validate()`` (if any) is called.
    """
    if data is None:
        data = {}
    if hasattr(data, "items") and not isinstance(data, dict):  # OmegaConf DictConfig
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(data, resolve=True)  # type: ignore[assignment]
    if not isinstance(data, Mapping):
        raise ConfigError(f"config '{where or cls.__name__}' must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"config '{where or cls.__name__}': unknown key(s) {unknown}; known keys: {sorted(fields)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        path = f"{where}.{name}" if where else name
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
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
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _coerce(args[0], value, path)
    return value


def to_dict(obj: Any) -> dict[str, Any]:
    """The dataclass as a plain nested dict (tuples become lists), for metadata and logging."""
    def conv(v: Any) -> Any:
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    return conv(dataclasses.asdict(obj))


def instantiate_group(group: Any, name: str) -> list[Any]:
    """Instantiate every entry of a callbacks/logger group; an entry is a mapping with a ``_target_``, or null
    (disabled). Anything else (e.g. a misspelt ``+callbacks.foo=1``) raises `ConfigError` naming it."""
    from hydra.utils import instantiate
    from omegaconf import DictConfig

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
            raise ConfigError(f"config '{name}.{key}': cannot be instantiated ({exc})") from exc
    return out


def _register_resolvers() -> None:
    """OmegaConf resolvers used by flexlearn/conf: ``${relpath:path,start}`` (path relative to start) and
    ``${run_tag:}`` (``<pid>-<4 hex>``, the suffix that makes run directories unique)."""
    import os
    import secrets

    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("run_tag"):  # unique per process, shared by its multirun jobs and DDP ranks
        tag = f"{os.getpid()}-{secrets.token_hex(2)}"
        OmegaConf.register_new_resolver("run_tag", lambda: tag, use_cache=True)
    if not OmegaConf.has_resolver("relpath"):
        OmegaConf.register_new_resolver("relpath", lambda path, start: os.path.relpath(str(path), str(start)))


_register_resolvers()
