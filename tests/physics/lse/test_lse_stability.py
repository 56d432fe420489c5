"""Stability of LSE equilibria, load continuation along the stable branch, and inverse statics that refuses
unstable solutions — against Euler's buckling load and the elastica of a clamped–free column (analytic)."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.optimize import brentq
from scipy.special import ellipe, ellipk

from flexlearn.errors import ConfigError
from flexlearn.physics.lse import (
    ContinuationOptions,
    Loads,
    NewtonSettings,
    cantilever_model,
    cantilever_solve,
    follow_stable,
    inverse_statics,
)

L, R, E = 0.5, 1e-3, 200e9
G = E / 2.6
EI = E * math.pi * R**4 / 4
P_EULER = math.pi**2 * EI / (4 * L**2)  # clamped–free column


def column_loads(factor: float) -> Loads:
    """A dead compressive tip force of ``factor`` × the Euler load, along the rod axis (−z)."""
    return Loads(ee_wrench=torch.tensor([0, 0, 0, 0, 0, -factor * P_EULER], dtype=torch.float64), gravity=False)


def elastica_tip(factor: float) -> tuple[float, float]:
    """Lateral tip deflection δ and axial tip coordinate z [m] of the buckled clamped–free elastica under
    ``factor`` × P_Euler: ``K(k) = L √(P/EI)``, ``δ = 2k/λ``, ``z = (2E(k) − K(k))/λ`` (λ = √(P/EI),
    k = sin(α/2) with α the tip rotation)."""
    lam = math.sqrt(factor * P_EULER / EI)
    m = brentq(lambda mm: ellipk(mm) - L * lam, 1e-14, 1 - 1e-14)
    return 2 * math.sqrt(m) / lam, (2 * ellipe(m) - ellipk(m)) / lam


def test_the_stability_changes_sign_at_the_euler_load():
    model = cantilever_model(L, R, E, G, 8)
    below = cantilever_solve(model, tip_force=(0, 0, -0.99 * P_EULER)).stability
    above = cantilever_solve(model, tip_force=(0, 0, -1.01 * P_EULER)).stability
    assert below is not None and above is not None
    assert below.stable and below.min_eigenvalue > 0
    assert not above.stable and above.min_eigenvalue < 0
    assert below.asymmetry < 1e-12 and above.asymmetry < 1e-12  # conservative loads: symmetric tangent
    # the eigenvalue is linear in the load along the straight branch: its root is the Euler load (1 %)
    root = 0.99 + 0.02 * below.min_eigenvalue / (below.min_eigenvalue - above.min_eigenvalue)
    assert root == pytest.approx(1.0, abs=0.01)


def test_the_straight_column_above_the_euler_load_is_flagged_unstable():
    model = cantilever_model(L, R, E, G, 8)
    eq = cantilever_solve(model, tip_force=(0, 0, -1.1 * P_EULER))
    assert float(eq.g_ee[:2, 3].norm()) < 1e-9  # Newton from straight stays straight ...
    assert eq.stability is not None and not eq.stability.stable  # ... and says that this is unstable
    off = cantilever_solve(model, tip_force=(0, 0, -1.1 * P_EULER), settings=NewtonSettings(stability=False))
    assert off.stability is None


@pytest.mark.parametrize("factor", [1.1, 1.37])
def test_continuation_reaches_the_buckled_elastica(factor):
    model = cantilever_model(L, R, E, G, 8)
    res = follow_stable(model, torch.zeros(0), column_loads(factor))
    assert res.reached and res.stable, res.message
    assert len(res.switches) == 1 and 1 / factor - 0.02 < res.switches[0] < 1 / factor + 0.02
    delta, z = elastica_tip(factor)
    tip = res.equilibrium.g_ee[:3, 3]
    assert float(tip[:2].norm()) == pytest.approx(delta, rel=0.01)
    assert float(tip[2]) == pytest.approx(z, abs=0.01 * L)


def test_continuation_without_a_bifurcation_matches_the_plain_solve():
    model = cantilever_model(L, R, E, G, 6)
    loads = Loads(ee_wrench=torch.tensor([0, 0, 0, 0.3 * P_EULER, 0, 0], dtype=torch.float64), gravity=False)
    res = follow_stable(model, torch.zeros(0), loads)
    direct = model.solve(torch.zeros(0), loads)
    assert res.reached and res.stable and not res.switches
    torch.testing.assert_close(res.equilibrium.g_ee, direct.g_ee, atol=1e-9, rtol=0)


def test_inverse_statics_refuses_an_unstable_equilibrium():
    model = cantilever_model(L, R, E, G, 6)
    for factor, ok in [(0.9, True), (1.1, False)]:
        target = cantilever_solve(model, tip_force=(0, 0, -factor * P_EULER)).g_ee[:3, 3]
        res = inverse_statics(model, target, loads=column_loads(factor))
        assert res.error < 1e-7
        assert res.stable is ok and res.feasible is ok, res.message
        assert ok or "unstable" in res.message


@pytest.mark.parametrize(
    "field, value", [("first_step", 0.0), ("max_step", 2.0), ("imperfection", 1.5), ("max_stages", 0)]
)
def test_continuation_options_name_a_bad_value(field, value):
    with pytest.raises(ConfigError, match=field):
        ContinuationOptions(**{field: value})
