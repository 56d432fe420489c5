"""A ``cosseratbench`` scenario as flexlearn objects: rods, supports, loads and contacts
(:mod:`~flexlearn.physics.cosserat.benchmark` runs them).

Rods that can touch (several rods; one rod and ``self_contact``) are simulated together, as the batch rows of one
:class:`~flexlearn.physics.cosserat.rod.CosseratRod` with one
:class:`~flexlearn.physics.cosserat.rod_contact.RodRodContact`: they must then share radius, material and the
kinds of their end conditions (a sliding clamp its slide direction); each keeps its own shape, length, loads and
end motions. Obstacles become :class:`~flexlearn.physics.cosserat.contact.CylinderContact` and
:class:`~flexlearn.physics.cosserat.contact.PlaneContact`; the larger of the two friction coefficients applies.

Rods take the geodesic mid-frame strain (``strain='geodesic'``, see :mod:`~flexlearn.physics.cosserat.strains`),
for two reasons:

- under tension, the linear mean of the chord's two node views (``'midpoint'``) lets a straight rod fold its node
  frames in a zigzag once an element is longer than 2 √(EI/T) (the mean sees the chord shortened by cos φ; tested
  exactly in ``test_model.py``). At 20 elements that is every soft variant of the hanging experiments: with the
  linear mean the pendulum at E = 1 MPa, the catenary and the crossing at 0.1 MPa diverged, and the catenary at
  10 MPa and at a 0.6 m span had not settled at the end (residual 2.8e-2 and 0.31 L/s). With the geodesic strain
  all of them complete, and those two settle (below 3e-6 L/s);
- pressed around an obstacle or fed onto it, a rope bends through tens of degrees per element, where the linear
  mean shrinks the chord by cos(θ/2) for a relative rotation θ, so that an element can stretch unseen (measured
  at 20 elements: the capstan's rope, 40° per element on the cylinder, stretched by 190 % within 0.15 s; the
  pile's rope stretched 2.2× and diverged). The geodesic mid frame sees an unstretched arc unstretched at any θ.
  With it, at 20 elements, the capstan's rope holds within 8 mm at 0.8 of the holding overhang and slides 0.21 m
  at 1.5 (the node strains of seed 001, eq. (6), which also see the chord right, let it slide 0.33 m at 0.8).

Rods of a quasi-static scenario with obstacles and a driven end carry the rotary inertia of their segments
(``rotary_inertia='segment'``, J + m ℓ²/12): the dynamics are not the result there, and a thin rope's node
rotations (ω ∝ 1/r with the section's inertia) otherwise needed a quarter of the step where the driven end stops
(the pile's clamp at 3.4 s: 461 s of wall time with two failed tries, 47 s with segment inertia). Without a driven
end the section's inertia stays (the rope's own dynamics are what slides or holds it).

Contact parameters, from the rod alone (the scenario gives none): the penalty of a node of mass m_a is
``k = m_a ω_max²`` for the implicit step (ω_max the rod's fastest elastic mode, ``2 / stable_dt(1)``: contact as
stiff as the stiffest thing the rod already has; the step keeps it stable whatever h, eq. (5) of
:mod:`~flexlearn.physics.cosserat.implicit`) and ``m_a ω_max² / 4`` for the LGVI (inside its stable step); damping
``c = sqrt(k m_a)`` (half of critical); friction regularised below ``ε = 1e-6 L`` per second (L the rod's length);
on a cylinder of radius R, ``q = ceil(ℓ / sqrt(4 R r))`` contact points per element of length ℓ, so that no chord
cuts into it by more than r / 2.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch
from cosseratbench.scenario import (
    Cylinder,
    End,
    EndCondition,
    Motion,
    Plane,
    Rod,
    Scenario,
    neighbour_elements,
    rotation_matrix,
)

from flexlearn.physics.cosserat.contact import CylinderContact, ObstacleContact, PenaltyContact, PlaneContact
from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.loads import Gravity, PointForce, RodLoad
from flexlearn.physics.cosserat.polyline import Polyline, element_mean_frames, node_frames
from flexlearn.physics.cosserat.properties import Material
from flexlearn.physics.cosserat.rod import CosseratRod
from flexlearn.physics.cosserat.rod_contact import RodRodContact
from flexlearn.physics.cosserat.simulation import RodSetup
from flexlearn.physics.cosserat.state import FREE, Clamp, Pin, RodState

__all__ = ["RodProblem", "lifted_off"]

SLIP_VELOCITY_PER_LENGTH = 1e-6
"""ε / L [1/s] of the adapter's friction: a node held at share s of its friction cone creeps at ε s / sqrt(1 − s²)."""

_FLIP = torch.diag(torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64))
"""Half turn about body x: the frame of a node seen from a rod numbered from its other end (z → −z, d1 kept)."""


class _RodStart:
    """One scenario rod's initial nodes and frames in its flexlearn numbering, and its director offsets; nodes lifted
    off the obstacles (`lifted_off`) where the polyline's chords would start inside one."""

    def __init__(self, spec: Rod, n_elements: int, reversed_: bool, obstacles: Sequence[ObstacleContact]) -> None:
        line = Polyline(torch.as_tensor(np.asarray(spec.centerline, dtype=float)), spec.normal, spec.rest_arc_length)
        positions = line.nodes(n_elements)
        lifted = lifted_off(positions, obstacles)
        if lifted is not positions:
            positions, rest = lifted, torch.linspace(0.0, float(line.length), n_elements + 1, dtype=torch.float64)
            line = Polyline(positions, spec.normal, rest.tolist())
        elements = line.element_frames(n_elements)
        rotations = node_frames(elements)
        # the director each element carries: its mean frame turned by the constant offset that makes it the
        # scenario's (parallel-transported) director at t = 0
        self.offsets = element_mean_frames(rotations).transpose(-1, -2) @ elements
        if reversed_:
            positions, rotations = positions.flip(0), rotations.flip(0) @ _FLIP
        self.positions, self.rotations = positions, rotations


def lifted_off(nodes: torch.Tensor, obstacles: Sequence[ObstacleContact], iterations: int = 100) -> torch.Tensor:
    """The nodes of a rod moved out of the obstacles, so that no contact point starts inside one: each node moves
    along the normals of the points it carries by their penetration (weighted by its share), until the deepest is
    below 1e-3 r. A centreline sampled coarsely from a curve wrapped on a cylinder has chords that cut into it by
    their sagitta; started there, the penalty would fling the rod off.

    Args:
        nodes: (n, 3) node positions [m].
        obstacles: the obstacle contacts.
        iterations: the most passes.

    Returns:
        The moved nodes (n, 3), or ``nodes`` itself when none starts inside.
    """
    p, moved = nodes.unsqueeze(0), False
    for _ in range(iterations):
        move, weight = torch.zeros_like(nodes), torch.zeros(nodes.shape[0], dtype=nodes.dtype)
        worst = 0.0
        for obstacle in obstacles:
            shares, depth, normal, _, _ = obstacle.points(p, torch.zeros_like(p))
            worst = max(worst, float(depth.max() / obstacle.rod_radius))
            for index, w in shares:
                inside = w * (depth > 0).unsqueeze(-1)
                move.index_add_(0, index, inside * depth.unsqueeze(-1) * normal)
                weight.index_add_(0, index, inside[:, 0])
        if worst <= 1e-3:
            return p.squeeze(0) if moved else nodes
        p, moved = p + (move / weight.clamp_min(1e-300).unsqueeze(-1)).unsqueeze(0), True
    return p.squeeze(0)


def _stacked_support(condition: EndCondition, motions: list[Motion | None], node: int, poses: list[tuple]):
    """The flexlearn support of one end of B rods of one batch (None for free ends).

    Args:
        condition: the end's condition, the same for every rod.
        motions: each rod's prescribed motion of that end (clamped ends only), or None.
        node: the node of that end in the rods' numbering (0 or −1).
        poses: each rod's ``(rotation (3, 3), position (3,))`` of that node at t = 0.

    Returns:
        A :class:`~flexlearn.physics.cosserat.state.Clamp`, a :class:`~flexlearn.physics.cosserat.state.Pin`
        or None; batched (B, …) for B > 1.
    """
    rotation = torch.stack([r for r, _ in poses])
    position = torch.stack([p for _, p in poses])
    single = len(poses) == 1
    if condition is EndCondition.FREE:
        return None
    if condition is EndCondition.PINNED:
        return Pin(position[0] if single else position, node=node)
    drive = None
    if any(m is not None for m in motions):
        tables = [None if m is None else MotionTable(m) for m in motions]
        start_rotation, start_position = rotation.numpy(), position.numpy()

        def drive(t: float) -> tuple[torch.Tensor, torch.Tensor]:
            """Each end's pose at ``t`` [s]: turned about, and moved from, where it starts (world frame)."""
            poses = [(np.zeros(3), np.eye(3)) if table is None else table.pose(t) for table in tables]
            turned = torch.from_numpy(np.stack([turn for _, turn in poses]) @ start_rotation)
            moved = torch.from_numpy(start_position + np.stack([shift for shift, _ in poses]))
            return (turned[0], moved[0]) if single else (turned, moved)

    slides = {None if m is None or m.slides_along is None else tuple(m.axis) for m in motions}
    if len(slides) > 1:
        raise NotImplementedError("rods simulated together (they can touch) slide their clamps along different axes")
    slide = slides.pop()
    if single:
        return Clamp(position[0], rotation[0], motion=drive, node=node, slides_along=slide)
    return Clamp(position, rotation, motion=drive, node=node, slides_along=slide)


class MotionTable:
    """A scenario's :class:`cosseratbench.scenario.Motion` with its tables as arrays, read once: :meth:`pose` is its
    ``pose`` (linear interpolation of displacement and rotation vector, held after the last time; the same
    arithmetic) without converting the tables at every call, which a run that samples the motion at each of
    ~10⁴ steps for each of several rods would otherwise spend seconds on.

    Args:
        motion: the scenario's motion.
    """

    def __init__(self, motion: Motion):
        self.times = np.asarray(motion.times, dtype=float)
        self.displacement = np.asarray(motion.displacement, dtype=float)
        self.rotation = np.asarray(motion.rotation, dtype=float)

    def pose(self, time: float) -> tuple[np.ndarray, np.ndarray]:
        """Displacement [m] and rotation matrix of the end at ``time`` [s].

        Args:
            time: [s].

        Returns:
            ``(displacement (3,), rotation (3, 3))``.
        """
        times = self.times
        if time >= times[-1]:
            i, f = len(times) - 2, 1.0
        else:
            i = int(np.searchsorted(times, time, side="right")) - 1
            f = (time - times[i]) / (times[i + 1] - times[i])
        d, r = self.displacement, self.rotation
        return d[i] + f * (d[i + 1] - d[i]), rotation_matrix(r[i] + f * (r[i + 1] - r[i]))


def rod_material(spec: Rod) -> Material:
    """The flexlearn material of a scenario rod: density, E and G (so the shear coefficient of the section follows).

    Args:
        spec: the scenario rod.

    Returns:
        The :class:`~flexlearn.physics.cosserat.properties.Material`.
    """
    m = spec.material
    return Material(m.density, m.youngs_modulus, shear_modulus=m.shear_modulus)


def _check_batchable(specs: Sequence[Rod]) -> None:
    """NotImplementedError unless ``specs`` share what one batch of rods shares (module docstring)."""
    first = specs[0]
    for spec in specs[1:]:
        if spec.radius != first.radius or spec.material != first.material:
            raise NotImplementedError("contact between rods of different radius or material: not modelled")
        if (spec.start, spec.end) != (first.start, first.end):
            raise NotImplementedError("contact between rods with different kinds of end conditions: not modelled")


class RodProblem:
    """The rods of one simulation as flexlearn objects: the rod (B rows), loads, contacts, supports, initial state
    and numbering.

    The ends become supports (:class:`Clamp`, :class:`Pin`, driven by the scenario's ``Motion``, a sliding clamp
    for ``slides_along``). Rods held at their last node only are numbered from that end, so that the support is
    the base (the fused kernel then runs a single rod without contact).

    Args:
        scenario: the scenario (gravity, obstacles, self-contact, quasi-static flag).
        specs: its rods simulated together (one, or all that can touch).
        n_elements: elements of each rod.
        scheme: ``'implicit'`` or ``'lgvi'`` (the contact stiffness, module docstring).
        strain: the rods' strain model; None for the module docstring's choice.
        curvature: the rods' curvature measure (``'log'``, exact at any rotation per element, or ``'cayley'``).
        smooth_contact: rod–rod contact about the smooth centreline (True) or the chords (``RodRodContact.smooth``).
    """

    def __init__(
        self,
        scenario: Scenario,
        specs: Sequence[Rod],
        n_elements: int,
        scheme: str = "implicit",
        strain: str | None = None,
        curvature: str = "log",
        smooth_contact: bool = False,
    ):
        _check_batchable(specs)
        first = specs[0]
        start, end = first.condition(End.START), first.condition(End.END)
        # held at the last node only: number the rods from their other end, so that the support is node 0
        self.reversed = start is EndCondition.FREE and end is not EndCondition.FREE
        self.specs = list(specs)
        material = rod_material(first)
        lengths = first.length if len(specs) == 1 else torch.tensor([s.length for s in specs], dtype=torch.float64)
        strain = strain or "geodesic"
        driven = any(m is not None for spec in specs for m in (spec.start_motion, spec.end_motion))
        inertia = "segment" if scenario.quasi_static and scenario.obstacles and driven else "section"
        self.rod = CosseratRod.circular(lengths, first.radius, material, n_elements, strain, inertia, curvature)
        self.contacts = _contacts(scenario, self.specs, self.rod, scheme, smooth_contact)
        obstacles = [c for c in self.contacts if isinstance(c, ObstacleContact)]
        rods = [_RodStart(spec, n_elements, self.reversed, obstacles) for spec in specs]
        self.offsets = [r.offsets for r in rods]
        positions = torch.stack([r.positions for r in rods])
        rotations = torch.stack([r.rotations for r in rods])
        z = torch.zeros_like(positions)
        self.initial = RodState(positions, rotations, z, z)
        ends = [(start, [s.start_motion for s in specs]), (end, [s.end_motion for s in specs])]
        if self.reversed:
            ends.reverse()
        supports = [
            _stacked_support(*ends[0], 0, [(r.rotations[0], r.positions[0]) for r in rods]),
            _stacked_support(*ends[1], -1, [(r.rotations[-1], r.positions[-1]) for r in rods]),
        ]
        self.base: list[Clamp | Pin] | str = [s for s in supports if s is not None] or FREE
        self.loads: list[RodLoad] = self._point_loads(scenario)
        self.alpha = 2.0 * scenario.slowest_frequency() if scenario.quasi_static else 0.0
        self.contact_dt = _contact_dt(scenario, self.specs, self.alpha) if self.contacts else math.inf

    def _point_loads(self, scenario: Scenario) -> list[RodLoad]:
        """Gravity and the rods' end loads (batched (B, 3) forces for several rods)."""
        loads: list[RodLoad] = []
        if any(scenario.gravity):
            loads.append(Gravity(tuple(float(g) for g in scenario.gravity)))
        for at in (End.START, End.END):
            forces = [
                sum((np.asarray(ld.force, float) for ld in s.loads if ld.at is at), np.zeros(3)) for s in self.specs
            ]
            if not any(np.any(f) for f in forces):
                continue
            tip = (at is End.END) != self.reversed
            force = torch.as_tensor(np.stack(forces), dtype=torch.float64)
            loads.append(PointForce(-1 if tip else 0, force[0] if len(forces) == 1 else force))
        return loads

    def setup(self) -> RodSetup:
        """The flexlearn :class:`~flexlearn.physics.cosserat.simulation.RodSetup`: loads and contacts, mass-
        proportional damping α (quasi-static scenarios), initial state and supports."""
        damping = Damping(alpha=self.alpha) if self.alpha > 0 else None
        return RodSetup([*self.loads, *self.contacts], damping, self.initial, self.base)

    def output(self, positions: torch.Tensor, rotations: torch.Tensor) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each rod's positions (T, N+1, 3) and element directors (T, N, 3) in the scenario's numbering, as numpy:
        ``d1`` of each element's mean frame times its offset at t = 0 (a frame rigidly attached to the element).

        Args:
            positions: Node positions [m] in the rods' numbering, shape (T, B, N+1, 3) or (T, N+1, 3).
            rotations: Node frames in the rods' numbering, shape (T, B, N+1, 3, 3) or (T, N+1, 3, 3).

        Returns:
            One ``(positions, directors)`` per rod.
        """
        if not self.rod.batched:
            positions, rotations = positions.unsqueeze(1), rotations.unsqueeze(1)
        out = []
        for b, offsets in enumerate(self.offsets):
            x, frames = positions[:, b], rotations[:, b]
            if self.reversed:
                x, frames = x.flip(-2), frames.flip(-3) @ _FLIP
            directors = (element_mean_frames(frames) @ offsets)[..., :, 0]
            out.append((x.detach().numpy().copy(), directors.detach().numpy().copy()))
        return out


def _contact_dt(scenario: Scenario, specs: Sequence[Rod], alpha: float) -> float:
    """The largest step [s] at which contacts are not passed through: bodies closing at 2 v move r per step, v the
    fastest speed expected: the speed of a rod falling its own length (or its terminal speed |g| / α under the
    quasi-static drag α [1/s], if lower) or of a driven end (its speed and its turn rate times the rod's length)."""
    g = float(np.linalg.norm(scenario.gravity))
    length = max(s.length for s in specs)
    speed = math.sqrt(2.0 * g * length)
    if alpha > 0:
        speed = min(speed, g / alpha)
    for spec in specs:
        for motion in (spec.start_motion, spec.end_motion):
            if motion is None:
                continue
            for t in motion.times[:-1]:
                velocity, turning = motion.rates(t)
                speed = max(speed, float(np.linalg.norm(velocity)) + float(np.linalg.norm(turning)) * length)
    return math.inf if speed == 0 else min(s.radius for s in specs) / (2.0 * speed)


def _contacts(
    scenario: Scenario, specs: Sequence[Rod], rod: CosseratRod, scheme: str, smooth: bool = False
) -> list[PenaltyContact]:
    """The obstacles and rod–rod contact of one batch of rods, with the parameters of the module docstring."""
    spec = specs[0]
    ell = min(s.length for s in specs) / rod.n_elements
    node_mass = spec.material.density * spec.area * ell
    section = CosseratRod.circular(rod.length, spec.radius, rod_material(spec), rod.n_elements, rod.strain)
    omega = 2.0 / float(section.stable_dt(1.0).min())  # of the section's rotary inertia, whichever the rod has
    stiffness = node_mass * omega**2 / (1.0 if scheme == "implicit" else 4.0)
    law: dict[str, Any] = dict(
        rod_radius=spec.radius,
        stiffness=stiffness,
        damping=math.sqrt(stiffness * node_mass),
        slip_velocity=SLIP_VELOCITY_PER_LENGTH * min(s.length for s in specs),
    )
    rod_friction = max(s.friction for s in specs)
    out: list[PenaltyContact] = []
    for obstacle in scenario.obstacles:
        mu = max(obstacle.friction, rod_friction)
        if isinstance(obstacle, Cylinder):
            # points along each element, so that its chord cuts into the cylinder by at most r / 2
            q = max(1, math.ceil(ell / math.sqrt(4.0 * obstacle.radius * spec.radius)))
            shape = (obstacle.center, obstacle.axis, obstacle.radius, obstacle.length)
            out.append(CylinderContact(*shape, points_per_element=q, **law, friction=mu))
        elif isinstance(obstacle, Plane):
            out.append(PlaneContact(obstacle.point, obstacle.normal, **law, friction=mu))
        else:
            raise NotImplementedError(f"contact with a {type(obstacle).__name__}: not modelled")
    if len(specs) > 1 or scenario.self_contact:
        apart = neighbour_elements(spec.radius, ell)
        out.append(
            RodRodContact(
                **law, friction=rod_friction, self_contact=scenario.self_contact, exclude=apart, smooth=smooth
            )
        )
    return out
