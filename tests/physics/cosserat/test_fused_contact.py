"""Contact in the fused kernel (flexlearn.physics.cosserat.compiled.contact): the numba loops give the torch
reference's forces and implicit-step blocks to round-off (plane, cylinder, sphere, node and element points, rod–rod
and self-contact, with friction and damping), and whole runs with contact on the kernel equal the tensor path's."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from flexlearn.physics.cosserat import (
    FREE,
    CosseratRod,
    CylinderContact,
    Gravity,
    Material,
    Pin,
    PlaneContact,
    Polyline,
    RodRodContact,
    RodState,
    SphereContact,
)
from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.simulation import SimulationOptions
from tests.physics.cosserat.same_runs import assert_same_runs

pytestmark = pytest.mark.skipif(not lgvi.HAVE_NUMBA, reason="numba is not installed")
LAW = dict(rod_radius=0.01, stiffness=300.0, damping=0.4, friction=0.5, slip_velocity=1e-3)


def _kernel(contact, p, v, h):
    from flexlearn.physics.cosserat.compiled.contact import (
        add_obstacle_contacts,
        add_rod_rod_contacts,
        contact_arrays,
        n_contact_points,
        point_buffer,
    )
    from flexlearn.physics.cosserat.compiled.coupled import HELD, PAIR, PAIR_A, PAIR_S, SHARES

    arrays = contact_arrays([contact], p)
    force, blocks = np.zeros(p.shape), np.zeros((*p.shape, 3))
    pn, vn = p.numpy().copy(), v.numpy().copy()
    n_points = n_contact_points(arrays.obstacles, arrays.pairs, p.shape[0], p.shape[1])
    flags = np.full(n_points, -1, dtype=np.int64)  # the clipped law
    points = point_buffer(n_points)
    add_obstacle_contacts(arrays.obstacles, h, pn, vn, force, blocks, flags, points)
    add_rod_rod_contacts(arrays.pairs, arrays.laws, h, pn, vn, force, flags, points)
    floats, ints, count = points
    coupled = [at for at in range(count[0]) if ints[at, HELD] == 1 and ints[at, PAIR] == 1]
    n = floats[coupled, 1:4]
    nn = n[:, :, None] * n[:, None, :]
    a, s = floats[coupled, PAIR_A, None, None], floats[coupled, PAIR_S, None, None]
    return force, blocks, a * nn + s * (np.eye(3) - nn), ints[coupled, :SHARES]  # h C = a n nᵀ + s (I − n nᵀ)


def _compare(contact, p, v, h):
    normal, friction, depth = contact.forces(p, v, h)
    assert float(depth.max()) > 0 and float(friction.abs().max()) > 0  # points in contact, sliding
    force, blocks, matrices, nodes = _kernel(contact, p, v, h)
    reference = (normal + friction).numpy()
    assert np.abs(force - reference).max() < 1e-12 * np.abs(reference).max()
    ref_blocks = contact.filter_blocks(p, v, h).numpy()
    assert np.abs(blocks - ref_blocks).max() <= 1e-12 * max(np.abs(ref_blocks).max(), 1e-300)
    if not contact.couples_nodes:  # obstacles: node blocks only
        assert nodes.shape[0] == 0 and (np.abs(ref_blocks).max() > 0) == (h > 0)
        return
    coupling = contact.filter_coupling(p, v, h)  # rod–rod pairs: no blocks, each pair's h C
    assert nodes.shape[0] == coupling.nodes.shape[0] > 0 and np.abs(ref_blocks).max() == 0
    order, ref_order = np.lexsort(nodes.T), np.lexsort(coupling.nodes.numpy().T)
    assert np.array_equal(nodes[order], coupling.nodes.numpy()[ref_order])
    ref_matrices = coupling.matrix.numpy()[ref_order]
    assert np.abs(matrices[order] - ref_matrices).max() <= 1e-12 * max(np.abs(ref_matrices).max(), 1e-300)
    assert (np.abs(ref_matrices).max() > 0) == (h > 0)


def _wavy_rods(B=2, n=9, seed=0):
    gen = torch.Generator().manual_seed(seed)
    s = torch.linspace(-0.2, 0.2, n, dtype=torch.float64)
    p = torch.stack([s, 0.02 * torch.sin(9 * s), 0.004 + 0.01 * torch.cos(7 * s)], -1).expand(B, n, 3).clone()
    p = p + 0.004 * torch.randn(B, n, 3, generator=gen, dtype=torch.float64)
    return p, 0.05 * torch.randn(B, n, 3, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("q", [1, 3])
@pytest.mark.parametrize("obstacle", ["plane", "cylinder", "sphere"])
@pytest.mark.parametrize("h", [0.0, 2e-3])
def test_obstacle_forces_and_blocks_equal_the_torch_reference(obstacle, q, h):
    p, v = _wavy_rods()
    contact = {
        "plane": lambda: PlaneContact((0, 0, 0), (0.1, 0.0, 1.0), points_per_element=q, **LAW),
        "cylinder": lambda: CylinderContact((0, 0, -0.1), (0, 1, 0.2), 0.105, 0.3, points_per_element=q, **LAW),
        "sphere": lambda: SphereContact((0.05, 0, -0.2), 0.205, points_per_element=q, **LAW),
    }[obstacle]()
    _compare(contact, p, v, h)


@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("h", [0.0, 2e-3])
def test_rod_rod_and_self_contact_forces_and_blocks_equal_the_torch_reference(h, smooth):
    """Two rods crossing, the second folded back on itself (self-contact), and a pair of parallel elements; contact
    on the chords and on the smooth centreline."""
    s = torch.linspace(0.0, 1.0, 11, dtype=torch.float64)
    first = torch.stack([0.4 * s - 0.2, 0 * s, 0.015 * torch.ones_like(s)], -1)
    fold = torch.stack([0.05 * torch.cos(math.pi * s) - 0.02, 0.2 * torch.sin(math.pi * s) - 0.1, 0.0 * s], -1)
    fold[:, 2] = 0.012 * torch.cos(2 * math.pi * s)
    p = torch.stack([first, fold])
    p[1, 8:] += torch.tensor([0.0, 0.0, 0.0])
    v = 0.05 * torch.randn(2, 11, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    contact = RodRodContact(**LAW, exclude=2, smooth=smooth)
    _compare(contact, p, v, h)
    parallel = torch.stack([first, first + torch.tensor([0.0, 0.015, 0.0], dtype=torch.float64)])
    _compare(RodRodContact(**LAW, smooth=smooth), parallel, v, h)


def _rope(n=12):
    line = Polyline([[-0.2, 0.0, 0.03], [0.2, 0.0, 0.012]], normal=(0, 0, 1))
    rod = CosseratRod.circular(line.length, 0.01, Material(1000.0, 1e6, poisson_ratio=0.5), n)
    return line, rod


def _same_run(rod, h, duration, loads, initial, base, scheme, damping=None):
    options = SimulationOptions(scheme=scheme, record_every=25)
    runs = {
        backend: rod.simulate(duration, h, loads=loads, damping=damping, initial=initial, base=base,
                              options=dataclasses.replace(options, backend=backend))
        for backend in ("numba", "torch")
    }  # fmt: skip
    assert assert_same_runs(runs["numba"], runs["torch"], reactions=base is not FREE) > 1e-4
    return runs["numba"]


@pytest.mark.parametrize("scheme", ["lgvi", "implicit"])
def test_a_rope_dropped_on_a_floor_and_a_sphere_runs_in_the_kernel_as_on_the_tensor_path(scheme):
    """A free rope tilted onto a floor with friction and a sphere under it, 400 steps: the kernel's positions and
    final velocities equal the tensor path's to round-off (LGVI at its stable step, implicit at 2 ms)."""
    line, rod = _rope()
    loads = [
        Gravity(),
        PlaneContact((0, 0, 0), (0, 0, 1), **{**LAW, "stiffness": 30.0}),
        SphereContact((0.1, 0.0, -0.03), 0.04, points_per_element=2, **{**LAW, "stiffness": 30.0}),
    ]
    h = 0.5 * float(rod.stable_dt()) if scheme == "lgvi" else 2e-3
    if scheme == "lgvi":
        h = min(h, 0.2 * math.sqrt(float(rod.context().mass.min()) / 30.0))
    _same_run(rod, h, 400 * h, loads, line.state(rod), FREE, scheme, Damping(alpha=2.0))


@pytest.mark.parametrize("height, smooth", [(0.021, False), (0.0195, False), (0.0195, True)])
def test_two_pinned_ropes_crossing_run_in_the_kernel_as_on_the_tensor_path(height, smooth):
    """Two ropes, pinned at both ends, the upper one falling onto the lower, or starting 0.5 mm inside it (rod–rod
    contact on the chords and on the smooth centreline, with self-contact, the implicit step, 300 steps; the pairs'
    exact matrices from the first filter on): kernel and tensor path agree to round-off, and the upper rope is held
    up."""
    n = 10
    s = torch.linspace(-0.2, 0.2, n + 1, dtype=torch.float64)
    lower = torch.stack([s, 0 * s, 0 * s], -1)
    upper = torch.stack([0 * s, s, height + 0 * s], -1)
    rod = CosseratRod.circular(torch.tensor([0.4, 0.4]), 0.01, Material(1000.0, 1e6, poisson_ratio=0.5), n)
    state = [Polyline(x, normal=(0, 0, 1)).state(rod) for x in (lower, upper)]
    positions, rotations = (torch.cat([getattr(st, f)[:1] for st in state]) for f in ("positions", "rotations"))
    initial = RodState(positions, rotations, torch.zeros_like(positions), torch.zeros_like(positions))
    contact = RodRodContact(rod_radius=0.01, stiffness=2000.0, damping=0.5, friction=0.3, slip_velocity=1e-3,
                            smooth=smooth)  # fmt: skip
    tr = _same_run(rod, 1e-3, 0.3, [Gravity(), contact], initial, [Pin(), Pin(node=-1)], "implicit", Damping(1.0))
    assert float(tr.positions[-1, 1, n // 2, 2] - tr.positions[-1, 0, n // 2, 2]) > 0.015


def test_the_kernel_takes_as_many_newton_steps_to_the_closest_curve_points_as_the_torch_reference():
    from flexlearn.physics.cosserat import smooth_centreline
    from flexlearn.physics.cosserat.compiled import curve_pairs

    assert curve_pairs.NEWTON_ITERATIONS == smooth_centreline.NEWTON_ITERATIONS
