"""Flexibility-aware planar forward kinematics on SE(2) (seed 000, §IV).

Frames (seed 000, Fig. 4): W the world (x horizontal, y up in the plane of motion; the seed's
(y_EE, z_EE)), B_i at the base of link i, T_i at its deformed tip. With the small-deformation
assumption (seed 000, §IV: |w(L)|/L ≪ 1, max|w′| ≪ 1; axial shortening neglected)

    ^{T_{i−1}}G_{B_i} = [[R(θ_i), 0], [0, 1]]                    (joint rotation, §IV)
    ^{B_i}G_{T_i}     = [[R(w′_i(L_i)), (L_i, w_i(L_i))ᵀ], [0, 1]]  (deformed link)
    ^W G_{T_n}        = ^W G_{T_0} ∏_i ^{T_{i−1}}G_{B_i} ^{B_i}G_{T_i}.

The text of the seed loses the explicit form of ``^{B_i}G_{T_i}``; it is re-derived here (tip origin at
(L, w(L)) in B_i, tip tangent rotated by w′(L)).

Baselines: *rigid* (w = w′ = 0) and *piecewise rigid* (each link a chain of rigid segments whose absolute
inclinations are the IMU angles, as in the seed's ref. [40]).

All functions are batched over leading dimensions, float64, and use :mod:`flexlearn.lie` for SE(2).
"""

from typing import Optional

import torch
from torch import Tensor, nn

from flexlearn.lie import se2_exp

__all__ = [
    "joint_transform",
    "link_transform",
    "forward_kinematics",
    "pose_to_xytheta",
    "rigid_forward_kinematics",
    "piecewise_rigid_forward_kinematics",
    "PlanarFlexibleKinematics",
]


def _xi(w: Tensor, vx: Tensor, vy: Tensor) -> Tensor:
    return torch.stack([w, vx, vy], -1)


def joint_transform(theta: Tensor) -> Tensor:
    """``^{T_{i−1}}G_{B_i}``: pure rotation by θ [rad] (..., 3, 3) (seed 000, §IV).

    Args:
        theta: joint angles θ (...) [rad].

    Returns:
        The SE(2) transform (..., 3, 3).
    """
    z = torch.zeros_like(theta)
    return se2_exp(_xi(theta, z, z))


def link_transform(length: Tensor, tip_deflection: Tensor, tip_slope: Tensor) -> Tensor:
    """``^{B_i}G_{T_i}``: translation (L, w(L)) then rotation w′(L) (..., 3, 3).

    Args:
        length: link length L [m] (broadcast to the deflection's shape).
        tip_deflection: w(L) (...) [m].
        tip_slope: w′(L) (...) [rad].

    Returns:
        The SE(2) transform (..., 3, 3).
    """
    length = torch.as_tensor(length, dtype=tip_deflection.dtype).expand_as(tip_deflection)
    z = torch.zeros_like(tip_deflection)
    return se2_exp(_xi(z, length, tip_deflection)) @ se2_exp(_xi(tip_slope, z, z))


def forward_kinematics(
    theta: Tensor,
    lengths: Tensor,
    tip_deflection: Optional[Tensor] = None,
    tip_slope: Optional[Tensor] = None,
    base: Optional[Tensor] = None,
) -> Tensor:
    """``^W G_{T_n}`` (..., 3, 3) from joint angles, link lengths, tip deflections and tip slopes.

    Args:
        theta: joint angles θ (..., n) [rad].
        lengths: link lengths (n,) [m].
        tip_deflection: tip deflections w_i(L_i) (..., n) [m]; None: zero (rigid links).
        tip_slope: tip slopes w′_i(L_i) (..., n) [rad]; None: zero.
        base: ``^W G_{T_0}`` (3, 3); None: identity.

    Returns:
        The end-effector pose ``^W G_{T_n}`` (..., 3, 3).
    """
    n = theta.shape[-1]
    lengths = torch.as_tensor(lengths, dtype=theta.dtype)
    w = torch.zeros_like(theta) if tip_deflection is None else tip_deflection
    s = torch.zeros_like(theta) if tip_slope is None else tip_slope
    G = (
        torch.eye(3, dtype=theta.dtype).expand(theta.shape[:-1] + (3, 3))
        if base is None
        else base.to(theta.dtype).expand(theta.shape[:-1] + (3, 3))
    )
    for i in range(n):
        G = G @ joint_transform(theta[..., i]) @ link_transform(lengths[i], w[..., i], s[..., i])
    return G


def pose_to_xytheta(G: Tensor) -> Tensor:
    """(x, y, angle) (..., 3) [m, m, rad] of an SE(2) pose (angle by atan2, in (−π, π]).

    Args:
        G: SE(2) poses (..., 3, 3), translation [m].

    Returns:
        ``(x, y, angle)`` (..., 3) [m, m, rad].
    """
    return torch.stack([G[..., 0, 2], G[..., 1, 2], torch.atan2(G[..., 1, 0], G[..., 0, 0])], -1)


def rigid_forward_kinematics(theta: Tensor, lengths: Tensor, base: Optional[Tensor] = None) -> Tensor:
    """Rigid baseline: joint angles only (seed 000, §VI-C "Rigid").

    Args:
        theta: joint angles θ (..., n) [rad].
        lengths: link lengths (n,) [m].
        base: ``^W G_{T_0}`` (3, 3); None: identity.

    Returns:
        The end-effector pose (..., 3, 3).
    """
    return forward_kinematics(theta, lengths, None, None, base)


def piecewise_rigid_forward_kinematics(
    segment_angles: Tensor, segment_lengths: Tensor, base: Optional[Tensor] = None
) -> Tensor:
    """Piecewise-rigid baseline (seed 000, §VI-B/C, ref. [40]): a chain of rigid segments.

    The end-effector orientation is the last segment's inclination.

    Args:
        segment_angles: absolute (world) inclinations ψ_k from one IMU each, (..., K) [rad].
        segment_lengths: segment lengths (K,) [m].
        base: ``^W G_{T_0}`` (3, 3); None: identity.

    Returns:
        The end-effector pose (..., 3, 3).
    """
    K = segment_angles.shape[-1]
    seg = torch.as_tensor(segment_lengths, dtype=segment_angles.dtype)
    G = (
        torch.eye(3, dtype=segment_angles.dtype).expand(segment_angles.shape[:-1] + (3, 3))
        if base is None
        else base.to(segment_angles.dtype).expand(segment_angles.shape[:-1] + (3, 3))
    )
    prev = torch.zeros_like(segment_angles[..., 0])
    z = torch.zeros_like(prev)
    for k in range(K):
        rel = segment_angles[..., k] - prev  # relative rotation between consecutive segments
        G = G @ se2_exp(_xi(rel, z, z)) @ se2_exp(_xi(z, seg[k].expand_as(z), z))
        prev = segment_angles[..., k]
    return G


class PlanarFlexibleKinematics(nn.Module):
    """Scriptable closed form of :func:`forward_kinematics` (identical result, no 3×3 products).

    Buffer ``lengths`` (n,) [m]. ``forward(theta, w_tip, slope_tip)`` (..., n) each → (x, y, angle)
    (..., 3). Base frame = world. Absolute base angle of link i: ``Σ_{k≤i} θ_k + Σ_{k<i} w′_k``;
    tip position ``Σ_i R(φ_i)(L_i, w_i)``; end-effector angle ``Σ θ + Σ w′``.
    """

    # runtime annotation (no ``from __future__ import annotations`` here: TorchScript reads it)
    lengths: Tensor

    def __init__(self, lengths: Tensor) -> None:
        super().__init__()
        self.register_buffer("lengths", torch.as_tensor(lengths, dtype=torch.float64).reshape(-1))

    def forward(self, theta: Tensor, w_tip: Tensor, slope_tip: Tensor) -> Tensor:
        """End-effector (x, y, angle) (..., 3) [m, m, rad] by the closed form in the class docstring.

        Args:
            theta: joint angles θ (..., n) [rad].
            w_tip: tip deflections w_i(L_i) (..., n) [m].
            slope_tip: tip slopes w′_i(L_i) (..., n) [rad].

        Returns:
            ``(x, y, angle)`` (..., 3), the angle wrapped to (−π, π].
        """
        phi = torch.cumsum(theta, -1) + torch.cumsum(slope_tip, -1) - slope_tip
        c, s = torch.cos(phi), torch.sin(phi)
        x = (c * self.lengths - s * w_tip).sum(-1)
        y = (s * self.lengths + c * w_tip).sum(-1)
        ang = phi[..., -1] + slope_tip[..., -1]
        return torch.stack([x, y, torch.atan2(torch.sin(ang), torch.cos(ang))], -1)
