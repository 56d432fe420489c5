"""The smooth centreline of rod–rod contact (flexlearn.physics.cosserat.smooth_centreline): eq. (1) against its defining
properties, its derivatives against finite differences, the closest points against a dense search, and the
momentum the pair forces carry."""

from __future__ import annotations

import math

import torch

from flexlearn.physics.cosserat.rod_contact import RodRodContact, closest_points
from flexlearn.physics.cosserat.smooth_centreline import (
    closest_curve_points,
    element_stencil,
    stencil_weights,
)

F64 = torch.float64


def _curve(nodes: torch.Tensor, element: int, s: torch.Tensor) -> torch.Tensor:
    """Points (S, 3) of one rod's element curve at parameters s (S,); nodes (N+1, 3)."""
    stencil, at_start, at_end = element_stencil(torch.tensor([element]), nodes.shape[0] - 1)
    w = stencil_weights(s, at_start.expand_as(s), at_end.expand_as(s))
    return (w.unsqueeze(-1) * nodes[stencil[0]]).sum(-2)


def test_the_curve_passes_through_the_nodes_and_reproduces_a_quadratic():
    a = torch.arange(7.0, dtype=F64)
    nodes = torch.stack([a, 0.3 * a**2 - a, -0.1 * a**2 + 2.0], -1)  # x_a = q(a), q quadratic
    s = torch.linspace(0, 1, 11, dtype=F64)
    for element in range(1, 5):  # inside the rod: eq. (1) is exact for a quadratic
        exact = torch.stack([element + s, 0.3 * (element + s) ** 2 - (element + s), -0.1 * (element + s) ** 2 + 2], -1)
        assert torch.allclose(_curve(nodes, element, s), exact, atol=1e-12)
    for element in range(6):  # every element, the ends included: through its nodes, weights summing to one
        ends = _curve(nodes, element, torch.tensor([0.0, 1.0], dtype=F64))
        assert torch.allclose(ends, nodes[element : element + 2], atol=1e-12)
    for flags in [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)]:
        w = stencil_weights(s, torch.full_like(s, flags[0]), torch.full_like(s, flags[1]))
        assert torch.allclose(w.sum(-1), torch.ones_like(s), atol=1e-14)


def test_the_derivative_weights_equal_finite_differences():
    s = torch.linspace(0.05, 0.95, 7, dtype=F64)
    for flags in [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0)]:
        start, end = torch.full_like(s, flags[0]), torch.full_like(s, flags[1])
        for derivative in (1, 2):
            eps = 1e-6
            numeric = (stencil_weights(s + eps, start, end, derivative - 1)
                       - stencil_weights(s - eps, start, end, derivative - 1)) / (2 * eps)  # fmt: skip
            assert torch.allclose(stencil_weights(s, start, end, derivative), numeric, atol=1e-7)


def test_the_curve_of_a_polygon_on_a_circle_stays_far_closer_to_it_than_the_chords():
    """The cause of cogging: a chord sags κ ℓ²/8 inside the arc it cuts; eq. (1) is third order (measured: 60× closer
    at 0.3 rad per element)."""
    step = 0.3
    angles = step * torch.arange(12.0, dtype=F64)
    nodes = torch.stack([torch.cos(angles), torch.sin(angles), torch.zeros_like(angles)], -1)
    s = torch.linspace(0, 1, 101, dtype=F64)
    radial = max(float((_curve(nodes, e, s).norm(dim=-1) - 1).abs().max()) for e in range(1, 10))
    sagitta = 1 - math.cos(step / 2)
    assert radial < 0.05 * sagitta, (radial, sagitta)


def _random_pair(gen):
    """Two 6-element rods (element 33 mm, node bends near 10°) crossing near their middles at a random angle, about
    one contact diameter (10 mm) apart, each bent away from the other as where a load passes between them."""
    u = torch.linspace(-0.1, 0.1, 7, dtype=F64)
    angle = float(torch.rand(1, generator=gen, dtype=F64)) * math.pi
    wave = 0.002 * torch.randn(2, 7, 3, generator=gen, dtype=F64)
    first = torch.stack([u, 0 * u, 0.01 * torch.cos(20 * u)], -1) + wave[0]
    second = torch.stack([u * math.cos(angle), u * math.sin(angle), 0.03 - 0.01 * torch.cos(15 * u)], -1) + wave[1]
    return torch.stack([first, second])


def test_the_closest_points_equal_a_dense_search():
    gen = torch.Generator().manual_seed(3)
    grid = torch.linspace(0, 1, 2001, dtype=F64)
    for _ in range(10):
        p = _random_pair(gen)
        flat = p.reshape(-1, 3)
        ni, nj = torch.tensor([2, 3]), torch.tensor([9, 10])  # elements 2, 3 of rod 0 against 2, 3 of rod 1
        stencil_i, *flags_i = element_stencil(ni, 6)
        stencil_j, *flags_j = element_stencil(nj, 6)
        chord = closest_points(flat[ni], flat[ni + 1], flat[nj], flat[nj + 1])  # the start the contact uses
        pair = closest_curve_points(flat[stencil_i], flat[stencil_j], flags_i, flags_j, chord.s, chord.t)
        for k in range(2):
            ci, cj = _curve(p[0], int(ni[k]), grid), _curve(p[1], int(nj[k]) - 7, grid)
            dense = float(torch.cdist(ci, cj).min())
            found = float((pair.ci[k] - pair.cj[k]).norm())
            assert found <= dense + 1e-9, (found, dense)
            assert found >= dense - 1e-6  # the grid's own resolution


def test_the_pair_forces_carry_no_net_force_or_moment():
    gen = torch.Generator().manual_seed(5)
    contact = RodRodContact(rod_radius=0.008, stiffness=500.0, self_contact=False, smooth=True)
    for _ in range(5):
        p = _random_pair(gen)
        normal, friction, depth = contact.forces(p, torch.zeros_like(p))
        assert float(depth.max()) > 0
        assert float(normal.sum((0, 1)).abs().max()) < 1e-12 * float(normal.abs().max())
        moment = torch.linalg.cross(p, normal, dim=-1).sum((0, 1))
        assert float(moment.abs().max()) < 1e-12 * float((p.norm(dim=-1, keepdim=True) * normal).abs().max())


def test_a_load_inside_an_element_finds_the_string_less_stiffened_on_the_curve_than_on_the_chord():
    """A taut string (tension 1, length 1, 21 elements) under a unit point load: the deflection under the load is
    wᵀ G w for the load's node weights w (G the string's nodal flexibility, x_a (1 − x_b) for a ≤ b), and x (1 − x) at
    the point for the continuous string. At an element's middle the chord's weights lose 4.8 % of it, the curve's
    2.2 %: the stiffening that makes frictionless contact prefer nodes (docs/cosserat.md, chords or curve)."""
    n = 21
    x = torch.arange(n + 1, dtype=F64) / n
    flexibility = torch.minimum(x[:, None], x[None, :]) * (1 - torch.maximum(x[:, None], x[None, :]))
    s = torch.tensor([0.5], dtype=F64)
    nodes, at_start, at_end = element_stencil(torch.tensor([10]), n)
    w_curve = torch.zeros(n + 1, dtype=F64).index_add_(0, nodes[0], stencil_weights(s, at_start, at_end)[0])
    w_chord = torch.zeros(n + 1, dtype=F64)
    w_chord[10:12] = 0.5
    exact = float((x[10] + 0.5 / n) * (1 - x[10] - 0.5 / n))
    loss = {name: 1 - float(w @ flexibility @ w) / exact for name, w in (("chord", w_chord), ("curve", w_curve))}
    assert 0.04 < loss["chord"] < 0.055 and 0 < loss["curve"] < 0.5 * loss["chord"], loss
