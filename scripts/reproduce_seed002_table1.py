#!/usr/bin/env python
"""Seed 002, Table I in simulation: backbone and tip RMSE per scenario and method, drift runs, figures.

    python scripts/reproduce_seed002_table1.py [--quick] [--duration 60] [--trials 3] [--first-trial 0] [--cycles 50]
                                               [--hold 1800] [--long 300] [--long-trials 2] [--align-init 0]
                                               [--out-dir results/seed002] [--mcap]
    python scripts/reproduce_seed002_table1.py --confidence-study --first-trial 5 --trials 5 [--conf-growth 0.2]
                                               [--conf-margin-deg 10] [--curl-max-deg 40] [--align-init 30]

Scenarios `2d_curl`, `2d_obstacle`, `3d_curl`, `3d_hand` (flexlearn.sim.shape_scenarios), each over ``--trials``
seeds from ``--first-trial`` (trial k: motion seed k, robot seed 100 k + scenario index; e.g. ``--first-trial 5``
for trials held out from any setting chosen on trials 0–4; the ``--long`` trials start there too); methods fusion
(heading and drift-rate filter, the default), fusion_heading_walk, fusion_rotation (the seed's 3-D bias), mag_only,
quat_only (one runtime code path) and the inertial accel_quat / accel_only. ``--long`` s trials (``long`` in the
JSON; quaternion drift grows with angular travel, so the magnetic corrections matter more as trials get longer).
``--align-init S`` > 0: receiver alignments A_i fitted (`fit_alignment`, shrunk toward identity) on a separate S-s
initialisation recording of the same simulated robot (bending motion), as the seed fits them outside the scored
trial; ``--align-window`` fits them on the scored trial's own first seconds instead.
Drift (seed IV-D): ``--cycles`` pull–release cycles of 10 s (phase-matched tip change vs the first cycle, estimated
and true error) and a ``--hold`` s static hold (tip displacement over the hold; the truth does not move).
Writes ``table1.json`` (scenario → method → {backbone_rmse_mm, tip_rmse_mm, …}, "average", "drift", the seed's
values) and ``backbones.png`` (estimated vs true backbones). The direction model is a small MLP fitted on rig pairs
(`fit_direction_model`, bends to ``TRAINED_CAP`` = 30°) unless ``--model`` names a TorchScript direction model.
``--mcap`` also writes ``shapes_<scenario>.mcap`` (the first trial of each scenario: every method's backbone beside
the true one, and their errors, every 0.1 s; `flexlearn.replay.to_mcap.estimates_to_mcap`), which Foxglove plays.
``--confidence-study`` runs only `3d_curl` (joints bent up to ``--curl-max-deg``, past the trained cap; every joint
its own module drawn from the module tolerances) with the default fusion twice per trial, constant σ_m against the
per-fix σ_m and rejection of `flexlearn.runtime.fusion.confidence.BendConfidence` (``--conf-growth``,
``--conf-margin-deg``, cap = the model's trained cap), and writes ``confidence.json``; with ``--align-init S`` every
module is first calibrated (A_i from a separate S-s recording, as above).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flexlearn.atomic import atomic_path  # noqa: E402
from flexlearn.replay import shapes as rs  # noqa: E402
from flexlearn.replay.to_mcap import estimates_to_mcap  # noqa: E402
from flexlearn.sim import shape_scenarios as scenarios  # noqa: E402
from flexlearn.sim.robot import E, RobotConfig, simulate_robot  # noqa: E402

SEED_TABLE = {  # seed 002, Table I: backbone / tip RMSE [mm] (mean ± std over trials)
    "fusion": {
        "2d_curl": (7.6, 8.8),
        "2d_obstacle": (11.3, 16.5),
        "3d_curl": (13.3, 21.1),
        "3d_hand": (7.8, 13.0),
        "average": (10.0, 14.9),
    },
    "mag_only": {
        "2d_curl": (36.9, 59.9),
        "2d_obstacle": (18.0, 36.2),
        "3d_curl": (29.4, 48.0),
        "3d_hand": (14.1, 24.9),
        "average": (24.6, 42.3),
    },
    "accel_quat": {
        "2d_curl": (133.8, 193.7),
        "2d_obstacle": (163.0, 246.0),
        "3d_curl": (71.9, 113.1),
        "3d_hand": (90.5, 151.8),
        "average": (114.8, 176.2),
    },
    "accel_only": {
        "2d_curl": (189.0, 297.5),
        "2d_obstacle": (153.8, 232.6),
        "3d_curl": (177.7, 279.4),
        "3d_hand": (180.8, 289.1),
        "average": (175.3, 274.7),
    },
}


def _tip(points: np.ndarray) -> np.ndarray:
    return points[:, -1]


def drift_runs(model: torch.nn.Module, cycles: int, hold: float, seed: int) -> dict:
    """Cyclic actuation (period 10 s) and static hold: estimator drift (seed IV-D, V-C)."""
    out: dict = {}
    if cycles > 0:
        period = 10.0
        rec = simulate_robot(
            scenarios.scenario("cyclic", period=period, seed=seed), cycles * period + 0.5, RobotConfig(seed=seed)
        )
        ends = np.searchsorted(rec.att_t, period * np.arange(cycles + 1)[1:] - 1e-9)  # released phase
        mids = np.searchsorted(rec.att_t, period * (np.arange(cycles) + 0.5))  # pulled phase
        res = {}
        for m in rs.ESTIMATOR_METHODS:
            mode, kw = rs.ESTIMATOR_METHODS[m]
            pts = rs.replay(rec, rs.build_estimator(rec, model, mode, **kw))
            tip = _tip(pts)
            err = np.linalg.norm(tip - _tip(rec.points), axis=-1)
            res[m] = {
                "final_phase_matched_tip_change_mm": float(1e3 * np.linalg.norm(tip[mids[-1]] - tip[mids[0]])),
                "cycle_to_cycle_std_mm": float(1e3 * np.std(np.linalg.norm(tip[mids] - tip[mids[0]], axis=-1))),
                "baseline_change_mm": float(1e3 * np.linalg.norm(tip[ends[-1] - 1] - tip[ends[0] - 1])),
                "tip_error_first_cycle_mm": float(1e3 * err[: ends[0]].mean()),
                "tip_error_last_cycle_mm": float(1e3 * err[(ends[-2] if cycles > 1 else 0) : ends[-1]].mean()),
            }
        out["cyclic"] = {"cycles": cycles, "period_s": period, **res}
    if hold > 0:
        rec = simulate_robot(scenarios.scenario("static_hold", seed=seed), hold, RobotConfig(seed=seed))
        start = np.searchsorted(rec.att_t, 8.0)
        res = {}
        for m in rs.ESTIMATOR_METHODS:
            mode, kw = rs.ESTIMATOR_METHODS[m]
            est = rs.build_estimator(rec, model, mode, **kw)
            tip = _tip(rs.replay(rec, est))[start:]
            res[m] = {
                "max_tip_displacement_mm": float(1e3 * np.linalg.norm(tip - tip[0], axis=-1).max()),
                "final_tip_error_mm": float(1e3 * np.linalg.norm(tip[-1] - _tip(rec.points)[-1])),
            }
        out["static_hold"] = {"duration_s": hold, "true_tip_displacement_mm": 0.0, **res}
    return out


def init_alignment(model: torch.nn.Module, trial: int, hw: int, align_init: float) -> torch.Tensor | None:
    """Receiver alignments A_i (N, 3, 3) fitted on a separate ``align_init`` s bending recording of the same robot
    (hardware draws ``hw``), as the seed fits them outside the scored trial; None when ``align_init`` is 0."""
    if align_init <= 0:
        return None
    init = simulate_robot(
        scenarios.scenario("3d_curl", period=15.0, seed=trial + 50),
        align_init,
        RobotConfig(seed=hw + 5000, hardware_seed=hw),
    )
    return rs.alignment_from_window(init, model, rs.soft_iron(init), align_init)


def scenario_table(
    model: torch.nn.Module,
    duration: float,
    trials: int,
    align_window: float = 0.0,
    align_init: float = 0.0,
    first_trial: int = 0,
) -> tuple[dict, dict]:
    """Scenario → method → mean/std of backbone and tip RMSE over ``trials`` (+ "average", "wins" of fusion over
    quat_only per trial); and the first trial's (recording, results) per scenario for the figure."""
    table: dict = {}
    examples: dict = {}
    for sc in scenarios.SCENARIOS:
        runs: dict = {m: [] for m in rs.METHODS}
        for trial in range(first_trial, first_trial + trials):
            hw = 100 * trial + scenarios.SCENARIOS.index(sc)
            rec = simulate_robot(
                scenarios.scenario(sc, period=min(20.0, duration), seed=trial), duration, RobotConfig(seed=hw)
            )
            align = init_alignment(model, trial, hw, align_init)
            res = rs.run_methods(rec, model, align_window=align_window, alignment=align)
            for m in rs.METHODS:
                runs[m].append((res[m]["backbone_rmse_mm"], res[m]["tip_rmse_mm"]))
            if trial == first_trial:
                examples[sc] = (rec, res)
        table[sc] = {
            m: {
                "backbone_rmse_mm": float(np.mean([r[0] for r in v])),
                "tip_rmse_mm": float(np.mean([r[1] for r in v])),
                "backbone_rmse_std_mm": float(np.std([r[0] for r in v])),
                "tip_rmse_std_mm": float(np.std([r[1] for r in v])),
            }
            for m, v in runs.items()
        }
        table[sc]["fusion_wins_over_quat_only"] = {
            "backbone": int(sum(f[0] < q[0] for f, q in zip(runs["fusion"], runs["quat_only"]))),
            "tip": int(sum(f[1] < q[1] for f, q in zip(runs["fusion"], runs["quat_only"]))),
            "trials": trials,
        }
    table["average"] = {
        m: {
            k: float(np.mean([table[s][m][k] for s in scenarios.SCENARIOS]))
            for k in ("backbone_rmse_mm", "tip_rmse_mm")
        }
        for m in rs.METHODS
    }
    return table, examples


TRAINED_CAP_DEG = 30.0  # bend cap of `fit_direction_model`'s rig pairs


def confidence_study(
    model: torch.nn.Module,
    duration: float,
    trials: int,
    first_trial: int,
    growth: float,
    margin_deg: float | None,
    curl_max_deg: float,
    cap_deg: float = TRAINED_CAP_DEG,
    align_init: float = 0.0,
) -> dict:
    """3d_curl past the trained cap: fusion with constant σ_m vs per-fix σ_m (`BendConfidence`), per trial and mean;
    also the share of fixes rejected (LOW_CONFIDENCE) and each trial's largest true joint bend."""
    conf = {
        "kind": "bend",
        "cap": math.radians(cap_deg),
        "growth": growth,
        "margin": None if margin_deg is None else math.radians(margin_deg),
    }
    rows = []
    for trial in range(first_trial, first_trial + trials):
        hw = 100 * trial + scenarios.SCENARIOS.index("3d_curl")
        rec = simulate_robot(
            scenarios.scenario("3d_curl", period=min(20.0, duration), seed=trial, theta_max=curl_max_deg),
            duration,
            RobotConfig(seed=hw),
        )
        parent = np.concatenate([np.broadcast_to(E, rec.u[:, :1].shape), rec.u[:, :-1]], 1)
        bend = np.degrees(np.arccos(np.clip((parent * rec.u).sum(-1), -1.0, 1.0)))  # true joint bends (K, N)
        row = {
            "trial": trial,
            "max_joint_bend_deg": float(bend.max()),
            "share_past_cap": float((bend > cap_deg).mean()),
        }
        align = init_alignment(model, trial, hw, align_init)
        for name, kw in (("constant", {}), ("per_fix", {"confidence": conf})):
            est = rs.build_estimator(rec, model, "fusion", alignment=align, **kw)
            pts = rs.replay(rec, est)
            rejected = int(est.n_low_confidence.sum())
            row[name] = {**rs.errors(pts, rec), "rejected_share": rejected / max(int(est.n_fixes.sum()) + rejected, 1)}
        rows.append(row)
    mean = {
        name: {k: float(np.mean([r[name][k] for r in rows])) for k in ("backbone_rmse_mm", "tip_rmse_mm")}
        for name in ("constant", "per_fix")
    }
    wins = {k: int(sum(r["per_fix"][k] < r["constant"][k] for r in rows)) for k in ("backbone_rmse_mm", "tip_rmse_mm")}
    return {
        "confidence": conf,
        "curl_max_deg": curl_max_deg,
        "trained_cap_deg": cap_deg,
        "duration_s": duration,
        "align_init_s": align_init,
        "first_trial": first_trial,
        "trials": trials,
        "mean": mean,
        "per_fix_wins": wins,
        "per_trial": rows,
    }


def figure(examples: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(examples), figsize=(4 * len(examples), 4.5), squeeze=False)
    for ax, (name, (rec, res)) in zip(axes[0], examples.items()):
        frames = np.linspace(0, len(rec.att_t) - 1, 5).astype(int)[1:]
        tip_xy = rec.points[:, -1, :2]
        d = tip_xy[np.argmax(np.linalg.norm(tip_xy, axis=-1))]
        a = d / max(float(np.linalg.norm(d)), 1e-12)  # horizontal axis of the largest bend
        for j, k in enumerate(frames):
            lab = (lambda s: s) if j == 0 else (lambda s: None)
            ax.plot(1e3 * rec.points[k, :, :2] @ a, 1e3 * rec.points[k, :, 2], "k-o", ms=3, label=lab("truth"))
            for m, st in (("fusion", "C0--"), ("mag_only", "C1:")):
                p = res[m]["points"][k]
                ax.plot(1e3 * p[:, :2] @ a, 1e3 * p[:, 2], st, label=lab(m))
        ax.set_title(name)
        ax.set_xlabel("horizontal, along the largest bend [mm]")
        ax.set_ylabel("z [mm]")
        ax.set_aspect("equal")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 s trials, 1 trial, 5 cycles, 60 s hold")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--first-trial", type=int, default=0, help="index of the first trial (held-out sets: 5)")
    ap.add_argument("--long", type=float, default=300.0, help="duration of the long trials [s] (0: none)")
    ap.add_argument("--long-trials", type=int, default=2)
    ap.add_argument(
        "--align-init",
        type=float,
        default=0.0,
        help="fit A_i on a separate initialisation recording of this many seconds (0: identity)",
    )
    ap.add_argument("--cycles", type=int, default=50)
    ap.add_argument("--hold", type=float, default=1800.0)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument(
        "--align-window",
        type=float,
        default=0.0,
        help="fit receiver alignments A_i on the first N s (seed: 45; default 0 = identity)",
    )
    ap.add_argument("--out-dir", type=Path, default=Path("results/seed002"))
    ap.add_argument("--mcap", action="store_true", help="also shapes_<scenario>.mcap: every method beside the truth")
    ap.add_argument(
        "--confidence-study",
        action="store_true",
        help="only 3d_curl past the trained cap: constant vs per-fix sigma_m (confidence.json)",
    )
    ap.add_argument("--conf-growth", type=float, default=0.2, help="BendConfidence growth [rad per rad past the cap]")
    ap.add_argument(
        "--conf-margin-deg",
        type=float,
        default=None,
        help="reject fixes bent more than this past the cap [deg] (default: none rejected)",
    )
    ap.add_argument("--curl-max-deg", type=float, default=40.0, help="3d_curl distal bend [deg] (study only)")
    a = ap.parse_args(argv)
    if a.quick:
        a.duration, a.trials, a.cycles, a.hold, a.long = 20.0, 1, 5, 60.0, 0.0
    torch.set_num_threads(1)
    t0 = time.time()
    model = torch.jit.load(str(a.model)) if a.model else rs.fit_direction_model()
    if a.confidence_study:
        study = confidence_study(
            model,
            a.duration,
            a.trials,
            a.first_trial,
            a.conf_growth,
            a.conf_margin_deg,
            a.curl_max_deg,
            align_init=a.align_init,
        )
        study["wall_s"] = time.time() - t0
        a.out_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(a.out_dir / "confidence.json") as tmp:
            Path(tmp).write_text(json.dumps(study, indent=2) + "\n")
        print(json.dumps({k: study[k] for k in ("confidence", "mean", "per_fix_wins", "trials", "first_trial")}))
        return 0
    table, examples = scenario_table(model, a.duration, a.trials, a.align_window, a.align_init, a.first_trial)
    long = (
        scenario_table(model, a.long, a.long_trials, a.align_window, a.align_init, a.first_trial)[0]
        if a.long > 0
        else {}
    )
    out = {
        **table,
        "long": {"duration_s": a.long, "trials": a.long_trials, "first_trial": a.first_trial, **long},
        "drift": drift_runs(model, a.cycles, a.hold, seed=7),
        "seed_table_mm": {
            m: {s: {"backbone_rmse_mm": v[0], "tip_rmse_mm": v[1]} for s, v in d.items()} for m, d in SEED_TABLE.items()
        },
        "settings": {
            "duration_s": a.duration,
            "trials": a.trials,
            "first_trial": a.first_trial,
            "cycles": a.cycles,
            "hold_s": a.hold,
            "model": str(a.model) if a.model else "fit_direction_model()",
            "align_window_s": a.align_window,
            "align_init_s": a.align_init,
            "wall_s": time.time() - t0,
        },
    }
    a.out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(a.out_dir / "table1.json") as tmp:
        Path(tmp).write_text(json.dumps(out, indent=2) + "\n")
    figure(examples, a.out_dir / "backbones.png")
    if a.mcap:
        for sc, (rec, res) in examples.items():  # the first trial of each scenario, every method against the truth
            est = {m: res[m]["points"] for m in rs.METHODS}
            print(f"shapes: {estimates_to_mcap(a.out_dir / f'shapes_{sc}.mcap', rec.att_t, rec.points, est)}")
    for title, tab in ((f"{a.duration:g} s x {a.trials}", table), (f"{a.long:g} s x {a.long_trials}", long)):
        if tab:
            print(f"backbone/tip RMSE [mm], {title} trials")
        for sc in (*scenarios.SCENARIOS, "average") if tab else ():
            print(
                f"{sc:12s} "
                + "  ".join(
                    f"{m}={tab[sc][m]['backbone_rmse_mm']:.2f}/{tab[sc][m]['tip_rmse_mm']:.2f}" for m in rs.METHODS
                )
            )
    print(json.dumps(out["drift"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
