"""The stopping and step-control rules of the LSE Riemannian Newton solve (seed 003, Sec. V-E), in one place.

Both Newton drivers call these functions at the same points of the same loop: the torch one
(:meth:`CPRModel._newton <flexlearn.physics.lse.model.CPRModel._newton>`, through ``.py_func``) and the compiled
one (:func:`flexlearn.physics.lse.compiled.newton.newton_iterations`, inlined by numba). One iteration::

    residual_verdict(norm, first, it, tol, max_iter)    CONVERGED: stop | FAILED: stop | CONTINUE
    (tangent, correction δq)
    step_verdict(|δq|_w, step_tol)                      CONVERGED: apply δq, stop | FAILED: stop | CONTINUE
    α = step_scale(max nodal rotation of δq, max_rot)   rotation step cap (damping)
    trial q ⊕ α δq, accepted when accept_trial(norm(trial), norm, growth), else α ← BACKTRACK_FACTOR α
    (at most ``backtracks`` halvings; the last trial is taken anyway)

Norms: ``norm`` is the scaled residual ∞-norm (entries in N·m, relative to the load scale, dimensionless);
``|δq|_w`` the weighted step ∞-norm (rotations [rad], translations / L, slopes × L²). Plain functions of
scalars, compiled by numba (``cache=True``) and callable from Python as ``f.py_func`` (or ``f`` itself
without numba). The constants are module globals: numba freezes them into the machine code, so this file
is part of the LSE kernels' cache fingerprint (:data:`flexlearn.physics.lse.compiled.elements.CACHE_SOURCES`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flexlearn.physics.lse.compiled.linalg import njit

__all__ = [
    "BACKTRACKS",
    "BACKTRACK_FACTOR",
    "CONTINUE",
    "CONVERGED",
    "DIVERGED",
    "DIVERGED_FLOOR",
    "FAILED",
    "GROWTH",
    "MAX_CONTINUATION",
    "MAX_ITER",
    "MAX_ROTATION_STEP",
    "NewtonSettings",
    "STALL_ITERS",
    "STEP_TOL",
    "TOL",
    "accept_trial",
    "py",
    "residual_verdict",
    "step_scale",
    "step_verdict",
]

TOL = 1e-8  # scaled residual ∞-norm below which Newton has converged (solve's default)
MAX_ITER = 15  # Newton iterations before failure (solve's default)
STEP_TOL = 1e-13  # weighted step ∞-norm of the round-off floor: apply that correction and stop
MAX_ROTATION_STEP = 0.5  # [rad] largest nodal rotation of one step (solve's default)
GROWTH = 3.0  # a trial step is accepted when its residual is ≤ GROWTH × the current one
BACKTRACKS = 0  # halvings of a rejected trial step (0: the relaxed test never backtracks)
BACKTRACK_FACTOR = 0.5
DIVERGED = 1e3  # failure: residual above DIVERGED × max(first residual, DIVERGED_FLOOR)
DIVERGED_FLOOR = 10.0
STALL_ITERS = 6  # failure: still above the first residual after this many iterations

MAX_CONTINUATION = 64  # stages of each continuation fallback of solve (solve's default)

CONTINUE, CONVERGED, FAILED = 0, 1, 2


@dataclass(frozen=True)
class NewtonSettings:
    """The stopping and step rules of one forward solve (:meth:`CPRModel.solve
    <flexlearn.physics.lse.solver.SolverMixin.solve>`); the defaults are this module's constants.

    Args:
        tol: Scaled residual ∞-norm below which Newton has converged (dimensionless, see the module docstring).
        max_iter: Newton iterations before failure.
        max_rotation_step: Largest nodal rotation of one step [rad] (damping).
        max_continuation: Stages of each continuation fallback (in θ from the warm start, in the load factor from
            the straight configuration).
        step_tol: Weighted step ∞-norm of the round-off floor (rad, and L-scaled lengths): that correction is
            applied and Newton stops.
        stability: Compute the equilibrium's :class:`~flexlearn.physics.lse.state.Stability` (one eigenvalue
            problem of the reduced tangent, R·6(N−1) + 6 unknowns); False leaves ``Equilibrium.stability`` None.
    """

    tol: float = TOL
    max_iter: int = MAX_ITER
    max_rotation_step: float = MAX_ROTATION_STEP
    max_continuation: int = MAX_CONTINUATION
    step_tol: float = STEP_TOL
    stability: bool = True


@njit(cache=True)
def residual_verdict(norm, first, it, tol, max_iter):
    """Verdict on the residual ``norm`` after ``it`` iterations (``first``: the starting residual).

    CONVERGED when not ``norm > tol`` (a NaN residual included, as the drivers' ``while norm > tol`` always
    had it), FAILED on ``it ≥ max_iter``, an infinite residual, growth above DIVERGED × max(first, 10) or no
    progress after STALL_ITERS iterations; else CONTINUE.

    Args:
        norm: Current scaled residual norm.
        first: Scaled residual norm of the starting state.
        it: Iterations done.
        tol: Residual tolerance.
        max_iter: Iteration limit.

    Returns:
        CONVERGED, FAILED or CONTINUE.
    """
    if not norm > tol:
        return CONVERGED
    if (
        it >= max_iter
        or not math.isfinite(norm)
        or norm > DIVERGED * max(first, DIVERGED_FLOOR)
        or (it >= STALL_ITERS and norm > first)
    ):
        return FAILED
    return CONTINUE


@njit(cache=True)
def step_verdict(step_norm, step_tol):
    """Verdict on the weighted ∞-norm of a Newton correction: FAILED when not finite, CONVERGED below
    ``step_tol`` (the residual cannot drop further: the correction is applied, no new residual), else CONTINUE.

    Args:
        step_norm: Weighted ∞-norm of the correction.
        step_tol: Step tolerance.

    Returns:
        CONVERGED, FAILED or CONTINUE.
    """
    if not math.isfinite(step_norm):
        return FAILED
    if step_norm < step_tol:
        return CONVERGED
    return CONTINUE


@njit(cache=True)
def step_scale(big, max_rot):
    """Step length α ∈ (0, 1] so that no nodal rotation increment exceeds ``max_rot`` [rad] (``big``: the
    largest one of the full step [rad]).

    Args:
        big: Largest nodal rotation increment of the full step [rad].
        max_rot: Cap [rad].

    Returns:
        α.
    """
    return 1.0 if big <= max_rot else max_rot / big


@njit(cache=True)
def accept_trial(trial_norm, norm, growth):
    """Relaxed backtracking test: the trial residual may grow up to ``growth``-fold (the stiff axial and shear
    terms make good Newton steps raise it transiently).

    Args:
        trial_norm: Scaled residual norm of the trial state.
        norm: Scaled residual norm of the current state.
        growth: Accepted growth factor.

    Returns:
        Whether the trial is accepted.
    """
    return trial_norm <= growth * norm


def py(f):
    """The plain-Python function behind a numba dispatcher (itself without numba).

    Args:
        f: A numba dispatcher or a plain function.

    Returns:
        ``f.py_func``, or ``f`` itself.
    """
    return getattr(f, "py_func", f)
