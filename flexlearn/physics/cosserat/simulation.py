"""What one simulation of a Cosserat rod is given, as named contracts.

They are shared by the rod (:meth:`CosseratRod.simulate <flexlearn.physics.cosserat.rod.CosseratRod.simulate>`),
the tensor-path loop (:mod:`flexlearn.physics.cosserat.integrator`) and the fused kernel
(:mod:`flexlearn.physics.cosserat.compiled.lgvi`):

* :class:`SimulationOptions` — how to integrate: recording, step scheme, backend, tolerances (a frozen
  dataclass, checked when it is built);
* :class:`RodSetup` — what acts on the rod and where it starts: loads, damping, initial state, base, observer;
* :class:`SimulatedRod` — what the integrator needs of a rod model (:class:`~flexlearn.physics.cosserat.rod.CosseratRod`
  implements it).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Iterator, Optional, Protocol, Sequence

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.damping import DampingModel, RodObserver
from flexlearn.physics.cosserat.loads import RodLoad
from flexlearn.physics.cosserat.state import Clamp, RodState
from flexlearn.physics.cosserat.supports import Supports

SCHEMES = ("lgvi", "implicit")
BACKENDS = ("auto", "numba", "torch")
IMPLICIT_MASSES = ("lumped", "consistent")


@dataclasses.dataclass(frozen=True)
class SimulationOptions:
    """How :meth:`CosseratRod.simulate <flexlearn.physics.cosserat.rod.CosseratRod.simulate>` integrates; every
    field has a default, so ``SimulationOptions(record_every=100)`` changes one thing. Values are checked
    when the options are built (a ConfigError naming the field).

    Attributes:
        record_every: keep every k-th step (the first and the last are always kept).
        record_energy: also record the total mechanical energy (for conservative loads).
        callback: ``callback(k, state)`` after every step (tensor path).
        scheme: ``'lgvi'`` (default; explicit potential, ``dt`` below :meth:`CosseratRod.stable_dt`) or
            ``'implicit'`` (:mod:`~flexlearn.physics.cosserat.implicit`: forces filtered by ``M (M + β h² K)⁻¹``,
            unconditionally stable for a linear rod, so ``dt`` is chosen by accuracy: :meth:`CosseratRod.accurate_dt`).
            Both run on either backend.
        implicit_beta: β ≥ ¼ of the implicit scheme (¼: Newmark's average acceleration, the smallest
            frequency error −(hω)²/12, energy conserved for a linear rod); 0.3 leaves a stability margin for
            the explicit terms (magnets, large deflection):
            :data:`~flexlearn.physics.cosserat.implicit.DEFAULT_BETA`.
        implicit_dissipation: ζ ∈ [0, 1] of the implicit scheme's numerical damping (eq. (4) of
            :mod:`~flexlearn.physics.cosserat.implicit`: damping ratio ζhω/2 per mode; 0, the default,
            conserves the energy of a linear rod; ≈ 0.01–0.05 for large deflections at large steps).
        implicit_mass: the implicit scheme's translational mass: ``'lumped'`` (default; m_a at each node, as the
            LGVI) or ``'consistent'`` (each element's ρ A l as ½ ∫ ρ A |v(s)|² ds of the linearly interpolated
            velocity: ρ A l / 6 [[2, 1], [1, 2]] per element, eq. (6) of :mod:`~flexlearn.physics.cosserat.implicit`;
            a hanging cable's swing at 20 elements 7× closer to the continuum's). Lumped for the LGVI.
        backend: ``'auto'`` runs the fused numba kernel (:mod:`~flexlearn.physics.cosserat.compiled.lgvi`, the
            same discrete equations, ~100× faster per step) when numba is installed and the run needs no
            gradient, only gravity, constant point forces and magnets in one spatially uniform field, damping
            without ``beta``, no observer, callback or energy record, supports (pins, clamps, fixed or driven;
            sliding along a world axis) and contact with planes, cylinders, spheres and between rods; else the tensor
            path. A step that fails in the kernel is rerun on the tensor path, whose IntegrationError carries the
            state before it. ``'torch'`` forces the tensor path, ``'numba'`` the kernel
            (a ConfigError when it cannot run; a failing step raises at once, with its step and node only).
        compile: ``torch.compile`` the step (one fused kernel; ~6× faster per step, tens of seconds to compile
            once per shape): the Newton solve then runs ``newton_fixed_iters`` iterations and its residual is
            still checked.
        strain_limit: a shear/extension strain |Γ| above this (or a non-finite value, or an element bent by
            ≥ 180°) raises :class:`~flexlearn.physics.cosserat.errors.IntegrationError` — the sign of a step
            beyond stability.
        newton_tol: relative residual the Cayley–Newton solve must reach at every node.
        newton_iters: the most Newton updates per node and step.
        newton_fixed_iters: the Newton updates of the compiled step (``compile=True``).
    """

    record_every: int = 1
    record_energy: bool = False
    callback: Optional[Callable[[int, RodState], None]] = None
    scheme: str = "lgvi"
    implicit_beta: float = 0.25
    implicit_dissipation: float = 0.0
    implicit_mass: str = "lumped"
    backend: str = "auto"
    compile: bool = False
    strain_limit: float = 0.5
    newton_tol: float = 1e-12
    newton_iters: int = 20
    newton_fixed_iters: int = 3

    def __post_init__(self) -> None:
        """Check every field (a ConfigError naming the field)."""
        every = self.record_every
        check(isinstance(every, int) and every >= 1, "record_every", every, "must be an integer >= 1")
        check(self.backend in BACKENDS, "backend", self.backend, "must be 'auto', 'numba' or 'torch'")
        check(self.scheme in SCHEMES, "scheme", self.scheme, "must be 'lgvi' or 'implicit'")
        beta = self.implicit_beta
        check(
            isinstance(beta, (int, float)) and math.isfinite(beta) and beta >= 0.25,
            "implicit_beta",
            beta,
            "must be a finite number >= 0.25 (unconditional stability)",
        )
        zeta = self.implicit_dissipation
        check(
            isinstance(zeta, (int, float)) and 0 <= zeta <= 1,
            "implicit_dissipation",
            zeta,
            "must be a number in [0, 1]",
        )

        mass = self.implicit_mass
        check(mass in IMPLICIT_MASSES, "implicit_mass", mass, "must be 'lumped' or 'consistent'")

    @property
    def consistent_mass(self) -> bool:
        """True when the implicit step runs with the consistent translational mass (``implicit_mass``)."""
        return self.scheme == "implicit" and self.implicit_mass == "consistent"

    @property
    def filter_beta(self) -> float:
        """β of the implicit force filter: ``implicit_beta`` for ``scheme='implicit'``, 0 (no filter) for the LGVI."""
        return float(self.implicit_beta) if self.scheme == "implicit" else 0.0

    @property
    def filter_dissipation(self) -> float:
        """ζ of the implicit step's numerical damping: ``implicit_dissipation`` for ``scheme='implicit'``, else 0."""
        return float(self.implicit_dissipation) if self.scheme == "implicit" else 0.0


@dataclasses.dataclass(frozen=True)
class RodSetup:
    """What acts on the rod during one simulation and where it starts.

    Attributes:
        loads: :class:`~flexlearn.physics.cosserat.loads.RodLoad` s (gravity, magnets, point forces, …).
        damping: a :class:`~flexlearn.physics.cosserat.damping.DampingModel` (None: conservative).
        initial: the :class:`~flexlearn.physics.cosserat.state.RodState` at t = 0 (None: at rest, straight
            along the base axis).
        base: how the rod is held (:data:`~flexlearn.physics.cosserat.supports.Supports`): a
            :class:`~flexlearn.physics.cosserat.state.Clamp` (None: clamped at the origin, rod along world z) or
            :class:`~flexlearn.physics.cosserat.state.Pin` (node 0 unless it names another), a list of them (each
            names its ``node``, −1 the last; e.g. a cable pinned at both ends: ``[Pin(), Pin(node=-1)]``), or
            ``"free"``. The reactions of the supports are recorded in ``Trajectory.reactions``.
        observer: a :class:`~flexlearn.physics.cosserat.damping.RodObserver` (e.g. the seed's
            :class:`~flexlearn.physics.cosserat.damping.DampingEstimator`) whose force drives the model while
            it runs alongside.
    """

    loads: Sequence[RodLoad] = ()
    damping: Optional[DampingModel] = None
    initial: Optional[RodState] = None
    base: Supports = None
    observer: Optional[RodObserver] = None

    def tensors(self) -> list[Tensor]:
        """Every tensor of the loads, the damping model and the initial state (for the gradient checks)."""
        out: list[Tensor] = []
        for owner in [*self.loads, self.damping]:
            if isinstance(owner, torch.nn.Module):
                out += list(owner.parameters()) + list(owner.buffers())
        if self.initial is not None:
            s = self.initial
            out += [s.positions, s.rotations, s.velocities, s.angular_velocities]
        return [t for t in out if t is not None]


class SimulatedRod(Protocol):
    """What the integrator and the fused kernel need of a rod model (the contract
    :class:`~flexlearn.physics.cosserat.rod.CosseratRod` fulfils)."""

    length: Tensor
    batched: bool
    strain: str  # 'midpoint', 'geodesic' or 'nodes' (:mod:`~flexlearn.physics.cosserat.strains`)

    @property
    def batch_size(self) -> int:
        """B, the number of rods simulated at once."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]:
        """The rod's parameters (``torch.nn.Module``).

        Args:
            recurse: Include the parameters of submodules.

        Returns:
            Iterator over the parameters.
        """
        ...

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The rod's buffers (``torch.nn.Module``).

        Args:
            recurse: Include the buffers of submodules.

        Returns:
            Iterator over the buffers.
        """
        ...

    def context(self, loads: Sequence[RodLoad] = (), dtype: torch.dtype = torch.float64) -> RodContext:
        """The per-simulation context with the loads' point masses added.

        Args:
            loads: The loads of the run (their point masses are added to the nodes).
            dtype: Floating-point dtype of the context's tensors.

        Returns:
            The :class:`~flexlearn.physics.cosserat.context.RodContext`.
        """
        ...

    def straight_state(self, base: Optional[Clamp] = None, dtype: torch.dtype = torch.float64) -> RodState:
        """The rest configuration along the base's axis.

        Args:
            base: The clamp whose pose the rod starts from; None for a clamp at the origin, identity frame.
            dtype: Floating-point dtype of the state.

        Returns:
            The :class:`~flexlearn.physics.cosserat.state.RodState` at rest.
        """
        ...

    def stable_dt(self, safety: float = 0.65) -> Tensor:
        """(B,) estimate of the largest stable LGVI step [s].

        Args:
            safety: Factor applied to the estimated stability limit.

        Returns:
            Time step [s], shape (B,).
        """
        ...
