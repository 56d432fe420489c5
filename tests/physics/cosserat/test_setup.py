"""Setting a rod up the way users describe it: material from (E, G) or (E, ν), the section's shear coefficient by
default (against Timoshenko's cantilever), the closed-form modes behind ``accurate_dt`` (against the autograd
Hessian), clamps in any orientation (rotational invariance of a run), rods from polylines, frames at requested
times."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.lie import so3_exp, so3_log
from flexlearn.physics.cosserat import Clamp, CosseratRod, Gravity, Material, RodState
from flexlearn.physics.cosserat.frame_times import plan_frames, simulate_at
from flexlearn.physics.cosserat.modes import autograd_frequencies, clamped_frequencies, stiffness_matrix
from flexlearn.physics.cosserat.polyline import Polyline, clamp_at, element_directors
from flexlearn.physics.cosserat.properties import CrossSection
from flexlearn.physics.cosserat.rotations import ORTHONORMAL_TOL, frame, half_rotation, orthonormalised
from flexlearn.physics.cosserat.simulation import RodSetup, SimulationOptions

# ------------------------------------------------------------------ material and shear coefficient


def test_material_from_e_and_g_equals_material_from_e_and_nu():
    for nu in (0.0, 0.3, 0.5):
        a = CosseratRod.circular(0.2, 2e-3, Material(1100.0, 4e5, nu), 6)
        b = CosseratRod.circular(0.2, 2e-3, Material(1100.0, 4e5, shear_modulus=4e5 / (2 * (1 + nu))), 6)
        for x, y in zip(a.stiffness(), b.stiffness()):
            torch.testing.assert_close(x, y, rtol=1e-14, atol=0)
        assert math.isclose(float(a.shear_coefficient), float(b.shear_coefficient), rel_tol=1e-14)


def test_material_errors_name_the_value():
    with pytest.raises(ConfigError, match="exactly one"):
        CosseratRod.circular(0.2, 2e-3, Material(1100.0, 4e5, 0.3, shear_modulus=1e5), 4)
    with pytest.raises(ConfigError, match="exactly one"):
        CosseratRod.circular(0.2, 2e-3, Material(1100.0, 4e5), 4)
    with pytest.raises(ConfigError, match=r"'shear_modulus' = 100000\.0.*E/3"):  # G < E/3: ν > 0.5
        CosseratRod.circular(0.2, 2e-3, Material(1100.0, 4e5, shear_modulus=1e5), 4)
    with pytest.raises(ConfigError, match=r"shear_modulus\[1\]"):
        CosseratRod.circular(0.2, 2e-3, Material(1100.0, 4e5, shear_modulus=torch.tensor([2e5, -1.0])), 4)
    with pytest.raises(ConfigError, match="custom cross-section"):
        CrossSection(1e-6, 1e-13, 1e-13, 2e-13)


def test_default_shear_coefficient_is_the_sections():
    circle = CrossSection.circular(1e-3)
    assert math.isclose(float(circle.shear_coefficient_for(torch.tensor(0.5))), 27 / 28, rel_tol=1e-15)
    assert math.isclose(float(circle.shear_coefficient_for(torch.tensor(0.0))), 6 / 7, rel_tol=1e-15)
    rect = CrossSection.rectangular(2e-3, 1e-3)
    assert math.isclose(float(rect.shear_coefficient_for(torch.tensor(0.3))), 13 / 15.3, rel_tol=1e-14)
    rod = CosseratRod.circular(0.2, 1e-3, Material(1000.0, 1e6, shear_modulus=1e6 / 3), 4)
    assert math.isclose(float(rod.shear_coefficient), 27 / 28, rel_tol=1e-14)  # PyElastica's value
    seed = CosseratRod(0.2, CrossSection.circular(1e-3, shear_coefficient=1.0), Material(1000.0, 1e6, 0.5), 4)
    assert float(seed.shear_coefficient) == 1.0
    batched = CosseratRod.circular(0.2, 1e-3, Material(1000.0, 1e6, torch.tensor([0.0, 0.5])), 4)
    torch.testing.assert_close(batched.shear_coefficient, torch.tensor([6 / 7, 27 / 28], dtype=torch.float64))


@pytest.mark.parametrize("nu", [0.0, 0.5])
def test_static_tip_deflection_converges_to_timoshenko_with_the_section_coefficient(nu):
    """A stubby cantilever (L/r = 5) under a tip force F: the linear static deflection of the discrete rod tends to
    Timoshenko's ``F L³/(3 E I) + F L/(k G A)`` at second order in 1/N; with k = 1 instead it would miss the shear
    part by 1/k − 1 (3.7 % at ν = ½, 17 % at ν = 0)."""
    L, r, E, F = 0.1, 0.02, 1e6, 1e-3
    G, A, I = E / (2 * (1 + nu)), math.pi * r * r, math.pi * r**4 / 4
    errors = []
    for n in (50, 100):
        rod = CosseratRod.circular(L, r, Material(1000.0, E, nu), n)
        K = stiffness_matrix(rod.context())[0, 6:, 6:]  # clamped at node 0
        f = torch.zeros(K.shape[0], dtype=torch.float64)
        f[-3] = F  # along base x at the tip
        tip = float(torch.linalg.solve(K, f)[-3])
        k = float(rod.shear_coefficient)
        shear = F * L / (k * G * A)
        errors.append((tip - F * L**3 / (3 * E * I) - shear) / shear)
    assert abs(errors[1]) < 1e-3
    assert 3.5 < errors[0] / errors[1] < 4.5  # second order


# ------------------------------------------------------------------ modes and accurate_dt


@pytest.mark.parametrize("strain", ["midpoint", "nodes"])
@pytest.mark.parametrize("rotary", ["section", "segment"])
def test_closed_form_frequencies_equal_the_autograd_hessian(strain, rotary):
    rod = CosseratRod.rectangular(
        0.3, torch.tensor([4e-3, 3e-3]), 2e-3, Material(1100.0, 3e5, 0.49), 6, strain=strain, rotary_inertia=rotary
    )
    rod.add_point_mass(-1, 2e-3, (1e-8, 2e-8, 3e-8))
    st = rod.straight_state(Clamp.horizontal())
    ctx = rod.context()
    ref = autograd_frequencies(ctx, st.rotations[:, 0], st.positions)
    torch.testing.assert_close(clamped_frequencies(ctx), ref, rtol=1e-8, atol=1e-6)
    torch.testing.assert_close(rod.linear_frequencies(rod_index=1), ref[1], rtol=1e-8, atol=1e-6)


def test_first_frequency_against_euler_bernoulli():
    L, r, E, rho = 1.0, 0.005, 2e6, 1200.0
    rod = CosseratRod.circular(L, r, Material(rho, E, 0.4), 40)
    w1 = 1.8751**2 * math.sqrt(E * math.pi * r**4 / 4 / (rho * math.pi * r * r)) / L**2
    assert abs(float(rod.linear_frequencies()[0]) / w1 - 1) < 1e-3


def test_accurate_dt_is_cached_by_value():
    rod = CosseratRod.circular(1.0, 0.02, Material(1000.0, 1e6, shear_modulus=1e6 / 3), 20)
    dt = rod.accurate_dt()
    omega = float(rod.linear_frequencies()[3])
    assert math.isclose(dt, math.sqrt(12e-3) / omega, rel_tol=0.05)  # ≈ √(12 rtol)/ω at β = ¼
    assert rod.accurate_dt() == dt
    with torch.no_grad():
        rod.youngs_modulus.mul_(4.0)  # an in-place change (identification) is a new key
        rod.shear_modulus.mul_(4.0)
    assert math.isclose(rod.accurate_dt(), dt / 2, rel_tol=1e-9)  # every ω ∝ √E at a fixed E/G
    assert rod.accurate_dt(rtol=1e-4) < rod.accurate_dt()


# ------------------------------------------------------------------ clamps in any orientation


def test_orthonormalised_accepts_rounded_rotations_and_refuses_the_rest():
    R = so3_exp(torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64))
    rounded = torch.round(R * 1e7) / 1e7  # seven decimals, as a file or a CAD tool writes them
    assert float((rounded.T @ rounded - torch.eye(3, dtype=torch.float64)).abs().max()) > 1e-9  # the old demand
    fixed = orthonormalised(rounded)
    torch.testing.assert_close(fixed.T @ fixed, torch.eye(3, dtype=torch.float64), rtol=0, atol=1e-15)
    assert float((fixed - R).abs().max()) < 1e-7
    assert float(torch.linalg.det(fixed)) > 0
    with pytest.raises(ConfigError, match=f"rotation matrix to within {ORTHONORMAL_TOL:g}"):
        orthonormalised(R + 1e-3)
    with pytest.raises(ConfigError, match="reflection"):
        orthonormalised(-R)
    with pytest.raises(ConfigError, match="finite"):
        orthonormalised(R * float("nan"))
    with pytest.raises(ConfigError, match=r"expected a \(3, 3\)"):
        orthonormalised(torch.eye(2))


def test_clamp_from_tangent_and_normal():
    gen = torch.Generator().manual_seed(4)
    for _ in range(5):
        t, n = torch.randn(3, generator=gen, dtype=torch.float64), torch.randn(3, generator=gen, dtype=torch.float64)
        c = clamp_at((1.0, 2.0, 3.0), tangent=t, normal=n)
        torch.testing.assert_close(c.rotation[:, 2], t / t.norm())
        assert abs(float(c.rotation[:, 0] @ n)) > 0 and abs(float(c.rotation[:, 0] @ t)) < 1e-15
        assert math.isclose(float(torch.linalg.det(c.rotation)), 1.0, rel_tol=1e-14)
    assert torch.equal(frame((0.0, 1.0, 0.0))[:, 2], torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))
    with pytest.raises(ConfigError, match="'normal'.*parallel"):
        clamp_at(tangent=(0.0, 0.0, 2.0), normal=(0.0, 0.0, -1.0))
    with pytest.raises(ConfigError, match="'tangent'.*non-zero"):
        clamp_at(tangent=(0.0, 0.0, 0.0))
    with pytest.raises(ConfigError, match="'position'"):
        clamp_at((1.0, 2.0))


def test_a_run_is_the_same_in_any_clamp_orientation():
    """Objectivity: a cantilever clamped along a random direction with gravity turned the same way moves as the
    horizontal one turned (LGVI, 300 steps)."""
    rod = CosseratRod.circular(0.2, 2e-3, Material(1100.0, 4e5, 0.45), 5)
    Q = so3_exp(torch.tensor([0.7, -0.4, 2.1], dtype=torch.float64))
    ref_base = Clamp.horizontal()
    base = clamp_at((0.1, -0.2, 0.3), rotation=torch.round(Q @ ref_base.rotation * 1e8) / 1e8)
    dt, opts = 0.5 * float(rod.stable_dt()), SimulationOptions(record_every=100, backend="torch")
    a = rod.simulate(300 * dt, dt, loads=[Gravity()], base=ref_base, options=opts)
    g = (Q @ torch.tensor([0.0, 0.0, -9.81], dtype=torch.float64)).tolist()
    b = rod.simulate(300 * dt, dt, loads=[Gravity(g)], base=base, options=opts)
    turned = (Q @ a.positions.unsqueeze(-1)).squeeze(-1) + base.position
    assert float((a.tip[-1] - a.tip[0]).norm()) > 1e-4  # it moved
    torch.testing.assert_close(b.positions, turned, rtol=0, atol=1e-9)


# ------------------------------------------------------------------ rods from polylines


def _rod(line: Polyline, n: int = 10) -> CosseratRod:
    return CosseratRod.circular(line.length, 5e-3, Material(1000.0, 1e6, shear_modulus=1e6 / 3), n)


def test_straight_polyline_is_the_rest_state():
    line = Polyline([[0.1, 0.0, 0.0], [0.4, 0.3, 0.2], [0.7, 0.6, 0.4]], normal=(0.0, 0.0, 1.0))
    rod = _rod(line, 7)
    st = line.state(rod)
    base = line.clamp(rod)
    ref = rod.straight_state(base)
    torch.testing.assert_close(st.positions, ref.positions, rtol=0, atol=1e-14)
    torch.testing.assert_close(st.rotations, ref.rotations, rtol=0, atol=1e-14)
    assert float(rod.potential_energy(st.rotations, st.positions)) < 1e-20


def test_arc_polyline_gives_the_arc_frames_and_curvature():
    """A quarter circle of radius 0.3 m sampled at 2000 points: node tangents are the arc's, the element curvature
    2 tan(θ/2)/l → 1/R, the director stays the plane's normal (parallel transport of a planar curve)."""
    R = 0.3
    th = torch.linspace(0, math.pi / 2, 2000, dtype=torch.float64)
    line = Polyline(torch.stack([R * torch.sin(th), torch.zeros_like(th), R * (1 - torch.cos(th))], -1), (0, 1, 0))
    rod = _rod(line, 10)
    st = line.state(rod)
    s = torch.linspace(0, line.length, 11, dtype=torch.float64) / R
    tangent = torch.stack([torch.cos(s), torch.zeros_like(s), torch.sin(s)], -1)
    assert float((st.rotations[0, :, :, 2] - tangent).norm(dim=-1).max()) < 1e-6
    rel = so3_log(st.rotations[0, :-1].transpose(-1, -2) @ st.rotations[0, 1:])
    kappa = rel.norm(dim=-1) / (line.length / 10)
    assert float((kappa - 1 / R).abs().max()) * R < 1e-3
    d1 = element_directors(st.rotations)[0]
    torch.testing.assert_close(d1, torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64).expand(10, 3))


def test_stretched_polyline_places_nodes_by_rest_arc():
    line = Polyline([[0.0, 0.0, 0.0], [0.0, 0.0, -1.1]], rest_arc=[0.0, 1.0], normal=(1, 0, 0))
    rod = CosseratRod.circular(1.0, 1e-3, Material(1000.0, 1e6, 0.5), 4)
    st = line.state(rod)
    torch.testing.assert_close(st.positions[0, :, 2], torch.linspace(0, -1.1, 5, dtype=torch.float64))


def test_a_bent_polyline_runs():
    """A helix start (free rod, no gravity): it springs back towards straight, momentum stays zero."""
    s = torch.linspace(0, 2 * math.pi, 400, dtype=torch.float64)
    line = Polyline(torch.stack([0.1 * torch.cos(s), 0.1 * torch.sin(s), 0.03 * s], -1), normal=(0, 0, 1))
    rod = _rod(line, 16)
    st = line.state(rod)
    dt = 0.5 * float(rod.stable_dt())
    tr = rod.simulate(100 * dt, dt, initial=st, base="free", options=SimulationOptions(record_every=50))
    assert tr.final is not None
    lin, _ = rod.momenta(tr.final)
    assert float(lin.abs().max()) < 1e-12
    assert float((tr.positions[-1] - tr.positions[0]).abs().max()) > 1e-4


def test_polyline_errors_name_the_field():
    with pytest.raises(ConfigError, match=r"'points\[2\]'.*repeats"):
        Polyline([[0, 0, 0], [1, 0, 0], [1, 0, 0]])
    with pytest.raises(ConfigError, match=r"'points' = \(3,\)"):
        Polyline([0.0, 1.0, 2.0])
    with pytest.raises(ConfigError, match=r"'points\[1\]'.*finite"):
        Polyline([[0, 0, 0], [float("nan"), 0, 0]])
    with pytest.raises(ConfigError, match="'rest_arc'.*increase"):
        Polyline([[0, 0, 0], [1, 0, 0]], rest_arc=[0.0, 0.0])
    with pytest.raises(ConfigError, match="'normal'.*parallel"):
        Polyline([[0, 0, 0], [1, 0, 0]], normal=(2, 0, 0)).frames(3)
    with pytest.raises(ConfigError, match="'normal'"):
        Polyline([[0, 0, 0], [1, 0, 0]], normal=(0, 1))
    line = Polyline([[0, 0, 0], [1, 0, 0]])
    with pytest.raises(ConfigError, match=r"'length' = 0\.9.*as long as its polyline"):
        line.state(CosseratRod.circular(0.9, 1e-3, Material(1000.0, 1e6, 0.5), 4))


# ------------------------------------------------------------------ frames at requested times


def test_plan_frames():
    plan = plan_frames(torch.linspace(0, 1, 11), 0.03)  # float32 times pass
    assert (plan.record_every, plan.n_steps, plan.first) == (4, 40, 0)
    assert math.isclose(plan.dt, 0.025, rel_tol=1e-12)
    assert plan_frames([0.5, 1.0, 1.5], 1.0)[1:4] == (1, 3, 1)
    with pytest.raises(ConfigError, match="'times'.*evenly spaced"):
        plan_frames([0.0, 0.1, 0.3], 0.01)
    with pytest.raises(ConfigError, match="'times'.*multiple of the spacing"):
        plan_frames([0.05, 0.15, 0.25], 0.01)
    with pytest.raises(ConfigError, match="'times'.*increase"):
        plan_frames([0.0, 0.2, 0.1], 0.01)
    with pytest.raises(ConfigError, match="'max_dt'"):
        plan_frames([0.0, 0.1], 0.0)


def test_simulate_at_records_exactly_the_requested_times():
    rod = CosseratRod.circular(0.2, 2e-3, Material(1100.0, 4e5, 0.45), 5)
    base = Clamp.horizontal()
    times = [0.004 * k for k in range(2, 9)]  # from 0.008 s
    max_dt = 0.9 * float(rod.stable_dt())
    tr = simulate_at(rod, times, max_dt, RodSetup(loads=[Gravity()], base=base))
    assert tr.positions.shape == (7, 6, 3)
    torch.testing.assert_close(tr.times, torch.tensor(times, dtype=torch.float64), rtol=0, atol=0)
    plan = plan_frames(times, max_dt)
    full = rod.simulate(plan.n_steps * plan.dt, plan.dt, loads=[Gravity()], base=base)  # every step
    torch.testing.assert_close(tr.positions, full.positions[2 * plan.record_every :: plan.record_every], rtol=0, atol=0)
    assert isinstance(tr.final, RodState)


def test_half_rotation_is_half_the_angle():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(500, 3, generator=gen, dtype=torch.float64)
    w = w / w.norm(dim=-1, keepdim=True) * torch.rand(500, 1, generator=gen, dtype=torch.float64) * 3.0
    w = torch.cat([w, 1e-9 * w[:10], torch.zeros(1, 3, dtype=torch.float64)])
    torch.testing.assert_close(half_rotation(so3_exp(w)), so3_exp(0.5 * w), rtol=0, atol=1e-12)
