"""Unit quaternions ``q = (w, x, y, z)``, Hamilton product; ``R(q)`` maps body to world coordinates.

Shapes: quaternions ``(..., 4)``, rotation vectors ``(..., 3)`` in rad, matrices ``(..., 3, 3)``.
``quat_exp``/``quat_log`` are the maps between rotation vectors and quaternions
(Sola et al., "A micro Lie theory", eqs. (101)-(105)): ``q = (cos(θ/2), sin(θ/2) u)`` for ``ω = θ u``.
"""

import torch
from torch import Tensor

from flexlearn.lie.series import atan2_ratio, cos_from_t2, sinc
from flexlearn.lie.tensor_checks import entries, from_entries, sqnorm
from flexlearn.lie.thresholds import normalize_eps


def quat_multiply(p: Tensor, q: Tensor) -> Tensor:
    """Hamilton product ``p ⊗ q`` of ``(..., 4)`` quaternions (broadcasting); R(p⊗q) = R(p) R(q).

    Args:
        p: left quaternion (..., 4), (w, x, y, z).
        q: right quaternion (..., 4), (w, x, y, z).

    Returns:
        ``p ⊗ q`` (..., 4).
    """
    pw, px, py, pz = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    qw, qx, qy, qz = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return torch.stack(
        [
            pw * qw - px * qx - py * qy - pz * qz,
            pw * qx + px * qw + py * qz - pz * qy,
            pw * qy - px * qz + py * qw + pz * qx,
            pw * qz + px * qy - py * qx + pz * qw,
        ],
        -1,
    )


def quat_conjugate(q: Tensor) -> Tensor:
    """Conjugate ``(w, -x, -y, -z)``; the inverse of a unit quaternion.

    Args:
        q: quaternions (..., 4), (w, x, y, z).

    Returns:
        ``q*`` (..., 4).
    """
    return torch.cat([q[..., :1], -q[..., 1:]], -1)


def quat_inverse(q: Tensor) -> Tensor:
    """Inverse ``q* / |q|²`` of a non-zero quaternion.

    Args:
        q: non-zero quaternions (..., 4), (w, x, y, z).

    Returns:
        ``q⁻¹`` (..., 4).
    """
    return quat_conjugate(q) / (q * q).sum(-1, keepdim=True)


def quat_normalize(q: Tensor) -> Tensor:
    """``q / |q|`` (a zero quaternion stays zero instead of becoming NaN).

    Args:
        q: quaternions (..., 4), (w, x, y, z), any length (zero allowed).

    Returns:
        Unit quaternions (..., 4); zero where q is zero.
    """
    n = torch.linalg.vector_norm(q, dim=-1, keepdim=True)
    return q / n.clamp_min(normalize_eps(q))


def _canonical_sign(q: Tensor) -> Tensor:
    """+1 or -1 (...): the sign that makes the first non-zero component of q positive."""
    s = torch.sign(q[..., 3])
    for i in [2, 1, 0]:
        s = torch.where(q[..., i] != 0.0, torch.sign(q[..., i]), s)
    return torch.where(s == 0.0, torch.ones_like(s), s)


def quat_canonical(q: Tensor) -> Tensor:
    """The representative of ±q whose first non-zero component is positive (so ``w ≥ 0``).

    For ``w ≠ 0`` this is the usual ``w > 0`` rule; for ``w = 0`` (rotations by exactly π) the sign
    of x, then y, then z decides, so that ``quat_canonical(q) == quat_canonical(-q)`` always.

    Args:
        q: quaternions (..., 4), (w, x, y, z).

    Returns:
        ``q`` or ``-q`` (..., 4), whichever has its first non-zero component positive.
    """
    return q * _canonical_sign(q).unsqueeze(-1)


def quat_to_matrix(q: Tensor) -> Tensor:
    """Rotation matrix ``R(q)`` (..., 3, 3) of a quaternion (..., 4); body → world.

    Uses ``s = 2/|q|²`` so the result is orthonormal for any non-zero ``q`` (Sola, "Quaternion
    kinematics for the error-state Kalman filter", eq. (115)).

    Args:
        q: non-zero quaternions (..., 4), (w, x, y, z); need not be unit.

    Returns:
        ``R(q)`` (..., 3, 3), body → world.
    """
    w, x, y, z = q.unbind(-1)
    s = 2.0 / (w * w + x * x + y * y + z * z)
    sx, sy, sz = s * x, s * y, s * z
    xx, yy, zz = sx * x, sy * y, sz * z
    xy, xz, yz = sx * y, sx * z, sy * z
    wx, wy, wz = w * sx, w * sy, w * sz
    return from_entries(
        [1.0 - (yy + zz), xy - wz, xz + wy, xy + wz, 1.0 - (xx + zz), yz - wx, xz - wy, yz + wx, 1.0 - (xx + yy)], 3, 3
    )


def matrix_to_quat(R: Tensor) -> Tensor:
    """Canonical unit quaternion (..., 4) of a rotation matrix (..., 3, 3); robust at every angle.

    Shepperd's method: with d_0 = 1 + tr R and d_i = 1 + 2R_ii - tr R (i = 1, 2, 3), row k of the
    symmetric matrix K = [[d0, a, b, c], [a, d1, sxy, sxz], [b, sxy, d2, syz], [c, sxz, syz, d3]]
    (a = R21 - R12, b = R02 - R20, c = R10 - R01, sxy = R01 + R10, ...) equals ``4 q_k q`` and
    ``d_k = 4 q_k²``. The row with the largest d_k (≥ 1 for a rotation, so |row| ≥ 2) is selected and
    normalised: no square root or division ever sees a small argument, in value or gradient. The
    w-row serves angles below 2π/3, the x/y/z-rows are the near-π branch. Canonicalised.

    Args:
        R: rotation matrices (..., 3, 3).

    Returns:
        Canonical unit quaternions (..., 4), (w, x, y, z).
    """
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = entries(R)
    d0 = 1.0 + r00 + r11 + r22
    d1 = 1.0 + r00 - r11 - r22
    d2 = 1.0 - r00 + r11 - r22
    d3 = 1.0 - r00 - r11 + r22
    a, b, c = r21 - r12, r02 - r20, r10 - r01
    sxy, sxz, syz = r01 + r10, r02 + r20, r12 + r21
    use1 = d1 > d0
    best = torch.where(use1, d1, d0)
    use2 = d2 > best
    best = torch.where(use2, d2, best)
    use3 = d3 > best
    qw = torch.where(use3, c, torch.where(use2, b, torch.where(use1, a, d0)))
    qx = torch.where(use3, sxz, torch.where(use2, sxy, torch.where(use1, d1, a)))
    qy = torch.where(use3, syz, torch.where(use2, d2, torch.where(use1, sxy, b)))
    qz = torch.where(use3, d3, torch.where(use2, syz, torch.where(use1, sxz, c)))
    q = torch.stack([qw, qx, qy, qz], -1)
    n = torch.sqrt(qw * qw + qx * qx + qy * qy + qz * qz).clamp_min(normalize_eps(R))
    return q * (_canonical_sign(q) / n).unsqueeze(-1)


def quat_exp(omega: Tensor) -> Tensor:
    """Unit quaternion (..., 4) of the rotation vector ``ω`` (..., 3): (cos(θ/2), sin(θ/2)/θ ω).

    Not canonicalised (w < 0 for θ > π), so that it is the smooth exponential map of S³.

    Args:
        omega: rotation vector ω (..., 3) [rad].

    Returns:
        The unit quaternion (..., 4), (w, x, y, z).
    """
    t2 = sqnorm(omega)
    f = 0.5 * sinc(0.25 * t2)
    x, y, z = omega.unbind(-1)
    return torch.stack([cos_from_t2(0.25 * t2), f * x, f * y, f * z], -1)


def quat_log(q: Tensor) -> Tensor:
    """Rotation vector ``ω`` (..., 3), ‖ω‖ ≤ π, of a unit quaternion (..., 4); ``log(q) == log(-q)``.

    ``θ = 2 atan2(|v|, w)`` after canonicalisation (w ≥ 0), ``ω = θ v/|v|``; the ratio
    atan2(|v|, w)/|v| has a series branch at |v| → 0 (see ``_series.atan2_ratio``). Unlike acos(w)
    or θ/sin θ, atan2 stays accurate near θ = 0 and θ = π.

    Args:
        q: unit quaternions (..., 4), (w, x, y, z).

    Returns:
        The rotation vector ω (..., 3) [rad], ‖ω‖ ≤ π.
    """
    s = _canonical_sign(q)
    w, x, y, z = q.unbind(-1)
    f = 2.0 * s * atan2_ratio(x * x + y * y + z * z, s * w)
    return torch.stack([f * x, f * y, f * z], -1)


def quat_rotate(q: Tensor, p: Tensor) -> Tensor:
    """``R(q) p`` for a unit quaternion (..., 4) and points (..., 3), without forming R.

    Args:
        q: unit quaternion (..., 4), (w, x, y, z).
        p: points (..., 3) (broadcast against q).

    Returns:
        The rotated points ``R(q) p`` (..., 3).
    """
    w = q[..., :1]
    v = q[..., 1:]
    t = 2.0 * torch.linalg.cross(v, torch.broadcast_tensors(v, p)[1])
    return p + w * t + torch.linalg.cross(v.expand(t.shape), t)
