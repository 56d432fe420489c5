"""`flexlearn-mcap`: the Pi runner's output (and the frame log it read) as a playable MCAP file for Foxglove.

    flexlearn-mcap poses.jsonl --frames frames.jsonl -o run.mcap
    flexlearn-mcap poses.jsonl --rrd                     # also poses.rrd for rerun (pip install 'flexlearn[rerun]')
    flexlearn-mcap rod.mcap --rrd                        # any flexlearn MCAP file (Cosserat, CPR, arm) for rerun

Topics: ``/<name>/backbone`` (``foxglove.SceneUpdate``: the estimated backbone per step), ``/<name>/status``
(tip height, flags, control values) and, with ``--frames``, ``/<name>/frames`` (the input frames). Unreadable
lines are skipped and counted, as the runner does; a file without any playable step is exit 2. ``--rrd`` also
writes the MCAP file as a rerun recording beside it (`flexlearn.replay.to_rerun`); an input that is already an
``.mcap`` file is only converted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from flexlearn.errors import ArgumentError, ConfigError, DataError
from flexlearn.replay.to_mcap import runner_output_to_mcap
from flexlearn.replay.to_rerun import mcap_to_rrd


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``flexlearn-mcap`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="flexlearn-mcap", description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    ap.add_argument("output", type=Path, help="the Pi runner's output (JSON lines or CSV), or an .mcap file (--rrd)")
    ap.add_argument("--frames", type=Path, default=None, help="the frame log the runner read (--log)")
    ap.add_argument("-o", "--mcap", type=Path, default=None, help="the MCAP file (default: <output>.mcap)")
    ap.add_argument("--name", default="robot", help="topic prefix (default: robot)")
    ap.add_argument("--rrd", action="store_true", help="also write <mcap>.rrd, a rerun recording")
    return ap


def _convert(a: argparse.Namespace) -> Path:
    """Write the MCAP file of a runner output (printing what it holds); the MCAP file's path."""
    target = a.mcap or a.output.with_suffix(".mcap")
    s = runner_output_to_mcap(a.output, target, a.name, a.frames)
    skipped = f"; {s['skipped']} unreadable line(s) skipped, first: line {s['first_skipped_line']}"
    print(
        f"flexlearn-mcap: {s['steps']} steps ({s['t_start_s']:.3f}–{s['t_end_s']:.3f} s)"
        + (f" and {s['frames']} input frames" if s["frames"] else "")
        + (skipped if s["skipped"] else "")
        + f" → {target}\nopen it in Foxglove (File → Open local file) or read it with the mcap package"
    )
    return target


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``flexlearn-mcap``: convert a runner output (and its frame log) into a playable MCAP file, or for rerun.

    Args:
        argv: the command-line arguments without the program name (None: sys.argv[1:]).

    Returns:
        The exit status: 0, or 2 on an unreadable or unplayable input or a missing rerun-sdk.
    """
    a = build_parser().parse_args(argv)
    try:
        if a.output.suffix == ".mcap":
            if not a.rrd:
                raise ArgumentError(f"'{a.output}' is already an MCAP file; add --rrd to convert it for rerun")
            target = a.output
        else:
            target = _convert(a)
        if a.rrd:
            r = mcap_to_rrd(target, target.with_suffix(".rrd"))
            print(
                f"flexlearn-mcap: {r['entities']} shapes, {r['transforms']} frames and {r['scalars']} values "
                f"→ {r['rrd']}\nopen it with rerun ({Path(r['rrd']).name})"
            )
    except (DataError, ArgumentError, ConfigError) as e:
        print(f"flexlearn-mcap: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
