"""Reference trajectory of the arm controller: the quintic reach of seed 000, §VI-D."""

from typing import Tuple

import torch
from torch import Tensor

__all__ = ["quintic"]


def quintic(t: Tensor, theta0: Tensor, thetaf: Tensor, t0: float, duration: float) -> Tuple[Tensor, Tensor, Tensor]:
    """Quintic reaching trajectory of seed 000, §VI-D.

    Args:
        t: time(s) [s], (...,) or a scalar, broadcast against the joint dimension (last) of ``theta0``.
        theta0: start angles θ₀ [rad].
        thetaf: end angles θ_f [rad].
        t0: start of the motion [s].
        duration: its length T [s].

    Returns:
        θ_d [rad], θ̇_d [rad/s], θ̈_d [rad/s²].
    """
    sig = torch.clamp((t - t0) / duration, 0.0, 1.0)
    d = thetaf - theta0
    s2 = sig * sig
    s3 = s2 * sig
    pos = theta0 + d * (10.0 * s3 - 15.0 * s3 * sig + 6.0 * s3 * s2)
    vel = d * (30.0 * s2 - 60.0 * s3 + 30.0 * s2 * s2) / duration
    acc = d * (60.0 * sig - 180.0 * s2 + 120.0 * s3) / (duration * duration)
    return pos, vel, acc
