"""The flexlearn Cosserat rod as a solver of the ``cosseratbench`` rod-simulation benchmark.

``cosseratbench`` is the optional dependency ``bench``; its ``cosseratbench.solvers`` entry points name the
classes below, so that after ``pip install flexlearn[bench]``::

    cosseratbench run cantilever -s flexlearn          # the implicit step (default)
    cosseratbench run cantilever -s flexlearn-lgvi     # the explicit LGVI

A scenario becomes one simulation (:class:`~flexlearn.physics.cosserat.benchmark_problem.RodProblem`: its rods as
the batch rows of one :class:`~flexlearn.physics.cosserat.rod.CosseratRod` with the scenario's (E, G), so k = 27/28 at
G = E/3; supports, loads, obstacle, rod–rod and self-contact; the choices and their reasons are in that module).
The frames are recorded exactly at the requested times (:func:`~flexlearn.physics.cosserat.frame_times.simulate_at`).
A quasi-static scenario gets mass-proportional damping α = 2 ω_slow (critical for the slowest mode, as the
PyElastica adapter does), and the implicit step its numerical damping of the modes it does not resolve
(β, ζ = :data:`QUASI_STATIC_BETA_DISSIPATION`; with contact :data:`CONTACT_BETA_DISSIPATION`). A dynamic scenario,
whose motion is the result, runs with the consistent translational mass (``implicit_mass='consistent'``).

Time steps: the LGVI takes ``time_step_scale × stable_dt()`` (its explicit stability estimate, safety 0.65); the
implicit step takes one step per frame in a quasi-static scenario and ``accurate_dt()`` (four lowest modes to
1e-3 in frequency) otherwise, with contact at most the problem's ``contact_dt`` (no body passes through another in
one step), times ``time_step_scale``, but at most 1/(2α) with damping (the damping is explicit); a run that fails
at that step is run again at half the step, up to :data:`MAX_STEP_HALVINGS` times. cosseratbench records the
settings before the run (``time_step``, the step planned); the run adds the step it took, ``time_step_run``, to that
record (the dict :meth:`FlexlearnSolver.settings` returned for the scenario). What cannot be simulated
together (rods of different radius, material or end-condition kinds) is refused with ``NotImplementedError``,
which cosseratbench reports as unsupported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch
from cosseratbench.scenario import Scenario
from cosseratbench.solver import Capability, Diverged
from cosseratbench.trajectory import Trajectory as BenchTrajectory

from flexlearn.physics.cosserat.benchmark_problem import RodProblem
from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.errors import IntegrationError
from flexlearn.physics.cosserat.frame_times import plan_frames, simulate_at
from flexlearn.physics.cosserat.rod import CURVATURE_MODELS, STRAIN_MODELS
from flexlearn.physics.cosserat.simulation import SimulationOptions

QUASI_STATIC_BETA_DISSIPATION = (0.3, 0.2)
"""β and ζ of the implicit step in a quasi-static scenario without contact. ζ: damping ratio ζ h ω / 2 for a mode of
angular frequency ω, so the modes far above 1/h that the step does not resolve settle within a few steps (0 in a
dynamic scenario). β > ¼: the geometric stiffness of tension, which the step leaves explicit, pushed those modes over
the edge at β = ¼ (measured: the catenary at E = 0.1 MPa settled to 1e-4 L/s by 2.5 s at one step per frame, then
grew back to 9e-3 L/s by 5 s; with β = 0.3 its residual is 7.8e-9 L/s). At rest the step changes nothing (the filter
vanishes with the force), so the equilibria are the same."""

CONTACT_BETA_DISSIPATION = (0.3, 0.5)
"""β and ζ of the implicit step in a quasi-static scenario with contact: a rope pressed on a floor or fed onto it
is compressed, and the geometric stiffness of compression, which the step leaves explicit, destabilised the modes
it does not resolve at β = ¼, ζ = 0.2 (measured: the pile's free end failed on landing at 0.6 ms and at every
halving down to 5 µs; it runs at 0.6 ms with β = 0.3, ζ = 0.5)."""

NODE_STRAIN_LIMIT = 0.9
"""The integrator's strain check for rods with node strains (``strain_limit``, 0.5 by default): a rope coiled on a
floor at 20 elements bends by up to ~120° over one element, where the node strain's shear is sin(θ/2) ≈ 0.87 (the
pile's clamp stopping failed the default check at 3.4 s, at each of two halvings); cosseratbench's own check (a
segment stretched 2×) still catches a run that breaks down."""

MAX_STEP_HALVINGS = 7
"""How often the implicit step is halved and the rod run again after a failing step (the explicit part of its
forces, the geometric stiffness of tension and twist, can destabilise the modes it does not resolve at the
largest steps: measured, the catenary runs after 2 halvings, the twist after 6, at 2.5 ms). The LGVI
is not retried: its step is its stability limit."""


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


def same_failure_hint(failed_at: list[float], frame_interval: float, n_elements: int) -> str:
    """What to tell a user whose every try failed: when all tries (the step halved each time) failed within one
    frame interval of each other, the step is not the cause, and the rod is likely asked to bend or stretch more
    than its elements resolve (the pile at E = 0.1 MPa: a coil of a third of an element, the same failure at 0.49 s
    at every halving down to 5 µs).

    Args:
        failed_at: simulated time [s] at which each try failed, in order.
        frame_interval: time between recorded frames [s].
        n_elements: elements per rod.

    Returns:
        The hint, starting with ``'; '``, or ``''`` for a single try or failures spread over time.
    """
    if len(failed_at) < 2 or max(failed_at) - min(failed_at) > frame_interval:
        return ""
    return (
        f"; every try failed at t = {min(failed_at):.3g}–{max(failed_at):.3g} s, at {len(failed_at)} steps each half "
        f"the last, so the step is not the cause: the rods may bend or stretch more than {n_elements} elements "
        "resolve (try more elements)"
    )


class FlexlearnSolver:
    """cosseratbench adapter of the flexlearn rod with the implicit step (``scheme='implicit'``).

    Args:
        time_step_scale: multiplies the time step the adapter chooses (cosseratbench's solver option).
        strain: the rods' strain model (``'midpoint'``, ``'geodesic'`` or ``'nodes'``); None for the adapter's
            choice (:mod:`~flexlearn.physics.cosserat.benchmark_problem`). From Python only: cosseratbench's
            solver options are numbers.
        curvature: the rods' curvature measure: ``'log'`` (default; exact at any rotation per element: the twist's
            critical twist at 20 elements within 0.8 % instead of 4.5 %) or ``'cayley'`` (seed 001). Python only.
        smooth_contact: rod–rod contact about the smooth centreline, or (False, default) the chords
            (``RodRodContact.smooth``; docs/cosserat.md compares them). Python only.
    """

    name = "flexlearn"
    scheme = "implicit"
    backend_version = _flexlearn_version()
    capabilities = frozenset(
        {
            Capability.STRETCH,
            Capability.SHEAR,
            Capability.ROD_CONTACT,
            Capability.ROD_FRICTION,
            Capability.CYLINDER_CONTACT,
            Capability.PLANE_CONTACT,
        }
    )

    def __init__(
        self,
        time_step_scale: float = 1.0,
        strain: str | None = None,
        curvature: str = "log",
        smooth_contact: bool = False,
    ) -> None:
        if not (isinstance(time_step_scale, (int, float)) and math.isfinite(time_step_scale) and time_step_scale > 0):
            raise ValueError(f"time_step_scale = {time_step_scale!r}: must be a finite number > 0")
        if strain is not None and strain not in STRAIN_MODELS:
            raise ValueError(f"strain = {strain!r}: must be one of {', '.join(STRAIN_MODELS)} or None")
        if curvature not in CURVATURE_MODELS:
            raise ValueError(f"curvature = {curvature!r}: must be one of {', '.join(CURVATURE_MODELS)}")
        self.time_step_scale = float(time_step_scale)
        self.strain, self.curvature, self.smooth_contact = strain, curvature, bool(smooth_contact)
        self._records: dict[int, dict] = {}  # id(scenario) → the settings returned for it, to add the step run

    def problems(self, scenario: Scenario, n_elements: int) -> list[RodProblem]:
        """The flexlearn problems of a scenario: one, with all its rods as the batch rows of one simulation (rods
        always collide with each other; :mod:`~flexlearn.physics.cosserat.benchmark_problem`).

        Args:
            scenario: The cosseratbench scenario.
            n_elements: Number of elements per rod.

        Returns:
            The :class:`RodProblem` list.

        Raises:
            NotImplementedError: rods that cannot be simulated together, an obstacle that is not modelled.
        """
        return [
            RodProblem(
                scenario, scenario.rods, n_elements, self.scheme, self.strain, self.curvature, self.smooth_contact
            )
        ]

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
        dt = min(dt, problem.contact_dt) * self.time_step_scale
        return min(dt, 0.5 / problem.alpha) if problem.alpha > 0 else dt

    def step_options(self, problem: RodProblem) -> SimulationOptions:
        """The integrator's options for a problem: in a quasi-static scenario the implicit step damps the modes it
        does not resolve (β, ζ = :data:`QUASI_STATIC_BETA_DISSIPATION`; with contact :data:`CONTACT_BETA_DISSIPATION`);
        in a dynamic one it runs with the consistent translational mass (the pendulum's period error at 20 elements
        1.1e-4 instead of 5.6e-4, at 50 elements 5.0e-6 instead of 1.2e-4).

        Args:
            problem: The rod problem.

        Returns:
            The :class:`~flexlearn.physics.cosserat.simulation.SimulationOptions`.
        """
        # node strains: sin(θ/2) of a rope bent by θ over one element is a legitimate shear (0.5 at 60°)
        limit = NODE_STRAIN_LIMIT if problem.rod.strain == "nodes" else SimulationOptions.strain_limit
        if self.scheme != "implicit":
            return SimulationOptions(scheme=self.scheme, strain_limit=limit)
        if problem.alpha == 0:  # the motion is the result: the consistent mass (eq. (6) of implicit.py)
            return SimulationOptions(scheme=self.scheme, strain_limit=limit, implicit_mass="consistent")
        beta, zeta = CONTACT_BETA_DISSIPATION if problem.contacts else QUASI_STATIC_BETA_DISSIPATION
        return SimulationOptions(scheme=self.scheme, implicit_beta=beta, implicit_dissipation=zeta, strain_limit=limit)

    def settings(self, scenario: Scenario, *, n_elements: int, n_frames: int) -> dict:
        """The numerical choices of a run, as JSON values (recorded by cosseratbench beside the results); for a
        scenario this solver cannot run, what it lacks (the run itself then says so).

        Args:
            scenario: The cosseratbench scenario.
            n_elements: Number of elements of the rod.
            n_frames: Number of recorded frames (at least 2).

        Returns:
            Dict of integrator name, its β, ζ and translational mass, time step planned [s], damping rate α
            [1/s], shear coefficient and the contacts' stiffness [N/m], damping [N s/m] and slip velocity [m/s],
            or ``{"unsupported": reason}``; :meth:`run` of the same scenario adds ``time_step_run`` [s] to it.
        """
        try:
            problems = self.problems(scenario, n_elements)
        except NotImplementedError as error:
            return {"unsupported": str(error)}
        problem = problems[0]
        options = self.step_options(problem)
        times = torch.linspace(0.0, scenario.duration, n_frames, dtype=torch.float64)
        plan = plan_frames(times, min(self.max_dt(p, scenario.duration / (n_frames - 1)) for p in problems))
        self._records.clear()  # one record pending at a time: cosseratbench asks for the settings, then runs
        self._records[id(scenario)] = record = {
            "integrator": "flexlearn LGVI (explicit)" if self.scheme == "lgvi" else "flexlearn implicit step",
            "implicit_beta": options.implicit_beta if self.scheme == "implicit" else None,
            "implicit_dissipation": options.implicit_dissipation if self.scheme == "implicit" else None,
            "implicit_mass": options.implicit_mass if self.scheme == "implicit" else None,
            "strain": problem.rod.strain,
            "curvature": problem.rod.curvature,
            "rod_contact_surface": "smooth centreline" if self.smooth_contact else "chords",
            "time_step": plan.dt,
            "damping_rate": problem.alpha,
            "shear_coefficient": float(problem.rod.shear_coefficient.reshape(-1)[0]),
            "contacts": [
                {
                    "kind": type(c).__name__,
                    "stiffness": c.stiffness,
                    "damping": c.damping,
                    "friction": c.friction,
                    "slip_velocity": c.slip_velocity,
                }
                for c in problem.contacts
            ],
        }
        return record

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
        positions, directors, steps = [], [], []
        for problem in problems:
            rods, dt = self.run_rod(problem, times, scenario.duration / (n_frames - 1))
            steps.append(dt)
            for x, d in rods:
                positions.append(x)
                directors.append(d)
        record = self._records.pop(id(scenario), None)
        if record is not None:
            record["time_step_run"] = min(steps)
        return BenchTrajectory(times.numpy(), tuple(positions), tuple(directors))

    def run_rod(
        self, problem: RodProblem, times: torch.Tensor, frame_interval: float
    ) -> tuple[list[tuple[np.ndarray, np.ndarray]], float]:
        """Simulate the rods of one problem and record them at ``times``.

        Args:
            problem: The rod problem.
            times: (F,) frame times [s].
            frame_interval: Time between frames [s].

        Returns:
            Each rod's positions (F, N+1, 3) and directors (F, N, 3) in the scenario's numbering, and the step [s]
            that ran.

        Raises:
            Diverged: a failing step (its time).
        """
        options = self.step_options(problem)
        if not lgvi.eligible(problem.rod, problem.setup(), options):  # a failing try then costs no tensor rerun
            options = dataclasses.replace(options, backend="numba")
        max_dt = self.max_dt(problem, frame_interval)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # tensors of a few hundred nodes: a thread pool only adds overhead
        failed_at: list[float] = []  # simulated time [s] of each failing try
        try:
            for halvings in range(MAX_STEP_HALVINGS + 1):
                try:
                    with torch.no_grad():
                        tr = simulate_at(problem.rod, times, max_dt / 2**halvings, problem.setup(), options)
                    dt = plan_frames(times, max_dt / 2**halvings).dt
                    break
                except IntegrationError as error:
                    failed_at.append(error.step * plan_frames(times, max_dt / 2**halvings).dt)
                    if self.scheme == "lgvi" or halvings == MAX_STEP_HALVINGS:
                        hint = same_failure_hint(failed_at, frame_interval, problem.rod.n_elements)
                        raise Diverged(f"flexlearn: {error}{hint}", time=failed_at[-1]) from error
            rods = problem.output(tr.positions, tr.rotations)
        finally:
            torch.set_num_threads(threads)
        if not all(np.isfinite(x).all() for x, _ in rods):
            raise Diverged("flexlearn simulation produced non-finite positions")
        return rods, dt


class FlexlearnLGVISolver(FlexlearnSolver):
    """cosseratbench adapter of the flexlearn rod with the explicit LGVI (``scheme='lgvi'``)."""

    name = "flexlearn-lgvi"
    scheme = "lgvi"
