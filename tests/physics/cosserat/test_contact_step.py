"""The implicit step's contacts as backward Euler's complementarity (flexlearn.physics.cosserat.contact_step): a rope
resting on a plane rests at its static penetration instead of bouncing by g h² every step, and a rope resting across
another comes to rest, on both backends."""

import math

import pytest
import torch

from flexlearn.physics.cosserat import (
    FREE,
    CosseratRod,
    Damping,
    Gravity,
    Material,
    Pin,
    RodState,
    SimulationOptions,
)
from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.contact import PlaneContact
from flexlearn.physics.cosserat.polyline import Polyline
from flexlearn.physics.cosserat.rod_contact import RodRodContact

needs_numba = pytest.mark.skipif(not lgvi.HAVE_NUMBA, reason="numba is not installed")
G = 9.81
RADIUS = 2e-3


def _resting_rope(stiffness):
    """A 0.2 m rope of 10 elements lying on the plane z = 0 under gravity, the plane's damping half of critical."""
    rod = CosseratRod.circular(0.2, RADIUS, Material(1000.0, 1e7, 0.4), 10)
    line = Polyline(torch.tensor([[0.0, 0.0, RADIUS], [0.2, 0.0, RADIUS]], dtype=torch.float64), normal=(0, 0, 1))
    node_mass = rod.context().mass[0]
    damping = math.sqrt(stiffness * float(node_mass[1]))
    plane = PlaneContact((0, 0, 0), (0, 0, 1), rod_radius=RADIUS, stiffness=stiffness, damping=damping, friction=0.3)
    return rod, line.state(rod), plane, node_mass


@pytest.mark.parametrize("backend", ["torch", pytest.param("numba", marks=needs_numba)])
@pytest.mark.parametrize("h", [2e-3, 5e-4])
def test_a_rope_on_a_plane_rests_at_its_static_penetration(backend, h):
    """K = 1e4 N/m, 1 s at 2 ms and 0.5 ms (β = 0.3, ζ = 0.2, as the benchmark's quasi-static runs): the floor
    carries the rope's weight (Σ k δ_a = m g to 1e-6), every node within 1 % of its share m_a g / k (0.25 µm inside,
    0.12 µm at the ends; the rope's bending moves 0.6 % between neighbours) and none moves by 1e-12 m over the last 20
    steps. The clipped law of a single solve rested 11.8 µm deep on average at 2 ms, alternating by 19.7 µm every
    step (1.45 µm ± 0.6 at 0.5 ms)."""
    stiffness = 1e4
    rod, start, plane, node_mass = _resting_rope(stiffness)
    options = SimulationOptions(scheme="implicit", backend=backend, implicit_beta=0.3, implicit_dissipation=0.2)
    tr = rod.simulate(1.0, h, loads=[Gravity(), plane], initial=start, base=FREE, options=options)
    depth = RADIUS - tr.positions[-20:, :, 2]
    static = node_mass * G / stiffness
    weight = float(node_mass.sum()) * G
    assert abs(stiffness * float(depth[-1].sum()) - weight) < 1e-6 * weight
    assert float((depth[-1] / static - 1).abs().max()) < 0.01
    assert float((depth.max(0).values - depth.min(0).values).max()) < 1e-12


@pytest.mark.parametrize("backend", ["torch", pytest.param("numba", marks=needs_numba)])
def test_a_rope_resting_across_another_comes_to_rest(backend):
    """Two 0.4 m ropes of 10 elements pinned at both ends, the upper one draped across the lower (its ends 3 mm below
    its middle; k = 1e4 N/m, contact damping half of critical, the ropes' damping 20 /s, 2 ms, β = 0.3, ζ = 0.5,
    1.5 s): with each pair's matrix taken exactly and the pairs held by the active set, the contact carries the upper
    rope down onto the lower one at a penetration below 1 % of r, and no node moves by 1e-8 m over the last 20
    steps (4e-10 m measured). With each pair's matrix bounded by node blocks the contact alternated at the step's
    Nyquist frequency, the nodes under it by 27 µm every step."""
    n, stiffness = 10, 1e4
    s = torch.linspace(-0.2, 0.2, n + 1, dtype=torch.float64)
    lines = [torch.stack([s, 0 * s, 0 * s], -1), torch.stack([0 * s, s, 2 * RADIUS - 0.015 * s.abs()], -1)]
    lengths = torch.stack([(x[1:] - x[:-1]).norm(dim=-1).sum() for x in lines])
    material = Material(1000.0, 1e7, 0.4)
    rod = CosseratRod.circular(lengths, RADIUS, material, n)
    states = [Polyline(x, normal=(0, 0, 1)).state(CosseratRod.circular(float(length), RADIUS, material, n))
              for x, length in zip(lines, lengths)]  # fmt: skip
    positions, rotations = (torch.cat([getattr(st, f) for st in states]) for f in ("positions", "rotations"))
    initial = RodState(positions, rotations, torch.zeros_like(positions), torch.zeros_like(positions))
    damping = 0.5 * math.sqrt(stiffness * float(rod.context().mass[0, 1]))
    contact = RodRodContact(rod_radius=RADIUS, stiffness=stiffness, damping=damping)
    options = SimulationOptions(scheme="implicit", backend=backend, implicit_beta=0.3, implicit_dissipation=0.5)
    tr = rod.simulate(1.5, 2e-3, loads=[Gravity(), contact], initial=initial, base=[Pin(), Pin(node=-1)],
                      damping=Damping(alpha=20.0), options=options)  # fmt: skip
    last = tr.positions[-20:]
    assert float((last.max(0).values - last.min(0).values).max()) < 1e-8
    normal, _, depth = contact.forces(tr.positions[-1], torch.zeros_like(tr.positions[-1]))
    assert float(normal[1, :, 2].sum()) > 0.1 * float(rod.context().mass[1].sum()) * G  # it carries the upper rope
    assert 0 < float(depth.max()) < 0.01 * RADIUS
