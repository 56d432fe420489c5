"""Contact inside the implicit step (eq. (5) of flexlearn.physics.cosserat.implicit): the recursion of a node on a
penalty spring is the one the equation states (to round-off), so a penalty far stiffer than the step resolves
settles (the LGVI at that step throws the rod off); friction held at a slip velocity far below the explicit bound
creeps at the regularised law's speed; a sliding rod stops where Coulomb's law says and does not reverse; the
rod–rod blocks bound the pair matrix; points along the elements keep a chord out of a cylinder, and `lifted_off`
starts a rod outside it."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from flexlearn.physics.cosserat import (
    CosseratRod,
    CylinderContact,
    Gravity,
    Material,
    PlaneContact,
    Polyline,
    SimulationOptions,
)
from flexlearn.physics.cosserat.rod_contact import RodRodContact

L, R_ROD, G = 0.2, 2e-3, 9.81
MAT = Material(density=1000.0, youngs_modulus=1e6, poisson_ratio=0.5)


def _lying(rod, z: float, n: int):
    line = Polyline([[-0.5 * L, 0.0, z], [0.5 * L, 0.0, z]], normal=(0.0, 0.0, 1.0))
    return line.state(rod)


def _simulate(rod, loads, state, duration, dt, scheme="implicit", record_every=1, beta=0.25):
    opts = SimulationOptions(scheme=scheme, implicit_beta=beta, backend="torch", record_every=record_every)
    with torch.no_grad():
        return rod.simulate(duration, dt, loads=loads, initial=state, base="free", options=opts)


def test_a_node_on_a_stiff_penalty_follows_the_recursion_of_eq_5():
    """One element, both nodes on the plane: the vertical motion is a rigid translation (outside K), so each step is
    ``(m + h c + h² k)(q⁺ − 2q + q⁻) = −h² k q − h (c + h k)(q − q⁻)`` exactly, q the height above the equilibrium;
    here hω = 5, and the motion dies out, |λ|² = 1 / (1 + (hω)²) per step."""
    rod = CosseratRod.circular(L, R_ROD, MAT, 1)
    m = float(rod.context().mass[0, 0])  # each node: half the rod
    h, hw = 1e-3, 5.0
    k = m * (hw / h) ** 2
    plane = PlaneContact((0, 0, 0), (0, 0, 1), rod_radius=R_ROD, stiffness=k)
    z_eq = R_ROD - m * G / k
    tr = _simulate(rod, [Gravity((0, 0, -G)), plane], _lying(rod, z_eq - 0.5 * m * G / k, 1), 0.02, h)
    q = (tr.positions[:, 0, 2] - z_eq).double()
    a = h * h * k
    lhs = (m + a) * (q[2:] - 2 * q[1:-1] + q[:-2])
    rhs = -a * q[1:-1] - a * (q[1:-1] - q[:-2])
    assert torch.allclose(lhs, rhs, rtol=0, atol=1e-9 * a * float(q.abs().max()))
    assert float(q[-1].abs()) < 1e-6 * float(q[0].abs())  # |λ|^20 = 26^-10
    # the explicit step at hω = 5 gains energy at every bounce: the rod leaves the plane
    flung = _simulate(rod, [Gravity((0, 0, -G)), plane], _lying(rod, z_eq - 0.5 * m * G / k, 1), 0.02, h, "lgvi")
    assert float((flung.positions[:, 0, 2] - z_eq).max()) > 1000 * float(q[0].abs())


def test_friction_far_below_the_explicit_bound_creeps_at_the_regularised_law():
    """On a 0.3 rad slope with μ = 0.5 and ε = 1e-5 m/s (250× below the explicit bound h μ g = 2.5e-3 m/s at
    h = 5e-4 s, where explicit friction chatters) the rod creeps at ε s / sqrt(1 − s²), s = tan α / μ (5 %)."""
    rod = CosseratRod.circular(L, R_ROD, MAT, 10)
    alpha, mu, eps = 0.3, 0.5, 1e-5
    plane = PlaneContact((0, 0, 0), (0, 0, 1), rod_radius=R_ROD, stiffness=200.0, damping=0.2, friction=mu,
                         slip_velocity=eps)  # fmt: skip
    gravity = Gravity((G * math.sin(alpha), 0.0, -G * math.cos(alpha)))
    tr = _simulate(rod, [gravity, plane], _lying(rod, R_ROD, 10), 0.4, 5e-4, record_every=50)
    x, t = tr.positions[:, :, 0].mean(-1), tr.times
    i = int(torch.searchsorted(t, torch.tensor(0.2, dtype=t.dtype)))
    speed = float((x[-1] - x[i]) / (t[-1] - t[i]))
    share = math.tan(alpha) / mu
    assert speed == pytest.approx(eps * share / math.sqrt(1 - share**2), rel=0.05)


def test_a_sliding_rod_stops_where_coulomb_says_and_does_not_reverse():
    """Pushed at 0.2 m/s along a level floor with μ = 0.3 and ε = 1e-6 m/s, the rod slides v² / (2 μ g) (2 %) at
    h = 0.25 ms (ε 2,900× below the explicit bound h μ g), and its speed never changes sign (friction is backward
    Euler in the slip velocity)."""
    rod = CosseratRod.circular(L, R_ROD, MAT, 10)
    mu, v0 = 0.3, 0.2
    plane = PlaneContact((0, 0, 0), (0, 0, 1), rod_radius=R_ROD, stiffness=2000.0, damping=2.0, friction=mu,
                         slip_velocity=1e-6)  # fmt: skip
    m_node_weight = float(rod.context().mass[0, 1]) * G
    state = _lying(rod, R_ROD - m_node_weight / 2000.0, 10)  # at its resting penetration
    state = dataclasses.replace(state, velocities=torch.zeros_like(state.positions) + torch.tensor([v0, 0.0, 0.0]))
    tr = _simulate(rod, [Gravity((0, 0, -G)), plane], state, 0.2, 2.5e-4)
    x = tr.positions[:, :, 0].mean(-1)
    v = (x[1:] - x[:-1]) / 2.5e-4
    assert float(x[-1] - x[0]) == pytest.approx(v0**2 / (2 * mu * G), rel=0.02)
    assert float(v.min()) > -1e-6


@pytest.mark.parametrize("held", [False, True])
def test_the_rod_rod_pairs_enter_the_step_exactly(held):
    """The step's solve with the touching pairs' ``h J C Jᵀ`` (`filter_coupling`, the Woodbury update of the rods'
    own matrices) equals the dense solve of both rods' joint matrix, for rods crossing at random angles and speeds,
    with supports holding some directions or none; it adds no block to the nodes."""
    from flexlearn.physics.cosserat.implicit import _coupled_solve

    gen = torch.Generator().manual_seed(3)
    contact = RodRodContact(rod_radius=0.01, stiffness=1e4, damping=3.0, friction=0.4, slip_velocity=1e-3)
    n = 3
    for _ in range(10):
        p = torch.zeros(2, n, 3, dtype=torch.float64)
        p[0, :, 0] = torch.tensor([-0.1, 0.0, 0.1])
        p[1, :, 1] = torch.tensor([-0.1, 0.0, 0.1])
        p = p + 0.002 * torch.randn(2, n, 3, generator=gen, dtype=torch.float64)
        p[1, :, 2] += 0.01  # about 10 mm inside each other
        v = 0.1 * torch.randn(2, n, 3, generator=gen, dtype=torch.float64)
        pairs = contact.filter_coupling(p, v, 1e-3)
        assert pairs.nodes.shape[0] > 0 and float(contact.filter_blocks(p, v, 1e-3).abs().max()) == 0
        X = torch.randn(2, 6 * n, 6 * n, generator=gen, dtype=torch.float64)
        A = X @ X.transpose(-1, -2) + torch.eye(6 * n, dtype=torch.float64)
        F = torch.randn(2, 6 * n, generator=gen, dtype=torch.float64)
        free = None
        if held:  # the first node's position and the last's rotation held
            hold = torch.zeros(6 * n, dtype=torch.float64)
            hold[3:6], hold[-6:-3] = 1.0, 1.0
            free = torch.diag(1.0 - hold)
            A, F = free @ A @ free + torch.diag(hold), F @ free
        joint = torch.block_diag(A[0], A[1])
        for q in range(pairs.nodes.shape[0]):
            J = torch.zeros(3, 12 * n, dtype=torch.float64)
            for node, w in zip(pairs.nodes[q].tolist(), pairs.weights[q].tolist()):
                J[:, 6 * node + 3 : 6 * node + 6] += w * torch.eye(3, dtype=torch.float64)
            if free is not None:
                J = J @ torch.block_diag(free, free)
            joint = joint + J.T @ pairs.matrix[q] @ J
        dense = torch.linalg.solve(joint, F.reshape(-1))
        coupled = _coupled_solve(A, F, pairs, free).reshape(-1)
        assert float((coupled - dense).abs().max()) < 1e-10 * float(dense.abs().max())


def test_points_along_the_elements_keep_a_chord_out_of_a_cylinder():
    """A two-element rod bent over a cylinder with its nodes outside and its chords inside: node contact (q = 1)
    sees nothing, four points per element see the chords; `lifted_off` moves the nodes until none is inside."""
    pytest.importorskip("cosseratbench")
    from flexlearn.physics.cosserat.benchmark_problem import lifted_off

    nodes = torch.tensor([[-0.06, 0.0, 0.0], [0.0, 0.0, 0.0515], [0.06, 0.0, 0.0]], dtype=torch.float64)
    shape = dict(center=(0, 0, 0), axis=(0, 1, 0), radius=0.05, rod_radius=1e-3, stiffness=100.0)
    p = nodes.unsqueeze(0)
    assert float(CylinderContact(**shape).forces(p, torch.zeros_like(p)).normal.abs().max()) == 0.0
    four = CylinderContact(**shape, points_per_element=4)
    forces = four.forces(p, torch.zeros_like(p))
    assert float(forces.depth.max()) > 5e-3  # the chords cut in by ~1 cm
    lifted = lifted_off(nodes, [four])
    assert float(four.points(lifted.unsqueeze(0), torch.zeros_like(p)).depth.max()) <= 1e-3 * 1e-3
    assert float((lifted - nodes).norm(dim=-1).max()) < 0.05
    assert lifted_off(lifted, [four]) is lifted  # nothing inside: the nodes themselves
