"""Motion of the swept joint: min-jerk moves between poses, holds, and the residual swing of faulty poses.

A faulty "non-stationary" pose keeps swinging after the move: angle A e^{−τ/T} sin(2πfτ) about an axis ⟂ u
(smooth onset; fades out during the next move), while the rig reports it stationary (`Motion.direction`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from flexlearn.lie import rotation_between
from flexlearn.sim.rig.geometry import STRAIGHT, child_frame, rotate, sensor_position, tangent_basis
from flexlearn.sim.rig_config import RigConfig

__all__ = ["Motion", "build_motion", "frames", "positions", "smoothstep"]

SWING_RAMP = 0.05
"""[s] smooth onset of a residual swing (keeps velocity and acceleration continuous)."""


def smoothstep(x: np.ndarray) -> np.ndarray:
    """Minimum-jerk profile 10x³ − 15x⁴ + 6x⁵ on x clipped to [0, 1] (zero velocity and acceleration at ends).

    Args:
        x: normalised time, any shape.

    Returns:
        The profile in [0, 1], shaped like ``x``.
    """
    x = np.clip(x, 0.0, 1.0)
    return x**3 * (10.0 - 15.0 * x + 6.0 * x * x)


@dataclass
class Motion:
    """Piecewise trajectory of the child direction: min-jerk moves between poses, holds (swinging if faulty)."""

    slot: float
    slot_start: np.ndarray  # (P,) [s]
    move_dur: np.ndarray  # (P,) [s]
    u_prev: np.ndarray  # (P, 3) direction at the start of the move into pose p
    w_move: np.ndarray  # (P, 3) rotation vector from u_prev to u_act
    u_act: np.ndarray  # (P, 3) actual hold direction
    swing_w: np.ndarray  # (P, 3) swing axis × amplitude [rad] (zero unless faulty)
    swing_f: np.ndarray  # (P,) swing frequency [Hz]
    swing_decay: float  # [s] decay time of the residual swing

    def _swing(self, k: np.ndarray, th: np.ndarray) -> np.ndarray:
        """Residual swing angle [rad] of pose k at time th after its reported start (smooth onset)."""
        env = smoothstep(th / SWING_RAMP) * np.exp(-th / self.swing_decay)
        return env * np.sin(2.0 * math.pi * self.swing_f[k] * th)

    def direction(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Direction u(t) (N, 3), pose slot index (N,) and mask (N,) of samples held still (no motion).

        Moving: u = exp(s·w) exp((1 − s)·φ_prev(t) a_prev) u_prev with the min-jerk s(τ); a swing of the
        previous pose fades out during the move, so position, velocity and acceleration stay continuous.
        Holding: u = exp(φ(t) a) u_act (φ ≡ 0 unless the pose is a faulty swinging one).

        Args:
            t: sample times (N,) [s].

        Returns:
            (u (N, 3), slot index (N,), still mask (N,)).
        """
        k = np.clip(np.searchsorted(self.slot_start, t, side="right") - 1, 0, len(self.slot_start) - 1)
        tau = t - self.slot_start[k]
        moving = tau < self.move_dur[k]
        swings = np.any(self.swing_w != 0.0, axis=-1)
        swinging = ~moving & swings[k]
        u = self.u_act[k].copy()
        if moving.any():
            km, tm = k[moving], tau[moving]
            s = smoothstep(tm / self.move_dur[km])
            base = self.u_prev[km]
            carry = (km > 0) & swings[np.maximum(km - 1, 0)]
            if carry.any():
                kp = km[carry] - 1
                ang = (1.0 - s[carry]) * self._swing(kp, tm[carry] + self.slot - self.move_dur[kp])
                base[carry] = rotate(ang[:, None] * self.swing_w[kp], base[carry])
            u[moving] = rotate(s[:, None] * self.w_move[km], base)
        if swinging.any():
            ks = k[swinging]
            u[swinging] = rotate(
                self._swing(ks, tau[swinging] - self.move_dur[ks])[:, None] * self.swing_w[ks], self.u_act[ks]
            )
        return u, k, ~(moving | swinging)


def build_motion(
    cfg: RigConfig, slot: float, move_dur: np.ndarray, u_act: np.ndarray, swing: np.ndarray, rng: np.random.Generator
) -> Motion:
    """The sweep's trajectory through the hold directions u_act (P, 3): moves of ``move_dur`` (P,) [s] in slots of
    ``slot`` [s]; poses flagged in ``swing`` (P,) keep swinging (amplitude, axis and frequency drawn from ``rng``).

    Args:
        cfg: the rig configuration (``faults`` swing amplitude, frequency and decay).
        slot: length of one pose slot [s].
        move_dur: move duration per pose (P,) [s].
        u_act: actual hold directions (P, 3), unit, in the parent frame.
        swing: faulty swinging poses (P,) (bool or 0/1).
        rng: generator of the swing draws.

    Returns:
        The trajectory; the first move starts from the straight pose.
    """
    p = u_act.shape[0]
    u_prev = np.concatenate([STRAIGHT[None], u_act[:-1]])
    w_move = rotation_between(torch.from_numpy(u_prev), torch.from_numpy(u_act)).numpy()
    a, b = tangent_basis(u_act)
    psi = rng.uniform(-math.pi, math.pi, p)
    amp = cfg.faults.swing_amplitude * rng.uniform(0.5, 1.5, p) * swing
    swing_w = amp[:, None] * (np.cos(psi)[:, None] * a + np.sin(psi)[:, None] * b)
    swing_f = cfg.faults.swing_frequency * np.asarray(rng.uniform(0.7, 1.3, p))
    return Motion(slot, np.arange(p) * slot, move_dur, u_prev, w_move, u_act, swing_w, swing_f, cfg.faults.swing_decay)


def frames(
    motion: Motion, t: np.ndarray, pose_r: np.ndarray, pose_pos: np.ndarray, mount: np.ndarray, cfg: RigConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sensor frame R_child (N, 3, 3), position (N, 3), pose index (N,) and still mask (N,) at times t.

    Args:
        motion: the sweep's trajectory.
        t: sample times (N,) [s].
        pose_r: sensor frames (P, 3, 3) at the hold directions (used for still samples).
        pose_pos: sensor positions (P, 3) [m] at the hold directions.
        mount: the sensor's axes on the child board (3, 3).
        cfg: the rig configuration (geometry).

    Returns:
        (R_child, position [m], pose index, still mask).
    """
    u, k, still = motion.direction(t)
    r = pose_r[k]
    pos = pose_pos[k]
    if (~still).any():
        r_rel, r_child = child_frame(u[~still], mount, cfg.geometry.joint)
        r[~still] = r_child
        pos[~still] = sensor_position(u[~still], r_rel, cfg)
    return r, pos, k, still


def positions(motion: Motion, t: np.ndarray, cfg: RigConfig) -> np.ndarray:
    """Sensor position (N, 3) [m] at times t (the joint rotation is only needed for an off-axis sensor).

    Args:
        motion: the sweep's trajectory.
        t: sample times (N,) [s].
        cfg: the rig configuration (geometry).

    Returns:
        Positions (N, 3) [m] in the parent frame.
    """
    u = motion.direction(t)[0]
    offset = np.any(np.asarray(cfg.geometry.magnetometer_offset) != 0.0)
    r_rel = child_frame(u, None, cfg.geometry.joint)[0] if offset else np.zeros((u.shape[0], 3, 3))
    return sensor_position(u, r_rel, cfg)
