"""Replay of simulated robot recordings through the runtime estimator, and the seed's baselines (seed 002, V-A).

Baselines (seed V-A): the estimator's ``fusion``, ``mag_only``, ``quat_only`` modes replay the same recording
through `flexlearn.runtime.fusion.estimator.FusedEstimator` (``fusion_rotation``: fusion with the seed's 3-D rotation
bias; ``fusion_heading_walk``: one random-walk heading correction per joint); the inertial variants (``accel_quat``:
constrained acceleration + quaternions; ``accel_only``)
double-integrate the accelerometers (no ZUPT) and rebuild the fixed-length chain through the integrated board
positions — offline numpy code, they are not runtime methods.

The scenarios themselves are in `flexlearn.sim.shape_scenarios`.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch

from flexlearn.lie import quat_to_matrix
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.options import EstimatorSettings
from flexlearn.sensing.magcal import fit_alignment, fit_ellipsoid
from flexlearn.sim.numpy_lie import single_torch_thread
from flexlearn.sim.robot import E, RobotConfig, RobotRecording, rig_pairs

METHODS = ("fusion", "fusion_heading_walk", "fusion_rotation", "mag_only", "quat_only", "accel_quat", "accel_only")


ESTIMATOR_METHODS = {
    "fusion": ("fusion", {}),
    "fusion_heading_walk": ("fusion", {"bias_model": "heading_walk"}),
    "fusion_rotation": ("fusion", {"bias_model": "rotation"}),
    "mag_only": ("mag_only", {}),
    "quat_only": ("quat_only", {}),
}


def fit_direction_model(
    n: int = 6000,
    steps: int = 1500,
    hidden: tuple[int, ...] = (64, 64),
    max_colatitude: float = math.radians(30.0),
    cfg: Optional[RobotConfig] = None,
    seed: int = 0,
    noise: float = 0.6e-6,
) -> torch.nn.Module:
    """A small `DirectionMLP` fitted (cosine loss, seed 002 III-B1) on rig pairs — for tests and the reproduction.

    The real pipeline trains with `flexlearn.jobs.train.train` on processed sweeps; this is its quick stand-in.

    Args:
        n: number of rig pairs.
        steps: training steps.
        hidden: hidden layer widths.
        max_colatitude: the cap of the sampled bends [rad].
        cfg: the robot; None: the default.
        seed: random seed.
        noise: field noise [T].

    Returns:
        The fitted model.
    """
    with single_torch_thread():
        return _fit(n, steps, hidden, max_colatitude, cfg, seed, noise)


def _fit(
    n: int,
    steps: int,
    hidden: tuple[int, ...],
    max_colatitude: float,
    cfg: Optional[RobotConfig],
    seed: int,
    noise: float,
) -> torch.nn.Module:
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


def soft_iron(rec: RobotRecording) -> torch.Tensor:
    """W (N, 3, 3) from `fit_ellipsoid` on each receiver's calibration data.

    Args:
        rec: the recording, with calibration data ``rec.cal`` for each of its ``n_segments`` receivers.

    Returns:
        The soft-iron matrices W (N, 3, 3), one per receiver.
    """
    return torch.stack([fit_ellipsoid(rec.cal[j])[0] for j in range(rec.meta["n_segments"])])


def build_estimator(
    rec: RobotRecording,
    model: torch.nn.Module,
    mode: str = "fusion",
    script: bool = True,
    align_window: float = 0.0,
    alignment: Optional[torch.Tensor] = None,
    **kwargs: Any,
) -> FusedEstimator | torch.jit.ScriptModule:
    """A `FusedEstimator` for ``rec``: soft iron W from `fit_ellipsoid` on each receiver's calibration data.

    Receiver alignments A_i (seed 002, III-B3): ``alignment`` (N, 3, 3) as given (e.g. `alignment_from_window` on
    an initialisation recording of the same robot), or with ``align_window`` > 0 fitted on the magnetic fixes of
    the first ``align_window`` seconds of ``rec`` itself (the seed uses 45 s), else identity.

    Args:
        rec: the recording.
        model: the direction model.
        mode: the estimator's mode.
        script: return it scripted (``torch.jit.script``).
        align_window: seconds of ``rec`` to fit the alignments on (0: none).
        alignment: the alignments (N, 3, 3), used as given.
        **kwargs: further `EstimatorSettings` fields.

    Returns:
        The estimator, scripted with ``script``.
    """
    n = rec.meta["n_segments"]
    w = soft_iron(rec)
    a = (
        alignment
        if alignment is not None
        else (alignment_from_window(rec, model, w, align_window) if align_window > 0 else None)
    )
    settings = EstimatorSettings(
        n_segments=n, length=rec.meta["length"], full_scale=rec.meta["full_scale"], mode=mode, **kwargs
    )
    est = FusedEstimator(model, settings, soft_iron=w, alignment=a)
    return torch.jit.script(est) if script else est


def alignment_from_window(
    rec: RobotRecording, model: torch.nn.Module, w: torch.Tensor, window: float, **fit_kwargs: Any
) -> torch.Tensor:
    """Receiver alignments A (N, 3, 3) from the fixes in [0, window] s (`fit_alignment`).

    Identity where too few fixes, shrunk toward identity by the uncertainty.

    Args:
        rec: the recording.
        model: the direction model.
        w: soft iron W of each receiver.
        window: the window's length [s].
        **fit_kwargs: to `fit_alignment`: its ``options`` (`AlignmentOptions`: prior, min_fixes).

    Returns:
        A (N, 3, 3).
    """
    n = rec.meta["n_segments"]
    settings = EstimatorSettings(
        n_segments=n, length=rec.meta["length"], full_scale=rec.meta["full_scale"], mode="quat_only"
    )
    est = FusedEstimator(model, settings, soft_iron=w)
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


def replay(rec: RobotRecording, est: FusedEstimator | torch.jit.ScriptModule) -> np.ndarray:
    """Run the recording through an estimator; estimated pivots (K, N+1, 3) [m] at the attitude sweeps.

    Args:
        rec: the recording.
        est: the estimator (eager or scripted).

    Returns:
        The pivots (K, N+1, 3) [m].
    """
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

    Args:
        rec: the recording.
        use_quaternions: rotate by the measured quaternions, else by the start's.

    Returns:
        The pivots (K, N+1, 3) [m].
    """
    n, length = rec.meta["n_segments"], rec.meta["length"]
    q = torch.from_numpy(rec.quats if use_quaternions else np.broadcast_to(rec.quats[:1], rec.quats.shape).copy())
    r = quat_to_matrix(q).numpy()
    a = np.einsum("tkij,tkj->tki", r, rec.accel) - rec.meta["gravity"] * np.array([0.0, 0.0, 1.0])
    dt = np.diff(rec.att_t)[:, None, None]
    v = np.concatenate([np.zeros_like(a[:1]), np.cumsum(0.5 * (a[1:] + a[:-1]) * dt, 0)])
    x = np.concatenate([np.zeros_like(a[:1]), np.cumsum(0.5 * (v[1:] + v[:-1]) * dt, 0)])
    b0 = np.concatenate([[np.zeros(3)], (np.arange(n)[:, None] * length + 0.010) * E])  # straight boards
    b = b0 + x
    d = b[:, 1:] - b[:, :-1]
    nrm = np.linalg.norm(d, axis=-1, keepdims=True)
    u = np.where(nrm > 1e-9, d / np.maximum(nrm, 1e-300), E)
    u[:, 0] = np.where(
        nrm[:, 0] > 1e-9, (b[:, 1] - 0.0) / np.maximum(np.linalg.norm(b[:, 1], axis=-1, keepdims=True), 1e-300), E
    )
    return np.concatenate([np.zeros((u.shape[0], 1, 3)), np.cumsum(length * u, 1)], 1)


def errors(est: np.ndarray, rec: RobotRecording) -> dict[str, float]:
    """Backbone RMSE over all pivots and frames, and tip RMSE [mm] (seed 002, IV-A).

    Args:
        est: estimated pivots (K, N+1, 3) [m].
        rec: the recording (true pivots).

    Returns:
        ``{"backbone_rmse_mm", "tip_rmse_mm"}``.
    """
    d = np.linalg.norm(est[:, 1:] - rec.points[:, 1:], axis=-1)
    return {
        "backbone_rmse_mm": float(1e3 * np.sqrt(np.mean(d**2))),
        "tip_rmse_mm": float(1e3 * np.sqrt(np.mean(d[:, -1] ** 2))),
    }


def run_methods(
    rec: RobotRecording,
    model: torch.nn.Module,
    methods: tuple[str, ...] = METHODS,
    align_window: float = 0.0,
    alignment: Optional[torch.Tensor] = None,
    **est_kwargs: Any,
) -> dict[str, dict[str, Any]]:
    """Estimated backbones and errors of every method on one recording.

    Args:
        rec: the recording.
        model: the direction model.
        methods: the methods (`METHODS`).
        align_window: see `build_estimator`.
        alignment: see `build_estimator`.
        **est_kwargs: go to `FusedEstimator`.

    Returns:
        Per method, ``{"points", "backbone_rmse_mm", "tip_rmse_mm"}``.
    """
    out: dict[str, dict[str, Any]] = {}
    for m in methods:
        if m in ("accel_quat", "accel_only"):
            pts = inertial_baseline(rec, m == "accel_quat")
        else:
            mode, kw = ESTIMATOR_METHODS[m]
            pts = replay(
                rec,
                build_estimator(
                    rec, model, mode, align_window=align_window, alignment=alignment, **{**kw, **est_kwargs}
                ),
            )
        out[m] = {"points": pts, **errors(pts, rec)}
    return out
