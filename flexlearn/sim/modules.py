"""One built module of the seed-002 design: its tolerance draws and what they do to the sensed field.

A module's draw (`draw_module`, from `flexlearn.sim.rig_config.ModuleTolerances` and a seeded generator) moves
and turns the parts the joint model of seed 002 (III-B1) takes as exact:

* pivot radius b → b + δb and parent board → pivot distance a → a + δa (TPU hourglass print, compression);
* sensor position on the child disk: ``magnetometer_offset`` + δs (board on the disk, chip on the board);
* parent coil pose on its disk: B(p) = R_c B₀(R_cᵀ (p − c)) with offset c and tilt R_c = exp([t]×), t ⟂ z
  (`PlacedCoil`; a turn about the coil's own axis is an azimuth change of the outline, drawn in t_z = 0);
* magnetometer axes against the accelerometer's: the magnetometer reads in the frame R_child·Q,
  Q = exp([q]×), while the accelerometer (the label) reads in R_child.

The sensor's gain/soft iron S and hard iron h (``magnetometer.soft_iron``/``hard_iron``) and its tilt on the
disk (``geometry.mount_misalignment``) are drawn by `flexlearn.sim.rig` from the same module stream.
``tumble_readings`` simulates the module tumbled by hand in the ambient field (seed 002, III-B3: the ellipsoid
fit's input). docs/modules.md lists every tolerance with its magnitude and source.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from flexlearn.sensing.coil import CoilModel
from flexlearn.sim.numpy_lie import exp_so3
from flexlearn.sim.rig_config import JointGeometry, ModuleTolerances

__all__ = ["ModuleDraw", "PlacedCoil", "draw_module", "nominal_module", "tumble_readings"]


@dataclass
class ModuleDraw:
    """Realised deviations of one module from the nominal design (SI units).

    ``mag_axes`` Q (3, 3); ``sensor_offset`` (3,) [m] in the child board frame; ``pivot_radius`` and
    ``joint_length`` [m] added to the nominal b and a; ``coil_offset`` (3,) [m] and ``coil_tilt`` R_c (3, 3)
    of the parent coil in the parent frame.
    """

    mag_axes: np.ndarray
    sensor_offset: np.ndarray
    pivot_radius: float
    joint_length: float
    coil_offset: np.ndarray
    coil_tilt: np.ndarray

    def geometry(self, g: JointGeometry) -> JointGeometry:
        """The module's joint: b + δb, a + δa (taken on ``platform_offset``), sensor offset + δs.

        Args:
            g: the nominal joint geometry.

        Returns:
            A copy of ``g`` with this draw's deviations added.
        """
        s = np.asarray(g.magnetometer_offset) + self.sensor_offset
        return dataclasses.replace(
            g,
            pivot_radius=g.pivot_radius + self.pivot_radius,
            platform_offset=g.platform_offset + self.joint_length,
            magnetometer_offset=(float(s[0]), float(s[1]), float(s[2])),
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready values (recorded in a sweep's ``meta['module']``)."""
        return {k: (v.tolist() if isinstance(v, np.ndarray) else float(v)) for k, v in dataclasses.asdict(self).items()}


def nominal_module() -> ModuleDraw:
    """The module built exactly to the drawings (no deviation)."""
    return ModuleDraw(np.eye(3), np.zeros(3), 0.0, 0.0, np.zeros(3), np.eye(3))


def draw_module(tol: ModuleTolerances, rng: np.random.Generator) -> ModuleDraw:
    """One module's deviations: every entry normal with the standard deviation of ``tol`` (fixed draw order).

    Args:
        tol: standard deviations of the tolerances ([m] for offsets and lengths, [rad] for angles).
        rng: generator of the module's stream.

    Returns:
        The draw.
    """
    q = rng.normal(0.0, tol.mag_axes, 3)
    s = rng.normal(0.0, 1.0, 3) * np.asarray(tol.sensor_offset)
    db, da = rng.normal(0.0, 1.0, 2) * np.array([tol.pivot_radius, tol.joint_length])
    c = rng.normal(0.0, 1.0, 3) * np.asarray(tol.coil_offset)
    t = np.concatenate([rng.normal(0.0, tol.coil_tilt, 2), [0.0]])
    return ModuleDraw(exp_so3(q[None])[0], s, float(db), float(da), c, exp_so3(t[None])[0])


class PlacedCoil:
    """A coil (`CoilModel`) placed on its disk with an offset c and tilt R_c: B(p) = R_c B₀(R_cᵀ(p − c)) [T per A]."""

    def __init__(self, coil: CoilModel, draw: ModuleDraw) -> None:
        self.coil = coil
        self.rot = torch.from_numpy(np.ascontiguousarray(draw.coil_tilt))
        self.offset = torch.from_numpy(np.ascontiguousarray(draw.coil_offset))

    def field(self, points: torch.Tensor) -> torch.Tensor:
        """Flux density per ampere (..., 3) at ``points`` (..., 3) [m] in the parent frame.

        Args:
            points: field points (..., 3) [m] in the parent frame.

        Returns:
            B per ampere (..., 3) [T/A], float64, in the parent frame.
        """
        local = (points.to(torch.float64) - self.offset) @ self.rot
        return self.coil.field(local) @ self.rot.T


def tumble_readings(
    n: int,
    earth: np.ndarray,
    soft_iron: np.ndarray,
    mag_axes: np.ndarray,
    hard_iron: np.ndarray,
    noise: float,
    lsb: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Magnetometer readings (n, 3) [T] of the module turned through n uniformly random orientations.

    m = S Qᵀ Rᵀ B_earth + h + noise, quantised to ``lsb`` (what a hand tumble records, seed 002 III-B3).

    Args:
        n: number of readings.
        earth: ambient field B_earth (3,) [T] (only its magnitude matters).
        soft_iron: gain/soft iron S (3, 3).
        mag_axes: magnetometer axes Q (3, 3) against the accelerometer's.
        hard_iron: hard-iron offset h (3,) [T].
        noise: white noise standard deviation per axis [T].
        lsb: quantisation step [T].
        rng: generator of the orientations and the noise.

    Returns:
        The readings (n, 3) [T].
    """
    d = rng.normal(size=(n, 3))
    d *= np.linalg.norm(earth) / np.linalg.norm(d, axis=-1, keepdims=True)  # Rᵀ B_earth, uniform
    m = d @ (soft_iron @ mag_axes.T).T + hard_iron + rng.normal(0.0, noise, (n, 3))
    return np.round(m / lsb) * lsb
