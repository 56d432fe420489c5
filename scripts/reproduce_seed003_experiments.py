"""Seed 003, Experiments I and II in simulation (Sec. VI): the default robot driven by eq. (39).

Protocol (Sec. VI-B): zero angles (sample 1), a constant-speed ramp to the sinusoid (its end: sample 2), one
period at ten uniform phases (samples 2-11); warm-started LSE solves along a dense path; Experiment I without
external load, Experiment II with the pulley tension (constant magnitude, pointing to the pulley; Sec.
VI-D). The shooting baseline is solved at the same points for comparison. There are no measurements here
(the seed publishes none): Table I's errors cannot be reproduced, only the simulated side.

Writes (atomically) into ``--out`` (default ``outputs/seed003``): ``experiments.json`` (11 end-effector
positions per experiment [m], LSE–shooting differences, Newton iterations, timing), ``trajectory.png``
(end-effector trajectories, Fig. 6-like) and ``shapes_exp1.png`` / ``shapes_exp2.png`` (3D rod shapes at the
11 samples, Fig. 7-like).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from flexlearn.atomic import atomic_path
from flexlearn.physics.lse import CPRModel, actuation_path
from flexlearn.physics.lse.shooting import ShootingSolver


def run_experiment(model: CPRModel, loads, dense, index, shoot: ShootingSolver | None):
    rest = model.solve(torch.zeros(3, dtype=torch.float64), loads)
    eq = rest
    sh = None
    samples, shapes, iters, diffs = [], [], [], []
    t0 = time.perf_counter()
    eqs = []
    for th in dense:
        eq = model.solve(th, loads, init=eq)
        eqs.append(eq)
        iters.append(eq.iterations)
    t_lse = time.perf_counter() - t0
    sh_pos = []
    if shoot is not None:
        for th in dense:
            sh = shoot.solve(th.numpy(), loads, init=sh)
            sh_pos.append(sh.position)
    for j, i in enumerate(index):
        e = eqs[i]
        samples.append(e.position.tolist())
        shapes.append(model.rod_poses(e, 8)[..., :3, 3].numpy())
        if sh_pos:
            diffs.append(float(np.linalg.norm(e.position.numpy() - sh_pos[i])))
    all_diff = [float(np.linalg.norm(e.position.numpy() - p)) for e, p in zip(eqs, sh_pos)]
    return {
        "ee_positions_m": samples,
        "lse_vs_shooting_at_samples_m": diffs,
        "lse_vs_shooting_max_along_path_m": max(all_diff) if all_diff else None,
        "newton_iterations": iters,
        "lse_time_s": t_lse,
        "dense_path_points": len(dense),
    }, shapes


def main() -> None:
    ap = argparse.ArgumentParser(description="Seed 003 Experiments I/II in simulation")
    ap.add_argument("--out", default="outputs/seed003")
    ap.add_argument("--substeps", type=int, default=8)
    ap.add_argument("--no-shooting", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    model = CPRModel.from_config()
    samples, dense, index = actuation_path(10, args.substeps)
    shoot = None if args.no_shooting else ShootingSolver(model, steps=40)
    result = {"theta_samples_rad": samples.tolist(), "config": "conf/cpr/default.yaml (CPRConfig defaults)"}
    shapes = {}
    for name, pulley in (("experiment_I", False), ("experiment_II", True)):
        result[name], shapes[name] = run_experiment(model, model.default_loads(pulley), dense, index, shoot)
    result["pulley_position_m"] = model.pulley_position.tolist()
    result["pulley_tension_N"] = float(model.pulley_tension)

    fig, ax = plt.subplots(1, 2, figsize=(10, 4.5))
    for name, style in (("experiment_I", "o-"), ("experiment_II", "s-")):
        p = np.array(result[name]["ee_positions_m"]) * 1e3
        ax[0].plot(p[:, 0], p[:, 1], style, label=name.replace("_", " "))
        for k, q in enumerate(p):
            ax[0].annotate(str(k + 1), q[:2], fontsize=7)
        ax[1].plot(np.arange(1, 12), p[:, 2], style, label=name.replace("_", " "))
    ax[0].set(xlabel="x [mm]", ylabel="y [mm]", title="end-effector trajectory (11 samples)")
    ax[0].axis("equal")
    ax[0].legend()
    ax[1].set(xlabel="sample", ylabel="z [mm]", title="end-effector height")
    fig.tight_layout()
    with atomic_path(out / "trajectory.png") as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)

    for name, tag in (("experiment_I", "exp1"), ("experiment_II", "exp2")):
        fig = plt.figure(figsize=(16, 7))
        for k, sh in enumerate(shapes[name]):
            a = fig.add_subplot(2, 6, k + 1, projection="3d")
            for rod in sh:
                a.plot(rod[:, 0] * 1e3, rod[:, 1] * 1e3, rod[:, 2] * 1e3, lw=1.2)
            tips = sh[:, -1] * 1e3
            a.plot(np.r_[tips[:, 0], tips[0, 0]], np.r_[tips[:, 1], tips[0, 1]], np.r_[tips[:, 2], tips[0, 2]],
                   "k-", lw=2)
            a.set_title(f"sample {k + 1}", fontsize=8)
            a.set_xlim(-70, 70)
            a.set_ylim(-70, 70)
            a.set_zlim(0, 200)
            a.tick_params(labelsize=6)
        fig.suptitle(f"{name.replace('_', ' ')}: rod shapes [mm]")
        fig.tight_layout()
        with atomic_path(out / f"shapes_{tag}.png") as tmp:
            fig.savefig(tmp, dpi=100)
        plt.close(fig)

    with atomic_path(out / "experiments.json") as tmp:
        tmp.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: (v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items()
                                                                 if kk != "newton_iterations"})
                      for k, v in result.items()}, indent=1))


if __name__ == "__main__":
    main()
