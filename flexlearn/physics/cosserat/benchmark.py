"""The flexlearn Cosserat rod as a solver of the ``cosseratbench`` rod-simulation benchmark.

``cosseratbench`` is the optional dependency ``bench``; its ``cosseratbench.solvers`` entry points name the
classes below, so that after ``pip install flexlearn[bench]``::

    cosseratbench run cantilever -s flexlearn          # the implicit step (default)
    cosseratbench run cantilever -s flexlearn-lgvi     # the explicit LGVI

A scenario's rod becomes a :class:`~flexlearn.physics.cosserat.rod.CosseratRod`, circular, with the scenario's
(E, G) (so k = 27/28 at G = E/3, PyElastica's value, :mod:`~flexlearn.physics.cosserat.properties`);
its initial state from the centreline and normal (:class:`~flexlearn.physics.cosserat.polyline.Polyline`); a
clamped end as the rod's base (a clamped last node by numbering the rod from the other end); point loads as
:class:`~flexlearn.physics.cosserat.loads.PointForce`, gravity as
:class:`~flexlearn.physics.cosserat.loads.Gravity`; the frames recorded exactly at the requested times
(:func:`~flexlearn.physics.cosserat.frame_times.simulate_at`). A quasi-static scenario gets mass-proportional
damping α = 2 ω_slow (critical for the slowest mode, as the PyElastica adapter does), and the implicit step its
numerical damping :data:`QUASI_STATIC_DISSIPATION` of the modes it does not resolve.

Time steps: the LGVI takes ``time_step_scale × stable_dt()`` (its explicit stability estimate, safety 0.65); the
implicit step takes one step per frame in a quasi-static scenario and ``accurate_dt()`` (four lowest modes to
1e-3 in frequency) otherwise, times ``time_step_scale``, but at most 1/(2α) with damping (the damping is
explicit); a rod whose run fails at that step is run again at half the step, up to :data:`MAX_STEP_HALVINGS`
times.

End conditions: a clamped end is a :class:`~flexlearn.physics.cosserat.state.Clamp` (driven by the scenario's
``Motion``, sliding along its ``slides_along``), a pinned end a :class:`~flexlearn.physics.cosserat.state.Pin`
(:mod:`~flexlearn.physics.cosserat.supports`). Several rods are simulated one by one (exact while they do not
touch: the solver does not claim rod contact). Self-contact is not modelled (``settings`` says so). Obstacles are
refused with ``NotImplementedError`` (the benchmark then reports the run as unsupported).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch
from cosseratbench.scenario import End, EndCondition, Motion, Rod, Scenario
from cosseratbench.solver import Capability, Diverged
from cosseratbench.trajectory import Trajectory as BenchTrajectory

from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.errors import IntegrationError
from flexlearn.physics.cosserat.frame_times import plan_frames, simulate_at
from flexlearn.physics.cosserat.loads import Gravity, PointForce, RodLoad
from flexlearn.physics.cosserat.polyline import Polyline, element_mean_frames, node_frames
from flexlearn.physics.cosserat.properties import Material
from flexlearn.physics.cosserat.rod import CosseratRod
from flexlearn.physics.cosserat.simulation import RodSetup, SimulationOptions
from flexlearn.physics.cosserat.state import FREE, Clamp, Pin, RodState

QUASI_STATIC_DISSIPATION = 0.2
"""ζ of the implicit step in a quasi-static scenario: damping ratio ζ h ω / 2 for a mode of angular frequency ω, so
the modes far above 1/h that the step does not resolve settle within a few steps (0 in a dynamic scenario)."""

MAX_STEP_HALVINGS = 7
"""How often the implicit step is halved and the rod run again after a failing step (the explicit part of its
forces, the geometric stiffness of tension and twist, can destabilise the modes it does not resolve at the
largest steps: measured, the catenary runs after 2 halvings, the twist after 6, at 2.5 ms). The LGVI
is not retried: its step is its stability limit."""

_FLIP = torch.diag(torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64))
"""Half turn about body x: the frame of a node seen from a rod numbered from its other end (z → −z, d1 kept)."""


def _flexlearn_version() -> str:
    """The version of flexlearn and a digest of the rod package's sources (``0.1.0+3f2a…``): cosseratbench reuses a
    saved run only while this is unchanged, and the rod's code changes between releases."""
    try:
        release = version("flexlearn")
    except PackageNotFoundError:
        release = "unknown"
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return f"{release}+{digest.hexdigest()[:12]}"


def _end_support(condition: EndCondition, motion: Motion | None, node: int, pose: tuple[torch.Tensor, torch.Tensor]):
    """The flexlearn support of one end of a cosseratbench rod (None for a free end).

    Args:
        condition: the end's condition.
        motion: its prescribed motion (clamped ends only), relative to where it starts, or None.
        node: the node of that end in the rod's numbering (0 or −1).
        pose: ``(rotation (3, 3), position (3,))`` of the end's node at t = 0.

    Returns:
        A :class:`~flexlearn.physics.cosserat.state.Clamp`, a :class:`~flexlearn.physics.cosserat.state.Pin`
        or None.
    """
    rotation, position = pose
    if condition is EndCondition.FREE:
        return None
    if condition is EndCondition.PINNED:
        return Pin(position, node=node)
    drive = None
    if motion is not None:

        def drive(t: float, motion: Motion = motion) -> tuple[torch.Tensor, torch.Tensor]:
            """The end's pose at ``t`` [s]: turned about, and moved from, where it starts (world frame)."""
            shift, turn = motion.pose(t)
            return (
                torch.as_tensor(turn, dtype=torch.float64) @ rotation,
                position + torch.as_tensor(shift, dtype=torch.float64),
            )

    slide = None if motion is None or motion.slides_along is None else tuple(motion.axis)
    return Clamp(position, rotation, motion=drive, node=node, slides_along=slide)


class RodProblem:
    """One cosseratbench rod as flexlearn objects: the rod, its loads, supports, initial state and numbering.

    The ends become supports (:class:`Clamp`, :class:`Pin`, driven by the scenario's ``Motion``, a sliding clamp
    for ``slides_along``). A rod held at its last node only is numbered from that end, so that the support is
    the base (the fused kernel then runs it).

    Args:
        scenario: the scenario (gravity, quasi-static flag).
        spec: one of its rods.
        n_elements: elements of the rod.
    """

    def __init__(self, scenario: Scenario, spec: Rod, n_elements: int):
        start, end = spec.condition(End.START), spec.condition(End.END)
        # held at the last node only: number the rod from its other end, so that the support is node 0
        self.reversed = start is EndCondition.FREE and end is not EndCondition.FREE
        points = torch.as_tensor(np.asarray(spec.centerline, dtype=float))
        line = Polyline(points, spec.normal, spec.rest_arc_length)
        elements = line.element_frames(n_elements)
        rotations = node_frames(elements)
        positions = line.nodes(n_elements)
        # the director each element carries: its mean frame turned by the constant offset that makes it the
        # scenario's (parallel-transported) director at t = 0
        self.offsets = element_mean_frames(rotations).transpose(-1, -2) @ elements
        ends = [(start, spec.start_motion), (end, spec.end_motion)]
        if self.reversed:
            positions, rotations = positions.flip(0), rotations.flip(0) @ _FLIP
            ends.reverse()
        material = Material(
            spec.material.density, spec.material.youngs_modulus, shear_modulus=spec.material.shear_modulus
        )
        self.rod = CosseratRod.circular(line.length, spec.radius, material, n_elements)
        z = torch.zeros_like(positions)
        self.initial = RodState(positions.unsqueeze(0), rotations.unsqueeze(0), z.unsqueeze(0), z.unsqueeze(0))
        first = _end_support(*ends[0], 0, (rotations[0], positions[0]))
        last = _end_support(*ends[1], -1, (rotations[-1], positions[-1]))
        self.base: list[Clamp | Pin] | str = [s for s in (first, last) if s is not None] or FREE
        self.loads: list[RodLoad] = []
        if any(scenario.gravity):
            self.loads.append(Gravity(tuple(float(g) for g in scenario.gravity)))
        for load in spec.loads:
            tip = (load.at is End.END) != self.reversed
            self.loads.append(PointForce(-1 if tip else 0, tuple(float(f) for f in load.force)))
        self.alpha = 2.0 * scenario.slowest_frequency() if scenario.quasi_static else 0.0

    def setup(self) -> RodSetup:
        """The flexlearn :class:`~flexlearn.physics.cosserat.simulation.RodSetup` of this rod: loads, mass-
        proportional damping α (quasi-static scenarios), initial state and supports."""
        damping = Damping(alpha=self.alpha) if self.alpha > 0 else None
        return RodSetup(self.loads, damping, self.initial, self.base)

    def output(self, positions: torch.Tensor, rotations: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        """Positions (T, N+1, 3) and element directors (T, N, 3) in the scenario's numbering, as numpy: ``d1`` of
        each element's mean frame times its offset at t = 0 (a frame rigidly attached to the element).

        Args:
            positions: Node positions [m] in the rod's numbering, shape (T, N+1, 3).
            rotations: Node frames in the rod's numbering, shape (T, N+1, 3, 3).

        Returns:
            Tuple ``(positions, directors)`` as numpy arrays of shapes (T, N+1, 3) and (T, N, 3).
        """
        if self.reversed:
            positions, rotations = positions.flip(-2), rotations.flip(-3) @ _FLIP
        directors = (element_mean_frames(rotations) @ self.offsets)[..., :, 0]
        return positions.detach().numpy().copy(), directors.detach().numpy().copy()


class FlexlearnSolver:
    """cosseratbench adapter of the flexlearn rod with the implicit step (``scheme='implicit'``).

    Args:
        time_step_scale: multiplies the time step the adapter chooses (cosseratbench's solver option).
    """

    name = "flexlearn"
    scheme = "implicit"
    backend_version = _flexlearn_version()
    capabilities = frozenset({Capability.STRETCH, Capability.SHEAR})

    def __init__(self, time_step_scale: float = 1.0) -> None:
        if not (isinstance(time_step_scale, (int, float)) and math.isfinite(time_step_scale) and time_step_scale > 0):
            raise ValueError(f"time_step_scale = {time_step_scale!r}: must be a finite number > 0")
        self.time_step_scale = float(time_step_scale)

    def problems(self, scenario: Scenario, n_elements: int) -> list[RodProblem]:
        """The flexlearn problem of each rod of a scenario.

        Several rods are simulated one after another, each on its own: exact while they do not touch. The
        solver does not claim rod contact, so cosseratbench does not hand it scenarios that need it.

        Args:
            scenario: The cosseratbench scenario.
            n_elements: Number of elements per rod.

        Returns:
            One :class:`RodProblem` per rod.

        Raises:
            NotImplementedError: obstacles (contact is not modelled yet).
        """
        if scenario.obstacles:
            kinds = sorted({type(o).__name__.lower() for o in scenario.obstacles})
            raise NotImplementedError(f"contact with obstacles ({', '.join(kinds)}): not modelled yet")
        return [RodProblem(scenario, spec, n_elements) for spec in scenario.rods]

    def max_dt(self, problem: RodProblem, frame_interval: float) -> float:
        """The largest step [s] of this scheme for the problem (module docstring).

        Args:
            problem: The rod problem.
            frame_interval: Time between recorded frames [s].

        Returns:
            The time step [s].
        """
        rod = problem.rod
        if self.scheme == "lgvi":
            return self.time_step_scale * float(rod.stable_dt())
        dt = frame_interval if problem.alpha > 0 else rod.accurate_dt(1e-3, 4)
        dt *= self.time_step_scale
        return min(dt, 0.5 / problem.alpha) if problem.alpha > 0 else dt

    def settings(self, scenario: Scenario, *, n_elements: int, n_frames: int) -> dict:
        """The numerical choices of a run, as JSON values (recorded by cosseratbench beside the results); for a
        scenario this solver cannot run, what it lacks (the run itself then says so).

        Args:
            scenario: The cosseratbench scenario.
            n_elements: Number of elements of the rod.
            n_frames: Number of recorded frames (at least 2).

        Returns:
            Dict of integrator name, time step [s], damping rate α [1/s] and shear coefficient, or
            ``{"unsupported": reason}``.
        """
        try:
            problems = self.problems(scenario, n_elements)
        except NotImplementedError as error:
            return {"unsupported": str(error)}
        problem = problems[0]
        times = torch.linspace(0.0, scenario.duration, n_frames, dtype=torch.float64)
        plan = plan_frames(times, min(self.max_dt(p, scenario.duration / (n_frames - 1)) for p in problems))
        return {
            "integrator": "flexlearn LGVI (explicit)"
            if self.scheme == "lgvi"
            else "flexlearn implicit step (beta 1/4)",
            "time_step": plan.dt,
            "damping_rate": problem.alpha,
            "shear_coefficient": float(problem.rod.shear_coefficient),
            "self_contact": "not modelled" if scenario.self_contact else "not needed",
        }

    def run(self, scenario: Scenario, *, n_elements: int, n_frames: int) -> BenchTrajectory:
        """Simulate the scenario; ``n_frames`` frames from 0 to its duration.

        Args:
            scenario: The cosseratbench scenario.
            n_elements: Number of elements of the rod.
            n_frames: Number of recorded frames (at least 2).

        Returns:
            The cosseratbench trajectory: frame times [s], positions [m] (T, N+1, 3) and directors (T, N, 3).

        Raises:
            NotImplementedError: what the rod model lacks for this scenario.
            Diverged: a failing step (its time).
        """
        problems = self.problems(scenario, n_elements)
        times = torch.linspace(0.0, scenario.duration, n_frames, dtype=torch.float64)
        positions, directors = [], []
        for problem in problems:
            x, d = self.run_rod(problem, times, scenario.duration / (n_frames - 1))
            positions.append(x)
            directors.append(d)
        return BenchTrajectory(times.numpy(), tuple(positions), tuple(directors))

    def run_rod(self, problem: RodProblem, times: torch.Tensor, frame_interval: float) -> tuple[np.ndarray, np.ndarray]:
        """Simulate one rod and record it at ``times``.

        Args:
            problem: The rod problem.
            times: (F,) frame times [s].
            frame_interval: Time between frames [s].

        Returns:
            Positions (F, N+1, 3) and directors (F, N, 3) in the scenario's numbering.

        Raises:
            Diverged: a failing step (its time).
        """
        # quasi-static: numerical damping of the modes the step does not resolve (implicit step only)
        zeta = QUASI_STATIC_DISSIPATION if self.scheme == "implicit" and problem.alpha > 0 else 0.0
        options = SimulationOptions(scheme=self.scheme, implicit_dissipation=zeta)
        if not lgvi.eligible(problem.rod, problem.setup(), options):  # a failing try then costs no tensor rerun
            options = dataclasses.replace(options, backend="numba")
        max_dt = self.max_dt(problem, frame_interval)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # tensors of a few hundred nodes: a thread pool only adds overhead
        try:
            for halvings in range(MAX_STEP_HALVINGS + 1):
                try:
                    with torch.no_grad():
                        tr = simulate_at(problem.rod, times, max_dt / 2**halvings, problem.setup(), options)
                    break
                except IntegrationError as error:
                    if self.scheme == "lgvi" or halvings == MAX_STEP_HALVINGS:
                        dt = plan_frames(times, max_dt / 2**halvings).dt
                        raise Diverged(f"flexlearn: {error}", time=error.step * dt) from error
            positions, directors = problem.output(tr.positions, tr.rotations)
        finally:
            torch.set_num_threads(threads)
        if not np.isfinite(positions).all():
            raise Diverged("flexlearn simulation produced non-finite positions")
        return positions, directors


class FlexlearnLGVISolver(FlexlearnSolver):
    """cosseratbench adapter of the flexlearn rod with the explicit LGVI (``scheme='lgvi'``)."""

    name = "flexlearn-lgvi"
    scheme = "lgvi"
