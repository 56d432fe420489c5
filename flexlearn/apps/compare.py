"""`flexlearn-compare`: several runs or a whole sweep side by side, from their local files.

    flexlearn-compare logs/train/runs/<run A> logs/train/runs/<run B> -o compare/
    flexlearn-compare logs/train/multiruns/<time>            # every run of a sweep

Writes the overlaid training curves (``compare_curves.png``), the test errors (``compare_test.png``) and a table
(``compare.md``, ``compare.json``: the keys that differ between the runs and the objective first, the best run
marked), then prints the best run's directory and checkpoint. Bad input (a path that is not a run or holds none,
an unreadable file) is exit 2 with one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from flexlearn.errors import FlexlearnError
from flexlearn.jobs.compare import compare_runs


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``flexlearn-compare`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="flexlearn-compare", description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories, or folders of runs (a sweep)")
    ap.add_argument("-o", "--out", type=Path, default=Path("compare"), help="output folder (default: ./compare)")
    ap.add_argument("--curves", nargs="*", default=None, help="metrics.csv columns to draw (default: losses, errors)")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse the command line, compare the runs, print a short summary (module docstring).

    Args:
        argv: the command-line arguments without the program name (None: sys.argv[1:]).

    Returns:
        The exit status: 0, or 2 on bad input (not a run, no run, an unreadable file).
    """
    a = build_parser().parse_args(argv)
    try:
        s = compare_runs(a.runs, a.out, a.curves)
    except FlexlearnError as e:
        print(f"flexlearn-compare: {e}", file=sys.stderr)
        return 2
    print(f"flexlearn-compare: {len(s['runs'])} runs; they differ in: {', '.join(s['differing_keys']) or 'nothing'}")
    if s["best_run"]:
        print(f"best by {s['objective']} = {s['best_objective']:.4g}: {s['best_run']}")
        print(f"  checkpoint: {s['best_checkpoint']}")
    else:
        print(f"no run has a best value of {s['objective']} yet (unfinished or interrupted runs)")
    print("wrote: " + ", ".join(s["files"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
