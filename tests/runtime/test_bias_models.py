"""Bias models of the fused estimator behind the `BiasModel` interface (`runtime.fusion.bias_models`): each one
scripts, saves and loads with the estimator and updates the estimator's own state; each follows its equation."""

from __future__ import annotations

import io
import math

import pytest
import torch

from flexlearn.lie import matrix_to_quat, rotation_between, so3_exp
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.heading_filter import heading_angle
from flexlearn.runtime.fusion.options import EstimatorSettings

F64 = torch.float64
ID = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64)
CLASSES = {"heading": "HeadingRateBias", "heading_walk": "HeadingWalkBias", "rotation": "RotationBias"}


class _Direction(torch.nn.Module):
    """Toy direction model: the (already calibrated) input direction is the parent axis (a float32 scaling, exact
    alike in eager and TorchScript; the estimator normalises it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1.0e4


def _bent_pair(**kw) -> tuple[FusedEstimator, torch.Tensor]:
    """Two segments bent 30° and 20° about different axes, IMUs drifted 10° / −6° in heading, one attitude sweep
    and a coil activation (the snapshot the fixes use): (estimator, quaternions (3, 4))."""
    est = FusedEstimator(_Direction(), EstimatorSettings(n_segments=2, **kw))
    est.set_reference(ID.repeat(3, 1))
    r1 = so3_exp(torch.tensor([math.radians(30.0), 0.0, 0.0], dtype=F64))
    r2 = r1 @ so3_exp(torch.tensor([0.0, math.radians(20.0), 0.0], dtype=F64))
    q = ID.repeat(3, 1)
    for k, (r, drift) in enumerate(((r1, 10.0), (r2, -6.0)), start=1):
        q[k] = matrix_to_quat(so3_exp(torch.tensor([0.0, 0.0, math.radians(drift)], dtype=F64)) @ r)
    est.attitude(0.1, q)
    est.magnetometer(0.2, torch.full((2, 3), 1e-5, dtype=F64), 0)
    return est, q


FIXES = [(1, (0.0, 0.1, 1.0), 0.3), (2, (0.2, -0.3, 1.0), 0.5), (1, (0.05, 0.2, 1.0), 0.9), (2, (0.0, 0.0, 1.0), 1.4)]


def _fix(est, i: int, label: tuple, t: float) -> bool:
    return bool(est.correct(i, 1e-4 * torch.tensor(label, dtype=F64), t))


def _roundtrip(module: torch.nn.Module) -> torch.jit.ScriptModule:
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    buf.seek(0)
    return torch.jit.load(buf)


@pytest.mark.parametrize(
    "kw",
    [
        {"bias_model": "heading"},
        {"bias_model": "heading_walk"},
        {"bias_model": "rotation"},
        {"bias_model": "rotation", "innovation": "observable"},
    ],
)
def test_each_bias_model_scripts_and_updates_the_estimators_own_state(kw):
    """Scripted → saved → loaded, the estimator dispatches to the model it was built with, which updates the
    estimator's tensors themselves (one copy), as the eager estimator does."""
    eager, q = _bent_pair(p0=0.05, sigma_m=0.02, **kw)
    est, _ = _bent_pair(p0=0.05, sigma_m=0.02, **kw)
    loaded = _roundtrip(est)
    assert loaded.bias_filter.original_name == CLASSES[kw["bias_model"]]
    for i, label, t in FIXES:
        assert _fix(eager, i, label, t) == _fix(loaded, i, label, t)
    for name in ("bias", "c_bias", "gain", "p_var", "t_p", "rel_c", "theta_applied"):
        a, b = getattr(eager, name), getattr(loaded, name)
        # TorchScript reorders float ops (≤ 2e-9 here); times are stored exactly (no float32 round trip)
        assert torch.allclose(a, b, rtol=0.0, atol=1e-8), name
        if name == "t_p":
            assert torch.equal(a, b)
        assert b.data_ptr() == getattr(loaded.bias_filter, name).data_ptr(), name  # shared, not copied
    assert float(eager.bias.abs().max()) > 1e-3  # the fixes did correct something
    assert torch.allclose(eager.attitude(1.5, q)[0], loaded.attitude(1.5, q)[0], rtol=0, atol=1e-9)  # [m]
    if kw["bias_model"] == "heading":  # est.hf is the filter the model runs
        assert torch.equal(loaded.hf.theta(), loaded.theta_applied) and float(loaded.hf.t_ref) == 1.4


@pytest.mark.parametrize("innovation", ["seed", "observable"])
def test_rotation_bias_follows_the_seed_update(innovation):
    """The "rotation" model (seed 002, III-B4): p = p + σ_b² Δt, K = p / (p + σ_m²), y = Log(u^q → u^m) − b ("seed") or
    Log(exp([b]×) u^q → u^m) ("observable"), b ← b + K y, b ← b − γ (b·u^q) u^q, P ← (1 − K) p; joint 1's parent
    is the base (R̂_0 = I), so u^q = R_0ᵀ u^q is the recorded target."""
    sigma_b, sigma_m, p0, gamma = 3e-3, 0.02, 0.05, 0.02
    est, _ = _bent_pair(
        p0=p0, sigma_b=sigma_b, sigma_m=sigma_m, twist_damping=gamma, bias_model="rotation", innovation=innovation
    )
    t_prev = None
    for t, label in ((0.3, (0.0, 0.1, 1.0)), (0.8, (0.1, 0.25, 1.0))):
        b0, c0, p_prev = est.bias[0].clone(), est.c_bias[0].clone(), float(est.p_var[0])
        assert _fix(est, 1, label, t)
        uq, um = est.last_target[0], est.last_um[0]
        p = p_prev + (sigma_b**2 * (t - t_prev) if t_prev is not None else 0.0)
        k = p / (p + sigma_m**2)
        y = rotation_between(uq, um) - b0 if innovation == "seed" else rotation_between(c0 @ uq, um)
        b = b0 + k * y
        b = b - gamma * torch.dot(b, uq) * uq
        assert torch.allclose(est.bias[0], b, rtol=0, atol=1e-14)
        assert abs(float(est.p_var[0]) - (1 - k) * p) < 1e-15
        assert torch.allclose(est.c_bias[0], so3_exp(b), rtol=0, atol=1e-14)
        assert float(est.bias[1].abs().max()) == 0.0  # the other segment is untouched
        t_prev = t


def test_heading_walk_is_a_scalar_update_about_the_vertical_carrying_the_children():
    """The "heading_walk" model: y = signed angle about a_1 from Ĉ u^q to u^m.

    s = |Ĉu^q_h| |u^m_h|, K = p / (p + σ_m²/s), c_1 ← K y; module corrections b_k = (Σ_{m≤k} c_m) a_k (the child
    module 2 is carried along).
    """
    sigma_m, p0 = 0.02, 0.05
    est, _ = _bent_pair(p0=p0, sigma_m=sigma_m, travel_noise=0.0, bias_model="heading_walk")
    assert _fix(est, 1, (0.0, 0.1, 1.0), 0.3)
    y, s2 = heading_angle(est.last_target[0], est.last_um[0], est.axis[1])
    k = p0 / (p0 + sigma_m**2 / s2)
    assert abs(float(est.rel_c[0]) - k * y) < 1e-15 and float(est.rel_c[1]) == 0.0
    assert abs(y) > math.radians(2.0)  # the drift was seen
    for m in range(2):
        assert torch.allclose(est.bias[m], k * y * est.axis[m + 1], rtol=0, atol=1e-15)


def test_switching_the_bias_model_switches_the_update():
    """The same fixes: the heading models correct rotations about each module's vertical only (and differ from
    each other); the seed's rotation bias also tilts."""
    out = {}
    for kind in CLASSES:
        est, _ = _bent_pair(p0=0.05, sigma_m=0.02, bias_model=kind)
        for i, label, t in FIXES:
            _fix(est, i, label, t)
        along = (est.bias * est.axis[1:]).sum(-1, keepdim=True) * est.axis[1:]
        out[kind] = (est.bias.clone(), float((est.bias - along).abs().max()))
    assert out["heading"][1] < 1e-15 and out["heading_walk"][1] < 1e-15 and out["rotation"][1] > 1e-3
    assert float((out["heading"][0] - out["heading_walk"][0]).abs().max()) > 1e-4


@pytest.mark.parametrize("bias_model", ["heading", "heading_walk", "rotation"])
def test_scripted_estimator_keeps_epoch_times_exact(bias_model: str) -> None:
    """Unix-epoch stamps (≈ 1.7e9 s) survive the scripted estimator's time bookkeeping bit for bit: a Python
    float written into a float64 tensor element in TorchScript goes through float32 (64 s spacing there) unless
    the element is filled in place."""
    epoch = 1.7e9 + 0.123456
    est, _ = _bent_pair(p0=0.05, sigma_m=0.02, bias_model=bias_model)
    loaded = _roundtrip(est)
    for i, label, t in FIXES:
        _fix(loaded, i, label, epoch + t)
    last = {}
    for i, _, t in FIXES:
        last[i - 1] = epoch + t
    for j, t in last.items():
        assert float(loaded.t_fix[j]) == t
        assert float(loaded.t_p[j]) == t
