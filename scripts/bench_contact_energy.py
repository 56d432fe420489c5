"""Energy drift and penetration of every solver's saved cosseratbench runs with contact (capstan, pile), measured the
same way for all (flexlearn.physics.cosserat.recorded_energy: energy from node positions alone); prints one JSON
object.

The runs are those a cosseratbench results folder holds, each solver run in whichever environment has it:

    .venv/bin/cosseratbench run capstan pile -s flexlearn -n 20 -o results
    <peer venv>/bin/cosseratbench run capstan pile -s pyelastica -s mujoco -n 20 -o results
    .venv/bin/python scripts/bench_contact_energy.py results

Per run: the largest rise of E = K + U_g + U_stretch + U_bend above its running minimum, in units of the rod's
weight times its length (m |g| L), after every driven end has stopped (the capstan from t = 0; the pile's clamp
does work while it feeds the rope); the energy lost over the run in the same units; and cosseratbench's own
``max_penetration`` and ``max_rod_overlap`` [r] (segments: polylines through the nodes), and ``max_curve_overlap``
[r], the same overlap of the smooth centrelines through the same nodes that flexlearn's rod–rod contact keeps apart
(flexlearn.physics.cosserat.rod_contact.deepest_curve_overlap). Only the default variant of each experiment is read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from cosseratbench import registry
from cosseratbench.scenario import Scenario, neighbour_elements
from cosseratbench.trajectory import Trajectory

from flexlearn.physics.cosserat.recorded_energy import largest_rise, recorded_energy
from flexlearn.physics.cosserat.rod_contact import deepest_curve_overlap


def drive_stops(scenario: Scenario) -> float:
    """When the last driven end of the scenario stops moving [s] (0 without one)."""
    motions = [m for rod in scenario.rods for m in (rod.start_motion, rod.end_motion) if m is not None]
    return max((float(m.times[-1]) for m in motions), default=0.0)


def run_energy(scenario: Scenario, trajectory: Trajectory) -> dict:
    """Energy rise and loss of one run's rods, in units of m |g| L (module docstring)."""
    g = np.asarray(scenario.gravity, dtype=float)
    total, scale = 0.0, 0.0
    for rod, positions in zip(scenario.rods, trajectory.positions):
        n_elements = positions.shape[1] - 1
        ell = rod.length / n_elements
        masses = np.full(n_elements + 1, rod.material.density * rod.area * ell)
        masses[[0, -1]] *= 0.5
        stiffness = (rod.material.youngs_modulus * rod.area, rod.material.youngs_modulus * rod.second_moment_of_area)
        total = total + recorded_energy(trajectory.times, positions, masses, ell, stiffness, g)["total"]
        scale += masses.sum() * float(np.linalg.norm(g)) * rod.length
    after = drive_stops(scenario)
    kept = np.asarray(trajectory.times) >= after
    return {
        "energy_rise": largest_rise(trajectory.times, total, after) / scale,
        "energy_lost": float(total[kept][0] - total[kept][-1]) / scale,
        "from_time": after,
    }


def curve_overlap(scenario: Scenario, trajectory: Trajectory) -> float:
    """The deepest overlap of the rods' smooth centrelines (:func:`deepest_curve_overlap`), in radii of the first rod,
    skipping neighbours by cosseratbench's own rule; NaN for rods of different sizes (not measured)."""
    positions = [np.asarray(p) for p in trajectory.positions]
    if len({p.shape for p in positions}) != 1:
        return float("nan")
    rod = scenario.rods[0]
    frames = torch.as_tensor(np.stack(positions, 1), dtype=torch.float64)  # (F, B, N+1, 3)
    apart = neighbour_elements(rod.radius, rod.length / (frames.shape[2] - 1))
    return deepest_curve_overlap(frames, rod.radius, apart) / rod.radius


def main(argv: list[str] | None = None) -> int:
    """Measure every saved run of the chosen experiments; print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a cosseratbench results folder")
    parser.add_argument("--experiments", nargs="+", default=["capstan", "pile"])
    args = parser.parse_args(argv)
    out: dict = {}
    for name in args.experiments:
        scenario = registry.load_experiment(name).scenario
        folder = args.results / name / "default"
        for run in sorted(folder.glob("*/trajectory.npz")):
            summary = json.loads((run.parent / "result.json").read_text())
            observations = summary.get("observations", {})
            trajectory = Trajectory.load(run)
            out.setdefault(name, {})[run.parent.name] = {
                **run_energy(scenario, trajectory),
                "n_elements": summary.get("n_elements"),
                "max_penetration": observations.get("max_penetration"),
                "max_rod_overlap": observations.get("max_rod_overlap"),
                "max_curve_overlap": curve_overlap(scenario, trajectory),
            }
        if name not in out:
            print(f"no saved runs of {name} under {folder}", file=sys.stderr)
    print(json.dumps(out, indent=1))
    return 0 if out else 1


if __name__ == "__main__":
    raise SystemExit(main())
