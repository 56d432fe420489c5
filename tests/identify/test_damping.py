"""Damping from marker positions (flexlearn.identify.damping): accuracy and stated uncertainty on simulated
camera data the estimator did not write (a finer integrator step, dropped frames, few markers), its
Jacobian against forward-mode derivatives, and bad input named by file, field and value."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError, DataError
from flexlearn.identify.damping import DampingFitOptions, DampingProblem, MarkerRecording, fit_damping, read_marker_csv
from flexlearn.identify.fit import jacobian, whitened_residuals
from flexlearn.identify.params import ParameterSet, ParamSpec
from flexlearn.physics.cosserat import CosseratRod, Damping, Material, SimulationOptions


def camera_record(rod, alpha, angle, axis, nodes, sigma, seed, duration=0.2, fps=1000.0, drop=0.1):
    """The rod released from an arc, simulated at a third of its stable step, sampled at ``fps`` with noise σ
    and a fraction ``drop`` of lost frames (NaN rows)."""
    period = 1.0 / fps
    sub = math.ceil(period / (float(rod.stable_dt()) / 3.0))
    with torch.no_grad():
        tr = rod.simulate(
            duration,
            period / sub,
            damping=Damping(alpha=alpha),
            initial=rod.arc_state(angle, axis),
            options=SimulationOptions(record_every=sub),
        )
    g = torch.Generator().manual_seed(seed)
    pos = tr.positions[:, list(nodes)].clone()
    pos += sigma * torch.randn(pos.shape, generator=g, dtype=torch.float64)
    lost = torch.rand(pos.shape[0], generator=g) < drop
    lost[0] = False
    pos[lost] = math.nan
    return MarkerRecording(tr.times, pos, tuple(nodes), sigma)


@pytest.fixture(scope="module")
def rod():
    # not the seed's PDMS rod: another length, radius, modulus and mesh
    material = Material(density=1150, youngs_modulus=8.0e5, poisson_ratio=0.5)
    return CosseratRod.circular(length=0.075, radius=2.5e-3, material=material, n_elements=9)


@pytest.mark.parametrize("sigma, tol, seed", [(1e-5, 0.10, 11), (1e-4, 0.25, 12)])
def test_damping_from_noisy_camera_markers(rod, sigma, tol, seed):
    w1 = float(rod.linear_frequencies()[0])
    alpha = 2 * 0.07 * w1  # 7 % of critical on mode 1
    rec = camera_record(rod, alpha, 0.35, (0.6, 0.8, 0.0), (3, 6, 9), sigma, seed)
    est = fit_damping(rod, rec)
    assert est.converged
    assert abs(est.value - alpha) / alpha < tol, est.summary()
    assert abs(est.value - alpha) < 4 * est.std, est.summary()  # the stated std is not overconfident
    assert est.std / alpha < tol  # and it says the estimate is as good as the target
    assert est.noise == pytest.approx(sigma, rel=0.1)  # residuals at the noise level: the model fits
    assert est.damping_ratio == pytest.approx(0.07, rel=tol)
    assert est.tip_angle == pytest.approx(0.35, rel=0.02)


def test_damping_and_stiffness_together(rod):
    w1 = float(rod.linear_frequencies()[0])
    alpha = 2 * 0.04 * w1
    rec = camera_record(rod, alpha, 0.3, (1.0, 0.0, 0.0), (4, 9), 3e-5, 5, fps=500.0)
    start = CosseratRod.circular(0.075, 2.5e-3, Material(density=1150, youngs_modulus=6.0e5, poisson_ratio=0.5), 9)
    est = fit_damping(start, rec, DampingFitOptions(fit_stiffness=True))
    assert est.youngs_modulus is not None and est.youngs_modulus_std is not None
    assert est.youngs_modulus == pytest.approx(8.0e5, rel=0.01)
    assert abs(est.youngs_modulus - 8.0e5) < 4 * est.youngs_modulus_std
    assert est.value == pytest.approx(alpha, rel=0.15), est.summary()


def test_the_difference_jacobian_matches_forward_mode_derivatives():
    # the fit's Jacobian (forward differences of the compiled kernel) against forward-mode derivatives of the
    # tensor path (dual numbers through the unrolled steps): a short record of a coarse rod keeps it fast
    small = CosseratRod.circular(0.05, 2e-3, Material(density=1100, youngs_modulus=5e5, poisson_ratio=0.5), 4)
    w1 = float(small.linear_frequencies()[0])
    rec = camera_record(small, 2 * 0.05 * w1, 0.3, (0.0, 1.0, 0.0), (2, 4), 1e-5, 3, duration=0.004, drop=0.0)
    kernel = DampingProblem(small, rec, DampingFitOptions(backend="auto"), 1.0)
    tensor = DampingProblem(small, rec, DampingFitOptions(backend="torch"), 1.0)
    u = torch.tensor([0.2, 0.1, -0.3], dtype=torch.float64)
    r_fd, j_fd = jacobian(lambda v: whitened_residuals(kernel, v), u, "difference")
    r_fw, j_fw = jacobian(lambda v: whitened_residuals(tensor, v), u, "forward")
    torch.testing.assert_close(r_fd, r_fw, rtol=0, atol=1e-9)
    scale = j_fw.abs().max(0).values
    # forward differences with h = 1e-6 in u: truncation ~ h |∂²r/∂u²| plus the two paths' round-off / h
    # (measured ≈ 1e-4 of each column's scale); a wrong derivative is off by O(1)
    assert float(((j_fd - j_fw).abs().max(0).values / scale).max()) < 1e-3
    assert bool((scale > 0).all())


def test_a_signed_parameter_is_affine():
    ps = ParameterSet([ParamSpec("a", -0.2, scale=0.1), ParamSpec("b", 2.0)])
    torch.testing.assert_close(
        ps.values(torch.tensor([1.0, 0.0], dtype=torch.float64))[0], torch.tensor(-0.1, dtype=torch.float64)
    )
    with pytest.raises(ConfigError, match="params.a"):
        ParamSpec("a", 1.0, lower=0.5, upper=2.0, scale=0.1).validate()


def write_csv(path, rows):
    path.write_text("\n".join(",".join(str(c) for c in r) for r in rows) + "\n")
    return path


def test_read_marker_csv_round_trip(tmp_path):
    rows = [["time", "n3_x", "n3_y", "n3_z", "n6_x", "n6_y", "n6_z"]]
    for i in range(12):
        t = i * 1e-3
        rows.append([t, 0.01 * t, 0.0, 0.02, 0.02 * t, "", 0.04] if i != 4 else [t, "nan", "", "", "", "", ""])
    rec = read_marker_csv(write_csv(tmp_path / "m.csv", rows), sigma=1e-5)
    assert rec.nodes == (3, 6) and rec.positions.shape == (12, 2, 3)
    assert bool(torch.isnan(rec.positions[4]).all()) and bool(torch.isnan(rec.positions[:, 1, 1]).all())
    assert float(rec.positions[2, 1, 0]) == pytest.approx(4e-5)


@pytest.mark.parametrize(
    "header, row, match",
    [
        (["time", "n3_x", "n3_y"], [0.0, 1, 2], "n3_z is missing"),
        (["t", "n3_x", "n3_y", "n3_z"], [0.0, 1, 2, 3], "no column 'time'"),
        (["time", "n3_x", "n3_y", "n3_z"], [0.0, "1.2.3", 2, 3], r"column n3_x, row 3: '1\.2\.3' is not a number"),
        (["time", "n3_x", "n3_y", "n3_z"], ["", 1, 2, 3], "column time, row 3"),
        (["time", "n3_x", "n3_y", "n3_z", "speed"], [0.0, 1, 2, 3, 4], "column 'speed'"),
        (["time", "n3_x", "n3_y", "n3_z"], [0.0, 1, 2], "row 3 has 3 cells"),
    ],
)
def test_read_marker_csv_names_bad_input(tmp_path, header, row, match):
    good = [1e-3] + [0.0] * (len(header) - 1)
    path = write_csv(
        tmp_path / "bad.csv", [header, good, row] + [[k * 1e-3 + 0.01] + [0.0] * (len(header) - 1) for k in range(12)]
    )
    with pytest.raises(DataError, match=match) as info:
        read_marker_csv(path)
    assert str(path) in str(info.value)


def test_recordings_that_cannot_be_fitted_are_named(rod, tmp_path):
    t = torch.arange(20, dtype=torch.float64) * 1e-3
    pos = torch.zeros(20, 1, 3, dtype=torch.float64)
    with pytest.raises(DataError, match=r"times\[3\] = .* does not increase"):
        MarkerRecording(torch.cat([t[:3], t[1:2], t[4:]]), pos, (9,))
    with pytest.raises(DataError, match=r"nodes\[0\] = 12 is not a node"):
        DampingProblem(rod, MarkerRecording(t, pos, (12,)), DampingFitOptions(), 1.0)
    t_off = t.clone()
    t_off[7] += 3e-4
    with pytest.raises(DataError, match=r"times\[7\] .* not on the frame grid"):
        DampingProblem(rod, MarkerRecording(t_off, pos, (9,)), DampingFitOptions(), 1.0)
    with pytest.raises(DataError, match="sigma = -1"):
        MarkerRecording(t, pos, (9,), sigma=-1.0)
    with pytest.raises(ConfigError, match="damping"):
        DampingFitOptions(damping="beta")
    missing = tmp_path / "none.csv"
    with pytest.raises(DataError, match="none.csv: cannot read"):
        read_marker_csv(missing)
