#!/usr/bin/env python
"""Reproduce seed 000, §VI-D (Table III, Figs. 15–17) in simulation. Prints JSON; writes JSON + PNGs.

Truth: :class:`flexlearn.physics.arm.FlexibleArmPlant` (closed loop: :mod:`flexlearn.sim.arm_closed_loop`) — the
DLFM of §VI-C (EI = 74300 N m², ρA = 5.37 kg/m,
L = 4.5 / 3.55 m), three assumed modes per link, Lagrangian by autodiff, implicit midpoint at 1 kHz,
noisy biased IMUs generated from the simulator state. Our choices (the seed gives none): hub inertias
I_h = 1000 / 200 kg m², tip masses M₁ = 20 kg (joint-2 actuator), M₂ = 10 kg (payload), reaching task
θ: (0.2, −0.6) → (0.6, −0.2) rad, quintic over 6 s from t = 1 s, 10 s in all; gains of §VI-D.

Controllers (scripted :class:`flexlearn.runtime.arm.controller.ArmController`, 1 kHz, IMUs 1, 4 | 5, 6, 8
with 1 | 2 modes; the state comes from the IMU pipeline, never from the simulator; the same estimation —
gyro calibration at rest, static sag correction of the angles — for every IMU-fed variant):
* ``proposed_imu``: eq. (45) in its hub form with the root moments E_iI_i w_i″(0) from the IMU-measured link
  loads (variant ``moment``, :mod:`flexlearn.runtime.arm.load`), IMU-fed;
* ``rigid_pd_imu``: PD with rigid gravity compensation (no deformation terms), IMU-fed;
* ``proposed_encoder``: as proposed, joint angles/rates from 18-bit encoders;
* ``oracle_hub``: eq. (45) in its consistent hub form fed with the simulator's true states (an ideal);
* ``seed_exact_imu``: eq. (45) exactly (double-counts gravity, see the controller module).

Top-level JSON keys are the proposed IMU-fed controller's: ``joint{1,2}_rmse_deg`` (θ_d − true θ),
``joint{1,2}_torque_rms_nm``, ``step_us_median`` (scripted step, 1 thread); per-variant details under
``variants``. ``tip_dynamic_rms_m``: RMS of the tip deflections minus the static sag at the current joint
angles (the vibration the controller leaves). ``--robustness-seeds``: further IMU noise/bias draws for the
proposed and rigid IMU-fed controllers, each in its own process; ``robustness`` reports per-seed figures, the
median and the worst.

    python scripts/reproduce_seed000_control.py [--out-dir outputs/seed000_control] [--seconds 10]
        [--robustness-seeds 1 2 3 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import statistics
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from flexlearn.atomic import atomic_path, write_json_atomic  # noqa: E402
from flexlearn.physics.arm import FlexibleArmPlant, seed_arm_config  # noqa: E402
from flexlearn.runtime.arm.controller import ArmController, ArmControllerConfig, quintic  # noqa: E402
from flexlearn.runtime.arm.outputs import state_layout  # noqa: E402
from flexlearn.sim.arm_closed_loop import ImuArray, ImuNoiseConfig, simulate_closed_loop  # noqa: E402

VARIANTS = [
    ("proposed_imu", "moment", "imu"),
    ("rigid_pd_imu", "rigid", "imu"),
    ("proposed_encoder", "moment", "enc"),
    ("oracle_hub", "hub", "oracle"),
    ("seed_exact_imu", "seed", "imu"),
]


def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _oracle(cfg: ArmControllerConfig):
    """Eq. (45) in its consistent hub form (``hub``: τ_i = K_p e + K_d ė + E_iI_i w_i″(0) + I_h θ̈_d) fed with
    the simulator's true joint states and base curvatures — the ideal the IMU pipeline should approach."""
    kp, kd = torch.tensor(cfg.kp, dtype=torch.float64), torch.tensor(cfg.kd, dtype=torch.float64)
    EI, Ih = torch.tensor(cfg.EI, dtype=torch.float64), torch.tensor(cfg.hub_inertia, dtype=torch.float64)
    th0, thf = torch.tensor(cfg.theta0, dtype=torch.float64), torch.tensor(cfg.thetaf, dtype=torch.float64)

    def ctrl(fr, t, info):
        thd, vd, ad = quintic(torch.tensor(t, dtype=torch.float64), th0, thf, cfg.t0, cfg.duration)
        th, rt = info["q"][:2], info["qd"][:2]
        tau = kp * (thd - th) + kd * (vd - rt) - (EI * info["curvature"] - Ih * ad)
        z = torch.zeros(7, dtype=torch.float64)
        st = torch.cat([th, rt, z[:3], info["tip"], z, thd, z[:2]])
        return tau, st, 0

    return ctrl


def _ctrl(c, mode):
    if mode == "enc":
        return lambda fr, t, info: c.step_joints(fr, t, info["theta_enc"], info["rate_enc"])
    return lambda fr, t, info: c(fr, t)


def bench_step(cfg: ArmControllerConfig, steps: int = 2000, repeats: int = 5) -> dict:
    """Median wall time of one scripted controller step (estimation included), 1 thread [µs]."""
    torch.set_num_threads(1)
    c = torch.jit.script(ArmController.build(cfg))
    g = torch.Generator().manual_seed(0)
    fr = torch.zeros(c.n_imus, 6, dtype=torch.float64)
    fr[:, 2] = 9.80665
    fr = fr + 0.01 * torch.randn(fr.shape, generator=g, dtype=torch.float64)
    for k in range(300):
        c(fr, k * 1e-3)
    res = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for k in range(steps):
            c(fr, 1.0 + k * 1e-3)
        res.append((time.perf_counter() - t0) / steps * 1e6)
    return {"step_us_median": statistics.median(res), "step_us_min": min(res)}


def run(
    seconds: float,
    out: Path,
    seed: int,
    lag: float,
    variants=VARIANTS,
    base: ArmControllerConfig | None = None,
) -> dict:
    base = base if base is not None else ArmControllerConfig()
    torch.set_num_threads(1)
    plant = FlexibleArmPlant(seed_arm_config(hub_inertia=base.hub_inertia, payload=base.payload, actuator_tau=lag))
    pos = [list(p) for p in base.imu_positions]
    ctrls, names = [], []
    for name, variant, mode in variants:
        if mode == "oracle":
            ctrls.append(_oracle(base))
        else:
            c = torch.jit.script(ArmController.build(dataclasses.replace(base, variant=variant)))
            ctrls.append(_ctrl(c, mode))
        names.append(name)
    t0 = time.perf_counter()
    log = simulate_closed_loop(plant, ctrls, base.theta0, seconds, ImuArray(pos, ImuNoiseConfig()), seed=seed)
    wall = time.perf_counter() - t0
    res = _variant_metrics(plant, log, names, base)
    res["sim_wall_s"] = wall
    if out is not None:
        _figures(log, names, res, base, out)
    return res


def _desired(t: np.ndarray, base: ArmControllerConfig) -> np.ndarray:
    """(T, 2) desired joint angles [rad]: the quintic reference at the times t [s]."""
    th_d, _, _ = quintic(
        torch.as_tensor(t)[:, None], torch.tensor(base.theta0), torch.tensor(base.thetaf), base.t0, base.duration
    )
    return th_d.numpy()


def _variant_metrics(plant, log: dict, names: list, base: ArmControllerConfig) -> dict:
    """Per controller: joint tracking and estimate errors [deg], torques, dynamic tip deflection and its
    reconstruction (static sag at the current joint angles removed: every 10th sample, interpolated)."""
    t = log["t"]
    th_d = _desired(t, base)
    lay = state_layout(3)
    sub = slice(None, None, 10)
    res: dict = {"variants": {}}
    for b, name in enumerate(names):
        th = log["theta"][b]
        st = log["est_state"][b]
        est = st[:, lay["theta"][0] : lay["theta"][1]]
        e = np.degrees(th_d - th)
        ee = np.degrees(th_d - est)
        qs = plant.static_equilibrium(torch.as_tensor(th[sub]))
        sag = plant.tip_quantities(qs)["tip"].numpy()
        sag_i = np.stack([np.interp(t, t[sub], sag[:, i]) for i in range(2)], 1)
        dyn = log["tip_deflection"][b] - sag_i
        w_est = st[:, lay["tip_deflection"][0] : lay["tip_deflection"][1]]
        finite = bool(np.isfinite(th).all()) and float(np.abs(e).max()) < 30.0
        res["variants"][name] = {
            "joint_rmse_deg": np.sqrt(np.mean(e**2, 0)).tolist(),
            "joint_max_abs_err_deg": np.abs(e).max(0).tolist(),
            "joint_rmse_vs_estimate_deg": np.sqrt(np.mean(ee**2, 0)).tolist(),
            "estimate_rmse_deg": np.degrees(np.sqrt(np.mean((est - th) ** 2, 0))).tolist(),
            "torque_rms_nm": np.sqrt(np.mean(log["tau_cmd"][b] ** 2, 0)).tolist(),
            "tip_dynamic_rms_m": np.sqrt(np.mean(dyn**2, 0)).tolist(),
            "tip_reconstruction_rmse_m": np.sqrt(np.mean((w_est - log["tip_deflection"][b]) ** 2, 0)).tolist(),
            "faults": int((log["fault"][b] != 0).sum()),
            "stable": finite,
        }
    return res


def _figures(log: dict, names: list, res: dict, base: ArmControllerConfig, out: Path) -> None:
    """Seed Figs. 15–17 for the proposed IMU-fed controller and the rigid baseline (a diverged controller is left
    out of the plots and named in the title)."""
    t = log["t"]
    th_d = _desired(t, base)
    lay = state_layout(3)
    shown = [(b, nm) for b, nm in enumerate(names[:2]) if res["variants"][nm]["stable"]]
    gone = [nm for nm in names[:2] if not res["variants"][nm]["stable"]]
    note = f" — diverged, not shown: {', '.join(gone)}" if gone else ""
    fig, ax = plt.subplots(2, 2, figsize=(12, 6), sharex=True)
    for j in range(2):
        ax[0, j].plot(t, np.degrees(th_d[:, j]), "k--", label="desired")
        for b, name in shown:
            st = log["est_state"][b]
            ax[0, j].plot(t, np.degrees(st[:, j]), lw=1, label=f"{name} (IMU estimate)")
            ax[0, j].plot(t, np.degrees(log["theta"][b][:, j]), lw=1, ls=":", label=f"{name} (true)")
            ax[1, j].plot(t, np.degrees(th_d[:, j] - log["theta"][b][:, j]), lw=1, label=name)
        ax[0, j].set_ylabel(f"θ{j + 1} [deg]")
        ax[1, j].set_ylabel(f"e{j + 1} [deg]")
        ax[1, j].set_xlabel("t [s]")
    ax[0, 0].legend(fontsize=7)
    ax[1, 0].legend(fontsize=7)
    fig.suptitle("Fig. 15: tracking and errors (IMU-fed)" + note)
    _save(fig, out / "fig15_tracking.png")
    fig, ax = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for j in range(2):
        for b, name in shown:
            ax[j].plot(t, log["tau_cmd"][b][:, j], lw=1, label=name)
        ax[j].set_ylabel(f"τ{j + 1} [N m]")
    ax[0].legend(fontsize=7)
    ax[1].set_xlabel("t [s]")
    fig.suptitle("Fig. 16: joint torques" + note)
    _save(fig, out / "fig16_torques.png")
    fig, ax = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    st = log["est_state"][0]
    for j in range(2):
        ax[j].plot(t, log["tip_deflection"][0][:, j], "k", lw=1.5, label="truth (proposed)")
        ax[j].plot(t, st[:, lay["tip_deflection"][0] + j], lw=1, label="IMU reconstruction (proposed)")
        if not gone:
            ax[j].plot(t, log["tip_deflection"][1][:, j], lw=1, ls=":", label="truth (rigid PD)")
        ax[j].set_ylabel(f"w{j + 1}(L{j + 1}) [m]")
    ax[0].legend(fontsize=7)
    ax[1].set_xlabel("t [s]")
    fig.suptitle("Fig. 17: tip deflections, truth and IMU reconstruction" + note)
    _save(fig, out / "fig17_tip_deformation.png")


def _robust_one(args: tuple) -> dict:
    seconds, seed, lag, base = args
    torch.set_num_threads(1)
    try:
        r = run(seconds, None, seed, lag, VARIANTS[:2], base)["variants"]
    except FloatingPointError as exc:  # a diverged simulation is a result, not a crash
        return {"seed": seed, "diverged": str(exc)}
    return {
        "seed": seed,
        **{
            k: {
                "joint_rmse_deg": v["joint_rmse_deg"],
                "tip_dynamic_rms_m": v["tip_dynamic_rms_m"],
                "stable": v["stable"],
            }
            for k, v in r.items()
        },
    }


def robustness(seconds: float, seeds: list, lag: float, base: ArmControllerConfig) -> dict:
    """Proposed vs rigid IMU-fed over IMU noise/bias draws (one process per seed); median and worst."""
    with mp.get_context("spawn").Pool(len(seeds)) as pool:
        runs = pool.map(_robust_one, [(seconds, s, lag, base) for s in seeds])
    out: dict = {"runs": runs}
    for name in ("proposed_imu", "rigid_pd_imu"):
        ok = [r[name] for r in runs if name in r]
        rm = np.array([v["joint_rmse_deg"] if v["stable"] else [np.inf, np.inf] for v in ok])
        tip = np.array([v["tip_dynamic_rms_m"] if v["stable"] else [np.inf, np.inf] for v in ok])
        out[name] = {
            "n": len(runs),
            "diverged_or_unstable": int(len(runs) - sum(v["stable"] for v in ok)),
            "joint_rmse_deg_median": np.median(rm, 0).tolist() if len(rm) else None,
            "joint_rmse_deg_worst": rm.max(0).tolist() if len(rm) else None,
            "tip_dynamic_rms_m_median": np.median(tip, 0).tolist() if len(tip) else None,
            "tip_dynamic_rms_m_worst": tip.max(0).tolist() if len(tip) else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default="outputs/seed000_control")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lag", type=float, default=0.0, help="actuator lag [s] (0: none)")
    ap.add_argument("--skip-seed-exact", action="store_true")
    ap.add_argument("--robustness-seeds", type=int, nargs="*", default=[])
    ap.add_argument("--hub-inertia", type=float, nargs=2, default=list(ArmControllerConfig.hub_inertia))
    a = ap.parse_args()
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = ArmControllerConfig(hub_inertia=tuple(a.hub_inertia))
    variants = VARIANTS[:4] if a.skip_seed_exact else VARIANTS
    res = run(a.seconds, out, a.seed, a.lag, variants, base)
    p = res["variants"]["proposed_imu"]
    res.update(
        {
            "joint1_rmse_deg": p["joint_rmse_deg"][0],
            "joint2_rmse_deg": p["joint_rmse_deg"][1],
            "joint1_torque_rms_nm": p["torque_rms_nm"][0],
            "joint2_torque_rms_nm": p["torque_rms_nm"][1],
            **bench_step(base),
            "seed_table3": {
                "joint1_rmse_deg": 0.363,
                "joint2_rmse_deg": 0.477,
                "joint1_torque_rms_nm": 3179.57,
                "joint2_torque_rms_nm": 310.40,
            },
            "setup": {
                "hub_inertia_kg_m2": list(base.hub_inertia),
                "tip_mass_kg": list(base.payload),
                "theta0_rad": list(base.theta0),
                "thetaf_rad": list(base.thetaf),
                "t0_s": base.t0,
                "duration_s": base.duration,
                "seconds": a.seconds,
                "truth_modes": [3, 3],
                "controller_modes": list(base.n_modes),
                "gains": {"kp": list(base.kp), "kd": list(base.kd)},
                "actuator_lag_s": a.lag,
                "variant": base.variant,
                "load_filter_hz": base.load_filter_hz,
                "imu_noise": dataclasses.asdict(ImuNoiseConfig()),
            },
        }
    )
    if a.robustness_seeds:
        res["robustness"] = robustness(a.seconds, a.robustness_seeds, a.lag, base)
    write_json_atomic(out / "results.json", res)
    print(json.dumps(res, indent=2, default=float))


if __name__ == "__main__":
    main()
