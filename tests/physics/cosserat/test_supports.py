"""Supports on any node (flexlearn.physics.cosserat.supports): pins and clamps at either end, driven and sliding,
checked against closed-form references — the elastic catenary, the compound pendulum, the clamped–clamped beam
and the twisted, pulled rod — with the reactions they report; gradients through a pinned rod against central
differences; bad supports refused by name."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.cosserat import Clamp, CosseratRod, Gravity, Material, Pin, PointForce, Polyline
from flexlearn.physics.cosserat.analytic import elastic_catenary, zero_crossing_frequency
from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.simulation import RodSetup, SimulationOptions
from tests.physics.cosserat.gradcheck import assert_gradients_match_central_differences

G = 9.81
HORIZONTAL = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
"""Body z → world x: a rod lying along +x."""


def _hanging_arc(length: float, span: float, n: int = 401) -> np.ndarray:
    """An arc of the given length below a chord of the given span (a start that is not the answer)."""
    lo, hi = 1e-9, math.pi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if math.sin(mid) / mid > span / length else (lo, mid)
    radius = length / (2.0 * lo)
    a = np.linspace(-lo, lo, n)
    return np.stack([span / 2 + radius * np.sin(a), np.zeros(n), radius * (math.cos(lo) - np.cos(a))], 1)


def test_a_cable_pinned_at_both_ends_settles_on_the_elastic_catenary():
    """At cosseratbench's 50 elements the shape is within 1e-3 L of the elastic catenary (measured 4.1e-4 L;
    1.0e-3 L at 20 elements); the pins carry half the weight each, the horizontal tension H of the catenary
    (±2 %: the reference has no bending stiffness) and no moment."""
    length, span, radius = 1.0, 0.8, 5e-3
    line = Polyline(torch.as_tensor(_hanging_arc(length, span)), normal=(0.0, 1.0, 0.0))
    length = line.length  # the chords of the arc: 1.3e-6 shorter
    rod = CosseratRod.circular(length, radius, Material(1000.0, 1e6, shear_modulus=1e6 / 3), 50)
    tr = rod.simulate(
        5.0,
        0.01,
        loads=[Gravity()],
        damping=Damping(alpha=2.0 * math.sqrt(G / length)),
        initial=line.state(rod),
        base=[Pin(), Pin(node=-1)],
        options=SimulationOptions(scheme="implicit", implicit_dissipation=0.2, record_every=100),
    )
    area = math.pi * radius**2
    weight = 1000.0 * area * G
    reference, tension = elastic_catenary(length, 1e6 * area, weight, span, np.linspace(0.0, length, 4001))
    final = tr.positions[-1].numpy()
    distance = np.min(np.linalg.norm(final[:, None, [0, 2]] - reference[None], axis=-1), axis=1)
    assert distance.max() < 1e-3 * length
    reactions = tr.reactions[-1].numpy()  # (2, 6): force, moment of each pin
    assert reactions[:, 2] == pytest.approx([weight * length / 2] * 2, rel=1e-3)
    # the end nodes' half elements hang on the pins directly: the cable between them carries (N − 1)/N of the
    # weight, so its horizontal tension is that much lower (its shape, which depends on w/H only, is not)
    carried = tension * (1 - 1 / 50)
    assert reactions[:, 0] == pytest.approx([-carried, carried], rel=3e-3)
    assert np.abs(reactions[:, 3:]).max() == 0.0


def _pendulum(length=0.3, theta0=0.05, n=10, youngs=2e7):
    """A stiff rod on a pin at the origin, released at rest at θ₀ from hanging straight down."""
    rod = CosseratRod.circular(length, 3e-3, Material(1000.0, youngs, 0.4), n)
    tip = length * torch.tensor([math.sin(theta0), 0.0, -math.cos(theta0)], dtype=torch.float64)
    line = Polyline(torch.stack([torch.zeros(3, dtype=torch.float64), tip]), normal=(0.0, 1.0, 0.0))
    return rod, line.state(rod)


def test_a_stiff_rod_on_a_pin_swings_as_a_compound_pendulum():
    """Period 2π √(I / (m g L/2)) (1 + θ₀²/16), I = Σ m_a s_a² of the lumped masses, to 0.2 %; the pin
    carries no moment. E = 2 GPa: the first bending mode at 50× the swing (at
    E = 20 MPa, 5×, the swing bends the rod and the period is 1.3 % longer)."""
    length, theta0, n = 0.3, 0.05, 10
    rod, start = _pendulum(length, theta0, n, youngs=2e9)
    tr = rod.simulate(
        1.9,
        2e-3,
        loads=[Gravity()],
        initial=start,
        base=Pin(),
        options=SimulationOptions(scheme="implicit"),
    )
    mass = rod.context().mass[0].numpy()
    s = np.linspace(0.0, length, n + 1)
    inertia = float((mass * s**2).sum())
    period = 2 * math.pi * math.sqrt(inertia / (mass.sum() * G * length / 2)) * (1 + theta0**2 / 16)
    measured = 2 * math.pi / zero_crossing_frequency(tr.positions[:, -1, 0].numpy(), 2e-3, center=False)
    assert measured == pytest.approx(period, rel=2e-3)
    assert np.abs(tr.reactions[:, 0, 3:].numpy()).max() == 0.0


def test_the_pinned_pendulum_is_the_same_motion_in_both_schemes():
    """The LGVI at its stable step and the implicit step at 40× it agree to 1e-3 of the swing over 0.1 s
    (the implicit step converges to the LGVI as its step shrinks: the pin is one constraint in both)."""
    rod, start = _pendulum()
    lgvi_dt = float(rod.stable_dt())
    times = {}
    for scheme, dt in (("lgvi", lgvi_dt), ("implicit", 40 * lgvi_dt)):
        tr = rod.simulate(
            4000 * lgvi_dt, dt, loads=[Gravity()], initial=start, base=Pin(),
            options=SimulationOptions(scheme=scheme, record_every=4000 if scheme == "lgvi" else 100),
        )  # fmt: skip
        times[scheme] = tr.positions[-1, -1]
    swing = 0.3 * math.sin(0.05)
    assert float((times["lgvi"] - times["implicit"]).abs().max()) < 1e-3 * swing


def test_a_beam_clamped_at_one_end_and_on_a_sliding_clamp_at_the_other_is_timoshenkos():
    """A beam clamped at both ends, the far clamp free to slide along the axis (so that the sag does not stretch
    the axis: held ends would add membrane tension, 1.5 % less sag here): midspan sag q L⁴/(384 EI) +
    q L²/(8 k G A) (±0.5 % at 40 elements: measured 0.25 %), end reactions W/2 and moments q L²/12 (±0.2 %),
    no axial force at the slide."""
    length, radius, youngs, n = 0.5, 5e-3, 2e8, 40
    rod = CosseratRod.circular(length, radius, Material(1000.0, youngs, 0.5), n)
    far = Clamp((length, 0.0, 0.0), HORIZONTAL, node=-1, slides_along=(1.0, 0.0, 0.0))
    tr = rod.simulate(
        0.4,
        1e-3,
        loads=[Gravity()],
        damping=Damping(alpha=200.0),
        base=[Clamp((0.0, 0.0, 0.0), HORIZONTAL), far],
        options=SimulationOptions(scheme="implicit", implicit_dissipation=0.2, record_every=100),
    )
    area, second = math.pi * radius**2, math.pi * radius**4 / 4
    q = 1000.0 * area * G
    kga = float(rod.shear_coefficient) * float(rod.shear_modulus) * area
    sag = q * length**4 / (384 * youngs * second) + q * length**2 / (8 * kga)
    assert -float(tr.positions[-1, n // 2, 2]) == pytest.approx(sag, rel=5e-3)
    reactions = tr.reactions[-1].numpy()
    total = float(rod.context().mass.sum()) * G
    assert reactions[:, 2] == pytest.approx([total / 2] * 2, rel=2e-3)
    assert reactions[:, 4] == pytest.approx([-q * length**2 / 12, q * length**2 / 12], rel=2e-3)
    assert abs(reactions[1, 0]) < 1e-12 * total


def test_a_turned_clamp_that_slides_twists_the_rod_and_lets_the_pull_stretch_it():
    """The last node turned by φ about the rod axis and free along it, a pull T there: the clamp holds the
    torque G J φ / L, no axial force, and the end moves by T L / (E A) (±1 %)."""
    length, radius, youngs, pull, phi = 0.4, 5e-3, 1e7, 2.0, 0.5
    rod = CosseratRod.circular(length, radius, Material(1000.0, youngs, 0.5), 16)
    ramp = 0.1

    def turn(t: float):
        angle = phi * min(t / ramp, 1.0)
        c, s = math.cos(angle), math.sin(angle)
        about_x = torch.tensor([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]], dtype=torch.float64)
        return about_x @ HORIZONTAL, torch.tensor([length, 0.0, 0.0], dtype=torch.float64)

    end = Clamp((length, 0.0, 0.0), HORIZONTAL, motion=turn, node=-1, slides_along=(1.0, 0.0, 0.0))
    tr = rod.simulate(
        0.4,
        5e-4,
        loads=[PointForce(-1, (pull, 0.0, 0.0))],
        damping=Damping(alpha=300.0),
        base=[Clamp((0.0, 0.0, 0.0), HORIZONTAL), end],
        options=SimulationOptions(scheme="implicit", record_every=100),
    )
    area = math.pi * radius**2
    torsion = float(rod.shear_modulus) * float(rod.torsion_constant) * phi / length
    stretch = pull * length / (youngs * area)
    assert float(tr.positions[-1, -1, 0]) - length == pytest.approx(stretch, rel=1e-2)
    base, far = tr.reactions[-1].numpy()
    assert far[3] == pytest.approx(torsion, rel=1e-2) and base[3] == pytest.approx(-torsion, rel=1e-2)
    assert abs(far[0]) < 1e-9 * pull  # free along the slide
    assert base[0] == pytest.approx(-pull, rel=1e-3)


def test_a_pinned_rod_is_differentiable():
    """d(midspan height)/d(E, ρ) of a pinned–pinned rod after 20 implicit steps vs central differences."""
    params = dict(E=torch.tensor(2e5), rho=torch.tensor(1100.0))
    points = torch.tensor([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]], dtype=torch.float64)

    def run(p):
        rod = CosseratRod.circular(0.1, 2e-3, Material(1.0, 1.0, 0.45), 6)
        rod.youngs_modulus = p["E"]
        rod.shear_modulus = p["E"] / 2.9
        rod.density = p["rho"]
        line = Polyline(points, normal=(0.0, 0.0, 1.0))
        dt = 5e-4
        tr = rod.simulate(
            20 * dt,
            dt,
            loads=[Gravity()],
            initial=line.state(rod),
            base=[Pin(), Pin(node=-1)],
            options=SimulationOptions(record_every=10**9, scheme="implicit"),
        )
        return tr.positions[-1, 3, 2] + tr.reactions[-1, 0, 2] * 1e-3

    assert_gradients_match_central_differences(run, params)


def test_supports_other_than_a_fixed_base_clamp_run_on_the_tensor_path():
    rod = CosseratRod.circular(0.1, 2e-3, Material(1000.0, 1e6, 0.45), 4)
    why = lgvi.eligible(rod, RodSetup([Gravity()], base=Pin()), SimulationOptions())
    assert "tensor path" in why
    why = lgvi.eligible(rod, RodSetup([Gravity()], base=[Clamp(), Pin(node=-1)]), SimulationOptions())
    assert "tensor path" in why
    assert lgvi.eligible(rod, RodSetup([Gravity()], base=Clamp()), SimulationOptions()) in (
        "",
        "numba is not installed",
    )
    with pytest.raises(ConfigError, match="backend"):
        rod.simulate(1e-4, 1e-5, base=Pin(), options=SimulationOptions(backend="numba"))


@pytest.mark.parametrize(
    "supports, match",
    [
        ([Pin(node=4)], "one support per node"),
        ([Pin(node=9)], "support node"),
        ([Pin(node=-6)], "support node"),
    ],
)
def test_bad_supports_are_refused_by_name(supports, match):
    rod = CosseratRod.circular(0.1, 2e-3, Material(1000.0, 1e6, 0.45), 4)
    with pytest.raises(ConfigError, match=match):
        rod.simulate(1e-4, 1e-5, base=[Pin(node=-1), *supports])


def test_bad_support_arguments_are_refused_by_name():
    with pytest.raises(ConfigError, match="slides_along"):
        Clamp(slides_along=(0.0, 0.0, 0.0))
    with pytest.raises(ConfigError, match="Pin.node"):
        Pin(node=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="Pin.position"):
        Pin((1.0, 2.0))
    rod = CosseratRod.circular(0.1, 2e-3, Material(1000.0, 1e6, 0.45), 4)
    with pytest.raises(ConfigError, match="base"):
        rod.simulate(1e-4, 1e-5, base="pinned")
    with pytest.raises(ConfigError, match="base"):
        rod.simulate(1e-4, 1e-5, base=[Pin(), "free"])
