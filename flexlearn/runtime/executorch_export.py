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
* modules that cannot be traced are diagnosed (`flexlearn.runtime.export_diagnosis.diagnose_export`: the file, line
  and construct that stops `torch.export`, and its error), never exported with made-up parity.

Each export writes the files and their manifests ``<file>.manifest.json`` as one all-or-nothing set
(`flexlearn.runtime.export.write_artifacts`); the loaders (`flexlearn.runtime.program_loading`) verify the manifest
first (``trust_unverified=False``) and inspect `.pt2` archives (`flexlearn.runtime.program_archive`). A ``.pte``
carries its metadata as the constant method ``metadata_json`` (a JSON string). (A method without inputs trips
ExecuTorch 1.5.1's constant lifting, so every exported method takes at least one.)

Lowering to ExecuTorch, with its float64 work-arounds: `flexlearn.runtime.pte_lowering`; why a module cannot be
traced: `flexlearn.runtime.export_diagnosis`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
from pathlib import Path
from typing import Any, Mapping, Optional

import torch
from torch import Tensor, nn

from flexlearn.errors import ConfigError
from flexlearn.runtime.arm.controller import ArmController
from flexlearn.runtime.arm.graph import ArmControllerGraph
from flexlearn.runtime.arm.outputs import FAULT_BITS, state_layout
from flexlearn.runtime.deploy import DeployBundle, bundle_artifact, bundle_metadata
from flexlearn.runtime.export import METADATA_FILE, Artifact, program_artifact, versions, write_artifacts
from flexlearn.runtime.fusion.graph import FusedEstimatorGraph
from flexlearn.runtime.program_loading import BUNDLE_METHODS
from flexlearn.runtime.pte_lowering import export_program, metadata_text, to_pte_bytes


class ExecutorchMissingError(ConfigError):
    """A ``.pte`` was asked for where the ExecuTorch exporter is not installed."""


PTE_SCHEMA = 1
_GRAPH_METHODS = {
    "set_reference": "set_reference",
    "attitude": "attitude",
    "magnetometer": "magnetometer_round",
    "correct": "correct_pending",
}


def pt2_bytes(program: torch.export.ExportedProgram, metadata: Mapping[str, Any]) -> bytes:
    """The bytes of ``torch.export.save(program)`` with ``metadata.json`` (saved in memory: reproducible).

    Args:
        program: the exported program.
        metadata: JSON-serialisable metadata.

    Returns:
        The ``.pt2`` bytes.
    """
    buf = io.BytesIO()
    torch.export.save(program, buf, extra_files={METADATA_FILE: metadata_text(metadata)})
    return buf.getvalue()


class MethodOf(nn.Module):
    """``owner.<name>`` as a module's ``forward`` (one exported program per method; buffers keep their names)."""

    def __init__(self, owner: nn.Module, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.name = name

    def forward(self, *args: Any) -> Any:
        """Call ``owner.<name>``.

        Args:
            *args: its inputs.

        Returns:
            Its outputs.
        """
        return getattr(self.owner, self.name)(*args)


def program_set_bytes(programs: Mapping[str, torch.export.ExportedProgram], metadata: Mapping[str, Any]) -> bytes:
    """One ``.pt2`` archive holding a program per method (``package_pt2``) and ``metadata.json``.

    Args:
        programs: method name → exported program.
        metadata: JSON-serialisable metadata.

    Returns:
        The archive's bytes.
    """
    from torch.export.pt2_archive._package import package_pt2  # 3 s with sympy: kept off the start-up path

    buf = io.BytesIO()
    package_pt2(buf, exported_programs=dict(programs), extra_files={METADATA_FILE: metadata_text(metadata)})
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------ exports
def direction_model_artifacts(
    model: nn.Module, stem: str | Path, metadata: Optional[dict[str, Any]] = None, example: Optional[Tensor] = None
) -> list[Artifact]:
    """``<stem>.pt2`` (dynamic batch, `flexlearn.runtime.export.program_artifact`) and ``<stem>.pte`` (batch of
    one: the estimator's shape) of a `DirectionMLP`: ΔB (B, 3) float32 [T] → unit direction (B, 3).

    Args:
        model: the direction model.
        stem: the files' path without suffix.
        metadata: merged into the metadata.
        example: an example input (B, 3) [T] (None: two fixed ΔB).

    Returns:
        The ``.pt2`` and ``.pte`` artifacts.
    """
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
    """Write ``<stem>.pt2`` and ``<stem>.pte`` of a direction model with their manifests (all or nothing).

    Args:
        model: the direction model.
        stem: the files' path without suffix.
        metadata: merged into the metadata.

    Returns:
        The paths written.
    """
    return write_artifacts(direction_model_artifacts(model, stem, metadata))


def arm_controller_artifacts(
    controller: ArmController, cfg: Any, stem: str | Path, extra: Optional[dict[str, Any]] = None
) -> list[Artifact]:
    """``<stem>.pt2`` and ``<stem>.pte`` of `ArmControllerGraph` built from ``controller`` (an `ArmController`)
    and its ``cfg`` (`ArmControllerConfig`); metadata as `export_arm_controller` writes it, plus the signature.

    Args:
        controller: the controller (its current state is exported).
        cfg: its `ArmControllerConfig`.
        stem: the files' path without suffix.
        extra: merged into the metadata.

    Returns:
        The ``.pt2`` and ``.pte`` artifacts.
    """
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
    """Write ``<stem>.pt2`` and ``<stem>.pte`` of the controller step with their manifests (all or nothing).

    Args:
        controller: the controller (its current state is exported).
        cfg: its `ArmControllerConfig`.
        stem: the files' path without suffix.
        extra: merged into the metadata.

    Returns:
        The paths written.
    """
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
    ``methods`` (the estimator's entry points; the runner runs the PID of ``controller`` beside them).

    Args:
        bundle: the eager bundle.
        stem: the files' path without suffix.
        metadata: merged into the metadata.
        calibration: the calibration's other fields for the metadata.

    Returns:
        The ``.pt``, ``.pt2`` and ``.pte`` artifacts.
    """
    stem = Path(stem)
    ts = bundle_artifact(bundle, stem.with_suffix(".pt"), metadata, calibration)
    meta = program_metadata(bundle, ts)
    return [ts, pt2_bundle_artifact(bundle, ts, meta), pte_bundle_artifact(bundle, ts, meta)]


def program_metadata(bundle: DeployBundle, ts: Artifact) -> dict[str, Any]:
    """The TorchScript bundle's metadata plus the exported ``methods`` and the controller's clock settings.

    Args:
        bundle: the eager bundle ``ts`` was scripted from.
        ts: its TorchScript artifact.

    Returns:
        The metadata.
    """
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


def pt2_bundle_artifact(bundle: DeployBundle, ts: Artifact, meta: Optional[dict[str, Any]] = None) -> Artifact:
    """``<stem>.pt2`` beside the TorchScript bundle ``ts`` of the same `DeployBundle` (the `torch.export` program set;
    torch alone runs it).

    Args:
        bundle: the eager bundle ``ts`` was scripted from.
        ts: its TorchScript artifact (the metadata is taken from it).
        meta: `program_metadata` when already computed.

    Returns:
        The ``.pt2`` artifact (kind "program_set").
    """
    meta = meta if meta is not None else program_metadata(bundle, ts)
    pt2 = program_set_bytes(_bundle_programs(bundle), {**meta, "format": "torch.export program set"})
    return Artifact(ts.path.with_suffix(".pt2"), pt2, "program_set")


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
    """Write ``<stem>.pt``, ``<stem>.pt2`` and ``<stem>.pte`` of a `DeployBundle` with manifests (all or nothing).

    Args:
        bundle: the eager bundle.
        stem: the files' path without suffix.
        metadata: merged into the metadata.
        calibration: the calibration's other fields for the metadata.

    Returns:
        The paths written.
    """
    return write_artifacts(bundle_artifacts(bundle, stem, metadata, calibration))
