"""Tip-height PID (seed 002, III-C): protocol, limits, robustness, scripting, closed loop on the tendon robot."""

from __future__ import annotations

import io
import math

import torch

from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.options import EstimatorSettings
from flexlearn.runtime.pikit.height_control import ACTIVE, HOLD, REJECTED, SETTLING, HeightPID, HeightPIDSettings
from flexlearn.sim.shape_scenarios import HeightHoldSettings, closed_loop_height


def _script(m):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(m), buf)
    buf.seek(0)
    return torch.jit.load(buf)


def _run(ctl, seq):
    return [ctl.step(t, h, s) for t, h, s in seq]


SEQ = [(0.05 * k, 0.0002 * math.sin(k) + (0.001 * k if k > 50 else 0.0), 0.0005 * max(k - 45, 0)) for k in range(120)]


def test_scripted_equals_eager():
    assert _run(HeightPID(), SEQ) == _run(_script(HeightPID()), SEQ)


def test_settle_then_active_and_limits():
    ctl = HeightPID(HeightPIDSettings(v_max=0.01, a_max=0.02))
    out = _run(ctl, [(0.05 * k, 0.0, 0.0) for k in range(40)])  # 2 s settle at zero command
    assert all(v == 0.0 and s == SETTLING for v, s in out[:40])
    v, s = ctl.step(2.0, 0.0, 0.0)
    assert s == ACTIVE and 0 < v <= 0.02 * 0.05 + 1e-12  # rate of increase limited
    vs = [ctl.step(2.0 + 0.05 * k, 0.0, 0.001 * k)[0] for k in range(1, 200)]
    assert max(vs) <= 0.01 + 1e-12  # |v| limited


def test_conditional_integration_and_no_unwinding():
    ctl = HeightPID()
    _run(ctl, [(0.05 * k, 0.0, 0.0) for k in range(41)])
    ctl.step(2.1, 0.0, 0.01)  # e = 40 mm: outside the 10 mm band
    assert ctl.integral == 0.0
    ctl.step(2.2, 0.035, 0.01)  # e = 5 mm: integrates
    assert ctl.integral > 0.0
    v, _ = ctl.step(2.3, 0.080, 0.0)  # above target, spool at neutral
    assert v == 0.0  # would unwind past neutral
    v, _ = ctl.step(2.4, 0.080, 0.01)
    assert v < 0.0  # above neutral it may unwind


def test_rejects_trial_starting_above_straight():
    ctl = HeightPID()
    out = _run(ctl, [(0.05 * k, 0.007, 0.0) for k in range(60)])
    assert out[-1] == (0.0, REJECTED)


def test_bad_inputs_hold():
    ctl = _script(HeightPID())
    _run(ctl, [(0.05 * k, 0.0, 0.0) for k in range(45)])
    for t, h, s in (
        (3.0, float("nan"), 0.0),
        (3.1, 0.0, float("inf")),
        (float("nan"), 0.0, 0.0),
        (2.0, 0.0, 0.0),
        (2.2, 0.0, 0.0),
    ):
        v, st = ctl.step(t, h, s)
        assert v == 0.0 and st == HOLD
    v, st = ctl.step(3.5, 0.0, 0.0)
    assert st == ACTIVE and math.isfinite(v)


def test_closed_loop_step_and_load_recovery():
    est = torch.jit.script(FusedEstimator(DirectionMLP(hidden=(8,)), EstimatorSettings(n_segments=8, mode="quat_only")))
    res = closed_loop_height(torch.jit.script(HeightPID()), est, HeightHoldSettings(duration=40.0))
    assert res["rise_time_s"] < 6.0 and res["overshoot_pct"] < 20.0 and res["settling_time_s"] < 8.0
    assert abs(res["held_mean_mm"] - 40.0) < 1.0 and res["load_drop_mm"] > 5.0
    assert res["recovery_time_s"] < 8.0
    assert res["true_vs_est_rmse_mm"] < 1.0
    assert res["log"]["spool"].min() >= -1e-12  # never unwound past neutral
