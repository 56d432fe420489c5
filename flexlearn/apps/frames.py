"""`flexlearn-frames`: write a simulated frame stream of the seed-002 robot for a dry run of the Pi runner.

    flexlearn-frames                                                     # 2d_curl, 10 s, JSON lines: frames.jsonl
    flexlearn-frames --scenario 3d_curl --duration 5 --out frames.bin    # binary frames (by the extension)
    python scripts/pi_runner.py bundle.pt --log frames.jsonl             # the dry run

The stream is a `flexlearn.sim.robot.simulate_robot` recording of one scenario of
`flexlearn.sim.shape_scenarios` (a reference frame, then attitude sweeps and magnetometer rounds in time order)
in the protocol ``flexlearn-frames/1`` (JSON lines) or ``flexlearn-binframes/1`` (binary, ``--format bin`` or
an output ending in ``.bin``); see docs/raspberry_pi.md. The simulator has no tendon, so the stream holds no
``spool`` frames: ``pi_runner --control`` on it warns and holds. Prints the output path and the frame counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from flexlearn.atomic import guard_output_file
from flexlearn.errors import FlexlearnError
from flexlearn.progress import ticker

SCENARIOS = ("2d_curl", "2d_obstacle", "3d_curl", "3d_hand")  # flexlearn.sim.shape_scenarios.SCENARIOS


def build_parser() -> argparse.ArgumentParser:
    """The command line of `flexlearn-frames` (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="flexlearn-frames", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        default="frames.jsonl",
        help="output file (.jsonl: JSON lines, .bin: binary frames; default frames.jsonl)",
    )
    ap.add_argument("--scenario", choices=SCENARIOS, default="2d_curl", help="motion (default 2d_curl)")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated time [s] (default 10)")
    ap.add_argument("--period", type=float, default=20.0, help="period of the scenario's motion [s] (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the robot's sensors and the motion (default 0)")
    ap.add_argument(
        "--format",
        choices=("jsonl", "bin"),
        default=None,
        help="frame protocol (default: bin for a .bin output, else jsonl)",
    )
    return ap


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Write the frame stream; print its path and frame counts (JSON); return the exit status.

    Args:
        argv: the command-line arguments without the program name (None: sys.argv[1:]).

    Returns:
        The exit status: 0, or 2 on a bad option or output.
    """
    a = build_parser().parse_args(argv)
    fmt = a.format or ("bin" if a.out.endswith(".bin") else "jsonl")
    if not (0 < a.duration <= 3600):
        print(f"flexlearn-frames: error: --duration {a.duration}: must be in (0, 3600] s", file=sys.stderr)
        return 2
    if not a.period > 0:
        print(f"flexlearn-frames: error: --period {a.period}: must be > 0 s", file=sys.stderr)
        return 2
    # heavy imports off the start-up path (torch)
    from flexlearn.replay.frames import write_frames_binary, write_frames_jsonl
    from flexlearn.sim.robot import simulate_robot
    from flexlearn.sim.shape_scenarios import scenario

    try:
        guard_output_file(a.out)
        with ticker(f"flexlearn-frames: simulating {a.duration:g} s of {a.scenario}"):
            rec = simulate_robot(scenario(a.scenario, period=a.period, seed=a.seed), a.duration, {"seed": a.seed})
        (write_frames_binary if fmt == "bin" else write_frames_jsonl)(rec, a.out)
    except FlexlearnError as exc:
        print(f"flexlearn-frames: error: {exc}", file=sys.stderr)
        return 2
    counts = {"ref": 1, "att": int(len(rec.att_t)), "mag": int(len(rec.mag_t))}
    print(
        json.dumps(
            {
                "out": str(Path(a.out)),
                "format": fmt,
                "scenario": a.scenario,
                "duration_s": a.duration,
                "segments": int(rec.meta["n_segments"]),
                "frames": counts,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
