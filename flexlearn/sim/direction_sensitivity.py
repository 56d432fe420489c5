"""How well the coil-field direction observes the joint direction, for a given rig geometry.

The direction network sees only the unit field ΔB/‖ΔB‖ in the child sensor frame (seed 002, III-B1: the
amplitude is normalised away). Its noise is amplified into the joint estimate by 1/σ_min of the Jacobian
d(unit field)/d(joint direction); σ ≈ 0.5 rad/rad for the seed's geometry. Use this before building a
module: a design with σ_min ≪ 0.1 cannot reach degree-level accuracy at the seed's noise level.
"""

from __future__ import annotations

import numpy as np
import torch

from flexlearn.sensing.coil import PlanarCoil
from flexlearn.sim.direction_bound import tangent_jacobian
from flexlearn.sim.rig import StackedCoil, build_coil, child_frame, sensor_position
from flexlearn.sim.rig_config import RigConfig


def unit_field_in_sensor(u: np.ndarray, cfg: RigConfig, coil: PlanarCoil | StackedCoil) -> np.ndarray:
    """Unit coil field (N, 3) in the child frame (mount misalignment ignored) for child directions u (N, 3).

    Args:
        u: unit child directions (N, 3) in the parent frame.
        cfg: the rig configuration (joint geometry and sensor position).
        coil: the coil model in the parent (coil) frame.

    Returns:
        The unit field (N, 3) in the child sensor frame.
    """
    r_rel, _ = child_frame(u, None, cfg.geometry.joint)
    b = coil.field(torch.from_numpy(sensor_position(u, r_rel, cfg))).numpy()
    b_sensor = np.einsum("nji,nj->ni", r_rel, b)
    return b_sensor / np.linalg.norm(b_sensor, axis=-1, keepdims=True)


def direction_sensitivity(
    colatitude: np.ndarray, azimuth: np.ndarray, cfg: RigConfig | None = None, step: float = 1e-5
) -> np.ndarray:
    """Singular values (N, 2) [rad/rad] of d(unit field)/d(joint direction) at cap points (N,) [rad].

    Central differences along two orthonormal tangent directions of the joint direction u on S².

    Args:
        colatitude: bend angles (N,) [rad] (broadcast with ``azimuth``).
        azimuth: bend azimuths (N,) [rad].
        cfg: the rig configuration; None: the default `RigConfig`.
        step: finite-difference angle [rad].

    Returns:
        σ_max, σ_min (N, 2) [rad/rad].
    """
    cfg = cfg or RigConfig()
    coil = build_coil(cfg.coil, cfg.coil_layers)
    lam, th = np.broadcast_arrays(np.asarray(colatitude, float), np.asarray(azimuth, float))
    u = np.stack([np.sin(lam) * np.cos(th), np.sin(lam) * np.sin(th), -np.cos(lam)], axis=-1)
    jac = tangent_jacobian(lambda x: unit_field_in_sensor(x, cfg, coil), u, step)  # (N, 3, 2)
    return np.linalg.svd(jac, compute_uv=False)
