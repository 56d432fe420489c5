"""Per-fix σ_m and rejection of the fused estimator (`flexlearn.runtime.fusion.confidence`)."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from flexlearn.replay import shapes as rs
from flexlearn.runtime.bundle_inputs import BundleConfigError
from flexlearn.runtime.deploy import BundleOptions, export_deploy_bundle, load_bundle
from flexlearn.runtime.fusion.confidence import BendConfidence, build_confidence
from flexlearn.runtime.fusion.estimator import FusedEstimator
from flexlearn.runtime.fusion.flags import LOW_CONFIDENCE, MAG_REJECTED, decode_flags
from flexlearn.runtime.fusion.graph import FusedEstimatorGraph
from flexlearn.runtime.fusion.options import EstimatorSettings

F64 = torch.float64
ID = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=F64)
Z = torch.tensor([0.0, 0.0, 1.0], dtype=F64)


def _tilted(deg: float) -> torch.Tensor:
    a = math.radians(deg)
    return torch.tensor([math.sin(a), 0.0, math.cos(a)], dtype=F64)


def test_bend_confidence_equation():
    """σ_m² = σ₀² + (g (β − β_c))² past the cap, σ₀² below; β = max(model bend, quaternion bend); rejection by bend
    past cap + margin and by the field-magnitude bounds."""
    s0 = 0.03**2
    c = torch.jit.script(
        BendConfidence(
            s0, cap=math.radians(30.0), growth=0.5, margin=math.radians(10.0), field_min=1e-5, field_max=1e-3
        )
    )
    x = torch.tensor([0.0, 0.0, 1e-4], dtype=F64)
    s2, rej = c(x, 3.0 * _tilted(20.0), -1.0)  # below the cap: σ₀ (scale of f irrelevant)
    assert s2 == s0 and not rej
    s2, rej = c(x, _tilted(36.0), -1.0)
    assert s2 == pytest.approx(s0 + (0.5 * math.radians(6.0)) ** 2, rel=1e-9) and not rej
    s2, rej = c(x, _tilted(25.0), math.radians(36.0))  # the quaternions see the larger bend
    assert s2 == pytest.approx(s0 + (0.5 * math.radians(6.0)) ** 2, rel=1e-9) and not rej
    assert c(x, _tilted(41.0), -1.0)[1] and not c(x, _tilted(39.0), -1.0)[1]
    assert c(1e-6 * x, _tilted(10.0), -1.0)[1] and c(20.0 * x, _tilted(10.0), -1.0)[1]


def test_confidence_settings_are_checked():
    with pytest.raises(ValueError, match="kind"):
        build_confidence({"kind": "psychic"}, 1e-3)
    with pytest.raises(ValueError, match="growth"):
        build_confidence({"kind": "bend", "growth": -1.0}, 1e-3)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['cap_deg'\]"):
        build_confidence({"kind": "bend", "cap_deg": 30}, 1e-3)


@pytest.fixture(scope="module")
def bent_recording():
    from flexlearn.sim.robot import simulate_robot
    from flexlearn.sim.shape_scenarios import scenario

    return simulate_robot(scenario("3d_curl", period=8.0, theta_max=45.0), 8.0)


def test_neutral_source_is_bitwise_the_old_estimator_and_large_sigma_weakens_fixes(direction_model, bent_recording):
    """A source that never changes σ_m ("bend" with zero growth, no rejection) replays bitwise like the default
    estimator (σ_m² enters the gain unchanged); a large σ_m for every bent fix (cap ≈ 0, steep growth) makes the
    fixes count less: the heading corrections stay closer to zero; σ_m per fix is recorded."""
    rec = bent_recording
    const = rs.build_estimator(rec, direction_model, script=False)
    ref = rs.replay(rec, const)
    neutral = rs.build_estimator(rec, direction_model, script=False, confidence={"kind": "bend", "growth": 0.0})
    assert np.array_equal(rs.replay(rec, neutral), ref)
    weak = rs.build_estimator(
        rec, direction_model, script=False, confidence={"kind": "bend", "cap": 1e-3, "growth": 50.0}
    )
    rs.replay(rec, weak)
    assert int(const.n_fixes.min()) >= 2 and int(weak.n_fixes.sum()) == int(const.n_fixes.sum())
    assert int(weak.n_low_confidence.sum()) == 0 and float(weak.last_sigma_m.max()) > 0.5
    assert float(weak.hf.theta().abs().sum()) < 0.5 * float(const.hf.theta().abs().sum())


def _pulse(est, t0: float, label: torch.Tensor) -> torch.Tensor:
    """Baseline, one coil-0 pulse of 4 fresh samples carrying the field along ``label``, end of pulse."""
    m_off = torch.full((2, 3), 1e-5, dtype=F64)
    est.magnetometer(t0, m_off, -1)
    est.magnetometer(t0 + 0.003, m_off + 2e-9, -1)
    est.magnetometer(t0 + 0.006, m_off + 3e-9, 0)
    for s in range(4):
        est.magnetometer(t0 + 0.02 + 0.003 * s, m_off + 1e-4 * label + 1e-9 * s, 0)
    return est.magnetometer(t0 + 0.05, m_off + 5e-9, -1)


class _Echo(torch.nn.Module):
    """Direction model that returns its (normalised) input: the fix direction is the field direction."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


@pytest.mark.parametrize("scripted", [False, True])
def test_rejected_fix_is_flagged_and_changes_nothing(scripted):
    """A fix bent past cap + margin is dropped before it counts (no fix, state unchanged) and flagged
    MAG_REJECTED | LOW_CONFIDENCE; a fix within the margin is applied with its inflated σ_m."""
    conf = {"kind": "bend", "cap": math.radians(30.0), "growth": 0.5, "margin": math.radians(5.0)}
    est = FusedEstimator(_Echo(), EstimatorSettings(n_segments=2, confidence=conf))
    if scripted:
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(est), buf)
        buf.seek(0)
        est = torch.jit.load(buf)
    est.set_reference(ID.repeat(3, 1))
    est.attitude(0.1, ID.repeat(3, 1))
    applied = _pulse(est, 0.2, _tilted(40.0))
    assert not bool(applied[0]) and int(est.n_fixes[0]) == 0 and int(est.n_low_confidence[0]) == 1
    fl = int(est.attitude(0.3, ID.repeat(3, 1))[2][0])
    assert fl & MAG_REJECTED and fl & LOW_CONFIDENCE and "low_confidence" in decode_flags(fl)
    applied = _pulse(est, 1.2, _tilted(33.0))
    assert bool(applied[0]) and int(est.n_fixes[0]) == 1
    expect = math.sqrt(0.03**2 + (0.5 * math.radians(3.0)) ** 2)  # the samples' 1e-9 T offsets tilt ΔB by ~1e-5
    assert float(est.last_sigma_m[0]) == pytest.approx(expect, rel=1e-4)
    assert not int(est.attitude(1.3, ID.repeat(3, 1))[2][0]) & LOW_CONFIDENCE


def test_bundle_records_confidence_and_graph_refuses(tmp_path):
    """The option is recorded in the bundle metadata and runs in the loaded bundle; a bad option names the key;
    the branch-free graph (ExecuTorch path) refuses a per-fix source with a message naming it."""
    conf = {"kind": "bend", "cap": 0.5, "growth": 0.3, "margin": None}
    model = _Echo()
    out = export_deploy_bundle(
        model, tmp_path / "b.pt", BundleOptions(n_segments=2, calibration="identity", estimator={"confidence": conf})
    )
    module, meta = load_bundle(out)
    assert meta["estimator"]["confidence"] == conf
    module.set_reference(ID.repeat(3, 1))
    assert torch.isfinite(module.attitude(0.1, ID.repeat(3, 1))[0]).all()
    assert bool(_pulse(module, 0.2, _tilted(20.0))[0])  # a fix through the bundle's source
    plain = export_deploy_bundle(model, tmp_path / "c.pt", BundleOptions(n_segments=2, calibration="identity"))
    assert load_bundle(plain)[1]["estimator"]["confidence"] is None
    with pytest.raises(BundleConfigError, match=r"bundle\.estimator\.confidence.*'growth'"):
        bad = {"confidence": {"kind": "bend", "growth": "steep"}}
        export_deploy_bundle(
            model, tmp_path / "d.pt", BundleOptions(n_segments=2, calibration="identity", estimator=bad)
        )
    assert not (tmp_path / "d.pt").exists()
    with pytest.raises(ValueError, match="confidence"):
        FusedEstimatorGraph.from_estimator(FusedEstimator(model, EstimatorSettings(n_segments=2, confidence=conf)))


@pytest.mark.slow
def test_confidence_study_of_the_reproduction_script(direction_model):
    """`reproduce_seed002_table1.confidence_study` on one short trial bent to 50°: both runs scored, some fixes
    past cap + margin rejected in the per-fix run only, none in the constant one."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "repro", Path(__file__).resolve().parents[2] / "scripts" / "reproduce_seed002_table1.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.confidence_study(direction_model, 6.0, 1, 0, growth=0.3, margin_deg=10.0, curl_max_deg=50.0)
    row = out["per_trial"][0]
    assert row["max_joint_bend_deg"] == pytest.approx(50.0, abs=0.5) and row["share_past_cap"] > 0.05
    assert row["constant"]["rejected_share"] == 0.0 and row["per_fix"]["rejected_share"] > 0.0
    for name in ("constant", "per_fix"):
        assert 0.0 < out["mean"][name]["backbone_rmse_mm"] < 20.0 and out["mean"][name]["tip_rmse_mm"] > 0.0
