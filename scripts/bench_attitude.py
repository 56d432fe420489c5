"""Benchmark: IMU attitude filters on real BROAD recordings — flexlearn against VQF, Madgwick, Mahony, Fusion.

Every recording in ``<repo>/../shared/data/external/`` (BROAD trial 02 and the seven in ``broad/``; Laidig et
al., *Data* 6(7):72, 2021, CC BY 4.0) is run through each filter on its defaults, in one run:

* 6-axis (gyr + acc): flexlearn (``estimate_orientation``), VQF 6D (``vqf``), Madgwick and Mahony
  (``ahrs``), Fusion (``imufusion``); 9-axis (+ mag): the same with the magnetometer.
* Inclination RMSE [deg] (angle between the gravity directions in the sensor frame of estimate and
  reference) over the samples where ``movement`` is true and the reference is finite; heading RMSE [deg]
  (BROAD: ``2 atan |e_z/e_w|`` of ``q̂ ⊗ q_ref⁻¹``, ENU) for 9-axis filters, reported for the undisturbed
  trials (``heading_undisturbed_mean``) and per trial; CPU µs per sample (thread CPU time, best of
  ``--repeats`` for the compiled filters, one pass for the pure-Python ``ahrs``).
* Split: development trials (02, 05, 11, 24: where defaults were checked) and held-out (09, 18, 30, 33).
* Robustness (flexlearn and VQF 6D): start mid-motion (RMSE over 5–10 s after the start) and a 1 s gap of
  NaN samples inside a motion phase (RMSE over 5–10 s after the gap; VQF gets zero samples there, its
  convention for missing data); flexlearn 9-axis inclination vs 6-axis on the magnetically disturbed trials.
* TorchScript step (``AttitudeStep``) against the offline path over a whole recording: largest angle
  between the two estimates [rad] and the step time [µs] (``--no-parity`` skips it, ~20 s).
* ``--vibrating-link``: slopes of a simulated vibrating flexible link (seed 000, `flexlearn.sim.flexible_arm`):
  raw accelerometer angle, the PI complementary filter of eq. (6), this filter and the flexible-arm estimator
  with either inclination filter (its default PI filter, ``inclination="attitude"``), plus the estimator's joint
  angle and tip deflection errors; noise seed 0 (sinusoid) and held-out seeds 1, 2 (random moves), ~10 min.

Outputs: a Markdown table on stdout, ``<out>/bench_attitude.json`` and ``<out>/bench_attitude.png`` (error
over time per trial). Packages that are not installed are skipped (listed in the JSON). Run:
``python scripts/bench_attitude.py [--out outputs/bench_attitude] [--quick] [--only flexlearn,VQF] [--vibrating-link]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from flexlearn.physics.modal.estimator import EstimatorOptions, FlexibleArmEstimator
from flexlearn.physics.modal.link import FlexibleLink
from flexlearn.sensing.attitude.offline import run_filter
from flexlearn.sensing.attitude.orientation import estimate_orientation
from flexlearn.sensing.attitude.step import AttitudeStep
from flexlearn.sensing.imu import complementary_filter
from flexlearn.sim.flexible_arm import (
    seed_single_link_config,
    seed_single_link_trajectory,
    simulate_flexible_arm,
    smooth_random_trajectory,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "external"
DEV = ("02", "05", "11", "24")
HELD = ("09", "18", "30", "33")
DISTURBED_MAG = ("30", "33")
S2 = math.sqrt(0.5)
NWU_TO_ENU = np.array([S2, 0.0, 0.0, S2])  # +90° about z


def find_recordings() -> dict:
    """Trial id ("02", …) → HDF5 path, for every BROAD file under DATA."""
    files = sorted(DATA.glob("broad_trial*.hdf5")) + sorted((DATA / "broad").glob("*.hdf5"))
    out = {}
    for f in files:
        name = f.stem.replace("broad_trial", "")
        out[name[:2]] = f
    return dict(sorted(out.items()))


def load(path: Path) -> dict:
    import h5py  # optional: only to read the BROAD recordings

    with h5py.File(path, "r") as f:
        d = {k: np.ascontiguousarray(f[k][:], dtype=np.float64) for k in ("imu_acc", "imu_gyr", "imu_mag", "opt_quat")}
        d["movement"] = np.asarray(f["movement"][:]).astype(bool).ravel()
        d["fs"] = float(f.attrs["sampling_rate"])
    d["name"] = path.stem
    return d


# ----------------------------------------------------------------------------------------- quaternions
def qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = np.moveaxis(np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.broadcast_to(b, np.broadcast_shapes(a.shape, b.shape)), -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def errors_deg(q: np.ndarray, ref: np.ndarray) -> tuple:
    """Per-sample inclination and heading errors [deg] (BROAD's definitions; NaN where ref is NaN)."""
    e = qmul(q, ref * np.array([1.0, -1.0, -1.0, -1.0]))
    e = e / np.linalg.norm(e, axis=-1, keepdims=True)
    inc = np.degrees(2 * np.arccos(np.clip(np.sqrt(e[:, 0] ** 2 + e[:, 3] ** 2), 0, 1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        head = np.degrees(2 * np.arctan(np.abs(e[:, 3] / e[:, 0])))
    return inc, head


def rmse(e: np.ndarray, mask: np.ndarray) -> float:
    m = mask & np.isfinite(e)
    return float(np.sqrt(np.mean(e[m] ** 2))) if m.any() else float("nan")


# ----------------------------------------------------------------------------------------------- filters
def _flexlearn(d, mag: bool):
    return estimate_orientation(d["imu_acc"], d["imu_gyr"], d["fs"], mag=d["imu_mag"] if mag else None).numpy()


def _vqf(d, mag: bool):
    import vqf  # optional: a baseline, skipped when not installed

    v = vqf.VQF(1.0 / d["fs"])
    if mag:
        return v.updateBatch(d["imu_gyr"], d["imu_acc"], d["imu_mag"])["quat9D"]
    return v.updateBatch(d["imu_gyr"], d["imu_acc"])["quat6D"]


def _madgwick(d, mag: bool):
    from ahrs.filters import Madgwick  # optional baseline; frame NWU (sensor → earth)

    q = Madgwick(gyr=d["imu_gyr"], acc=d["imu_acc"], mag=d["imu_mag"] if mag else None, frequency=d["fs"]).Q
    return qmul(NWU_TO_ENU, q)


def _mahony(d, mag: bool):
    from ahrs.filters import Mahony  # optional baseline; with a magnetometer its earth frame is ENU already

    return Mahony(gyr=d["imu_gyr"], acc=d["imu_acc"], mag=d["imu_mag"] if mag else None, frequency=d["fs"]).Q


def _fusion(d, mag: bool):
    import imufusion  # optional baseline; defaults: NWU, gain 0.5; inputs °/s, g

    f = imufusion.Ahrs()
    f.set_sample_period(1.0 / d["fs"])
    g, a, m = np.degrees(d["imu_gyr"]), d["imu_acc"] / 9.80665, d["imu_mag"]
    out = np.empty((len(g), 4))
    for k in range(len(g)):
        if mag:
            f.update(g[k], a[k], m[k])
        else:
            f.update_no_magnetometer(g[k], a[k])
        out[k] = f.get_quaternion()
    return qmul(NWU_TO_ENU, out)


FILTERS = {
    "flexlearn": (_flexlearn, None),
    "VQF": (_vqf, "vqf"),
    "Madgwick": (_madgwick, "ahrs"),
    "Mahony": (_mahony, "ahrs"),
    "Fusion": (_fusion, "imufusion"),
}


def available(skip: list) -> dict:
    """The filters whose package imports; the others are appended to ``skip``."""
    out = {}
    for name, (fn, pkg) in FILTERS.items():
        try:
            if pkg:
                importlib.import_module(pkg)
            out[name] = fn
        except Exception as e:  # pragma: no cover - depends on the environment
            skip.append(f"{name}: {pkg} not installed ({type(e).__name__})")
    return out


def timed(fn, d, mag: bool, repeats: int):
    """(quaternions, CPU µs per sample): best of ``repeats`` passes (one for slow Python filters)."""
    best, q = float("inf"), None
    for _ in range(repeats):
        c0 = time.thread_time()
        q = fn(d, mag)
        best = min(best, (time.thread_time() - c0) / len(d["imu_gyr"]) * 1e6)
    return np.asarray(q, dtype=np.float64), best


# ----------------------------------------------------------------------------------------------- scoring
def score_trials(recs: dict, filters: dict, repeats: int) -> tuple:
    """Per trial and filter: inclination (6D and 9D), heading (9D) RMSE [deg], µs/sample; error series."""
    res, series = {}, {}
    for tid, path in recs.items():
        d = load(path)
        mov = d["movement"] & np.isfinite(d["opt_quat"]).all(1)
        row, ser = {"file": path.name, "samples": len(mov), "scored": int(mov.sum())}, {}
        for name, fn in filters.items():
            for mag in (False, True):
                reps = repeats if name in ("flexlearn", "VQF") else 1
                q, us = timed(fn, d, mag, reps)
                inc, head = errors_deg(q, d["opt_quat"])
                key = f"{name} {'9D' if mag else '6D'}"
                row[key] = {"inclination_rmse_deg": rmse(inc, mov), "us_per_sample": us}
                if mag:
                    row[key]["heading_rmse_deg"] = rmse(head, mov)
                ser[key] = (inc, head)
            print(
                f"  {tid} {name}: 6D {row[name + ' 6D']['inclination_rmse_deg']:.3f}°, "
                f"9D heading {row[name + ' 9D']['heading_rmse_deg']:.2f}°",
                flush=True,
            )
        res[tid] = row
        series[tid] = (ser, mov, d["fs"])
    return res, series


def motion_points(movement: np.ndarray, fs: float, per_trial: int = 4) -> list:
    """Sample indices in the middle (and the quarter points) of motion phases longer than 12 s."""
    edges = np.flatnonzero(np.diff(np.r_[0, movement.astype(np.int8), 0]))
    pts = []
    for a, b in zip(edges[::2], edges[1::2]):
        if b - a > 12 * fs:
            pts += [a + (b - a) // 4, a + (b - a) // 2]
    return pts[:per_trial]


def _window_rmse(inc: np.ndarray, t0: int, fs: float) -> float:
    w = np.zeros(len(inc), dtype=bool)
    w[t0 + int(5 * fs) : t0 + int(10 * fs)] = True
    return rmse(inc, w)


def robustness(recs: dict, filters: dict) -> dict:
    """Start mid-motion and a 1 s NaN gap mid-motion: inclination RMSE over 5–10 s after, per event [deg];
    ``uncut_same_window``: the uncut run over the window 5–10 s after the start point (the steady level)."""
    out = {"start_in_motion": {}, "gap_1s": {}}
    for tid, path in recs.items():
        d = load(path)
        fs = d["fs"]
        for name in ("flexlearn", "VQF"):
            if name not in filters:
                continue
            starts, gaps, steady = [], [], []
            inc_full, _ = errors_deg(filters[name](d, False), d["opt_quat"])
            for s0 in motion_points(d["movement"], fs):
                steady.append(_window_rmse(inc_full, s0, fs))  # the uncut run over the same window
                seg = {k: (v[s0 : s0 + int(12 * fs)] if isinstance(v, np.ndarray) else v) for k, v in d.items()}
                inc, _ = errors_deg(filters[name](seg, False), seg["opt_quat"])
                starts.append(_window_rmse(inc, 0, fs))
                g = dict(d)
                hole = slice(s0, s0 + int(fs))
                fill = np.nan if name == "flexlearn" else 0.0  # VQF: zeros are its "no sample"
                for k in ("imu_acc", "imu_gyr"):
                    g[k] = d[k].copy()
                    g[k][hole] = fill
                inc, _ = errors_deg(filters[name](g, False), d["opt_quat"])
                gaps.append(_window_rmse(inc, hole.stop, fs))
            out["start_in_motion"].setdefault(name, {})[tid] = starts
            out["gap_1s"].setdefault(name, {})[tid] = gaps
            out.setdefault("uncut_same_window", {}).setdefault(name, {})[tid] = steady
    for kind in out.values():
        for per in kind.values():
            trials = list(per)
            for split, ids in (
                ("", trials),
                ("dev_", [t for t in trials if t in DEV]),
                ("held_out_", [t for t in trials if t in HELD]),
            ):
                vals = [v for t in ids for v in per[t] if np.isfinite(v)]
                per[split + "worst"] = max(vals) if vals else float("nan")
                per[split + "mean"] = float(np.mean(vals)) if vals else float("nan")
    return out


def parity(recs: dict) -> dict:
    """TorchScript step vs offline path over trial 02 (6D and 9D): max angle [rad], step time [µs]."""
    d = load(recs["02"] if "02" in recs else next(iter(recs.values())))
    out = {}
    for mag in (False, True):
        ref = run_filter(d["imu_gyr"], d["imu_acc"], d["fs"], mag=d["imu_mag"] if mag else None).quat
        step = torch.jit.script(AttitudeStep(d["fs"], use_mag=mag))
        G, A, M = (torch.as_tensor(d[k]) for k in ("imu_gyr", "imu_acc", "imu_mag"))
        q = np.empty_like(ref)
        c0, t0 = time.thread_time(), time.perf_counter()
        for k in range(len(G)):
            q[k] = step(G[k], A[k], M[k] if mag else None).numpy()
        cpu, wall = (time.thread_time() - c0) / len(G) * 1e6, (time.perf_counter() - t0) / len(G) * 1e6
        e = qmul(ref * np.array([1.0, -1, -1, -1]), q)
        ang = 2 * np.arctan2(np.linalg.norm(e[:, 1:], axis=1), np.abs(e[:, 0]))
        out["9D" if mag else "6D"] = {
            "max_angle_rad": float(ang.max()),
            "step_us_cpu": cpu,
            "step_us_wall": wall,
            "samples": len(G),
        }
    return out


def _link_estimates(cfg, acc: np.ndarray, gyr: np.ndarray, inclination: str) -> dict:
    """The flexible-arm estimator (2 modes, its defaults, TorchScript) with the given inclination filter over the
    readings of the single link ``cfg``: ψ̂ (N, S) [rad], joint angle θ̂ (N,) [rad], tip deflection ŵ(L) (N,) [m]."""
    ln = cfg.links[0]
    est = torch.jit.script(
        FlexibleArmEstimator.build(
            [FlexibleLink(ln.EI, ln.rho_A, ln.length, ln.tip_mass)],
            [list(ln.imu_positions)],
            [2],
            EstimatorOptions(dt=cfg.dt, inclination=inclination),
        )
    )
    A, G = torch.as_tensor(acc), torch.as_tensor(gyr)
    psi = np.empty((len(A), A.shape[1]))
    theta, tip = np.empty(len(A)), np.empty(len(A))
    for k in range(len(A)):
        out = est(A[k], G[k])
        psi[k] = est.psi_hat.numpy()
        theta[k], tip[k] = float(out[1][0]), float(out[4][0])
    return {"psi": psi, "theta": theta, "tip": tip}


def _link_case(seed: int, motion: str, seconds: float) -> dict:
    """Inclination RMSE [deg] per IMU after 10 s, one simulated run (noise and IMU-bias draw ``seed``; motion
    ``sinusoid``: θ̄ − A cos Ω t, ``random``: joystick-like quintic moves of the same seed); for the estimator
    also the joint angle [deg] and tip deflection [mm] RMSE after 10 s."""
    cfg = seed_single_link_config(seed=seed)
    t = np.arange(int(seconds / cfg.dt)) * cfg.dt
    if motion == "sinusoid":
        th, thdd = seed_single_link_trajectory(t)
        r = simulate_flexible_arm(cfg, th[:, None], thdd[:, None])
    else:
        r = simulate_flexible_arm(cfg, smooth_random_trajectory(t, 1, seed=seed))
    acc, gyr, ang = r["acc"], r["gyr"], r["imu_angle"]
    late = t > 10.0
    est = {k: _link_estimates(cfg, acc, gyr, k) for k in ("complementary", "attitude")}
    rows: dict = {
        "raw accelerometer": [],
        "complementary eq. (6)": [],
        "attitude filter": [],
        "estimator (compensated)": [],
        "estimator (compensated, attitude filter)": [],
    }
    for s in range(ang.shape[1]):
        raw = np.arctan2(acc[:, s, 1], acc[:, s, 2])
        cf = complementary_filter(raw, gyr[:, s, 0], cfg.dt)[0][:, 0]
        w, x, y, z = run_filter(gyr[:, s], acc[:, s], 1.0 / cfg.dt).quat.T
        att = np.arctan2(2 * (y * z + w * x), 1 - 2 * (x * x + y * y))  # R(q)ᵀ e_z: (·, y, z) components
        for name, psi in zip(rows, (raw, cf, att, est["complementary"]["psi"][:, s], est["attitude"]["psi"][:, s])):
            rows[name].append(float(np.degrees(np.sqrt(np.mean((psi - ang[:, s])[late] ** 2)))))

    def late_rms(err: np.ndarray) -> float:
        return float(np.sqrt(np.mean(err[late] ** 2)))

    outputs = {
        k: {
            "theta_rmse_deg": float(np.degrees(late_rms(e["theta"] - r["theta"][:, 0]))),
            "tip_deflection_rmse_mm": 1e3 * late_rms(e["tip"] - r["tip_deflection"][:, 0]),
        }
        for k, e in est.items()
    }
    return {
        "seed": seed,
        "motion": motion,
        "modes_hz": [float(f) for f in r["fe_frequencies_hz"][0][:3]],
        "inclination_rmse_deg": rows,
        "mean_deg": {k: float(np.mean(v)) for k, v in rows.items()},
        "estimator_outputs": outputs,
    }


def vibrating_link(seconds: float = 40.0) -> dict:
    """Slopes under vibration: the seed-000 single flexible link (4.5 m, 20 kg payload, first modes 1.6 / 15 Hz;
    `flexlearn.sim.flexible_arm`, 1 kHz) with 5 IMUs. Inclination RMSE [deg] per IMU after 10 s of: the raw
    accelerometer angle atan2(f_y, f_z); the PI complementary filter of eq. (6) on it; this attitude filter
    (6-axis, ψ from R(q)ᵀ e_z); the flexible-arm estimator, which subtracts the modelled rigid and elastic
    accelerations first (`FlexibleArmEstimator`, 2 modes), with its default PI filter and with
    ``inclination="attitude"`` (this filter on the compensated readings). Cases: seed 0 with the trajectory
    θ̄ − A cos Ω t (where the estimator's defaults were set) and held-out seeds 1 and 2 (other noise and IMU
    biases) with joystick-like random moves."""
    cases = [_link_case(0, "sinusoid", seconds), _link_case(1, "random", seconds), _link_case(2, "random", seconds)]
    out: dict = {
        "imus": len(cases[0]["inclination_rmse_deg"]["raw accelerometer"]),
        "seconds": seconds,
        "modes_hz": cases[0]["modes_hz"],
        "inclination_rmse_deg": cases[0]["inclination_rmse_deg"],
        "cases": cases,
    }
    return out


# --------------------------------------------------------------------------------------------- reporting
def summarize(res: dict, rob: dict, par: dict) -> dict:
    """Means over development / held-out / all trials, ratios to VQF and the targets of the issue."""
    keys = [k for k in next(iter(res.values())) if k.endswith(("6D", "9D"))]
    groups = {"dev": [t for t in DEV if t in res], "held_out": [t for t in HELD if t in res], "all": list(res)}
    undist = [t for t in res if "undisturbed" in res[t]["file"]]
    summ = {"inclination_mean": {}, "heading_undisturbed_mean": {}, "us_per_sample_mean": {}}
    for k in keys:
        summ["inclination_mean"][k] = {
            g: float(np.mean([res[t][k]["inclination_rmse_deg"] for t in ts])) for g, ts in groups.items() if ts
        }
        summ["us_per_sample_mean"][k] = float(np.mean([res[t][k]["us_per_sample"] for t in res]))
        if k.endswith("9D") and undist:
            summ["heading_undisturbed_mean"][k] = float(np.mean([res[t][k]["heading_rmse_deg"] for t in undist]))
    tg = {}
    if "VQF 6D" in keys:
        fl, vq = summ["inclination_mean"]["flexlearn 6D"], summ["inclination_mean"]["VQF 6D"]
        ratios = {
            t: res[t]["flexlearn 6D"]["inclination_rmse_deg"] / res[t]["VQF 6D"]["inclination_rmse_deg"] for t in res
        }
        hr = {t: res[t]["flexlearn 9D"]["heading_rmse_deg"] / res[t]["VQF 9D"]["heading_rmse_deg"] for t in undist}
        cpu = summ["us_per_sample_mean"]["flexlearn 6D"] / summ["us_per_sample_mean"]["VQF 6D"]
        tg["6D mean ≤ VQF 6D (all)"] = [fl["all"], vq["all"], fl["all"] <= vq["all"] + 1e-12]
        tg["6D worst trial ratio ≤ 1.2"] = [max(ratios.values()), 1.2, max(ratios.values()) <= 1.2]
        if hr:
            tg["9D heading ratio ≤ 1.2 (undisturbed, worst trial)"] = [max(hr.values()), 1.2, max(hr.values()) <= 1.2]
        tg["CPU ratio to VQF 6D ≤ 2"] = [cpu, 2.0, cpu <= 2.0]
        summ["flexlearn_over_vqf_6D"] = ratios
    dist = [t for t in DISTURBED_MAG if t in res]
    if dist:
        worst = max(
            res[t]["flexlearn 9D"]["inclination_rmse_deg"] - res[t]["flexlearn 6D"]["inclination_rmse_deg"]
            for t in dist
        )
        tg["9D inclination ≤ 6D on disturbed (max diff, deg)"] = [worst, 0.0, worst <= 1e-9]
    for kind in ("start_in_motion", "gap_1s"):
        if "flexlearn" in rob.get(kind, {}):
            w = rob[kind]["flexlearn"]["worst"]
            tg[f"{kind}: RMSE 5–10 s after < 2° (worst)"] = [w, 2.0, w < 2.0]
    for k, v in par.items():
        tg[f"TorchScript parity {k} ≤ 1e-9 rad"] = [v["max_angle_rad"], 1e-9, v["max_angle_rad"] <= 1e-9]
    summ["targets"] = tg
    return summ


def table(res: dict, summ: dict) -> str:
    """Markdown tables: inclination per trial (6D, 9D), heading (9D), CPU µs/sample, targets."""
    keys6 = [k for k in summ["inclination_mean"] if k.endswith("6D")]
    keys9 = [k for k in summ["inclination_mean"] if k.endswith("9D")]
    lines = []
    for title, keys, metric in (
        ("Inclination RMSE [deg], 6-axis", keys6, "inclination_rmse_deg"),
        ("Inclination RMSE [deg], 9-axis", keys9, "inclination_rmse_deg"),
        ("Heading RMSE [deg], 9-axis", keys9, "heading_rmse_deg"),
        ("CPU µs per sample", keys6 + keys9, "us_per_sample"),
    ):
        lines += [f"\n### {title}\n", "| trial | split | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
        for t, row in res.items():
            split = "dev" if t in DEV else "held-out" if t in HELD else "-"
            lines.append(
                f"| {row['file'][:40]} | {split} | " + " | ".join(f"{row[k][metric]:.3f}" for k in keys) + " |"
            )
        if metric == "inclination_rmse_deg":
            for g in ("dev", "held_out", "all"):
                lines.append(
                    f"| **mean {g}** | | "
                    + " | ".join(f"**{summ['inclination_mean'][k].get(g, float('nan')):.3f}**" for k in keys)
                    + " |"
                )
        elif metric == "heading_rmse_deg":
            lines.append(
                "| **mean undisturbed** | | "
                + " | ".join(f"**{summ['heading_undisturbed_mean'].get(k, float('nan')):.3f}**" for k in keys)
                + " |"
            )
    lines += ["\n### Targets\n", "| target | measured | bound | met |", "|---|---|---|---|"]
    for name, (val, bound, ok) in summ["targets"].items():
        lines.append(f"| {name} | {val:.4g} | {bound:g} | {'yes' if ok else 'NO'} |")
    return "\n".join(lines)


def plot(series: dict, path: Path) -> None:
    """Per trial: 1 s moving RMS of the 6-axis inclination error and of the 9-axis heading error."""
    import matplotlib  # heavy: skipped with --no-plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is chosen

    fig, axs = plt.subplots(len(series), 2, figsize=(15, 2.3 * len(series)), squeeze=False, sharex="row")
    for row, (tid, (ser, mov, fs)) in zip(axs, series.items()):
        w = max(1, int(fs))
        for key, (inc, head) in ser.items():
            col, e = (0, inc) if key.endswith("6D") else (1, head)
            e2 = np.where(mov, e, np.nan) ** 2
            ok = np.isfinite(e2)
            num = np.convolve(np.where(ok, e2, 0.0), np.ones(w), "same")
            den = np.convolve(ok.astype(float), np.ones(w), "same")
            with np.errstate(invalid="ignore", divide="ignore"):
                r = np.where(den > w / 2, np.sqrt(num / den), np.nan)
            fl = key.startswith("flexlearn")  # drawn dashed on top: it often coincides with VQF
            row[col].plot(
                np.arange(len(e)) / fs,
                r,
                lw=0.9 if fl else 0.7,
                ls="--" if fl else "-",
                zorder=3 if fl else 2,
                color="k" if fl else None,
                label=key,
            )
        row[0].set_ylabel(f"{tid}\ninclination [deg]")
        row[1].set_ylabel("heading [deg]")
        for ax in row:
            ax.set_yscale("log")
            ax.legend(fontsize=6, ncol=5, loc="upper right")
    axs[-1, 0].set_xlabel("t [s]")
    axs[-1, 1].set_xlabel("t [s]")
    fig.suptitle("BROAD (Laidig et al. 2021, CC BY 4.0): 1 s moving RMS error during movement")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("outputs/bench_attitude"))
    ap.add_argument("--repeats", type=int, default=3, help="timing passes of the compiled filters")
    ap.add_argument("--quick", action="store_true", help="flexlearn and VQF only, no robustness/parity")
    ap.add_argument("--only", default="", help="comma-separated filters to run (e.g. flexlearn,VQF; default: all)")
    ap.add_argument("--no-parity", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument(
        "--vibrating-link", action="store_true", help="also slopes of a simulated vibrating link (3 runs, ~10 min)"
    )
    args = ap.parse_args()
    recs = find_recordings()
    if not recs:
        raise SystemExit(f"no BROAD recording under {DATA}")
    skipped: list = []
    filters = available(skipped)
    if args.quick or args.only:
        keep = ("flexlearn", "VQF") if args.quick else tuple(x.strip() for x in args.only.split(","))
        filters = {k: v for k, v in filters.items() if k in keep}
    _flexlearn(load(next(iter(recs.values()))), False)  # compile (numba cache) before timing
    res, series = score_trials(recs, filters, args.repeats)
    rob = {} if args.quick else robustness(recs, filters)
    par = {} if (args.quick or args.no_parity) else parity(recs)
    summ = summarize(res, rob, par)
    vib = vibrating_link() if args.vibrating_link else {}
    print(table(res, summ))
    args.out.mkdir(parents=True, exist_ok=True)
    out = {
        "data": str(DATA),
        "trials": res,
        "summary": summ,
        "robustness": rob,
        "torchscript": par,
        "vibrating_link": vib,
        "skipped": skipped,
        "split": {"dev": DEV, "held_out": HELD},
        "torch": torch.__version__,
    }
    (args.out / "bench_attitude.json").write_text(json.dumps(out, indent=1, default=float))
    if not args.no_plot:
        plot(series, args.out / "bench_attitude.png")
    keys = ("worst", "mean", "dev_worst", "dev_mean", "held_out_worst", "held_out_mean")
    print(
        f"\nrobustness: {json.dumps({k: {n: {q: v[q] for q in keys} for n, v in r.items()} for k, r in rob.items()})}"
    )
    if vib:
        print(f"vibrating link: {json.dumps(vib)}")
    print(f"torchscript: {json.dumps(par)}\nskipped: {skipped}\nwritten: {args.out}/bench_attitude.json, .png")


if __name__ == "__main__":
    main()
