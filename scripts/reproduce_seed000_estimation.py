#!/usr/bin/env python
"""Reproduce the shape of seed 000, Tables I and II, in simulation. Prints JSON; writes PNGs.

Truth: the finite-element beam simulator :mod:`flexlearn.sim.flexible_arm` (independent of the reduced
modal model), with IMU noise and biases. Estimation: the reduced model of :mod:`flexlearn.physics.modal`.

Table I (SLFM, §VI-B): tip-deformation RMSE for M_p = 20 and 40 kg, trajectory θ_d = θ̄ − A cos(Ω_tr t);
  piecewise rigid (5 IMUs at the centres of five 0.9 m segments) vs 1 mode (IMUs 1, 5), 2 modes (1, 3, 5),
  3 modes (1, 2, 3, 5). IMU 1 is the reference IMU.
Table II (DLFM, §VI-C): end-effector y, z, θ RMSE (our x, y, angle) for joystick-like motion; rigid
  (IMU joint angles only), piecewise rigid (8 IMUs, 4 segments per link), proposed (IMUs 1, 4 on link 1
  with one mode, 5, 6, 8 on link 2 with two modes), run through the scripted runtime estimator.

Every IMU angle is the PI complementary filter of eq. (6) (k_P = 7.0407, k_I = 0.1984, 1 kHz) on the
gravity-referenced inclination (eq. (2)) and the gyro rate, after removing the rigid-chain linear
acceleration (all methods) and, for the modal methods (run through the scripted runtime estimator), the
elastic acceleration of their own modal model. "oracle_angles" rows use the true IMU inclinations and
isolate the modelling error from the inclination-estimation error.

    python scripts/reproduce_seed000_estimation.py [--out-dir outputs/seed000_estimation] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from flexlearn.atomic import atomic_path, write_json_atomic  # noqa: E402
from flexlearn.physics.arm.kinematics_se2 import (
    forward_kinematics,
    piecewise_rigid_forward_kinematics,  # noqa: E402
    pose_to_xytheta,
    rigid_forward_kinematics,
)
from flexlearn.physics.modal import EstimatorOptions, FlexibleArmEstimator, FlexibleLink, ModalReconstructor  # noqa: E402
from flexlearn.sensing.imu import angular_acceleration, complementary_filter, kinematic_acceleration  # noqa: E402
from flexlearn.sim.flexible_arm import (
    seed_single_link_config,
    seed_single_link_trajectory,  # noqa: E402
    seed_two_link_config,
    simulate_flexible_arm,
    smooth_random_trajectory,
)

EI, RA = 74300.0, 5.37
DT = 1e-3


def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _filtered_angles(
    r: dict, lever: np.ndarray, link_of_imu: np.ndarray, ref_idx: list[int], tau_alpha: float = 0.05
) -> np.ndarray:
    """Complementary-filtered absolute inclination of every IMU (N, S) [rad] (eqs. (2), (6)).

    Two passes, offline twin of the runtime estimator: pass 1 filters the raw gravity-referenced angles;
    its reference-IMU angles (link angles), the reference gyros and their low-passed derivative give the
    rigid-chain linear acceleration of every IMU, which is removed before pass 2.
    """
    acc, gyr = r["acc"], r["gyr"]
    psi0, _ = complementary_filter(np.unwrap(np.arctan2(acc[..., 1], acc[..., 2]), axis=0), gyr[..., 0], dt=DT)
    w = gyr[:, ref_idx, 0]
    alpha = angular_acceleration(w, DT, tau_alpha)
    a = kinematic_acceleration(
        torch.as_tensor(w),
        torch.as_tensor(alpha),
        torch.as_tensor(psi0[:, ref_idx]),
        torch.as_tensor(lever),
        torch.as_tensor(link_of_imu),
    ).numpy()
    f = acc - a
    est, _ = complementary_filter(np.unwrap(np.arctan2(f[..., 1], f[..., 2]), axis=0), gyr[..., 0], dt=DT)
    return est


def _chain(cfg) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Lever arms (S, n), link index (S,) and reference-IMU indices of a simulated arm."""
    rows, links, refs = [], [], []
    lengths = [ln.length for ln in cfg.links]
    for i, ln in enumerate(cfg.links):
        refs.append(len(rows))
        for xi in ln.imu_positions:
            rows.append(lengths[:i] + [xi] + [0.0] * (len(lengths) - i - 1))
            links.append(i)
    return np.array(rows), np.array(links), refs


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))


def _table1_methods(psi: np.ndarray, link: FlexibleLink, pos: list) -> dict:
    est = {}
    # piecewise rigid: chain of 5 rigid 0.9 m segments, joint angle from IMU 1
    seg = torch.full((5,), 0.9, dtype=torch.float64)
    p = pose_to_xytheta(piecewise_rigid_forward_kinematics(torch.as_tensor(psi), seg)).numpy()
    th1 = psi[:, 0]
    est["Piecewise Rigid (5 IMUs)"] = -np.sin(th1) * p[:, 0] + np.cos(th1) * p[:, 1]
    for name, m, idx in (
        ("1 Mode (IMUs 1,5)", 1, [4]),
        ("2 Modes (IMUs 1,3,5)", 2, [2, 4]),
        ("3 Modes (IMUs 1,2,3,5)", 3, [1, 2, 4]),
    ):
        rec = ModalReconstructor.from_link(link, [pos[i] for i in idx], m, reference=pos[0])
        eta = rec(torch.as_tensor(psi[:, idx] - psi[:, :1]))
        est[name] = rec.tip_deflection(eta).numpy()
    return est


def table1(seconds: float, settle: float, seed: int, out: Path, speed: float) -> dict:
    t = np.arange(int(seconds / DT)) * DT
    omega_tr = 2 * math.pi * 0.25 * speed
    th, thdd = seed_single_link_trajectory(t, omega_tr=omega_tr)
    res: dict = {"trajectory": {"theta_bar_rad": 0.2, "A_rad": 0.25, "Omega_tr_rad_s": omega_tr, "seconds": seconds}}
    fig, axes = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for ax, Mp in zip(axes, (20.0, 40.0)):
        cfg = seed_single_link_config(Mp, seed=seed)
        r = simulate_flexible_arm(cfg, th[:, None], thdd[:, None])
        pos = list(cfg.links[0].imu_positions)  # 0.45, 1.35, 2.25, 3.15, 4.05
        psi = _filtered_angles(r, *_chain(cfg))
        truth = r["tip_deflection"][:, 0]
        keep = t >= settle
        link = FlexibleLink(EI, RA, 4.5, Mp)
        est = _table1_methods(psi, link, pos)
        # the modal methods through the scripted runtime estimator (their own IMUs only, with the
        # rigid + elastic acceleration compensation of their own modal model)
        for name, m, idx in (
            ("1 Mode (IMUs 1,5)", 1, [4]),
            ("2 Modes (IMUs 1,3,5)", 2, [2, 4]),
            ("3 Modes (IMUs 1,2,3,5)", 3, [1, 2, 4]),
        ):
            e = torch.jit.script(
                FlexibleArmEstimator.build([link], [[pos[0]] + [pos[i] for i in idx]], [m], EstimatorOptions(dt=DT))
            )
            sel = [0] + idx
            acc, gyr = torch.as_tensor(r["acc"][:, sel]), torch.as_tensor(r["gyr"][:, sel])
            est[name] = np.array([float(e(acc[k], gyr[k])[4][0]) for k in range(len(t))])
        oracle = _table1_methods(r["imu_angle"], link, pos)
        res[f"oracle_angles_Mp_{int(Mp)}kg"] = {k: _rmse(v[keep], truth[keep]) for k, v in oracle.items()}
        res[f"imu_angle_rmse_rad_Mp_{int(Mp)}kg"] = np.sqrt(np.mean((psi - r["imu_angle"])[keep] ** 2, 0)).tolist()
        res[f"Mp_{int(Mp)}kg"] = {k: _rmse(v[keep], truth[keep]) for k, v in est.items()}
        res[f"Mp_{int(Mp)}kg"]["truth_tip_deflection_rms_m"] = float(np.sqrt(np.mean(truth[keep] ** 2)))
        ax.plot(t, truth, "k", lw=2, label="truth (FE)")
        for k, v in est.items():
            ax.plot(t, v, lw=1, label=k)
        ax.set_ylabel(f"w(L) [m], M_p = {Mp:g} kg")
        ax.legend(fontsize=7, ncol=3)
    axes[-1].set_xlabel("t [s]")
    _save(fig, out / "table1_tip_deflection.png")
    return res


def _table2_offline(psi: np.ndarray, pos1: list, pos2: list) -> np.ndarray:
    """Proposed method offline (same maps as the runtime estimator) on given IMU angles → (N, 3)."""
    l1, l2 = FlexibleLink(EI, RA, 4.5, 30.0), FlexibleLink(EI, RA, 3.55, 10.0)
    r1 = ModalReconstructor.from_link(l1, [pos1[3]], 1, reference=pos1[0])
    r2 = ModalReconstructor.from_link(l2, [pos2[1], pos2[3]], 2, reference=pos2[0])
    P = torch.as_tensor(psi)
    e1, e2 = r1(P[:, [3]] - P[:, :1]), r2(P[:, [5, 7]] - P[:, 4:5])
    phi1, phi2 = P[:, 0] - r1.reference_slope(e1), P[:, 4] - r2.reference_slope(e2)
    w = torch.stack([r1.tip_deflection(e1), r2.tip_deflection(e2)], 1)
    sl = torch.stack([r1.tip_slope(e1), r2.tip_slope(e2)], 1)
    th = torch.stack([phi1, phi2 - phi1 - sl[:, 0]], 1)
    return pose_to_xytheta(forward_kinematics(th, torch.tensor([4.5, 3.55], dtype=torch.float64), w, sl)).numpy()


def table2(seconds: float, settle: float, seed: int, out: Path, speed: float) -> dict:
    t = np.arange(int(seconds / DT)) * DT
    th = smooth_random_trajectory(t, 2, seed=seed, hold=2.0 / speed, move=3.0 / speed)
    cfg = seed_two_link_config(seed=seed)
    r = simulate_flexible_arm(cfg, th)
    pos1, pos2 = list(cfg.links[0].imu_positions), list(cfg.links[1].imu_positions)
    psi = _filtered_angles(r, *_chain(cfg))
    L = torch.tensor([4.5, 3.55], dtype=torch.float64)
    truth = r["ee_pose"]
    keep = t >= settle
    est = {}
    # rigid: θ1 from IMU 1, θ2 between the last IMU of link 1 and the first of link 2 (seed §VI-C)
    th_rigid = np.stack([psi[:, 0], psi[:, 4] - psi[:, 3]], 1)
    est["Rigid"] = pose_to_xytheta(rigid_forward_kinematics(torch.as_tensor(th_rigid), L)).numpy()
    seg = torch.tensor([4.5 / 4] * 4 + [3.55 / 4] * 4, dtype=torch.float64)
    est["Piecewise rigid (8 IMUs)"] = pose_to_xytheta(
        piecewise_rigid_forward_kinematics(torch.as_tensor(psi), seg)
    ).numpy()
    links = [FlexibleLink(EI, RA, 4.5, 30.0), FlexibleLink(EI, RA, 3.55, 10.0)]
    estm = torch.jit.script(
        FlexibleArmEstimator.build(
            links, [[pos1[0], pos1[3]], [pos2[0], pos2[1], pos2[3]]], [1, 2], EstimatorOptions(dt=DT)
        )
    )
    sel = [0, 3, 4, 5, 7]
    acc = torch.as_tensor(r["acc"][:, sel])
    gyr = torch.as_tensor(r["gyr"][:, sel])
    poses = np.empty((len(t), 3))
    thetas = np.empty((len(t), 2))
    faults = 0
    t0 = time.perf_counter()
    for k in range(len(t)):
        o = estm(acc[k], gyr[k])
        poses[k] = o[0].numpy()
        thetas[k] = o[1].numpy()
        faults += int(o[-1])
    step_us = (time.perf_counter() - t0) / len(t) * 1e6
    est["Proposed (5 IMUs)"] = poses
    psi_true = r["imu_angle"]
    oracle = {
        "Rigid": pose_to_xytheta(
            rigid_forward_kinematics(torch.as_tensor(np.stack([psi_true[:, 0], psi_true[:, 4] - psi_true[:, 3]], 1)), L)
        ).numpy(),
        "Piecewise rigid (8 IMUs)": pose_to_xytheta(
            piecewise_rigid_forward_kinematics(torch.as_tensor(psi_true), seg)
        ).numpy(),
        "Proposed (5 IMUs)": _table2_offline(psi_true, pos1, pos2),
    }
    table = {}
    oracle_table = {}
    for k, v in oracle.items():
        dang = np.arctan2(np.sin(v[:, 2] - truth[:, 2]), np.cos(v[:, 2] - truth[:, 2]))
        oracle_table[k] = {
            "y_EE_m": _rmse(v[keep, 0], truth[keep, 0]),
            "z_EE_m": _rmse(v[keep, 1], truth[keep, 1]),
            "theta_EE_rad": float(np.sqrt(np.mean(dang[keep] ** 2))),
        }
    for k, v in est.items():
        dang = np.arctan2(np.sin(v[:, 2] - truth[:, 2]), np.cos(v[:, 2] - truth[:, 2]))
        table[k] = {
            "y_EE_m": _rmse(v[keep, 0], truth[keep, 0]),
            "z_EE_m": _rmse(v[keep, 1], truth[keep, 1]),
            "theta_EE_rad": float(np.sqrt(np.mean(dang[keep] ** 2))),
        }
    joint_rmse = [float(np.sqrt(np.mean((thetas[keep, i] - th[keep, i]) ** 2))) for i in range(2)]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for i, lab in enumerate(("|e y_EE| [m]", "|e z_EE| [m]", "|e θ_EE| [rad]")):
        for k, v in est.items():
            e = v[:, i] - truth[:, i]
            if i == 2:
                e = np.arctan2(np.sin(e), np.cos(e))
            axes[i].plot(t, np.abs(e), lw=1, label=k)
        axes[i].set_ylabel(lab)
        axes[i].set_yscale("log")
    axes[0].legend(fontsize=8)
    axes[-1].set_xlabel("t [s]")
    _save(fig, out / "table2_end_effector_error.png")
    return {
        "table": table,
        "oracle_angles_table": oracle_table,
        "imu_angle_rmse_rad": np.sqrt(np.mean((psi - psi_true)[keep] ** 2, 0)).tolist(),
        "proposed_joint_angle_rmse_rad": joint_rmse,
        "estimator_faults": faults,
        "estimator_python_loop_step_us": step_us,
        "seconds": seconds,
        "truth_ee_sag_rms_m": float(
            np.sqrt(
                np.mean(
                    (
                        truth[keep, 1]
                        - pose_to_xytheta(rigid_forward_kinematics(torch.as_tensor(th), L)).numpy()[keep, 1]
                    )
                    ** 2
                )
            )
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default="outputs/seed000_estimation")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speed", type=float, default=1.0, help="scales the trajectory rates (0.5: half as fast)")
    a = ap.parse_args()
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    t1 = table1(a.seconds, a.settle, a.seed, out, a.speed)
    t2 = table2(1.5 * a.seconds, a.settle, a.seed, out, a.speed)
    order1 = {
        k: (v["2 Modes (IMUs 1,3,5)"] < v["Piecewise Rigid (5 IMUs)"])
        for k, v in t1.items()
        if "Mp_" in k and "angle_rmse" not in k
    }
    tb = t2["table"]
    order2 = {
        q: tb["Proposed (5 IMUs)"][q] < tb["Piecewise rigid (8 IMUs)"][q] < tb["Rigid"][q]
        for q in ("y_EE_m", "z_EE_m", "theta_EE_rad")
    }
    tbo = t2["oracle_angles_table"]
    order2o = {
        q: tbo["Proposed (5 IMUs)"][q] < tbo["Piecewise rigid (8 IMUs)"][q] < tbo["Rigid"][q]
        for q in ("y_EE_m", "z_EE_m", "theta_EE_rad")
    }
    result = {
        "speed": a.speed,
        "table1_tip_deflection_rmse_m": t1,
        "table2_end_effector_rmse": t2,
        "ordering": {
            "table1_modal_below_piecewise_rigid": order1,
            "table2_proposed_lt_piecewise_lt_rigid": order2,
            "table2_oracle_angles_proposed_lt_piecewise_lt_rigid": order2o,
        },
        "figures": [str(out / "table1_tip_deflection.png"), str(out / "table2_end_effector_error.png")],
    }
    write_json_atomic(out / "estimation.json", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
