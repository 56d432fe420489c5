"""The implicit step's consistent translational mass (``implicit_mass='consistent'``, eq. (6) of
flexlearn.physics.cosserat.implicit): its kinetic energy is that of the linearly interpolated centreline, a rigid
rod on a pin swings with the continuous rod's inertia where the lumped mass's period is 1/(4N²) long, the kernel
solves the torch reference's equations, free fall is exact, both momenta and the energy of a free or linear rod are
kept, and a bad value is refused by name."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.cosserat import FREE, Clamp, CosseratRod, Gravity, Material, Pin, Polyline, RodState
from flexlearn.physics.cosserat.analytic import zero_crossing_frequency
from flexlearn.physics.cosserat.compiled import implicit as fused_implicit
from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.compiled.common import STRAIN_CODES
from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.implicit import ForceFilter, filter_forces
from flexlearn.physics.cosserat.simulation import SimulationOptions
from tests.physics.cosserat.same_runs import assert_same_runs

G = 9.81
CONSISTENT = SimulationOptions(scheme="implicit", implicit_mass="consistent")
needs_numba = pytest.mark.skipif(not lgvi.HAVE_NUMBA, reason="numba is not installed")


def _consistent(ctx):
    return dataclasses.replace(ctx, consistent_mass=True)


def test_kinetic_energy_is_that_of_the_linearly_interpolated_velocity():
    """½ vᵀ M v against a 2000-point quadrature of ½ ∫ ρ A |v(s)|² ds with v(s) linear on each element; the node
    momenta sum to the lumped Σ m v."""
    rod = CosseratRod.circular(torch.tensor([0.4, 0.7]), 4e-3, Material(1100.0, 1e6, 0.4), 5)
    ctx = _consistent(rod.context())
    v = torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    energy = 0.5 * (v * ctx.translational_momentum(v)).sum((-1, -2))
    t = torch.linspace(0.0, 1.0, 2001, dtype=torch.float64)
    line_density = float(rod.mass_per_length().flatten()[0])
    for b, length in enumerate((0.4, 0.7)):
        ve = v[b, :-1, None] * (1 - t[:, None]) + v[b, 1:, None] * t[:, None]  # (N, 2001, 3)
        integrand = (ve**2).sum(-1)
        quad = float(torch.trapezoid(integrand, t).sum()) * 0.5 * line_density * length / 5
        assert float(energy[b]) == pytest.approx(quad, rel=1e-6)
    assert torch.allclose(ctx.translational_momentum(v).sum(-2), (ctx.mass.unsqueeze(-1) * v).sum(-2), atol=1e-15)


@needs_numba
@pytest.mark.parametrize("held", ["free", "clamped", "pinned mid-rod"])
def test_kernel_filter_equals_the_dense_reference(held):
    """The kernel's block Cholesky with the consistent mass's couplings equals torch.linalg.solve on the dense
    (P (M + β h² K) P + H M) to round-off, the couplings to held directions dropped."""
    rod = CosseratRod.circular(0.2, torch.tensor([1e-3, 2e-3]), Material(1200.0, 2e9, 0.4), 7)
    gen = torch.Generator().manual_seed(5)
    st = rod.straight_state()
    R = st.rotations @ torch.linalg.matrix_exp(_hat(0.3 * torch.randn(2, 8, 3, generator=gen, dtype=torch.float64)))
    p = st.positions + 0.01 * torch.randn(2, 8, 3, generator=gen, dtype=torch.float64)
    ctx = _consistent(rod.context())
    mask = np.zeros((8, 6))
    if held == "clamped":
        mask[0] = 1.0
    elif held == "pinned mid-rod":
        mask[4, 3:] = 1.0
    projector = None if held == "free" else torch.diag_embed(torch.from_numpy(mask))
    f = torch.randn(2, 8, 3, generator=gen, dtype=torch.float64)
    tau = 1e-3 * torch.randn(2, 8, 3, generator=gen, dtype=torch.float64)
    bh2 = 0.25 * 1e-4**2
    fr, tr = filter_forces(ctx, R, p, f, tau, ForceFilter(bh2, projector))
    for b in range(2):
        fk, tk = f[b].numpy().copy(), tau[b].numpy().copy()
        work = (np.empty((8, 6, 6)), np.empty((8, 6, 6)), np.empty((8, 6)), np.empty((6, 12)), np.empty((12, 12)))
        ok = fused_implicit.filter_forces(
            R.numpy(), p.numpy(), ctx.shear_stiffness.numpy(), ctx.bend_stiffness.numpy(), ctx.rest_lengths.numpy(),
            ctx.mass.numpy(), ctx.inertia.numpy(), STRAIN_CODES["midpoint"], bh2, mask, b, fk, tk, *work, 0.0,
            np.zeros((2, 8, 3)), np.zeros((2, 8, 3)), ctx.mass_coupling.numpy(), np.zeros((1, 1, 3, 3)),
        )  # fmt: skip
        assert ok
        assert np.abs(fk - fr[b].numpy()).max() < 1e-10 * np.abs(fr[b].numpy()).max()
        assert np.abs(tk - tr[b].numpy()).max() < 1e-10 * np.abs(tr[b].numpy()).max()
    lumped, _ = filter_forces(rod.context(), R, p, f, tau, ForceFilter(bh2, projector))
    assert float((lumped - fr).abs().max()) > 1e-3 * float(fr.abs().max())  # the couplings change the filter


def _hat(x):
    z = torch.zeros_like(x[..., 0])
    return torch.stack(
        [
            torch.stack([z, -x[..., 2], x[..., 1]], -1),
            torch.stack([x[..., 2], z, -x[..., 0]], -1),
            torch.stack([-x[..., 1], x[..., 0], z], -1),
        ],
        -2,
    )


def _pendulum(length, theta0, n):
    """A stiff rod (E = 2 GPa, r = 3 mm) on a pin at the origin, released at rest at θ₀ from hanging down."""
    rod = CosseratRod.circular(length, 3e-3, Material(1000.0, 2e9, 0.4), n)
    tip = length * torch.tensor([math.sin(theta0), 0.0, -math.cos(theta0)], dtype=torch.float64)
    line = Polyline(torch.stack([torch.zeros(3, dtype=torch.float64), tip]), normal=(0.0, 1.0, 0.0))
    return rod, line.state(rod)


def test_a_rod_on_a_pin_swings_with_the_continuous_rods_inertia():
    """Four elements: with the consistent mass the period is the continuous rod's 2π √(2L/(3g)) (1 + θ₀²/16) to
    0.05 %; the lumped mass (I larger by 1/(2N²)) swings longer by √(1 + 1/(2N²)) − 1 = 1.55 %, within 0.05 %."""
    length, theta0, n, dt = 0.3, 0.05, 4, 1e-3
    rod, start = _pendulum(length, theta0, n)
    exact = 2 * math.pi * math.sqrt(2 * length / (3 * G)) * (1 + theta0**2 / 16)
    periods = {}
    for mass in ("consistent", "lumped"):
        options = SimulationOptions(scheme="implicit", implicit_mass=mass)
        tr = rod.simulate(1.9, dt, loads=[Gravity()], initial=start, base=Pin(), options=options)
        periods[mass] = 2 * math.pi / zero_crossing_frequency(tr.positions[:, -1, 0].numpy(), dt, center=False)
    assert periods["consistent"] / exact - 1 == pytest.approx(0.0, abs=5e-4)
    assert periods["lumped"] / exact - 1 == pytest.approx(math.sqrt(1 + 1 / (2 * n**2)) - 1, abs=5e-4)


@pytest.mark.parametrize("backend", ["torch", pytest.param("numba", marks=needs_numba)])
def test_free_fall_is_exact_and_a_free_rod_keeps_both_momenta(backend):
    """Column sums of M are the lumped masses: under gravity every node of a free straight rod falls at g (to
    round-off); without it, spinning and drifting at 10× the LGVI limit, Σ M v and Σ p × M v + R J ω stay constant."""
    rod = CosseratRod.circular(0.3, 5e-3, Material(1200.0, 2e6, 0.4), 6)
    dt = 10 * float(rod.stable_dt())
    options = dataclasses.replace(CONSISTENT, record_every=10**9, backend=backend)
    straight = rod.straight_state()
    fall = rod.simulate(200 * dt, dt, loads=[Gravity()], initial=straight, base=FREE, options=options).final
    drop = fall.positions - straight.positions
    assert float((drop[..., 2] + 0.5 * G * fall.time**2).abs().max()) < 1e-12
    assert float(drop[..., :2].abs().max()) < 1e-12
    st = rod.arc_state(0.3, (0.0, 1.0, 0.0))
    gen = torch.Generator().manual_seed(3)
    omega = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    v = torch.linalg.cross(omega.expand(1, 7, 3), st.positions)
    v = v + 0.05 * torch.randn(1, 7, 3, generator=gen, dtype=torch.float64)
    w = (st.rotations.transpose(-1, -2) @ omega.reshape(3, 1)).squeeze(-1)
    init = RodState(st.positions, st.rotations, v, w + 0.5 * torch.randn(1, 7, 3, generator=gen, dtype=torch.float64))
    final = rod.simulate(1000 * dt, dt, initial=init, base=FREE, options=options).final
    ctx = _consistent(rod.context())
    (lin0, ang0), (lin1, ang1) = rod.momenta(init, ctx), rod.momenta(final, ctx)
    assert float((lin1 - lin0).abs().max()) < 1e-11 * float(lin0.abs().max())
    assert float((ang1 - ang0).abs().max()) < 1e-11 * float(ang0.abs().max())


def _energy_errors(rod, base, dt, arc, ctx):
    """Relative energy error ½ vᵀ M v + V over E₀ (M of ``ctx``) after 100, 200, …, 1200 consistent-mass steps."""
    init = rod.arc_state(arc, (0, 1, 0), base)
    e0 = float(rod.kinetic_energy(init, ctx) + rod.potential_energy(init.rotations, init.positions))
    errors = []
    for k in range(1, 13):
        options = dataclasses.replace(CONSISTENT, record_every=10**9)
        fin = rod.simulate(100 * k * dt, dt, initial=init, base=base, options=options).final
        errors.append(float(rod.kinetic_energy(fin, ctx) + rod.potential_energy(fin.rotations, fin.positions)) / e0 - 1)
    return init, e0, errors


def test_the_energy_of_a_linear_rod_is_kept_with_the_consistent_kinetic_energy():
    """A clamped rod released from an arc at 30× the LGVI limit, 1200 steps: the relative error of ½ vᵀ M v
    (consistent M) plus the elastic energy falls as the square of the arc (measured 8.2e-4 at 0.01 rad, 8.2e-6 at
    0.001 rad; the lumped mass 3.5e-4 and 3.5e-6): the energy of the linear rod is kept, what is left is the
    explicit geometric stiffness. The record_energy trace is that same sum."""
    rod = CosseratRod.circular(0.3, 0.01, Material(1000.0, 1e6, 0.3), 5)
    base = Clamp.horizontal()
    dt = 30 * float(rod.stable_dt())
    ctx = _consistent(rod.context())
    _, _, large = _energy_errors(rod, base, dt, 0.01, ctx)
    init, e0, small = _energy_errors(rod, base, dt, 0.001, ctx)
    assert max(abs(e) for e in small) < 2e-5
    assert max(abs(e) for e in large) > 50 * max(abs(e) for e in small)  # quadratic in the amplitude
    options = dataclasses.replace(CONSISTENT, record_every=100, record_energy=True, backend="torch")
    tr = rod.simulate(1200 * dt, dt, initial=init, base=base, options=options)
    assert float(tr.energy[-1]) / e0 - 1 == pytest.approx(small[-1], abs=1e-9)


@needs_numba
def test_the_kernel_runs_the_consistent_mass_as_the_tensor_path_does():
    """A bent rod on two pins under gravity and damping, 300 implicit steps: the numba kernel's positions,
    rotations, reactions and final velocities equal the tensor path's to round-off."""
    s = torch.linspace(0.0, 1.0, 30, dtype=torch.float64)
    line = Polyline(torch.stack([0.3 * s, 0.02 * torch.sin(3 * s), -0.05 * s**2], 1), normal=(0.0, 0.0, 1.0))
    rod = CosseratRod.circular(line.length, 3e-3, Material(1000.0, 2e6, 0.4), 12)
    runs = {
        backend: rod.simulate(
            0.06, 2e-4, loads=[Gravity()], damping=Damping(alpha=5.0), initial=line.state(rod),
            base=[Pin(), Pin(node=-1)], options=dataclasses.replace(CONSISTENT, backend=backend, record_every=50),
        )
        for backend in ("numba", "torch")
    }  # fmt: skip
    assert_same_runs(runs["numba"], runs["torch"])


def test_a_bad_implicit_mass_is_refused_by_name():
    with pytest.raises(ConfigError, match="implicit_mass"):
        SimulationOptions(scheme="implicit", implicit_mass="diagonal")
