"""Fields, magnet loads, damping and the seed's damping-estimation filters (Sec. 3.2)."""

import math

import pytest
import torch

from flexlearn.physics.cosserat import (
    CallableField,
    Clamp,
    CosseratRod,
    Damping,
    DampingEstimator,
    EmbeddedMagnet,
    Gravity,
    HelmholtzField,
    Material,
    RotatingField,
    SimulationOptions,
    TipMagnet,
    UniformField,
    cylinder_magnet,
)
from flexlearn.physics.cosserat.analytic import corrected_modulus, fft_peak_frequencies, frequency_correction


def test_rotating_field_and_helmholtz_pairs():
    f = RotatingField(0.0145, 2.0, axes=((0, 1, 0), (0, 0, 1)), offset=(0, 0.00775, 0))
    x = torch.zeros(1, 3)
    assert torch.allclose(f(x, 0.0), torch.tensor([[0.0, 0.00775 + 0.0145, 0.0]]))
    assert torch.allclose(f(x, 0.125), torch.tensor([[0.0, 0.00775, 0.0145]]), atol=1e-15)
    h = HelmholtzField.from_flux_densities(0.01, 0.02)
    assert torch.allclose(h(x, 0.0), torch.tensor([[0.01, 0.02, 0.0]]))
    exact = HelmholtzField(currents=h.currents(0.0), model="biot_savart")
    b = exact(torch.zeros(2, 3), 0.0)
    assert torch.allclose(b[0], torch.tensor([0.01, 0.02, 0.0]), rtol=2e-3, atol=2e-5)
    g = exact.gradient(torch.tensor([[0.01, 0.0, 0.0]]), 0.0)  # Helmholtz: nearly uniform near the centre
    assert float(g.detach().abs().max()) < 0.01 * 0.01 / 0.01


def test_magnet_torque_and_force_from_field_gradient():
    rod = CosseratRod.circular(0.05, 2e-3, Material(1100.0, 4e5, 0.45), 4)
    st = rod.arc_state(0.4, (1, 0, 0))
    ctx = rod.context()

    def dipole_like(x, t):  # a non-uniform field, B = (x0², x0 x1, 1 + x2) · 0.1 T
        return 0.1 * torch.stack([x[..., 0] ** 2 + 1.0, x[..., 0] * x[..., 1], 1.0 + x[..., 2]], -1)

    mag = EmbeddedMagnet(2, (0.01, 0.0, 0.02), CallableField(dipole_like))
    f, tau = mag.apply(ctx, st.rotations, st.positions, 0.0)
    p = st.positions.clone().requires_grad_(True)
    energy = mag.potential(ctx, st.rotations, p, 0.0).sum()
    (g,) = torch.autograd.grad(energy, p)
    assert torch.allclose(f, -g, atol=1e-15)  # F = ∇(m·B) = −∂(−m·B)/∂x
    R2 = st.rotations[0, 2]
    m_w = R2 @ torch.tensor([0.01, 0.0, 0.02])
    b = dipole_like(st.positions[0, 2], 0.0)
    assert torch.allclose(R2 @ tau[0, 2], torch.linalg.cross(m_w, b))
    assert float(tau[0, [0, 1, 3, 4]].abs().max()) == 0.0  # exact: nodes without a magnet get no torque term


def test_magnet_mass_is_added_to_its_node():
    m, mass = cylinder_magnet(2e-3, 4e-3)
    assert m == pytest.approx(1.345 * math.pi * 4e-9 / (4e-7 * math.pi), rel=1e-6)
    rod = CosseratRod.circular(0.06, 2e-3, Material(1100.0, 4e5, 0.45), 10)
    ctx = rod.context([TipMagnet((0, 0, m), UniformField((0, 0.01, 0)), mass=mass)])
    assert float(ctx.mass[0, -1]) == pytest.approx(1100 * math.pi * 4e-6 * 0.006 / 2 + mass)


def test_damping_decays_the_energy():
    rod = CosseratRod.circular(0.05, 2e-3, Material(1100.0, 4e5, 0.45), 5)
    base = Clamp.horizontal()
    init = rod.arc_state(0.3, (0, 1, 0), base)
    dt = 0.5 * float(rod.stable_dt())
    for d in (Damping(alpha=20.0), Damping(beta=1e-4), Damping(translational=0.05, rotational=1e-6)):
        tr = rod.simulate(
            300 * dt,
            dt,
            initial=init,
            base=base,
            damping=d,
            options=SimulationOptions(record_every=50, record_energy=True),
        )
        e = tr.energy
        assert float(e[-1]) < 0.97 * float(e[0]), d


def test_estimation_filter_recovers_the_damping_capacity():
    """Data from a rod with a known per-node damping capacity K; the undamped model with the seed's
    filters (eqs. (19)–(21)) estimates K̂ ≈ K where the node moves."""
    rod = CosseratRod.circular(0.05, 2e-3, Material(1100.0, 4e5, 0.45), 5)
    base = Clamp.horizontal()
    init = rod.arc_state(0.3, (0, 1, 0), base)
    dt = 0.5 * float(rod.stable_dt())
    k_true = torch.full((1, 6, 3), 2e-3)
    truth = rod.simulate(
        400 * dt, dt, initial=init, base=base, loads=[Gravity()], damping=Damping(node_coefficients=k_true)
    )
    est = DampingEstimator(truth.positions, r=1.0, w=1e-30)
    obs = rod.simulate(400 * dt, dt, initial=init, base=base, loads=[Gravity()], observer=est)
    hist = torch.stack(est.history)[:, 0]  # (T, n, 3)
    v = torch.diff(truth.positions, dim=0) / dt  # (T-1, n, 3)
    wgt = v[:, 1:, 2] ** 2  # vertical motion of the free nodes
    k_avg = (hist[1:, 1:, 2] * wgt).sum() / wgt.sum()
    assert float(k_avg) == pytest.approx(2e-3, rel=0.05)
    assert float((obs.positions - truth.positions).abs().max()) < 1e-6


def test_frequency_correction_utility():
    assert frequency_correction(1.1, 1.0) == pytest.approx(1.21)
    assert corrected_modulus(1e6, 1.1, 1.0) == pytest.approx(1e6 / 1.21)


def test_prescribed_base_motion_is_followed():
    rod = CosseratRod.circular(0.05, 2e-3, Material(1100.0, 4e5, 0.45), 5)

    def motion(t):
        return torch.eye(3), torch.tensor([0.002 * math.sin(2 * math.pi * 5 * t), 0.0, 0.0])

    dt = 0.5 * float(rod.stable_dt())
    tr = rod.simulate(200 * dt, dt, base=Clamp(motion=motion), options=SimulationOptions(record_every=20))
    expected = 0.002 * torch.sin(2 * math.pi * 5 * tr.times)
    assert torch.allclose(tr.positions[:, 0, 0], expected, atol=1e-15)
    assert float(tr.positions[-1, -1, 0].abs()) > 1e-5  # the motion reaches the tip


def test_fft_peak_frequencies_of_a_two_tone_signal():

    t = torch.arange(4000) * 1e-3
    x = (torch.sin(2 * math.pi * 3.3 * t) + 0.5 * torch.sin(2 * math.pi * 17.1 * t)).numpy()
    w = fft_peak_frequencies(x, 1e-3, 2)
    assert w / (2 * math.pi) == pytest.approx([3.3, 17.1], rel=2e-3)
