"""The smallest angular error any direction model can reach on a simulated module (Cramér–Rao), as JSON.

Simulates and processes a sweep (the main job's default: 15,000 poses, ``seed`` 0, its module), measures the field
and label noise of its poses against the simulator's truth, and evaluates the bound of
`flexlearn.sim.direction_bound` on its test split within the trained cap (0–29.5° of true bend,
`flexlearn.metrics.CAP_DEG`): the unit field (what the direction network sees) and the full field vector
(magnitude too). With ``--ckpt`` the trained model is scored on the same test poses, and ``efficiency`` is its
error over the bound (1.0: no estimator can do better).

    python scripts/bench_direction_bound.py [--poses 15000] [--seed 0] [--module-seed -1] [--ckpt CKPT]
                                            [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--poses", type=int, default=15000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--module-seed", type=int, default=-1)
    ap.add_argument("--ckpt", default=None, help="a direction checkpoint to score on the same test poses")
    ap.add_argument("--root", default=None, help="cache directory for the sweep (default: a temporary one)")
    args = ap.parse_args()
    if args.poses < 100:
        ap.error(f"--poses {args.poses}: at least 100 poses are needed for a test split")

    import torch

    from flexlearn.data.dataset import DirectionDataset
    from flexlearn.data.sources import DataConfig, prepare_dataset
    from flexlearn.metrics import CAP_DEG, colatitude_deg
    from flexlearn.sim import direction_bound as db

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(args.root or tmp) / ".cache"
        sim = {"n_poses": args.poses, "seed": args.seed, "module_seed": args.module_seed}
        ds = DirectionDataset.load(prepare_dataset(DataConfig(sim=sim), cache))
    truth_db, truth_label, truth_u = ds.truth_delta_b, ds.truth_label, ds.truth_u
    if truth_db is None or truth_label is None or truth_u is None:
        raise SystemExit(
            "the dataset has no truth columns (truth_delta_b, truth_label, truth_u): not a simulated sweep"
        )
    noise = db.measured_noise(ds.delta_b, truth_db, ds.n_coil_on)
    label_var = float(np.mean(np.sum((ds.label - truth_label) ** 2, axis=-1)) / 2.0)
    test = ds.split == "test"
    cap = colatitude_deg(torch.as_tensor(truth_label)).numpy() <= CAP_DEG  # the metrics' band
    rows = test & cap
    field, label = db.module_field(ds.meta)
    out: dict[str, object] = {
        "poses": args.poses,
        "seed": args.seed,
        "module_seed": args.module_seed,
        "test_poses_in_cap": int(rows.sum()),
        "field_noise_uT_median": float(np.sqrt(np.median(noise)) * 1e6),
        "field_uT_median": float(np.median(np.linalg.norm(truth_db, axis=-1)) * 1e6),
        "label_noise_deg": math.degrees(math.sqrt(label_var)),
    }
    for key, full in (("bound_unit_field", False), ("bound_full_vector", True)):
        e = db.error_bound(field, label, truth_u[rows], noise[rows], label_var, full_vector=full)
        out[f"{key}_median_deg"] = float(np.median(e))
        out[f"{key}_p95_deg"] = float(np.percentile(e, 95))
    if args.ckpt:
        from flexlearn.tasks.checkpoints import load_direction_model

        out.update(db.model_efficiency(load_direction_model(args.ckpt)[0], ds, rows, out))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
