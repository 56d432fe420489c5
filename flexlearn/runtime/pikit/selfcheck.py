"""The kit's self-check: recorded frames and the outputs they must give, compared within `TOL`.

The kit writer (`flexlearn.runtime.kit`) runs each bundle of the kit over a short simulated recording
(``selfcheck/frames.jsonl``: reference, attitude sweeps, magnetometer rounds with coil pulses, a height target and
spool positions) with the tip-height controller, through the runner's own code, and stores the records in
``selfcheck/expected.json``. ``pi_runner.py --self-check`` runs the same frames on the machine at hand and compares:
the same number of records, ``flags`` and controller ``status`` identical, and every number of ``points``, ``h``
and ``v`` within `TOL` (absolute; metres and metres per second). Standard library only (the comparison also runs
without torch: ``python -m pikit.selfcheck compare a.json b.json``, as `scripts/pi_emulated_check.sh` does).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Optional

TOL = 1e-6  # |Δ| of points [m], h [m] and v [m/s] between two machines
FOLDER = "selfcheck"
FRAMES = "frames.jsonl"
EXPECTED = "expected.json"


def _numbers(rec: dict) -> list:
    pts = [c for p in rec.get("points") or [] for c in p]
    return pts + [rec.get("h"), rec.get("v")]


def _diff(a: Any, b: Any) -> float:
    """|a − b| of two JSON numbers (null: a missing value; null against null is 0, null against a number inf)."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else math.inf
    return abs(float(a) - float(b))


def compare_records(expected: list, actual: list) -> dict:
    """Compare two lists of runner records (module docstring).

    Args:
        expected: records as the kit recorded them.
        actual: records of this run.

    Returns:
        ``{"records", "max_abs_diff", "flags_identical", "status_identical", "passed", "first_problem"}``.
    """
    worst, flags_same, status_same, problem = 0.0, True, True, None
    if len(expected) != len(actual):
        problem = f"{len(actual)} records, expected {len(expected)}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e.get("flags") != a.get("flags"):
            flags_same = False
            problem = problem or f"record {i}: flags {a.get('flags')} != {e.get('flags')}"
        if e.get("status") != a.get("status"):
            status_same = False
            problem = problem or f"record {i}: status {a.get('status')} != {e.get('status')}"
        ne, na = _numbers(e), _numbers(a)
        d = max((_diff(x, y) for x, y in zip(ne, na)), default=0.0) if len(ne) == len(na) else math.inf
        if d > TOL and problem is None:
            problem = f"record {i}: outputs differ by {d:.3g} > {TOL:g}"
        worst = max(worst, d)
    return {
        "records": len(actual),
        "max_abs_diff": worst if math.isfinite(worst) else None,
        "flags_identical": flags_same,
        "status_identical": status_same,
        "passed": problem is None,
        "first_problem": problem,
    }


def load_json(path: str | Path, what: str) -> Any:
    """A JSON file; `ValueError` naming ``what`` and the file when it cannot be read.

    Args:
        path: the JSON file.
        what: what the file is, named in the error.

    Returns:
        The parsed JSON value.

    Raises:
        ValueError: the file cannot be read or is not JSON.
    """
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{what} '{path}': cannot be read ({exc})") from None


def compare_files(expected_path: str | Path, actual_path: str | Path) -> dict:
    """Compare two self-check outputs (``{"bundles": {name: [records]}}``) bundle by bundle.

    Args:
        expected_path: the reference (e.g. the x86 run).
        actual_path: the run to check (e.g. under emulation).

    Returns:
        ``{"bundles": {name: comparison}, "passed": bool}``.
    """
    exp = load_json(expected_path, "self-check output").get("bundles", {})
    act = load_json(actual_path, "self-check output").get("bundles", {})
    out: dict = {"bundles": {}}
    for name in sorted(set(exp) | set(act)):
        if name not in exp or name not in act:
            out["bundles"][name] = {"passed": False, "first_problem": "present in one output only"}
        else:
            out["bundles"][name] = compare_records(exp[name], act[name])
    out["passed"] = bool(out["bundles"]) and all(r["passed"] for r in out["bundles"].values())
    return out


def main(argv: Optional[list] = None) -> int:
    """``python -m pikit.selfcheck compare <expected.json> <actual.json>``: one JSON line; 0 equal, 1 not, 2 usage.

    Args:
        argv: the command-line arguments after the program name (None: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 when every bundle matches, 1 when not, 2 for bad usage or an unreadable file.
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "compare":
        print("usage: python -m pikit.selfcheck compare <expected.json> <actual.json>", file=sys.stderr)
        return 2
    try:
        result = compare_files(args[1], args[2])
    except (ValueError, AttributeError) as exc:
        print(f"selfcheck: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
