"""Seed 003, Experiments I and II in simulation (Sec. VI): the robot driven by eq. (39), with figures.

Protocol (Sec. VI-B): zero angles (sample 1), a constant-speed ramp to the sinusoid (its end: sample 2), one
period at ten uniform phases (samples 2-11); warm-started LSE solves along a dense path; Experiment I without
external load, Experiment II with the pulley tension (constant magnitude, pointing to the pulley; Sec. VI-D).
The shooting baseline is optionally solved at the same points for comparison. The seed publishes no
measurements, so Table I's errors cannot be reproduced, only the simulated side.

:func:`run_experiments` returns a JSON-able dict and the rod shapes; :func:`write_outputs` writes
``experiments.json``, ``trajectory.png`` (end-effector trajectories, Fig. 6-like) and ``shapes_exp1.png`` /
``shapes_exp2.png`` (3D rod shapes at the 11 samples, Fig. 7-like) atomically into a directory. Used by
``flexlearn-cpr`` and ``scripts/reproduce_seed003_experiments.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from flexlearn.atomic import atomic_path, json_text
from flexlearn.physics.lse.inverse import actuation_path
from flexlearn.physics.lse.model import CPRModel
from flexlearn.physics.lse.shooting.forward import ShootingSolver
from flexlearn.physics.lse.state import Loads

__all__ = ["summary_lines", "run_experiment", "run_experiments", "write_outputs", "summary"]


def run_experiment(
    model: CPRModel, loads: Loads, dense: torch.Tensor, index: list[int], shoot=None, step=None
) -> tuple[dict, list[np.ndarray]]:
    """Warm-started LSE solves along ``dense`` (K, M) [rad]; results at the samples ``dense[index]``.

    Returns (result dict, rod shapes at the samples: (R, 8N + 1, 3) [m] each). ``shoot``: a
    `ShootingSolver` solved at every path point for comparison, or None. ``step()``: called after every
    solve (progress).

    Args:
        model: The robot.
        loads: Loads applied at every point.
        dense: Motor angles along the path (K, M) [rad].
        index: Indices into ``dense`` of the samples.
        shoot: Baseline solver, or None for no comparison.
        step: Progress callback without arguments, or None.
    """
    eq = model.solve(torch.zeros(dense.shape[-1], dtype=torch.float64), loads)
    eqs, iters = [], []
    t0 = time.perf_counter()
    for th in dense:
        eq = model.solve(th, loads, init=eq)
        if step is not None:
            step()
        eqs.append(eq)
        iters.append(eq.iterations)
    t_lse = time.perf_counter() - t0
    sh_pos = []
    if shoot is not None:
        sh = None
        for th in dense:
            sh = shoot.solve(th.numpy(), loads, init=sh)
            sh_pos.append(sh.position)
            if step is not None:
                step()
    samples, shapes, diffs = [], [], []
    for i in index:
        e = eqs[i]
        samples.append(e.position.tolist())
        shapes.append(model.rod_poses(e, 8)[..., :3, 3].numpy())
        if sh_pos:
            diffs.append(float(np.linalg.norm(e.position.numpy() - sh_pos[i])))
    all_diff = [float(np.linalg.norm(e.position.numpy() - p)) for e, p in zip(eqs, sh_pos)]
    return {
        "ee_positions_m": samples,
        "lse_vs_shooting_at_samples_m": diffs,
        "shooting_positions_m": [np.asarray(sh_pos[i]).tolist() for i in index] if sh_pos else None,
        "lse_vs_shooting_max_along_path_m": max(all_diff) if all_diff else None,
        "newton_iterations": iters,
        "lse_time_s": t_lse,
        "lse_solves_per_s": len(dense) / t_lse,
        "dense_path_points": len(dense),
    }, shapes


def run_experiments(
    model: CPRModel, substeps: int = 8, shooting_steps: Optional[int] = 40, n_phases: int = 10, step=None
) -> tuple[dict, dict]:
    """Experiments I (no load) and II (pulley) along the seed's path; ``shooting_steps`` None: no baseline.

    Args:
        model: The robot.
        substeps: Intermediate path points between consecutive samples.
        shooting_steps: Integration steps of the shooting baseline, or None.
        n_phases: Samples over the sinusoid's period.
        step: Progress callback without arguments, called after every solve, or None.

    Returns:
        ``(result, shapes)``: the JSON-able result and the rod shapes per experiment.
    """
    samples, dense, index = actuation_path(n_phases, substeps)
    shoot = None if shooting_steps is None else ShootingSolver(model, steps=shooting_steps)
    result = {"theta_samples_rad": samples.tolist(), "n_rods": model.n_rods, "elements_per_rod": model.n_elements}
    shapes = {}
    for name, pulley in (("experiment_I", False), ("experiment_II", True)):
        result[name], shapes[name] = run_experiment(model, model.default_loads(pulley), dense, index, shoot, step)
    result["pulley_position_m"] = model.pulley_position.tolist()
    result["pulley_tension_N"] = float(model.pulley_tension)
    return result, shapes


def write_outputs(out: str | Path, result: dict, shapes: dict) -> list[Path]:
    """Write experiments.json, trajectory.png, shapes_exp1.png, shapes_exp2.png into ``out`` (atomically).

    Args:
        out: Output directory.
        result: The result dict of :func:`run_experiments`.
        shapes: The rod shapes of :func:`run_experiments` (per experiment, (R, 8N + 1, 3) [m] per sample).

    Returns:
        The paths written.
    """
    import matplotlib  # heavy, and only the figures need it: off the import path of the statics

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use("Agg") (headless backend)

    out = Path(out)
    paths = []
    fig, ax = plt.subplots(1, 2, figsize=(10, 4.5))
    for name, style in (("experiment_I", "o-"), ("experiment_II", "s-")):
        p = np.array(result[name]["ee_positions_m"]) * 1e3
        ax[0].plot(p[:, 0], p[:, 1], style, label=name.replace("_", " "))
        for k, q in enumerate(p):
            ax[0].annotate(str(k + 1), q[:2], fontsize=7)
        ax[1].plot(np.arange(1, len(p) + 1), p[:, 2], style, label=name.replace("_", " "))
    ax[0].set(xlabel="x [mm]", ylabel="y [mm]", title=f"end-effector trajectory ({len(p)} samples)")
    ax[0].axis("equal")
    ax[0].legend()
    ax[1].set(xlabel="sample", ylabel="z [mm]", title="end-effector height")
    fig.tight_layout()
    with atomic_path(out / "trajectory.png") as tmp:
        fig.savefig(tmp, dpi=120)
    paths.append(out / "trajectory.png")
    plt.close(fig)

    for name, tag in (("experiment_I", "exp1"), ("experiment_II", "exp2")):
        fig = plt.figure(figsize=(16, 7))
        cols = (len(shapes[name]) + 1) // 2
        for k, sh in enumerate(shapes[name]):
            a = fig.add_subplot(2, cols, k + 1, projection="3d")
            for rod in sh:
                a.plot(rod[:, 0] * 1e3, rod[:, 1] * 1e3, rod[:, 2] * 1e3, lw=1.2)
            tips = sh[:, -1] * 1e3
            a.plot(
                np.r_[tips[:, 0], tips[0, 0]], np.r_[tips[:, 1], tips[0, 1]], np.r_[tips[:, 2], tips[0, 2]], "k-", lw=2
            )
            a.set_title(f"sample {k + 1}", fontsize=8)
            a.set_xlim(-70, 70)
            a.set_ylim(-70, 70)
            a.set_zlim(0, 200)
            a.tick_params(labelsize=6)
        fig.suptitle(f"{name.replace('_', ' ')}: rod shapes [mm]")
        fig.tight_layout()
        with atomic_path(out / f"shapes_{tag}.png") as tmp:
            fig.savefig(tmp, dpi=100)
        paths.append(out / f"shapes_{tag}.png")
        plt.close(fig)

    with atomic_path(out / "experiments.json") as tmp:
        tmp.write_text(json_text(result, indent=1))
    paths.append(out / "experiments.json")
    return paths


def summary(result: dict) -> dict:
    """The result without the per-point iteration lists (for printing).

    Args:
        result: The result dict of :func:`run_experiments`.

    Returns:
        A shallow copy without ``newton_iterations``.
    """
    return {
        k: (v if not isinstance(v, dict) else {kk: vv for kk, vv in v.items() if kk != "newton_iterations"})
        for k, v in result.items()
    }


def summary_lines(result: dict, files: list[Path]) -> list[str]:
    """What ``flexlearn-cpr`` prints for a person: per experiment its solves, speed and the LSE–shooting gap,
    then the files written and where to look next (the full result stays in ``experiments.json``).

    Args:
        result: The result dict of :func:`run_experiments`.
        files: The files written (:func:`write_outputs` and the trajectory figure).

    Returns:
        The lines, without the run directory (the app prints it last).
    """
    lines = [
        f"flexlearn-cpr: {result['n_rods']} rods × {result['elements_per_rod']} elements, "
        f"{len(result['theta_samples_rad'])} path samples"
    ]
    for name in ("experiment_I", "experiment_II"):
        exp = result[name]
        gap = exp.get("lse_vs_shooting_max_along_path_m")
        vs = "no shooting baseline" if gap is None else f"LSE vs shooting: max {gap:.2e} m along the path"
        lines.append(
            f"  {name}: {exp['dense_path_points']} LSE solves in {exp['lse_time_s']:.1f} s "
            f"({exp['lse_solves_per_s']:.0f} solves/s); {vs}"
        )
    lines.append("files: " + ", ".join(Path(f).name for f in files))
    lines.append("next: open trajectory.png (end-effector path) and shapes_exp*.png; all numbers: experiments.json")
    return lines
