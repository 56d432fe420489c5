"""Setting a rod up where it is: a rod's initial state from a polyline (its centreline) and a normal, clamps in
any orientation, and the element directors of a recorded trajectory. SI units; rotations map body → world with
the body z-axis ``E3`` along the rod (:mod:`flexlearn.physics.cosserat.state`).

    line = Polyline([[0, 0, 0], [0.5, 0, 0], [0.5, 0.5, 0]], normal=(0, 0, 1))
    rod = CosseratRod.circular(line.length, 0.01, Material(1000.0, 1e6, shear_modulus=1e6 / 3), 20)
    tr = rod.simulate(1.0, 1e-4, initial=line.state(rod), base=line.clamp(rod))

Frames from a centreline (:meth:`Polyline.frames`): N+1 nodes at equal rest arc length along the polyline
(linear interpolation between its points); the element tangents ``t_i = (x_{i+1} − x_i)/|x_{i+1} − x_i|``;
the element directors ``d1_i``: ``normal`` projected perpendicular to ``t_0``, then carried from element to
element by the smallest rotation taking ``t_{i−1}`` to ``t_i`` (parallel transport: a bent rod starts untwisted);
the element frame ``E_i = [d1_i, t_i × d1_i, t_i]``. A node frame is the half-way rotation between the frames of
its two elements, ``R_a = E_{a−1} exp(½ log(E_{a−1}ᵀ E_a))``, and an end node turns on by the same half step as
its neighbour (``R_0 = E_0 exp(−½ log(E_0ᵀ E_1))``): for a circular arc the node frames are then the arc's exact
frames, and each element's mean frame ``½ (R_i + R_{i+1})`` is tangent to its chord (no shear strain; the
mid-frame strain reads an axial strain cos(θ/2) − 1 ≈ −θ²/8 for an element turning by θ). A straight polyline
gives the rod's rest state exactly.

A clamp in any orientation (:func:`clamp_at`): from a direction and a normal, or from a rotation matrix orthonormal
to within :data:`~flexlearn.physics.cosserat.rotations.ORTHONORMAL_TOL` (replaced by the nearest rotation,
:func:`~flexlearn.physics.cosserat.rotations.orthonormalised`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.lie import so3_exp
from flexlearn.physics.cosserat.rotations import Vector, frame, half_rotation, orthonormalised, vector3
from flexlearn.physics.cosserat.state import Clamp, RodState


def clamp_at(
    position: Vector = (0.0, 0.0, 0.0),
    tangent: Optional[Vector] = None,
    normal: Optional[Vector] = None,
    rotation: Optional[Union[Sequence[Sequence[float]], Tensor]] = None,
) -> Clamp:
    """A :class:`~flexlearn.physics.cosserat.state.Clamp` in any orientation: from the rod direction
    ``tangent`` (and ``normal``, the body x direction, :func:`~flexlearn.physics.cosserat.rotations.frame`), or from a
    ``rotation`` orthonormal to within :data:`~flexlearn.physics.cosserat.rotations.ORTHONORMAL_TOL`
    (:func:`~flexlearn.physics.cosserat.rotations.orthonormalised`); neither: the identity (rod along world z).

    Args:
        position: (3,) clamped node position [m].
        tangent: (3,) rod direction at the clamp.
        normal: (3,) body x direction (with ``tangent``).
        rotation: (3, 3) body → world rotation (instead of ``tangent``).

    Returns:
        The clamp.

    Raises:
        ConfigError: naming ``position``, ``tangent``, ``normal`` or ``rotation``.
    """
    check(tangent is None or rotation is None, "rotation", "given with tangent", "give a tangent or a rotation")
    if rotation is not None:
        r = orthonormalised(rotation, "rotation")
    elif tangent is not None:
        r = frame(tangent, normal)
    else:
        r = torch.eye(3, dtype=torch.float64)
    return Clamp(vector3(position, "position"), r)


@dataclasses.dataclass(frozen=True)
class Polyline:
    """A rod's initial centreline: ``points`` (M, 3) [m], M ≥ 2, and the ``normal`` that sets the body x axis of the
    first element (not parallel to it). ``rest_arc`` (M,) [m], from 0 and increasing: the unstretched distance
    along the rod to each point, for a rod that starts stretched (None: the polyline's own lengths).

    The node frames are those of the module docstring; :meth:`state` and :meth:`clamp` take the rod, whose length
    must equal :attr:`length`.
    """

    points: Union[Sequence[Sequence[float]], Tensor]
    normal: Vector = (0.0, 0.0, 1.0)
    rest_arc: Optional[Vector] = None

    def __post_init__(self) -> None:
        """Check the points, the normal and the rest arc (a ConfigError naming the first bad one)."""
        self.arc()

    def point_array(self) -> Tensor:
        """(M, 3) the points, float64, checked.

        Returns:
            The points.

        Raises:
            ConfigError: naming ``points`` or ``points[i]`` (shape, non-finite, a repeated point).
        """
        p = torch.as_tensor(self.points, dtype=torch.float64)
        check(p.dim() == 2 and p.shape[1] == 3 and p.shape[0] >= 2, "points", tuple(p.shape), "expected (M >= 2, 3)")
        for i, row in enumerate(p.tolist()):
            check(all(math.isfinite(v) for v in row), f"points[{i}]", row, "must be finite")
        seg = (p[1:] - p[:-1]).norm(dim=-1)
        for i, s in enumerate(seg.tolist()):
            check(s > 0, f"points[{i + 1}]", p[i + 1].tolist(), f"repeats points[{i}]: segments must have length > 0")
        return p

    def arc(self) -> Tensor:
        """(M,) rest arc length to each point [m] (``rest_arc``, else the polyline's cumulative lengths).

        Returns:
            The arc lengths.

        Raises:
            ConfigError: naming ``points``, ``normal`` or ``rest_arc``.
        """
        p = self.point_array()
        vector3(self.normal, "normal")
        if self.rest_arc is None:
            seg = (p[1:] - p[:-1]).norm(dim=-1)
            return torch.cat([torch.zeros(1, dtype=p.dtype), torch.cumsum(seg, 0)])
        a = torch.as_tensor(self.rest_arc, dtype=torch.float64)
        check(a.shape == (p.shape[0],), "rest_arc", tuple(a.shape), f"expected ({p.shape[0]},), one per point")
        check(bool(torch.isfinite(a).all()), "rest_arc", a.tolist(), "must be finite")
        check(
            float(a[0]) == 0.0 and bool((a[1:] > a[:-1]).all()), "rest_arc", a.tolist(), "must start at 0 and increase"
        )
        return a

    @property
    def length(self) -> float:
        """The rod's rest length L [m] (the last rest arc length)."""
        return float(self.arc()[-1])

    def nodes(self, n_elements: int) -> Tensor:
        """(N+1, 3) node positions [m] at equal rest arc length L/N, linearly interpolated between the points.

        Args:
            n_elements: N ≥ 1.

        Returns:
            The positions.
        """
        check(isinstance(n_elements, int) and n_elements >= 1, "n_elements", n_elements, "must be an integer >= 1")
        p, a = self.point_array(), self.arc()
        s = torch.linspace(0.0, float(a[-1]), n_elements + 1, dtype=p.dtype)
        i = torch.searchsorted(a, s, right=True).clamp(1, len(a) - 1) - 1
        f = ((s - a[i]) / (a[i + 1] - a[i])).unsqueeze(-1)
        return p[i] + f * (p[i + 1] - p[i])

    def element_frames(self, n_elements: int) -> Tensor:
        """(N, 3, 3) element frames ``[d1_i, t_i × d1_i, t_i]`` (columns; parallel transport, module docstring).

        Args:
            n_elements: N ≥ 1.

        Returns:
            The element rotations.

        Raises:
            ConfigError: a zero-length element, or ``normal`` parallel to the first element.
        """
        x = self.nodes(n_elements)
        e = x[1:] - x[:-1]
        for i, s in enumerate(e.norm(dim=-1).tolist()):
            check(s > 0, "points", f"element {i} of {n_elements}", "the polyline folds back onto itself there")
        t = e / e.norm(dim=-1, keepdim=True)
        turns = so3_exp(_rotations_between(t[:-1], t[1:]))  # (N−1, 3, 3): t_{i−1} → t_i
        frames = [frame(t[0], self.normal)]
        for turn in turns:
            frames.append(turn @ frames[-1])
        return torch.stack(frames)

    def frames(self, n_elements: int) -> Tensor:
        """(N+1, 3, 3) node frames: half-way between the adjacent element frames (module docstring,
        :func:`node_frames`).

        Args:
            n_elements: N ≥ 1.

        Returns:
            The node rotations (body → world).
        """
        return node_frames(self.element_frames(n_elements))

    def state(self, rod) -> RodState:
        """The rod at rest on this centreline: positions (B, N+1, 3) and rotations (B, N+1, 3, 3) of the rod's
        N and batch B, zero velocities.

        Args:
            rod: a :class:`~flexlearn.physics.cosserat.rod.CosseratRod` whose length equals :attr:`length`.

        Returns:
            The :class:`~flexlearn.physics.cosserat.state.RodState` at t = 0.

        Raises:
            ConfigError: the rod's length differs from the polyline's (relative 1e-9), naming ``length``.
        """
        self.check_rod(rod)
        n, B = rod.n_elements, rod.batch_size
        p = self.nodes(n).expand(B, n + 1, 3).clone()
        R = self.frames(n).expand(B, n + 1, 3, 3).clone()
        z = torch.zeros_like(p)
        return RodState(p, R, z, z.clone())

    def clamp(self, rod) -> Clamp:
        """A clamp holding node 0 where :meth:`state` puts it (position and frame).

        Args:
            rod: the rod (its N; its length is checked as in :meth:`state`).

        Returns:
            The :class:`~flexlearn.physics.cosserat.state.Clamp`.
        """
        self.check_rod(rod)
        return Clamp(self.nodes(rod.n_elements)[0], self.frames(rod.n_elements)[0])

    def check_rod(self, rod) -> None:
        """Raise a ConfigError naming ``length`` unless every rod of the batch is as long as the polyline.

        Args:
            rod: The rod (its ``length`` [m], one per rod of the batch).

        Raises:
            ConfigError: If a rod's length differs from the polyline's.
        """
        lengths = rod.length.detach().reshape(-1).tolist()
        L = self.length
        for i, v in enumerate(lengths):
            where = "length" if len(lengths) == 1 else f"length[{i}]"
            check(abs(v - L) <= 1e-9 * L, where, v, f"the rod must be as long as its polyline, {L!r} m")


def element_mean_frames(rotations: Tensor) -> Tensor:
    """(…, N, 3, 3) each element's mean frame ``R_i exp(½ log(R_iᵀ R_{i+1}))`` (the rotation half-way between its
    node frames) of node frames (…, N+1, 3, 3), body → world.

    Args:
        rotations: node rotations.

    Returns:
        The element rotations.
    """
    R = rotations
    return R[..., :-1, :, :] @ half_rotation(R[..., :-1, :, :].transpose(-1, -2) @ R[..., 1:, :, :])


def element_directors(rotations: Tensor) -> Tensor:
    """(…, N, 3) the material direction ``d1`` of each element of node frames (…, N+1, 3, 3): body x of
    :func:`element_mean_frames`.

    Args:
        rotations: node rotations (body → world).

    Returns:
        Unit vectors, world frame.
    """
    return element_mean_frames(rotations)[..., :, 0]


def node_frames(element_frames: Tensor) -> Tensor:
    """(N+1, 3, 3) node frames from element frames (N, 3, 3): ``R_a = E_{a−1} exp(½ log(E_{a−1}ᵀ E_a))`` inside,
    the end nodes turned on by their neighbour's half step (module docstring).

    Args:
        element_frames: element rotations (body → world).

    Returns:
        The node rotations.
    """
    E = element_frames
    if E.shape[0] == 1:
        return torch.cat([E, E])
    half = half_rotation(E[:-1].transpose(-1, -2) @ E[1:])  # (N−1, 3, 3), in the left frame
    return torch.cat([E[:1] @ half[:1].transpose(-1, -2), E[:-1] @ half, E[-1:] @ half[-1:]])


def _rotations_between(u: Tensor, v: Tensor) -> Tensor:
    """(M, 3) rotation vectors of the smallest rotations taking unit ``u`` (M, 3) to unit ``v`` (zero if parallel)."""
    axis = torch.linalg.cross(u, v)
    s = axis.norm(dim=-1, keepdim=True)
    c = (u * v).sum(-1, keepdim=True)
    for i, (si, ci) in enumerate(zip(s.reshape(-1).tolist(), c.reshape(-1).tolist())):
        check(si > 1e-15 or ci > 0, "points", f"element {i + 1}", "the polyline turns back by 180 degrees there")
    return torch.where(s > 1e-15, axis / s.clamp_min(1e-300) * torch.atan2(s, c), torch.zeros_like(axis))
