"""Left/right Jacobians of SO(3) and SE(3) and their inverses (closed forms with series branches).

Conventions (right perturbations, docs/architecture.md): for small δ,
``exp((ξ + δ)^) ≈ exp((J_l(ξ) δ)^) exp(ξ^) ≈ exp(ξ^) exp((J_r(ξ) δ)^)`` and ``J_r(ξ) = J_l(-ξ)``.
``J_l = Σ_j ad_ξ^j / (j+1)!`` is the ``dexp_ξ`` of seed 003, App. B, and ``J_l⁻¹ = Σ_j B_j ad_ξ^j / j!``
its ``dexp⁻¹_ξ`` (Bernoulli numbers with B_1 = -1/2).

Shapes: ω (..., 3) → (..., 3, 3); twists ξ = [ω; v] (..., 6) → (..., 6, 6).
"""

from typing import Tuple

import torch
from torch import Tensor

from flexlearn.lie.series import cosc, cosc2, cotc, sinc3, sinc5
from flexlearn.lie.so3 import so3_quadratic
from flexlearn.lie.tensor_checks import blocks6, cross3, entries, from_entries, sqnorm


def so3_left_jacobian(omega: Tensor) -> Tensor:
    """``J_l(ω) = I + (1-cos θ)/θ² ω^ + (θ - sin θ)/θ³ (ω^)²`` (Sola et al. eq. (145)).

    Args:
        omega: rotation vector ω (..., 3) [rad].

    Returns:
        ``J_l(ω)`` (..., 3, 3).
    """
    t2 = sqnorm(omega)
    return so3_quadratic(omega, cosc(t2), sinc3(t2), t2)


def so3_right_jacobian(omega: Tensor) -> Tensor:
    """``J_r(ω) = J_l(-ω) = I - (1-cos θ)/θ² ω^ + (θ - sin θ)/θ³ (ω^)²`` (Sola et al. eq. (143)).

    Args:
        omega: rotation vector ω (..., 3) [rad].

    Returns:
        ``J_r(ω)`` (..., 3, 3).
    """
    t2 = sqnorm(omega)
    return so3_quadratic(omega, -cosc(t2), sinc3(t2), t2)


def so3_left_jacobian_inv(omega: Tensor) -> Tensor:
    """``J_l⁻¹(ω) = I - ½ ω^ + (1 - (θ/2) cot(θ/2))/θ² (ω^)²`` (Sola et al. eq. (146)); θ < 2π.

    Args:
        omega: rotation vector ω (..., 3) [rad], θ = |ω| < 2π.

    Returns:
        ``J_l⁻¹(ω)`` (..., 3, 3).
    """
    t2 = sqnorm(omega)
    return so3_quadratic(omega, torch.full_like(t2, -0.5), cotc(t2), t2)


def so3_right_jacobian_inv(omega: Tensor) -> Tensor:
    """``J_r⁻¹(ω) = I + ½ ω^ + (1 - (θ/2) cot(θ/2))/θ² (ω^)²`` (Sola et al. eq. (144)); θ < 2π.

    Args:
        omega: rotation vector ω (..., 3) [rad], θ = |ω| < 2π.

    Returns:
        ``J_r⁻¹(ω)`` (..., 3, 3).
    """
    t2 = sqnorm(omega)
    return so3_quadratic(omega, torch.full_like(t2, 0.5), cotc(t2), t2)


def so3_jacobians(omega: Tensor) -> Tuple[Tensor, Tensor]:
    """``(J_l(ω), J_r(ω))`` sharing one evaluation of the coefficients.

    Args:
        omega: rotation vector ω (..., 3) [rad].

    Returns:
        ``(J_l(ω), J_r(ω))``, each (..., 3, 3).
    """
    t2 = sqnorm(omega)
    b = cosc(t2)
    c = sinc3(t2)
    return so3_quadratic(omega, b, c, t2), so3_quadratic(omega, -b, c, t2)


def se3_q_matrix(xi: Tensor) -> Tensor:
    """Barfoot's Q(ρ, φ) (..., 3, 3), the lower-left block of the SE(3) left Jacobian.

    Barfoot, "State Estimation for Robotics" (2017), eq. (7.86), with φ = ω (angular), ρ = v:
    ``Q = ½ρ^ + C (φ^ρ^ + ρ^φ^ + φ^ρ^φ^) + E (φ^φ^ρ^ + ρ^φ^φ^ - 3 φ^ρ^φ^)
    + F (φ^ρ^φ^φ^ + φ^φ^ρ^φ^)`` with C = (θ - sin θ)/θ³, E = (θ² + 2cos θ - 2)/(2θ⁴),
    F = (2θ - 3 sin θ + θ cos θ)/(2θ⁵) (E, F cancel like ε/θ², ε/θ⁴: see ``_thresholds``).
    The products are expanded with ``a^b^ = b aᵀ - (a·b) I`` and ``φ^ρ^φ^ = -(φ·ρ) φ^`` (m = φ·ρ):
    ``Q = k^ + C (ρφᵀ + φρᵀ) - 2 F m φφᵀ + 2 m (F θ² - C) I``, ``k = ½ρ + (E - C) m φ + E φ×(φ×ρ)``.

    Args:
        xi: twist ξ = [ω; v] (..., 6) [rad, m] (φ = ω, ρ = v).

    Returns:
        Q (..., 3, 3).
    """
    x, y, z, a, b, c = xi.unbind(-1)
    t2 = x * x + y * y + z * z
    cc = sinc3(t2)
    ee = cosc2(t2)
    ff = sinc5(t2)
    m = x * a + y * b + z * c
    w0, w1, w2 = cross3([x, y, z], cross3([x, y, z], [a, b, c]))  # φ × (φ × ρ)
    g = (ee - cc) * m
    k0, k1, k2 = 0.5 * a + g * x + ee * w0, 0.5 * b + g * y + ee * w1, 0.5 * c + g * z + ee * w2
    f2 = -2.0 * ff * m
    d = 2.0 * m * (ff * t2 - cc)
    s01 = cc * (a * y + x * b) + f2 * x * y
    s02 = cc * (a * z + x * c) + f2 * x * z
    s12 = cc * (b * z + y * c) + f2 * y * z
    return from_entries(
        [
            d + 2.0 * cc * a * x + f2 * x * x,
            s01 - k2,
            s02 + k1,
            s01 + k2,
            d + 2.0 * cc * b * y + f2 * y * y,
            s12 - k0,
            s02 - k1,
            s12 + k0,
            d + 2.0 * cc * c * z + f2 * z * z,
        ],
        3,
        3,
    )


def se3_left_jacobian(xi: Tensor) -> Tensor:
    """``J_l(ξ) = [[J_l(ω), 0], [Q(ξ), J_l(ω)]]`` (..., 6, 6) for ξ = [ω; v] (Barfoot eq. (7.85)).

    Args:
        xi: twist ξ = [ω; v] (..., 6) [rad, m].

    Returns:
        ``J_l(ξ)`` (..., 6, 6).
    """
    J = entries(so3_left_jacobian(xi[..., :3]))
    return blocks6(J, entries(se3_q_matrix(xi)), J, False)


def se3_left_jacobian_inv(xi: Tensor) -> Tensor:
    """``J_l⁻¹(ξ) = [[J⁻¹, 0], [-J⁻¹ Q J⁻¹, J⁻¹]]`` (..., 6, 6), J = J_l(ω) (Barfoot eq. (7.95)).

    Args:
        xi: twist ξ = [ω; v] (..., 6) [rad, m], |ω| < 2π.

    Returns:
        ``J_l⁻¹(ξ)`` (..., 6, 6).
    """
    Ji = so3_left_jacobian_inv(xi[..., :3])
    e = entries(Ji)
    return blocks6(e, entries(-Ji @ se3_q_matrix(xi) @ Ji), e, False)


def se3_right_jacobian(xi: Tensor) -> Tensor:
    """``J_r(ξ) = J_l(-ξ)`` (..., 6, 6).

    Args:
        xi: twist ξ = [ω; v] (..., 6) [rad, m].

    Returns:
        ``J_r(ξ)`` (..., 6, 6).
    """
    return se3_left_jacobian(-xi)


def se3_right_jacobian_inv(xi: Tensor) -> Tensor:
    """``J_r⁻¹(ξ) = J_l⁻¹(-ξ)`` (..., 6, 6).

    Args:
        xi: twist ξ = [ω; v] (..., 6) [rad, m], |ω| < 2π.

    Returns:
        ``J_r⁻¹(ξ)`` (..., 6, 6).
    """
    return se3_left_jacobian_inv(-xi)
