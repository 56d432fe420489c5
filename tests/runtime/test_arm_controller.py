"""Deployable flexible-arm controller (seed 000, eq. (45)): scripting, export, faults, the control law."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.runtime.arm.config import ArmControllerConfig
from flexlearn.runtime.arm.controller import ArmController, quintic
from flexlearn.runtime.arm.export import export_arm_controller, load_arm_controller
from flexlearn.runtime.arm.load import static_angle_correction
from flexlearn.runtime.arm.outputs import state_layout
from flexlearn.sensing.imu import GRAVITY

f64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny tensors: one intra-op thread


def _frame(theta=(0.2, -0.6), noise=0.0, seed=0):
    """Static frame of a rigid arm at θ (gravity only) for the default IMU set (2 + 3 IMUs)."""
    angs = [theta[0]] * 2 + [theta[0] + theta[1]] * 3
    fr = torch.zeros(5, 6, dtype=f64)
    for k, a in enumerate(angs):
        fr[k, 1], fr[k, 2] = GRAVITY * math.sin(a), GRAVITY * math.cos(a)
    if noise:
        g = torch.Generator().manual_seed(seed)
        fr = fr + noise * torch.randn(fr.shape, generator=g, dtype=f64)
    return fr


@pytest.fixture(scope="module")
def cfg():
    return ArmControllerConfig()


def test_scripted_equals_eager_and_state_layout(cfg):
    eager = ArmController.build(cfg)
    sc = torch.jit.script(ArmController.build(cfg))
    for k in range(20):
        fr = _frame(noise=0.02, seed=k)
        a, b = eager(fr, 1.0 + k * 1e-3), sc(fr, 1.0 + k * 1e-3)
        for x, y in zip(a, b):
            assert torch.equal(x, y)
    lay = state_layout(3)
    assert lay["theta"] == [0, 2] and lay["hub_load"][1] == a[1].numel() == 20
    # a rigid-arm frame: the estimator returns its pose; the controller adds the static sag correction
    # Δθ = C (cos φ₁, cos φ₂) of the loaded links (module arm_load)
    C = static_angle_correction(cfg.model_links(), cfg.rho_A, cfg.payload, cfg.imu_positions, cfg.n_modes, GRAVITY)
    dth = C @ torch.tensor([math.cos(0.2), math.cos(-0.4)], dtype=f64)
    assert 1e-3 < float(dth.abs().max()) < 1e-2
    assert torch.allclose(a[1][0:2], torch.tensor([0.2, -0.6], dtype=f64) + dth, atol=2e-3)


def test_export_load_with_plain_torch(tmp_path, cfg):
    c = ArmController.build(cfg)
    path = export_arm_controller(ArmController.build(cfg), tmp_path / "arm.pt", cfg)
    extra = {"metadata.json": ""}
    loaded = torch.jit.load(str(path), _extra_files=extra)  # plain torch
    import json

    meta = json.loads(extra["metadata.json"])
    assert meta["config"]["kp"] == [6000.0, 12000.0] and meta["state_layout"]["eta"] == [4, 7]
    for k in range(5):
        fr = _frame(noise=0.02, seed=k)
        for x, y in zip(c(fr, k * 1e-3), loaded(fr, k * 1e-3)):
            assert torch.equal(x, y)
    tau, _, _ = loaded.step_joints(_frame(), 0.01, torch.tensor([0.2, -0.6], dtype=f64), torch.zeros(2, dtype=f64))
    assert torch.isfinite(tau).all()
    m2, meta2 = load_arm_controller(path)
    assert meta2 == meta and torch.isfinite(m2(_frame(), 0.0)[0]).all()


@pytest.mark.parametrize("kind,code", [("lost", 1), ("complex", 1), ("nan", 2), ("saturated", 4), ("bad_time", 32)])
def test_bad_input_holds_last_valid_output_and_flags(cfg, kind, code):
    """A complex frame (no sensor reading) raised in the folded step's division; it is a lost frame."""
    c = torch.jit.script(ArmController.build(cfg))
    tau0, st0, f0 = c(_frame(), 0.0)
    assert int(f0) == 0
    fr, t = _frame(), 0.001
    if kind == "lost":
        fr = torch.empty(0, 6, dtype=f64)
    elif kind == "complex":
        fr = fr.to(torch.complex128)
    elif kind == "nan":
        fr[3, 4] = float("nan")
    elif kind == "saturated":
        fr[1, 2] = 10 * GRAVITY
    else:
        t = float("nan")
    tau, st, f = c(fr, t)
    assert int(f) == code
    assert torch.equal(tau, tau0) and torch.equal(st, st0)
    assert torch.isfinite(tau).all() and torch.isfinite(st).all()
    assert int(c.fault_count) == 1
    tau2, _, f2 = c(_frame(), 0.002)  # recovers on the next good frame
    assert int(f2) == 0 and torch.isfinite(tau2).all()


def test_before_first_frame_holds_gravity_torque_and_torque_limit_flag(cfg):
    c = torch.jit.script(ArmController.build(cfg))
    tau, st, f = c(torch.full((5, 6), float("nan"), dtype=f64), 0.0)
    assert int(f) == 2 and torch.isfinite(tau).all() and float(tau[0]) > 1000.0
    small = dataclasses.replace(cfg, tau_max=(100.0, 50.0))
    c2 = ArmController.build(small)
    tau, _, f = c2(_frame(), 0.0)
    assert int(f) == 8 and torch.equal(tau.abs(), torch.tensor([100.0, 50.0], dtype=f64))


def test_control_law_is_seed_eq45(cfg):
    """τ = K_p e + K_d ė − H with H₁, H₂ of seed 000, eq. (45), recomputed here from the returned state."""
    seed_cfg = dataclasses.replace(cfg, variant="seed", t0=0.0, duration=4.0)
    c = ArmController.build(seed_cfg)
    lay = state_layout(3)
    for k in range(3):
        t = 0.7 + k * 1e-3
        tau, st, f = c(_frame((0.3, -0.4), noise=0.05, seed=k), t)
        th = st[lay["theta"][0] : lay["theta"][1]]
        rate = st[lay["theta_rate"][0] : lay["theta_rate"][1]]
        w = st[lay["tip_deflection"][0] : lay["tip_deflection"][1]]
        curv = st[lay["base_curvature"][0] : lay["base_curvature"][1]]
        thd, vd, ad = quintic(
            torch.tensor(t, dtype=f64),
            torch.tensor(seed_cfg.theta0, dtype=f64),
            torch.tensor(seed_cfg.thetaf, dtype=f64),
            0.0,
            4.0,
        )
        g, (L1, L2), (M1, M2), (I1, I2) = GRAVITY, seed_cfg.lengths, seed_cfg.payload, seed_cfg.hub_inertia
        m1, m2 = 5.37 * L1, 5.37 * L2
        EI = 74300.0
        a12 = th[0] + th[1]
        H1 = (
            EI * curv[0]
            + EI * curv[1]
            - (0.5 * m1 + m2) * g * L1 * torch.cos(th[0])
            + (M1 + M2) * g * w[0] * torch.sin(th[0])
            - 0.5 * m2 * g * L2 * torch.cos(a12)
            + M2 * g * w[1] * torch.sin(a12)
            - I1 * ad[0]
        )
        H2 = EI * curv[1] - 0.5 * m2 * g * L2 * torch.cos(a12) + M2 * g * w[1] * torch.sin(a12) - I2 * ad[1]
        ref = (
            torch.tensor(seed_cfg.kp, dtype=f64) * (thd - th)
            + torch.tensor(seed_cfg.kd, dtype=f64) * (vd - rate)
            - torch.stack([H1, H2])
        )
        assert torch.allclose(tau, ref, rtol=1e-12, atol=1e-9)


def test_quintic_boundaries_and_derivatives():
    th0, thf = torch.tensor([0.2, -0.6], dtype=f64), torch.tensor([0.6, -0.2], dtype=f64)
    p0, v0, a0 = quintic(torch.tensor(1.0, dtype=f64), th0, thf, 1.0, 6.0)
    p1, v1, a1 = quintic(torch.tensor(7.0, dtype=f64), th0, thf, 1.0, 6.0)
    assert torch.allclose(p0, th0) and torch.allclose(p1, thf)
    assert torch.allclose(v0, torch.zeros(2, dtype=f64)) and torch.allclose(a1, torch.zeros(2, dtype=f64), atol=1e-12)
    h = 1e-5
    t = torch.tensor(3.3, dtype=f64)
    pp, vp, _ = quintic(t + h, th0, thf, 1.0, 6.0)
    pm, vm, _ = quintic(t - h, th0, thf, 1.0, 6.0)
    _, v, a = quintic(t, th0, thf, 1.0, 6.0)
    assert torch.allclose((pp - pm) / (2 * h), v, rtol=1e-7) and torch.allclose((vp - vm) / (2 * h), a, rtol=1e-6)


def test_config_errors(cfg):
    with pytest.raises(ConfigError, match="variant"):
        ArmController.build(dataclasses.replace(cfg, variant="nope"))
    with pytest.raises(ConfigError, match="kp"):
        ArmController.build(dataclasses.replace(cfg, kp=(-1.0, 1.0)))
    with pytest.raises(ConfigError, match="imu_positions"):
        ArmController.build(dataclasses.replace(cfg, imu_positions=((0.5,), (0.4, 1.3, 3.1))))


def test_fuzzed_bad_frames_never_give_nan_and_are_flagged(cfg):
    """Random lost frames, NaN/inf samples, saturated accelerometers/gyros and NaN times interleaved with
    valid frames (through the rest period with the gyro calibration and the load filter running): every
    bad step is flagged and holds the last torques, no output is ever non-finite."""
    c = torch.jit.script(ArmController.build(cfg))
    g = torch.Generator().manual_seed(11)
    last = None
    for k in range(1400):
        t = k * 1e-3
        fr = _frame(noise=0.02, seed=k)
        kind = int(torch.randint(0, 12, (1,), generator=g))
        if kind == 0:
            fr = fr[:3]
        elif kind == 1:
            fr[int(torch.randint(0, 5, (1,), generator=g)), int(torch.randint(0, 6, (1,), generator=g))] = float("nan")
        elif kind == 2:
            fr[2, 1] = float("inf")
        elif kind == 3:
            fr[4, 2] = 7.0 * GRAVITY
        elif kind == 4:
            fr[0, 3] = 10.0
        elif kind == 5:
            t = float("nan")
        tau, st, f = c(fr, t)
        assert torch.isfinite(tau).all() and torch.isfinite(st).all()
        if kind <= 5:
            assert int(f) in (1, 2, 4, 32)
            if last is not None:
                assert torch.equal(tau, last)
        else:
            assert int(f) in (0, 8)
        last = tau.clone()
