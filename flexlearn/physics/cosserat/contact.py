"""Contact of a Cosserat rod with fixed rigid obstacles (plane, cylinder, sphere), with Coulomb friction.

Formulation: a penalty on contact points of the centreline (the nodes, or q points per element:
`ObstacleContact`), the centreline thickened by the rod's radius r. For a point with gap ``g = d(x) − r`` to the
obstacle's surface (``d`` the signed distance, outward normal ``n``) and velocity ``v``, penetration
``δ = max(−g, 0)`` gives the normal force and a regularised Coulomb friction:

    f_n = max(k δ − c (v · n), 0)                     (only while δ > 0; never pulls)
    f_t = −μ f_n v_t / sqrt(|v_t|² + ε²),   v_t = v − (v · n) n

so the tangential force is ``μ f_n`` in magnitude once the point slides faster than ε and proportional to the slip
below it: a viscous approximation of sticking. A point held by friction creeps at ``ε s / sqrt(1 − s²)``, s the
share of the friction cone it needs (tan α / μ on a slope α; tested to 5 %). Forces are world-frame node forces,
a point's split between its element's nodes as (1 − s, s); no torque (the contact point is taken on the
centreline). The velocity is the one the integrator gives every load (the half-step velocity before the state).

On the implicit step the contact is implicit (eq. (5) of :mod:`~flexlearn.physics.cosserat.implicit`):
`PenaltyContact.filter_blocks` adds ``h C`` to the step's matrix, C the damping matrix of `pair_damping` (normal
damping c plus the numerical damping h k, and friction as the viscous law it is below ε), and the normal force
carries that numerical damping; neither the penalty nor the friction then bounds the step. On the LGVI both are
explicit: the stable step shrinks to about ``2 sqrt(m_a / k)`` when that is below
:meth:`CosseratRod.stable_dt`, and below ``ε ≈ h μ f_n / m_a`` a held node chatters and creeps 3–6× faster than
the law.

Limits, stated where they matter:

* penetration at rest is ``f_n / k`` per point (choose k from the load a point carries: ``k = f_n / δ_allowed``);
* between contact points the straight element may cut into a convex obstacle by its chord's sagitta,
  ``ℓ² / (8 R q²)`` for elements of length ℓ on a cylinder or sphere of radius R and q points per element;
* the friction cone is exact in direction (isotropic) and regularised in magnitude below ε.

Each contact keeps the normal and friction forces of its last evaluation (``last_normal``, ``last_friction``:
(B, N+1, 3) [N]) for reports; `contact_forces` evaluates them for any state.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.implicit import PairCoupling
from flexlearn.physics.cosserat.loads import Forces, Load

__all__ = [
    "ContactForces",
    "ContactPoints",
    "PenaltyContact",
    "ObstacleContact",
    "PlaneContact",
    "CylinderContact",
    "SphereContact",
    "contact_forces",
    "contact_filter_blocks",
    "contact_coupling",
    "join_couplings",
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


class ContactPoints(NamedTuple):
    """The points where a contact may act, in the flattened nodes (B (N+1)) of a state: ``shares`` (node index (P,),
    weight (P, 1)) of each node that carries a point's force, penetration ``depth`` (P,) [m], unit ``normal`` (P, 3)
    toward the rod side the force acts on, velocity ``v_rel`` (P, 3) [m/s] of that side relative to the other, and
    ``scale``, the share of the law's k and c each point carries."""

    shares: tuple
    depth: Tensor
    normal: Tensor
    v_rel: Tensor
    scale: float = 1.0


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

    couples_nodes = False
    """True where a point's ``h J C Jᵀ`` joins nodes that one block per node cannot hold (rod–rod pairs: two rods, or
    two far parts of one): the implicit step then takes it exactly (`filter_coupling`), not on the nodes."""

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
        self._last_points: Optional[tuple] = None

    def pair_law(
        self, depth: Tensor, n: Tensor, v: Tensor, step: float = 0.0, active: Optional[Tensor] = None
    ) -> Tuple[Tensor, Tensor]:
        """The normal and friction forces of contacts of penetration ``depth``, normal ``n`` and velocity ``v``.

        Args:
            depth: δ (…,) [m], ≥ 0.
            n: unit normals (…, 3), toward the body the force acts on.
            v: that body's velocity relative to the other (…, 3) [m/s].
            step: h [s] of the implicit step, whose numerical damping ``h k`` adds to c (`filter_blocks`); 0 for
                the LGVI and for reports.
            active: (…,) bool, the points the implicit step's active set holds in contact (`active_after`): their
                normal force ``k δ − (c + h k) v_n`` unclipped (the step's solve makes it positive at the new
                velocity), the others' zero; None: clipped at zero.

        Returns:
            ``(f_n n, f_t)`` (…, 3) [N].
        """
        vn = (v * n).sum(-1)
        fn = self._normal_force(depth, vn, step, active)
        vt = v - vn.unsqueeze(-1) * n
        speed = torch.sqrt((vt * vt).sum(-1) + self.slip_velocity**2)
        return fn.unsqueeze(-1) * n, -(self.friction * fn.clamp_min(0.0) / speed).unsqueeze(-1) * vt

    def _normal_force(self, depth: Tensor, vn: Tensor, step: float, active: Optional[Tensor] = None) -> Tensor:
        """``f_n = max(k δ − (c + h k) v_n, 0)`` where δ > 0, else 0 (…,) [N]; with ``active``, unclipped where it
        is True and zero elsewhere."""
        damping = self.damping + step * self.stiffness
        fn = self.stiffness * depth - damping * vn
        if active is not None:
            return torch.where(active & (depth > 0), fn, torch.zeros_like(vn))
        return torch.where(depth > 0, fn.clamp_min(0.0), torch.zeros_like(vn))

    def _acting(self, depth: Tensor, vn: Tensor, step: float, active: Optional[Tensor]) -> Tensor:
        """(…,) bool: where the law acts on the step's matrix: held points that penetrate, or (``active`` None)
        where the clipped force pushes."""
        if active is None:
            return self._normal_force(depth, vn, step) > 0
        return active & (depth > 0)

    def active_after(self, p: Tensor, v: Tensor, v_next: Tensor, step: float) -> Tensor:
        """The points in contact at the end of the implicit step: ``k δ − (c + h k) v_n⁺ > 0`` with the relative
        normal velocity ``v_n⁺`` of the step's new node velocities ``v_next`` (backward Euler's complementarity:
        a point is held where its force at the new velocity pushes, released where it would pull).

        Args:
            p: Node positions [m], shape (B, N+1, 3).
            v: Node velocities of the state [m/s], shape (B, N+1, 3) (its contact points).
            v_next: The step's new node velocities [m/s], shape (B, N+1, 3).
            step: h [s].

        Returns:
            (P,) bool, one per contact point of `points`.
        """
        points = self._points_at(p, v)
        v_rel = self.points(p, v_next).v_rel
        vn = (v_rel * points.normal).sum(-1)
        return (points.depth > 0) & (self.stiffness * points.depth - (self.damping + step * self.stiffness) * vn > 0)

    def active_before(self, p: Tensor, v: Tensor, step: float) -> Tensor:
        """The points the step's first solve holds in contact: where the clipped force at the state's velocity acts.

        Args:
            p: Node positions [m], shape (B, N+1, 3).
            v: Node velocities [m/s], shape (B, N+1, 3).
            step: h [s].

        Returns:
            (P,) bool, one per contact point of `points`.
        """
        points = self._points_at(p, v)
        return self._normal_force(points.depth, (points.v_rel * points.normal).sum(-1), step) > 0

    def pair_damping(self, depth: Tensor, n: Tensor, v: Tensor, step: float, active: Optional[Tensor] = None) -> Tensor:
        """The damping matrix of the law of `pair_law` at the implicit step h, numerical damping included:
        ``C = (c + h k) n nᵀ + μ f_n / sqrt(|v_t|² + ε²) (I − n nᵀ)`` where the normal force acts, zero elsewhere
        (friction as the viscous law it is below ε, its secant above); positive semi-definite.

        Args:
            depth: δ (…,) [m], ≥ 0.
            n: unit normals (…, 3).
            v: relative velocity (…, 3) [m/s].
            step: h [s].
            active: (…,) bool, the points held in contact (`pair_law`); None: where the clipped force acts.

        Returns:
            C [N s/m], (…, 3, 3).
        """
        vn = (v * n).sum(-1)
        fn = self._normal_force(depth, vn, step, active).clamp_min(0.0)
        on = self._acting(depth, vn, step, active).to(n.dtype)
        nn = n.unsqueeze(-1) * n.unsqueeze(-2)
        vt = v - vn.unsqueeze(-1) * n
        slip = self.friction * fn / torch.sqrt((vt * vt).sum(-1) + self.slip_velocity**2)
        eye = torch.eye(3, dtype=n.dtype, device=n.device)
        return ((self.damping + step * self.stiffness) * on)[..., None, None] * nn + slip[..., None, None] * (eye - nn)

    def points(self, p: Tensor, v: Tensor) -> ContactPoints:
        """The contact points of a state (`ObstacleContact`: points of the centreline against the obstacle;
        `~flexlearn.physics.cosserat.rod_contact.RodRodContact`: closest points of element pairs).

        Args:
            p: Node positions [m], shape (B, N+1, 3).
            v: Node velocities [m/s], shape (B, N+1, 3).

        Returns:
            The `ContactPoints`.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement points(p, v)")  # pragma: no cover

    def _points_at(self, p: Tensor, v: Tensor) -> ContactPoints:
        """`points` of ``(p, v)``, computed once for the forces and the step's blocks of the same state (the same
        tensors, unmodified)."""
        key = (p, v, p._version, v._version)
        cached = self._last_points
        if cached is not None and all(a is b if isinstance(a, Tensor) else a == b for a, b in zip(cached[0], key)):
            return cached[1]
        points = self.points(p, v)
        self._last_points = (key, points)
        return points

    def forces(self, p: Tensor, v: Tensor, step: float = 0.0, active: Optional[Tensor] = None) -> ContactForces:
        """The normal and friction forces at the nodes (each point's force split by its node weights) and each
        node's deepest penetration at a state.

        Args:
            p: Node positions [m], shape (B, N+1, 3).
            v: Node velocities [m/s], shape (B, N+1, 3).
            step: h [s] of the implicit step (`pair_law`); 0 for the LGVI and for reports.
            active: (P,) bool, the points the implicit step holds in contact (`pair_law`); None: the clipped law.

        Returns:
            The `ContactForces` (normal, friction (B, N+1, 3) [N]; depth (B, N+1) [m]).
        """
        shares, depth, normal, v_rel, scale = self._points_at(p, v)
        fn, ft = self.pair_law(depth, normal, v_rel, step, active)
        flat = p.reshape(-1, 3)
        node_fn, node_ft = torch.zeros_like(flat), torch.zeros_like(flat)
        node_depth = torch.zeros(flat.shape[0], dtype=p.dtype, device=p.device)
        for nodes, w in shares:
            node_fn.index_add_(0, nodes, scale * w * fn)
            node_ft.index_add_(0, nodes, scale * w * ft)
            node_depth.scatter_reduce_(0, nodes, torch.where(w[:, 0] != 0, depth, 0.0), reduce="amax")
        return ContactForces(node_fn.reshape(p.shape), node_ft.reshape(p.shape), node_depth.reshape(p.shape[:-1]))

    def filter_blocks(self, p: Tensor, v: Tensor, h: float, active: Optional[Tensor] = None) -> Tensor:
        """The contact's share of the implicit step's matrix (eq. (5) of :mod:`~flexlearn.physics.cosserat.implicit`),
        added to the position blocks of ``M + β h² K``, node by node: a point's matrix ``h J C Jᵀ`` (J its node
        weights w) is bounded by ``(Σ|w|) |w_a| h C`` on node a (Cauchy–Schwarz), exact for the motion of the point
        and at least as damped in its element's stretch. Zero where the contact `couples_nodes` (there a node bound
        would resist two touching rods moving together: `filter_coupling` instead).

        Args:
            p: Node positions [m], shape (B, N+1, 3).
            v: Node velocities [m/s], shape (B, N+1, 3).
            h: the step [s].
            active: (P,) bool, the points held in contact (`pair_law`); None: where the clipped force acts.

        Returns:
            (B, N+1, 3, 3) blocks [kg].
        """
        out = torch.zeros(p.shape[0] * p.shape[1], 9, dtype=p.dtype, device=p.device)
        if self.couples_nodes:
            return out.reshape(*p.shape, 3)
        shares, depth, normal, v_rel, scale = self._points_at(p, v)
        point = (scale * h * self.pair_damping(depth, normal, v_rel, h, active)).reshape(-1, 9)
        total = sum(w.abs() for _, w in shares)
        for nodes, w in shares:
            out.index_add_(0, nodes, total * w.abs() * point)
        return out.reshape(*p.shape, 3)

    def filter_coupling(self, p: Tensor, v: Tensor, h: float, active: Optional[Tensor] = None) -> PairCoupling:
        """The points where the law acts, with their nodes, weights and ``h C`` (eq. (5) of
        :mod:`~flexlearn.physics.cosserat.implicit`), for the step to take ``h J C Jᵀ`` exactly.

        Args:
            p: Node positions [m], shape (B, N+1, 3).
            v: Node velocities [m/s], shape (B, N+1, 3).
            h: the step [s].
            active: (P,) bool, the points held in contact (`pair_law`); None: where the clipped force acts.

        Returns:
            The `~flexlearn.physics.cosserat.implicit.PairCoupling` of those points (P' ≤ P rows).
        """
        shares, depth, normal, v_rel, scale = self._points_at(p, v)
        acting = self._acting(depth, (v_rel * normal).sum(-1), h, active)
        point = scale * h * self.pair_damping(depth[acting], normal[acting], v_rel[acting], h, None if active is None
                                              else active[acting])  # fmt: skip
        nodes = torch.stack([share[0][acting] for share in shares], -1)
        weights = torch.cat([share[1][acting] for share in shares], -1)
        return PairCoupling(nodes, weights, point)

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
        normal, friction, _ = self.forces(p, v, ctx.implicit_step)
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
    geometry (`surface`).

    Args:
        points_per_element: q ≥ 1 contact points per element, at ``s = j / q`` along it (j = 0 … q − 1, and the
            last node), each carrying k / q and c / q: 1 puts them at the nodes; more keep an element's chord from
            cutting into a curved obstacle (by ``ℓ² / (8 R q²)`` instead of ``ℓ² / (8 R)``).
        **contact: `PenaltyContact`'s arguments.
    """

    def __init__(self, points_per_element: int = 1, **contact: Any) -> None:
        super().__init__(**contact)
        q = points_per_element
        check(isinstance(q, int) and q >= 1, f"{type(self).__name__}.points_per_element", q, "expected an integer >= 1")
        self.points_per_element = q

    def surface(self, p: Tensor) -> Tuple[Tensor, Tensor]:
        """The signed distance to the obstacle's surface and the outward unit normal at ``p``.

        Args:
            p: points (…, 3) [m].

        Returns:
            ``(distance (…,) [m], positive outside; normal (…, 3))``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement surface(p)")  # pragma: no cover

    def points(self, p: Tensor, v: Tensor) -> ContactPoints:
        """`PenaltyContact.points`: the q points of every element (and the last node) against the `surface`.

        Args:
            p: node positions [m] (B, N+1, 3).
            v: node velocities [m/s] (B, N+1, 3).
        """
        q, B, n = self.points_per_element, p.shape[0], p.shape[1]
        flat_p, flat_v = p.reshape(-1, 3), v.reshape(-1, 3)
        first = torch.arange(B * n, device=p.device).reshape(B, n)
        if q == 1:
            nodes = first.reshape(-1)
            dist, normal = self.surface(flat_p)
            one = torch.ones(nodes.shape[0], 1, dtype=p.dtype, device=p.device)
            return ContactPoints(((nodes, one),), (self.rod_radius - dist).clamp_min(0.0), normal, flat_v)
        s = torch.arange(q, dtype=p.dtype, device=p.device) / q
        start = first[:, :-1, None].expand(B, n - 1, q).reshape(-1)
        s = torch.cat([s.repeat(B * (n - 1)), torch.ones(B, dtype=p.dtype, device=p.device)]).unsqueeze(-1)
        start = torch.cat([start, first[:, -2]])  # the last node: s = 1 on the last element
        x = (1 - s) * flat_p[start] + s * flat_p[start + 1]
        dist, normal = self.surface(x)
        v_point = (1 - s) * flat_v[start] + s * flat_v[start + 1]
        depth = (self.rod_radius - dist).clamp_min(0.0)
        return ContactPoints(((start, 1 - s), (start + 1, s)), depth, normal, v_point, 1.0 / q)


class PlaneContact(ObstacleContact):
    """The half-space on the far side of a plane through ``point`` with unit ``normal`` (pointing to the rod).

    Args:
        point: a point of the plane [m] (3,).
        normal: its normal, toward the side the rod is on (3,).
        **contact: `ObstacleContact`'s arguments (``rod_radius``, ``stiffness``, ...).
    """

    point: Tensor
    normal: Tensor

    def __init__(self, point: Sequence[float], normal: Sequence[float], **contact: Any) -> None:
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
        self, center: Sequence[float], axis: Sequence[float], radius: float, length: float = math.inf, **contact: Any
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

    def __init__(self, center: Sequence[float], radius: float, **contact: Any) -> None:
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


def contact_filter_blocks(loads: Sequence[object], p: Tensor, v: Tensor, h: float) -> Optional[Tensor]:
    """The sum of the `PenaltyContact.filter_blocks` of the contacts among ``loads`` (None without contacts).

    Args:
        loads: a run's loads.
        p: node positions [m] (B, N+1, 3).
        v: node velocities [m/s] (B, N+1, 3).
        h: the step [s].

    Returns:
        (B, N+1, 3, 3) blocks [kg], or None.
    """
    blocks: Optional[Tensor] = None
    for load in loads:
        if isinstance(load, PenaltyContact):
            share = load.filter_blocks(p, v, h)
            blocks = share if blocks is None else blocks + share
    return blocks


def contact_coupling(loads: Sequence[object], p: Tensor, v: Tensor, h: float) -> Optional[PairCoupling]:
    """The `PenaltyContact.filter_coupling` of the contacts among ``loads`` that `couples_nodes` (the clipped law),
    joined (None without such contacts).

    Args:
        loads: a run's loads.
        p: node positions [m] (B, N+1, 3).
        v: node velocities [m/s] (B, N+1, 3).
        h: the step [s].

    Returns:
        The `~flexlearn.physics.cosserat.implicit.PairCoupling`, or None.
    """
    parts = [c.filter_coupling(p, v, h) for c in loads if isinstance(c, PenaltyContact) and c.couples_nodes]
    return join_couplings(parts)


def join_couplings(parts: Sequence[PairCoupling]) -> Optional[PairCoupling]:
    """The points of several `~flexlearn.physics.cosserat.implicit.PairCoupling` in one (None for none).

    Args:
        parts: the couplings.

    Returns:
        Their rows concatenated, or None.
    """
    if not parts:
        return None
    return PairCoupling(*(torch.cat(field, 0) for field in zip(*parts)))
