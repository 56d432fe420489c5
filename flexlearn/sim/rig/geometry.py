"""Joint geometry of the sweep rig: the child sensor frame and position for a child direction, and the coil drive.

Parent frame = world frame, z up, origin at the parent coil's board mid-plane; the straight child axis is
e = (0, 0, −1). Lengths [m], angles [rad]; see `flexlearn.sim.rig_config.JointGeometry`.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from flexlearn.lie import rotation_between
from flexlearn.sim.numpy_lie import exp_so3
from flexlearn.sim.rig_config import RigConfig

__all__ = [
    "STRAIGHT",
    "UP",
    "child_frame",
    "joint_rotation",
    "sensor_position",
    "coil_current",
    "tangent_basis",
    "rotate",
    "chip_mounts",
]

STRAIGHT = np.array([0.0, 0.0, -1.0])
"""Straight child axis e in the parent frame."""
UP = np.array([0.0, 0.0, 1.0])


def universal_angles(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Angles (α, β) (N,) each [rad] of a universal joint R_x(α) R_y(β) taking e to u (N, 3).

    R_y(β) e = (−sin β, 0, −cos β), then R_x(α): u = (−sin β, sin α cos β, −cos α cos β), so
    β = −asin(u_x), α = atan2(u_y, −u_z).

    Args:
        u: unit child directions (N, 3) in the parent frame.

    Returns:
        (α (N,), β (N,)) [rad].
    """
    return np.arctan2(u[:, 1], -u[:, 2]), -np.arcsin(np.clip(u[:, 0], -1.0, 1.0))


def _axis_rotations(angle: np.ndarray, axis: int) -> np.ndarray:
    w = np.zeros(angle.shape + (3,))
    w[..., axis] = angle
    return exp_so3(w)


def joint_rotation(u: np.ndarray, joint: str = "spherical") -> np.ndarray:
    """Child board rotation R_rel (N, 3, 3) with R_rel e = u for unit directions u (N, 3).

    "spherical": exp(rotation_between(e, u)) (no twist, seed 002 III-B1); "universal": R_x(α) R_y(β)
    (`universal_angles`), which twists the child about u against the spherical joint.

    Args:
        u: unit child directions (N, 3) in the parent frame.
        joint: "spherical" or "universal".

    Returns:
        R_rel (N, 3, 3).
    """
    if joint == "universal":
        alpha, beta = universal_angles(u)
        return _axis_rotations(alpha, 0) @ _axis_rotations(beta, 1)
    e = torch.from_numpy(np.broadcast_to(STRAIGHT, u.shape).copy())
    return exp_so3(rotation_between(e, torch.from_numpy(np.ascontiguousarray(u, dtype=np.float64))).numpy())


def child_frame(
    u: np.ndarray, mount: Optional[np.ndarray] = None, joint: str = "spherical"
) -> tuple[np.ndarray, np.ndarray]:
    """Joint rotation R_rel (`joint_rotation`) and sensor frame R_rel·M, both (N, 3, 3).

    ``u`` (N, 3) unit child directions in the parent frame; ``mount`` (3, 3) the sensor's axes M on the child
    board (identity if None); ``joint`` one of `flexlearn.sim.rig_config.JOINT_TYPES`.

    Args:
        u: unit child directions (N, 3) in the parent frame.
        mount: the sensor's axes M (3, 3) on the child board; None: identity.
        joint: the joint type, "spherical" or "universal".

    Returns:
        (R_rel, R_rel·M), both (N, 3, 3).
    """
    r_rel = joint_rotation(u, joint)
    return r_rel, (r_rel if mount is None else r_rel @ mount)


def sensor_position(u: np.ndarray, r_rel: np.ndarray, cfg: RigConfig) -> np.ndarray:
    """Child magnetometer/IMU position (N, 3) [m] in the parent (coil) frame for directions u (N, 3).

    Spherical joint: p = c + b·u + R_rel·s, c = (o_x, o_y, −(a)) the pivot (a = ``platform_offset`` +
    ``pivot_to_next``, o = ``pivot_offset``), b = ``pivot_radius``, s = ``magnetometer_offset``. Universal joint:
    p = c + R_x(α)(d e) + b·u + R_rel·s with d = ``axis_offset`` between its two axes.

    Reading of seed 002, III-B1 ("pivot radius 10 mm; a 9 mm platform offset (height of sensing
    electronics), and 10 mm before the pivot of the next module"): walking distally from a board, the
    electronics height (9 mm) and the 10 mm to the next pivot put the pivot a = 19 mm below the parent
    board; the child board lies on the pivot's sphere of radius b = 10 mm. With this geometry the field
    direction seen by the child sensor turns by ≈0.5 rad per rad of bend (measured from the coil model);
    with a and b swapped it turns by only 0.02–0.1 rad/rad, and magnetometer noise would be amplified
    10–50× into the joint estimate.

    Args:
        u: unit child directions (N, 3) in the parent frame.
        r_rel: joint rotations R_rel (N, 3, 3) (`joint_rotation`).
        cfg: the rig configuration (its ``geometry``).

    Returns:
        p (N, 3) [m].
    """
    g = cfg.geometry
    ox, oy = g.pivot_offset
    pivot = np.array([ox, oy, -(g.platform_offset + g.pivot_to_next)])
    pos = pivot + g.pivot_radius * u + r_rel @ np.asarray(g.magnetometer_offset)
    if g.joint == "universal" and g.axis_offset > 0.0:
        first = _axis_rotations(universal_angles(u)[0], 0)
        pos = pos + first @ (g.axis_offset * STRAIGHT)
    return pos


def coil_current(coil: Any, cfg: RigConfig) -> float:
    """Drive current I [A]: ``acquisition.coil_current`` when set, else the current giving |B| =
    ``field_at_neighbour`` at the child sensor in the straight pose (``coil`` has ``field(points)`` [T/A]).

    Args:
        coil: the coil model (field per ampere at points in the parent frame).
        cfg: the rig configuration (``acquisition`` and ``geometry``).

    Returns:
        I [A].
    """
    if cfg.acquisition.coil_current > 0.0:
        return float(cfg.acquisition.coil_current)
    u = STRAIGHT[None]
    pos = sensor_position(u, np.eye(3)[None], cfg)  # R_rel = I straight, for both joint types
    b = coil.field(torch.from_numpy(pos)).numpy()
    return float(cfg.acquisition.field_at_neighbour / np.linalg.norm(b))


def tangent_basis(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal (a, b) ⟂ u (N, 3) each; u must stay away from ±x (true on the cap around −z).

    Args:
        u: unit directions (N, 3).

    Returns:
        (a (N, 3), b (N, 3)), with b = u × a.
    """
    a = np.cross(u, [1.0, 0.0, 0.0])
    a /= np.linalg.norm(a, axis=-1, keepdims=True)
    return a, np.cross(u, a)


def rotate(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors v (N, 3) by rotation vectors w (N, 3) [rad]: exp(ŵ) v.

    Args:
        w: rotation vectors (N, 3) [rad].
        v: vectors (N, 3).

    Returns:
        The rotated vectors (N, 3).
    """
    return np.einsum("nij,nj->ni", exp_so3(w), v)


def chip_mounts(cfg: RigConfig) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """Fixed chip rotations on the child board (3, 3) each: (IMU, magnetometer); None where not rotated.

    Args:
        cfg: the rig configuration (``geometry.imu_mount`` and ``geometry.magnetometer_mount``).

    Returns:
        (IMU rotation, magnetometer rotation), each (3, 3) or None.
    """
    g = cfg.geometry
    out = []
    for w in (g.imu_mount, g.magnetometer_mount):
        out.append(exp_so3(np.asarray(w, dtype=np.float64)[None])[0] if any(x != 0.0 for x in w) else None)
    return out[0], out[1]
