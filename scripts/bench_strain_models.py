"""The cosseratbench experiments with each strain model of the rod (flexlearn.physics.cosserat.strains), side by side
in one process; prints one JSON object: per experiment and strain model, the experiment's metrics and the wall time.

    .venv/bin/python scripts/bench_strain_models.py --experiments catenary cantilever pendulum -n 20
    .venv/bin/python scripts/bench_strain_models.py --experiments crossing --strains midpoint geodesic -n 40

``adapter`` is the adapter's own choice (the geodesic strain for every rod).
"""

from __future__ import annotations

import argparse
import json
import time

from cosseratbench import experiment as bench
from cosseratbench import registry

from flexlearn.physics.cosserat.benchmark import FlexlearnSolver


def main(argv: list[str] | None = None) -> int:
    """Run every experiment with every strain model; print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", nargs="+", default=["catenary", "cantilever", "pendulum"])
    parser.add_argument("--strains", nargs="+", default=["midpoint", "geodesic"])
    parser.add_argument("-n", "--n-elements", type=int, default=20)
    args = parser.parse_args(argv)
    out: dict = {}
    for name in args.experiments:
        experiment = registry.load_experiment(name)
        for strain in args.strains:
            solver = FlexlearnSolver(strain=None if strain == "adapter" else strain)
            start = time.perf_counter()
            result = bench.run(experiment, solver, n_elements=args.n_elements)
            out.setdefault(name, {})[strain] = {
                "outcome": result.outcome,
                "wall_s": round(time.perf_counter() - start, 2),
                **{k: float(v) for k, v in result.metrics.items()},
            }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
