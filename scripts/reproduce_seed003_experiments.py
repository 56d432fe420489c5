"""Seed 003, Experiments I and II in simulation (Sec. VI) with the default robot: see
:mod:`flexlearn.physics.lse.experiments` (protocol, outputs). The Hydra app ``flexlearn-cpr`` runs the same
from ``conf/cpr.yaml``.

Writes (atomically) into ``--out`` (default ``outputs/seed003``): ``experiments.json`` (11 end-effector
positions per experiment [m], LSE–shooting differences, Newton iterations, timing), ``trajectory.png`` and
``shapes_exp1.png`` / ``shapes_exp2.png``.
"""

from __future__ import annotations

import argparse
import json

import torch

from flexlearn.physics.lse import CPRModel
from flexlearn.physics.lse.experiments import run_experiments, summary, write_outputs


def main() -> None:
    ap = argparse.ArgumentParser(description="Seed 003 Experiments I/II in simulation")
    ap.add_argument("--out", default="outputs/seed003")
    ap.add_argument("--substeps", type=int, default=8)
    ap.add_argument("--elements", type=int, default=None, help="LSE elements per rod (default: the config's 4)")
    ap.add_argument("--no-shooting", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = CPRModel.from_config(None if args.elements is None else {"rod": {"n_elements": args.elements}})
    result, shapes = run_experiments(model, args.substeps, None if args.no_shooting else 40)
    result["config"] = "conf/cpr/default.yaml (CPRConfig defaults)"
    write_outputs(args.out, result, shapes)
    print(json.dumps(summary(result), indent=1))


if __name__ == "__main__":
    main()
