"""One Newton policy for both LSE drivers (flexlearn.physics.lse.newton_policy): its rules, compiled and in
Python, and the torch and compiled drivers stopping at the same iteration, for the same reason, on the same problem."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.lse import CPRModel
from flexlearn.physics.lse import newton_policy as policy
from flexlearn.physics.lse.backend import SolveRun, eligible, plan
from flexlearn.physics.lse.compiled.linalg import HAVE_NUMBA
from flexlearn.physics.lse.newton_policy import CONTINUE, CONVERGED, FAILED

DT = torch.float64
INF, NAN = math.inf, math.nan
needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")


# (norm, first, it, tol, max_iter) -> verdict
RESIDUAL_CASES = [
    ((1e-9, 1.0, 3, 1e-8, 15), CONVERGED),
    ((1e-8, 1.0, 3, 1e-8, 15), CONVERGED),  # not > tol
    ((NAN, 1.0, 3, 1e-8, 15), CONVERGED),  # as `while norm > tol` always had it
    ((2e-8, 1.0, 15, 1e-8, 15), FAILED),  # max_iter
    ((INF, 1.0, 0, 1e-8, 15), FAILED),
    ((1.1e4, 5.0, 1, 1e-8, 15), FAILED),  # > 1e3 · max(first, 10)
    ((9.9e3, 5.0, 1, 1e-8, 15), CONTINUE),
    ((2.0, 1.0, 6, 1e-8, 15), FAILED),  # no progress after 6 iterations
    ((2.0, 1.0, 5, 1e-8, 15), CONTINUE),
    ((0.5, 1.0, 6, 1e-8, 15), CONTINUE),
]
STEP_CASES = [
    ((1e-14, 1e-13), CONVERGED),
    ((1e-13, 1e-13), CONTINUE),
    ((NAN, 1e-13), FAILED),
    ((INF, 1e-13), FAILED),
    ((0.3, 1e-13), CONTINUE),
]


@pytest.mark.parametrize("compiled", [False, True])
def test_policy_rules(compiled):
    if compiled and not HAVE_NUMBA:
        pytest.skip("numba not installed")
    f = (lambda g: g) if compiled else policy.py
    for args, want in RESIDUAL_CASES:
        assert f(policy.residual_verdict)(*args) == want, args
    for args, want in STEP_CASES:
        assert f(policy.step_verdict)(*args) == want, args
    assert f(policy.step_scale)(0.2, 0.5) == 1.0 and f(policy.step_scale)(2.0, 0.5) == 0.25
    assert f(policy.accept_trial)(3.0, 1.0, 3.0) and not f(policy.accept_trial)(3.1, 1.0, 3.0)
    assert not f(policy.accept_trial)(NAN, 1.0, 3.0)


def _newton(model, compiled: bool, th, loads, state, tol, max_iter, step_tol=policy.STEP_TOL):
    settings = policy.NewtonSettings(tol=tol, max_iter=max_iter, step_tol=step_tol)
    run = SolveRun(
        plan(model, "numba" if compiled else "torch", False),
        model.solver_cache,
        settings,
        scale=model._load_scale(loads, state[0]),
    )
    if not compiled:
        run.w = model.residual_weights()
    with torch.no_grad():
        ok, _, it, _, _ = model._newton(run, th, loads, state)
    return ok, it, run.log


@needs_numba
@pytest.mark.parametrize(
    "theta, tol, max_iter, step_tol, want",
    [
        ((0.02, -0.01, 0.0), policy.TOL, policy.MAX_ITER, policy.STEP_TOL, "converged"),  # residual below tol
        ((0.02, -0.01, 0.0), policy.TOL, 3, policy.STEP_TOL, "failed"),  # max_iter reached
        ((0.02, -0.01, 0.0), 0.0, policy.MAX_ITER, 1e-6, "converged"),  # the step rule
        ((-0.05, -0.1, -0.02), policy.TOL, policy.MAX_ITER, policy.STEP_TOL, "failed"),  # no progress after 6
    ],
)
def test_both_drivers_stop_at_the_same_iteration(theta, tol, max_iter, step_tol, want):
    """Cold starts from the straight robot under the pulley load: the torch and the compiled driver take the same
    number of iterations and stop with the same verdict (residual logs equal to the residual's round-off floor).
    Not tested at that floor itself (tol = 0 with the default step_tol): there round-off decides when the step
    drops below 1e-13."""
    model = CPRModel.from_config()
    loads = model.default_loads(True)
    th = torch.tensor(theta, dtype=DT)
    out = {c: _newton(model, c, th, loads, model.straight_state(), tol, max_iter, step_tol) for c in (False, True)}
    (ok_t, it_t, log_t), (ok_n, it_n, log_n) = out[False], out[True]
    assert (ok_t, it_t) == (ok_n, it_n) and ok_t == (want == "converged"), (out[False][:2], out[True][:2])
    assert len(log_t) == len(log_n) == it_t + 1 and it_t >= 3
    # the scaled residual's round-off floor is ~1e-10..1e-9 (tests/physics/lse/test_lse_compiled.py)
    torch.testing.assert_close(torch.tensor(log_n), torch.tensor(log_t), rtol=1e-6, atol=2e-9)
    if want == "converged" and tol > 0:
        assert log_t[-1] <= tol


def test_backend_selection_and_reasons():
    model = CPRModel.from_config()
    assert eligible(model, True) == "gradients (implicit differentiation) need the torch path"
    assert plan(model, "torch", False) == (False, "fused")
    assert plan(model, "reference", False) == (False, "reference")
    assert plan(model, "auto", True).compiled is False
    with pytest.raises(ConfigError, match="backend"):
        plan(model, "gpu", False)
    if HAVE_NUMBA:
        assert eligible(model, False) == ""
        assert plan(model, "auto", False) == (True, "numba") == plan(model, "numba", False)
        with pytest.raises(ConfigError, match="gradients"):
            plan(model, "numba", True)
        model.retraction = "strain"
        assert "retraction" in eligible(model, False) and plan(model, "auto", False) == (False, "numba")
        model.retraction = "nodal"
    # the deprecated attribute: readable, settable, and followed by backend="auto" only
    assert model.kernels == ("numba" if HAVE_NUMBA else "fused")
    with pytest.warns(DeprecationWarning):
        model.kernels = "reference"
    assert model.kernels == "reference" and plan(model, "auto", False) == (False, "reference")
    assert plan(model, "torch", False) == (False, "fused")
    with pytest.raises(ValueError), pytest.warns(DeprecationWarning):
        model.kernels = "gpu"


@needs_numba
def test_solve_stores_nothing_on_the_model():
    """solve() writes no attribute: derived data lives in model.solver_cache (made in __init__), keyed on the
    buffers, and a changed buffer is never served stale."""
    model = CPRModel.from_config()
    before = set(vars(model))
    th = torch.tensor([0.02, -0.01, 0.0], dtype=DT)
    eqs = {b: model.solve(th, backend=b) for b in ("numba", "torch", "auto")}
    assert set(vars(model)) == before
    torch.testing.assert_close(eqs["numba"].g_ee, eqs["torch"].g_ee, rtol=0, atol=1e-10)
    c0 = model.solver_cache.constants(model)
    assert model.solver_cache.constants(model) is c0
    with torch.no_grad():
        model.youngs_modulus.mul_(2.0)  # in place: a new version counter
    assert model.solver_cache.constants(model) is not c0
    stiff = {b: model.solve(th, backend=b) for b in ("numba", "torch")}
    torch.testing.assert_close(stiff["numba"].g_ee, stiff["torch"].g_ee, rtol=0, atol=1e-10)
    assert float((stiff["numba"].g_ee - eqs["numba"].g_ee).abs().max()) > 1e-6
    assert set(vars(model)) == before
