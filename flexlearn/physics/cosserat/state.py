"""Rod states, recorded trajectories and supports (seed 001, Sec. 2): :class:`RodState`, :class:`Trajectory`,
the supports :class:`Clamp` and :class:`Pin`, and the ``FREE`` base. Units: SI; rotations map body → world, the
body z-axis ``E3`` is the rest tangent of the rod."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.rotations import orthonormalised

Number = Union[float, int, Sequence[float], Tensor]
E3 = (0.0, 0.0, 1.0)
"""The body tangent ``E3``: the rest direction of the rod axis in every node frame (body z)."""


class Pose(NamedTuple):
    """A rigid pose: ``rotation`` (…, 3, 3) body → world and ``position`` (…, 3) [m]."""

    rotation: Tensor
    position: Tensor


@dataclasses.dataclass
class RodState:
    """Configuration and velocities at one time.

    positions (B, N+1, 3) [m]; rotations (B, N+1, 3, 3) body → world; velocities (B, N+1, 3) [m/s] (world);
    angular_velocities (B, N+1, 3) [rad/s] (body frame); time [s]; step index.
    """

    positions: Tensor
    rotations: Tensor
    velocities: Tensor
    angular_velocities: Tensor
    time: float = 0.0
    step: int = 0

    def detach(self) -> "RodState":
        """The same state with every tensor detached from the autograd graph."""
        return RodState(
            self.positions.detach(),
            self.rotations.detach(),
            self.velocities.detach(),
            self.angular_velocities.detach(),
            self.time,
            self.step,
        )


@dataclasses.dataclass
class Trajectory:
    """Recorded simulation: positions (T, [B,] N+1, 3), rotations (T, [B,] N+1, 3, 3), times (T,).

    The batch dimension is present only for a batched rod (parameters given as 1-D tensors). ``energy``
    (T, [B]) total mechanical energy when ``record_energy=True``; ``final`` the last :class:`RodState`;
    ``line_searches`` the steps whose rotation update needed the globalised Cayley–Newton (tensor path):
    ``(step, step halvings)``, empty when the plain Newton converged everywhere. ``reactions`` (T, [B,] S, 6):
    the force [N] (first three) and moment [N m] (last three), world frame, that each of the S supports
    (:class:`Clamp`, :class:`Pin`, in the order ``base`` lists them) exerts on its node at the
    recorded states (None without supports, or on the fused kernel, which holds only a fixed base clamp).
    """

    positions: Tensor
    rotations: Tensor
    times: Tensor
    energy: Optional[Tensor] = None
    final: Optional[RodState] = None
    line_searches: List[Tuple[int, int]] = dataclasses.field(default_factory=list)
    reactions: Optional[Tensor] = None

    @property
    def tip(self) -> Tensor:
        """Tip positions (T, [B,] 3) [m]."""
        return self.positions[..., -1, :]


class Clamp:
    """A clamped node: its position and frame held at ``position`` (3,) and ``rotation`` (3, 3) (body z = rod
    axis), or driven.

    ``motion(t) -> (rotation, position)`` prescribes the node's pose over time instead (both (3, 3)/(3,) or
    batched); the node then follows it exactly and the rest of the rod is driven through the elements.
    ``node`` is the node held (0, the base, by default; −1 the last node). ``slides_along`` (3,), a world
    direction, frees the position along that direction: the node slides along it under the forces on it
    (a tensioned end that is turned), while its frame and its position across the direction stay held.

    Args:
        position: held position [m], shape (3,).
        rotation: held frame (3, 3), body → world (None: identity); orthonormalised.
        motion: prescribed pose over time (overrides ``position`` and ``rotation`` after t = 0).
        node: the node index (negative counts from the last node).
        slides_along: world direction (3,) along which the node is free (None: held in all directions).

    Raises:
        ConfigError: a position that is not (3,), a rotation far from orthonormal, a zero or non-finite
            ``slides_along``, a non-integer node.
    """

    holds_rotation = True

    def __init__(
        self,
        position: Number = (0.0, 0.0, 0.0),
        rotation: Optional[Union[Sequence[Sequence[float]], Tensor]] = None,
        motion: Optional[Callable[[float], Tuple[Tensor, Tensor]]] = None,
        node: int = 0,
        slides_along: Optional[Number] = None,
    ):
        self.position = torch.as_tensor(position, dtype=torch.float64)
        check(self.position.shape[-1:] == (3,), "Clamp.position", tuple(self.position.shape), "expected (3,)")
        # a rotation written to a few digits (a file, a CAD tool) is replaced by the nearest one (rotations.py)
        self.rotation = (
            torch.eye(3, dtype=torch.float64) if rotation is None else orthonormalised(rotation, "Clamp.rotation")
        )
        self.motion = motion
        self.node = _node_index(node, "Clamp.node")
        self.slides_along = None if slides_along is None else _unit_axis(slides_along, "Clamp.slides_along")

    @classmethod
    def horizontal(cls, position: Number = (0.0, 0.0, 0.0)) -> "Clamp":
        """Rod axis along world +x (body z → world x), body y → world y: a horizontal cantilever under
        gravity (0, 0, −g) bends in the world xz-plane.

        Args:
            position: Clamp position [m], shape (3,).

        Returns:
            The :class:`Clamp`.
        """
        r = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
        return cls(position, r)

    def pose(self, t: float, dtype: torch.dtype, device: Optional[torch.device] = None) -> Pose:
        """The held pose at time ``t``.

        Args:
            t: time [s] (read only by a prescribed ``motion``).
            dtype: dtype of the returned tensors.
            device: their device (None: the default).

        Returns:
            :class:`Pose`: rotation (3, 3) (or batched), position (3,) [m].
        """
        if self.motion is None:
            return Pose(self.rotation.to(dtype=dtype, device=device), self.position.to(dtype=dtype, device=device))
        r, p = self.motion(t)
        return Pose(
            torch.as_tensor(r).to(dtype=dtype, device=device), torch.as_tensor(p).to(dtype=dtype, device=device)
        )


class Pin:
    """A pinned node: its position held at ``position`` (3,) (or driven by ``motion(t) -> position``), its
    rotation free (a ball joint: the node carries no moment from the support).

    Args:
        position: held position [m], shape (3,); None: where the node starts.
        node: the node index (0 the base; negative counts from the last node).
        motion: prescribed position over time [m] (overrides ``position`` after t = 0).

    Raises:
        ConfigError: a position that is not (3,), a non-integer node.
    """

    holds_rotation = False
    slides_along = None

    def __init__(
        self,
        position: Optional[Number] = None,
        node: int = 0,
        motion: Optional[Callable[[float], Tensor]] = None,
    ):
        self.position = None if position is None else torch.as_tensor(position, dtype=torch.float64)
        if self.position is not None:
            check(self.position.shape[-1:] == (3,), "Pin.position", tuple(self.position.shape), "expected (3,)")
        self.node = _node_index(node, "Pin.node")
        self.motion = motion

    def pose(self, t: float, dtype: torch.dtype, device: Optional[torch.device] = None) -> Optional[Tensor]:
        """The held position [m] at time ``t`` (None: where the node started, for a pin without a position).

        Args:
            t: time [s] (read only by a prescribed ``motion``).
            dtype: dtype of the returned tensor.
            device: its device (None: the default).

        Returns:
            The position (3,) (or batched), or None.
        """
        if self.motion is not None:
            return torch.as_tensor(self.motion(t)).to(dtype=dtype, device=device)
        return None if self.position is None else self.position.to(dtype=dtype, device=device)


Support = Union[Clamp, Pin]
"""A held node: :class:`Clamp` (position and frame) or :class:`Pin` (position only)."""


def _node_index(node: int, name: str) -> int:
    """``node`` checked as an integer (negative: from the last node)."""
    check(isinstance(node, int) and not isinstance(node, bool), name, node, "must be an integer node index")
    return int(node)


def _unit_axis(axis: Number, name: str) -> Tensor:
    """``axis`` (3,) normalised; a ConfigError for a zero or non-finite one."""
    a = torch.as_tensor(axis, dtype=torch.float64)
    norm = float(a.norm()) if a.shape == (3,) else 0.0
    check(a.shape == (3,) and math.isfinite(norm) and norm > 0, name, tuple(a.tolist()), "must be a non-zero (3,)")
    return a / norm


FREE = "free"
"""The ``base`` of a free rod (no clamp)."""
