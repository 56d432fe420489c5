#!/usr/bin/env python
"""Run the seed 001 experiments (Tables 3–7) from ``conf/cosserat/*.yaml`` and plot the tip trajectories.

    python scripts/reproduce_seed001_experiments.py --out outputs/seed001 [--max-duration 0.2] [names...]

``--max-duration`` caps the simulated time (default 0.3 s; the seed's runs are 1.5–7.5 s). The runs use the
fused kernel (≈ 2 µs per step) where they can (:mod:`flexlearn.physics.cosserat.compiled.lgvi`), else the tensor
path (≈ 1 ms per step, e.g. with stiffness-proportional damping). Writes, per
experiment, ``<name>_tip.json/.csv/.png`` (:mod:`flexlearn.physics.cosserat.tip_output`) and
``summary.json`` (final tip, wall time, steps), each atomically. The same runs, one at a time and
configurable through Hydra: ``flexlearn-cosserat cosserat=<name>``. No experimental data is shipped with the
seed, so the figures show the simulated tips only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from flexlearn.atomic import atomic_path  # noqa: E402
from flexlearn.physics.cosserat.experiments import load_experiment  # noqa: E402
from flexlearn.physics.cosserat.tip_output import run_experiment, write_tip_trajectory  # noqa: E402


def run(name: str, out: Path, max_duration: float) -> dict:
    cfg = load_experiment(yaml.safe_load((REPO / "flexlearn" / "conf" / "cosserat" / f"{name}.yaml").read_text()), name)
    tr, info = run_experiment(cfg, max_duration)
    write_tip_trajectory(out, tr, cfg, info)
    info["final_tip_mm"] = [1e3 * x for x in info.pop("final_tip_m")]
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "seed001")
    ap.add_argument("--max-duration", type=float, default=0.3)
    args = ap.parse_args(argv)
    names = args.names or sorted(p.stem for p in (REPO / "flexlearn" / "conf" / "cosserat").glob("*.yaml"))
    summary = {n: run(n, args.out, args.max_duration) for n in names}
    with atomic_path(args.out / "summary.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
