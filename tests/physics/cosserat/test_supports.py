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
from flexlearn.physics.cosserat.errors import IntegrationError
from flexlearn.physics.cosserat.simulation import RodSetup, SimulationOptions
from tests.physics.cosserat.gradcheck import assert_gradients_match_central_differences
from tests.physics.cosserat.same_runs import assert_same_runs

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


def test_supports_the_kernel_cannot_hold_run_on_the_tensor_path():
    """A slide along a direction that is not a world axis is held on the tensor path; ``backend='numba'`` then
    refuses by name."""
    rod = CosseratRod.circular(0.1, 2e-3, Material(1000.0, 1e6, 0.45), 4)
    for base in ([Pin(), Pin(node=-1)], [Clamp(), Clamp((0, 0, 0.1), node=-1)], Pin(node=2)):
        assert lgvi.eligible(rod, RodSetup([Gravity()], base=base), SimulationOptions()) in (
            "",
            "numba is not installed",
        )
    oblique = Clamp((0, 0, 0.1), node=-1, slides_along=(0, 0.6, 0.8))
    assert "tensor path" in lgvi.eligible(rod, RodSetup([Gravity()], base=[Clamp(), oblique]), SimulationOptions())
    with pytest.raises(ConfigError, match="backend"):
        rod.simulate(1e-4, 1e-5, base=[Clamp(), oblique], options=SimulationOptions(backend="numba"))


@pytest.mark.skipif(not lgvi.HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("scheme", ["lgvi", "implicit"])
def test_the_fused_kernel_drives_turning_sliding_and_moving_supports_as_the_tensor_path_does(scheme):
    """A rod clamped at one end, the other end on a clamp that turns about the rod's axis and slides along it under
    a pull, and a pin in between that moves sideways (300 steps): positions, reactions and final velocities of the
    kernel equal the tensor path's to round-off."""
    rod = CosseratRod.circular(0.3, 3e-3, Material(1000.0, 2e6, 0.4), 12)

    def turn(t):
        angle = 2.0 * t
        c, s_ = math.cos(angle), math.sin(angle)
        about_body_z = torch.tensor([[c, -s_, 0.0], [s_, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
        return HORIZONTAL @ about_body_z, (0.3, 0, 0)  # body z is the rod's axis (world x)

    base = [
        Clamp((0, 0, 0), HORIZONTAL),
        Pin(node=5, motion=lambda t: torch.tensor([0.125, 0.02 * math.sin(20 * t), 0.0], dtype=torch.float64)),
        Clamp((0.3, 0, 0), HORIZONTAL, node=-1, motion=turn, slides_along=(1, 0, 0)),
    ]
    dt = 0.5 * float(rod.stable_dt()) if scheme == "lgvi" else 2e-4
    runs = {
        backend: rod.simulate(
            300 * dt, dt, loads=[Gravity(), PointForce(-1, (0.05, 0.0, 0.0))], damping=Damping(alpha=5.0), base=base,
            options=SimulationOptions(scheme=scheme, backend=backend, record_every=50),
        )
        for backend in ("numba", "torch")
    }  # fmt: skip
    assert_same_runs(runs["numba"], runs["torch"])


@pytest.mark.skipif(not lgvi.HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("scheme", ["lgvi", "implicit"])
@pytest.mark.parametrize("held", ["pins", "clamps", "pin and clamp mid-rod"])
def test_the_fused_kernel_holds_fixed_supports_as_the_tensor_path_does(scheme, held):
    """Pins and fixed clamps on any node: the numba kernel's positions, final state and reactions equal the
    tensor path's to round-off (a bent rod released under gravity and a tip force, 300 steps)."""
    s = torch.linspace(0.0, 1.0, 30, dtype=torch.float64)
    line = Polyline(torch.stack([0.3 * s, 0.02 * torch.sin(3 * s), -0.05 * s**2], 1), normal=(0.0, 0.0, 1.0))
    rod = CosseratRod.circular(line.length, 3e-3, Material(1000.0, 2e6, 0.4), 12)
    start = line.state(rod)
    frames = start.rotations[0]
    bases = {
        "pins": [Pin(), Pin(node=-1)],
        "clamps": [Clamp(start.positions[0, 0], frames[0]), Clamp(start.positions[0, -1], frames[-1], node=-1)],
        "pin and clamp mid-rod": [Pin(node=6), Clamp(start.positions[0, 0], frames[0])],
    }
    dt = 0.5 * float(rod.stable_dt()) if scheme == "lgvi" else 2e-4
    runs = {}
    for backend in ("numba", "torch"):
        runs[backend] = rod.simulate(
            300 * dt,
            dt,
            loads=[Gravity(), PointForce(-1, (0.0, 0.0, 2e-3))],
            damping=Damping(alpha=5.0),
            initial=start,
            base=bases[held],
            options=SimulationOptions(scheme=scheme, backend=backend, record_every=50, implicit_dissipation=0.05),
        )
    assert_same_runs(runs["numba"], runs["torch"])


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


@pytest.mark.skipif(not lgvi.HAVE_NUMBA, reason="numba is not installed")
def test_a_failing_kernel_step_raises_at_once_with_backend_numba():
    """A pinned cable at 5× the step it survives: the kernel's failure is raised as it is with backend='numba'
    (step and node, no state), and with 'auto' after the tensor path reran it (the same step, with the state)."""
    line = Polyline(torch.as_tensor(_hanging_arc(1.0, 0.8)), normal=(0.0, 1.0, 0.0))
    rod = CosseratRod.circular(line.length, 5e-3, Material(1000.0, 1e6, shear_modulus=1e6 / 3), 50)
    errors = {}
    for backend in ("numba", "auto"):
        with pytest.raises(IntegrationError) as caught:
            rod.simulate(
                1.0,
                0.05,
                loads=[Gravity()],
                damping=Damping(alpha=6.0),
                initial=line.state(rod),
                base=[Pin(), Pin(node=-1)],
                options=SimulationOptions(scheme="implicit", implicit_dissipation=0.2, backend=backend),
            )
        errors[backend] = caught.value
    assert "fused kernel" in str(errors["numba"]) and errors["numba"].state is None
    assert errors["auto"].state is not None and errors["auto"].step == errors["numba"].step
