"""FlexibleArmEstimator with ``inclination="attitude"``: the attitude filter of `flexlearn.sensing.attitude.kernels`
per IMU on the compensated link-frame readings. Exact on a static deformed arm, eager == TorchScript (also across
save/load), a bad frame is counted by the attitude filters and holds the output, bad option names refused."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.modal import EstimatorOptions, FlexibleArmEstimator

from .test_kinematics_estimator import POS, _links, _static_frames

f64 = torch.float64


def _build():
    return FlexibleArmEstimator.build(_links(), POS, [1, 2], EstimatorOptions(inclination="attitude"))


def test_attitude_inclination_exact_on_static_deformation_and_scripted_equal():
    est, sc = _build(), torch.jit.script(_build())
    theta = [0.4, -0.7]
    eta = [torch.tensor([0.08], dtype=f64), torch.tensor([0.05, -0.01], dtype=f64)]
    acc, gyr = _static_frames(_links(), theta, eta)
    for _ in range(40):  # inside the attitude filter's running-mean start-up: the mean of equal frames is exact
        out = est(acc, gyr)
        out_s = sc(acc, gyr)
    for a, b in zip(out_s, out):
        assert torch.allclose(a, b, rtol=0, atol=1e-12)
    _, th, _, et, _, _, _, fault = out
    assert not bool(fault)
    assert torch.allclose(th, torch.tensor(theta, dtype=f64), atol=1e-12)
    assert torch.allclose(et, torch.cat(eta), atol=1e-12)
    ref = FlexibleArmEstimator.build(_links(), POS, [1, 2])  # the PI filter starts at the same inclinations
    assert torch.allclose(ref(acc, gyr)[1], th, atol=1e-12)


def test_attitude_state_survives_save_load_and_a_bad_frame_is_counted(tmp_path):
    sc = torch.jit.script(_build())
    acc, gyr = _static_frames(_links(), [0.2, 0.1], [torch.zeros(1, dtype=f64), torch.zeros(2, dtype=f64)])
    for _ in range(5):
        sc(acc, gyr)
    path = tmp_path / "est.pt"
    torch.jit.save(sc, str(path))
    loaded = torch.jit.load(str(path))
    for a, b in zip(sc(acc, gyr), loaded(acc, gyr)):
        assert torch.equal(a, b)
    held = sc(acc, gyr)
    bad = acc.clone()
    bad[2, 1] = math.nan
    out = sc(bad, gyr)
    assert bool(out[-1]) and torch.equal(out[1], held[1])
    assert all(st[24] == 1.0 for st in sc.att_s)  # skipped-sample counter of every IMU's filter
    nxt = sc(acc, gyr)
    assert not bool(nxt[-1]) and all(bool(torch.isfinite(x).all()) for x in nxt[:-1])
    sc.reset()
    assert all(st[24] == 0.0 for st in sc.att_s)


def test_unknown_inclination_filter_refused():
    with pytest.raises(ConfigError, match="inclination"):
        FlexibleArmEstimator.build(_links(), POS, [1, 2], EstimatorOptions(inclination="kalman"))


def test_lean_controller_step_refuses_the_attitude_option():
    """The controller's lean step writes the PI filter as matrices; with the attitude option it would model a
    filter the estimator does not run, so building its maps is refused by name."""
    from flexlearn.runtime.arm.step import lean_step_maps

    z = torch.zeros(1, dtype=f64)
    with pytest.raises(ValueError, match="inclination='attitude'"):
        lean_step_maps(_build(), z, z, z, z, z, z)
