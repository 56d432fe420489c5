"""Raw-IMU front end (`flexlearn.runtime.fusion.raw_imu`): the fused estimate from gyro + accelerometer streams is close
to the one from quaternions, on a simulated robot; scripting and saving carry the filter states."""

from __future__ import annotations

import io
import math

import numpy as np
import torch

from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.options import EstimatorSettings
from flexlearn.runtime.fusion.raw_imu import RawImuAttitude, RawImuEstimator
from flexlearn.sim import shape_scenarios as scenarios
from flexlearn.sim.numpy_lie import exp_so3, log_so3, quat_of
from flexlearn.sim.robot import UP, forward_kinematics

F64 = torch.float64
RATE, N, STILL = 50.0, 4, 5.0


def _stream(seconds: float = 25.0, seed: int = 0) -> dict:
    """Robot hanging still for STILL s, then hand-like 3-D bending (`3d_hand`), sampled at RATE: per module the
    true rotation (T, N+1, 3, 3), game-rotation-vector quaternions (true rotation with a random initial heading),
    gyro [rad/s] (0.2 °/s bias, 0.003 rad/s noise) and accelerometer [m/s²] (0.05 m/s² noise), tip (T, 3) [m]."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE) + 1) / RATE
    bend, twist, scale = scenarios.scenario("3d_hand", n=N, seed=seed)(np.maximum(t - STILL, 0.0))
    rot, _, _, pts = forward_kinematics(bend, twist, scale, 0.029)
    w = log_so3(np.swapaxes(rot[:-1], -1, -2) @ rot[1:]) * RATE  # body rate over each step
    rot, pts, t = rot[1:], pts[1:], t[1:]
    acc_w = np.zeros_like(pts)
    acc_w[1:-1] = (pts[2:] - 2 * pts[1:-1] + pts[:-2]) * RATE**2  # module k at pivot k (base at 0)
    f = np.einsum("tkji,tkj->tki", rot, acc_w + 9.80665 * UP)
    heading = exp_so3(rng.uniform(-math.pi, math.pi, (N + 1, 1)) * UP)
    return {
        "t": t,
        "quats": quat_of(heading @ rot),
        "tip": pts[:, -1],
        "gyr": w + math.radians(0.2) * rng.choice([-1.0, 1.0], (N + 1, 3)) + rng.normal(0, 0.003, w.shape),
        "acc": f + rng.normal(0, 0.05, f.shape),
    }


def _run(est, s, raw: bool) -> np.ndarray:
    """Tip [m] (T, 3) of the estimator fed sample by sample; q⁰ recorded at the end of the still phase."""
    tips = np.empty((len(s["t"]), 3))
    G, A, Q = (torch.as_tensor(s[k]) for k in ("gyr", "acc", "quats"))
    ref_at = int(STILL * RATE) - 2
    for k in range(len(s["t"])):
        tk = float(s["t"][k])
        pts = est.attitude(tk, G[k], A[k])[0] if raw else est.attitude(tk, Q[k])[0]
        tips[k] = pts[-1].numpy()
        if k == ref_at:
            est.set_reference() if raw else est.set_reference(Q[k])
    return tips


def test_raw_imu_fused_estimate_close_to_quaternion_one():
    s = _stream()
    model = DirectionMLP(hidden=(8,)).eval()  # no magnetic fixes here: the attitude path only
    quat = _run(torch.jit.script(FusedEstimator(model, EstimatorSettings(n_segments=N))), s, raw=False)
    raw_est = torch.jit.script(RawImuEstimator(FusedEstimator(model, EstimatorSettings(n_segments=N)), RATE))
    raw = _run(raw_est, s, raw=True)
    moving = s["t"] > STILL + 1.0
    d = np.linalg.norm(raw[moving] - quat[moving], axis=1) * 1e3
    tip_travel = np.linalg.norm(s["tip"][moving] - s["tip"][0], axis=1).max() * 1e3
    print(
        f"raw vs quaternion input: tip difference max {d.max():.2f} mm, rms {np.sqrt((d**2).mean()):.2f} mm "
        f"(tip travel up to {tip_travel:.0f} mm)"
    )
    assert tip_travel > 30.0  # the robot does bend
    assert np.isfinite(raw).all()
    assert d.max() < 1.0  # measured 0.35 mm


def test_raw_imu_attitude_matches_offline_filters_and_survives_save_and_bad_rows():
    s = _stream(seconds=8.0, seed=1)
    gyr, acc = s["gyr"].copy(), s["acc"].copy()
    gyr[100, 2] = np.nan  # one module's bad sample: skipped by its own filter only
    acc[150:160, 0] = np.inf
    front = torch.jit.script(RawImuAttitude(N + 1, RATE))
    G, A = torch.as_tensor(gyr), torch.as_tensor(acc)
    half = len(G) // 2
    q = [front(G[k], A[k]) for k in range(half)]
    buf = io.BytesIO()
    torch.jit.save(front, buf)
    buf.seek(0)
    front = torch.jit.load(buf)
    q = torch.stack(q + [front(G[k], A[k]) for k in range(half, len(G))]).numpy()
    assert np.isfinite(q).all() and front.skipped() == [10, 0, 1, 0, 0]
    from flexlearn.sensing.attitude.offline import run_filter

    for m in range(N + 1):
        ref = run_filter(gyr[:, m], acc[:, m], RATE).quat
        assert np.abs(q[:, m] - ref).max() < 1e-12
