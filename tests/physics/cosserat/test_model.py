"""Forces from the discrete energy, invariances, conservation of momenta and energy (seed 001, eqs. (5)–(9))."""

import math

import pytest
import torch

from flexlearn.lie import so3_exp
from flexlearn.physics.cosserat import Clamp, CosseratRod, Material, RodState, SimulationOptions
from flexlearn.physics.cosserat.strains import strains


def _random_config(rod, gen, rot=0.3, pos=0.02):
    st = rod.straight_state()
    B, n = rod.batch_size, rod.n_nodes
    R = st.rotations @ so3_exp(rot * torch.randn(B, n, 3, generator=gen))
    p = st.positions + pos * torch.randn(B, n, 3, generator=gen)
    return R, p


@pytest.mark.parametrize("curvature", ["cayley", "log"])
@pytest.mark.parametrize("strain", ["midpoint", "geodesic", "nodes"])
def test_forces_are_minus_energy_gradient(strain, curvature):
    gen = torch.Generator().manual_seed(0)
    rod = CosseratRod.circular(
        0.5, torch.tensor([0.01, 0.02]), Material(1200.0, 2e6, 0.4), 6, strain=strain, curvature=curvature
    )
    R, p = _random_config(rod, gen)
    f, tau = rod.internal_forces(R, p)
    pp = p.clone().requires_grad_(True)
    (gp,) = torch.autograd.grad(rod.potential_energy(R, pp).sum(), pp)
    eta = torch.zeros_like(p, requires_grad=True)
    (ge,) = torch.autograd.grad(rod.potential_energy(R @ so3_exp(eta), p).sum(), eta)
    assert torch.allclose(f, -gp, rtol=1e-10, atol=1e-10 * f.abs().max())
    assert torch.allclose(tau, -ge, rtol=1e-10, atol=1e-10 * tau.abs().max())


@pytest.mark.parametrize("angle", [0.1, 0.7, 1.5])
def test_geodesic_strain_vanishes_on_an_unstretched_arc_where_the_linear_mean_shrinks_it(angle):
    """Nodes on a circle, one rest length l apart as chords, frames tangent to it and turning by θ per element
    about an axis a ⊥ E3: the chord lies at θ/2 from both node frames, so the geodesic mid frame sees it
    exactly along E3 (Γ = 0 for any θ), the linear mean of the two views at (cos(θ/2) − 1) E3."""
    n, l = 5, 0.02
    axis = torch.tensor([math.cos(0.3), math.sin(0.3), 0.0], dtype=torch.float64)
    turns = so3_exp((torch.arange(n + 1, dtype=torch.float64) * angle).unsqueeze(-1) * axis).unsqueeze(0)
    chords = (so3_exp(((torch.arange(n, dtype=torch.float64) + 0.5) * angle).unsqueeze(-1) * axis) * l)[..., 2]
    p = torch.cat([torch.zeros(1, 1, 3, dtype=torch.float64), chords.cumsum(0).unsqueeze(0)], 1)
    e3 = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    rest = torch.full((1, n), l, dtype=torch.float64)
    geodesic = strains(turns, p, rest, e3, midpoint=True, geodesic=True)
    linear = strains(turns, p, rest, e3, midpoint=True)
    torch.testing.assert_close(geodesic.gL, torch.zeros(1, n, 3, dtype=torch.float64), rtol=0, atol=1e-14)
    torch.testing.assert_close(linear.gL, (math.cos(angle / 2) - 1.0) * e3.expand(1, n, 3), rtol=0, atol=1e-14)
    torch.testing.assert_close(geodesic.f, math.tan(angle / 2) * axis.expand(1, n, 3), rtol=0, atol=1e-14)


@pytest.mark.parametrize("tension_over_critical", [0.5, 4.0])
def test_the_linear_mean_lets_a_stretched_rod_zigzag_its_frames_where_the_geodesic_does_not(tension_over_critical):
    """Under tension the linear mean lets a straight rod zigzag its frames; the geodesic mid frame does not.

    The rod is stretched by ε (tension T = EA ε), its node frames turned alternately by ±φ about E1, positions
    held: every element turns by 2φ, and the sines of its two frames cancel in the mean, so no shear. The linear
    mean sees the chord at (1 + ε) cos φ along E3, the geodesic mid frame at 1 + ε. Per element, exactly,

        ΔV_midpoint = ½ EA l (((1 + ε) cos φ − 1)² − ε²) + 2 EI φ² / l,    ΔV_geodesic = 2 EI φ² / l,

    so the linear mean's straight rod is unstable once T l (1 + ε) > 4 EI / l (l > 2 √(EI/T)): a hanging soft rope
    at benchmark resolution (the pendulum at E = 1 MPa: l = 5 cm against 2 √(EI/T) = 2 cm) folds its frames."""
    n, r, phi = 20, 0.002, 0.05
    material = Material(1000.0, 1e6, 0.5)
    ea, ei = 1e6 * math.pi * r**2, 1e6 * math.pi * r**4 / 4
    l = 1.0 / n
    eps = tension_over_critical * 4.0 * ei / (ea * l * l)
    signs = torch.tensor([(-1.0) ** i for i in range(n + 1)], dtype=torch.float64)
    zigzag = so3_exp((phi * signs).unsqueeze(-1) * torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))
    bending = n * 2.0 * ei * phi**2 / l
    expected = {
        "midpoint": n * 0.5 * ea * l * (((1 + eps) * math.cos(phi) - 1) ** 2 - eps**2) + bending,
        "geodesic": bending,
    }
    for strain, change in expected.items():
        rod = CosseratRod.circular(1.0, r, material, n, strain=strain, curvature="log")
        st = rod.straight_state()
        p = st.positions * (1.0 + eps)
        rest = rod.potential_energy(st.rotations, p)
        turned = rod.potential_energy(st.rotations @ zigzag, p)
        assert math.isclose(float(turned - rest), change, rel_tol=1e-9), strain
    unstable = tension_over_critical * (1 + eps) > 1.0
    assert (expected["midpoint"] < 0) == unstable and expected["geodesic"] > 0


def test_internal_loads_are_self_equilibrated():
    gen = torch.Generator().manual_seed(1)
    rod = CosseratRod.rectangular(0.3, 0.004, 0.002, Material(1100.0, 3e5, 0.49), 7)
    R, p = _random_config(rod, gen, rot=0.5, pos=0.01)
    f, tau = rod.internal_forces(R, p)
    scale = f.abs().max() * 0.3
    assert f.sum(-2).abs().max() < 1e-12 * scale
    moment = torch.linalg.cross(p, f).sum(-2) + (R @ tau.unsqueeze(-1)).squeeze(-1).sum(-2)
    assert moment.abs().max() < 1e-12 * scale


def test_geometry_and_si_parameters():
    rod = CosseratRod.circular(0.2, 1e-3, Material(2690.0, 75e9, 0.33), 15)
    c1, c2 = rod.stiffness()
    area = math.pi * 1e-6
    k = 6 * 1.33**2 / (7 + 12 * 0.33 + 4 * 0.33**2)  # the solid circle's Timoshenko shear coefficient at ν = 0.33
    assert torch.allclose(c1[0, 0], torch.tensor([k * 75e9 / 2.66 * area] * 2 + [75e9 * area]))
    assert torch.allclose(c2[0, 0, :2], torch.tensor([75e9 * math.pi * 1e-12 / 4] * 2))
    assert math.isclose(float(rod.mass_per_length()), 2690 * area)
    sq = CosseratRod.rectangular(0.0855, 2e-3, 2e-3, Material(1100.0, 3.65e6, 0.5), 10, torsion="polar")
    _, c2 = sq.stiffness()
    assert math.isclose(float(c2[0, 0, 2]), 3.65e6 / 3 * 2 * (2e-3) ** 4 / 12, rel_tol=1e-12)
    sv = CosseratRod.rectangular(0.0855, 2e-3, 2e-3, Material(1100.0, 3.65e6, 0.5), 10)
    assert math.isclose(float(sv.torsion_constant), 0.1406 * (2e-3) ** 4, rel_tol=2e-3)


def test_free_rod_conserves_momenta_to_round_off_over_1e4_steps():
    gen = torch.Generator().manual_seed(2)
    rod = CosseratRod.circular(0.3, 0.01, Material(1000.0, 1e6, 0.3), 4)
    R, p = _random_config(rod, gen, rot=0.2, pos=0.005)
    v = 0.3 * torch.randn(1, 5, 3, generator=gen)
    w = 3.0 * torch.randn(1, 5, 3, generator=gen)
    init = RodState(p, R, v, w)
    dt = 0.5 * float(rod.stable_dt())
    tr = rod.simulate(1e4 * dt, dt, initial=init, base="free", options=SimulationOptions(record_every=1000))
    assert tr.positions.shape[0] == 11
    lin0, ang0 = rod.momenta(init)
    lin1, ang1 = rod.momenta(tr.final)
    assert (lin1 - lin0).abs().max() < 1e-12 * max(1.0, float(lin0.abs().max()))
    assert (ang1 - ang0).abs().max() < 1e-12 * float(ang0.abs().max())


def test_energy_error_has_no_secular_drift():
    gen = torch.Generator().manual_seed(3)
    rod = CosseratRod.circular(0.3, 0.01, Material(1000.0, 1e6, 0.3), 5)
    base = Clamp.horizontal()
    init = rod.arc_state(0.5, (0, 1, 0), base)
    init.angular_velocities = 2.0 * torch.randn(1, 6, 3, generator=gen)
    dt = 0.5 * float(rod.stable_dt())
    tr = rod.simulate(
        2e3 * dt, dt, initial=init, base=base, options=SimulationOptions(record_every=10, record_energy=True)
    )
    e = tr.energy
    rel = (e - e[0]) / e[0]
    q = len(rel) // 4
    first, last = rel[:q].abs().max(), rel[-q:].abs().max()
    assert rel.abs().max() < 5e-2
    assert last < 2.0 * first + 1e-6  # bounded oscillation, no growth


@pytest.mark.slow
def test_energy_error_bounded_over_a_long_run():
    """10⁵ steps of a clamped, pre-bent rod: the energy error oscillates, with no secular drift."""
    rod = CosseratRod.circular(0.3, 0.01, Material(1000.0, 1e6, 0.3), 5)
    base = Clamp.horizontal()
    init = rod.arc_state(0.5, (0, 1, 0), base)
    dt = 0.5 * float(rod.stable_dt())
    tr = rod.simulate(
        1e5 * dt, dt, initial=init, base=base, options=SimulationOptions(record_every=100, record_energy=True)
    )
    rel = (tr.energy - tr.energy[0]) / tr.energy[0]
    q = len(rel) // 10
    assert rel.abs().max() < 5e-2
    assert rel[-q:].abs().max() < 1.5 * rel[:q].abs().max() + 1e-6
