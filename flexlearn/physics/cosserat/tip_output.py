"""Run one configured experiment (:mod:`flexlearn.physics.cosserat.experiments`) and write its tip
trajectory as JSON, CSV and PNG, each file atomically (a failed run leaves earlier files intact).

Files in ``out_dir``: ``<name>_tip.json`` (config, timing, times [s], tip positions [m]),
``<name>_tip.csv`` (columns ``t_s, x_m, y_m, z_m``), ``<name>_tip.png`` (tip coordinates vs time and the
tip path in the E2–E3 plane, in mm).
"""

from __future__ import annotations

import csv
import io
import math
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from flexlearn.atomic import atomic_path, json_text
from flexlearn.config import check, check_memory, to_dict
from flexlearn.physics.cosserat.experiments import CosseratExperimentConfig, build_experiment, simulation_options
from flexlearn.physics.cosserat.state import Trajectory

FORMATS = ("json", "csv", "png")


DEFAULT_MAX_STEPS = 5_000_000


def run_bytes(n_elements: int, frames: float, scheme: str) -> float:
    """Bytes a rod simulation holds at least: the recorded positions (N+1, 3) and rotations (N, 3, 3) of every
    frame, the step's per-element work (≈ 4 kB each) and, for the implicit step, its dense tangent (6(N+1))²
    with two working copies (float64).

    Args:
        n_elements: N.
        frames: recorded frames.
        scheme: ``lgvi`` or ``implicit``.

    Returns:
        The estimate [bytes].
    """
    recorded = 8.0 * frames * (3 * (n_elements + 1) + 9 * n_elements)
    tangent = 3 * 8.0 * (6 * (n_elements + 1)) ** 2 if scheme == "implicit" else 0.0
    return recorded + 4096.0 * n_elements + tangent


def run_experiment(
    cfg: CosseratExperimentConfig,
    max_duration: Optional[float] = None,
    backend: str = "auto",
    max_steps: int = DEFAULT_MAX_STEPS,
    announce: Optional[Callable[[str], None]] = None,
) -> Tuple[Trajectory, Dict]:
    """Simulate ``cfg`` for ``min(cfg.duration, max_duration)`` seconds; returns the trajectory and a
    summary (duration, dt, steps, wall time [s], final tip [m]).

    A run of more than ``max_steps`` integration steps is refused before it starts (`ConfigError` naming
    ``cosserat.dt``); ``announce`` receives one line with the step count before the run starts.

    Args:
        cfg: The validated experiment.
        max_duration: Upper bound on the simulated time [s]; None runs the full ``cfg.duration``.
        backend: ``'auto'``, ``'numba'`` or ``'torch'``.
        max_steps: Largest number of integration steps allowed.
        announce: Called with one line before the run starts; None for silence.

    Returns:
        Tuple ``(trajectory, summary)``; the summary dict holds name, table, ``duration_s``, ``dt_s``, ``steps``,
        scheme, ``wall_s`` and ``final_tip_m``.

    Raises:
        ConfigError: If ``max_duration`` or ``max_steps`` is invalid, or the run needs more than ``max_steps`` steps.
    """
    if max_duration is not None:
        check(math.isfinite(max_duration) and max_duration > 0, "max_duration", max_duration, "must be > 0 [s]")
    check(isinstance(max_steps, int) and max_steps >= 1, "max_steps", max_steps, "must be an integer >= 1")
    duration = cfg.duration if max_duration is None else min(cfg.duration, max_duration)
    n_steps = duration / cfg.dt
    check(
        n_steps <= max_steps,
        "cosserat.dt",
        cfg.dt,
        f"{duration} s at this step is {n_steps:.3g} steps, over max_steps = {max_steps}; raise max_steps=... "
        f"or shorten the run with max_duration=...",
    )
    frames = n_steps / cfg.record_every + 2
    check_memory("cosserat.n_elements", cfg.n_elements, run_bytes(cfg.n_elements, frames, cfg.scheme),
                 f"a run recording {frames:.3g} frames")  # fmt: skip
    rod, loads, damping, initial, base = build_experiment(cfg)
    if announce is not None:
        announce(
            f"{cfg.name}: {int(round(n_steps))} steps of {cfg.dt:g} s ({duration:g} s simulated, "
            f"{cfg.scheme} step, backend {backend})"
        )
    t0 = time.perf_counter()
    options = simulation_options(cfg, backend)
    tr = rod.simulate(duration, cfg.dt, loads=loads, damping=damping, initial=initial, base=base, options=options)
    wall = time.perf_counter() - t0
    info = {
        "name": cfg.name,
        "table": cfg.table,
        "duration_s": duration,
        "dt_s": cfg.dt,
        "steps": int(round(duration / cfg.dt)),
        "scheme": cfg.scheme,
        "wall_s": wall,
        "final_tip_m": tr.tip[-1].tolist(),
    }
    return tr, info


def write_tip_trajectory(
    out_dir, tr: Trajectory, cfg: CosseratExperimentConfig, info: Dict, formats: Sequence[str] = FORMATS
) -> List[Path]:
    """Write the tip trajectory of ``tr`` in ``formats`` (subset of json, csv, png); returns the paths.

    Args:
        out_dir: Output directory (created if missing).
        tr: The simulated trajectory.
        cfg: The experiment (its ``name`` prefixes the files).
        info: The run summary of :func:`run_experiment` (stored in the JSON file).
        formats: Which files to write, from ``('json', 'csv', 'png')``.

    Returns:
        The paths written.

    Raises:
        ConfigError: If a format is unknown.
    """
    for f in formats:
        check(f in FORMATS, "formats", f, f"each must be one of {list(FORMATS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t = tr.times.tolist()
    tip = tr.tip.detach().tolist()
    paths: List[Path] = []
    if "json" in formats:
        doc = dict(info, config=to_dict(cfg), times_s=t, tip_m=tip)
        with atomic_path(out / f"{cfg.name}_tip.json") as tmp:
            tmp.write_text(json_text(doc, indent=1))
        paths.append(out / f"{cfg.name}_tip.json")
    if "csv" in formats:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["t_s", "x_m", "y_m", "z_m"])
        for ti, xi in zip(t, tip):
            w.writerow([repr(ti)] + [repr(x) for x in xi])
        with atomic_path(out / f"{cfg.name}_tip.csv") as tmp:
            tmp.write_text(buf.getvalue())
        paths.append(out / f"{cfg.name}_tip.csv")
    if "png" in formats:
        paths.append(_plot(out / f"{cfg.name}_tip.png", tr, cfg, info))
    return paths


def _plot(path: Path, tr: Trajectory, cfg: CosseratExperimentConfig, info: Dict) -> Path:
    import matplotlib  # heavy: imported only when a PNG is written

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy: imported only when a PNG is written

    tip = tr.tip.detach().numpy() * 1e3
    t = tr.times.numpy()
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for i, lab in enumerate(("E1", "E2", "E3")):
        ax[0].plot(t, tip[:, i], label=f"tip {lab}")
    ax[0].set_xlabel("t [s]")
    ax[0].set_ylabel("tip position [mm]")
    ax[0].legend()
    ax[1].plot(tip[:, 1], tip[:, 2])
    ax[1].set_xlabel("E2 [mm]")
    ax[1].set_ylabel("E3 [mm]")
    ax[1].set_aspect("equal", adjustable="datalim")
    done = f"{info['duration_s']:g} s" + ("" if info["duration_s"] >= cfg.duration else f" of {cfg.duration:g} s")
    title = f"Simulated rod '{cfg.name}': tip position over {done}" + (
        f" (the seed's Table {cfg.table})" if cfg.table else ""
    )
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png", metadata={"Title": title})
    plt.close(fig)
    return path
