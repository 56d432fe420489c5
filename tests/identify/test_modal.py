"""Flexible link: EI and payload from joint motion and IMU slopes (FE truth simulator, modal fit)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flexlearn.errors import ConfigError, DataError
from flexlearn.identify.fit import jacobian, whitened_residuals
from flexlearn.identify.modal import ModalIdConfig, ModalLinkProblem
from flexlearn.identify.run import identify


def test_modal_jacobian_matches_finite_differences_through_the_frequency_roots():
    # forward-mode tangents must pass through the implicit root rule of FlexibleLink.roots
    prob = ModalLinkProblem(ModalIdConfig(duration=1.0, seed=3))
    f = lambda u: whitened_residuals(prob, u)  # noqa: E731
    u = torch.tensor([0.4, 0.6, -0.3], dtype=torch.float64)
    _, J = jacobian(f, u, "forward")
    h = 1e-5
    fd = torch.stack([(f(u + h * e) - f(u - h * e)) / (2 * h) for e in torch.eye(3, dtype=torch.float64)], -1)
    assert float((J - fd).abs().max()) < 1e-5 * float(fd.abs().max())


def test_identify_modal_sim_recovers_ei_and_payload(compose_cfg):
    cfg = compose_cfg(
        "train",
        [
            "experiment=identify_modal_sim",
            "task.problem.duration=3.0",
            "task.problem.seed=1",
            "logger=none",
            "figures=true",
        ],
    )
    m = identify(cfg)
    assert open(m["figures"]["fit"], "rb").read(4) == b"\x89PNG"
    # the experiment writes the simulated link as a playable recording (read back in tests/replay/test_mcap.py)
    assert m["mcap"].endswith("recording.mcap") and open(m["mcap"], "rb").read(8) == b"\x89MCAP0\r\n"
    for name in ("EI", "tip_mass", "zeta"):
        assert m[f"id/{name}_identifiable"] == 1.0
        # within the 2 % target, and consistent with the Hessian's standard deviation
        assert m[f"id/{name}_rel_err"] < 0.02, m
        assert m[f"id/{name}_rel_err"] < 5 * m[f"id/{name}_rel_std"], m
    assert m["id/converged"] == 1.0 and 0.8 < m["id/chi2_dof"] < 1.2
    assert abs(m["id/residual_lag1_autocorr"]) < 0.1


def test_static_recording_flags_the_damping_as_not_identifiable(compose_cfg):
    cfg = compose_cfg(
        "train",
        ["experiment=identify_modal_sim", "task.problem.duration=1.0", "task.problem.motion=static", "logger=none"],
    )
    m = identify(cfg)
    assert m["id/zeta_identifiable"] == 0.0 and "zeta" in m["id/not_identifiable"]
    assert m["id/hessian_cond"] > 1e12
    # the sag's shape still fixes EI and the payload (less precisely than the moving link)
    for name in ("EI", "tip_mass"):
        assert m[f"id/{name}_identifiable"] == 1.0
        assert m[f"id/{name}_rel_err"] < 4 * m[f"id/{name}_rel_std"], m


def test_recording_errors_name_the_file_and_field(tmp_path):
    with pytest.raises(DataError, match="not found"):
        ModalLinkProblem(ModalIdConfig(recording=str(tmp_path / "none.npz")))
    bad = tmp_path / "rec.npz"
    np.savez(bad, t=np.arange(20) * 1e-3, theta=np.zeros(20))
    with pytest.raises(DataError, match=r"rec\.npz.*imu_slope"):
        ModalLinkProblem(ModalIdConfig(recording=str(bad)))
    with pytest.raises(ConfigError, match="task.problem.motion"):
        ModalLinkProblem(ModalIdConfig(motion="wiggle"))


def test_recording_round_trip_gives_the_simulated_fit(tmp_path):
    sim = ModalLinkProblem(ModalIdConfig(duration=1.0))
    slopes = sim.measured.reshape(-1, 5).numpy()
    t = np.arange(slopes.shape[0]) * 1e-3
    np.savez(tmp_path / "rec.npz", t=t, theta=sim.theta.numpy(), imu_slope=slopes)
    rec = ModalLinkProblem(ModalIdConfig(recording=str(tmp_path / "rec.npz")))
    assert torch.equal(rec.measured, sim.measured)  # bitwise: .npz stores float64 losslessly, no arithmetic
    assert all(s.truth is None for s in rec.params.specs)
    assert math.isclose(rec.dt, 1e-3)
