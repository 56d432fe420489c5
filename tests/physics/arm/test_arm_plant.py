"""Two-link flexible arm simulator (seed 000, §V-A): Lagrangian by autodiff, integrator, IMU synthesis."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.arm import ArmConfig, ArmLinkConfig, FlexibleArmPlant, linearized_frequencies, seed_arm_config
from flexlearn.physics.modal import FlexibleLink
from flexlearn.sim.arm_closed_loop import ImuArray, imu_frames, simulate_closed_loop

f64 = torch.float64
POS = [[0.5625, 3.9375], [0.44375, 1.33125, 3.10625]]


@pytest.fixture(scope="module")
def plant():
    return FlexibleArmPlant(seed_arm_config(n_modes=(2, 2)))


def _random_state(plant, B=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = 0.3 * torch.randn(B, plant.N, generator=g, dtype=f64)
    qd = torch.randn(B, plant.N, generator=g, dtype=f64)
    return q, qd


def test_mass_matrix_is_jacobian_form(plant):
    """∂²T/∂q̇² by autodiff equals Jᵀ diag(m) J + Σ I ∇a∇aᵀ from the kinematic Jacobian (independent path)."""
    q, _ = _random_state(plant, 2)
    M = plant.mass_matrix(q)
    for b in range(2):
        Jp, Ja = torch.autograd.functional.jacobian(lambda z: plant._pa(z.unsqueeze(0)), q[b])
        Jp, Ja = Jp[0], Ja[0]  # (P, 2, N), (A, N)
        ref = torch.einsum("p,pkn,pkm->nm", plant._mass, Jp, Jp) + torch.einsum("a,an,am->nm", plant._inert, Ja, Ja)
        assert torch.allclose(M[b], ref, rtol=1e-10, atol=1e-9)
        assert torch.allclose(M[b], M[b].T, atol=1e-9)
        assert bool((torch.linalg.eigvalsh(M[b]) > 0).all())


def test_equations_of_motion_match_lagrange_by_finite_differences(plant):
    """M q̈ + (velocity terms) + ∂V/∂q = Bτ checked against d/dt ∂L/∂q̇ − ∂L/∂q by central differences."""
    q, qd = _random_state(plant, 1, seed=4)
    tau = torch.tensor([[300.0, -50.0]], dtype=f64)
    plant_d0 = plant.D.clone()
    plant.D.zero_()
    try:
        qdd = plant.accel(q, qd, tau)
        h = 1e-6

        def p_of(qq, vv):
            qq = qq.clone().requires_grad_(True)
            vv = vv.clone().requires_grad_(True)
            T = plant.kinetic(qq, vv).sum()
            return torch.autograd.grad(T, vv)[0]

        qp, qm = q + h * qd + 0.5 * h * h * qdd, q - h * qd + 0.5 * h * h * qdd
        dpdt = (p_of(qp, qd + h * qdd) - p_of(qm, qd - h * qdd)) / (2 * h)
        qq = q.clone().requires_grad_(True)
        L = plant.kinetic(qq, qd).sum() - plant.potential(qq).sum()
        dLdq = torch.autograd.grad(L, qq)[0]
        resid = dpdt - dLdq - tau @ plant.B.t()
        assert float(resid.abs().max()) < 1e-4 * float((dLdq.abs().max()))
    finally:
        plant.D.copy_(plant_d0)


def test_energy_conserved_without_damping_or_input():
    p = FlexibleArmPlant(seed_arm_config(n_modes=(2, 2), damping=0.0))
    x = p.initial_state(torch.tensor([[0.2, -0.5]], dtype=f64))
    x[:, p.N : p.N + 2] = torch.tensor([0.5, -1.0], dtype=f64)
    x[:, 2] += 0.5  # excite link 1's first mode
    u = torch.zeros(1, 2, dtype=f64)
    E0 = float(p.energy(x))
    T0 = float(p.kinetic(x[:, : p.N], x[:, p.N : 2 * p.N]))
    dev = 0.0
    for _ in range(40):
        x = p.step(x, u, 1e-3, iters=6)
        dev = max(dev, abs(float(p.energy(x)) - E0))
    assert dev < 1e-5 * T0
    assert abs(float(x[0, 0]) - 0.2) > 1e-3  # it moved


def test_linearized_frequencies_clamped_link_match_modal_module():
    """Hub locked, no gravity: the Ritz frequencies of the plant match FlexibleLink (exactly for its own modes,
    from above and converging for bare-cantilever assumed modes with the payload added by the Lagrangian)."""
    ref = FlexibleLink(74300.0, 5.37, 4.5, 20.0).natural_frequencies(3)
    same = FlexibleArmPlant(ArmConfig(links=(ArmLinkConfig(tip_mass=20.0, n_modes=3),), gravity=0.0))
    f = linearized_frequencies(same, torch.zeros(same.N, dtype=f64), locked=[0])
    assert torch.allclose(f, ref, rtol=1e-7)
    ritz = FlexibleArmPlant(
        ArmConfig(links=(ArmLinkConfig(tip_mass=20.0, n_modes=6, mode_tip_mass=0.0),), gravity=0.0, quad_panels=12)
    )
    f6 = linearized_frequencies(ritz, torch.zeros(ritz.N, dtype=f64), locked=[0])[:3]
    assert bool((f6 >= ref * (1 - 1e-9)).all())
    assert torch.allclose(f6[:2], ref[:2], rtol=2e-3)
    # free hub (pinned-free link with hub inertia): a rigid zero mode and a first flexible mode above the clamped one
    fr = linearized_frequencies(same, torch.zeros(same.N, dtype=f64))
    assert float(fr[0]) < 1e-6 and float(fr[1]) > float(ref[0])


def test_static_sag_matches_cantilever_formula():
    p = FlexibleArmPlant(ArmConfig(links=(ArmLinkConfig(tip_mass=20.0, n_modes=3),)))
    q = p.static_equilibrium(torch.zeros(1, 1, dtype=f64))
    w = float(p.tip_quantities(q)["tip"][0, 0])
    g, EI, rA, L, M = 9.80665, 74300.0, 5.37, 4.5, 20.0
    exact = -(rA * g * L**4 / (8 * EI) + M * g * L**3 / (3 * EI))
    assert w == pytest.approx(exact, rel=2e-3)
    # holding torque = total gravity moment about the joint (rigid + deflection)
    tau = float(p.holding_torque(torch.cat([q, torch.zeros_like(q)], -1))[0, 0])
    assert tau == pytest.approx(g * (rA * L * L / 2 + M * L), rel=1e-3)


def test_imu_kinematics_equal_nested_autodiff_and_rest_reads_gravity(plant):
    q, qd = _random_state(plant, 2, seed=2)
    qdd = torch.randn_like(q)
    a1, g1 = plant.imu(q, qd, qdd, POS)
    a2, g2 = plant.imu_autodiff(q, qd, qdd, POS)
    assert torch.allclose(a1, a2, atol=1e-10) and torch.allclose(g1, g2, atol=1e-12)
    x = plant.initial_state(torch.tensor([[0.3, -0.4]], dtype=f64))
    z = torch.zeros(1, plant.N, dtype=f64)
    fr = imu_frames(plant, x[:, : plant.N], z, z, ImuArray(POS))[0]
    assert torch.allclose(fr[:, :3].norm(dim=-1), torch.full((5,), 9.80665, dtype=f64))
    assert torch.allclose(fr[:, 3:], torch.zeros(5, 3, dtype=f64))
    psi = torch.atan2(fr[:, 1], fr[:, 2])
    slope = plant.imu_rows(POS)[0][1][0] @ x[0, 2:4]  # w₁′ at the reference IMU
    assert float(psi[0]) == pytest.approx(0.3 + float(slope), abs=1e-12)


def test_rest_is_equilibrium_and_actuator_lag_first_order():
    p = FlexibleArmPlant(seed_arm_config(n_modes=(1, 1), actuator_tau=0.02))
    x = p.initial_state(torch.tensor([[0.2, -0.6]], dtype=f64))
    u = p.holding_torque(x)
    y = x
    for _ in range(20):
        y = p.step(y, u, 1e-3)
    assert torch.allclose(y, x, atol=1e-9)
    # lag state responds as 1 − exp(−t/τ) to a step of the command (the arm moves as it likes)
    du = torch.tensor([[100.0, 0.0]], dtype=f64)
    y = x
    for _ in range(20):
        y = p.step(y, u + du, 1e-3)
    rise = float(y[0, 2 * p.N] - x[0, 2 * p.N]) / 100.0
    assert rise == pytest.approx(1 - math.exp(-1.0), rel=2e-3)


def test_config_errors():
    with pytest.raises(ConfigError, match="n_modes"):
        FlexibleArmPlant(ArmConfig(links=(ArmLinkConfig(n_modes=0),)))
    with pytest.raises(ConfigError, match="links"):
        FlexibleArmPlant(ArmConfig(links=()))
    with pytest.raises(ConfigError, match="actuator_tau"):
        FlexibleArmPlant(ArmConfig(actuator_tau=-1.0))
    from flexlearn.config import from_dict

    cfg = from_dict(ArmConfig, {"links": [{"length": 2.0, "n_modes": 2}], "gravity": 0.0})
    assert FlexibleArmPlant(cfg).N == 3
    with pytest.raises(ConfigError, match=r"arm.links\[0\].*lenth"):
        from_dict(ArmConfig, {"links": [{"lenth": 2.0}]})


def test_closed_loop_holds_rest_imu_fed():
    """Short closed loop: the IMU-fed rigid PD baseline holds the arm at θ₀ (noisy IMUs)."""
    import dataclasses

    from flexlearn.runtime.arm.controller import ArmController, ArmControllerConfig
    from flexlearn.sim.arm_closed_loop import ImuNoiseConfig

    cfg = dataclasses.replace(ArmControllerConfig(), t0=10.0, variant="rigid")
    p = FlexibleArmPlant(seed_arm_config(n_modes=(2, 2), hub_inertia=cfg.hub_inertia, payload=cfg.payload))
    c = torch.jit.script(ArmController.build(cfg))
    log = simulate_closed_loop(p, [lambda fr, t, info: c(fr, t)], cfg.theta0, 0.15, ImuArray(POS, ImuNoiseConfig()))
    err = log["theta"][0] - torch.tensor(cfg.theta0).numpy()
    assert abs(err).max() < math.radians(0.5)
    assert (log["fault"] == 0).all()
