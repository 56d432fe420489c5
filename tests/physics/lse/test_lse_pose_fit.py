"""The batch warm start from solved neighbours (length_actuated.fit) and the compiled batch chain
(length_actuated.batch).

Checks: the fit weights reproduce every polynomial of the fit's degree exactly (cubics over positions at one
orientation, quadratics over full 6-D poses) and find the subspace the neighbours span (k neighbours: 5 on a
line, 24 in 3-D, 34 in 6-D); the neighbour search and the eigen-solver equal brute force and numpy; the batch
started from fits gives the equilibria of the chain-only batch and of pose-by-pose solves, with fewer Newton
corrections; a batch with a pose that has no equilibrium marks it and goes on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from flexlearn.lie import so3_exp
from flexlearn.physics.lse import CPRModel
from flexlearn.physics.lse.length_actuated import fit as pf
from flexlearn.physics.lse.length_actuated.statics import nearest_neighbour_order, pose_features

CSG = Path(__file__).resolve().parents[3] / "flexlearn" / "conf" / "cpr" / "csg.yaml"


def _poses(points, rotvecs=None):
    g = np.tile(np.eye(4), (len(points), 1, 1))
    g[:, :3, 3] = points
    if rotvecs is not None:
        g[:, :3, :3] = so3_exp(torch.from_numpy(np.asarray(rotvecs, dtype=np.float64))).numpy()
    return g


def _stored(poses):
    fw = pf.fit_workspace(len(poses), 1, 1)
    fw[0][:] = poses
    return fw


def _coords(g, poses, lbar):
    """The fit's displacement coordinates [L̄ φ; ρ] of log(g⁻¹ g_i) (numpy/torch reference)."""
    from flexlearn.lie import se3_log

    rel = np.linalg.inv(g)[None] @ poses
    xi = se3_log(torch.from_numpy(rel)).numpy()  # [ρ; φ] in flexlearn.lie's order
    return np.concatenate([lbar * xi[:, 3:], xi[:, :3]], 1)


def test_weights_reproduce_cubics_over_positions_at_one_orientation():
    rng = np.random.default_rng(0)
    poses = _poses(rng.uniform(-0.05, 0.05, (200, 3)))
    fw = _stored(poses)
    g = _poses([[0.003, -0.01, 0.02]])[0]
    k = pf.fit_neighbours(fw, 200, g, 0.1)
    assert k == 24  # ⌈1.2 × 20⌉: cubic in 3 directions
    idx, w = fw[5][:k], fw[10][:k]
    d = poses[idx, :3, 3] - g[:3, 3]
    coef = rng.normal(size=20)

    def cubic(x):
        return (
            coef[0]
            + x @ coef[1:4]
            + (x**2) @ coef[4:7]
            + x[:, 0] * x[:, 1] * coef[7]
            + (x**3) @ coef[8:11] * 1e2
            + x[:, 0] * x[:, 1] * x[:, 2] * coef[11] * 1e2
            + (x[:, 0] ** 2 * x[:, 2]) * coef[12] * 1e2
        )

    assert abs(w @ cubic(d) - cubic(np.zeros((1, 3)))[0]) < 1e-12
    quartic = (d**4).sum(1) * 1e4
    assert abs(w @ quartic) > 1e-9  # not exact beyond the degree: the check can fail
    assert abs(w.sum() - 1.0) < 1e-12


def test_weights_reproduce_quadratics_over_six_dimensional_poses():
    rng = np.random.default_rng(1)
    poses = _poses(rng.uniform(-0.03, 0.03, (300, 3)), rng.uniform(-0.2, 0.2, (300, 3)))
    fw = _stored(poses)
    g = _poses([[0.01, 0.0, -0.005]], [[0.02, -0.05, 0.03]])[0]
    k = pf.fit_neighbours(fw, 300, g, 0.1)
    assert k == 34  # ⌈1.2 × 28⌉: quadratic in 6 directions
    x = _coords(g, poses[fw[5][:k]], 0.1)
    a = rng.normal(size=(6, 6))
    quad = 3.0 + x @ rng.normal(size=6) + np.einsum("ij,jk,ik->i", x, a, x)
    assert abs(fw[10][:k] @ quad - 3.0) < 1e-10


def test_poses_on_a_line_fit_in_one_direction_and_few_solutions_give_no_fit():
    t = np.linspace(-0.05, 0.05, 60)
    poses = _poses(np.stack([t, 2 * t, -t], 1))
    fw = _stored(poses)
    g = _poses([[0.001, 0.002, -0.001]])[0]
    assert pf.fit_neighbours(fw, 60, g, 0.1) == 5  # ⌈1.2 × 4⌉: a cubic along the line
    vals = 1.0 + 7.0 * t - 3.0 * t**3
    k = 5
    s = 0.001
    assert abs(fw[10][:k] @ vals[fw[5][:k]] - (1.0 + 7.0 * s - 3.0 * s**3)) < 1e-12
    assert pf.fit_neighbours(fw, pf.MAX_NEIGHBOURS - 1, g, 0.1) == 0


def test_nearest_and_eigen_solver_equal_brute_force_and_numpy():
    rng = np.random.default_rng(2)
    poses = _poses(rng.uniform(-0.05, 0.05, (150, 3)), rng.uniform(-0.3, 0.3, (150, 3)))
    g = poses[7].copy()
    g[:3, 3] += 0.004
    idx, dist = np.zeros(34, dtype=np.int64), np.zeros(34)
    pf._nearest(poses, 150, g, 0.2, 34, idx, dist)
    feats = pose_features(poses, 0.2)
    ref = ((feats - pose_features(g, 0.2)) ** 2).sum(1)
    np.testing.assert_array_equal(idx, np.argsort(ref)[:34])
    np.testing.assert_allclose(dist, np.sort(ref)[:34], rtol=1e-12)
    m = rng.normal(size=(6, 6))
    a = m @ m.T
    a[:, 5] = a[5, :] = 0.0  # rank 5
    work, vec = a.copy(), np.zeros((6, 6))
    pf._jacobi_eigen(work, vec)
    np.testing.assert_allclose(np.sort(np.diag(work)), np.linalg.eigvalsh(a), atol=1e-10)
    np.testing.assert_allclose(vec @ np.diag(np.diag(work)) @ vec.T, a, atol=1e-10)


def test_nearest_neighbour_order_counts_rotations():
    poses = _poses([[0, 0, 0], [0.001, 0, 0], [0.002, 0, 0]], [[0, 0, 0], [0.5, 0, 0], [0, 0, 0]])
    order = nearest_neighbour_order(pose_features(poses, 0.1), pose_features(poses[0], 0.1)[0])
    np.testing.assert_array_equal(order, [0, 2, 1])  # the turned pose is farther than the one beside
    order_positions = nearest_neighbour_order(poses[:, :3, 3], poses[0, :3, 3])
    np.testing.assert_array_equal(order_positions, [0, 1, 2])


@pytest.fixture(scope="module")
def csg():
    cfg = OmegaConf.load(CSG)
    cfg.rod.n_elements = 4
    ps = CPRModel.from_config(cfg).pose_statics()
    st = ps.solve(_poses([[0, 0, 0.4]])[0])
    return ps, ps.solve(_poses([[0, 0.02, 0.48]])[0], st)


def test_batch_from_fits_gives_the_chain_equilibria_with_fewer_corrections(csg):
    ps, st = csg
    rng = np.random.default_rng(3)
    # 300 poses in a 2 × 5 × 5 cm box (the fit gains with density: 120 poses in 2 × 10 × 10 cm save only ≈ 14 %)
    pts = np.stack([rng.uniform(-0.01, 0.01, 300), rng.uniform(0.02, 0.07, 300), rng.uniform(0.48, 0.53, 300)], 1)
    poses = _poses(pts)
    fit = ps.solve_batch(poses, st)
    chain = ps.solve_batch(poses, st, fit=False)
    assert fit.converged.all() and chain.converged.all()
    assert fit.fit_started.sum() >= 300 - pf.MAX_NEIGHBOURS - 5 and not chain.fit_started.any()
    np.testing.assert_allclose(fit.lengths, chain.lengths, atol=1e-8)
    assert fit.iterations.sum() < 0.7 * chain.iterations.sum()  # 0.59 measured (1.8 against 3.4 per pose)
    for i in (0, 150, 299):  # and the pose-by-pose solves from the start
        np.testing.assert_allclose(fit.lengths[i], ps.solve(poses[i], st).lengths, atol=1e-8)


def test_batch_of_turned_poses_fits_in_six_directions(csg):
    ps, st = csg
    rng = np.random.default_rng(4)
    pts = np.stack([rng.uniform(-0.01, 0.01, 80), rng.uniform(0.03, 0.08, 80), rng.uniform(0.49, 0.54, 80)], 1)
    poses = _poses(pts, rng.uniform(-1, 1, (80, 3)) * np.radians(1.0))
    fit = ps.solve_batch(poses, st)
    assert fit.converged.all() and fit.fit_started.sum() > 30
    for i in (5, 40, 79):
        np.testing.assert_allclose(fit.lengths[i], ps.solve(poses[i], st).lengths, atol=1e-8)


def test_a_batch_beyond_the_store_keeps_the_latest_solutions(csg):
    from flexlearn.physics.lse.length_actuated.batch import STORE_MAX

    ps, st = csg
    rng = np.random.default_rng(6)
    n = STORE_MAX + 150
    pts = np.stack([rng.uniform(-0.01, 0.01, n), rng.uniform(0.02, 0.07, n), rng.uniform(0.48, 0.53, n)], 1)
    poses = _poses(pts)
    fit = ps.solve_batch(poses, st)
    assert fit.converged.all() and fit.fit_started.sum() > STORE_MAX
    chain = ps.solve_batch(poses, st, fit=False)
    np.testing.assert_allclose(fit.lengths, chain.lengths, atol=1e-8)


def test_the_batch_path_step_honours_predictor_false(csg):
    ps, st = csg
    cfg = OmegaConf.load(CSG)
    cfg.rod.n_elements = 4
    plain = CPRModel.from_config(cfg).pose_statics(predictor=False)
    rng = np.random.default_rng(7)
    pts = np.stack([rng.uniform(-0.005, 0.005, 20), rng.uniform(0.02, 0.04, 20), rng.uniform(0.48, 0.50, 20)], 1)
    poses = _poses(pts)
    warm, cold = ps.solve_batch(poses, st, fit=False), plain.solve_batch(poses, st, fit=False)
    assert warm.converged.all() and cold.converged.all()
    np.testing.assert_allclose(cold.lengths, warm.lengths, atol=1e-8)
    assert cold.iterations.sum() > warm.iterations.sum()  # no sensitivity warm start: more corrections


def test_a_pose_without_equilibrium_is_marked_and_the_batch_goes_on(csg):
    ps, st = csg
    rng = np.random.default_rng(5)
    pts = np.stack([rng.uniform(-0.01, 0.01, 50), rng.uniform(0.02, 0.12, 50), rng.uniform(0.48, 0.58, 50)], 1)
    poses = _poses(pts)
    poses[20, :3, 3] = [0.0, 0.0, -0.4]  # the platform below the base plane: no equilibrium reached
    for fit in (True, False):
        out = ps.solve_batch(poses, st, fit=fit)
        assert not out.converged[20] and out.converged.sum() == 49
        np.testing.assert_allclose(out.lengths[49], ps.solve(poses[49], st).lengths, atol=1e-8)


def test_budget_script_counts_its_schemes_and_refuses_a_bad_rate(capsys):
    """scripts/bench_csg_budget.py: each scheme's µs per pose is the sum of the kernels it runs, the SIMD line is
    that over 8 lanes against 1 / (10 × the C++ rate); a rate ≤ 0 is refused before anything is built."""
    import importlib.util

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("bench_csg_budget", root / "scripts" / "bench_csg_budget.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    k = {
        "residual": 10.0,
        "tangent": 60.0,
        "factorisation": 30.0,
        "column": 5.0,
        "trial": 20.0,
        "sensitivity_6_columns": 15.0,
        "fit_weights_and_start": 40.0,
    }
    res = {
        "batch": {"us_per_pose": 200.0},
        "chain_only": {"us_per_pose": 400.0},
        "chord": {"corrections_per_converged_pose": None},
    }
    out = bench.floors(k, res, 12.5)
    assert out["fit_then_one_newton_correction"]["us"] == 40 + 10 + 60 + 30 + 5 + 20
    assert out["fit_then_one_newton_correction"]["us_at_simd_lanes"] == 165 / 8
    assert not out["fit_then_one_newton_correction"]["within_budget_at_simd_lanes"]
    assert out["one_residual_only"]["within_budget_at_simd_lanes"]
    assert "sensitivity_then_chord_from_previous_factorisation" not in out  # no pose converged by chord
    with pytest.raises(SystemExit) as exc:
        bench.main(["--cpp-solves-per-s", "0"])
    assert exc.value.code == 2 and "positive rate" in capsys.readouterr().err
