#!/usr/bin/env python
"""Run the seed 001 experiments (Tables 3–7) from ``conf/cosserat/*.yaml`` and plot the tip trajectories.

    python scripts/reproduce_seed001_experiments.py --out outputs/seed001 [--max-duration 0.2] [names...]

The seed's full durations (1.5–7.5 s at dt = 1e-6 … 1e-4 s) take long with this eager implementation;
``--max-duration`` caps the simulated time (default 0.3 s). Writes ``<name>.png`` (tip coordinates vs time
and the tip path) and ``summary.json`` (final tip, wall time, steps) atomically. No experimental data is
shipped with the seed, so the figures show the simulated tips only.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from flexlearn.atomic import atomic_path  # noqa: E402
from flexlearn.physics.cosserat.experiments import build_experiment, load_experiment  # noqa: E402


def run(name: str, out: Path, max_duration: float) -> dict:
    cfg = load_experiment(yaml.safe_load((REPO / "conf" / "cosserat" / f"{name}.yaml").read_text()))
    rod, loads, damping, initial, base = build_experiment(cfg)
    duration = min(cfg.duration, max_duration)
    t0 = time.perf_counter()
    tr = rod.simulate(duration, cfg.dt, loads=loads, damping=damping, initial=initial, base=base,
                      record_every=cfg.record_every)
    wall = time.perf_counter() - t0
    tip = tr.tip.numpy() * 1e3
    t = tr.times.numpy()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
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
    fig.suptitle(f"seed 001 Table {cfg.table}: {cfg.name} ({duration:g} s of {cfg.duration:g} s)")
    fig.tight_layout()
    with atomic_path(out / f"{name}.png") as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return {"table": cfg.table, "duration_s": duration, "dt_s": cfg.dt, "steps": int(round(duration / cfg.dt)),
            "wall_s": wall, "final_tip_mm": tip[-1].tolist()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "seed001")
    ap.add_argument("--max-duration", type=float, default=0.3)
    args = ap.parse_args(argv)
    names = args.names or sorted(p.stem for p in (REPO / "conf" / "cosserat").glob("*.yaml"))
    summary = {n: run(n, args.out, args.max_duration) for n in names}
    with atomic_path(args.out / "summary.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
