"""SO(3): hat/vee, exponential and logarithm, and the minimum rotation between two directions.

Shapes: rotation vectors ``ω`` (..., 3) in rad, matrices (..., 3, 3); batch dims broadcast.
Formulas: Sola, Deray, Atchuthan, "A micro Lie theory for state estimation in robotics" (2018),
Sec. A.1; Barfoot, "State Estimation for Robotics" (2017), Sec. 7.1.
"""

import math
from typing import List

import torch
from torch import Tensor

from flexlearn.lie.quaternion import matrix_to_quat, quat_log
from flexlearn.lie.series import atan2_ratio, cosc, sinc
from flexlearn.lie.tensor_checks import cross3, dot, from_entries, sqnorm
from flexlearn.lie.thresholds import antiparallel_threshold, normalize_eps


def so3_hat_entries(omega: Tensor) -> List[Tensor]:
    """Row-major entries of the skew matrix ``ω^``: the building block of :func:`so3_hat` and the SE(3) blocks.

    Args:
        omega: rotation vector ω (..., 3) [rad] (or any 3-vector, e.g. a velocity [m] in ``v^``).

    Returns:
        Nine tensors (...) ``[0, -z, y, z, 0, -x, -y, x, 0]`` (feed them to
        :func:`flexlearn.lie.tensor_checks.from_entries` for a (..., 3, 3) matrix).
    """
    x, y, z = omega.unbind(-1)
    o = torch.zeros_like(x)
    return [o, -z, y, z, o, -x, -y, x, o]


def so3_hat(omega: Tensor) -> Tensor:
    """Skew matrix ``ω^`` (..., 3, 3) with ``ω^ p = ω × p``.

    Args:
        omega: vector ω (..., 3): a rotation vector [rad] or any 3-vector.

    Returns:
        ``ω^`` (..., 3, 3).
    """
    return from_entries(so3_hat_entries(omega), 3, 3)


def so3_vee(W: Tensor) -> Tensor:
    """Inverse of :func:`so3_hat`: ``(W21, W02, W10)`` (..., 3); W is assumed skew.

    Args:
        W: skew matrices (..., 3, 3).

    Returns:
        ω (..., 3).
    """
    return torch.stack([W[..., 2, 1], W[..., 0, 2], W[..., 1, 0]], -1)


def so3_hat_sq(omega: Tensor) -> Tensor:
    """``(ω^)² = ω ωᵀ - |ω|² I`` (..., 3, 3), without a matrix product.

    Args:
        omega: vector ω (..., 3): a rotation vector [rad] or any 3-vector.

    Returns:
        ``(ω^)²`` (..., 3, 3).
    """
    t2 = sqnorm(omega)
    e = so3_quadratic_entries(omega, torch.zeros_like(t2), torch.ones_like(t2), t2, False)
    return from_entries(e, 3, 3)


def so3_quadratic_entries(omega: Tensor, c1: Tensor, c2: Tensor, t2: Tensor, with_identity: bool) -> List[Tensor]:
    """Row-major entries of ``[I] + c1 ω^ + c2 (ω^)²``; c1, c2, t2 = |ω|² have shape (...).

    ``(ω^)² = ω ωᵀ - t2 I``; every SO(3) exp/Jacobian formula is of this form (Sola et al. eqs. (77),
    (143)-(146)), which is why exp, the Jacobians, the Cayley maps and SE(3) share this one builder.

    Args:
        omega: rotation vector ω (..., 3) [rad].
        c1: coefficient of ``ω^`` (...).
        c2: coefficient of ``(ω^)²`` (...).
        t2: ``|ω|²`` (...) [rad²], as already computed by the caller.
        with_identity: add the identity (``I + ...``) or not.

    Returns:
        Nine tensors (...), the row-major entries of the (..., 3, 3) matrix.
    """
    x, y, z = omega.unbind(-1)
    d = -c2 * t2
    if with_identity:
        d = d + 1.0
    c2x, c2y = c2 * x, c2 * y
    xy, xz, yz = c2x * y, c2x * z, c2y * z
    c1x, c1y, c1z = c1 * x, c1 * y, c1 * z
    return [d + c2x * x, xy - c1z, xz + c1y, xy + c1z, d + c2y * y, yz - c1x, xz - c1y, yz + c1x, d + c2 * z * z]


def so3_quadratic(omega: Tensor, c1: Tensor, c2: Tensor, t2: Tensor) -> Tensor:
    """``I + c1 ω^ + c2 (ω^)²`` (..., 3, 3): the matrix of :func:`so3_quadratic_entries`.

    Args:
        omega: rotation vector ω (..., 3) [rad].
        c1: coefficient of ``ω^`` (...).
        c2: coefficient of ``(ω^)²`` (...).
        t2: ``|ω|²`` (...) [rad²].

    Returns:
        The (..., 3, 3) matrix.
    """
    return from_entries(so3_quadratic_entries(omega, c1, c2, t2, True), 3, 3)


def so3_quadratic_apply(omega: Tensor, c1: Tensor, c2: Tensor, v: Tensor) -> List[Tensor]:
    """Components of ``(I + c1 ω^ + c2 (ω^)²) v`` = v + c1 ω × v + c2 ω × (ω × v), without forming the matrix.

    Args:
        omega: rotation vector ω (..., 3) [rad].
        c1: coefficient of ``ω^`` (...).
        c2: coefficient of ``(ω^)²`` (...).
        v: the vector (..., 3) the matrix is applied to.

    Returns:
        Three tensors (...), the components of the product.
    """
    o = list(omega.unbind(-1))
    a = list(v.unbind(-1))
    u = cross3(o, a)
    w = cross3(o, u)
    return [a[i] + c1 * u[i] + c2 * w[i] for i in range(3)]


def so3_exp(omega: Tensor) -> Tensor:
    """Rodrigues: ``exp(ω^) = I + A ω^ + B (ω^)²`` (..., 3, 3), A = sin θ/θ, B = (1-cos θ)/θ².

    Sola et al. eq. (77). B is evaluated in its half-angle form, so no coefficient cancels; series
    branches only guard θ → 0 (values and gradients finite at ω = 0).

    Args:
        omega: rotation vector ω (..., 3) [rad].

    Returns:
        The rotation matrix ``exp(ω^)`` (..., 3, 3).
    """
    t2 = sqnorm(omega)
    return so3_quadratic(omega, sinc(t2), cosc(t2), t2)


def so3_log(R: Tensor) -> Tensor:
    """Rotation vector ``ω`` (..., 3), ‖ω‖ ≤ π, with ``exp(ω^) = R``.

    Via the quaternion: :func:`matrix_to_quat` selects, by argmax, the w-branch (θ < 2π/3) or the
    near-π branch (largest diagonal), then θ = 2 atan2(|v|, w). Accurate to a few ulp at every angle,
    including θ → π where θ/(2 sin θ)(R - Rᵀ)ᵛ and acos((tr R - 1)/2) fail. At exactly θ = π the sign
    is deterministic: the first non-zero component of ω is positive.

    Args:
        R: rotation matrices (..., 3, 3).

    Returns:
        ω (..., 3) [rad].
    """
    return quat_log(matrix_to_quat(R))


def so3_inverse(R: Tensor) -> Tensor:
    """``R⁻¹ = Rᵀ`` (..., 3, 3).

    Args:
        R: rotation matrices (..., 3, 3).

    Returns:
        ``Rᵀ`` (..., 3, 3).
    """
    return R.transpose(-1, -2)


def _unit(x: Tensor) -> Tensor:
    n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / n.clamp_min(normalize_eps(x))


def rotation_between(u: Tensor, v: Tensor) -> Tensor:
    """Rotation vector ``ω`` (..., 3) of the minimum rotation with ``exp(ω^) u/|u| = v/|v|``.

    ``ω = atan2(|u × v|, u·v) (u × v)/|u × v|`` for unit u, v; the angle is the smallest possible
    (the rotation is about the common normal). u and v need not be unit; they broadcast. When u ≈ -v
    (|u × v|² below :func:`antiparallel_threshold`, where the axis would be rounding noise) the
    result is ``π a`` with the deterministic axis ``a = unit(u × e_k)``, e_k the basis vector of
    u's smallest component. Gradients are finite everywhere (ill-defined in that branch).

    Near u ≈ -v the axis direction is ill-conditioned (error ε/|u × v|), but it is made exactly
    perpendicular to u, so that ``exp(ω^) u = v`` still holds to a few ε: a rounding component of the
    axis along u would otherwise move ``exp(ω^) u`` by 2ε/|u × v|.

    Args:
        u: start direction (..., 3), any nonzero length.
        v: end direction (..., 3), any nonzero length.

    Returns:
        The rotation vector ``ω`` (..., 3) [rad].
    """
    u, v = torch.broadcast_tensors(_unit(u), _unit(v))
    s = torch.linalg.cross(u, v)
    s = s - dot(s, u).unsqueeze(-1) * u  # rounding leaves s·u ~ ε: remove it (see docstring)
    c = dot(u, v)
    n2 = sqnorm(s)
    anti = (c < 0.0) & (n2 < antiparallel_threshold(n2))
    n2_generic = torch.where(anti, torch.ones_like(n2), n2)  # safe input for the unused branch
    generic = atan2_ratio(n2_generic, c).unsqueeze(-1) * s
    k = torch.argmin(u.abs(), dim=-1)
    e = torch.nn.functional.one_hot(k, 3).to(u.dtype)
    axis = _unit(torch.linalg.cross(u, e))
    return torch.where(anti.unsqueeze(-1), math.pi * axis, generic)
