"""Wall time of cosseratbench experiments for flexlearn and its peers, side by side in one run; prints one JSON object.

Each solver runs in whichever Python environment has it: flexlearn here, the peers (PyElastica, MuJoCo) through
``--peer-python`` (this script runs itself there with ``--solvers``), one after another on the same machine:

    .venv/bin/python scripts/bench_cosseratbench_speed.py crossing pile capstan --peer-python <peer venv>/bin/python

Per experiment (default variant, ``-n`` elements) and solver: the median of ``--repeats`` runs of cosseratbench's
own timing (``wall_time``: the simulation alone, after its warm-up run), and each peer's median over flexlearn's
(the speed-up).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from cosseratbench.experiment import run
from cosseratbench.registry import load_experiment, load_solver


def medians(experiments: list[str], solvers: list[str], n_elements: int, repeats: int) -> dict:
    """``{experiment: {solver: {"median_wall_s", "walls_s"}}}`` for the solvers this environment has."""
    out: dict = {}
    for name in experiments:
        experiment = load_experiment(name)
        for solver in solvers:
            walls = [run(experiment, load_solver(solver), n_elements=n_elements).wall_time for _ in range(repeats)]
            out.setdefault(name, {})[solver] = {"median_wall_s": statistics.median(walls), "walls_s": walls}
    return out


def main(argv: list[str] | None = None) -> int:
    """Time the experiments here and, with ``--peer-python``, the peers there; print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiments", nargs="+")
    parser.add_argument("-n", "--n-elements", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--solvers", nargs="+", default=["flexlearn"])
    parser.add_argument("--peer-python", help="a Python with cosseratbench and the peers' packages")
    parser.add_argument("--peers", nargs="+", default=["pyelastica", "mujoco"])
    parser.add_argument("--peer-repeats", type=int, default=3)
    args = parser.parse_args(argv)
    result = medians(args.experiments, args.solvers, args.n_elements, args.repeats)
    if args.peer_python:
        command = [args.peer_python, __file__, *args.experiments, "-n", str(args.n_elements), "--repeats",
                   str(args.peer_repeats), "--solvers", *args.peers]  # fmt: skip
        peers = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        for name, timed in peers.items():
            result[name].update(timed)
            ours = result[name]["flexlearn"]["median_wall_s"]
            for peer in args.peers:
                result[name][f"speedup_vs_{peer}"] = timed[peer]["median_wall_s"] / ours
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
