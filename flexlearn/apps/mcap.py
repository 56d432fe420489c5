"""`flexlearn-mcap`: the Pi runner's output (and the frame log it read) as a playable MCAP file for Foxglove.

    flexlearn-mcap poses.jsonl --frames frames.jsonl -o run.mcap

Topics: ``/<name>/backbone`` (``foxglove.SceneUpdate``: the estimated backbone per step), ``/<name>/status``
(tip height, flags, control values) and, with ``--frames``, ``/<name>/frames`` (the input frames). Unreadable
lines are skipped and counted, as the runner does; a file without any playable step is exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from flexlearn.errors import ArgumentError, DataError
from flexlearn.replay.to_mcap import runner_output_to_mcap


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``flexlearn-mcap`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="flexlearn-mcap", description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    ap.add_argument("output", type=Path, help="the Pi runner's output (JSON lines or CSV)")
    ap.add_argument("--frames", type=Path, default=None, help="the frame log the runner read (--log)")
    ap.add_argument("-o", "--mcap", type=Path, default=None, help="the MCAP file (default: <output>.mcap)")
    ap.add_argument("--name", default="robot", help="topic prefix (default: robot)")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``flexlearn-mcap``: convert a runner output (and its frame log) into a playable MCAP file.

    Args:
        argv: the command-line arguments without the program name (None: sys.argv[1:]).

    Returns:
        The exit status: 0, or 2 on an unreadable or unplayable input.
    """
    a = build_parser().parse_args(argv)
    target = a.mcap or a.output.with_suffix(".mcap")
    try:
        s = runner_output_to_mcap(a.output, target, a.name, a.frames)
    except (DataError, ArgumentError) as e:
        print(f"flexlearn-mcap: {e}", file=sys.stderr)
        return 2
    skipped = f"; {s['skipped']} unreadable line(s) skipped, first: line {s['first_skipped_line']}"
    print(
        f"flexlearn-mcap: {s['steps']} steps ({s['t_start_s']:.3f}–{s['t_end_s']:.3f} s)"
        + (f" and {s['frames']} input frames" if s["frames"] else "")
        + (skipped if s["skipped"] else "")
        + f" → {target}\nopen it in Foxglove (File → Open local file) or read it with the mcap package"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
