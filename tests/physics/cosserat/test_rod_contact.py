"""Contact between rods and of a rod with itself (`RodRodContact`): the closest points of two segments agree with a
brute-force search; every pair's forces cancel (momentum) and the normal forces add no moment; a rod lying across
another carries its weight in rod–rod contact forces with the penetration W / k; two free rods that collide
bounce back with their total momentum kept; a folded rod's legs do not pass through each other (and do with
self-contact off, so the check can fail)."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.cosserat import (
    CosseratRod,
    Damping,
    Gravity,
    Material,
    PlaneContact,
    Polyline,
    RodRodContact,
    RodState,
    SimulationOptions,
    contact_forces,
)
from flexlearn.physics.cosserat.rod_contact import closest_points

L, R_ROD, G = 0.2, 2e-3, 9.81
STIFF = Material(density=1000.0, youngs_modulus=1e9, poisson_ratio=0.3)


FIELDS = ("positions", "rotations", "velocities", "angular_velocities")


def _pair(first: RodState, second: RodState) -> RodState:
    """Rod 0 of ``first`` and rod 1 of ``second``: the two rods of one simulation."""
    return RodState(*(torch.cat([getattr(first, f)[0:1], getattr(second, f)[1:2]]) for f in FIELDS))


def _lying(rod, center, along, normal=(0.0, 0.0, 1.0)) -> RodState:
    c, a = torch.tensor(center, dtype=torch.float64), torch.tensor(along, dtype=torch.float64)
    return Polyline([(c - 0.5 * L * a).tolist(), (c + 0.5 * L * a).tolist()], normal=normal).state(rod)


def test_closest_points_of_two_segments_match_a_brute_force_search():
    g = torch.Generator().manual_seed(0)
    a0, a1, b0, b1 = (torch.randn(200, 3, generator=g, dtype=torch.float64) for _ in range(4))
    b1[:20] = b0[:20] + 0.7 * (a1[:20] - a0[:20])  # parallel pairs
    b1[20:30] = b0[20:30] - 1.3 * (a1[20:30] - a0[20:30])  # antiparallel
    pair = closest_points(a0, a1, b0, b1)
    grid = torch.linspace(0, 1, 801, dtype=torch.float64)
    pa = a0[:, None, :] + grid[None, :, None] * (a1 - a0)[:, None, :]  # (P, 801, 3)
    pb = b0[:, None, :] + grid[None, :, None] * (b1 - b0)[:, None, :]
    brute = torch.cdist(pa, pb).amin(dim=(1, 2))
    found = (pair.ci - pair.cj).norm(dim=-1)
    assert bool((found <= brute + 1e-12).all())  # never worse than the grid's best
    assert float((brute - found).max()) < 5e-3  # and the grid comes close to it (its spacing is 1/800)
    assert bool(((pair.s >= 0) & (pair.s <= 1) & (pair.t >= 0) & (pair.t <= 1)).all())


def test_pair_forces_cancel_and_the_normal_forces_add_no_moment():
    rod = CosseratRod.circular([L, L], R_ROD, STIFF, 11)
    crossing = _pair(_lying(rod, (0, 0, 0), (1, 0, 0)), _lying(rod, (0.013, 0.004, 3.5e-3), (0.6, 0.8, 0)))
    contact = RodRodContact(R_ROD, stiffness=300.0, damping=0.5, friction=0.4)
    g = torch.Generator().manual_seed(1)
    v = 0.02 * torch.randn(crossing.positions.shape, generator=g, dtype=torch.float64)
    f = contact_forces(contact, crossing.positions, v)
    assert float(f.depth.max()) == pytest.approx(2 * R_ROD - 3.5e-3, rel=1e-9)  # one crossing, 0.5 mm deep
    total = (f.normal + f.friction).sum(dim=(0, 1))
    assert float(total.norm()) < 1e-12 * float(f.normal.norm())
    moment = torch.linalg.cross(crossing.positions, f.normal).sum(dim=(0, 1))
    assert float(moment.norm()) < 1e-12 * float(f.normal.norm())
    assert float(f.normal[0, :, 2].sum()) < 0 < float(f.normal[1, :, 2].sum())  # the upper rod is pushed up


def test_a_rod_lying_across_another_carries_its_weight_in_rod_contact_forces():
    rod = CosseratRod.circular([L, L], R_ROD, STIFF, 11)  # odd: the crossing lies inside one element of each
    k = 500.0
    start = _pair(_lying(rod, (0, 0, R_ROD), (1, 0, 0)), _lying(rod, (0, 0, 3 * R_ROD + 1e-4), (0, 1, 0)))
    ground = PlaneContact((0, 0, 0), (0, 0, 1), rod_radius=R_ROD, stiffness=k, damping=0.5)
    rods = RodRodContact(R_ROD, stiffness=k, damping=0.5)
    opts = SimulationOptions(scheme="implicit", backend="torch", record_every=100)
    w = 2 * math.pi * float(rod.linear_frequencies()[0])
    tr = rod.simulate(0.5, 4e-4, loads=[Gravity((0, 0, -G)), ground, rods], damping=Damping(alpha=min(w, 60.0)),
                      initial=start, base="free", options=opts)  # fmt: skip
    weight = STIFF.density * math.pi * R_ROD**2 * L * G
    last = RodState(tr.positions[-1], tr.rotations[-1], torch.zeros_like(tr.positions[-1]),
                    torch.zeros_like(tr.positions[-1]))  # fmt: skip
    f = contact_forces(rods, last.positions, last.velocities)
    assert float(f.normal[1, :, 2].sum()) == pytest.approx(weight, rel=0.02)
    assert float(f.depth.max()) == pytest.approx(weight / k, rel=0.05)


def test_two_free_rods_that_collide_bounce_back_with_their_momentum_kept():
    rod = CosseratRod.circular([L, L], R_ROD, STIFF, 11)
    v0 = 0.05  # m/s each, toward each other
    start = _pair(_lying(rod, (0, 0, -1.1 * R_ROD), (1, 0, 0)), _lying(rod, (0, 0, 1.1 * R_ROD), (0, 1, 0)))
    start.velocities[0, :, 2], start.velocities[1, :, 2] = v0, -v0
    contact = RodRodContact(R_ROD, stiffness=2000.0)
    opts = SimulationOptions(scheme="implicit", backend="torch", record_every=10)
    tr = rod.simulate(0.02, 5e-5, loads=[contact], initial=start, base="free", options=opts)
    z = tr.positions[..., 2].mean(-1)  # (T, 2) the rods' mean heights
    dt_rec = float(tr.times[1] - tr.times[0])
    vz = (z[-1] - z[-2]) / dt_rec
    assert abs(float(vz.sum())) < 1e-9  # momentum: the two equal rods' velocities stay opposite
    assert float(vz[0]) < -0.5 * v0 and float(vz[1]) > 0.5 * v0  # they bounced (restitution > 0.5)
    gap = (z[:, 1] - z[:, 0]).min()
    assert float(gap) > 2 * R_ROD - 0.5 * R_ROD  # the penetration stays under half the radius


def _folded(gap: float) -> Polyline:
    """A rod's centreline folded into a U: two legs ``gap`` apart (centre to centre) joined by a half turn."""
    n_turn = 24
    leg = (L - math.pi * gap / 2) / 2
    pts = [(-leg, gap / 2, 0.0)]
    pts += [(0.0 + gap / 2 * math.sin(th), gap / 2 * math.cos(th), 0.0)
            for th in torch.linspace(0, math.pi, n_turn).tolist()]  # fmt: skip
    pts += [(-leg, -gap / 2, 0.0)]
    return Polyline(pts, normal=(0.0, 0.0, 1.0))


@pytest.mark.parametrize("self_contact", [True, False])
def test_a_folded_rods_legs_meet_and_do_not_pass_through(self_contact):
    line = _folded(0.012)
    rod = CosseratRod.circular(line.length, R_ROD, Material(density=1000.0, youngs_modulus=1e7, poisson_ratio=0.3), 20)
    start = line.state(rod)
    s = start.positions[..., 1].sign()
    start.velocities[..., 1] = -0.6 * s * (start.positions[..., 0] < -0.01)  # the legs' far parts swing inward
    contact = RodRodContact(R_ROD, stiffness=20000.0, damping=0.2, self_contact=self_contact)
    # the free ends whip through large rotations: the implicit step's documented setting for them
    opts = SimulationOptions(
        scheme="implicit", implicit_beta=0.3, implicit_dissipation=0.05, backend="torch", record_every=20
    )
    tr = rod.simulate(0.04, 5e-5, loads=[contact], initial=start, base="free", options=opts)
    y_tip = tr.positions[..., [0, -1], 1].reshape(-1, 2)  # (T, 2): the two free ends, across the fold
    crossed = bool(((y_tip[:, 0] - y_tip[:, 1]) < 0).any())
    assert crossed is (not self_contact)
    if self_contact:
        assert float((y_tip[:, 0] - y_tip[:, 1]).min()) > 2 * R_ROD - 0.5 * R_ROD


def test_rod_contact_checks_its_arguments():
    with pytest.raises(ConfigError, match="RodRodContact.exclude"):
        RodRodContact(R_ROD, 10.0, exclude=0)
    with pytest.raises(ConfigError, match="RodRodContact.stiffness"):
        RodRodContact(R_ROD, -1.0)
