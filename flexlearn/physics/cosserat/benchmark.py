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
explicit).

What the rod model does not have yet is refused with ``NotImplementedError`` (the benchmark then reports the run
as unsupported): several rods, pinned ends, both ends clamped, driven ends, obstacles.
"""

from __future__ import annotations

import hashlib
import math
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch
from cosseratbench.scenario import End, EndCondition, Rod, Scenario
from cosseratbench.solver import Capability, Diverged
from cosseratbench.trajectory import Trajectory as BenchTrajectory

from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.errors import IntegrationError
from flexlearn.physics.cosserat.frame_times import plan_frames, simulate_at
from flexlearn.physics.cosserat.loads import Gravity, PointForce, RodLoad
from flexlearn.physics.cosserat.polyline import Polyline, element_mean_frames, node_frames
from flexlearn.physics.cosserat.properties import Material
from flexlearn.physics.cosserat.rod import CosseratRod
from flexlearn.physics.cosserat.simulation import RodSetup, SimulationOptions
from flexlearn.physics.cosserat.state import FREE, Clamp, RodState

QUASI_STATIC_DISSIPATION = 0.2
"""ζ of the implicit step in a quasi-static scenario: damping ratio ζ h ω / 2 for a mode of angular frequency ω, so
the modes far above 1/h that the step does not resolve settle within a few steps (0 in a dynamic scenario)."""

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


class RodProblem:
    """One cosseratbench rod as flexlearn objects: the rod, its loads, base, initial state and numbering.

    Args:
        scenario: the scenario (gravity, quasi-static flag).
        spec: its only rod.
        n_elements: elements of the rod.

    Raises:
        NotImplementedError: an end condition or motion the rod model does not have.
    """

    def __init__(self, scenario: Scenario, spec: Rod, n_elements: int):
        start, end = spec.condition(End.START), spec.condition(End.END)
        if spec.start_motion is not None or spec.end_motion is not None:
            raise NotImplementedError("driven ends (Motion): flexlearn's clamp does not move yet")
        if EndCondition.PINNED in (start, end):
            raise NotImplementedError(f"pinned ends (start={start.value}, end={end.value}): flexlearn clamps or frees")
        if (start, end) == (EndCondition.CLAMPED, EndCondition.CLAMPED):
            raise NotImplementedError("both ends clamped: flexlearn's rod is clamped at one end or free")
        # a clamped last node: number the rod from its other end, so that the clamp is node 0
        self.reversed = end is EndCondition.CLAMPED
        points = torch.as_tensor(np.asarray(spec.centerline, dtype=float))
        line = Polyline(points, spec.normal, spec.rest_arc_length)
        elements = line.element_frames(n_elements)
        rotations = node_frames(elements)
        positions = line.nodes(n_elements)
        # the director each element carries: its mean frame turned by the constant offset that makes it the
        # scenario's (parallel-transported) director at t = 0
        self.offsets = element_mean_frames(rotations).transpose(-1, -2) @ elements
        if self.reversed:
            positions, rotations = positions.flip(0), rotations.flip(0) @ _FLIP
        material = Material(
            spec.material.density, spec.material.youngs_modulus, shear_modulus=spec.material.shear_modulus
        )
        self.rod = CosseratRod.circular(line.length, spec.radius, material, n_elements)
        z = torch.zeros_like(positions)
        self.initial = RodState(positions.unsqueeze(0), rotations.unsqueeze(0), z.unsqueeze(0), z.unsqueeze(0))
        clamped = EndCondition.CLAMPED in (start, end)
        self.base: Clamp | str = Clamp(positions[0], rotations[0]) if clamped else FREE
        self.loads: list[RodLoad] = []
        if any(scenario.gravity):
            self.loads.append(Gravity(tuple(float(g) for g in scenario.gravity)))
        for load in spec.loads:
            tip = (load.at is End.END) != self.reversed
            self.loads.append(PointForce(-1 if tip else 0, tuple(float(f) for f in load.force)))
        self.alpha = 2.0 * scenario.slowest_frequency() if scenario.quasi_static else 0.0

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

    def problem(self, scenario: Scenario, n_elements: int) -> RodProblem:
        """The flexlearn problem of a one-rod scenario.

        Args:
            scenario: The cosseratbench scenario.
            n_elements: Number of elements of the rod.

        Returns:
            The scenario's :class:`RodProblem`.

        Raises:
            NotImplementedError: several rods, obstacles, or an end condition the rod does not have.
        """
        if len(scenario.rods) != 1:
            raise NotImplementedError(f"several rods ({len(scenario.rods)}): flexlearn simulates one rod at a time")
        if scenario.obstacles:
            raise NotImplementedError("contact with obstacles: flexlearn's rod has none yet")
        return RodProblem(scenario, scenario.rods[0], n_elements)

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
            problem = self.problem(scenario, n_elements)
        except NotImplementedError as error:
            return {"unsupported": str(error)}
        times = torch.linspace(0.0, scenario.duration, n_frames, dtype=torch.float64)
        plan = plan_frames(times, self.max_dt(problem, scenario.duration / (n_frames - 1)))
        return {
            "integrator": "flexlearn LGVI (explicit)"
            if self.scheme == "lgvi"
            else "flexlearn implicit step (beta 1/4)",
            "time_step": plan.dt,
            "damping_rate": problem.alpha,
            "shear_coefficient": float(problem.rod.shear_coefficient),
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
        problem = self.problem(scenario, n_elements)
        times = torch.linspace(0.0, scenario.duration, n_frames, dtype=torch.float64)
        damping = Damping(alpha=problem.alpha) if problem.alpha > 0 else None
        setup = RodSetup(problem.loads, damping, problem.initial, problem.base)
        # quasi-static: numerical damping of the modes the step does not resolve (implicit step only)
        zeta = QUASI_STATIC_DISSIPATION if self.scheme == "implicit" and problem.alpha > 0 else 0.0
        options = SimulationOptions(scheme=self.scheme, implicit_dissipation=zeta)
        max_dt = self.max_dt(problem, scenario.duration / (n_frames - 1))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # tensors of a few hundred nodes: a thread pool only adds overhead
        try:
            with torch.no_grad():
                tr = simulate_at(problem.rod, times, max_dt, setup, options)
                positions, directors = problem.output(tr.positions, tr.rotations)
        except IntegrationError as error:
            raise Diverged(f"flexlearn: {error}", time=error.step * plan_frames(times, max_dt).dt) from error
        finally:
            torch.set_num_threads(threads)
        if not np.isfinite(positions).all():
            raise Diverged("flexlearn simulation produced non-finite positions")
        return BenchTrajectory(times.numpy(), (positions,), (directors,))


class FlexlearnLGVISolver(FlexlearnSolver):
    """cosseratbench adapter of the flexlearn rod with the explicit LGVI (``scheme='lgvi'``)."""

    name = "flexlearn-lgvi"
    scheme = "lgvi"
