"""Contact of a Cosserat rod with fixed rigid obstacles (plane, cylinder, sphere), with Coulomb friction.

Formulation: a penalty on the nodes, the rod's centreline thickened by its radius r. For node a with gap
``g_a = d(p_a) − r`` to the obstacle's surface (``d`` the signed distance, outward normal ``n_a``) and velocity
``v_a``, penetration ``δ_a = max(−g_a, 0)`` gives the normal force and a regularised Coulomb friction:

    f_n = max(k δ_a − c (v_a · n_a), 0)                     (only while δ_a > 0; never pulls)
    f_t = −μ f_n v_t / sqrt(|v_t|² + ε²),   v_t = v_a − (v_a · n_a) n_a

so the tangential force is ``μ f_n`` in magnitude once the node slides faster than ε and proportional to the slip
below it: a viscous approximation of sticking. A node held by friction creeps at ``ε s / sqrt(1 − s²)``, s the
share of the friction cone it needs (tan α / μ on a slope α; tested to 5 %). Forces are world-frame node forces;
no torque (the contact point is taken at the centreline). The velocity is the one the integrator gives every load
(the half-step velocity before the state, as for damping), so friction is explicit: below ``ε ≈ h μ f_n / m_a``
(h the step, m_a the node mass; ``h μ g`` for a node carrying its weight) a held node chatters and creeps faster
than that law (measured: 3–6× at ε ten times below it). Choose ε above that bound and small against the speeds
that matter.

Limits, stated where they matter:

* penetration at rest is ``f_n / k`` per node (choose k from the load a node carries: ``k = f_n / δ_allowed``);
  the penalty adds ``k / m_a`` to the squared frequencies, so the LGVI's stable step shrinks to about
  ``2 sqrt(m_a / k)`` when that is below :meth:`CosseratRod.stable_dt`; the implicit step filters only the elastic
  stiffness, so the same bound holds there;
* contact is checked at the nodes: between two nodes the straight element may cut into a convex obstacle by
  its chord's sagitta, ``ℓ² / (8 R)`` for elements of length ℓ on a cylinder or sphere of radius R;
* the friction cone is exact in direction (isotropic) and regularised in magnitude below ε.

Each contact keeps the normal and friction forces of its last evaluation (``last_normal``, ``last_friction``:
(B, N+1, 3) [N]) for reports; `contact_forces` evaluates them for any state.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.loads import Forces, Load

__all__ = [
    "ContactForces",
    "PenaltyContact",
    "ObstacleContact",
    "PlaneContact",
    "CylinderContact",
    "SphereContact",
    "contact_forces",
]


def _unit(v: Sequence[float], name: str) -> Tensor:
    t = torch.as_tensor(v, dtype=torch.float64).reshape(-1)
    n = float(t.norm()) if t.numel() == 3 else 0.0
    check(t.numel() == 3 and math.isfinite(n) and n > 0, name, list(v), "expected a non-zero 3-vector")
    return t / n


def _point(v: Sequence[float], name: str) -> Tensor:
    t = torch.as_tensor(v, dtype=torch.float64).reshape(-1)
    check(t.numel() == 3 and bool(torch.isfinite(t).all()), name, list(v), "expected a finite 3-vector [m]")
    return t


class ContactForces(NamedTuple):
    """Contact forces at the nodes: ``normal`` and ``friction`` (…, N+1, 3) [N], world frame; ``depth`` (…, N+1)
    [m], the penetration."""

    normal: Tensor
    friction: Tensor
    depth: Tensor


class PenaltyContact(Load):
    """The penalty law with Coulomb friction (module docstring) and its parameters; `ObstacleContact` and
    `flexlearn.physics.cosserat.rod_contact.RodRodContact` give the geometry (`forces`).

    Args:
        rod_radius: r, the rod's radius [m] (> 0).
        stiffness: k, the penalty stiffness per node [N/m] (> 0).
        damping: c, the normal damping per node [N s/m] (≥ 0).
        friction: μ, the Coulomb friction coefficient (≥ 0).
        slip_velocity: ε, the regularisation of friction [m/s] (> 0; module docstring: above h μ f_n / m_a).
    """

    def __init__(
        self,
        rod_radius: float,
        stiffness: float,
        damping: float = 0.0,
        friction: float = 0.0,
        slip_velocity: float = 1e-3,
    ) -> None:
        super().__init__()
        for name, value, ok in (
            ("rod_radius", rod_radius, rod_radius > 0),
            ("stiffness", stiffness, stiffness > 0),
            ("damping", damping, damping >= 0),
            ("friction", friction, friction >= 0),
            ("slip_velocity", slip_velocity, slip_velocity > 0),
        ):
            check(math.isfinite(value) and ok, f"{type(self).__name__}.{name}", value, "out of range")
        self.rod_radius, self.stiffness, self.damping = float(rod_radius), float(stiffness), float(damping)
        self.friction, self.slip_velocity = float(friction), float(slip_velocity)
        self.last_normal: Optional[Tensor] = None
        self.last_friction: Optional[Tensor] = None

    def pair_law(self, depth: Tensor, n: Tensor, v: Tensor) -> Tuple[Tensor, Tensor]:
        """The normal and friction forces of contacts of penetration ``depth``, normal ``n`` and velocity ``v``.

        Args:
            depth: δ (…,) [m], ≥ 0.
            n: unit normals (…, 3), toward the body the force acts on.
            v: that body's velocity relative to the other (…, 3) [m/s].

        Returns:
            ``(f_n n, f_t)`` (…, 3) [N].
        """
        vn = (v * n).sum(-1)
        fn = torch.where(depth > 0, (self.stiffness * depth - self.damping * vn).clamp_min(0.0), torch.zeros_like(vn))
        vt = v - vn.unsqueeze(-1) * n
        speed = torch.sqrt((vt * vt).sum(-1) + self.slip_velocity**2)
        return fn.unsqueeze(-1) * n, -(self.friction * fn / speed).unsqueeze(-1) * vt

    def forces(self, p: Tensor, v: Tensor) -> ContactForces:
        """The normal and friction forces at the nodes and their penetration at a state.

        Args:
            p: Node positions [m], shape (…, N+1, 3).
            v: Node velocities [m/s], shape (…, N+1, 3).

        Returns:
            The `ContactForces`.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement forces(p, v)")  # pragma: no cover

    def velocity_dependent(self) -> bool:
        """True: the integrator calls `apply_moving` with the node velocities."""
        return True

    def apply_moving(self, ctx: RodContext, R: Tensor, p: Tensor, v: Tensor, t: float) -> Forces:
        """The contact forces at the nodes (module docstring).

        Args:
            ctx: The rod's context.
            R: Node rotations (unused), shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            v: Node velocities [m/s], shape (B, N+1, 3).
            t: Time [s] (unused).

        Returns:
            ``(force [N] (B, N+1, 3), None)``.
        """
        normal, friction, _ = self.forces(p, v)
        self.last_normal, self.last_friction = normal.detach(), friction.detach()
        return normal + friction, None

    def apply(self, ctx: RodContext, R: Tensor, p: Tensor, t: float) -> Forces:  # type: ignore[override]
        """The contact forces of nodes at rest (no damping, no friction): where no velocity is known.

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            ``(force [N] (B, N+1, 3), None)``.
        """
        return self.apply_moving(ctx, R, p, torch.zeros_like(p), t)


class ObstacleContact(PenaltyContact):
    """Penalty contact with Coulomb friction against one fixed obstacle (module docstring); subclasses give the
    geometry (`surface`). Arguments: `PenaltyContact`'s."""

    def surface(self, p: Tensor) -> Tuple[Tensor, Tensor]:
        """The signed distance to the obstacle's surface and the outward unit normal at ``p``.

        Args:
            p: points (…, 3) [m].

        Returns:
            ``(distance (…,) [m], positive outside; normal (…, 3))``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement surface(p)")  # pragma: no cover

    def forces(self, p: Tensor, v: Tensor) -> ContactForces:
        """`PenaltyContact.forces` against the obstacle's `surface` (module docstring).

        Args:
            p: node positions [m] (…, N+1, 3).
            v: node velocities [m/s] (…, N+1, 3).
        """
        dist, n = self.surface(p)
        depth = (self.rod_radius - dist).clamp_min(0.0)
        normal, friction = self.pair_law(depth, n, v)
        return ContactForces(normal, friction, depth)


class PlaneContact(ObstacleContact):
    """The half-space on the far side of a plane through ``point`` with unit ``normal`` (pointing to the rod).

    Args:
        point: a point of the plane [m] (3,).
        normal: its normal, toward the side the rod is on (3,).
        **contact: `ObstacleContact`'s arguments (``rod_radius``, ``stiffness``, ...).
    """

    point: Tensor
    normal: Tensor

    def __init__(self, point: Sequence[float], normal: Sequence[float], **contact: float) -> None:
        super().__init__(**contact)
        self.register_buffer("point", _point(point, "PlaneContact.point"))
        self.register_buffer("normal", _unit(normal, "PlaneContact.normal"))

    def surface(self, p: Tensor) -> Tuple[Tensor, Tensor]:
        """See `ObstacleContact.surface`.

        Args:
            p: points (…, 3) [m].

        Returns:
            ``(distance (…,) [m], normal (…, 3))``.
        """
        n = self.normal.to(p)
        return ((p - self.point.to(p)) * n).sum(-1), n.expand(p.shape)


class CylinderContact(ObstacleContact):
    """A solid circular cylinder of ``radius`` about the line through ``center`` along ``axis``, ``length`` long
    (centred on ``center``; its end faces are not contact surfaces: beyond them there is no contact).

    Args:
        center: a point of the axis [m] (3,).
        axis: the axis direction (3,).
        radius: the cylinder's radius [m] (> 0).
        length: its length [m] (> 0; inf: unbounded).
        **contact: `ObstacleContact`'s arguments.
    """

    center: Tensor
    axis: Tensor

    def __init__(
        self, center: Sequence[float], axis: Sequence[float], radius: float, length: float = math.inf, **contact: float
    ) -> None:
        super().__init__(**contact)
        check(math.isfinite(radius) and radius > 0, "CylinderContact.radius", radius, "must be > 0 [m]")
        check(length > 0, "CylinderContact.length", length, "must be > 0 [m]")
        self.radius, self.length = float(radius), float(length)
        self.register_buffer("center", _point(center, "CylinderContact.center"))
        self.register_buffer("axis", _unit(axis, "CylinderContact.axis"))

    def surface(self, p: Tensor) -> Tuple[Tensor, Tensor]:
        """See `ObstacleContact.surface`; points beyond the end faces are given an infinite distance.

        Args:
            p: points (…, 3) [m].

        Returns:
            ``(distance (…,) [m], normal (…, 3))``.
        """
        a = self.axis.to(p)
        rel = p - self.center.to(p)
        along = (rel * a).sum(-1)
        radial = rel - along.unsqueeze(-1) * a
        r = radial.norm(dim=-1)
        n = radial / r.clamp_min(1e-12).unsqueeze(-1)
        dist = torch.where(along.abs() <= 0.5 * self.length, r - self.radius, torch.full_like(r, math.inf))
        return dist, n


class SphereContact(ObstacleContact):
    """A solid sphere of ``radius`` about ``center``.

    Args:
        center: its centre [m] (3,).
        radius: its radius [m] (> 0).
        **contact: `ObstacleContact`'s arguments.
    """

    center: Tensor

    def __init__(self, center: Sequence[float], radius: float, **contact: float) -> None:
        super().__init__(**contact)
        check(math.isfinite(radius) and radius > 0, "SphereContact.radius", radius, "must be > 0 [m]")
        self.radius = float(radius)
        self.register_buffer("center", _point(center, "SphereContact.center"))

    def surface(self, p: Tensor) -> Tuple[Tensor, Tensor]:
        """See `ObstacleContact.surface`.

        Args:
            p: points (…, 3) [m].

        Returns:
            ``(distance (…,) [m], normal (…, 3))``.
        """
        rel = p - self.center.to(p)
        r = rel.norm(dim=-1)
        return r - self.radius, rel / r.clamp_min(1e-12).unsqueeze(-1)


def contact_forces(contact: PenaltyContact, p: Tensor, v: Tensor) -> ContactForces:
    """The normal and friction forces of ``contact`` and the penetration at a state, for reports
    (`PenaltyContact.forces`; the contact's ``last_*`` are left as they are).

    Args:
        contact: the obstacle or the rod–rod contact.
        p: node positions [m] (…, N+1, 3).
        v: node velocities [m/s] (…, N+1, 3).

    Returns:
        ``(normal force [N] (…, N+1, 3), friction force [N] (…, N+1, 3), penetration [m] (…, N+1))``.
    """
    return contact.forces(p, v)
