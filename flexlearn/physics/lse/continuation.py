"""Load continuation that follows the stable branch of LSE statics through bifurcations.

Newton (:meth:`CPRModel.solve <flexlearn.physics.lse.solver.SolverMixin.solve>`) converges to the nearest
equilibrium, stable or not: a straight clamped–free column under 1.1× its Euler load solved from straight stays
straight (unstable), and small load steps do not help, because the straight state is an equilibrium at every
load. :func:`follow_stable` steps the load factor λ: 0 → 1 on ``(λ θ, λ loads)`` and checks the
:class:`~flexlearn.physics.lse.state.Stability` of every converged step:

* step-size control: a step that does not converge is halved (down to ``min_step``), a converged one doubles
  the next (up to ``max_step``), a converged one that lost stability is halved until it is at most ``locate``
  long (which also undoes a Newton jump onto another, unstable branch); the Newton solves are warm-started
  and never fall back to a restart from the straight configuration (which could jump to another branch);
* branch switching: when the smallest eigenvalue of the reduced tangent turns negative between λ_a (stable) and
  λ_b, the eigenvector φ at λ_b (the buckling mode) becomes a small imperfection load, the generalised force
  ``ε φ`` (ε = ``imperfection`` × max(EI/L), node moments ``R_j φ_rot``, forces ``R_j φ_trans / L``), and the
  step is redone from λ_a with it: the imperfect path has no bifurcation and bends smoothly onto the branch
  along +φ (for a symmetric bifurcation ±φ are mirror images). At λ = 1 the imperfection is removed in steps
  (ε → 0, warm-started), which leaves the equilibrium on the stable branch of the perfect problem.

The final equilibrium's stability is checked; the result says how it was reached. Not in the seed.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Optional

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.lse.errors import ConvergenceError
from flexlearn.physics.lse.model import CPRModel
from flexlearn.physics.lse.newton_policy import NewtonSettings
from flexlearn.physics.lse.state import Equilibrium, Loads

__all__ = ["ContinuationOptions", "ContinuationResult", "follow_stable", "imperfection_loads"]


@dataclasses.dataclass(frozen=True)
class ContinuationOptions:
    """Step control and branch switching of :func:`follow_stable` (checked when built: a ConfigError naming the
    field).

    Attributes:
        first_step: the first load-factor step Δλ (0, 1].
        min_step: below this Δλ a failing step ends the continuation (failure).
        locate: a step that loses stability is halved until it is at most this long (the loss is located to
            within it; a Newton jump onto an unstable branch of the same load is undone so).
        max_step: the largest Δλ.
        imperfection: ε of the branch-switching imperfection, relative to max(EI/L) [-].
        unload_steps: steps of the imperfection removal at λ = 1 (at least; halved on failure).
        max_stages: the most load steps tried in all.
        max_switches: the most branch switches.
        newton: the settings of every inner solve (their ``max_continuation`` is set to 0: no restart from straight).
    """

    first_step: float = 0.1
    min_step: float = 1e-4
    locate: float = 1e-2
    max_step: float = 0.25
    imperfection: float = 1e-3
    unload_steps: int = 4
    max_stages: int = 400
    max_switches: int = 4
    newton: NewtonSettings = NewtonSettings()

    def __post_init__(self) -> None:
        """Check every field (a ConfigError naming it)."""
        for name in ("first_step", "min_step", "max_step", "locate"):
            v = getattr(self, name)
            check(isinstance(v, (int, float)) and 0 < v <= 1, name, v, "must be a number in (0, 1]")
        check(self.min_step <= self.first_step, "min_step", self.min_step, "must be <= first_step")
        check(
            isinstance(self.imperfection, (int, float)) and 0 < self.imperfection < 1,
            "imperfection",
            self.imperfection,
            "must be in (0, 1)",
        )
        for name in ("unload_steps", "max_stages", "max_switches"):
            v = getattr(self, name)
            check(isinstance(v, int) and v >= 1, name, v, "must be an integer >= 1")


@dataclasses.dataclass
class ContinuationResult:
    """What :func:`follow_stable` found.

    Attributes:
        equilibrium: the equilibrium at λ = 1 (or the last converged one when ``reached`` is False).
        reached: λ = 1 was reached without the imperfection.
        stable: the final equilibrium is stable.
        path: ``(λ, smallest eigenvalue)`` of every accepted step (ε > 0 steps included).
        switches: the load factors λ_b at which the branch was switched.
        halvings: the step halvings (failed steps) in all.
        message: one line: how it ended.
    """

    equilibrium: Equilibrium
    reached: bool
    stable: bool
    path: list[tuple[float, float]]
    switches: list[float]
    halvings: int
    message: str


def imperfection_loads(model: CPRModel, eq: Equilibrium, mode: Tensor, amplitude: float) -> Loads:
    """The dead loads whose generalised force in the scaled unknowns of :meth:`CPRModel.reduced_tangent` is
    ``amplitude · mode``: node j of rod i gets the world moment ``a R_ij φ_rot`` [N·m] and force
    ``a R_ij φ_trans / L`` [N], the platform ``a R_ee φ_ee`` likewise (virtual work ``mᵀ R δθ + fᵀ R δp``).

    Args:
        model: the robot.
        eq: the equilibrium whose node frames carry the mode.
        mode: (R·6(N−1) + 6,) a mode in the scaled node unknowns (``Stability.mode``).
        amplitude: a [N·m].

    Returns:
        :class:`Loads` with only ``node_wrenches`` (R, N+1, 6) and ``ee_wrench`` (6,), no gravity.
    """
    r, n = model.n_rods, model.n_elements
    length = float(model.lengths.mean())
    nz = 6 * (n - 1)
    phi = mode.detach().to(torch.float64)
    node_phi = phi[: r * nz].reshape(r, n - 1, 6)
    rot = eq.nodes[:, 1:-1, :3, :3].detach()
    m = (rot @ node_phi[..., :3, None]).squeeze(-1)
    f = (rot @ node_phi[..., 3:, None]).squeeze(-1) / length
    wn = torch.zeros(r, n + 1, 6, dtype=torch.float64)
    wn[:, 1:-1] = amplitude * torch.cat([m, f], -1)
    ree = eq.g_ee[:3, :3].detach()
    pe = phi[r * nz :]
    we = amplitude * torch.cat([ree @ pe[:3], ree @ pe[3:] / length])
    return Loads(ee_wrench=we, node_wrenches=wn, gravity=False)


def _combined(loads: Loads, lam: float, imp: Optional[Loads], eps: float) -> Loads:
    """``λ loads + ε imp`` (the imperfection's tensors added to the dead wrenches)."""
    out = loads.scaled(lam)
    if imp is None or eps == 0.0:
        return out
    assert imp.ee_wrench is not None and imp.node_wrenches is not None, "imperfection_loads sets both"
    ee = eps * imp.ee_wrench if out.ee_wrench is None else out.ee_wrench + eps * imp.ee_wrench
    wn = eps * imp.node_wrenches if out.node_wrenches is None else out.node_wrenches + eps * imp.node_wrenches
    return dataclasses.replace(out, ee_wrench=ee, node_wrenches=wn)


class _Path:
    """The state of one continuation: the last accepted equilibrium, its load factor and the records."""

    def __init__(self, model: CPRModel, theta: Tensor, loads: Loads, options: ContinuationOptions):
        self.model, self.theta, self.loads, self.options = model, theta, loads, options
        self.settings = dataclasses.replace(options.newton, max_continuation=0, stability=True)
        self.path: list[tuple[float, float]] = []
        self.switches: list[float] = []
        self.halvings = 0
        self.stages = 0

    def solve(self, lam: float, imp: Optional[Loads], eps: float, init: Optional[Equilibrium]) -> Optional[Equilibrium]:
        """The equilibrium at ``(λ θ, λ loads + ε imp)`` warm-started from ``init``; None when Newton fails."""
        self.stages += 1
        try:
            return self.model.solve(
                lam * self.theta, _combined(self.loads, lam, imp, eps), init=init, settings=self.settings
            )
        except ConvergenceError:
            return None

    def march(
        self, eq: Equilibrium, start: float, problem: Callable[[float, Equilibrium], Optional[Equilibrium]]
    ) -> tuple[Equilibrium, float, Optional[tuple[Equilibrium, float]]]:
        """Step a factor s from ``start`` to 1 with ``problem(s, init)``, halving failed steps and doubling
        accepted ones. Returns the last accepted (stable) equilibrium, its factor, and the first converged
        step that lost stability with its factor (None when none did)."""
        s, step = start, self.options.first_step
        while s < 1.0 and self.stages < self.options.max_stages:
            trial = min(1.0, s + step)
            new = problem(trial, eq)
            if new is None:
                self.halvings += 1
                step *= 0.5
                if step < self.options.min_step:
                    break
                continue
            stab = new.stability
            assert stab is not None, "the inner solves compute the stability"
            if not stab.stable:
                if trial - s > self.options.locate:  # locate the loss (or undo a jump to another branch)
                    step = 0.5 * (trial - s)
                    continue
                return eq, s, (new, trial)
            eq, s = new, trial
            self.path.append((s, stab.min_eigenvalue))
            step = min(2.0 * step, self.options.max_step)
        return eq, s, None


def _solve_with(
    run: _Path, imp: Optional[Loads], eps: float, lam: float, init: Optional[Equilibrium]
) -> Optional[Equilibrium]:
    """``run.solve`` with the imperfection fixed: the solve ``_Path.march`` steps with."""
    return run.solve(lam, imp, eps, init)


def follow_stable(
    model: CPRModel, theta: Tensor, loads: Optional[Loads] = None, options: Optional[ContinuationOptions] = None
) -> ContinuationResult:
    """The stable equilibrium at motor angles θ under ``loads``, reached by load continuation with branch
    switching from the unloaded straight configuration (module docstring).

    Args:
        model: the robot.
        theta: (M,) motor angles [rad] at λ = 1.
        loads: the loads at λ = 1 (default: gravity only).
        options: step control and branch switching (:class:`ContinuationOptions`).

    Returns:
        A :class:`ContinuationResult`; ``reached`` and ``stable`` say whether it succeeded (nothing is raised for
        a failed continuation: the message names the load factor where it stopped).

    Raises:
        StaticsInputError: θ of the wrong shape or not finite.
        ConvergenceError: the unloaded configuration itself does not converge.
    """
    opts = ContinuationOptions() if options is None else options
    loads = Loads() if loads is None else loads
    return _follow(model, torch.as_tensor(theta, dtype=torch.float64), loads, opts)


def _follow(model: CPRModel, theta: Tensor, loads: Loads, opts: ContinuationOptions) -> ContinuationResult:
    """:func:`follow_stable` after its defaults (the solve at λ = 0 checks θ)."""
    run = _Path(model, theta, loads, opts)
    eq = run.solve(0.0, None, 0.0, None)
    if eq is None:
        raise ConvergenceError("follow_stable: the unloaded configuration did not converge", float("nan"), 0, [])
    scale = float((model.stiffness()[:, :3].max(-1).values / model.lengths).detach().max())
    imp: Optional[Loads] = None
    eps, lam = 0.0, 0.0
    while True:
        eq, lam, lost = run.march(eq, lam, functools.partial(_solve_with, run, imp, eps))
        if lost is None or len(run.switches) >= opts.max_switches:
            break
        # stability lost between λ = lam (stable, eq) and λ_b: an imperfection along the mode at λ_b, from eq
        bad, lam_b = lost
        assert bad.stability is not None, "the inner solves compute the stability"
        run.switches.append(lam_b)
        new_imp = imperfection_loads(model, bad, bad.stability.mode, opts.imperfection * scale)
        imp, eps = _sum_imperfections(imp, eps, new_imp), 1.0
        again = run.solve(lam, imp, eps, eq)
        if again is None:
            break
        eq = again
    if lam < 1.0:
        return _result(eq, False, run, f"continuation stopped at load factor {lam:.6g}")
    if imp is not None:
        eq, done = _remove_imperfection(run, eq, imp, opts)
        if not done:
            return _result(eq, False, run, "the imperfection could not be removed at load factor 1")
    stab = eq.stability
    ok = stab is not None and stab.stable
    msg = "stable equilibrium reached" + (f" after branch switching at λ = {run.switches}" if run.switches else "")
    return _result(eq, True, run, msg if ok else "load factor 1 reached on an unstable branch")


def _sum_imperfections(imp: Optional[Loads], eps: float, new: Loads) -> Loads:
    """The imperfection in force plus a new one (several switches add up)."""
    if imp is None:
        return new
    assert imp.ee_wrench is not None and imp.node_wrenches is not None and new.ee_wrench is not None
    assert new.node_wrenches is not None
    return Loads(
        ee_wrench=eps * imp.ee_wrench + new.ee_wrench,
        node_wrenches=eps * imp.node_wrenches + new.node_wrenches,
        gravity=False,
    )


def _remove_imperfection(
    run: _Path, eq: Equilibrium, imp: Loads, opts: ContinuationOptions
) -> tuple[Equilibrium, bool]:
    """ε: 1 → 0 at λ = 1 in warm-started steps (halved on failure)."""
    eps, step = 1.0, 1.0 / opts.unload_steps
    while eps > 0.0 and run.stages < opts.max_stages:
        trial = max(0.0, eps - step)
        new = run.solve(1.0, imp, trial, eq)
        if new is None:
            run.halvings += 1
            step *= 0.5
            if step < opts.min_step:
                return eq, False
            continue
        eq, eps = new, trial
    return eq, eps == 0.0


def _result(eq: Equilibrium, reached: bool, run: _Path, message: str) -> ContinuationResult:
    stab = eq.stability
    stable = stab is not None and stab.stable
    return ContinuationResult(eq, reached, stable, run.path, run.switches, run.halvings, message)
