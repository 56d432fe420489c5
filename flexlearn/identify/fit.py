"""Least-squares fitting through a differentiable model: Jacobians, Levenberg–Marquardt steps, and the
Hessian-based uncertainty and identifiability report.

A *problem* (:class:`IdentificationProblem`, a ``typing.Protocol``) supplies ``params``
(:class:`~flexlearn.identify.params.ParameterSet`), ``measured`` (M,) and ``sigma`` (M,) or scalar (the
measurement noise std, physical units), ``predict(values) -> (M,)`` and ``jacobian_mode``
('forward', 'reverse' or 'difference'); a :class:`StagedProblem` also has ``horizons`` and ``set_horizon``
(fitted on growing prefixes of its recording, :class:`~flexlearn.identify.task.IdentificationTask`). Whitened residuals
``r = (predict(p(u)) − measured)/σ``; cost ``C = ½ rᵀr``.

Gauss–Newton Hessian in the unconstrained coordinates ``u``: ``H = JᵀJ`` with ``J = ∂r/∂u`` (M, P).
Scaled covariance (noise level estimated from the fit): ``Σ_u = s² H⁻¹``, ``s² = rᵀr/(M − P)``, taken
through the eigen-decomposition of ``H`` so that a (near-)singular direction gives a huge, finite
variance rather than a confident value. A parameter is reported identifiable when its relative standard
deviation is below ``max_rel_std`` and ``H`` is not numerically singular along it.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Protocol, Union, runtime_checkable

import torch
from torch import Tensor
from torch.autograd.forward_ad import dual_level, make_dual, unpack_dual

from flexlearn.errors import ArgumentError, FlexlearnError
from flexlearn.identify.params import ParameterSet

__all__ = [
    "IdentificationProblem",
    "StagedProblem",
    "whitened_residuals",
    "jacobian",
    "lm_step",
    "uncertainty",
    "fit_quality",
]


@runtime_checkable
class IdentificationProblem(Protocol):
    """A recording plus a differentiable model of it (read-only members: a problem may hold them as plain
    attributes). ``predict`` maps the physical values (P,) of ``params`` to the predicted measurements (M,),
    in the units of ``measured``; ``jacobian_mode`` says how :func:`jacobian` differentiates it."""

    @property
    def params(self) -> ParameterSet: ...

    @property
    def measured(self) -> Tensor: ...

    @property
    def sigma(self) -> Union[float, Tensor]: ...

    @property
    def jacobian_mode(self) -> str: ...

    def predict(self, values: Tensor) -> Tensor:
        """The model's prediction of the measurements.

        Args:
            values: physical parameter values (P,), in the order of ``params``.

        Returns:
            The predicted measurements (M,), in the units of ``measured``.
        """
        ...


@runtime_checkable
class StagedProblem(IdentificationProblem, Protocol):
    """A problem fitted on growing prefixes of its recording: ``horizons`` are fractions in (0, 1], the last
    1.0; ``set_horizon(fraction)`` makes ``measured`` and ``predict`` use that prefix."""

    @property
    def horizons(self) -> tuple[float, ...]: ...

    def set_horizon(self, fraction: float) -> None:
        """Make ``measured`` and ``predict`` use the first ``fraction`` of the recording.

        Args:
            fraction: share of the recording in (0, 1].
        """
        ...


_DIFF_STEP = 1e-6  # step in u of the 'difference' Jacobian
_EIG_FLOOR = 1e-14  # eigenvalues of H below this × λ_max count as zero (numerically singular)


def whitened_residuals(problem: IdentificationProblem, u: Optional[Tensor] = None) -> Tensor:
    """``(predict(p(u)) − measured)/σ`` (M,).

    Args:
        problem: the problem.
        u: unconstrained coordinates (P,); None: the current ``problem.params.u``.

    Returns:
        The whitened residuals (M,).
    """
    pred = problem.predict(problem.params.values(u))
    return (pred - problem.measured) / problem.sigma


def jacobian(fn: Callable[[Tensor], Tensor], u: Tensor, mode: str = "forward") -> tuple[Tensor, Tensor]:
    """``(fn(u), ∂fn/∂u)`` with shapes (M,), (M, P).

    ``mode='forward'``: P forward-mode passes (dual numbers; cheap when P ≪ M, e.g. long simulated
    trajectories). ``'reverse'``: one graph and M backward passes (for models whose gradients come from a
    custom rule, e.g. implicit differentiation, which forward mode does not see). ``'difference'``: P + 1
    evaluations without any graph, forward differences ``(fn(u + h e_i) − fn(u)) / h`` with h = 1e-6 in the
    O(1) coordinates u (truncation error ~h relative; for models run by compiled kernels that carry no
    derivatives, held to the forward mode by the tests).

    Args:
        fn: the model, u (P,) → (M,).
        u: the point (P,) (detached here).
        mode: ``'forward'`` or ``'reverse'``.

    Returns:
        ``(fn(u) (M,), ∂fn/∂u (M, P))``, both detached.

    Raises:
        ArgumentError: an unknown ``mode``, or no parameters (P = 0) in forward mode (also a ``ValueError``).
    """
    u = u.detach()
    if mode == "difference":
        if u.numel() == 0:
            raise ArgumentError("jacobian: no parameters (u is empty)")
        with torch.no_grad():
            f0 = fn(u).detach()
            diffs = []
            for i in range(u.numel()):
                du = torch.zeros_like(u)
                du[i] = _DIFF_STEP
                diffs.append((fn(u + du).detach() - f0) / _DIFF_STEP)
        return f0, torch.stack(diffs, -1)
    if mode == "forward":
        if u.numel() == 0:
            raise ArgumentError("jacobian: no parameters (u is empty)")
        cols: list[Tensor] = []
        value = u
        for i in range(u.numel()):
            tangent = torch.zeros_like(u)
            tangent[i] = 1.0
            with dual_level():
                out = fn(make_dual(u, tangent))
                primal, tan = unpack_dual(out)
            value = primal
            cols.append(torch.zeros_like(primal) if tan is None else tan)
        return value.detach(), torch.stack(cols, -1).detach()
    if mode != "reverse":
        raise ArgumentError(f"jacobian mode must be 'forward', 'reverse' or 'difference', got {mode!r}")
    uu = u.clone().requires_grad_(True)
    with torch.enable_grad():
        out = fn(uu)
        rows = [
            torch.autograd.grad(out[k], uu, retain_graph=k + 1 < out.numel(), allow_unused=True)[0]
            for k in range(out.numel())
        ]
    rows = [torch.zeros_like(u) if r is None else r for r in rows]
    return out.detach(), torch.stack(rows).detach()


def lm_step(problem: IdentificationProblem, lam: float, max_tries: int = 8) -> dict[str, Any]:
    """One Levenberg–Marquardt iteration on ``problem.params.u`` (in place).

    Step ``δ = −(H + λ diag(H))⁻¹ Jᵀr``; accepted when the cost decreases (λ ← λ/3), otherwise
    λ ← 4λ and retried up to ``max_tries`` times. Returns cost before/after, the new λ, the step norm and
    whether a step was accepted.

    Args:
        problem: the problem; its ``params.u`` is updated when a step is accepted.
        lam: the damping λ (> 0).
        max_tries: trials (λ ← 4λ after each rejected one) before giving up.

    Returns:
        {'cost', 'new_cost', 'lam', 'step', 'accepted', 'grad_norm'}: the costs before and after, the next λ,
        the step norm in u (0 when rejected), whether a step was taken and the gradient norm ``|Jᵀr|``.
    """
    params = problem.params
    u = params.u.detach().clone()
    r, J = jacobian(lambda v: whitened_residuals(problem, v), u, problem.jacobian_mode)
    cost = 0.5 * float(r @ r)
    g = J.T @ r
    H = J.T @ J
    d = H.diagonal().clamp_min(1e-12 * float(H.diagonal().max().clamp_min(1e-300)))
    for _ in range(max_tries):
        step = -torch.linalg.solve(H + lam * torch.diag(d), g)
        with torch.no_grad():
            try:
                r_new = whitened_residuals(problem, u + step)
                new_cost = 0.5 * float(r_new @ r_new)
            except (FlexlearnError, ArithmeticError, RuntimeError):  # a trial outside the model's domain
                # (an unstable simulation, a Newton solve that does not converge, a singular system)
                new_cost = math.inf
        if math.isfinite(new_cost) and new_cost < cost:
            with torch.no_grad():
                params.u.copy_(u + step)
            return {
                "cost": cost,
                "new_cost": new_cost,
                "lam": max(lam / 3.0, 1e-9),
                "step": float(step.norm()),
                "accepted": True,
                "grad_norm": float(g.norm()),
            }
        lam *= 4.0
    return {"cost": cost, "new_cost": cost, "lam": lam, "step": 0.0, "accepted": False, "grad_norm": float(g.norm())}


def uncertainty(problem: IdentificationProblem, max_rel_std: float = 0.1) -> dict[str, Any]:
    """Hessian at the current estimate: per-parameter std, relative std, identifiability; the condition
    number of ``H`` and the eigenvector of its weakest direction.

    Args:
        problem: the problem, at its current estimate ``params.u``.
        max_rel_std: relative std below which a parameter counts as identifiable.

    Returns:
        {'values', 'std', 'rel_std', 'identifiable' (P,); 'hessian_eigenvalues' (P,), 'hessian_cond',
        'weakest_direction' (P,), 'noise_scale' s, 'residuals' r (M,), 'jacobian' J (M, P)}; std in the
        parameters' physical units.
    """
    params = problem.params
    r, J = jacobian(lambda v: whitened_residuals(problem, v), params.u.detach(), problem.jacobian_mode)
    M, P = J.shape
    H = J.T @ J
    s2 = float(r @ r) / max(M - P, 1)
    evals, evecs = torch.linalg.eigh(H)
    lmax = float(evals.max().clamp_min(1e-300))
    floor = _EIG_FLOOR * lmax
    safe = evals.clamp_min(floor)
    cov_u = s2 * (evecs / safe) @ evecs.T
    std_u = cov_u.diagonal().clamp_min(0).sqrt()
    vals = params.values().detach()
    std_p = params.dvalue_du().abs() * std_u
    rel_std = std_p / vals
    singular = evals <= floor
    # a parameter takes part in a singular direction when that eigenvector has weight on it
    in_null = (evecs[:, singular].abs() > 1e-3).any(-1) if bool(singular.any()) else torch.zeros(P, dtype=torch.bool)
    identifiable = (rel_std < max_rel_std) & ~in_null
    return {
        "values": vals,
        "std": std_p,
        "rel_std": rel_std,
        "identifiable": identifiable,
        "hessian_eigenvalues": evals,
        "hessian_cond": lmax / max(float(evals.min()), floor),
        "weakest_direction": evecs[:, 0],
        "noise_scale": math.sqrt(s2),
        "residuals": r,
        "jacobian": J,
    }


def fit_quality(problem: IdentificationProblem, r: Tensor) -> dict[str, float]:
    """RMSE (physical units), χ²/dof, R² of the measurements, lag-1 autocorrelation of the residuals
    (≈ 0 for white noise; systematic model error shows as a large value).

    Args:
        problem: the problem (its ``sigma``, ``measured`` and parameter count).
        r: whitened residuals (M,) at the estimate.

    Returns:
        {'rmse', 'chi2_dof', 'r2', 'residual_lag1_autocorr', 'n_data', 'n_params'} as floats.
    """
    sigma = problem.sigma if torch.is_tensor(problem.sigma) else torch.tensor(float(problem.sigma))
    phys = r * sigma
    meas = problem.measured
    M, P = r.numel(), problem.params.u.numel()
    ss_tot = float(((meas - meas.mean()) ** 2).sum())
    ac = float((r[1:] * r[:-1]).sum() / (r * r).sum().clamp_min(1e-300)) if M > 1 else 0.0
    return {
        "rmse": float(phys.pow(2).mean().sqrt()),
        "chi2_dof": float(r @ r) / max(M - P, 1),
        "r2": 1.0 - float(phys @ phys) / max(ss_tot, 1e-300),
        "residual_lag1_autocorr": ac,
        "n_data": float(M),
        "n_params": float(P),
    }
