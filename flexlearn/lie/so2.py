"""SO(2): planar rotations. Angles are (..., 1) tangent vectors (rad), matrices (..., 2, 2)."""

from typing import List

import torch
from torch import Tensor


def so2_hat(theta: Tensor) -> Tensor:
    """``θ^ = [[0, -θ], [θ, 0]]`` (..., 2, 2) from θ (..., 1).

    Args:
        theta: angles θ (..., 1) [rad].

    Returns:
        ``θ^`` (..., 2, 2).
    """
    t = theta[..., 0]
    o = torch.zeros_like(t)
    shape: List[int] = list(t.shape) + [2, 2]
    return torch.stack([o, -t, t, o], -1).reshape(shape)


def so2_vee(W: Tensor) -> Tensor:
    """Inverse of :func:`so2_hat`: ``W[1, 0]`` as (..., 1).

    Args:
        W: skew matrices (..., 2, 2).

    Returns:
        θ (..., 1).
    """
    return W[..., 1, 0].unsqueeze(-1)


def so2_exp(theta: Tensor) -> Tensor:
    """``[[cos θ, -sin θ], [sin θ, cos θ]]`` (..., 2, 2) from θ (..., 1).

    Args:
        theta: angles θ (..., 1) [rad].

    Returns:
        The rotation matrices (..., 2, 2).
    """
    t = theta[..., 0]
    c = torch.cos(t)
    s = torch.sin(t)
    shape: List[int] = list(t.shape) + [2, 2]
    return torch.stack([c, -s, s, c], -1).reshape(shape)


def so2_log(R: Tensor) -> Tensor:
    """``θ = atan2(R10, R00)`` ∈ (-π, π] as (..., 1); exact at π (θ = +π), no branch needed.

    Args:
        R: rotation matrices (..., 2, 2).

    Returns:
        θ (..., 1) [rad], in (-π, π].
    """
    return torch.atan2(R[..., 1, 0], R[..., 0, 0]).unsqueeze(-1)
