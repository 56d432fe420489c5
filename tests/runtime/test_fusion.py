"""Fused estimator (seed 002, III-B3/B4): scripting, geometry, sign convention, accuracy, robustness."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from flexlearn.lie import matrix_to_quat, quat_multiply, rotation_between, so3_exp
from flexlearn.replay import shapes as rs
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.flags import (
    BAD_MAG,
    BAD_QUAT,
    MAG_REJECTED,
    NO_FIX,
    NO_REFERENCE,
    REPEATED_MAG,
    STALE_QUAT,
    TIME_ORDER,
    decode_flags,
)
from flexlearn.runtime.fusion.options import EstimatorSettings
from flexlearn.sim import robot
from flexlearn.sim import shape_scenarios as scenarios

F64 = torch.float64
ID = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64)
Z3 = torch.zeros(3, dtype=F64)


def _est(model, n=9, **kw):
    e = FusedEstimator(model, EstimatorSettings(n_segments=n, **kw))
    e.set_reference(ID.repeat(n + 1, 1))
    return e


def _roundtrip(module):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    buf.seek(0)
    return torch.jit.load(buf)


def _finite(out):
    pts, h, fl = out
    assert torch.isfinite(pts).all() and torch.isfinite(h)
    return pts, h, fl


def test_straight_and_scripted_equal_eager(direction_model, curl_recording):
    rec = curl_recording
    eager = rs.build_estimator(rec, direction_model, script=False)
    loaded = _roundtrip(rs.build_estimator(rec, direction_model, script=False))
    pts_e, pts_s = rs.replay(rec, eager), rs.replay(rec, loaded)
    assert np.abs(pts_e - pts_s).max() < 1e-9  # [m]; TorchScript may reorder float ops
    straight = np.arange(10)[:, None] * 0.029 * np.array([0.0, 0.0, -1.0])
    assert np.allclose(pts_e[0], straight, atol=2e-4)
    assert eager.n_fixes.min() >= 3  # every segment got magnetic fixes
    assert torch.allclose(eager.bias, loaded.bias, atol=1e-9, rtol=0)


def test_sign_convention(direction_model):
    """M = I − 2eeᵀ maps f (parent axis in the child frame) to +u; the seed's 2eeᵀ − I would give −u."""
    db, label = robot.rig_pairs(20, math.radians(25.0), seed=3)
    u_true = label * np.array([1.0, 1.0, -1.0])  # u = (I − 2eeᵀ) label for a no-twist joint
    est = _est(direction_model, n=1, mode="mag_only")
    for k in range(20):
        assert est.correct(1, torch.from_numpy(db[k]), float(k))
        u_m = est.last_um[0].numpy()
        r_rel = so3_exp(rotation_between(torch.tensor([0.0, 0.0, -1.0], dtype=F64), torch.from_numpy(u_m)))
        assert np.allclose((r_rel.numpy().T @ [0.0, 0.0, 1.0]), label[k], atol=0.03)
        assert np.dot(u_m, u_true[k]) > 0.999


def test_accuracy_beats_magnetics_only(direction_model, curl_recording):
    res = rs.run_methods(curl_recording, direction_model, ("fusion", "mag_only", "accel_quat"))
    assert res["fusion"]["backbone_rmse_mm"] < 6.0
    assert res["fusion"]["backbone_rmse_mm"] < 0.5 * res["mag_only"]["backbone_rmse_mm"]
    assert res["accel_quat"]["backbone_rmse_mm"] > 3 * res["fusion"]["backbone_rmse_mm"]


def test_eight_modules_height(direction_model):
    est = _est(direction_model, n=8)
    r = so3_exp(torch.tensor([0.3, 0.0, 0.0], dtype=F64))
    q = ID.repeat(9, 1)
    q[1:] = matrix_to_quat(r)  # every module tilted 0.3 rad: û = R e
    pts, h, fl = _finite(est.attitude(0.1, q))
    u = r @ torch.tensor([0.0, 0.0, -1.0], dtype=F64)
    assert torch.allclose(h, 0.029 * 8 * (1 + u[2]), atol=1e-4)
    assert pts.shape == (9, 3) and (fl & NO_REFERENCE == 0).all()


@pytest.mark.parametrize("scripted", [False, True])
def test_nan_inf_quaternion_held_and_flagged(direction_model, scripted):
    est = _est(direction_model)
    est = _roundtrip(est) if scripted else est
    q = ID.repeat(10, 1)
    p0, _, _ = est.attitude(0.0, q)
    p0 = p0.clone()
    bad = q.clone()
    bad[3] = float("nan")
    bad[5, 1] = float("inf")
    bad[7] = 0.0
    pts, h, fl = _finite(est.attitude(0.06, bad))
    assert torch.equal(pts, p0)
    assert [bool(fl[i - 1] & BAD_QUAT) for i in (3, 5, 7)] == [True, True, True]
    assert not bool(fl[0] & BAD_QUAT)
    _, _, fl = est.attitude(0.12, q)
    assert not bool((fl & BAD_QUAT).any())


def test_silent_module_goes_stale(direction_model):
    est = _est(direction_model, stale_after=0.3)
    q = ID.repeat(10, 1)
    est.attitude(0.0, q)
    silent = q.clone()
    silent[4] = float("nan")
    flags = [int(_finite(est.attitude(0.06 * k, silent))[2][3]) for k in range(1, 12)]
    assert flags[0] & BAD_QUAT and not flags[0] & STALE_QUAT
    assert flags[-1] & STALE_QUAT
    assert decode_flags(flags[-1])[:2] == ["bad_quat", "stale_quat"]


@pytest.mark.parametrize("scripted", [False, True])
def test_segments_without_a_fix_are_flagged_after_the_timeout(direction_model, scripted):
    est = _est(direction_model, fix_timeout=1.0)
    est = _roundtrip(est) if scripted else est
    q = ID.repeat(10, 1)
    db = torch.tensor([1e-5, -2e-5, 9e-5], dtype=F64)

    def no_fix(t):
        return [bool(f & NO_FIX) for f in _finite(est.attitude(t, q))[2].tolist()]

    assert all(no_fix(0.1))  # no fix yet
    assert est.correct(3, db, 0.2) and est.correct(5, db, 0.7)  # fixes on segments 2 and 4
    flags = no_fix(0.3)
    assert not flags[2] and flags[4] is False and sum(flags) == 7
    assert sum(no_fix(1.1)) == 7  # before either deadline
    assert no_fix(1.25)[2] and not no_fix(1.26)[4]  # segment 2 timed out (0.2 + 1.0), 4 not yet
    assert all(no_fix(1.75))  # both timed out
    assert est.correct(3, db, 1.8)
    assert not no_fix(1.85)[2]


@pytest.mark.parametrize("scripted", [False, True])
def test_out_of_order_and_duplicate_timestamps(direction_model, scripted):
    est = _est(direction_model)
    est = _roundtrip(est) if scripted else est
    q = ID.repeat(10, 1)
    pts1, _, _ = est.attitude(1.0, q)
    pts1 = pts1.clone()
    tilted = q.clone()
    tilted[1:] = matrix_to_quat(so3_exp(torch.tensor([0.2, 0.0, 0.0], dtype=F64)))
    for t in (1.0, 0.5, float("nan"), float("inf")):
        pts, _, fl = _finite(est.attitude(t, tilted))
        assert torch.equal(pts, pts1) and bool((fl & TIME_ORDER).all())
    assert not torch.equal(est.attitude(1.06, tilted)[0], pts1)
    m = torch.full((9, 3), 1e-5, dtype=F64)
    est.magnetometer(2.0, m, -1)
    est.magnetometer(2.0, m + 1e-6, -1)
    assert bool((est.mag_flags & TIME_ORDER).all())


def _pulse(est, t0, coil, base, on, n_on=6, repeat_on=False, dt=0.003):
    """Feed off samples, a pulse of coil `coil`, and one off sample; fresh conversions unless repeated."""
    g = torch.Generator().manual_seed(int(t0 * 1000))
    t = t0
    for _ in range(10):
        est.magnetometer(t, base + 1e-7 * torch.randn(base.shape, generator=g, dtype=F64), -1)
        t += dt
    for k in range(n_on):
        m = base + 1e-7 * torch.randn(base.shape, generator=g, dtype=F64)
        m[coil] = on if (repeat_on and k > 0) else on + 1e-8 * k
        est.magnetometer(t, m, coil)
        t += 0.008
    return est.magnetometer(t, base + 1e-7 * torch.randn(base.shape, generator=g, dtype=F64), -1)


def test_repeated_conversions_are_not_fresh(direction_model):
    db, _ = robot.rig_pairs(1, math.radians(15.0), seed=1)
    base = torch.full((9, 3), 2e-5, dtype=F64)
    on = base[2] + torch.from_numpy(db[0])
    est = _est(direction_model)
    est.attitude(0.0, ID.repeat(10, 1))
    applied = _pulse(est, 0.1, 2, base, on, repeat_on=True, n_on=4)
    assert not bool(applied[2]) and bool(est.mag_flags[2] & MAG_REJECTED) and int(est.n_fixes[2]) == 0
    applied = _pulse(est, 1.0, 2, base, on)
    assert bool(applied[2]) and int(est.n_fixes[2]) == 1
    m = base.clone()
    est.magnetometer(2.0, m, -1)
    est.magnetometer(2.003, m, -1)
    assert bool((est.mag_flags & REPEATED_MAG).all())


def test_saturated_and_nonfinite_readings(direction_model):
    db, _ = robot.rig_pairs(1, math.radians(15.0), seed=2)
    base = torch.full((9, 3), 2e-5, dtype=F64)
    on = base[0] + torch.from_numpy(db[0])
    est = _est(direction_model)
    est.attitude(0.0, ID.repeat(10, 1))
    m = base.clone()
    m[1, 0] = 1.3e-3  # clipped at full scale
    m[2] = float("nan")
    m[3, 2] = -float("inf")
    est.magnetometer(0.01, m, -1)
    assert [bool(est.mag_flags[j] & BAD_MAG) for j in range(4)] == [False, True, True, True]
    sat = on.clone()
    sat[1] = 1.3e-3
    applied = _pulse(est, 0.2, 0, base, sat, repeat_on=False)
    assert not bool(applied[0]) and int(est.n_fixes[0]) == 0
    applied = _pulse(est, 1.0, 0, base, on)
    assert bool(applied[0])
    assert torch.isfinite(est.bias).all() and torch.isfinite(est.attitude(1.5, ID.repeat(10, 1))[0]).all()


def test_fuzz_never_nan(direction_model):
    est = torch.jit.script(_est(direction_model))
    g = np.random.default_rng(0)
    t = 0.0
    for _ in range(400):
        t += g.choice([0.003, 0.0, -0.01, 0.06])
        q = torch.from_numpy(g.normal(size=(10, 4)))
        q = q / q.norm(dim=-1, keepdim=True)
        q[g.uniform(size=10) < 0.1] = float(g.choice([np.nan, np.inf, 0.0, 1e30]))
        m = torch.from_numpy(g.normal(0, 5e-5, (9, 3)))
        m[g.uniform(size=9) < 0.1] = float(g.choice([np.nan, -np.inf, 1.3e-3]))
        pts, h, fl = est(t, q, m, int(g.integers(-1, 9)) if g.uniform() < 0.5 else -1)
        assert torch.isfinite(pts).all() and torch.isfinite(h)


@pytest.mark.parametrize("bias_model", ["heading", "rotation"])
def test_fusion_corrects_heading_drift(direction_model, bias_model):
    """A heading drift injected into every IMU (±0.6 °/s about the vertical from t = 6 s, curled static robot)
    corrupts the quaternion chain; the magnetic bias filter tracks it (seed 002, III-B4). The drift grows with time,
    not travel, so the filter is configured for a time random walk (σ_b = 3e-3 rad/√s, κ = 0); the heading
    model's default expects drift only while the robot moves (κ = 0.65 % of travel)."""
    from flexlearn.sim.robot import simulate_robot

    rec = simulate_robot(scenarios.scenario("static_hold", seed=2), 45.0)
    sign = np.where(np.arange(10) % 2 == 0, 1.0, -1.0)
    psi = np.radians(0.6) * np.clip(rec.att_t - 6.0, 0.0, None)[:, None] * sign  # (K, N+1)
    half = np.stack([np.cos(psi / 2), 0 * psi, 0 * psi, np.sin(psi / 2)], -1)  # Rz(ψ) as quaternions
    q = torch.from_numpy(rec.quats)
    rec.quats = quat_multiply(torch.from_numpy(half), q).numpy()  # world-frame drift
    late = rec.att_t > 30.0
    err = {}
    for m in ("fusion", "quat_only"):
        kw = {"bias_model": bias_model, "sigma_b": 3e-3, "travel_noise": 0.0} if m == "fusion" else {}
        pts = rs.replay(rec, rs.build_estimator(rec, direction_model, m, **kw))
        err[m] = np.linalg.norm(pts[late, -1] - rec.points[late, -1], axis=-1).mean()
    assert err["fusion"] < 0.6 * err["quat_only"], err


@pytest.mark.slow
def test_alignment_window_reduces_error_with_mount_misalignment(direction_model):
    """Receiver alignment A_i fitted on the first 45 s (seed 002, III-B3) helps when mounts are off by 4°."""
    from flexlearn.sim.robot import RobotBlock, RobotConfig, simulate_robot

    rec = simulate_robot(
        scenarios.scenario("3d_hand", seed=0),
        90.0,
        RobotConfig(seed=3, robot=RobotBlock(mount_misalignment=math.radians(4.0))),
    )
    plain = rs.errors(rs.replay(rec, rs.build_estimator(rec, direction_model)), rec)
    aligned = rs.errors(rs.replay(rec, rs.build_estimator(rec, direction_model, align_window=45.0)), rec)
    assert aligned["backbone_rmse_mm"] < plain["backbone_rmse_mm"]


class _UnitDirection(torch.nn.Module):
    """Toy direction model: the (already calibrated) input direction is the parent axis."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def _tilted_pair_with_drift(**kw):
    """Two segments tilted 30° about x whose IMUs share a 10° heading drift about z, after one attitude sweep:
    (estimator, tilt (3, 3), quaternions (3, 4))."""
    est = FusedEstimator(_UnitDirection(), EstimatorSettings(n_segments=2, **kw))
    est.set_reference(ID.repeat(3, 1))
    tilt = so3_exp(torch.tensor([math.radians(30.0), 0.0, 0.0], dtype=F64))
    drift = so3_exp(torch.tensor([0.0, 0.0, math.radians(10.0)], dtype=F64))
    q = ID.repeat(3, 1)
    q[1:] = matrix_to_quat(drift @ tilt)
    est.attitude(0.1, q)
    return est, tilt, q


@pytest.mark.parametrize("bias_model", ["heading", "heading_walk", "rotation"])
def test_parent_correction_carries_children(bias_model):
    """Two tilted segments in line, both IMUs with the same 10° heading drift. Joint 1's fix (parent = the fixed
    base) measures module 1's heading. The per-joint walk model ("heading_walk") carries segment 2 along at once
    (module corrections are sums of joint corrections); the default model (independent module headings, as the
    IMUs drift independently) corrects segment 2 with joint 2's fix, which sees it in line with its corrected
    parent. The seed's rotation bias leaves segment 2 wrong after joint 1's fix (relative to the drifted parent)."""
    est, tilt, q = _tilted_pair_with_drift(p0=1.0, sigma_m=0.01, bias_model=bias_model)
    est.magnetometer(0.2, torch.full((2, 3), 1e-5, dtype=F64), 0)  # coil 0 on: snapshot at activation
    label = tilt.T @ torch.tensor([0.0, 0.0, 1.0], dtype=F64)  # parent axis in the child frame
    u_true = tilt @ torch.tensor([0.0, 0.0, -1.0], dtype=F64)

    def errors():
        return [math.degrees(math.acos(min(1.0, float(est.u_hat[k] @ u_true)))) for k in range(2)]

    assert est.correct(1, 1e-4 * label, 0.3)
    _, h, _ = est.attitude(0.4, q)
    err = errors()
    assert err[0] < 0.5  # segment 1 corrected by its own fix
    if bias_model == "rotation":
        assert err[1] > 4.0
        return
    if bias_model == "heading_walk":
        assert err[1] < 0.5  # carried along with its parent
    assert est.correct(2, 1e-4 * torch.tensor([0.0, 0.0, 1.0], dtype=F64), 0.5)  # joint 2: in line
    _, h, _ = est.attitude(0.6, q)
    err = errors()
    assert err[0] < 0.5 and err[1] < 0.5
    assert abs(float(h) - 2 * 0.029 * (1 + float(u_true[2]))) < 1e-9  # heading corrections keep the height


def test_heading_filter_learns_drift_rate():
    """Drift ∝ travel is a ramp: the rate states learn it, so the prediction between fixes follows the drift;
    without them (κ = 0, heading random walk only) the estimate lags behind."""
    from flexlearn.runtime.fusion.heading_filter import HeadingDriftFilter

    g = np.random.default_rng(0)
    rho = torch.tensor([0.008, -0.006], dtype=F64)  # drift per rad of travel, modules 1, 2
    lag = {}
    for kappa in (0.0065, 0.0):
        f = HeadingDriftFilter(2, p0=3e-4, kappa=kappa, sigma_b=3e-4)
        travel = torch.zeros(2, dtype=F64)
        errs = []
        for k in range(60):
            travel = travel + torch.tensor([0.4, 0.6], dtype=F64)
            f.predict(travel, 3.0 * k)
            truth = -rho * travel  # correction = −drift
            errs.append(float((f.theta() - truth).abs().max()))  # prediction error before the fix
            j = k % 2
            rel = truth[j] - (truth[j - 1] if j else 0.0)
            est = f.theta()[j] - (f.theta()[j - 1] if j else 0.0)
            f.update(j, float(rel - est) + float(g.normal(0.0, 0.01)), 0.03**2, Z3)
        lag[kappa] = max(errs[-10:])
        if kappa > 0:
            assert torch.allclose(f.x[2:4], -rho, atol=1.5e-3), f.x
    assert lag[0.0065] < 0.3 * lag[0.0], lag


def test_heading_gate_rejects_one_outlier_then_accepts():
    """χ² gate: a fix whose innovation is far outside its predicted spread is rejected (state unchanged, flagged
    by the caller); a second consecutive one is accepted (a persistent change is not refused for ever)."""
    from flexlearn.runtime.fusion.heading_filter import HeadingDriftFilter

    f = HeadingDriftFilter(3, p0=1e-4, kappa=0.0, sigma_b=0.0, gate=3.0)
    f.predict(torch.zeros(3, dtype=F64), 0.0)
    assert f.update(1, 0.02, 1e-4, Z3)  # y² / S = 4e-4 / 3e-4: inside the gate
    x = f.x.clone()
    assert not f.update(1, 0.5, 1e-4, Z3)  # 0.25 / S ≫ 9: outlier
    assert torch.equal(f.x, x) and float(f.last_nis[1]) > 9.0
    assert f.update(1, 0.5, 1e-4, Z3)  # persistent: accepted
    assert float(f.x[1] - f.x[0]) > 0.2
    assert HeadingDriftFilter(3, 1e-4, 0.0, 0.0, gate=0.0).update(0, 10.0, 1e-6, Z3)  # gate 0: no gate


def test_estimator_flags_gated_fix(direction_model):
    """In the estimator a gated fix leaves the heading corrections alone and is flagged MAG_REJECTED."""
    est, tilt, q = _tilted_pair_with_drift(p0=1e-6, sigma_m=0.01, travel_noise=0.0)
    label = tilt.T @ torch.tensor([0.0, 0.0, 1.0], dtype=F64)
    m_off = torch.full((2, 3), 1e-5, dtype=F64)
    for k, expect in enumerate((False, True)):  # 10° jump vs a prior of 0.06°
        t0 = 0.2 + k
        est.magnetometer(t0, m_off + 1e-9 * k, -1)
        est.magnetometer(t0 + 0.003, m_off + 2e-9 + 1e-9 * k, -1)  # baseline samples (fresh conversions)
        est.magnetometer(t0 + 0.006, m_off + 3e-9 + 1e-9 * k, 0)
        for s in range(4):
            est.magnetometer(t0 + 0.02 + 0.003 * s, m_off + 1e-4 * label + 1e-9 * (s + 10 * k), 0)
        applied = est.magnetometer(t0 + 0.05, m_off + 5e-9 + 1e-9 * k, -1)
        assert bool(applied[0]) == expect
        if not expect:
            assert float(est.rel_c.abs().max()) == 0.0
            assert int(est.flags[0]) & MAG_REJECTED or int(est.base_flags[0]) & MAG_REJECTED
    assert float(est.rel_c[0]) < 0.0  # accepted: moves toward −10° (small gain)


def test_heading_filter_separates_receiver_misalignment():
    """A fixed 1.5° misalignment of one receiver biases its heading fixes by w·δ with w ∝ 1/sin tilt; as the tilt
    changes with the motion the filter tells it from the heading (which stays 0 here). Without the δ states
    (σ_δ = 0) the same fixes pull the heading of the near-vertical segment off by degrees."""
    from flexlearn.runtime.fusion.heading_filter import HeadingDriftFilter

    g = np.random.default_rng(1)
    delta = torch.tensor([0.0, math.radians(1.5), 0.0], dtype=F64)
    final = {}
    for sig in (0.025, 0.0):
        f = HeadingDriftFilter(1, p0=3e-4, kappa=0.0065, sigma_b=3e-4, sigma_align=sig)
        for k in range(200):
            f.predict(torch.full((1,), 0.1 * k, dtype=F64), 2.7 * k)
            s = 0.08 + 0.5 * (1.0 + math.sin(0.37 * k))  # sin tilt 0.08 … 1.08 over the cycle
            az = 0.3 * math.sin(0.11 * k)
            w = torch.tensor([math.sin(az), math.cos(az), 0.0], dtype=F64) / s
            y = float(w @ delta) + float(g.normal(0.0, 0.01)) / s - float(f.theta()[0])
            f.update(0, y, 0.03**2 / s**2, w)
        final[sig] = abs(math.degrees(float(f.theta()[0])))
        if sig > 0:
            assert abs(math.degrees(float(f.misalignment()[0, 1])) - 1.5) < 0.3
    assert final[0.025] < 0.3 and final[0.0] > 1.0, final
