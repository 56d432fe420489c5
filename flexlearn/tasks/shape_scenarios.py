"""The seed's evaluation scenarios (seed 002, IV-B, IV-C2, IV-D), replay through the runtime estimator, baselines.

Scenarios (joint motions for `flexlearn.sim.robot.simulate_robot`, all starting straight; N joints, angles rad):
* ``2d_curl`` — one tendon, planar: β_k = θ_max w_k s(t) x̂, s = ½(1 − cos 2πt/T), distal joints bend more.
* ``2d_obstacle`` — the same against an obstacle: past contact the distal joints are pushed back and compressed
  (length scale down to 1 − ``compression``), breaking the fixed-length assumption.
* ``3d_curl`` — spatial curl, bends up to 40° (beyond the 25–30° training cap), bending planes twisting along the
  robot and over time.
* ``3d_hand`` — manual manipulation: smooth random bends per joint (sums of sines) with axial twist.
* ``cyclic`` — pull–release cycles of period 10 s (seed IV-D1); ``static_hold`` — ramp to a curl, then hold.

Baselines (seed V-A): the estimator's ``fusion``, ``mag_only``, ``quat_only`` modes replay the same recording
through `flexlearn.runtime.fusion.FusedEstimator` (``fusion_rotation``: fusion with the seed's 3-D rotation
bias; ``fusion_heading_walk``: one random-walk heading correction per joint); the inertial variants (``accel_quat``: constrained acceleration + quaternions; ``accel_only``)
double-integrate the accelerometers (no ZUPT) and rebuild the fixed-length chain through the integrated board
positions — offline numpy code, they are not runtime methods.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np
import torch

from flexlearn.sim.numpy_lie import exp_so3, quat_of, single_torch_thread
from flexlearn.sim.robot import E, RobotConfig, RobotRecording, rig_pairs

SCENARIOS = ("2d_curl", "2d_obstacle", "3d_curl", "3d_hand")
METHODS = ("fusion", "fusion_heading_walk", "fusion_rotation", "mag_only", "quat_only", "accel_quat", "accel_only")
ESTIMATOR_METHODS = {"fusion": ("fusion", {}), "fusion_heading_walk": ("fusion", {"bias_model": "heading_walk"}),
                     "fusion_rotation": ("fusion", {"bias_model": "rotation"}),
                     "mag_only": ("mag_only", {}), "quat_only": ("quat_only", {})}


def _ramp(t: np.ndarray, n: int, lo: float, hi: float) -> np.ndarray:
    return lo + (hi - lo) * np.arange(n) / max(n - 1, 1) + 0.0 * t[:, None]


def scenario(name: str, n: int = 9, period: float = 20.0, seed: int = 0, theta_max: Optional[float] = None,
             compression: float = 0.10) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Joint motion t ↦ (β (T, N, 3), τ (T, N), s (T, N)) of a named scenario (see the module docstring)."""
    rng = np.random.default_rng(seed)
    x = np.array([1.0, 0.0, 0.0])

    def planar(t: np.ndarray, th: float) -> np.ndarray:
        s = 0.5 * (1.0 - np.cos(2 * math.pi * t / period))
        return (th * _ramp(t, n, 0.6, 1.0) * s[:, None])[..., None] * x

    def flat(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((t.size, n)), np.ones((t.size, n))

    if name in ("2d_curl", "cyclic"):
        th = math.radians(25.0 if theta_max is None else theta_max)
        return lambda t: (planar(t, th), *flat(t))
    if name == "2d_obstacle":
        th = math.radians(25.0 if theta_max is None else theta_max)

        def obstacle(t: np.ndarray):
            s = 0.5 * (1.0 - np.cos(2 * math.pi * t / period))
            contact = np.clip((s - 0.4) / 0.6, 0.0, 1.0)[:, None]
            distal = (np.arange(n) >= n // 2).astype(float)
            w = _ramp(t, n, 0.6, 1.0) * s[:, None] * (1.0 - 0.6 * contact * distal)
            w = w + 0.35 * contact * (1.0 - distal)                  # the proximal joints take up the push
            return (th * w)[..., None] * x, np.zeros((t.size, n)), 1.0 - compression * contact * distal
        return obstacle
    if name == "3d_curl":
        th = math.radians(40.0 if theta_max is None else theta_max)
        phi0 = rng.uniform(-math.pi, math.pi)

        def curl3(t: np.ndarray):
            s = 0.5 * (1.0 - np.cos(2 * math.pi * t / period))
            phi = phi0 + 0.15 * np.arange(n)[None] * (1.0 + 0.5 * np.sin(2 * math.pi * t / (1.7 * period)))[:, None]
            ang = th * _ramp(t, n, 0.5, 1.0) * s[:, None]
            axis = np.stack([np.cos(phi), np.sin(phi), np.zeros_like(phi)], -1)
            return ang[..., None] * axis, *flat(t)
        return curl3
    if name == "3d_hand":
        th = math.radians(22.0 if theta_max is None else theta_max)
        f = rng.uniform(0.03, 0.15, (3, n, 2))
        ph = rng.uniform(-math.pi, math.pi, (3, n, 2))
        amp = rng.uniform(0.5, 1.0, (3, n, 2))

        def hand(t: np.ndarray):
            r = np.clip(t / 3.0, 0.0, 1.0)
            r = r * r * (3 - 2 * r)
            w = (amp[None] * np.sin(2 * math.pi * f[None] * t[:, None, None, None] + ph[None])).sum(-1) / 2.0
            w = w - (amp[None] * np.sin(ph[None])).sum(-1) / 2.0      # starts straight
            bend = th * r[:, None, None] * np.stack([w[:, 0], w[:, 1], np.zeros_like(w[:, 0])], -1)
            twist = math.radians(8.0) * r[:, None] * w[:, 2]
            return bend, twist, np.ones((t.size, n))
        return hand
    if name == "static_hold":
        th = math.radians(20.0 if theta_max is None else theta_max)

        def hold(t: np.ndarray):
            r = np.clip(t / 5.0, 0.0, 1.0)
            r = r * r * (3 - 2 * r)
            return (th * _ramp(t, n, 0.6, 1.0) * r[:, None])[..., None] * x, *flat(t)
        return hold
    raise ValueError(f"scenario = {name!r}: expected one of {SCENARIOS + ('cyclic', 'static_hold')}")


# ------------------------------------------------------------------------------------ direction model
def fit_direction_model(n: int = 6000, steps: int = 1500, hidden: tuple[int, ...] = (64, 64),
                        max_colatitude: float = math.radians(30.0), cfg: Optional[RobotConfig] = None,
                        seed: int = 0, noise: float = 0.6e-6) -> torch.nn.Module:
    """A small `DirectionMLP` fitted (cosine loss, seed 002 III-B1) on rig pairs — for tests and the reproduction.

    The real pipeline trains with `flexlearn.jobs.train.train` on processed sweeps; this is its quick stand-in.
    """
    with single_torch_thread():
        return _fit(n, steps, hidden, max_colatitude, cfg, seed, noise)


def _fit(n: int, steps: int, hidden: tuple[int, ...], max_colatitude: float, cfg: Optional[RobotConfig],
         seed: int, noise: float) -> torch.nn.Module:
    from flexlearn.models.direction_mlp import DirectionMLP

    db, label = rig_pairs(n, max_colatitude, cfg, seed=seed, noise=noise)
    torch.manual_seed(seed)
    model = DirectionMLP(hidden=hidden)
    x = torch.from_numpy(db).float()
    y = torch.from_numpy(label).float()
    model.fit_input_normalization(x)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        opt.zero_grad()
        loss = (1.0 - (model(x) * y).sum(-1)).mean()
        loss.backward()
        opt.step()
        sched.step()
    return model.eval()


# ------------------------------------------------------------------------------------------ replay
def soft_iron(rec: RobotRecording) -> torch.Tensor:
    """W (N, 3, 3) from `fit_ellipsoid` on each receiver's calibration data."""
    from flexlearn.sensing.magcal import fit_ellipsoid

    return torch.stack([fit_ellipsoid(rec.cal[j])[0] for j in range(rec.meta["n_segments"])])


def build_estimator(rec: RobotRecording, model: torch.nn.Module, mode: str = "fusion", script: bool = True,
                    align_window: float = 0.0, alignment: Optional[torch.Tensor] = None,
                    **kwargs: Any) -> torch.nn.Module:
    """A `FusedEstimator` for ``rec``: soft iron W from `fit_ellipsoid` on each receiver's calibration data.

    Receiver alignments A_i (seed 002, III-B3): ``alignment`` (N, 3, 3) as given (e.g. `alignment_from_window` on
    an initialisation recording of the same robot), or with ``align_window`` > 0 fitted on the magnetic fixes of
    the first ``align_window`` seconds of ``rec`` itself (the seed uses 45 s), else identity.
    """
    from flexlearn.runtime.fusion import FusedEstimator

    n = rec.meta["n_segments"]
    w = soft_iron(rec)
    a = alignment if alignment is not None else (
        alignment_from_window(rec, model, w, align_window) if align_window > 0 else None)
    est = FusedEstimator(model, n_segments=n, length=rec.meta["length"], soft_iron=w, alignment=a,
                         full_scale=rec.meta["full_scale"], mode=mode, **kwargs)
    return torch.jit.script(est) if script else est


def alignment_from_window(rec: RobotRecording, model: torch.nn.Module, w: torch.Tensor, window: float,
                          **fit_kwargs: Any) -> torch.Tensor:
    """Receiver alignments A (N, 3, 3) from the fixes in [0, window] s (`fit_alignment`; its ``prior`` and
    ``min_fixes`` via ``fit_kwargs``: identity where too few fixes, shrunk toward identity by the uncertainty)."""
    from flexlearn.runtime.fusion import FusedEstimator
    from flexlearn.sensing.magcal import fit_alignment

    n = rec.meta["n_segments"]
    est = FusedEstimator(model, n_segments=n, length=rec.meta["length"], soft_iron=w,
                         full_scale=rec.meta["full_scale"], mode="quat_only")
    est.set_reference(torch.from_numpy(rec.quats[0]))
    db: list[list[torch.Tensor]] = [[] for _ in range(n)]
    tg: list[list[torch.Tensor]] = [[] for _ in range(n)]
    with torch.inference_mode():
        for t, kind, i in rec.frames():
            if t > window:
                break
            if kind == "att":
                est.attitude(t, torch.from_numpy(rec.quats[i]))
            else:
                for j in torch.nonzero(est.magnetometer(t, torch.from_numpy(rec.mags[i]), int(rec.coil[i]))).flatten():
                    db[j].append(est.last_db[j].clone())
                    tg[j].append(est.last_target[j].clone())
    out = torch.eye(3, dtype=torch.float64).repeat(n, 1, 1)
    for j in range(n):
        if len(db[j]) >= 2:
            out[j] = fit_alignment(model, torch.stack(db[j]), torch.stack(tg[j]), w=w[j], **fit_kwargs)
    return out


def replay(rec: RobotRecording, est: torch.nn.Module) -> np.ndarray:
    """Run the recording through an estimator; estimated pivots (K, N+1, 3) [m] at the attitude sweeps."""
    est.set_reference(torch.from_numpy(rec.quats[0]))
    out = np.zeros_like(rec.points)
    quats = torch.from_numpy(rec.quats)
    mags = torch.from_numpy(rec.mags)
    with torch.inference_mode():
        for t, kind, i in rec.frames():
            if kind == "att":
                out[i] = est.attitude(t, quats[i])[0].numpy()
            else:
                est.magnetometer(t, mags[i], int(rec.coil[i]))
    return out


def inertial_baseline(rec: RobotRecording, use_quaternions: bool) -> np.ndarray:
    """Double-integrated accelerometers → board positions → fixed-length chain (K, N+1, 3) [m].

    a_k = R_k f_k − g ẑ with R_k = R(q_k) (``use_quaternions``) or R(q_k⁰) frozen at the start (acceleration only);
    velocity and position by the trapezoid rule from rest at the straight pose; û_k = unit(b̂_k − b̂_{k−1}).
    """
    from flexlearn.lie import quat_to_matrix

    n, length = rec.meta["n_segments"], rec.meta["length"]
    q = torch.from_numpy(rec.quats if use_quaternions else np.broadcast_to(rec.quats[:1], rec.quats.shape).copy())
    r = quat_to_matrix(q).numpy()
    a = np.einsum("tkij,tkj->tki", r, rec.accel) - rec.meta["gravity"] * np.array([0.0, 0.0, 1.0])
    dt = np.diff(rec.att_t)[:, None, None]
    v = np.concatenate([np.zeros_like(a[:1]), np.cumsum(0.5 * (a[1:] + a[:-1]) * dt, 0)])
    x = np.concatenate([np.zeros_like(a[:1]), np.cumsum(0.5 * (v[1:] + v[:-1]) * dt, 0)])
    b0 = np.concatenate([[np.zeros(3)], (np.arange(n)[:, None] * length + 0.010) * E])   # straight boards
    b = b0 + x
    d = b[:, 1:] - b[:, :-1]
    nrm = np.linalg.norm(d, axis=-1, keepdims=True)
    u = np.where(nrm > 1e-9, d / np.maximum(nrm, 1e-300), E)
    u[:, 0] = np.where(nrm[:, 0] > 1e-9, (b[:, 1] - 0.0) / np.maximum(np.linalg.norm(b[:, 1], axis=-1,
                                                                                          keepdims=True), 1e-300), E)
    return np.concatenate([np.zeros((u.shape[0], 1, 3)), np.cumsum(length * u, 1)], 1)


def errors(est: np.ndarray, rec: RobotRecording) -> dict[str, float]:
    """Backbone RMSE over all pivots and frames, and tip RMSE [mm] (seed 002, IV-A)."""
    d = np.linalg.norm(est[:, 1:] - rec.points[:, 1:], axis=-1)
    return {"backbone_rmse_mm": float(1e3 * np.sqrt(np.mean(d ** 2))),
            "tip_rmse_mm": float(1e3 * np.sqrt(np.mean(d[:, -1] ** 2)))}


def run_methods(rec: RobotRecording, model: torch.nn.Module, methods: tuple[str, ...] = METHODS,
                align_window: float = 0.0, alignment: Optional[torch.Tensor] = None,
                **est_kwargs: Any) -> dict[str, dict[str, Any]]:
    """Estimated backbones and errors of every method on one recording (see `build_estimator` for the alignment;
    ``est_kwargs`` go to `FusedEstimator`)."""
    out: dict[str, dict[str, Any]] = {}
    for m in methods:
        if m in ("accel_quat", "accel_only"):
            pts = inertial_baseline(rec, m == "accel_quat")
        else:
            mode, kw = ESTIMATOR_METHODS[m]
            pts = replay(rec, build_estimator(rec, model, mode, align_window=align_window, alignment=alignment,
                                              **{**kw, **est_kwargs}))
        out[m] = {"points": pts, **errors(pts, rec)}
    return out


# ---------------------------------------------------------------------------- closed-loop height hold
def closed_loop_height(controller: Any, estimator: Any, duration: float = 40.0, rate: float = 18.6,
                       t_load: float = 24.0, load: float = 0.5, target: float = 0.040, seed: int = 0,
                       quat_noise: float = math.radians(0.2)) -> dict[str, Any]:
    """Height hold (seed 002, III-C / V-B2) against `TendonRobot`: estimator attitude → h → PID → spool velocity.

    Quaternions are simulated from the true module rotations with an arbitrary heading per module, 0.65 %-of-travel
    heading drift and noise (height does not depend on heading). Returns the log and the step metrics: rise time
    (from the end of settling to first reaching the target), overshoot [%], settling time to ±2 mm (staying until
    the load), recovery time (from the post-load minimum back into ±2 mm, staying) [s], held mean/std.
    """
    from flexlearn.sim.robot import TendonRobot

    rng = np.random.default_rng(seed)
    robot = TendonRobot()
    n = robot.cfg.n_segments
    psi = rng.uniform(-math.pi, math.pi, n + 1)
    drift = 0.0065 * rng.choice([-1.0, 1.0], n + 1)
    heading = exp_so3(psi[:, None] * np.array([0.0, 0.0, 1.0]))
    travel = np.zeros(n + 1)
    prev_phi = np.zeros(n + 1)
    controller.reset()
    controller.set_target(target)
    dt = 1.0 / rate
    log = {k: [] for k in ("t", "h_true", "h_est", "v", "spool", "status")}
    v = 0.0
    for k in range(int(duration * rate)):
        t = k * dt
        robot.tip_load = load if t >= t_load else 0.0
        rot = robot.rotations()
        phi = np.concatenate([[0.0], np.cumsum(robot.theta)])
        travel += np.abs(phi - prev_phi)
        prev_phi = phi
        hd = exp_so3((drift * travel)[:, None] * np.array([0.0, 0.0, 1.0]))
        noise = exp_so3(rng.normal(0.0, quat_noise, (n + 1, 3)))
        q = torch.from_numpy(quat_of(hd @ heading @ rot @ noise))
        if k == 0:
            estimator.set_reference(q)
        _, h, _ = estimator.attitude(t, q)
        v, status = controller.step(t, float(h), robot.spool)
        for key, val in (("t", t), ("h_true", robot.height()), ("h_est", float(h)), ("v", v),
                         ("spool", robot.spool), ("status", status)):
            log[key].append(val)
        robot.advance(dt, v)
    arr = {k: np.asarray(x) for k, x in log.items()}
    return {"log": arr, **height_metrics(arr, target, settle=float(controller.settle), t_load=t_load)}


def height_metrics(log: dict[str, np.ndarray], target: float, settle: float, t_load: float,
                   band: float = 0.002) -> dict[str, float]:
    """Rise, overshoot, settling, recovery of the *estimated* height (as the seed reports) and true-height errors."""
    t, h = log["t"], log["h_est"]
    pre = (t >= settle) & (t < t_load)
    out: dict[str, float] = {}
    reach = np.flatnonzero(pre & (h >= target))
    out["rise_time_s"] = float(t[reach[0]] - settle) if reach.size else float("nan")
    out["overshoot_pct"] = float(100.0 * (h[pre].max() - target) / target) if pre.any() else float("nan")
    outside = np.flatnonzero(pre & (np.abs(h - target) > band))
    out["settling_time_s"] = float(t[outside[-1] + 1] - settle) if outside.size and outside[-1] + 1 < t.size \
        else float("nan")
    post = t >= t_load
    if post.any():
        i_min = np.flatnonzero(post)[np.argmin(h[post])]
        out["load_drop_mm"] = float(1e3 * (target - h[i_min]))
        after = np.arange(i_min, t.size)
        bad = after[np.abs(h[after] - target) > band]
        out["recovery_time_s"] = float(t[bad[-1] + 1] - t[i_min]) if bad.size and bad[-1] + 1 < t.size \
            else (0.0 if not bad.size else float("nan"))
    hold = (t >= t_load - 10.0) & (t < t_load)
    out["held_mean_mm"] = float(1e3 * h[hold].mean()) if hold.any() else float("nan")
    out["held_std_mm"] = float(1e3 * h[hold].std()) if hold.any() else float("nan")
    out["true_vs_est_rmse_mm"] = float(1e3 * np.sqrt(np.mean((log["h_true"] - h) ** 2)))
    return out


def write_frames_jsonl(rec: RobotRecording, path: Any) -> None:
    """Write a recording in the runner's frame protocol (``flexlearn-frames/1``, see scripts/pi_runner.py)."""
    import json

    from flexlearn.atomic import atomic_path

    def rows(a: np.ndarray) -> list:
        return [[None if not np.isfinite(c) else float(c) for c in r] for r in a]

    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write(json.dumps({"type": "ref", "t": float(rec.att_t[0]), "q": rows(rec.quats[0])}) + "\n")
        for t, kind, i in rec.frames():
            if kind == "att":
                f.write(json.dumps({"type": "att", "t": t, "q": rows(rec.quats[i])}) + "\n")
            else:
                f.write(json.dumps({"type": "mag", "t": t, "coil": int(rec.coil[i]), "m": rows(rec.mags[i])}) + "\n")


def write_frames_binary(rec: RobotRecording, path: Any) -> None:
    """Write a recording in the binary frame protocol (``flexlearn-binframes/1``, `flexlearn.runtime.serial_frames`)."""
    from flexlearn.atomic import atomic_path
    from flexlearn.runtime.serial_frames import encode_frame

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(encode_frame("ref", float(rec.att_t[0]), 0, q=rec.quats[0].tolist()))
        for seq, (t, kind, i) in enumerate(rec.frames(), start=1):
            if kind == "att":
                f.write(encode_frame("att", t, seq, q=rec.quats[i].tolist()))
            else:
                f.write(encode_frame("mag", t, seq, m=rec.mags[i].tolist(), coil=int(rec.coil[i])))
