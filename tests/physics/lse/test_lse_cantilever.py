"""Single-rod validation: pure-moment arc, large-deflection elastica, Newton from straight, implicit gradients."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from flexlearn.lie import se3_exp
from flexlearn.physics.lse import (
    ConvergenceError,
    NewtonSettings,
    cantilever_model,
    cantilever_solve,
    cantilever_tip_pose,
)

DT = torch.float64
L = 0.2
RADIUS = 0.5e-3
E = 1.13e10
G = E / 2.6
EI = E * math.pi * RADIUS**4 / 4


@pytest.mark.parametrize("n_elements", [1, 2, 3, 5])
@pytest.mark.parametrize("axis", [0, 1])
def test_pure_end_moment_gives_exact_arc(n_elements, axis):
    """Curvature M/EI, unit stretch: constant strain lies in the LSE space, so the arc is exact to round-off."""
    moment = 0.8 * EI / L  # bends the rod by 0.8 rad
    m = torch.zeros(3, dtype=DT)
    m[axis] = moment
    model = cantilever_model(L, RADIUS, E, G, n_elements)
    eq = cantilever_solve(model, tip_moment=m, settings=NewtonSettings(tol=1e-14, max_iter=6, max_continuation=0))
    tip = eq.g_ee
    xi = torch.zeros(6, dtype=DT)
    xi[axis] = moment / EI
    xi[5] = 1.0
    torch.testing.assert_close(tip, se3_exp(L * xi), rtol=0, atol=5e-15)
    assert eq.residual_log[-1] < 1e-9


def elastica_tip(load: float) -> tuple[float, float]:
    """Independent reference: inextensible Euler elastica, clamped at s=0 along +z, dead tip force P along +x.

    φ(s) = angle from z; EI φ'' = -P cos φ, φ(0) = 0, φ'(L) = 0, shooting on φ'(0) with brentq (scipy).
    Returns the tip (x, z) [m].
    """
    p_over_ei = load / L**2

    def rhs(s, y):
        phi, dphi, x, z = y
        return [dphi, -p_over_ei * math.cos(phi), math.sin(phi), math.cos(phi)]

    def end_slope(c):
        sol = solve_ivp(rhs, (0, L), [0.0, c, 0.0, 0.0], rtol=1e-12, atol=1e-14)
        return sol.y[1, -1]

    cmax = math.sqrt(2 * p_over_ei) * (1 - 1e-12)
    c = brentq(end_slope, 1e-9, cmax, xtol=1e-15, rtol=1e-14)
    sol = solve_ivp(rhs, (0, L), [0.0, c, 0.0, 0.0], rtol=1e-12, atol=1e-14)
    return sol.y[2, -1], sol.y[3, -1]


def test_elastica_convergence_with_elements():
    """Tip position under PL²/EI = 3 converges to the elastica (extensibility effect ~ P/EA ≈ 1e-5 L)."""
    load = 3.0
    x_ref, z_ref = elastica_tip(load)
    errors = []
    for n in (1, 2, 4, 8):
        tip = cantilever_tip_pose(L, RADIUS, E, G, n, tip_force=[load * EI / L**2, 0.0, 0.0])
        errors.append(math.hypot(float(tip[0, 3]) - x_ref, float(tip[2, 3]) - z_ref))
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 2e-4 * L, errors
    assert errors[0] / errors[-1] > 20, errors


@pytest.mark.parametrize("load", [0.5, 2.0, 5.0, 10.0])
def test_newton_from_straight_up_to_load_10(load):
    """Converges from the straight configuration (no continuation needed) with few iterations, quadratically."""
    model = cantilever_model(L, RADIUS, E, G, 4)
    eq = cantilever_solve(model, tip_force=[load * EI / L**2, 0.0, 0.0], settings=NewtonSettings(max_continuation=0))
    print(f"PL^2/EI = {load}: {eq.iterations} Newton iterations, log {['%.1e' % r for r in eq.residual_log]}")
    assert eq.iterations <= 8
    log = eq.residual_log
    assert log[-1] < 1e-8
    # quadratic tail: once below 1e-2, every reduction above the round-off floor is at least of order 1.5
    for a, b in zip(log, log[1:]):
        if a < 1e-2 and b > 1e-9:
            assert b < 10 * a**1.5, log


def test_tip_pose_gradient_matches_finite_differences():
    f = torch.tensor([0.01, 0.005, -0.002], dtype=DT, requires_grad=True)
    e = torch.tensor(E, dtype=DT, requires_grad=True)
    tip = cantilever_tip_pose(L, RADIUS, e, G, 3, tip_force=f)
    p = tip[:3, 3]
    jf = torch.stack([torch.autograd.grad(p[i], f, retain_graph=True)[0] for i in range(3)])
    je = torch.stack([torch.autograd.grad(p[i], e, retain_graph=True)[0] for i in range(3)])
    eps = 1e-6
    fd = torch.zeros(3, 3, dtype=DT)
    for j in range(3):
        d = torch.zeros(3, dtype=DT)
        d[j] = eps
        fd[:, j] = (
            cantilever_tip_pose(L, RADIUS, E, G, 3, tip_force=f.detach() + d)[:3, 3]
            - cantilever_tip_pose(L, RADIUS, E, G, 3, tip_force=f.detach() - d)[:3, 3]
        ) / (2 * eps)
    torch.testing.assert_close(jf, fd, rtol=1e-6, atol=1e-9)
    de = E * 1e-6
    fde = (
        cantilever_tip_pose(L, RADIUS, E + de, G, 3, tip_force=f.detach())[:3, 3]
        - cantilever_tip_pose(L, RADIUS, E - de, G, 3, tip_force=f.detach())[:3, 3]
    ) / (2 * de)
    torch.testing.assert_close(je, fde, rtol=1e-5, atol=1e-18)


def test_bad_inputs():
    with pytest.raises(ValueError):
        cantilever_tip_pose(-1.0, RADIUS, E, G, 4)
    with pytest.raises(ValueError):
        cantilever_tip_pose(L, RADIUS, 0.0, G, 4)
    with pytest.raises(ConvergenceError) as info:
        cantilever_tip_pose(
            L,
            RADIUS,
            E,
            G,
            4,
            tip_force=[50 * EI / L**2, 0, 0],
            settings=NewtonSettings(max_iter=2, max_continuation=1),
        )
    assert info.value.iterations >= 1 and info.value.residual_norm > 0
    assert "iterations" in str(info.value)
