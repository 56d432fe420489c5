"""The seed-003 robot: config, forward statics, LSE vs shooting, implicit gradients, inverse statics, identification."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from flexlearn.config import from_dict
from flexlearn.errors import ConfigError
from flexlearn.physics.lse import (
    CPRConfig,
    CPRModel,
    Loads,
    actuation_path,
    identify_youngs_modulus,
    inverse_statics,
    solve_path,
)
from flexlearn.physics.lse.inverse import actuation_theta
from flexlearn.physics.lse.shooting.forward import ShootingSolver

DT = torch.float64
CONF = Path(__file__).resolve().parents[3] / "flexlearn" / "conf" / "cpr" / "default.yaml"


@pytest.fixture(scope="module")
def robot():
    model = CPRModel.from_config(OmegaConf.load(CONF))
    rest = model.solve(torch.zeros(3, dtype=DT))
    return model, rest


def test_default_config_matches_seed_prototype():
    cfg = from_dict(CPRConfig, OmegaConf.load(CONF), "cpr")
    assert cfg == CPRConfig()  # the yaml states the dataclass defaults
    assert (cfg.geometry.n_motors, cfg.geometry.rods_per_motor, cfg.rod.n_elements) == (3, 2, 4)
    assert cfg.rod.diameter == 1e-3 and cfg.rod.youngs_modulus == 1.13e10
    model = CPRModel.from_config(cfg)
    assert model.n_rods == 6 and model.n_elements == 4
    assert all(b.dtype == DT for b in model.buffers() if b.is_floating_point())
    assert "youngs_modulus" in dict(model.named_buffers())


@pytest.mark.parametrize(
    "override, key",
    [
        ({"rod": {"youngs_modulus": -1.0}}, "rod.youngs_modulus"),
        ({"rod": {"diameter": 0.0}}, "rod.diameter"),
        ({"rod": {"n_elements": 0}}, "rod.n_elements"),
        ({"rod": {"poisson_ratio": 0.7}}, "rod.poisson_ratio"),
        ({"geometry": {"platform_height": 0.0}}, "geometry.platform_height"),
        ({"geometry": {"motor_limits": [1.0, -1.0]}}, "geometry.motor_limits"),
        ({"geometry": {"rod_spacing": 0.0}}, "geometry.rod_spacing"),
        ({"rod": {"stiffnes": 1.0}}, "stiffnes"),
        ({"platform_mass": -0.1}, "platform_mass"),
    ],
)
def test_bad_config_rejected_when_loaded(override, key):
    with pytest.raises(ConfigError, match=key.split(".")[-1]):
        CPRModel.from_config(override)


def test_rest_configuration_from_straight(robot):
    model, rest = robot
    print(f"rest: {rest.iterations} Newton iterations, log {['%.1e' % r for r in rest.residual_log]}")
    assert rest.iterations <= 5
    # gravity only: a few micrometres of sag, no lateral motion
    p = rest.position
    assert abs(float(p[0])) < 1e-9 and abs(float(p[1])) < 1e-9
    assert 0 < 0.18 - float(p[2]) < 1e-4


def test_newton_from_straight_at_large_actuation(robot):
    model, _ = robot
    theta = actuation_theta(0.0)
    eq = model.solve(theta)  # straight start, actuated bases: continuation kicks in when needed
    print(f"from straight at theta={theta.tolist()}: {eq.iterations} Newton iterations")
    warm = model.solve(theta, init=eq)
    assert warm.iterations == 0
    assert eq.residual_log[-1] < 1e-8


def test_lse_agrees_with_shooting(robot):
    """≤ 0.1 mm over the first 30 % of the ramp (3 warm-started steps), without and with the pulley load.

    The robot is multistable at large actuation: jumps of ≳ 0.1 rad per step can land the two solvers on
    different branches (9-13 cm apart); both follow the path in the same small warm-started steps. The whole
    path is the slow test below and scripts/reproduce_seed003_experiments.py.
    """
    model, rest = robot
    shoot = ShootingSolver(model, steps=40)
    path = [actuation_theta(0.0) * f for f in (0.1, 0.2, 0.3)]
    for loads in (model.default_loads(False), model.default_loads(True)):
        eq = model.solve(torch.zeros(3, dtype=DT), loads, init=rest)
        sh = shoot.solve(np.zeros(3), loads)
        for th in path:
            eq = model.solve(th, loads, init=eq)
            sh = shoot.solve(th.numpy(), loads, init=sh)
            diff = float(np.linalg.norm(eq.position.numpy() - sh.position))
            assert diff < 1e-4, (th, diff)


@pytest.mark.slow
def test_lse_agrees_with_shooting_along_whole_path():
    """Whole seed path (121 warm-started points), 8 elements per rod. With the default 4 elements/rod the gap
    reaches 94 µm (no load) and 125 µm (pulley): that is the LSE discretisation error (see the convergence
    test below: the shooting baseline is converged to < 0.1 µm), which falls ~12× at 8 elements."""
    model = CPRModel.from_config({"rod": {"n_elements": 8}})
    rest = model.solve(torch.zeros(3, dtype=DT))
    shoot = ShootingSolver(model, steps=40)
    _, dense, _ = actuation_path(10, 12)
    for loads in (model.default_loads(False), model.default_loads(True)):
        eq = model.solve(torch.zeros(3, dtype=DT), loads, init=rest)
        sh = shoot.solve(np.zeros(3), loads)
        worst = 0.0
        for th in dense:
            eq = model.solve(th, loads, init=eq)
            sh = shoot.solve(th.numpy(), loads, init=sh)
            worst = max(worst, float(np.linalg.norm(eq.position.numpy() - sh.position)))
        assert worst < 1e-4, worst


@pytest.mark.slow
def test_lse_converges_to_shooting_as_elements_are_added():
    """The LSE–shooting gap is LSE discretisation error: at the end of the seed's ramp (12 warm-started steps)
    the shooting baseline moves < 0.1 µm from 40 to 80 RK4 steps, while LSE approaches it as elements are
    added (measured: 84, 19, 6.3, 0.4 µm for 4, 6, 8, 16 elements without load; 54, 13, 4.3, 0.3 µm with the
    pulley)."""
    _, dense, _ = actuation_path(10, 12)
    ramp = dense[1:13]
    for pulley in (False, True):
        gaps = []
        model = CPRModel.from_config()
        loads = model.default_loads(pulley)
        sh = [ShootingSolver(model, steps=s) for s in (40, 80)]
        res = [solver.solve(np.zeros(3), loads) for solver in sh]
        for th in ramp:
            res = [solver.solve(th.numpy(), loads, init=r) for solver, r in zip(sh, res)]
        assert np.linalg.norm(res[0].position - res[1].position) < 1e-7
        for n in (4, 8, 16):
            m = CPRModel.from_config({"rod": {"n_elements": n}})
            eqs = solve_path(m, ramp, loads, init=m.solve(torch.zeros(3, dtype=DT), loads))
            gaps.append(float(np.linalg.norm(eqs[-1].position.numpy() - res[1].position)))
        print(
            "pulley" if pulley else "no load",
            "LSE-shooting gap [µm] at 4, 8, 16 elements:",
            [round(g * 1e6, 3) for g in gaps],
        )
        assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-6 and gaps[1] < 1e-5


def test_pulley_pulls_platform_toward_pulley(robot):
    model, rest = robot
    free = model.solve(torch.zeros(3, dtype=DT), init=rest)
    loaded = model.solve(torch.zeros(3, dtype=DT), model.default_loads(True), init=rest)
    d0 = torch.linalg.vector_norm(model.pulley_position - free.position)
    d1 = torch.linalg.vector_norm(model.pulley_position - loaded.position)
    assert d1 < d0 - 1e-4


def test_implicit_gradients_match_finite_differences(robot):
    model, rest = robot
    th0 = torch.tensor([-0.05, -0.1, -0.02], dtype=DT)
    base = model.solve(th0, init=rest)
    th = th0.clone().requires_grad_(True)
    tension = model.pulley_tension.clone().requires_grad_(True)
    loads = Loads(pulley_position=model.pulley_position, pulley_tension=tension)
    eq = model.solve(th, loads, init=base)
    p = eq.position
    jt = torch.stack([torch.autograd.grad(p[i], th, retain_graph=True)[0] for i in range(3)])
    jl = torch.stack([torch.autograd.grad(p[i], tension, retain_graph=True)[0] for i in range(3)])
    # rod shapes carry gradients too
    g_shape = torch.autograd.grad(eq.nodes[2, 2, :3, 3].sum(), th, retain_graph=True)[0]
    assert torch.isfinite(g_shape).all() and float(g_shape.abs().sum()) > 0
    eps = 1e-6
    fd = torch.zeros(3, 3, dtype=DT)
    for j in range(3):
        d = torch.zeros(3, dtype=DT)
        d[j] = eps
        lp = Loads(pulley_position=model.pulley_position, pulley_tension=model.pulley_tension)
        fd[:, j] = (model.solve(th0 + d, lp, init=base).position - model.solve(th0 - d, lp, init=base).position) / (
            2 * eps
        )
    torch.testing.assert_close(jt, fd, rtol=1e-5, atol=1e-9)
    dt = 1e-5
    lp = Loads(pulley_position=model.pulley_position, pulley_tension=model.pulley_tension + dt)
    lm = Loads(pulley_position=model.pulley_position, pulley_tension=model.pulley_tension - dt)
    fdl = (model.solve(th0, lp, init=base).position - model.solve(th0, lm, init=base).position) / (2 * dt)
    torch.testing.assert_close(jl, fdl, rtol=1e-5, atol=1e-9)


def test_inverse_statics_reaches_feasible_target_and_reports_infeasible(robot):
    model, rest = robot
    th_true = torch.tensor([-0.04, -0.01, -0.05], dtype=DT)
    target = model.solve(th_true, init=rest).position
    res = inverse_statics(model, target, init=rest)
    assert res.feasible, res.message
    assert res.error < 1e-7
    torch.testing.assert_close(res.theta, th_true, rtol=0, atol=1e-4)
    far = inverse_statics(model, target + torch.tensor([0.0, 0.0, 0.5], dtype=DT), init=rest, max_iter=2)
    assert not far.feasible and far.error > 0.1 and "infeasible" in far.message


def test_stiffness_identification_recovers_youngs_modulus():
    model = CPRModel.from_config({"rod": {"n_elements": 2}})
    rest = model.solve(torch.zeros(3, dtype=DT))
    thetas = torch.stack([actuation_theta(p) * 0.1 for p in (0.0, 2.0, 4.0)])
    loads = [model.default_loads(True)] * 3
    measured = torch.stack([model.solve(t, ld, init=rest).position for t, ld in zip(thetas, loads)])
    e_true = float(model.youngs_modulus[0])
    # start from a wrong stiffness, same Poisson ratio (G/E is kept by the fit)
    model.shear_modulus = model.shear_modulus * (2.0e10 / e_true)
    model.youngs_modulus = torch.full_like(model.youngs_modulus, 2.0e10)
    e_fit, history = identify_youngs_modulus(model, thetas, measured, loads)
    assert abs(e_fit / e_true - 1) < 1e-6, (e_fit, history)
    assert history[-1] < 1e-16


def test_bad_solver_inputs(robot):
    model, _ = robot
    with pytest.raises(ValueError):
        model.solve(torch.zeros(2, dtype=DT))
    with pytest.raises(ValueError):
        model.solve(torch.tensor([math.nan, 0.0, 0.0], dtype=DT))


def test_actuation_path_protocol():
    samples, dense, index = actuation_path(10, 3)
    assert samples.shape == (11, 3) and len(index) == 11
    torch.testing.assert_close(dense[index], samples)
    torch.testing.assert_close(samples[0], torch.zeros(3, dtype=DT))
    torch.testing.assert_close(
        samples[1],
        -math.pi / 12 * torch.tensor([1.0, 1 + math.sin(2 * math.pi / 3), 1 + math.sin(4 * math.pi / 3)], dtype=DT),
    )
    assert float(samples.min()) >= -math.pi / 6 - 1e-12 and float(samples.max()) <= 1e-12


def test_solve_path_warm_start(robot):
    model, rest = robot
    _, dense, _ = actuation_path(10, 12)  # ≈ 0.02 rad per step along the ramp
    eqs = solve_path(model, dense[:6], init=rest)
    iters = [e.iterations for e in eqs]
    print("warm-started iterations along the ramp:", iters)
    assert max(iters[1:]) <= 15


def test_fused_kernels_and_predictor_leave_the_equilibrium_unchanged(robot):
    """The solver's speed-ups (fused element kernels, tangent predictor of warm starts) change the path to the
    equilibrium, not the equilibrium: same end-effector and nodes as the reference kernels without predictor,
    in fewer Newton iterations."""
    model, rest = robot
    _, dense, _ = actuation_path(10, 12)
    loads = model.default_loads(True)
    out = {}
    try:
        for kernels, predictor in (("fused", True), ("reference", False)):
            model.kernels, model.predictor = kernels, predictor
            eqs = solve_path(model, dense[:4], loads, init=rest)
            out[kernels] = eqs
    finally:
        model.kernels, model.predictor = "fused", True
    for a, b in zip(out["fused"], out["reference"]):
        torch.testing.assert_close(a.nodes, b.nodes, rtol=0, atol=1e-11)
    its_fast = sum(e.iterations for e in out["fused"][1:])
    its_ref = sum(e.iterations for e in out["reference"][1:])
    print(f"Newton iterations over 3 warm-started steps: predictor {its_fast}, none {its_ref}")
    assert its_fast < its_ref
