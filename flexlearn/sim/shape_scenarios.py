"""The seed's evaluation scenarios (seed 002, IV-B, IV-C2, IV-D) and the closed-loop tip-height simulation.

Scenarios (joint motions for `flexlearn.sim.robot.simulate_robot`, all starting straight; N joints, angles rad):
* ``2d_curl`` — one tendon, planar: β_k = θ_max w_k s(t) x̂, s = ½(1 − cos 2πt/T), distal joints bend more.
* ``2d_obstacle`` — the same against an obstacle: past contact the distal joints are pushed back and compressed
  (length scale down to 1 − ``compression``), breaking the fixed-length assumption.
* ``3d_curl`` — spatial curl, bends up to 40° (beyond the 25–30° training cap), bending planes twisting along the
  robot and over time.
* ``3d_hand`` — manual manipulation: smooth random bends per joint (sums of sines) with axial twist.
* ``cyclic`` — pull–release cycles of period 10 s (seed IV-D1); ``static_hold`` — ramp to a curl, then hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from flexlearn.sim.errors import SimConfigError
from flexlearn.sim.numpy_lie import exp_so3, quat_of
from flexlearn.sim.robot import JointMotion, TendonRobot

SCENARIOS = ("2d_curl", "2d_obstacle", "3d_curl", "3d_hand")


def _ramp(t: np.ndarray, n: int, lo: float, hi: float) -> np.ndarray:
    return lo + (hi - lo) * np.arange(n) / max(n - 1, 1) + 0.0 * t[:, None]


def _obstacle_motion(n: int, th: float, period: float, compression: float) -> JointMotion:
    """``2d_obstacle``: the planar curl of peak bend ``th`` [rad] against an obstacle (see the module docstring)."""
    x = np.array([1.0, 0.0, 0.0])

    def obstacle(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = 0.5 * (1.0 - np.cos(2 * math.pi * t / period))
        contact = np.clip((s - 0.4) / 0.6, 0.0, 1.0)[:, None]
        distal = (np.arange(n) >= n // 2).astype(float)
        w = _ramp(t, n, 0.6, 1.0) * s[:, None] * (1.0 - 0.6 * contact * distal)
        w = w + 0.35 * contact * (1.0 - distal)  # the proximal joints take up the push
        return (th * w)[..., None] * x, np.zeros((t.size, n)), 1.0 - compression * contact * distal

    return obstacle


def _hand_motion(n: int, th: float, rng: np.random.Generator) -> JointMotion:
    """``3d_hand``: smooth random bends (peak scale ``th`` [rad]) and twist per joint, sums of sines from ``rng``."""
    f = rng.uniform(0.03, 0.15, (3, n, 2))
    ph = rng.uniform(-math.pi, math.pi, (3, n, 2))
    amp = rng.uniform(0.5, 1.0, (3, n, 2))

    def hand(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = np.clip(t / 3.0, 0.0, 1.0)
        r = r * r * (3 - 2 * r)
        w = (amp[None] * np.sin(2 * math.pi * f[None] * t[:, None, None, None] + ph[None])).sum(-1) / 2.0
        w = w - (amp[None] * np.sin(ph[None])).sum(-1) / 2.0  # starts straight
        bend = th * r[:, None, None] * np.stack([w[:, 0], w[:, 1], np.zeros_like(w[:, 0])], -1)
        twist = math.radians(8.0) * r[:, None] * w[:, 2]
        return bend, twist, np.ones((t.size, n))

    return hand


def scenario(
    name: str,
    n: int = 9,
    period: float = 20.0,
    seed: int = 0,
    theta_max: Optional[float] = None,
    compression: float = 0.10,
) -> JointMotion:
    """Joint motion t ↦ (β (T, N, 3), τ (T, N), s (T, N)) of a named scenario (see the module docstring).

    Args:
        name: one of `SCENARIOS`, ``cyclic`` or ``static_hold``.
        n: number of joints N.
        period: period T [s] of the curl scenarios.
        seed: seed of the random draws (bend planes, hand motion).
        theta_max: largest bend [deg]; None: the scenario's own (25°, 40° for ``3d_curl``, 22° for ``3d_hand``,
            20° for ``static_hold``).
        compression: largest length loss of the distal joints in ``2d_obstacle`` (fraction).

    Returns:
        The motion t (T,) [s] ↦ (bend β (T, N, 3) [rad], twist τ (T, N) [rad], length scale s (T, N)).

    Raises:
        SimConfigError: unknown scenario ``name`` (a `ConfigError` and a `ValueError`).
    """
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
        return _obstacle_motion(n, math.radians(25.0 if theta_max is None else theta_max), period, compression)
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
        return _hand_motion(n, math.radians(22.0 if theta_max is None else theta_max), rng)
    if name == "static_hold":
        th = math.radians(20.0 if theta_max is None else theta_max)

        def hold(t: np.ndarray):
            r = np.clip(t / 5.0, 0.0, 1.0)
            r = r * r * (3 - 2 * r)
            return (th * _ramp(t, n, 0.6, 1.0) * r[:, None])[..., None] * x, *flat(t)

        return hold
    raise SimConfigError(f"scenario = {name!r}: expected one of {SCENARIOS + ('cyclic', 'static_hold')}")


@dataclass(frozen=True)
class HeightHoldSettings:
    """The height-hold experiment of `closed_loop_height` (seed 002, III-C / V-B2).

    Attributes:
        duration: simulated time [s].
        rate: control rate [Hz] (one attitude sweep per step).
        t_load: time [s] at which the tip load is hung on.
        load: tip load [kg].
        target: height set point [m].
        quat_noise: IMU orientation noise per axis [rad].
    """

    duration: float = 40.0
    rate: float = 18.6
    t_load: float = 24.0
    load: float = 0.5
    target: float = 0.040
    quat_noise: float = math.radians(0.2)


def closed_loop_height(
    controller: Any, estimator: Any, settings: HeightHoldSettings = HeightHoldSettings(), seed: int = 0
) -> dict[str, Any]:
    """Height hold (seed 002, III-C / V-B2) against `TendonRobot`: estimator attitude → h → PID → spool velocity.

    Quaternions are simulated from the true module rotations with an arbitrary heading per module, 0.65 %-of-travel
    heading drift and noise (height does not depend on heading).

    Args:
        controller: height controller with ``reset()``, ``set_target(h)``, ``step(t, h, spool) -> (v, status)``
            and ``settle`` [s] (e.g. `flexlearn.runtime.pikit.height_control.HeightPID`).
        estimator: attitude estimator with ``set_reference(q)`` and ``attitude(t, q) -> (·, h, ·)``.
        settings: duration, rate, load step, set point and IMU noise.
        seed: seed of the headings, drift signs and noise.

    Returns:
        ``{"log": {t, h_true, h_est, v, spool, status} arrays, **step metrics}``: rise time (from the end of
        settling to first reaching the target), overshoot [%], settling time to ±2 mm (staying until the load),
        recovery time (from the post-load minimum back into ±2 mm, staying) [s], held mean/std (`height_metrics`).
    """
    rng = np.random.default_rng(seed)
    robot = TendonRobot()
    n = robot.cfg.n_segments
    psi = rng.uniform(-math.pi, math.pi, n + 1)
    drift = 0.0065 * rng.choice([-1.0, 1.0], n + 1)
    heading = exp_so3(psi[:, None] * np.array([0.0, 0.0, 1.0]))
    travel = np.zeros(n + 1)
    prev_phi = np.zeros(n + 1)
    controller.reset()
    controller.set_target(settings.target)
    dt = 1.0 / settings.rate
    log: dict[str, list[Any]] = {k: [] for k in ("t", "h_true", "h_est", "v", "spool", "status")}
    v = 0.0
    for k in range(int(settings.duration * settings.rate)):
        t = k * dt
        robot.tip_load = settings.load if t >= settings.t_load else 0.0
        rot = robot.rotations()
        phi = np.concatenate([[0.0], np.cumsum(robot.theta)])
        travel += np.abs(phi - prev_phi)
        prev_phi = phi
        hd = exp_so3((drift * travel)[:, None] * np.array([0.0, 0.0, 1.0]))
        noise = exp_so3(rng.normal(0.0, settings.quat_noise, (n + 1, 3)))
        q = torch.from_numpy(quat_of(hd @ heading @ rot @ noise))
        if k == 0:
            estimator.set_reference(q)
        _, h, _ = estimator.attitude(t, q)
        v, status = controller.step(t, float(h), robot.spool)
        for key, val in (
            ("t", t),
            ("h_true", robot.height()),
            ("h_est", float(h)),
            ("v", v),
            ("spool", robot.spool),
            ("status", status),
        ):
            log[key].append(val)
        robot.advance(dt, v)
    arr = {k: np.asarray(x) for k, x in log.items()}
    return {"log": arr, **height_metrics(arr, settings.target, settle=float(controller.settle), t_load=settings.t_load)}


def height_metrics(
    log: dict[str, np.ndarray], target: float, settle: float, t_load: float, band: float = 0.002
) -> dict[str, float]:
    """Rise, overshoot, settling, recovery of the *estimated* height (as the seed reports) and true-height errors.

    Args:
        log: the run's arrays ``t`` [s], ``h_est`` and ``h_true`` [m] (same length).
        target: target height [m].
        settle: time the step response is measured from [s].
        t_load: time the tip load is applied [s] (the response window ends, the recovery one starts).
        band: settling band around the target [m].

    Returns:
        Metrics: ``rise_time_s``, ``overshoot_pct``, ``settling_time_s``, ``held_mean_mm``, ``held_std_mm``,
        ``true_vs_est_rmse_mm``, and ``load_drop_mm``, ``recovery_time_s`` when the log reaches ``t_load``
        (NaN where not reached).
    """
    t, h = log["t"], log["h_est"]
    pre = (t >= settle) & (t < t_load)
    out: dict[str, float] = {}
    reach = np.flatnonzero(pre & (h >= target))
    out["rise_time_s"] = float(t[reach[0]] - settle) if reach.size else float("nan")
    out["overshoot_pct"] = float(100.0 * (h[pre].max() - target) / target) if pre.any() else float("nan")
    outside = np.flatnonzero(pre & (np.abs(h - target) > band))
    out["settling_time_s"] = (
        float(t[outside[-1] + 1] - settle) if outside.size and outside[-1] + 1 < t.size else float("nan")
    )
    post = t >= t_load
    if post.any():
        i_min = np.flatnonzero(post)[np.argmin(h[post])]
        out["load_drop_mm"] = float(1e3 * (target - h[i_min]))
        after = np.arange(i_min, t.size)
        bad = after[np.abs(h[after] - target) > band]
        out["recovery_time_s"] = (
            float(t[bad[-1] + 1] - t[i_min])
            if bad.size and bad[-1] + 1 < t.size
            else (0.0 if not bad.size else float("nan"))
        )
    hold = (t >= t_load - 10.0) & (t < t_load)
    out["held_mean_mm"] = float(1e3 * h[hold].mean()) if hold.any() else float("nan")
    out["held_std_mm"] = float(1e3 * h[hold].std()) if hold.any() else float("nan")
    out["true_vs_est_rmse_mm"] = float(1e3 * np.sqrt(np.mean((log["h_true"] - h) ** 2)))
    return out
