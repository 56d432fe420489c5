"""Hostile inputs to the runtime modules: wild and restarted clocks (estimator, controller), non-finite targets,
repeated or reordered binary sequence numbers. Each test reproduces one reported defect."""

from __future__ import annotations

import io
import math

import pytest
import torch

from flexlearn.lie import matrix_to_quat, so3_exp
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.flags import TIME_ORDER
from flexlearn.runtime.fusion.options import EstimatorSettings
from flexlearn.runtime.pikit import serial_frames as sf
from flexlearn.runtime.pikit.height_control import ACTIVE, HOLD, HeightPID, HeightPIDSettings

F64 = torch.float64
N = 3
ID = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64).repeat(N + 1, 1)


def _roundtrip(module):
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    buf.seek(0)
    return torch.jit.load(buf)


def _estimator(scripted: bool):
    est = FusedEstimator(DirectionMLP(hidden=(8,)), EstimatorSettings(n_segments=N))
    est.set_reference(ID)
    return _roundtrip(est) if scripted else est


def _tilted(angle: float) -> torch.Tensor:
    q = ID.clone()
    q[1:] = matrix_to_quat(so3_exp(torch.tensor([angle, 0.0, 0.0], dtype=F64)))
    return q


def _mags(k: int) -> torch.Tensor:
    return torch.full((N, 3), 1e-5, dtype=F64) + 1e-8 * k  # fresh conversions every round [T]


# ------------------------------------------------------------------------------------- estimator clock
@pytest.mark.parametrize("scripted", [False, True])
@pytest.mark.parametrize("outlier", [1e9, -5.0])
def test_single_outlier_time_is_dropped_and_the_estimator_keeps_running(scripted, outlier):
    """One frame at t = 1e9 (or far in the past) used to freeze the estimator (TIME_ORDER for ever)."""
    est = _estimator(scripted)
    for k in range(1, 6):
        est.attitude(0.06 * k, ID)
        est.magnetometer(0.06 * k + 0.01, _mags(k), -1)
    pts0 = est.attitude(0.36, ID)[0].clone()
    pts, _, fl = est.attitude(outlier, _tilted(0.3))  # dropped and flagged
    assert torch.equal(pts, pts0) and bool((fl & TIME_ORDER).all())
    est.magnetometer(outlier, _mags(9), -1)
    assert bool((est.mag_flags & TIME_ORDER).all())
    for k in range(7, 10):  # the next frames are accepted at once
        est.magnetometer(0.06 * k - 0.01, _mags(k), -1)
        assert not bool((est.mag_flags & TIME_ORDER).any())
        pts, _, fl = est.attitude(0.06 * k, _tilted(0.3))
        assert not bool((fl & TIME_ORDER).any()) and not torch.equal(pts, pts0)
    assert torch.isfinite(pts).all()


@pytest.mark.parametrize("scripted", [False, True])
def test_master_clock_restart_resynchronises_and_keeps_the_state(scripted):
    """ESP32 reset: the master's clock restarts at 0. The estimator resyncs within 3 frames, flags CLOCK_RESYNC,
    keeps its attitude state and then clears the flag."""
    est = _estimator(scripted)
    t = 0.0
    for k in range(50):  # 3 s of frames
        t = 0.06 * (k + 1)
        est.attitude(t, _tilted(0.1))
        est.magnetometer(t + 0.01, _mags(k), -1)
    theta, bias, pts_before = est.hf.theta().clone(), est.bias.clone(), est.points.clone()
    flags = []
    for k in range(6):  # restart: 0.01, 0.02, 0.07, 0.08, ...
        est.magnetometer(0.06 * k + 0.01, _mags(100 + k), -1)
        pts, _, fl = est.attitude(0.06 * k + 0.02, _tilted(0.2))
        flags.append(int(fl[0]))
    assert flags[0] & TIME_ORDER and flags[1] & TIME_ORDER  # two frames dropped ...
    assert not any(f & TIME_ORDER for f in flags[2:])  # ... then resynchronised
    from flexlearn.runtime.fusion.flags import CLOCK_RESYNC, FLAG_NAMES

    assert FLAG_NAMES[CLOCK_RESYNC] == "clock_resync" and CLOCK_RESYNC not in (1, 2, 4, 8, 16, 32, 64, 128)
    assert all(f & CLOCK_RESYNC for f in flags[2:]) and not flags[0] & CLOCK_RESYNC
    assert not torch.allclose(pts, pts_before) and torch.isfinite(pts).all()  # the new attitude is used
    assert not bool((est.mag_flags & TIME_ORDER).any())  # the magnetometer stream follows
    assert torch.equal(est.hf.theta(), theta) and torch.equal(est.bias, bias)  # state kept
    _, _, fl = est.attitude(2.0, _tilted(0.2))  # > 1 s after the resync: flag cleared
    assert not bool((fl & (CLOCK_RESYNC | TIME_ORDER)).any())


def test_time_base_rules():
    """Unit rules of the clock helper: outliers dropped, agreeing ones resync, repeats never count."""
    from flexlearn.runtime.pikit.time_base import NO_TIME, TimeBase

    tb = torch.jit.script(TimeBase(1, max_gap=2.0, confirm=3))
    assert tb.check(0, 5.0, NO_TIME, NO_TIME) == 5.0  # first frame
    assert math.isnan(tb.check(0, 5.0, 5.0, 5.0))  # repeated
    assert math.isnan(tb.check(0, math.inf, 5.0, 5.0)) and math.isnan(tb.check(0, math.nan, 5.0, 5.0))
    assert math.isnan(tb.check(0, 1e9, 5.0, 5.0))  # outlier 1
    assert tb.check(0, 5.1, 5.0, 5.0) == pytest.approx(5.1)  # in order: accepted, the run is broken
    assert math.isnan(tb.check(0, 0.0, 5.1, 5.1)) and math.isnan(tb.check(0, 0.0, 5.1, 5.1))  # repeat: no count
    assert math.isnan(tb.check(0, 0.1, 5.1, 5.1))
    tau = tb.check(0, 0.2, 5.1, 5.1)  # third agreeing outlier: resync
    assert tau == pytest.approx(5.1 + 0.2) and tb.resyncs == 1 and tb.offset == pytest.approx(5.1)
    with pytest.raises(ValueError, match="confirm"):
        TimeBase(1, 2.0, 1)


# ------------------------------------------------------------------------------------------ controller
def _settled(ctl, t_end: float = 2.5, dt: float = 0.05):
    t = 0.0
    while t < t_end:
        ctl.step(t, 0.0, 0.0)
        t += dt
    return t


@pytest.mark.parametrize("scripted", [False, True])
def test_nan_target_is_refused_and_flagged(scripted):
    """A NaN target (the frame protocols' "missing") used to give v = NaN with status ACTIVE for ever."""
    ctl = HeightPID()
    ctl = _roundtrip(ctl) if scripted else ctl
    t = _settled(ctl)
    ctl.set_target(0.03)
    status = []
    for bad in (math.nan, math.inf, -math.inf, 1e300):
        accepted = ctl.set_target(bad)
        v, st = ctl.step(t, 0.01, 0.01)
        t += 0.05
        assert ctl.target == 0.03 and math.isfinite(v) and v > 0.0  # the last valid target still acts
        assert not accepted and ctl.target_rejected
        status.append(st)
    from flexlearn.runtime.pikit.height_control import STATUS_NAMES, TARGET_REJECTED

    assert status == [TARGET_REJECTED] * 4 and STATUS_NAMES[TARGET_REJECTED] == "target_rejected"
    assert ctl.bad_targets == 4 and ctl.set_target(0.02)
    v, st = ctl.step(t, 0.01, 0.01)
    assert st == ACTIVE and math.isfinite(v)


@pytest.mark.parametrize("scripted", [False, True])
def test_controller_never_outputs_nan(scripted):
    """No NaN leaves the controller: non-finite heights hold, and a non-finite intermediate (here the derivative
    of the first active step with settle = 0, which gave NaN when scripted) zeroes the command."""
    ctl = HeightPID(HeightPIDSettings(settle=0.0))
    ctl = _roundtrip(ctl) if scripted else ctl
    out = [ctl.step(0.05 * k, h, 0.01) for k, h in enumerate([0.0, math.nan, 0.01, math.inf, 0.02, -math.inf, 0.03])]
    assert all(math.isfinite(v) for v, _ in out)
    assert out[0] == (0.0, HOLD)  # dt undefined on the first step: no command
    assert [s for _, s in out[1::2]] == [HOLD] * 3
    v, st = ctl.step(1.0, 0.02, 0.01)
    assert st == ACTIVE and math.isfinite(v)
    with pytest.raises(ValueError, match="kp"):
        HeightPID(HeightPIDSettings(kp=math.nan))


@pytest.mark.parametrize("scripted", [False, True])
def test_controller_follows_a_restarted_clock(scripted):
    """After the master's clock restarts (or one step comes from the far future) the controller used to hold for
    ever; it now drops single outliers and resynchronises on a restarted clock."""
    ctl = HeightPID()
    ctl = _roundtrip(ctl) if scripted else ctl
    t = _settled(ctl)
    assert ctl.step(t, 0.01, 0.01)[1] == ACTIVE
    assert ctl.step(1e9, 0.01, 0.01) == (0.0, HOLD)  # single outlier
    assert ctl.step(t + 0.05, 0.01, 0.01)[1] == ACTIVE
    status = [ctl.step(0.05 * k, 0.01, 0.01)[1] for k in range(5)]  # restart at 0
    assert status[:2] == [HOLD, HOLD] and status[2:] == [ACTIVE] * 3


# ---------------------------------------------------------------------------------- binary sequence numbers
def _link_stats(seqs):
    p = sf.FrameParser()
    for s in seqs:
        p.feed(sf.encode_frame("spool", 0.1, s, value=0.0))
    return {k: p.stats.get(k) for k in ("frames", "dropped", "duplicates", "reordered", "seq_resets")}


@pytest.mark.parametrize(
    "seqs, expect",
    [
        ([1, 2, 2, 3], dict(dropped=0, duplicates=1, reordered=0, seq_resets=0)),  # repeated: not 65535 drops
        ([1, 2, 4, 3, 5], dict(dropped=0, duplicates=0, reordered=1, seq_resets=0)),  # reordered: no drop left
        ([1, 3, 3, 6], dict(dropped=3, duplicates=1, reordered=0, seq_resets=0)),  # real gaps still count
        ([65534, 65535, 0, 1], dict(dropped=0, duplicates=0, reordered=0, seq_resets=0)),  # wrap
        ([5000, 5001, 0, 1, 2], dict(dropped=0, duplicates=0, reordered=0, seq_resets=1)),  # sender restarted
    ],
)
def test_sequence_numbers_repeat_reorder_restart(seqs, expect):
    stats = _link_stats(seqs)
    assert stats == dict(frames=len(seqs), **expect)


class _NoDirection(torch.nn.Module):
    """A direction model that says "no usable direction" (the zero vector of its output contract)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


@pytest.mark.parametrize("scripted", [False, True])
def test_a_zero_prediction_is_not_taken_as_a_fix(scripted):
    est = FusedEstimator(_NoDirection(), EstimatorSettings(n_segments=N))
    est.set_reference(ID)
    est = _roundtrip(est) if scripted else est
    assert not est.correct(1, torch.tensor([1e-5, 2e-5, 3e-5], dtype=F64), 0.1)
    assert int(est.n_fixes[0]) == 0
