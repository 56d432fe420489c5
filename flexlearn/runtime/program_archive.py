""".pt2 archive inspection: what `torch.export.load` would unpickle or evaluate is refused before it sees the file.

Entries it would unpickle (``use_pickle`` weights or constants, opaque/custom objects, sample inputs that need more
than the weights-only unpickler), compiled libraries and graph strings it would evaluate (operator targets outside
``torch.ops``, symbolic expressions beyond plain sympy arithmetic) are refused, with or without the manifest
opt-out (`flexlearn.runtime.export.load_program`).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any, Iterator

import torch

from flexlearn.errors import CheckpointError
from flexlearn.runtime.pikit.manifest import UntrustedArtifactError


def archive_entries(data: bytes, path: str | Path, only: str | None = None) -> tuple[str, dict[str, bytes]]:
    """(root folder, {name below the root: bytes}) of a zip model archive (just entry ``only`` if given);
    refuses malformed layouts (several root folders, duplicate or escaping names).

    Args:
        data: the archive's bytes.
        path: the file (named in errors).
        only: the one entry (name below the root) to read (None: all).

    Returns:
        ``(root, entries)``: the root folder and the entries' bytes by name below it (directories left out).

    Raises:
        CheckpointError: not a zip archive, or a malformed layout.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = zf.namelist()
        roots = {n.split("/", 1)[0] for n in names}
        if len(roots) != 1 or len(set(names)) != len(names) or any("/" not in n or ".." in n for n in names):
            raise UntrustedArtifactError(f"model file '{path}': not a single-folder archive without duplicate entries")
        root = roots.pop()
        return root, {
            n[len(root) + 1 :]: zf.read(n) for n in names if not n.endswith("/") and only in (None, n[len(root) + 1 :])
        }
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CheckpointError(f"model file '{path}': not a zip model archive ({exc})") from exc


def _pt2_patterns() -> list[re.Pattern[str]]:
    from torch.export.pt2_archive import constants as c  # 3 s with sympy: kept off the start-up path

    fixed = [
        c.ARCHIVE_FORMAT_PATH,
        c.ARCHIVE_VERSION_PATH,
        "byteorder",
        ".data/version",
        ".data/serialization_id",
        c.MODELS_FILENAME_FORMAT.format("model"),
        c.WEIGHTS_CONFIG_FILENAME_FORMAT.format("model"),
        c.CONSTANTS_CONFIG_FILENAME_FORMAT.format("model"),
        c.SAMPLE_INPUTS_FILENAME_FORMAT.format("model"),
    ]
    return [re.compile(re.escape(f)) for f in fixed] + [
        re.compile(re.escape(c.WEIGHTS_DIR + c.WEIGHT_FILENAME_PREFIX) + r"\d+"),
        re.compile(re.escape(c.CONSTANTS_DIR + c.TENSOR_CONSTANT_FILENAME_PREFIX) + r"\w+"),
        re.compile(re.escape(c.EXTRA_DIR) + r"[\w.-]+"),
    ]


def check_archive_version(entries: dict, path: Any) -> None:
    """Refuse a .pt2 whose archive format or version record is not the one torch writes today.

    Args:
        entries: the archive's entries (name below the root → bytes).
        path: the file (named in errors).

    Raises:
        UntrustedArtifactError: another format or version.
    """
    from torch.export.pt2_archive import constants as c  # 3 s with sympy: kept off the start-up path

    if (
        entries.get(c.ARCHIVE_FORMAT_PATH) != c.ARCHIVE_FORMAT_VALUE.encode()
        or entries.get(c.ARCHIVE_VERSION_PATH) != c.ARCHIVE_VERSION_VALUE.encode()
    ):
        raise UntrustedArtifactError(
            f"model file '{path}': not a .pt2 archive of format version {c.ARCHIVE_VERSION_VALUE}"
        )


def check_program_archive(data: bytes, path: str | Path) -> None:
    """Refuse a .pt2 whose loading would run its content (module docstring); `UntrustedArtifactError`.

    Args:
        data: the archive's bytes.
        path: the file (named in errors).

    Raises:
        CheckpointError: not a zip archive, or a malformed layout (`archive_entries`).
        UntrustedArtifactError: an unexpected entry, another archive version, or a payload, sample input or graph
            that loading could run.
    """
    from torch.export.pt2_archive import constants as c  # 3 s with sympy: kept off the start-up path

    _, entries = archive_entries(data, path)
    patterns = _pt2_patterns()
    for name in entries:
        if not any(p.fullmatch(name) for p in patterns):
            raise UntrustedArtifactError(
                f"model file '{path}': unexpected archive entry '{name}' (flexlearn "
                f"programs hold only weights, tensor constants and the graph)"
            )
    check_archive_version(entries, path)
    for config, prefix in (
        (c.WEIGHTS_CONFIG_FILENAME_FORMAT, c.WEIGHT_FILENAME_PREFIX),
        (c.CONSTANTS_CONFIG_FILENAME_FORMAT, c.TENSOR_CONSTANT_FILENAME_PREFIX),
    ):
        check_payloads(entries, config.format("model"), prefix, path)
    check_sample_inputs(entries.get(c.SAMPLE_INPUTS_FILENAME_FORMAT.format("model"), b""), path)
    check_graph(entries.get(c.MODELS_FILENAME_FORMAT.format("model")), path)


def check_payloads(entries: dict[str, bytes], config_name: str, prefix: str, path: str | Path) -> None:
    """Check that every weight/constant is raw tensor bytes of this archive: no ``use_pickle``, no objects.

    Args:
        entries: the archive's entries (name below the root → bytes).
        config_name: the weights or constants config entry.
        prefix: the file-name prefix its payloads must have.
        path: the file (named in errors).

    Raises:
        UntrustedArtifactError: a missing or malformed config, or a payload that is not raw tensor bytes.
    """
    try:
        config = json.loads(entries[config_name])["config"]
        items = list(config.items())
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise UntrustedArtifactError(f"model file '{path}': entry '{config_name}' missing or malformed") from exc
    folder = config_name.rsplit("/", 1)[0] + "/"
    for fqn, meta in items:
        where = f"model file '{path}': '{config_name}' entry '{fqn}'"
        if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
            raise UntrustedArtifactError(
                f"{where} is marked use_pickle (torch.export.load would unpickle it, which can run code); refused"
            )
        name = meta.get("path_name")
        if not isinstance(name, str) or not name.startswith(prefix) or folder + name not in entries:
            raise UntrustedArtifactError(f"{where}: payload {name!r} is not a raw tensor of this archive")


def check_sample_inputs(data: bytes, path: str | Path) -> None:
    """Check that the sample inputs load with the weights-only unpickler (torch would fall back to full pickle).

    Args:
        data: the sample-inputs entry (empty: none).
        path: the file (named in errors).

    Raises:
        UntrustedArtifactError: they need the full unpickler.
    """
    if not data:
        return
    try:
        torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise UntrustedArtifactError(
            f"model file '{path}': sample inputs need more than the weights-only "
            f"unpickler (loading them could run code); refused"
        ) from exc


_OPERATOR_FNS = {
    "getitem",
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "neg",
    "pos",
    "abs",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "and_",
    "or_",
    "xor",
    "not_",
    "invert",
    "lshift",
    "rshift",
}
_SYMPY_NAMES = {
    "Symbol",
    "Integer",
    "Float",
    "Rational",
    "Add",
    "Mul",
    "Pow",
    "Max",
    "Min",
    "Abs",
    "Mod",
    "floor",
    "ceiling",
    "Eq",
    "Ne",
    "Lt",
    "Le",
    "Gt",
    "Ge",
    "StrictLessThan",
    "LessThan",
    "StrictGreaterThan",
    "GreaterThan",
    "Equality",
    "Unequality",
    "And",
    "Or",
    "Not",
    "Piecewise",
    "true",
    "false",
    "True",
    "False",
    "oo",
    "zoo",
    "nan",
    "positive",
    "negative",
    "integer",
    "real",
    "nonnegative",
    "nonpositive",
    "finite",
    "infinite",
    "zero",
    "nonzero",
    "even",
    "odd",
    "evaluate",
}
_EXPR_TOKEN = re.compile(r"\s+|'\w*'|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|[A-Za-z_]\w*|\*\*|//|[-+*/%(),=<>!&|~^]")


def _safe_target(target: str, known_ops: set[str]) -> bool:
    """A graph node target that resolves to a registered operator, not an arbitrary callable."""
    parts = target.split(".")
    if not all(p.isidentifier() for p in parts):
        return False
    if parts[:3] == ["torch", "ops", "higher_order"]:
        return len(parts) == 4 and not parts[3].startswith("_")
    if parts[:2] == ["torch", "ops"] and len(parts) in (4, 5):  # a dispatcher operator (overload)
        name = f"{parts[2]}::{parts[3]}"
        overload = parts[4] if len(parts) == 5 else "default"
        return f"{name}.{overload}" in known_ops or (overload == "default" and name in known_ops)
    return len(parts) == 2 and (
        (parts[0] == "_operator" and parts[1] in _OPERATOR_FNS) or (parts[0] == "math" and not parts[1].startswith("_"))
    )


def _safe_expr(expr: str) -> bool:
    """A symbolic shape expression that sympy can evaluate without touching anything but sympy arithmetic."""
    from torch.utils._sympy import functions as torch_sympy  # sympy: kept off the start-up path

    pos = 0
    while pos < len(expr):
        m = _EXPR_TOKEN.match(expr, pos)
        if m is None:
            return False
        tok = m.group(0)
        if (tok[0].isalpha() or tok[0] == "_") and not (
            tok in _SYMPY_NAMES
            or re.fullmatch(r"[a-z]+\d+", tok)
            or (not tok.startswith("_") and isinstance(getattr(torch_sympy, tok, None), type))
        ):
            return False
        pos = m.end()
    return True


def _walk(obj: Any) -> Iterator[tuple[str, Any]]:
    """(key, value) of every dict entry nested in ``obj`` (JSON)."""
    stack = [obj]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            for k, v in cur.items():
                yield k, v
                stack.append(v)
        elif isinstance(cur, list):
            stack.extend(cur)


_SPEC_TYPES = {None, "builtins.tuple", "builtins.list", "builtins.dict", "collections.OrderedDict"}


def _safe_spec(spec: Any) -> bool:
    """An input/output pytree spec of plain containers (others import modules or build objects on load)."""
    if not isinstance(spec, str) or "__enum__" in spec:
        return False
    try:
        tree = json.loads(spec)
    except ValueError:
        return False
    return all(v in _SPEC_TYPES for k, v in _walk(tree) if k == "type")


def check_graph(data: bytes | None, path: str | Path) -> None:
    """Check the operator targets, symbolic expressions and input/output specs of the serialized graph.

    Args:
        data: the graph entry ``models/<name>.json`` (None: missing).
        path: the file (named in errors).

    Raises:
        UntrustedArtifactError: missing or not JSON, an unknown operator or expression, or an unexpected spec.
    """
    try:
        graph = json.loads(data or b"")
    except ValueError as exc:
        raise UntrustedArtifactError(f"model file '{path}': graph 'models/model.json' missing or not JSON") from exc
    known_ops = set(torch._C._dispatch_get_all_op_names())
    for key, value in _walk(graph):
        bad = (
            (key == "target" and not (isinstance(value, str) and _safe_target(value, known_ops)))
            or (key == "expr_str" and not (isinstance(value, str) and _safe_expr(value)))
            or (key in ("in_spec", "out_spec") and not _safe_spec(value))
        )
        if bad:
            raise UntrustedArtifactError(
                f"model file '{path}': graph field '{key}' = {str(value)[:80]!r} is not "
                f"a plain operator, shape expression or container (loading or calling it "
                f"could run code); refused"
            )
