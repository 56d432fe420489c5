"""Rotations as users give them: a frame from a direction and a normal, the nearest rotation to a matrix that is
orthonormal only to the digits it was written with, and the half rotation ``exp(½ log Q)``. Rotations map body →
world, body z the rod axis (:mod:`flexlearn.physics.cosserat.state`).

A rotation given by a user (a clamp's, read from a file or a CAD tool) is accepted when it is orthonormal to within
:data:`ORTHONORMAL_TOL` (``max |RᵀR − I|``) with det R > 0, and replaced by the nearest rotation, the polar factor
``U Vᵀ`` of its SVD ``U S Vᵀ`` (:func:`orthonormalised`); its distance from the given matrix is of the order of
the tolerance.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from flexlearn.config import check

ORTHONORMAL_TOL = 1e-6
"""Largest ``max |RᵀR − I|`` a given rotation may have; it is then orthonormalised (nearest rotation)."""

Vector = Union[Sequence[float], Tensor]


def orthonormalised(rotation: Union[Sequence[Sequence[float]], Tensor], name: str = "rotation") -> Tensor:
    """The nearest rotation to ``rotation`` (…, 3, 3) in float64: its polar factor ``U Vᵀ`` (SVD ``U S Vᵀ``).

    Args:
        rotation: a matrix orthonormal to within :data:`ORTHONORMAL_TOL` with positive determinant.
        name: the name the error gives.

    Returns:
        (…, 3, 3) orthonormal to round-off, det = +1.

    Raises:
        ConfigError: naming ``name``: not (…, 3, 3), not finite, ``max |RᵀR − I|`` above the tolerance, or a
            reflection (det < 0).
    """
    r = torch.as_tensor(rotation, dtype=torch.float64)
    check(r.dim() >= 2 and r.shape[-2:] == (3, 3), name, tuple(r.shape), "expected a (3, 3) rotation matrix")
    check(bool(torch.isfinite(r).all()), name, r.tolist(), "must be finite")
    err = float((r.transpose(-1, -2) @ r - torch.eye(3, dtype=r.dtype)).abs().max())
    check(
        err <= ORTHONORMAL_TOL,
        name,
        r.tolist(),
        f"must be a rotation matrix to within {ORTHONORMAL_TOL:g} (max |R^T R - I| = {err:.3g})",
    )
    check(float(torch.linalg.det(r).min()) > 0, name, r.tolist(), "is a reflection (det < 0), not a rotation")
    u, _, vh = torch.linalg.svd(r)
    return u @ vh


def frame(tangent: Vector, normal: Optional[Vector] = None) -> Tensor:
    """(3, 3) body → world rotation with body z along ``tangent`` and body x along ``normal`` projected
    perpendicular to it: ``[x, z × x, z]`` (columns).

    Args:
        tangent: (3,) the rod direction (any length > 0).
        normal: (3,) the body x direction (not parallel to ``tangent``); None: world y × tangent, or world
            z × tangent when the tangent is along y.

    Returns:
        The rotation.

    Raises:
        ConfigError: naming ``tangent`` or ``normal`` (wrong shape, not finite, zero, parallel).
    """
    t = vector3(tangent, "tangent")
    check(float(t.norm()) > 0, "tangent", t.tolist(), "must be a non-zero vector")
    z = t / t.norm()
    if normal is None:
        helper = torch.tensor([0.0, 1.0, 0.0] if abs(float(z[1])) < 0.9 else [0.0, 0.0, 1.0], dtype=z.dtype)
        n = torch.linalg.cross(helper, z)
    else:
        n = vector3(normal, "normal")
    x = n - (n @ z) * z
    check(
        float(x.norm()) > 1e-9 * max(float(n.norm()), 1e-300),
        "normal",
        n.tolist(),
        f"must not be parallel to the tangent {z.tolist()}",
    )
    x = x / x.norm()
    return torch.stack([x, torch.linalg.cross(z, x), z], -1)


def half_rotation(Q: Tensor) -> Tensor:
    """(…, 3, 3) the rotation by half the angle about the same axis, ``exp(½ log Q)``, of rotations Q (…, 3, 3) by
    less than π: from Q's quaternion ``w = ½ √(1 + tr Q)``, ``v = (Q₃₂ − Q₂₃, Q₁₃ − Q₃₁, Q₂₁ − Q₁₂)/(4w)``, the half
    turn's ``w' = √((1 + w)/2)``, ``v' = v/(2w')``, and ``R = I + 2 w' v'^ + 2 (v'^)²`` (a few tensor operations; the
    half-angle forms keep full precision near Q = I).

    Args:
        Q: rotations (angle < π; an element is never bent that far, the integrator stops first).

    Returns:
        The half rotations.
    """
    w = 0.5 * torch.sqrt((1.0 + Q[..., 0, 0] + Q[..., 1, 1] + Q[..., 2, 2]).clamp_min(1e-30))
    v = torch.stack([Q[..., 2, 1] - Q[..., 1, 2], Q[..., 0, 2] - Q[..., 2, 0], Q[..., 1, 0] - Q[..., 0, 1]], -1)
    wh = torch.sqrt(0.5 * (1.0 + w))
    vh = v / (4.0 * w * 2.0 * wh).unsqueeze(-1)
    x, y, z = vh.unbind(-1)
    zero = torch.zeros_like(x)
    hat = torch.stack(
        [torch.stack([zero, -z, y], -1), torch.stack([z, zero, -x], -1), torch.stack([-y, x, zero], -1)], -2
    )
    eye = torch.eye(3, dtype=Q.dtype, device=Q.device)
    return eye + 2.0 * wh[..., None, None] * hat + 2.0 * hat @ hat


def vector3(v: Vector, name: str) -> Tensor:
    """A checked finite (3,) float64 vector.

    Args:
        v: three numbers.
        name: the name an error gives.

    Returns:
        The (3,) tensor.

    Raises:
        ConfigError: naming ``name``.
    """
    t = torch.as_tensor(v, dtype=torch.float64)
    check(t.shape == (3,), name, tuple(t.shape), "expected a 3-vector")
    check(bool(torch.isfinite(t).all()), name, t.tolist(), "must be finite")
    return t
