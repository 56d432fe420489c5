"""cosseratbench's catenary against the converged rod: every saved run of a results folder (any solver, any
resolution) measured against our rod run to convergence, beside the experiment's own reference; prints one JSON
object.

The experiment's reference, the elastic catenary, neglects bending; a rod with the scenario's EI bends over
√(EI/T) ≈ 3 cm at each pin, so part of its ``shape_error`` is physics, not discretisation. The converged rod
(``--fine`` elements, default 320) carries that bending. Per run:

* ``to_converged``: the largest distance [m] (the rope is 1 m long, so also in L) from a node of the run to the
  converged rod at the same unstretched arc length (the run's element count must divide ``--fine``);
* ``sag_to_converged``: the relative error of the lowest point's depth against the converged rod's;
* ``converged_to_reference``: the converged rod's own distance [m] from the catenary at the run's nodes, the floor
  of ``shape_error`` for a rod with bending at that resolution.

    .venv/bin/cosseratbench run catenary -s flexlearn -n 20 -o results
    <peer venv>/bin/cosseratbench run catenary -s pyelastica -s mujoco -n 20 -o results
    <peer venv>/bin/cosseratbench run catenary -s pyelastica -n 160 -o results-160
    .venv/bin/python scripts/bench_catenary_converged.py results results-160

(a results folder keeps one run per solver and variant, so each resolution goes to its own folder).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from cosseratbench import registry
from cosseratbench.experiments import catenary
from cosseratbench.metrics import max_distance_to_curve
from cosseratbench.trajectory import Trajectory

from flexlearn.physics.cosserat.benchmark import FlexlearnSolver


def converged_nodes(n_elements: int) -> np.ndarray:
    """Final node positions [m] (n_elements + 1, 3) of the default catenary with our rod at ``n_elements``."""
    experiment = registry.load_experiment("catenary")
    trajectory = FlexlearnSolver().run(experiment.scenario, n_elements=n_elements, n_frames=experiment.n_frames)
    return trajectory.positions[0][-1]


def compare(nodes: np.ndarray, fine: np.ndarray, reference: np.ndarray) -> dict:
    """The three figures of the module docstring for one run's final nodes (n + 1, 3) [m]."""
    n_elements = len(nodes) - 1
    if (len(fine) - 1) % n_elements:
        raise ValueError(f"a run of {n_elements} elements: its nodes are not nodes of the {len(fine) - 1}-element rod")
    matched = fine[:: (len(fine) - 1) // n_elements]
    lowest = fine[:, 2].min()
    return {
        "n_elements": n_elements,
        "to_converged": float(np.linalg.norm(nodes - matched, axis=1).max()),
        "sag_to_converged": float(abs(nodes[:, 2].min() - lowest) / abs(lowest)),
        "converged_to_reference": max_distance_to_curve(matched, reference),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure every saved default-variant catenary run under the results folders; print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+", help="cosseratbench results folders")
    parser.add_argument("--fine", type=int, default=320, help="elements of the converged rod")
    args = parser.parse_args(argv)
    folders = [folder / "catenary" / "default" for folder in args.results]
    runs = [run for folder in folders for run in sorted(folder.glob("*/trajectory.npz"))]
    if not runs:
        print(f"no saved catenary runs under {', '.join(map(str, args.results))}", file=sys.stderr)
        return 1
    scenario = registry.load_experiment("catenary").scenario
    reference = catenary._reference(scenario)
    fine = converged_nodes(args.fine)
    out = {
        "converged_elements": args.fine,
        "converged_sag_to_reference": float(abs(fine[:, 2].min() - reference[:, 2].min()) / abs(reference[:, 2].min())),
    }
    for run in runs:
        nodes = Trajectory.load(run).positions[0][-1]
        out[f"{run.parent.name}, {len(nodes) - 1} elements"] = compare(nodes, fine, reference)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
