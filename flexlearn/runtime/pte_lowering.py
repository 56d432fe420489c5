"""Lowering of `torch.export` programs to one ExecuTorch program (``.pte`` bytes, portable kernels).

Lowering (`to_pte_bytes`) works around two float64 problems of ExecuTorch 1.5.1's portable kernels, found by the
parity tests: Python-float operands become float32 scalar tensors (``ScalarToTensorPass`` calls
``torch.tensor(value)``), so lowering runs with float64 as the default dtype; and ``sum.IntList_out`` (a sum over
a dimension, also what ``mv``/``addmv`` decompose into) accumulates float64 in float32 (relative error ~1e-8), so
float64 sums over dimensions are lowered as ``mean · count`` and ``mv``/``addmv`` as ``mm``. ExecuTorch is
imported only by the functions that need it (``pip install .[deploy]``).

A ``.pte`` carries its metadata as the constant method ``metadata_json`` (`METADATA_METHOD`, a JSON string,
`metadata_text`).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from typing import Any, Iterator, Mapping, Optional, Sequence

import torch
from torch import Tensor, nn

__all__ = ["METADATA_METHOD", "export_program", "lowering_decompositions", "metadata_text", "to_pte_bytes"]

METADATA_METHOD = "metadata_json"
_ATEN = torch.ops.aten


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
    """torch.export's core-ATen decompositions plus the float64 work-arounds of the module docstring.

    Returns:
        The decomposition table (op → function).
    """
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
    """`torch.export.export` of ``module`` in eval mode (non-strict); raises what torch raises.

    Args:
        module: the module (set to eval mode).
        args: its example inputs.
        dynamic_shapes: torch.export's dynamic-shape spec (None: static).

    Returns:
        The exported program.
    """
    return torch.export.export(module.eval(), args, dynamic_shapes=dynamic_shapes, strict=False)


def to_pte_bytes(
    programs: Mapping[str, torch.export.ExportedProgram], metadata: Mapping[str, Any], share_state: bool = False
) -> bytes:
    """Lower exported programs (method name → program) to one ExecuTorch program (portable kernels).

    Mutable buffers keep their initial values (``InitializedMutableBufferPass``; ExecuTorch leaves them
    uninitialised otherwise; its warning about them, and a deprecation inside ExecuTorch, are dropped:
    `KNOWN_LOWERING_WARNINGS`); ``share_state`` makes every method read and write one copy of the buffers of the
    same name. ``metadata`` becomes the constant method ``metadata_json``. Deterministic (same input, same bytes).

    Args:
        programs: method name → exported program.
        metadata: JSON-serialisable metadata.
        share_state: one shared copy of same-named buffers for all methods.

    Returns:
        The ``.pte`` bytes.
    """
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower  # optional: pip install .[deploy]
    from executorch.exir.passes import MemoryPlanningPass  # optional dependency (ExecuTorch)
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass  # optional dependency

    table = lowering_decompositions()
    with warnings.catch_warnings(), _default_dtype(torch.float64):
        for message in KNOWN_LOWERING_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        progs = {name: ep.run_decompositions(table) for name, ep in programs.items()}
        buffers = sorted({p for ep in progs.values() for p in ep.graph_signature.inputs_to_buffers})
        edge = to_edge_transform_and_lower(progs, constant_methods={METADATA_METHOD: metadata_text(metadata)})
        config = ExecutorchBackendConfig(
            passes=[InitializedMutableBufferPass(buffers)],
            memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=share_state),
            emit_mutable_buffer_names=share_state,
        )
        return bytes(edge.to_executorch(config).buffer)


KNOWN_LOWERING_WARNINGS = (
    # ExecuTorch warns of uninitialised buffers before it applies the pass that keeps their values (used above)
    "Mutation on a buffer in the model is detected",
    # ExecuTorch 1.5.1 copies pytree specs with an API torch 2.13 deprecates (12 times per bundle): not ours to fix
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",
)
"""Warnings of the ExecuTorch lowering that say nothing about the program: dropped while it runs (explained once
in docs/raspberry_pi.md); any other warning is shown."""


def metadata_text(metadata: Mapping[str, Any]) -> str:
    """The metadata as the JSON text a program carries (sorted keys; numbers a JSON encoder refuses as floats).

    Args:
        metadata: JSON-serialisable metadata.

    Returns:
        The JSON text.
    """
    return json.dumps(metadata, sort_keys=True, default=float)
