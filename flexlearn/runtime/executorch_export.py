"""`torch.export` programs (.pt2) and ExecuTorch programs (.pte) of the deployable modules, with manifests.

torch 2.13 deprecates `torch.jit`; TorchScript stays the format the Pi runner loads by default, and this module
adds its successors for the modules that can be traced:

* the direction model (`flexlearn.models.direction_mlp.DirectionMLP`): stateless, exported as is (dynamic batch);
* the flexible-arm controller: its step restructured as a branch-free graph (`flexlearn.runtime.arm.graph`), one
  method ``forward(frame (S, 6), t (), lost ())``, state in buffers;
* the robot bundle's fused shape estimator, restructured likewise (`flexlearn.runtime.fusion.graph`): methods
  ``set_reference``, ``attitude``, ``magnetometer`` (a round; returns whether a pulse ended) and ``correct`` (that
  pulse's correction, called only then) sharing one state (a ``.pt2`` *program set*, one archive with a program
  per method whose buffers the loader ties together; a ``.pte`` with shared mutable buffers). The
  bundle's tip-height PID (`flexlearn.runtime.pikit.height_control`, Python floats, no tensor maths) is not a graph: its
  settings travel in the metadata and the runner runs it beside the program;
* modules that cannot be traced are diagnosed (`diagnose_export`: the file, line and construct that stops
  `torch.export`, and its error), never exported with made-up parity.

Each export writes the files and their manifests ``<file>.manifest.json`` as one all-or-nothing set
(`flexlearn.runtime.export.write_artifacts`); loaders verify the manifest first (``trust_unverified=False``) and
`.pt2` archives are also inspected (`flexlearn.runtime.program_archive.check_program_archive`). A ``.pte`` carries its
metadata as the constant method ``metadata_json`` (a JSON string) and is loaded with ExecuTorch's
``InternalConsistency`` verification. (A method without inputs trips ExecuTorch 1.5.1's constant lifting, so every
exported method takes at least one.)

Lowering (`to_pte_bytes`) works around two float64 problems of ExecuTorch 1.5.1's portable kernels, found by the
parity tests: Python-float operands become float32 scalar tensors (``ScalarToTensorPass`` calls
``torch.tensor(value)``), so lowering runs with float64 as the default dtype; and ``sum.IntList_out`` (a sum over
a dimension, also what ``mv``/``addmv`` decompose into) accumulates float64 in float32 (relative error ~1e-8), so
float64 sums over dimensions are lowered as ``mean · count`` and ``mv``/``addmv`` as ``mm``. ExecuTorch is
imported only by the functions that need it (``pip install .[deploy]``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib.util
import io
import json
import re
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import torch
from torch import Tensor, nn

from flexlearn.errors import CheckpointError, ConfigError
from flexlearn.runtime.arm.controller import ArmController
from flexlearn.runtime.arm.graph import ArmControllerGraph
from flexlearn.runtime.arm.outputs import FAULT_BITS, state_layout
from flexlearn.runtime.deploy import (
    BUNDLE_SCHEMA_VERSION,
    BundleSchemaError,
    DeployBundle,
    bundle_artifact,
    bundle_metadata,
)
from flexlearn.runtime.export import (
    METADATA_FILE,
    Artifact,
    load_program,
    program_artifact,
    read_verified,
    versions,
    write_artifacts,
)
from flexlearn.runtime.fusion.graph import FusedEstimatorGraph
from flexlearn.runtime.pikit.manifest import UntrustedArtifactError
from flexlearn.runtime.program_archive import (
    archive_entries,
    check_archive_version,
    check_graph,
    check_payloads,
    check_sample_inputs,
)


class ExecutorchMissingError(ConfigError):
    """A ``.pte`` was asked for where the ExecuTorch exporter is not installed."""


METADATA_METHOD = "metadata_json"
PTE_SCHEMA = 1
BUNDLE_METHODS = ("set_reference", "attitude", "magnetometer", "correct")
_GRAPH_METHODS = {
    "set_reference": "set_reference",
    "attitude": "attitude",
    "magnetometer": "magnetometer_round",
    "correct": "correct_pending",
}
_ATEN = torch.ops.aten


# -------------------------------------------------------------------------------------------- diagnosis
def diagnose_export(module: nn.Module, args: tuple, kwargs: Optional[dict] = None) -> dict[str, Any]:
    """Try `torch.export.export` (non-strict) on ``module``: ``{"exportable": True}`` or the first blocker.

    The blocker is ``{"exportable": False, "error": exception type, "message": first line, "where": "file:line"
    of the innermost flexlearn frame that raised, "code": that line}``, read from torch's "The following call
    raised this error" section (or the traceback). Traces a deep copy: tracing runs the module's Python code, which
    may assign its Python attributes.

    Args:
        module: the module to trace.
        args: its positional example inputs.
        kwargs: its keyword example inputs (None: none).
    """
    try:
        torch.export.export(copy.deepcopy(module).eval(), args, kwargs, strict=False)
        return {"exportable": True}
    except Exception as exc:  # every failure is reported, none is hidden
        text = str(exc)
        found = re.findall(r'File "([^"]+)", line (\d+), in \w+\n\s+(.+)', text)
        if not found:
            found = [
                (f.filename, str(f.lineno), (f.line or "").strip()) for f in traceback.extract_tb(exc.__traceback__)
            ]
        mine = [f for f in found if "/flexlearn/" in f[0]] or found or [("?", "0", "")]
        file, line, code = mine[-1]
        rel = file.split("/flexlearn/", 1)[-1] if "/flexlearn/" in file else file
        first = next((s.strip() for s in text.splitlines() if s.strip()), type(exc).__name__)
        return {
            "exportable": False,
            "error": type(exc).__name__,
            "message": first[:300],
            "where": f"flexlearn/{rel}:{line}" if "/flexlearn/" in file else f"{rel}:{line}",
            "code": code,
        }


def export_blockers(module: nn.Module, args: tuple) -> list[dict[str, Any]]:
    """Every data-dependent site `torch.export.draft_export` meets in one trace of ``module`` (it specialises each
    and continues): ``[{"where": "flexlearn/...:line", "code": the line, "expr": the symbolic condition}]``,
    innermost flexlearn frame per site, in trace order, without duplicates. Traces a deep copy of ``module``. When
    draft_export itself fails (its specialised graph can fail its own runtime asserts), the first blocker of
    `diagnose_export` is returned with ``"draft_export": "<error>"``."""
    from torch._logging.structured import INTERN_TABLE  # torch.export internals: only when diagnosing

    try:
        ep = torch.export.draft_export(copy.deepcopy(module).eval(), args, strict=False)
    except Exception as exc:  # reported, not hidden
        first = diagnose_export(module, args)
        first.pop("exportable", None)
        return [{**first, "draft_export": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}]
    report = ep._report  # type: ignore[attr-defined]  # set by draft_export, not in ExportedProgram's stubs
    # file names are interned once per process: those interned before this trace are not in the report's table
    names = {**{v: k for k, v in INTERN_TABLE.items()}, **report.str_to_filename}
    out: list[dict[str, Any]] = []
    for failure in report.failures:
        stack = [f for f in failure.data.get("user_stack", []) if "/flexlearn/" in str(names.get(f.get("filename")))]
        if not stack:
            continue
        frame = stack[-1]
        where = "flexlearn/" + str(names[frame["filename"]]).split("/flexlearn/", 1)[1] + f":{frame['line']}"
        if all(b["where"] != where for b in out):
            out.append(
                {"where": where, "code": str(frame.get("loc", "")).strip(), "expr": str(failure.data.get("expr", ""))}
            )
    return out


# ---------------------------------------------------------------------------------------------- lowering
def _mv(a: Tensor, x: Tensor) -> Tensor:
    return _ATEN.mm.default(a, x.unsqueeze(1)).squeeze(1)


def _addmv(b: Tensor, a: Tensor, x: Tensor, beta: float = 1, alpha: float = 1) -> Tensor:
    return b * beta + _mv(a, x) * alpha


def _sum_f64(
    x: Tensor, dims: Optional[Sequence[int]] = None, keepdim: bool = False, dtype: Optional[torch.dtype] = None
) -> Any:
    """float64 sum over dimensions as mean · count (ExecuTorch 1.5.1 portable sums over a dim in float32)."""
    if x.dtype != torch.float64 or not dims or dtype not in (None, torch.float64):
        return NotImplemented
    count = 1
    for d in dims:
        count *= x.shape[d]
    return _ATEN.mean.dim(x, list(dims), keepdim) * float(count)


def lowering_decompositions() -> Any:
    """torch.export's core-ATen decompositions plus the float64 work-arounds of the module docstring."""
    table = torch.export.default_decompositions()
    table[_ATEN.mv.default] = _mv
    table[_ATEN.addmv.default] = _addmv
    table[_ATEN.sum.dim_IntList] = _sum_f64
    return table


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def export_program(module: nn.Module, args: tuple, dynamic_shapes: Any = None) -> torch.export.ExportedProgram:
    """`torch.export.export` of ``module`` in eval mode (non-strict); raises what torch raises."""
    return torch.export.export(module.eval(), args, dynamic_shapes=dynamic_shapes, strict=False)


def to_pte_bytes(
    programs: Mapping[str, torch.export.ExportedProgram], metadata: Mapping[str, Any], share_state: bool = False
) -> bytes:
    """Lower exported programs (method name → program) to one ExecuTorch program (portable kernels).

    Mutable buffers keep their initial values (``InitializedMutableBufferPass``; ExecuTorch leaves them
    uninitialised otherwise); ``share_state`` makes every method read and write one copy of the buffers of the
    same name. ``metadata`` becomes the constant method ``metadata_json``. Deterministic (same input, same bytes).

    Args:
        programs: method name → exported program.
        metadata: JSON-serialisable metadata.
        share_state: one shared copy of same-named buffers for all methods.
    """
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower  # optional: pip install .[deploy]
    from executorch.exir.passes import MemoryPlanningPass  # optional dependency (ExecuTorch)
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass  # optional dependency

    table = lowering_decompositions()
    progs = {name: ep.run_decompositions(table) for name, ep in programs.items()}
    buffers = sorted({p for ep in progs.values() for p in ep.graph_signature.inputs_to_buffers})
    with _default_dtype(torch.float64):
        edge = to_edge_transform_and_lower(progs, constant_methods={METADATA_METHOD: _json(metadata)})
        config = ExecutorchBackendConfig(
            passes=[InitializedMutableBufferPass(buffers)],
            memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=share_state),
            emit_mutable_buffer_names=share_state,
        )
        return bytes(edge.to_executorch(config).buffer)


def _json(metadata: Mapping[str, Any]) -> str:
    return json.dumps(metadata, sort_keys=True, default=float)


def pt2_bytes(program: torch.export.ExportedProgram, metadata: Mapping[str, Any]) -> bytes:
    """The bytes of ``torch.export.save(program)`` with ``metadata.json`` (saved in memory: reproducible)."""
    buf = io.BytesIO()
    torch.export.save(program, buf, extra_files={METADATA_FILE: _json(metadata)})
    return buf.getvalue()


class MethodOf(nn.Module):
    """``owner.<name>`` as a module's ``forward`` (one exported program per method; buffers keep their names)."""

    def __init__(self, owner: nn.Module, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.name = name

    def forward(self, *args: Any) -> Any:
        return getattr(self.owner, self.name)(*args)


def program_set_bytes(programs: Mapping[str, torch.export.ExportedProgram], metadata: Mapping[str, Any]) -> bytes:
    """One ``.pt2`` archive holding a program per method (``package_pt2``) and ``metadata.json``."""
    from torch.export.pt2_archive._package import package_pt2  # 3 s with sympy: kept off the start-up path

    buf = io.BytesIO()
    package_pt2(buf, exported_programs=dict(programs), extra_files={METADATA_FILE: _json(metadata)})
    return buf.getvalue()


def check_program_set_archive(data: bytes, path: str | Path, names: Sequence[str]) -> None:
    """`flexlearn.runtime.program_archive.check_program_archive` for an archive of the programs ``names``: only their
    graphs, raw weights and constants, weights-only sample inputs and extra files; refused otherwise."""
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


# ------------------------------------------------------------------------------------------------ exports
def direction_model_artifacts(
    model: nn.Module, stem: str | Path, metadata: Optional[dict[str, Any]] = None, example: Optional[Tensor] = None
) -> list[Artifact]:
    """``<stem>.pt2`` (dynamic batch, `flexlearn.runtime.export.program_artifact`) and ``<stem>.pte`` (batch of
    one: the estimator's shape) of a `DirectionMLP`: ΔB (B, 3) float32 [T] → unit direction (B, 3)."""
    stem = Path(stem)
    meta = {
        "kind": "direction_model",
        "schema": PTE_SCHEMA,
        "inputs": {"delta_b": "(B, 3) float32, T"},
        "outputs": {"direction": "(B, 3) unit vector or exactly zero (no usable direction)"},
        **versions(),
        **(metadata or {}),
    }
    ex = example if example is not None else torch.tensor([[1e-5, -2e-5, 9e-5], [3e-5, 1e-5, -4e-5]])
    pt2 = program_artifact(model, ex, stem.with_suffix(".pt2"), meta)
    pte = to_pte_bytes({"forward": export_program(model, (ex[:1],))}, {**meta, "batch": 1})
    return [pt2, Artifact(stem.with_suffix(".pte"), pte, "executorch")]


def export_direction_model(model: nn.Module, stem: str | Path, metadata: Optional[dict[str, Any]] = None) -> list[Path]:
    """Write ``<stem>.pt2`` and ``<stem>.pte`` with their manifests (all or nothing)."""
    return write_artifacts(direction_model_artifacts(model, stem, metadata))


def arm_controller_artifacts(
    controller: ArmController, cfg: Any, stem: str | Path, extra: Optional[dict[str, Any]] = None
) -> list[Artifact]:
    """``<stem>.pt2`` and ``<stem>.pte`` of `ArmControllerGraph` built from ``controller`` (an `ArmController`)
    and its ``cfg`` (`ArmControllerConfig`); metadata as `export_arm_controller` writes it, plus the signature."""
    graph = ArmControllerGraph(controller)
    meta = {
        "kind": "flexible_arm_controller_graph",
        "schema": PTE_SCHEMA,
        "seed": "000 eq. (45)",
        "config": dataclasses.asdict(cfg),
        "n_imus": graph.n_imus,
        "state_layout": state_layout(graph.n_modes_total),
        "faults": dict(FAULT_BITS),
        "inputs": {
            "frame": "(S, 6) float64 [acc m/s^2 | gyr rad/s]",
            "t": "() float64 s",
            "lost": "() bool: the frame had the wrong shape (pass zeros)",
        },
        "outputs": {"torque": "(2,) N m", "state": "see state_layout", "fault": "() int64 bit mask"},
        **versions(),
        **(extra or {}),
    }
    args = (
        torch.zeros(graph.n_imus, 6, dtype=torch.float64),
        torch.zeros((), dtype=torch.float64),
        torch.zeros((), dtype=torch.bool),
    )
    program = export_program(graph, args)
    stem = Path(stem)
    pte = to_pte_bytes({"forward": export_program(ArmControllerGraph(controller), args)}, meta)
    return [
        Artifact(stem.with_suffix(".pt2"), pt2_bytes(program, meta), "program"),
        Artifact(stem.with_suffix(".pte"), pte, "executorch"),
    ]


def export_arm_controller_graph(
    controller: ArmController, cfg: Any, stem: str | Path, extra: Optional[dict[str, Any]] = None
) -> list[Path]:
    """Write ``<stem>.pt2`` and ``<stem>.pte`` of the controller step with their manifests (all or nothing)."""
    return write_artifacts(arm_controller_artifacts(controller, cfg, stem, extra))


def _bundle_programs(bundle: DeployBundle) -> dict[str, torch.export.ExportedProgram]:
    """The three estimator methods of ``bundle`` (a `DeployBundle`) exported from one `FusedEstimatorGraph`."""
    graph = FusedEstimatorGraph.from_estimator(bundle.estimator)
    n = graph.n
    f64 = torch.float64
    t, q = torch.zeros((), dtype=f64), torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=f64).repeat(n + 1, 1)
    args = {
        "set_reference": (q,),
        "attitude": (t, q),
        "magnetometer": (t, torch.zeros(n, 3, dtype=f64), torch.tensor(-1, dtype=torch.int64)),
        "correct": (torch.ones((), dtype=torch.bool),),
    }
    return {name: export_program(MethodOf(graph, _GRAPH_METHODS[name]), args[name]) for name in BUNDLE_METHODS}


def bundle_artifacts(
    bundle: DeployBundle,
    stem: str | Path,
    metadata: Optional[dict[str, Any]] = None,
    calibration: Optional[dict[str, Any]] = None,
) -> list[Artifact]:
    """``<stem>.pt`` (the TorchScript bundle, `flexlearn.runtime.deploy.bundle_artifact`), ``<stem>.pt2`` (program
    set) and ``<stem>.pte`` of a `DeployBundle`, with the TorchScript bundle's metadata plus ``format`` and
    ``methods`` (the estimator's entry points; the runner runs the PID of ``controller`` beside them)."""
    stem = Path(stem)
    ts = bundle_artifact(bundle, stem.with_suffix(".pt"), metadata, calibration)
    meta = program_metadata(bundle, ts)
    pt2 = program_set_bytes(_bundle_programs(bundle), {**meta, "format": "torch.export program set"})
    return [ts, Artifact(stem.with_suffix(".pt2"), pt2, "program_set"), pte_bundle_artifact(bundle, ts, meta)]


def program_metadata(bundle: DeployBundle, ts: Artifact) -> dict[str, Any]:
    """The TorchScript bundle's metadata plus the exported ``methods`` and the controller's clock settings."""
    meta = bundle_metadata(ts.data, ts.path)
    methods = {
        "set_reference": "quats (N+1, 4) f64 -> has_ref (N+1,) bool",
        "attitude": "t () f64 s, quats (N+1, 4) f64 -> points (N+1, 3) m, h () m, flags (N,) int64",
        "magnetometer": "t () f64 s, mags (N, 3) f64 T, coil () int64 -> pending () bool: a pulse ended, "
        "call 'correct' now",
        "correct": "request () bool (the round's answer) -> applied (N,) bool: the pending magnetic "
        "correction (none: all False)",
    }
    clock = bundle.controller.clock
    return {
        **meta,
        "methods": methods,
        "controller_clock": {"clock_jump": float(clock.max_gap), "clock_confirm": int(clock.confirm)},
    }


def pte_bundle_artifact(bundle: DeployBundle, ts: Artifact, meta: Optional[dict[str, Any]] = None) -> Artifact:
    """``<stem>.pte`` beside the TorchScript bundle ``ts`` of the same `DeployBundle` (the ExecuTorch program).

    Args:
        bundle: the eager bundle ``ts`` was scripted from.
        ts: its TorchScript artifact (the metadata is taken from it).
        meta: `program_metadata` when already computed.

    Returns:
        The ``.pte`` artifact (kind "executorch").

    Raises:
        ExecutorchMissingError: the ExecuTorch exporter is not installed.
    """
    if importlib.util.find_spec("executorch") is None:
        raise ExecutorchMissingError(
            "config 'bundle.format' = pte needs the ExecuTorch exporter, which is not installed here "
            "(pip install executorch==1.5.1, or .[deploy]); use bundle.format=pt"
        )
    meta = meta if meta is not None else program_metadata(bundle, ts)
    pte = to_pte_bytes(_bundle_programs(bundle), {**meta, "format": "executorch"}, share_state=True)
    return Artifact(ts.path.with_suffix(".pte"), pte, "executorch")


def export_bundle_programs(
    bundle: DeployBundle,
    stem: str | Path,
    metadata: Optional[dict[str, Any]] = None,
    calibration: Optional[dict[str, Any]] = None,
) -> list[Path]:
    """Write ``<stem>.pt``, ``<stem>.pt2`` and ``<stem>.pte`` of a `DeployBundle` with manifests (all or nothing)."""
    return write_artifacts(bundle_artifacts(bundle, stem, metadata, calibration))


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
        """The method ``name`` as a function of positional tensors (list of outputs)."""
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
    trust); its metadata is ``.metadata``."""
    return PteProgram(read_verified(path, trust_unverified=trust_unverified), path)


def load_pt2(path: str | Path, *, trust_unverified: bool = False) -> tuple[nn.Module, dict[str, Any]]:
    """A ``.pt2`` program as a callable module and its metadata (`flexlearn.runtime.export.load_program`: manifest
    verified unless opted out, archive always inspected before `torch.export.load` sees it)."""
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
    """An exported controller step (``.pt2`` or ``.pte``, by suffix) as an `ArmControllerStepper` + metadata."""
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
    metadata (schema version checked). ``.pte`` methods return lists, ``.pt2`` modules tuples or tensors."""
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
