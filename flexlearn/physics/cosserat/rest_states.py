"""States of a rod at rest, built from its rest lengths and a base clamp: straight along the base's body z-axis
(:func:`straight_state`) or bent on a circular arc (:func:`arc_state`, the initial deflection of seed 001, Sec. 4).
The methods :meth:`CosseratRod.straight_state <flexlearn.physics.cosserat.rod.CosseratRod.straight_state>` and
:meth:`~flexlearn.physics.cosserat.rod.CosseratRod.arc_state` call these.

Shapes: every state (B, N+1, …) for B rods of N elements; SI units.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from flexlearn.lie import so3_exp
from flexlearn.physics.cosserat.state import E3, Clamp, RodState


def _arclengths(rod: Any, base: Optional[Clamp], dtype: torch.dtype) -> Tuple[Tensor, Tensor, Tensor]:
    """The base's frame r0 (3, 3) and position p0 (3,) at t = 0, and the nodes' rest arc lengths s (B, N+1) [m]."""
    base = base if isinstance(base, Clamp) else Clamp()
    dev = rod.length.device
    r0, p0 = base.pose(0.0, dtype, dev)
    lengths = rod.rest_lengths().to(dtype)
    s = torch.cat([torch.zeros(rod.batch_size, 1, dtype=dtype, device=dev), torch.cumsum(lengths, -1)], -1)
    return r0, p0, s


def _at_rest(positions: Tensor, rotations: Tensor) -> RodState:
    """A :class:`RodState` of these poses with zero velocities."""
    z = torch.zeros_like(positions)
    return RodState(positions, rotations, z, z.clone())


def straight_state(rod: Any, base: Optional[Clamp] = None, dtype: torch.dtype = torch.float64) -> RodState:
    """The rest configuration: nodes on the base's body z-axis, every frame equal to the base frame.

    Args:
        rod: the :class:`~flexlearn.physics.cosserat.rod.CosseratRod`.
        base: the clamp; None for a clamp at the origin with the identity frame.
        dtype: dtype of the state's tensors.

    Returns:
        The :class:`RodState`, (B, N+1, …), with zero velocities.
    """
    r0, p0, s = _arclengths(rod, base, dtype)
    B, n = rod.batch_size, rod.n_nodes
    pos = p0.unsqueeze(-2) + s.unsqueeze(-1) * r0[..., :, 2].unsqueeze(-2)
    rot = r0.expand(B, n, 3, 3) if r0.dim() == 2 else r0.unsqueeze(-3).expand(B, n, 3, 3)
    return _at_rest(pos.expand(B, n, 3).clone(), rot.clone())


def arc_state(
    rod: Any,
    tip_angle: Union[float, Tensor],
    bend_axis: Union[Sequence[float], Tensor] = (1.0, 0.0, 0.0),
    base: Optional[Clamp] = None,
    dtype: torch.dtype = torch.float64,
) -> RodState:
    """A circular arc of constant curvature about the body axis ``bend_axis`` (base frame) whose tip is turned by
    ``tip_angle`` [rad], at rest; the positions integrate the tangent R(s) e3 along the arc in closed form,
    ``∫₀ˢ exp(k σ a^) e3 dσ = s e3 + (1 − cos ks)/k (a × e3) + (s − sin ks / k) (a × (a × e3))``.

    Args:
        rod: the :class:`~flexlearn.physics.cosserat.rod.CosseratRod`.
        tip_angle: tip rotation angle [rad].
        bend_axis: bending axis in the base frame, shape (3,) (normalised here).
        base: the clamp; None for a clamp at the origin with the identity frame.
        dtype: dtype of the state's tensors.

    Returns:
        The :class:`RodState`, (B, N+1, …), with zero velocities.
    """
    r0, p0, s = _arclengths(rod, base, dtype)
    ax = torch.as_tensor(bend_axis).to(s)
    ax = ax / ax.norm()
    L = s[:, -1:]
    rots = so3_exp((tip_angle * s / L).unsqueeze(-1) * ax)  # body-frame rotations (B, N+1, 3, 3)
    e3 = torch.tensor(E3, dtype=dtype, device=s.device)
    if abs(float(tip_angle)) < 1e-12:
        local = s.unsqueeze(-1) * e3
    else:
        k = tip_angle / L  # curvature (B, 1) [1/m]
        ks = k * s
        axe = torch.linalg.cross(ax, e3)
        aaxe = torch.linalg.cross(ax, axe)
        local = (
            s.unsqueeze(-1) * e3
            + ((1 - torch.cos(ks)) / k).unsqueeze(-1) * axe
            + (s - torch.sin(ks) / k).unsqueeze(-1) * aaxe
        )
    return _at_rest(p0 + (r0 @ local.unsqueeze(-1)).squeeze(-1), r0 @ rots)
