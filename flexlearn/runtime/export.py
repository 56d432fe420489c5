"""Save and load deployable models: TorchScript (scripted, frozen) and `torch.export` (.pt2) archives.

Both carry a ``metadata.json`` extra file (input units, schema version, training metrics, config,
package version). The files load with torch alone (`torch.jit.load`, `torch.export.load`); the loaders here
add the checks below.

A model file is code (loading or calling it runs what its author put in it). Every export therefore writes
the sidecar manifest ``<file>.manifest.json`` (`flexlearn.runtime.manifest`: SHA-256, size, kind, versions)
and every loader verifies it first, refusing a missing or mismatching manifest unless the caller passes
``trust_unverified=True``. ``.pt2`` archives are also inspected before `torch.export.load` sees them: entries
it would unpickle (``use_pickle`` weights or constants, opaque/custom objects, sample inputs that need more
than the weights-only unpickler), compiled libraries and graph strings it would evaluate (operator targets
outside ``torch.ops``, symbolic expressions beyond plain sympy arithmetic) are refused with or without the
opt-out. Exports are byte-reproducible (saved to memory, so no temporary name ends up in the archive) and a
set of files is written all-or-nothing (`write_artifacts`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import torch
import torch.jit._recursive as recursive

import flexlearn
from flexlearn.atomic import OutputPathError, guard_output_file, remove_stale_temporaries
from flexlearn.errors import CheckpointError
from flexlearn.runtime.manifest import UntrustedArtifactError, manifest_path, manifest_record, verify_manifest

METADATA_FILE = "metadata.json"


@dataclasses.dataclass(frozen=True)
class Artifact:
    """One file of an export: its final ``path``, its bytes and its manifest ``kind``."""

    path: Path
    data: bytes
    kind: str


def versions() -> dict[str, str]:
    """``flexlearn_version`` and ``torch_version`` (recorded in metadata and manifests)."""
    return {"flexlearn_version": str(getattr(flexlearn, "__version__", "unknown")), "torch_version": torch.__version__}


def _metadata_json(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, sort_keys=True, default=float)


# ------------------------------------------------------------------------------------------------- writing
def check_output_path(path: str | Path, inputs: Iterable[str | Path] = ()) -> Path:
    """`flexlearn.atomic.guard_output_file`: refuse (`OutputPathError`, nothing touched) an output that is a
    directory, a symlink, below an existing file, protected, or one of ``inputs``."""
    return guard_output_file(path, inputs)


def _stage(final: Path, data: bytes, tag: str = "") -> Path:
    """Write ``data`` to a fresh temporary file beside ``final`` (usual permissions, fsynced); the name
    ``.<name>.tmp-<pid>-`` lets `flexlearn.atomic.remove_stale_temporaries` clean up after a killed writer."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{final.name}.tmp-{os.getpid()}-{tag}", dir=final.parent)
    except OSError as exc:
        raise OutputPathError(f"output '{final}': cannot be written ({exc.strerror or exc})") from exc
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _backup(final: Path) -> Path:
    """A temporary ``-old-`` copy of an existing ``final`` (a hard link where the file system allows)."""
    bak = _stage(final, b"", "old-")
    try:
        bak.unlink()
        os.link(final, bak)
    except OSError:
        shutil.copy2(final, bak)
    return bak


def _commit(staged: Sequence[tuple[Path, Path]]) -> None:
    """Rename each (temporary, final) pair in; on any failure put every replaced file back."""
    done: list[tuple[Path | None, Path]] = []  # (backup of the previous file or None, final) renamed in
    backups: list[Path] = []
    try:
        for tmp, final in staged:
            bak = _backup(final) if final.exists() else None
            if bak is not None:
                backups.append(bak)
            try:
                os.replace(tmp, final)
            except OSError as exc:
                raise OutputPathError(
                    f"output '{final}': cannot be replaced ({exc.strerror or exc}); the previous files are kept"
                ) from exc
            done.append((bak, final))
    except BaseException:
        for bak, final in reversed(done):
            if bak is None:
                final.unlink(missing_ok=True)
            else:
                os.replace(bak, final)
        raise
    finally:
        for bak in backups:
            bak.unlink(missing_ok=True)


def write_artifacts(artifacts: Sequence[Artifact], inputs: Iterable[str | Path] = ()) -> list[Path]:
    """Write every artifact and its manifest ``<file>.manifest.json`` so that all land or none.

    Output paths are checked first (`check_output_path`, against ``inputs`` too; an existing file is replaced only
    when a manifest beside it shows an earlier export, so a file of the user's own of that name is kept); all
    files are written to temporary names in their folders, then renamed in; on failure the temporaries are removed
    and replaced files are restored.
    """
    inputs = list(inputs)
    for art in artifacts:
        check_output_path(art.path, inputs)
        check_output_path(manifest_path(art.path), inputs)
        if Path(art.path).is_file() and not manifest_path(art.path).is_file():  # not an export of ours
            raise OutputPathError(
                f"output '{art.path}': an existing file that flexlearn did not export (no "
                f"'{manifest_path(art.path).name}' beside it); remove it yourself or choose "
                f"another folder"
            )
    staged: list[tuple[Path, Path]] = []
    try:
        for art in artifacts:
            path = Path(art.path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OutputPathError(f"output '{path}': its folder cannot be created ({exc.strerror or exc})") from exc
            for final in (path, manifest_path(path)):
                remove_stale_temporaries(final)
            tmp = _stage(path, art.data)
            staged.append((tmp, path))
            record = {**manifest_record(tmp, art.kind, versions()), "file": path.name}
            side = json.dumps(record, indent=2, sort_keys=True) + "\n"
            staged.append((_stage(manifest_path(path), side.encode()), manifest_path(path)))
        _commit(staged)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    return [Path(a.path) for a in artifacts]


class _SortedSet(set):
    """A set that iterates in a fixed order (sorted by type name and repr)."""

    def __iter__(self) -> Iterator[Any]:
        return iter(sorted(set.__iter__(self), key=lambda v: (type(v).__name__, repr(v))))


@contextlib.contextmanager
def _hash_seed_independent() -> Iterator[None]:
    """`torch.jit.script` collects a module's constants (``__constants__``, ``Final``) in a Python set, so the
    order of the generated code (e.g. ``in_features``/``out_features`` of ``nn.Linear``) follows the per-process
    string hash seed; while scripting, its sets iterate in sorted order instead."""
    saved = vars(recursive).get("set")
    recursive.set = _SortedSet  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if saved is None:
            delattr(recursive, "set")
        else:
            recursive.set = saved  # type: ignore[attr-defined]


def script(module: torch.nn.Module) -> torch.jit.ScriptModule:
    """`torch.jit.script` of ``module`` (eval mode) whose code does not depend on the process's hash seed."""
    with _hash_seed_independent():
        return torch.jit.script(module.eval())


def script_artifact(
    scripted: torch.jit.ScriptModule, path: str | Path, metadata: dict[str, Any], kind: str
) -> Artifact:
    """The bytes of a TorchScript archive of ``scripted`` with ``metadata.json`` (saved in memory)."""
    buf = io.BytesIO()
    torch.jit.save(scripted, buf, _extra_files={METADATA_FILE: _metadata_json(metadata)})
    return Artifact(Path(path), buf.getvalue(), kind)


def torchscript_artifact(module: torch.nn.Module, path: str | Path, metadata: dict[str, Any]) -> Artifact:
    """``module`` (eval mode) scripted and frozen, as an `Artifact` of kind "torchscript"."""
    frozen = torch.jit.freeze(script(module))
    return script_artifact(frozen, path, metadata, "torchscript")


def program_artifact(
    module: torch.nn.Module, example: torch.Tensor, path: str | Path, metadata: dict[str, Any]
) -> Artifact:
    """A `torch.export` program of ``module`` with a dynamic leading batch dimension (kind "program").

    ``example`` is an input of shape (B, ...) with B ≥ 2 (a batch of 1 would be specialised).
    """
    batch = torch.export.Dim("batch", min=1)
    program = torch.export.export(module.eval(), (example,), dynamic_shapes=({0: batch},))
    buf = io.BytesIO()
    torch.export.save(program, buf, extra_files={METADATA_FILE: _metadata_json(metadata)})
    return Artifact(Path(path), buf.getvalue(), "program")


def export_torchscript(module: torch.nn.Module, path: str | Path, metadata: dict[str, Any]) -> Path:
    """Script, freeze and save ``module`` (eval mode) to ``path`` with ``metadata`` and its manifest."""
    return write_artifacts([torchscript_artifact(module, path, metadata)])[0]


def export_program(module: torch.nn.Module, example: torch.Tensor, path: str | Path, metadata: dict[str, Any]) -> Path:
    """Save a `torch.export` program (.pt2) of ``module`` (see `program_artifact`) with its manifest."""
    return write_artifacts([program_artifact(module, example, path, metadata)])[0]


# ------------------------------------------------------------------------------------------------- loading
def read_verified(path: str | Path, *, trust_unverified: bool = False) -> bytes:
    """The bytes of model file ``path`` after `verify_manifest` (the bytes read are the bytes checked)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"model file '{path}': not found")
    data = path.read_bytes()
    verify_manifest(path, trust_unverified=trust_unverified, data=data)
    return data


def load_torchscript(
    path: str | Path, *, trust_unverified: bool = False
) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """Load a TorchScript archive and its metadata (CPU) after verifying its manifest.

    ``trust_unverified=True`` skips the manifest check (only for files you trust: a model file is code).
    """
    return load_torchscript_bytes(read_verified(path, trust_unverified=trust_unverified), path)


def load_torchscript_bytes(data: bytes, path: str | Path) -> tuple[torch.jit.ScriptModule, dict[str, Any]]:
    """`torch.jit.load` of already verified bytes (CPU) and their metadata; ``path`` names them in errors."""
    extra = {METADATA_FILE: ""}
    try:
        module = torch.jit.load(io.BytesIO(data), map_location="cpu", _extra_files=extra)
        meta = json.loads(extra[METADATA_FILE] or "{}")
    except (RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"model file '{path}': not a loadable TorchScript archive ({first})") from exc
    return module, meta


def load_program(path: str | Path, *, trust_unverified: bool = False) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Load a .pt2 program as a callable module and its metadata, after verifying its manifest and
    inspecting the archive (`check_program_archive`, done even with ``trust_unverified=True``)."""
    data = read_verified(path, trust_unverified=trust_unverified)
    check_program_archive(data, path)
    extra = {METADATA_FILE: ""}
    program = torch.export.load(io.BytesIO(data), extra_files=extra)
    return _AnyLeadingShape(program), json.loads(extra[METADATA_FILE] or "{}")


class _AnyLeadingShape(torch.nn.Module):
    """A one-input program of `program_artifact` (input (B, ...) with B dynamic) taking any leading shape, as the
    metadata's ``(..., 3)`` promises: the leading dimensions are flattened into B and restored on the output
    ((3,) → (1, 3) → (3,); (A, B, 3) → (A·B, 3) → (A, B, ...))."""

    def __init__(self, program: torch.export.ExportedProgram) -> None:
        super().__init__()
        self.program = program.module()
        user = set(program.graph_signature.user_inputs)
        shapes = [n.meta["val"].shape for n in program.graph.nodes if n.op == "placeholder" and n.name in user]
        self.rank = len(shapes[0]) if len(shapes) == 1 else None

    def forward(self, *args: Any) -> Any:
        x = args[0] if len(args) == 1 else None
        if self.rank is None or not isinstance(x, torch.Tensor) or x.dim() == self.rank or x.dim() < self.rank - 1:
            return self.program(*args)
        lead = x.shape[: x.dim() - self.rank + 1]
        y = self.program(x.reshape(-1, *x.shape[x.dim() - self.rank + 1 :]))
        return y.reshape(*lead, *y.shape[1:]) if isinstance(y, torch.Tensor) else y


# ---------------------------------------------------------------------------------- .pt2 archive inspection
def archive_entries(data: bytes, path: str | Path, only: str | None = None) -> tuple[str, dict[str, bytes]]:
    """(root folder, {name below the root: bytes}) of a zip model archive (just entry ``only`` if given);
    refuses malformed layouts (several root folders, duplicate or escaping names)."""
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
    """Refuse a .pt2 whose loading would run its content (module docstring); `UntrustedArtifactError`."""
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
