"""Rectangular sections (EI₁ ≠ EI₂) and precurved rods (reference strain ξ₀) against closed-form arcs and helices.

A rod clamped at the identity along +z, tip free. Constant strain lies in the LSE space, so every case below is
reproduced to round-off for any number of elements:

* a pure tip moment M about body axis i bends a rod into a circular arc of curvature M/EIᵢ;
* a precurved (or helical) rod under no load keeps its rest shape, tip pose ``exp(L ξ₀^)``;
* a rod precurved about x under a moment about x: curvature κ₀ + M/EI₁.
"""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.lie import se3_exp
from flexlearn.physics.lse import (
    CPRModel,
    Equilibrium,
    Loads,
    NewtonSettings,
    RobotLayout,
    RodMaterial,
    section_properties,
)

DT = torch.float64
L = 0.15
E = 2.0e9
G = E / 2.8
WIDTH, THICK = 4.0e-3, 1.0e-3  # body x × body y: EI₂ = 16 EI₁


def single_rod(n_elements: int, shape: str, dims: tuple, xi0=(0.0, 0.0, 0.0)) -> CPRModel:
    area, i1, i2, j = section_properties(shape, dims)
    eye = torch.eye(4, dtype=DT)
    layout = RobotLayout(
        torch.zeros(0, 3), torch.zeros(0, 3), torch.tensor([-1]), eye[None], eye[None], torch.tensor([L], dtype=DT)
    )
    material = RodMaterial(E, G, area, i1, i2, j, 0.0, torch.tensor(list(xi0) + [0.0, 0.0, 1.0], dtype=DT))
    return CPRModel(layout, material, n_elements, torch.zeros(3))


def tip_pose(model: CPRModel, moment=(0.0, 0.0, 0.0)) -> tuple[torch.Tensor, list[float]]:
    loads = Loads(ee_wrench=torch.tensor(list(moment) + [0.0, 0.0, 0.0], dtype=DT), gravity=False)
    eq = model.solve(torch.zeros(0, dtype=DT), loads, settings=NewtonSettings(tol=1e-15, max_iter=12))
    return eq.g_ee, eq.residual_log


def test_rectangle_section_properties():
    area, i1, i2, j = section_properties("rectangle", (WIDTH, THICK))
    assert area == pytest.approx(WIDTH * THICK, rel=1e-15)
    assert i1 == pytest.approx(WIDTH * THICK**3 / 12, rel=1e-15)  # about body x: thickness along y
    assert i2 == pytest.approx(THICK * WIDTH**3 / 12, rel=1e-15)
    # Saint-Venant torsion constant of a 4:1 rectangle: β a b³ with β = 0.281 (Roark, Table 10.7)
    assert j == pytest.approx(0.281 * WIDTH * THICK**3, rel=5e-3)


def test_rectangle_config_gives_section_stiffness():
    model = CPRModel.from_config(
        {"rod": {"section": "rectangle", "width": WIDTH, "thickness": THICK, "youngs_modulus": E, "shear_modulus": G}}
    )
    k = model.stiffness()[0]
    torch.testing.assert_close(
        k[:2], torch.tensor([E * WIDTH * THICK**3 / 12, E * THICK * WIDTH**3 / 12], dtype=DT), rtol=1e-14, atol=0
    )
    torch.testing.assert_close(k[3:], torch.tensor([G, G, E], dtype=DT) * WIDTH * THICK, rtol=1e-14, atol=0)


@pytest.mark.parametrize("n_elements", [1, 3])
@pytest.mark.parametrize("axis", [0, 1])
def test_rectangle_pure_moments_give_arcs_with_curvature_m_over_ei(n_elements, axis):
    _, i1, i2, _ = section_properties("rectangle", (WIDTH, THICK))
    ei = E * (i1, i2)[axis]
    moment = 0.7 * E * i1 / L  # the same moment about each axis
    m = [0.0, 0.0, 0.0]
    m[axis] = moment
    tip, log = tip_pose(single_rod(n_elements, "rectangle", (WIDTH, THICK)), m)
    kappa = moment / ei  # 0.7/L about x, 0.7/(16 L) about y
    c, s = math.cos(kappa * L), math.sin(kappa * L)
    expected_p = [0.0, (c - 1) / kappa, s / kappa] if axis == 0 else [(1 - c) / kappa, 0.0, s / kappa]
    torch.testing.assert_close(tip[:3, 3], torch.tensor(expected_p, dtype=DT), rtol=0, atol=2e-15)
    xi = torch.zeros(6, dtype=DT)
    xi[axis] = kappa
    xi[5] = 1.0
    torch.testing.assert_close(tip, se3_exp(L * xi), rtol=0, atol=2e-15)
    assert log[-1] < 1e-9  # the round-off floor of the scaled residual (EA·ε)


@pytest.mark.parametrize("n_elements", [1, 2, 5])
@pytest.mark.parametrize(
    "kappa0", [(6.0, 0.0, 0.0), (3.0, -4.0, 0.0), (4.0, 2.0, 10.0)], ids=["arc-x", "arc-xy", "helix"]
)
def test_precurved_rod_without_load_keeps_its_rest_shape(n_elements, kappa0):
    model = single_rod(n_elements, "circle", (0.5e-3,), kappa0)
    tip, log = tip_pose(model)  # Newton starts from the rest shape (straight_state uses ξ₀)
    rest = se3_exp(L * torch.tensor(list(kappa0) + [0.0, 0.0, 1.0], dtype=DT))
    torch.testing.assert_close(tip, rest, rtol=0, atol=2e-15)
    assert log[-1] < 1e-9  # the round-off floor of the scaled residual (EA·ε)


def test_precurved_rod_starting_straight_converges_to_its_rest_shape():
    """The rest shape is reached from the straight configuration too (the precurvature then acts as a load)."""
    model = single_rod(3, "circle", (0.5e-3,), (5.0, 0.0, 0.0))
    nodes = se3_exp(torch.linspace(0, L, 4, dtype=DT)[:, None] * torch.tensor([0.0, 0, 0, 0, 0, 1], dtype=DT))
    straight = Equilibrium(nodes[-1], nodes[None], torch.zeros(1, 3, 6, dtype=DT), torch.zeros(0, dtype=DT), 0)
    eq = model.solve(torch.zeros(0, dtype=DT), Loads(gravity=False), init=straight, settings=NewtonSettings(tol=1e-13))
    assert eq.iterations > 0
    torch.testing.assert_close(eq.g_ee, se3_exp(L * torch.tensor([5.0, 0, 0, 0, 0, 1], dtype=DT)), rtol=0, atol=5e-15)


@pytest.mark.parametrize("n_elements", [1, 4])
def test_precurved_rod_under_moment_adds_m_over_ei(n_elements):
    radius = 0.5e-3
    ei = E * math.pi * radius**4 / 4
    kappa0, moment = 4.0, -2.5 * ei  # curvature 4 → 1.5 rad/m
    tip, log = tip_pose(single_rod(n_elements, "circle", (radius,), (kappa0, 0.0, 0.0)), (moment, 0.0, 0.0))
    expected = se3_exp(L * torch.tensor([kappa0 + moment / ei, 0, 0, 0, 0, 1], dtype=DT))
    torch.testing.assert_close(tip, expected, rtol=0, atol=2e-15)
    assert log[-1] < 1e-9  # the round-off floor of the scaled residual (EA·ε)
