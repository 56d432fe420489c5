"""SE(2): planar poses (..., 3, 3), twists ξ = [ω; vx; vy] (..., 3) (angular first, rad and m).

Used by the flexible-link kinematics of seed 000 (flexibility-aware kinematics on SE(2)).
Formulas: Sola et al., "A micro Lie theory", Sec. A.4 (eqs. (156)-(160)), reordered to [ω; v].
"""

from typing import List

import torch
from torch import Tensor

from flexlearn.lie.series import cosc, cotc, sinc


def _pose(c: Tensor, s: Tensor, px: Tensor, py: Tensor) -> Tensor:
    o = torch.zeros_like(c)
    shape: List[int] = list(c.shape) + [3, 3]
    return torch.stack([c, -s, px, s, c, py, o, o, torch.ones_like(c)], -1).reshape(shape)


def se2_hat(xi: Tensor) -> Tensor:
    """``ξ^ = [[0, -ω, vx], [ω, 0, vy], [0, 0, 0]]`` (..., 3, 3).

    Args:
        xi: twist ξ = [ω; vx; vy] (..., 3), angular part first.

    Returns:
        ``ξ^`` (..., 3, 3).
    """
    w, vx, vy = xi[..., 0], xi[..., 1], xi[..., 2]
    o = torch.zeros_like(w)
    shape: List[int] = list(w.shape) + [3, 3]
    return torch.stack([o, -w, vx, w, o, vy, o, o, o], -1).reshape(shape)


def se2_vee(X: Tensor) -> Tensor:
    """Inverse of :func:`se2_hat`: ``[X10, X02, X12]`` (..., 3).

    Args:
        X: Lie algebra matrices (..., 3, 3), of the form of :func:`se2_hat`.

    Returns:
        ξ = [ω; vx; vy] (..., 3).
    """
    return torch.stack([X[..., 1, 0], X[..., 0, 2], X[..., 1, 2]], -1)


def se2_exp(xi: Tensor) -> Tensor:
    """``exp(ξ^) = [[R(ω), V v], [0, 1]]``, ``V = [[A, -ω B], [ω B, A]]`` (Sola eq. (158)).

    A = sin ω/ω, B = (1 - cos ω)/ω² (series branches at ω → 0).

    Args:
        xi: twist ξ = [ω; vx; vy] (..., 3) [rad, m, m].

    Returns:
        The pose ``exp(ξ^)`` (..., 3, 3).
    """
    w, vx, vy = xi[..., 0], xi[..., 1], xi[..., 2]
    t2 = w * w
    a = sinc(t2)
    wb = w * cosc(t2)
    c = torch.cos(w)
    s = torch.sin(w)
    return _pose(c, s, a * vx - wb * vy, wb * vx + a * vy)


def se2_log(T: Tensor) -> Tensor:
    """``ω = atan2(R10, R00)`` ∈ (-π, π], ``v = V⁻¹ p`` with ``V⁻¹ = [[h, ω/2], [-ω/2, h]]`` (..., 3).

    ``h = (ω/2) cot(ω/2) = 1 - ω² D(ω)`` (D from ``_series.cotc``), finite up to |ω| = π.

    Args:
        T: poses (..., 3, 3), translation [m].

    Returns:
        ξ = [ω; vx; vy] (..., 3) [rad, m, m], ω ∈ (-π, π].
    """
    w = torch.atan2(T[..., 1, 0], T[..., 0, 0])
    h = 1.0 - w * w * cotc(w * w)
    px, py = T[..., 0, 2], T[..., 1, 2]
    half = 0.5 * w
    return torch.stack([w, h * px + half * py, -half * px + h * py], -1)


def se2_inverse(T: Tensor) -> Tensor:
    """``T⁻¹ = [[Rᵀ, -Rᵀ p], [0, 1]]`` (..., 3, 3).

    Args:
        T: poses (..., 3, 3).

    Returns:
        ``T⁻¹`` (..., 3, 3).
    """
    c, s = T[..., 0, 0], T[..., 1, 0]
    px, py = T[..., 0, 2], T[..., 1, 2]
    return _pose(c, -s, -(c * px + s * py), s * px - c * py)


def se2_adjoint(T: Tensor) -> Tensor:
    """``Ad_T = [[1, 0, 0], [py, R00, R01], [-px, R10, R11]]`` (..., 3, 3): ``Ad_T ξ = (T ξ^ T⁻¹)ᵛ``.

    Args:
        T: poses (..., 3, 3).

    Returns:
        ``Ad_T`` (..., 3, 3).
    """
    c, s = T[..., 0, 0], T[..., 1, 0]
    px, py = T[..., 0, 2], T[..., 1, 2]
    o = torch.zeros_like(c)
    shape: List[int] = list(c.shape) + [3, 3]
    return torch.stack([torch.ones_like(c), o, o, py, c, -s, -px, s, c], -1).reshape(shape)


def se2_ad(xi: Tensor) -> Tensor:
    """``ad_ξ = [[0, 0, 0], [vy, 0, -ω], [-vx, ω, 0]]`` (..., 3, 3): ``ad_ξ η = [ξ^, η^]ᵛ``.

    Args:
        xi: twist ξ = [ω; vx; vy] (..., 3), angular part first.

    Returns:
        ``ad_ξ`` (..., 3, 3).
    """
    w, vx, vy = xi[..., 0], xi[..., 1], xi[..., 2]
    o = torch.zeros_like(w)
    shape: List[int] = list(w.shape) + [3, 3]
    return torch.stack([o, o, o, vy, o, -w, -vx, w, o], -1).reshape(shape)
