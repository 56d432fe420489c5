"""Built on the differentiable equilibrium: the seed's actuation path, inverse statics, stiffness identification.

All gradients come from `CPRModel.solve`'s implicit differentiation (one linearisation at the converged
point, Newton never unrolled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch import Tensor

from flexlearn.errors import FlexlearnError
from flexlearn.physics.lse.errors import IdentificationError
from flexlearn.physics.lse.model import CPRModel
from flexlearn.physics.lse.state import Equilibrium, Loads

__all__ = ["actuation_path", "solve_path", "InverseStaticsResult", "inverse_statics", "identify_youngs_modulus"]


def actuation_theta(phase: Tensor | float) -> Tensor:
    """Seed eq. (39): ``θ = -π/12 [sin φ + 1, sin(φ + 2π/3) + 1, sin(φ + 4π/3) + 1]`` (..., 3) [rad], φ = ωt.

    Args:
        phase: The phase φ [rad] (scalar or tensor (...)).

    Returns:
        θ (..., 3) [rad], float64.
    """
    phi = torch.as_tensor(phase, dtype=torch.float64)[..., None]
    shift = torch.tensor([0.0, 2 * math.pi / 3, 4 * math.pi / 3], dtype=torch.float64)
    return -math.pi / 12 * (torch.sin(phi + shift) + 1.0)


def actuation_path(n_phases: int = 10, substeps: int = 4) -> tuple[Tensor, Tensor, list[int]]:
    """The seed's protocol (Sec. VI-B): zero angles (sample 1), a constant-speed ramp to θ(φ=0) (its end is
    sample 2), then one period sampled at ``n_phases`` uniform phases starting at φ = 0 (11 samples in all).

    Returns ``(samples (n_phases + 1, 3), dense (K, 3), sample_index)``: the dense path inserts ``substeps``
    intermediate points between consecutive samples (for warm starts); ``dense[sample_index[j]]`` is sample j.

    Args:
        n_phases: Uniform phases of the period.
        substeps: Dense points per interval between consecutive samples.
    """
    phases = torch.arange(n_phases, dtype=torch.float64) * (2 * math.pi / n_phases)
    samples = torch.cat([torch.zeros(1, 3, dtype=torch.float64), actuation_theta(phases)])
    dense = [samples[0]]
    index = [0]
    ramp_end = samples[1]
    for k in range(1, substeps + 1):
        dense.append(ramp_end * k / substeps)
    index.append(len(dense) - 1)
    for j in range(1, n_phases):
        for k in range(1, substeps + 1):
            phi = phases[j - 1] + (phases[j] - phases[j - 1]) * k / substeps
            dense.append(actuation_theta(phi))
        index.append(len(dense) - 1)
    return samples, torch.stack(dense), index


def solve_path(
    model: CPRModel, thetas: Tensor, loads: Optional[Loads] = None, init: Optional[Equilibrium] = None, **kw
) -> list[Equilibrium]:
    """Warm-started forward statics along a sequence of motor angles (K, M).

    Args:
        model: The robot.
        thetas: Motor angles (K, M) [rad].
        loads: The applied loads (None: as in `CPRModel.solve`).
        init: Equilibrium to warm-start the first solve, or None.
        **kw: Further keyword arguments of `CPRModel.solve`.

    Returns:
        One equilibrium per row of ``thetas``.
    """
    out = []
    eq = init
    for th in thetas:
        eq = model.solve(th, loads, init=eq, **kw)
        out.append(eq)
    return out


@dataclass
class InverseStaticsResult:
    """theta (M,) [rad]; position (3,) reached [m]; error [m]; feasible: the target was reached within tol with
    θ inside the motor limits on a stable equilibrium; at_limit: motors saturated at a limit; iterations;
    message; stable: the equilibrium at θ is stable (:class:`~flexlearn.physics.lse.state.Stability`; an
    unstable one is never reported feasible)."""

    theta: Tensor
    position: Tensor
    error: float
    feasible: bool
    at_limit: list[bool]
    iterations: int
    equilibrium: Equilibrium
    message: str
    stable: bool = True


def _position_and_jacobian(
    model: CPRModel, theta: Tensor, loads: Optional[Loads], init: Optional[Equilibrium]
) -> tuple[Tensor, Tensor, Equilibrium]:
    if theta.numel() == 0:  # no motors: nothing to differentiate (the position is that of the loads alone)
        eq = model.solve(theta.detach(), loads, init=init)
        return eq.position.detach(), theta.new_zeros(3, 0), eq.detach()
    th = theta.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        eq = model.solve(th, loads, init=init)
        p = eq.position
        rows = [torch.autograd.grad(p[i], th, retain_graph=i < 2)[0] for i in range(3)]
    return p.detach(), torch.stack(rows), eq.detach()


def inverse_statics(
    model: CPRModel,
    target: Tensor,
    theta0: Optional[Tensor] = None,
    loads: Optional[Loads] = None,
    tol: float = 1e-7,
    max_iter: int = 30,
    init: Optional[Equilibrium] = None,
    max_step: float = 0.05,
) -> InverseStaticsResult:
    """Motor angles that put the end-effector at ``target`` (3,) [m] (Levenberg–Marquardt, box-constrained).

    The Jacobian dp_ee/dθ comes from implicit differentiation of the equilibrium. Feasibility is reported,
    not raised: ``feasible`` is False when the target is not reached within ``tol`` (out of the workspace or
    beyond the motor limits), with ``at_limit`` flags and the remaining ``error``.

    Args:
        model: The robot.
        target: Target end-effector position (3,) [m].
        theta0: Starting motor angles (M,) [rad]; None = 0. Clamped to the motor limits.
        loads: The applied loads (None: as in `CPRModel.solve`).
        tol: Tolerance on the position error [m].
        max_iter: Most Levenberg–Marquardt iterations.
        init: Equilibrium to warm-start the first solve, or None.
        max_step: Largest motor angle change per trial step [rad].

    Returns:
        The :class:`InverseStaticsResult`.
    """
    target = torch.as_tensor(target, dtype=torch.float64)
    m = model.motor_axis.shape[0]
    theta = torch.zeros(m, dtype=torch.float64) if theta0 is None else torch.as_tensor(theta0, dtype=torch.float64)
    lo, hi = float(model.motor_limits[0]), float(model.motor_limits[1])
    theta = theta.clamp(lo, hi)
    lam = 1e-6
    p, jac, eq = _position_and_jacobian(model, theta, loads, init)
    err = float((p - target).norm())
    it = 0
    while err > tol and it < max_iter and m > 0:
        it += 1
        e = target - p
        jtj = jac.T @ jac
        scale = float(jtj.diagonal().max()) + 1e-30
        improved = False
        for _ in range(8):
            step = torch.linalg.solve(jtj + lam * scale * torch.eye(m, dtype=torch.float64), jac.T @ e)
            big = float(step.abs().max())
            if big > max_step:  # trust region: warm-started solves stay cheap and on the same branch
                step = step * (max_step / big)
            th_new = (theta + step).clamp(lo, hi)
            try:
                p_new, jac_new, eq_new = _position_and_jacobian(model, th_new, loads, eq)
            except FlexlearnError:
                lam *= 10.0
                continue
            err_new = float((p_new - target).norm())
            if err_new < err:
                theta, p, jac, eq, err = th_new, p_new, jac_new, eq_new, err_new
                lam = max(lam / 10.0, 1e-9)
                improved = True
                break
            lam *= 10.0
        if not improved:
            break
    at_limit = [bool(abs(float(t) - lo) < 1e-9 or abs(float(t) - hi) < 1e-9) for t in theta]
    stab = eq.stability
    stable = stab is None or stab.stable
    feasible = err <= tol and stable
    if feasible:
        msg = "target reached"
    elif err <= tol and stab is not None:
        msg = (
            f"refused: the target is reached on an unstable equilibrium (smallest eigenvalue of the reduced "
            f"tangent stiffness {stab.min_eigenvalue:.3e} EI/L < 0)"
        )
    elif any(at_limit):
        msg = f"infeasible: motors {[i for i, a in enumerate(at_limit) if a]} at their limits, error {err:.3e} m"
    else:
        msg = f"infeasible: target not reachable (local minimum of the distance), error {err:.3e} m"
    return InverseStaticsResult(theta, p, err, feasible, at_limit, it, eq, msg, stable)


def identify_youngs_modulus(
    model: CPRModel,
    thetas: Tensor,
    measured: Tensor,
    loads: Optional[Sequence[Optional[Loads]]] = None,
    e0: Optional[float] = None,
    max_iter: int = 20,
    rtol: float = 1e-10,
) -> tuple[float, list[float]]:
    """Fit one Young's modulus E [Pa] (all rods; G/E kept) to measured end-effector positions.

    thetas (K, M) [rad], measured (K, 3) [m], loads: one `Loads` (or None) per sample. Gauss–Newton on
    log E with the sensitivities dp/dE from implicit differentiation (as the seed identified its rods'
    stiffness from end-effector positions, Sec. VI-B). Returns (E, cost history [m²]). The model's buffers
    are left at the identified value.

    Args:
        model: The robot; its moduli are overwritten.
        thetas: Motor angles (K, M) [rad].
        measured: Measured end-effector positions (K, 3) [m].
        loads: One `Loads` or None per sample; None = None for all.
        e0: Starting Young's modulus [Pa]; None = the model's (first rod).
        max_iter: Most Gauss–Newton iterations.
        rtol: Stop when the step in log E falls below this.

    Returns:
        ``(E [Pa], cost history [m²])``.

    Raises:
        IdentificationError: Mismatched shapes or non-finite measurements.
    """
    thetas = torch.as_tensor(thetas, dtype=torch.float64)
    measured = torch.as_tensor(measured, dtype=torch.float64)
    if thetas.shape[0] != measured.shape[0] or measured.shape[-1] != 3:
        raise IdentificationError(
            f"need one (3,) measurement per motor sample, got {tuple(thetas.shape)} and {tuple(measured.shape)}"
        )
    if not bool(torch.isfinite(measured).all()):
        raise IdentificationError("measured positions contain NaN or inf")
    loads = [None] * len(thetas) if loads is None else list(loads)
    e_ref = model.youngs_modulus.detach().clone()
    g_ratio = (model.shear_modulus.detach() / e_ref).clone()
    log_e = math.log(float(e_ref[0]) if e0 is None else e0)
    history: list[float] = []
    inits: list[Optional[Equilibrium]] = [None] * len(thetas)
    try:
        for _ in range(max_iter):
            le = torch.tensor(log_e, dtype=torch.float64, requires_grad=True)
            res, jac = [], []
            with torch.enable_grad():
                e = torch.exp(le)
                model.youngs_modulus = e * torch.ones_like(e_ref)
                model.shear_modulus = e * g_ratio
                for k, (th, ld) in enumerate(zip(thetas, loads)):
                    eq = model.solve(th, ld, init=inits[k])
                    inits[k] = eq.detach()
                    p = eq.position
                    r = p - measured[k]
                    res.append(r.detach())
                    jac.append(torch.stack([torch.autograd.grad(r[i], le, retain_graph=True)[0] for i in range(3)]))
            r = torch.cat(res)
            j = torch.cat(jac)
            cost = float(r @ r)
            history.append(cost)
            step = -float(j @ r) / max(float(j @ j), 1e-300)
            step = max(min(step, 1.0), -1.0)
            log_e += step
            if abs(step) < rtol:
                break
    finally:
        model.youngs_modulus = torch.full_like(e_ref, math.exp(log_e))
        model.shear_modulus = math.exp(log_e) * g_ratio
    return math.exp(log_e), history
