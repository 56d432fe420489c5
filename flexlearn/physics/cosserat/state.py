"""Rod states, recorded trajectories and base conditions (seed 001, Sec. 2): :class:`RodState`,
:class:`Trajectory`, :class:`Clamp` and the ``FREE`` base. Units: SI; rotations map body → world, the body
z-axis ``E3`` is the rest tangent of the rod."""

from __future__ import annotations

import dataclasses
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
    ``(step, step halvings)``, empty when the plain Newton converged everywhere.
    """

    positions: Tensor
    rotations: Tensor
    times: Tensor
    energy: Optional[Tensor] = None
    final: Optional[RodState] = None
    line_searches: List[Tuple[int, int]] = dataclasses.field(default_factory=list)

    @property
    def tip(self) -> Tensor:
        """Tip positions (T, [B,] 3) [m]."""
        return self.positions[..., -1, :]


class Clamp:
    """Clamped base: node 0 held at ``position`` (3,) with ``rotation`` (3, 3) (body z = rod axis).

    ``motion(t) -> (rotation, position)`` prescribes a base motion instead (both (3, 3)/(3,) or
    batched); node 0 then follows it exactly and the rest of the rod is driven through the elements.
    """

    def __init__(
        self,
        position: Number = (0.0, 0.0, 0.0),
        rotation: Optional[Union[Sequence[Sequence[float]], Tensor]] = None,
        motion: Optional[Callable[[float], Tuple[Tensor, Tensor]]] = None,
    ):
        self.position = torch.as_tensor(position, dtype=torch.float64)
        check(self.position.shape[-1:] == (3,), "Clamp.position", tuple(self.position.shape), "expected (3,)")
        # a rotation written to a few digits (a file, a CAD tool) is replaced by the nearest one (rotations.py)
        self.rotation = (
            torch.eye(3, dtype=torch.float64) if rotation is None else orthonormalised(rotation, "Clamp.rotation")
        )
        self.motion = motion

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
        """The base pose at time ``t``.

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


FREE = "free"
"""The ``base`` of a free rod (no clamp)."""
