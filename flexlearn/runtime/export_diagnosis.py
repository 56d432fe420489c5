"""Why a module cannot be traced by `torch.export`: the file, line and construct that stops it.

`diagnose_export` tries a non-strict `torch.export.export` and reports the first blocker (error type, message,
``flexlearn/<file>:<line>`` of the innermost flexlearn frame, and that line); `export_blockers` lists every
data-dependent site `torch.export.draft_export` meets in one trace (``where``, ``code``, the symbolic condition
``expr``). Both trace a deep copy: tracing runs the module's Python code, which may assign its attributes. Used for
the TorchScript modules that `flexlearn.runtime.executorch_export` does not export as they are
(docs/raspberry_pi.md, section 5; ``scripts/bench_runtime.py --formats``).
"""

from __future__ import annotations

import copy
import re
import traceback
from typing import Any, Optional

import torch
from torch import nn

__all__ = ["diagnose_export", "export_blockers"]


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

    Returns:
        ``{"exportable": True}`` or the blocker's dict.
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
    `diagnose_export` is returned with ``"draft_export": "<error>"``.

    Args:
        module: the module to trace.
        args: its positional example inputs.

    Returns:
        The sites, in trace order.
    """
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
