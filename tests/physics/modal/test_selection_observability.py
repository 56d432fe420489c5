"""Mode selection (eq. 15-17), observability / placement (§III-C), reconstruction (eqs. 9, 18)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from flexlearn.config import from_dict
from flexlearn.errors import ConfigError
from flexlearn.physics.modal import (
    FlexibleLink,
    ModalReconstructor,
    ModeSelectionConfig,
    ObservabilityWarning,
    PlacementOptions,
    bandwidth_mode_count,
    chirp,
    modal_tip_response,
    observability,
    optimize_placement,
    select_modes,
    slope_node_warnings,
)

SEED = dict(EI=74300.0, rho_A=5.37)


def test_modal_response_matches_ode_integration():
    link = FlexibleLink(length=4.5, tip_mass=20.0, **SEED)
    cfg = ModeSelectionConfig(T=2.0, omega_max=2 * math.pi * 3.0, theta0=0.01, zeta=0.02, n_max=2)
    resp = modal_tip_response(link, 2, cfg).numpy()  # (N, 2)
    om = link.angular_frequencies(2).numpy()
    gam = link.participation(2).numpy()
    tip = link.tip_values(2)["tip"].numpy()

    def rhs(t, x):
        _, _, thdd = chirp(torch.tensor(t, dtype=torch.float64), cfg.theta0, cfg.omega_max, cfg.T)
        eta, deta = x[:2], x[2:]
        return np.concatenate([deta, -2 * cfg.zeta * om * deta - om**2 * eta - gam * float(thdd)])

    t = np.arange(resp.shape[0]) * cfg.dt
    sol = solve_ivp(rhs, (0, t[-1]), np.zeros(4), t_eval=t, rtol=1e-10, atol=1e-14, max_step=1e-3)
    ref = sol.y[:2].T * tip
    # zero-order hold vs continuous input: agreement to a small fraction of the peak response
    for j in range(2):
        assert np.max(np.abs(resp[:, j] - ref[:, j])) < 0.02 * np.max(np.abs(ref[:, j]))


def test_mode_count_trends_and_seed_payload_cases():
    link = FlexibleLink(length=torch.tensor([4.5, 4.5, 6.0]), tip_mass=torch.tensor([20.0, 40.0, 20.0]), **SEED)
    r = select_modes(link)
    assert r["m"].tolist()[:2] == [2, 1]  # seed §VI-B: two modes at 20 kg, one at 40 kg (calibrated θ₀)
    assert r["m"][2] >= r["m"][0]  # longer link → at least as many modes
    c = r["c_max"]
    assert torch.all(c[1] < c[0])  # heavier payload → smaller higher-mode share
    assert torch.all(c[:, 1:] <= c[:, :-1] * 1.0001)  # convergence in k


def test_bandwidth_criterion_counts_frequencies():
    link = FlexibleLink(length=4.5, tip_mass=20.0, **SEED)
    f = link.natural_frequencies(6)
    cfg = ModeSelectionConfig(alpha=1.0, f_exc=float(f[1]) + 1e-9)  # f_1, f_2 < f_exc < f_3
    assert int(bandwidth_mode_count(link, cfg)["m_bw"]) == 2
    cfg = ModeSelectionConfig(alpha=2.0, f_exc=float(f[0]) / 2 - 1e-9)  # α f_exc just below f_1
    assert int(bandwidth_mode_count(link, cfg)["m_bw"]) == 0


def test_mode_selection_config_validation():
    with pytest.raises(ConfigError, match="theta0"):
        from_dict(ModeSelectionConfig, {"theta0": -1.0})
    with pytest.raises(ConfigError, match="n_max"):
        from_dict(ModeSelectionConfig, {"n_max": 1})
    with pytest.raises(ConfigError, match="unknown"):
        from_dict(ModeSelectionConfig, {"thet0": 1.0})


@pytest.mark.slow
def test_grid_50x50_equals_pointwise_selection():
    """The vectorised Fig. 6 grid gives the same mode counts as one link at a time (its speed is measured by
    scripts/bench_modal.py, not asserted here)."""
    EI = torch.logspace(4, 6, 50, dtype=torch.float64)
    rA = torch.linspace(1, 20, 50, dtype=torch.float64)
    r = select_modes(FlexibleLink(EI[:, None], rA[None, :], 4.5, 20.0))
    assert r["m"].shape == (50, 50)
    for i, j in ((0, 0), (10, 40), (25, 25), (49, 3), (49, 49)):
        single = select_modes(FlexibleLink(EI[i], rA[j], 4.5, 20.0))
        assert int(single["m"]) == int(r["m"][i, j])


def test_observability_rank_drops():
    link = FlexibleLink(length=4.5, tip_mass=20.0, **SEED)
    ok = observability(link, [2.25, 4.05], 2)
    assert int(ok["rank"]) == 2 and bool(ok["observable"]) and math.isfinite(float(ok["cond"]))
    at_clamp = observability(link, [0.0, 4.05], 2)  # an IMU at the clamp measures no slope
    assert int(at_clamp["rank"]) == 1 and math.isinf(float(at_clamp["cond"]))
    same_spot = observability(link, [3.0, 3.0], 2)
    assert int(same_spot["rank"]) == 1
    at_reference = observability(link, [0.45, 4.05], 2, reference=0.45)  # slope IMU on the reference
    assert int(at_reference["rank"]) == 1
    too_few = observability(link, [4.05], 2)
    assert int(too_few["rank"]) == 1 and not bool(too_few["observable"])


def test_placement_optimizer_respects_constraints_and_beats_seed_layout():
    link = FlexibleLink(length=4.5, tip_mass=20.0, **SEED)
    res = optimize_placement(
        link, 2, PlacementOptions(intervals=[(0.5, 2.0), (3.0, 4.4)], min_spacing=0.5, reference=0.45)
    )
    pos = res.positions
    assert all((0.5 <= p <= 2.0) or (3.0 <= p <= 4.4) for p in pos)
    assert pos[1] - pos[0] >= 0.5 - 1e-12
    seed_layout = observability(link, [2.25, 4.05], 2, reference=0.45)["sigma_min"]
    assert res.sigma_min >= float(seed_layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ObservabilityWarning)
        res3 = optimize_placement(link, 3, PlacementOptions(candidates=61, max_combinations=10))  # greedy path
    assert len(res3.positions) == 3 and res3.sigma_min > 0 and res3.method == "greedy+exchange"


def test_slope_node_warning():
    link = FlexibleLink(length=4.5, tip_mass=20.0, **SEED)
    xi = torch.linspace(0.5, 4.5, 4001, dtype=torch.float64)
    d2 = link.mode_shapes(xi, 2, 1)[:, 1]
    node = float(xi[torch.argmin(d2.abs())])  # slope node of mode 2
    with pytest.warns(ObservabilityWarning):
        flagged = slope_node_warnings(link, [node, 4.0], 2)
    assert flagged and flagged[0][1] == 2


@pytest.mark.parametrize(
    "m,positions,ref",
    [(1, [4.05], 0.45), (2, [2.25, 4.05], 0.45), (3, [1.35, 2.25, 4.05], 0.45), (3, [1.0, 2.0, 3.0, 4.0], None)],
)
def test_reconstruction_exact_on_noise_free_modal_data(m, positions, ref):
    link = FlexibleLink(length=4.5, tip_mass=20.0, tip_inertia=1.5, **SEED)
    g = torch.Generator().manual_seed(0)
    eta = torch.randn(7, m, generator=g, dtype=torch.float64) * 0.05
    rec = ModalReconstructor.from_link(link, positions, m, reference=ref)
    phi1 = link.mode_shapes(torch.tensor(positions, dtype=torch.float64), m, 1)
    rref = 0.0 if ref is None else ref
    phir = link.mode_shapes(torch.tensor([rref], dtype=torch.float64), m, 1)
    theta = 0.3
    psi = theta + eta @ phi1.T  # absolute IMU angles
    psi_r = theta + eta @ phir.T
    est = rec(psi - psi_r)
    assert torch.allclose(est, eta, atol=1e-12)
    L = torch.tensor([4.5], dtype=torch.float64)
    assert torch.allclose(rec.tip_deflection(est), (eta @ link.mode_shapes(L, m, 0).T).squeeze(-1), atol=1e-12)
    assert torch.allclose(rec.tip_slope(est), (eta @ link.mode_shapes(L, m, 1).T).squeeze(-1), atol=1e-12)
    z = torch.zeros(1, dtype=torch.float64)
    assert torch.allclose(rec.base_curvature(est), (eta @ link.mode_shapes(z, m, 2).T).squeeze(-1), atol=1e-12)
    assert torch.allclose(psi_r.squeeze(-1) - rec.reference_slope(est), torch.full((7,), theta, dtype=torch.float64))
    w = rec.deflection(est)
    assert torch.allclose(w, eta @ link.mode_shapes(rec.grid, m, 0).T, atol=1e-12)


def test_reconstruction_rejects_unobservable_and_scripts():
    link = FlexibleLink(length=4.5, tip_mass=20.0, **SEED)
    with pytest.raises(ConfigError, match="rank"):
        ModalReconstructor.from_link(link, [0.0, 4.05], 2)
    with pytest.raises(ConfigError, match="at least"):
        ModalReconstructor.from_link(link, [4.05], 2)
    rec = ModalReconstructor.from_link(link, [0.0, 4.05], 2, regularization=1e-3)  # regularised: allowed
    sc = torch.jit.script(rec)
    y = torch.randn(5, 2, dtype=torch.float64)
    # TorchScript and eager may run other matmul kernels (SIMD width, summation order): equal to a few ulps of
    # the terms' magnitudes |y| |gain|ᵀ (and |tip_row| after it), not bitwise
    eps = torch.finfo(torch.float64).eps
    scale_eta = y.abs() @ rec.gain.abs().T
    torch.testing.assert_close(sc(y), rec(y), rtol=0, atol=16 * eps * float(scale_eta.max()))
    torch.testing.assert_close(
        sc.tip_deflection(sc(y)),
        rec.tip_deflection(rec(y)),
        rtol=0,
        atol=16 * eps * float((scale_eta @ rec.tip_row.abs()).max()),
    )
