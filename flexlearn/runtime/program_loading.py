"""Loading of the exported programs of `flexlearn.runtime.executorch_export` (``.pt2``, ``.pte``), verified first.

Every loader checks the file's manifest ``<file>.manifest.json`` (`flexlearn.runtime.export.read_verified`;
``trust_unverified=True`` skips that, only for files you trust). A ``.pt2`` archive is also inspected before
`torch.export` reads it (`flexlearn.runtime.program_archive`; a program set by `check_program_set_archive`); a
``.pte`` is loaded with ExecuTorch's ``InternalConsistency`` verification and carries its metadata as the constant
method ``metadata_json``. Loaded: a `DirectionMLP` program, the flexible-arm controller step
(`ArmControllerStepper`: ``(frame (S, 6) [m/s², rad/s], t [s])`` → ``(torque (2,) [N m], state, fault)``) and the
robot bundle's estimator methods (`BUNDLE_METHODS`, one shared state). ExecuTorch is imported only by the ``.pte``
loaders (``pip install .[deploy]``).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import Tensor, nn

from flexlearn.errors import CheckpointError
from flexlearn.runtime.deploy import BUNDLE_SCHEMA_VERSION, BundleSchemaError
from flexlearn.runtime.export import METADATA_FILE, load_program, read_verified
from flexlearn.runtime.pikit.manifest import UntrustedArtifactError
from flexlearn.runtime.program_archive import (
    archive_entries,
    check_archive_version,
    check_graph,
    check_payloads,
    check_sample_inputs,
)
from flexlearn.runtime.pte_lowering import METADATA_METHOD

__all__ = [
    "BUNDLE_METHODS",
    "ArmControllerStepper",
    "PteMethod",
    "PteProgram",
    "check_program_set_archive",
    "load_arm_controller_program",
    "load_bundle_program",
    "load_program_set",
    "load_pt2",
    "load_pte",
]

BUNDLE_METHODS = ("set_reference", "attitude", "magnetometer", "correct")


def check_program_set_archive(data: bytes, path: str | Path, names: Sequence[str]) -> None:
    """`flexlearn.runtime.program_archive.check_program_archive` for an archive of the programs ``names``: only their
    graphs, raw weights and constants, weights-only sample inputs and extra files; refused otherwise.

    Args:
        data: the archive's bytes.
        path: its file (named in errors).
        names: the programs it must hold.

    Raises:
        UntrustedArtifactError: an entry the program set does not write.
        CheckpointError: a program missing, or a malformed payload, sample input or graph.
    """
    from torch.export.pt2_archive import constants as c  # 3 s with sympy: kept off the start-up path

    _, entries = archive_entries(data, path)
    fixed = {c.ARCHIVE_FORMAT_PATH, c.ARCHIVE_VERSION_PATH, "byteorder", ".data/version", ".data/serialization_id"}
    for name in names:
        fixed |= {
            c.MODELS_FILENAME_FORMAT.format(name),
            c.WEIGHTS_CONFIG_FILENAME_FORMAT.format(name),
            c.CONSTANTS_CONFIG_FILENAME_FORMAT.format(name),
            c.SAMPLE_INPUTS_FILENAME_FORMAT.format(name),
        }
    patterns = [
        re.compile(re.escape(c.WEIGHTS_DIR + c.WEIGHT_FILENAME_PREFIX) + r"\d+"),
        re.compile(re.escape(c.CONSTANTS_DIR + c.TENSOR_CONSTANT_FILENAME_PREFIX) + r"\w+"),
        re.compile(re.escape(c.EXTRA_DIR) + r"[\w.-]+"),
    ]
    for entry in entries:
        if entry not in fixed and not any(p.fullmatch(entry) for p in patterns):
            raise UntrustedArtifactError(
                f"model file '{path}': unexpected archive entry '{entry}' (flexlearn "
                f"program sets hold only weights, tensor constants and the graphs)"
            )
    check_archive_version(entries, path)
    for name in names:
        if c.MODELS_FILENAME_FORMAT.format(name) not in entries:
            raise CheckpointError(f"model file '{path}': no program '{name}' in the archive")
        for config, prefix in (
            (c.WEIGHTS_CONFIG_FILENAME_FORMAT, c.WEIGHT_FILENAME_PREFIX),
            (c.CONSTANTS_CONFIG_FILENAME_FORMAT, c.TENSOR_CONSTANT_FILENAME_PREFIX),
        ):
            check_payloads(entries, config.format(name), prefix, path)
        check_sample_inputs(entries.get(c.SAMPLE_INPUTS_FILENAME_FORMAT.format(name), b""), path)
        check_graph(entries.get(c.MODELS_FILENAME_FORMAT.format(name)), path)


def load_program_set(
    path: str | Path, names: Sequence[str], *, trust_unverified: bool = False
) -> tuple[dict[str, nn.Module], dict[str, Any]]:
    """The programs ``names`` of a ``.pt2`` program set as callable modules sharing one state (every module's
    buffers are the first module's tensors; the programs update them in place), and the metadata. Manifest
    verified unless opted out; the archive is always inspected first (`check_program_set_archive`).

    Args:
        path: the ``.pt2`` program set.
        names: the programs to load; the first one's buffers are shared by all.
        trust_unverified: skip the manifest check (not the archive inspection).

    Returns:
        ``(name → module, metadata)``.
    """
    from torch.export.pt2_archive._package import load_pt2  # 3 s with sympy: kept off the start-up path

    data = read_verified(path, trust_unverified=trust_unverified)
    check_program_set_archive(data, path, names)
    contents = load_pt2(io.BytesIO(data))
    modules: dict[str, nn.Module] = {name: contents.exported_programs[name].module() for name in names}
    shared = dict(modules[names[0]].named_buffers())
    for module in modules.values():
        for fqn, _ in list(module.named_buffers()):
            prefix, _, leaf = fqn.rpartition(".")
            (module.get_submodule(prefix) if prefix else module)._buffers[leaf] = shared[fqn]
    raw = contents.extra_files.get(METADATA_FILE, "{}")
    return modules, json.loads(raw.decode() if isinstance(raw, bytes) else raw)


# ------------------------------------------------------------------------------------------------ loading
class PteProgram:
    """A verified, loaded ``.pte``: ``metadata`` (dict) and ``method(name)`` → callable(*tensors) → list."""

    def __init__(self, data: bytes, path: str | Path) -> None:
        from executorch.runtime import Runtime, Verification  # optional dependency (ExecuTorch)

        try:
            self.program = Runtime.get().load_program(data, verification=Verification.InternalConsistency)
        except Exception as exc:  # the runtime raises RuntimeError / ValueError variants
            raise CheckpointError(f"model file '{path}': not a loadable ExecuTorch program ({exc})") from exc
        self.path = Path(path)
        self.metadata: dict[str, Any] = {}
        if METADATA_METHOD in self.program.method_names:
            out = self.program.load_method(METADATA_METHOD).execute([])
            self.metadata = json.loads(out[0]) if out and isinstance(out[0], str) else {}

    @property
    def method_names(self) -> set[str]:
        return set(self.program.method_names) - {METADATA_METHOD}

    def method(self, name: str) -> "PteMethod":
        """The method ``name`` as a function of positional tensors (list of outputs).

        Args:
            name: the method.

        Returns:
            The `PteMethod`.

        Raises:
            CheckpointError: no such method.
        """
        if name not in self.method_names:
            raise CheckpointError(f"model file '{self.path}': no method '{name}' (has {sorted(self.method_names)})")
        return PteMethod(self, name)


class PteMethod:
    """A loaded ``.pte`` method, callable with positional tensors. It holds its `PteProgram`: the runtime's
    method points into the program's memory, and calling it after the program is freed crashes the process."""

    def __init__(self, program: PteProgram, name: str) -> None:
        self.program = program
        self.name = name
        self._method = program.program.load_method(name)

    def __call__(self, *inputs: Any) -> list:
        return self._method.execute(list(inputs))


def load_pte(path: str | Path, *, trust_unverified: bool = False) -> PteProgram:
    """Load a ``.pte`` after verifying its manifest (``trust_unverified=True`` skips that, only for files you
    trust); its metadata is ``.metadata``.

    Args:
        path: the ``.pte`` file.
        trust_unverified: skip the manifest check.

    Returns:
        The loaded program.
    """
    return PteProgram(read_verified(path, trust_unverified=trust_unverified), path)


def load_pt2(path: str | Path, *, trust_unverified: bool = False) -> tuple[nn.Module, dict[str, Any]]:
    """A ``.pt2`` program as a callable module and its metadata (`flexlearn.runtime.export.load_program`: manifest
    verified unless opted out, archive always inspected before `torch.export.load` sees it).

    Args:
        path: the ``.pt2`` file.
        trust_unverified: skip the manifest check (not the archive inspection).

    Returns:
        ``(module, metadata)``.
    """
    return load_program(path, trust_unverified=trust_unverified)


class ArmControllerStepper:
    """``(frame (S, 6), t [s])`` → ``(torque (2,), state, fault)`` over an exported controller step: the eager
    `ArmControllerGraph`, a loaded ``.pt2`` module or a ``.pte`` method. Does the shape check (a frame of the
    wrong shape is a lost frame) and the float64 conversion the graph leaves to its caller."""

    def __init__(self, step: Callable[..., Sequence[Tensor]], n_imus: int) -> None:
        self.step = step
        self.n_imus = int(n_imus)
        self._zeros = torch.zeros(self.n_imus, 6, dtype=torch.float64)

    def __call__(self, frame: Tensor, t: float) -> tuple[Tensor, Tensor, Tensor]:
        lost = frame.dim() != 2 or tuple(frame.shape) != (self.n_imus, 6) or frame.is_complex()
        x = self._zeros if lost else frame.to(torch.float64).contiguous()
        out = self.step(x, torch.tensor(float(t), dtype=torch.float64), torch.tensor(lost))
        return out[0], out[1], out[2]


def load_arm_controller_program(
    path: str | Path, *, trust_unverified: bool = False
) -> tuple[ArmControllerStepper, dict[str, Any]]:
    """An exported controller step (``.pt2`` or ``.pte``, by suffix) as an `ArmControllerStepper` + metadata.

    Args:
        path: the program file.
        trust_unverified: skip the manifest check.

    Returns:
        ``(stepper, metadata)``.

    Raises:
        CheckpointError: another suffix, or metadata of another kind.
    """
    path = Path(path)
    step: Callable[..., Any]
    if path.suffix == ".pte":
        prog = load_pte(path, trust_unverified=trust_unverified)
        step, meta = prog.method("forward"), prog.metadata
    elif path.suffix == ".pt2":
        step, meta = load_pt2(path, trust_unverified=trust_unverified)
    else:
        raise CheckpointError(f"model file '{path}': expected a .pt2 or .pte controller program")
    if meta.get("kind") != "flexible_arm_controller_graph":
        raise CheckpointError(
            f"model file '{path}': metadata kind {meta.get('kind')!r}, expected 'flexible_arm_controller_graph'"
        )
    return ArmControllerStepper(step, int(meta["n_imus"])), meta


def load_bundle_program(
    path: str | Path, *, trust_unverified: bool = False
) -> tuple[dict[str, Callable[..., Any]], dict[str, Any]]:
    """The estimator methods of a bundle ``.pt2`` or ``.pte`` (`BUNDLE_METHODS` → callables of tensors) and its
    metadata (schema version checked). ``.pte`` methods return lists, ``.pt2`` modules tuples or tensors.

    Args:
        path: the bundle program file.
        trust_unverified: skip the manifest check.

    Returns:
        ``(method name → callable, metadata)``.

    Raises:
        CheckpointError: another suffix.
        BundleSchemaError: another schema version.
    """
    path = Path(path)
    methods: dict[str, Callable[..., Any]]
    if path.suffix == ".pte":
        prog = load_pte(path, trust_unverified=trust_unverified)
        methods, meta = {name: prog.method(name) for name in BUNDLE_METHODS}, prog.metadata
    elif path.suffix == ".pt2":
        modules, meta = load_program_set(path, BUNDLE_METHODS, trust_unverified=trust_unverified)
        methods = dict(modules)
    else:
        raise CheckpointError(f"bundle '{path}': expected a .pt2 or .pte bundle program")
    if meta.get("schema_version") != BUNDLE_SCHEMA_VERSION:
        raise BundleSchemaError(
            f"bundle '{path}': schema_version {meta.get('schema_version')!r}, expected {BUNDLE_SCHEMA_VERSION}"
        )
    return methods, meta
