"""Backend selection and reusable derived data of :meth:`CPRModel.solve <flexlearn.physics.lse.model.CPRModel.solve>`.

* ``backend`` (an argument of ``solve``): ``"auto"`` runs the compiled (numba) Newton driver
  (:mod:`flexlearn.physics.lse.compiled.newton`) when :func:`eligible` finds nothing against it, else the torch
  driver with the compiled element kernels (:mod:`flexlearn.physics.lse.compiled.elements`) wherever nothing needs
  gradients and the fused torch kernels elsewhere; ``"numba"`` insists on the compiled driver (a
  ``ConfigError`` with the reason when it cannot run); ``"torch"`` runs the torch driver with the fused kernels
  (:mod:`flexlearn.physics.lse.fused`); ``"reference"`` the torch driver with the element functions of
  :mod:`flexlearn.physics.lse.element` (flexlearn.lie kernels; for checks). All give the same equilibria.
* :class:`SolverCache`: what solves reuse (the compiled driver's constant arrays, the base poses of the last θ),
  one object per model (``model.solver_cache``, made in ``CPRModel.__init__``), each entry keyed by a structural
  fingerprint (identity and version counter of every buffer it depends on), so a changed or replaced buffer is
  never served stale. ``solve`` itself writes nothing on the model.
* :class:`SolveRun`: the decisions and by-products of one ``solve`` call (never stored on the model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.lse.compiled.linalg import HAVE_NUMBA
from flexlearn.physics.lse.compiled.problem import CompiledConstants, build_constants
from flexlearn.physics.lse.newton_policy import NewtonSettings

__all__ = ["BACKENDS", "KERNELS", "SolvePlan", "SolveRun", "SolverCache", "eligible", "plan"]

BACKENDS = ("auto", "numba", "torch", "reference")
# the deprecated ``CPRModel.kernels`` values and the backend each stands for
KERNELS = {"numba": "auto", "fused": "torch", "reference": "reference"}


class SolvePlan(NamedTuple):
    """How a solve runs: ``compiled`` Newton driver, and the element kernels of the torch driver (``"numba"``:
    compiled kernels where nothing needs gradients, fused ones elsewhere; ``"fused"``; ``"reference"``)."""

    compiled: bool
    elements: str


def eligible(model, needs_grad: bool) -> str:
    """Why the compiled Newton driver cannot run a solve of ``model`` ('' when it can).

    Args:
        model: The `CPRModel` to solve.
        needs_grad: Whether the solve must be differentiable (implicit differentiation).

    Returns:
        The reason in words, or '' when the compiled driver can run.
    """
    if not HAVE_NUMBA:
        return "numba is not installed"
    if needs_grad:
        return "gradients (implicit differentiation) need the torch path"
    if model.retraction != "nodal":
        return f"the {model.retraction!r} retraction (single rods) runs on the torch path"
    return ""


def plan(model, backend: str, needs_grad: bool) -> SolvePlan:
    """The :class:`SolvePlan` of ``backend`` (module docstring). ``"auto"`` follows the deprecated
    ``model.kernels`` when that was set.

    Args:
        model: The `CPRModel` to solve.
        backend: One of :data:`BACKENDS`.
        needs_grad: Whether the solve must be differentiable.

    Returns:
        The plan: compiled driver or not, and the element kernels of the torch driver.

    Raises:
        ConfigError: ``backend`` is unknown, or ``"numba"`` where the compiled driver cannot run.
    """
    check(backend in BACKENDS, "backend", backend, f"must be one of {', '.join(map(repr, BACKENDS))}")
    if backend == "auto" and model._kernels is not None:
        backend = KERNELS[model._kernels]
    if backend == "torch":
        return SolvePlan(False, "fused")
    if backend == "reference":
        return SolvePlan(False, "reference")
    why = eligible(model, needs_grad)
    if backend == "numba":
        check(not why, "backend", backend, f"the compiled solver cannot run this solve: {why}")
        return SolvePlan(True, "numba")
    return SolvePlan(not why, "numba" if HAVE_NUMBA else "fused")


class SolverCache:
    """Derived data reused between solves of one model, each entry keyed by a structural fingerprint.

    ``constants(model)``: the compiled driver's :class:`~flexlearn.physics.lse.compiled.problem.CompiledConstants`,
    keyed on ``n_elements`` and the identity and version counter of every buffer. ``base_poses(model, θ)``: the rod
    base poses (R, 4, 4) of the last θ [rad] (M,), keyed on θ's values and the motor and base buffers (not cached
    while gradients are needed). ``clear()`` drops both.
    """

    def __init__(self) -> None:
        self._constants: Optional[tuple] = None
        self._bases: Optional[tuple] = None

    def clear(self) -> None:
        self._constants = None
        self._bases = None

    def constants(self, model) -> CompiledConstants:
        """The compiled driver's constant arrays of ``model``, rebuilt when its fingerprint changed.

        Args:
            model: The `CPRModel` whose constants are wanted.

        Returns:
            The cached or fresh :class:`~flexlearn.physics.lse.compiled.problem.CompiledConstants`.
        """
        key = (model.n_elements,) + tuple((id(b), b._version) for b in model._buffers.values() if b is not None)
        if self._constants is None or self._constants[0] != key:
            self._constants = (key, build_constants(model))
        return self._constants[1]

    def base_poses(self, model, theta: Tensor) -> Tensor:
        """The rod base poses (R, 4, 4) of ``model`` at ``theta``, reused when nothing changed.

        Args:
            model: The `CPRModel` whose base poses are wanted.
            theta: Motor angles (M,) [rad].

        Returns:
            The base poses (R, 4, 4), detached when cached (not cached while gradients are needed).
        """
        if torch.is_grad_enabled() and (theta.requires_grad or any(b.requires_grad for b in model.buffers())):
            return model.base_poses(theta)
        key = (
            tuple(theta.tolist()),
            model.base_pose0._version,
            model.motor_axis._version,
            model.motor_pivot._version,
            id(model.base_pose0),
        )
        if self._bases is None or self._bases[0] != key:
            self._bases = (key, model.base_poses(theta).detach())
        return self._bases[1]


@dataclass
class SolveRun:
    """One ``solve`` call: what every Newton run of it reads, and its by-products.

    Args:
        plan: The backend plan (:func:`plan`).
        cache: The model's :class:`SolverCache`.
        settings: Stopping and step rules (:class:`~flexlearn.physics.lse.newton_policy.NewtonSettings`).
        scale: Residual scale [N·m] of the scaled residual norm (max(EI/L, applied-load scale)).
        log: Every scaled residual norm, in order (appended to by each Newton run).
        w: The residual weights (12N,) of the torch driver.
        nodes: (g_ee, all nodes (R, N+1, 4, 4)) of the last compiled Newton call.
    """

    plan: SolvePlan
    cache: SolverCache
    settings: NewtonSettings = NewtonSettings()
    scale: float = 1.0
    log: list[float] = field(default_factory=list)
    w: Optional[Tensor] = None
    nodes: Optional[tuple] = None

    @property
    def compiled(self) -> bool:
        return self.plan.compiled

    @property
    def elements(self) -> str:
        return self.plan.elements

    def nodes_of(self, g_ee: Tensor) -> Optional[Tensor]:
        """All nodal poses of the last compiled Newton call when it ended at ``g_ee`` (else None).

        Args:
            g_ee: Platform pose (4, 4) tensor; matched by identity, not by value.

        Returns:
            The nodal poses (R, N+1, 4, 4), or None.
        """
        if self.nodes is not None and self.nodes[0] is g_ee:
            return self.nodes[1]
        return None
