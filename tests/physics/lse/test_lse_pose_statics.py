"""Inverse pose statics of the length-actuated continuous Stewart–Gough robot (conf/cpr/csg.yaml).

Checks: the config describes the reference robot; an axial load gives the analytic rod length; the LSE solution
converges to the independent shooting solution as elements are added; the compiled solution zeroes the torch
reference residual; the analytic length column equals finite differences; path, single and batched solves
give the same equilibria, with or without kept factorisations and with the extrapolation predictor along a
straight path (whose weights reproduce polynomials on a geodesic); a cold start from the Hermite shape
converges without help.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from flexlearn.errors import ConfigError
from flexlearn.physics.lse import CPRModel
from flexlearn.physics.lse.shooting.pose import ShootingSettings, shoot_pose

CSG = Path(__file__).resolve().parents[3] / "flexlearn" / "conf" / "cpr" / "csg.yaml"


def _cfg(n_elements=4, **geometry):
    cfg = OmegaConf.load(CSG)
    cfg.rod.n_elements = n_elements
    for k, v in geometry.items():
        cfg.geometry[k] = v
    return cfg


def _pose(p):
    g = np.eye(4)
    g[:3, 3] = p
    return g


def test_csg_config_describes_the_reference_robot():
    model = CPRModel.from_config(_cfg())
    assert model.n_rods == 6 and bool((model.rod_motor < 0).all())
    assert model.actuation == "length" and model.tip_twist_free
    base = model.base_pose0.numpy()
    radius = np.linalg.norm(base[:, :2, 3], axis=1)
    np.testing.assert_allclose(radius, 0.087, rtol=1e-12)
    angles = np.degrees(np.arctan2(base[:, 1, 3], base[:, 0, 3])) % 360
    np.testing.assert_allclose(np.sort(angles), [10, 110, 130, 230, 250, 350], atol=1e-9)
    np.testing.assert_allclose(
        model.stiffness()[0, 3:].numpy() / model.stiffness()[0, :3].numpy()[[0, 0, 0]],
        [(207e9 / 2.61) / 207e9 * 16 / 0.0013**2] * 2 + [16 / 0.0013**2],
        rtol=1e-9,
    )


def test_rod_layout_config_errors_name_the_key():
    cfg = _cfg()
    cfg.geometry.rod_attachments = cfg.geometry.rod_attachments[:5]
    with pytest.raises(ConfigError, match="rod_attachments"):
        CPRModel.from_config(cfg)
    cfg = OmegaConf.load(CSG)
    cfg.geometry.layout = "motors"
    with pytest.raises(ConfigError, match="actuation"):
        CPRModel.from_config(cfg)


def _rotvec_z_to(d):
    """Rotation vector of the smallest rotation taking +z to the direction d."""
    d = np.asarray(d, dtype=float) / np.linalg.norm(d)
    axis = np.cross([0.0, 0.0, 1.0], d)
    s = np.linalg.norm(axis)
    return (axis / s * math.atan2(s, d[2])).tolist() if s > 0 else [0.0, 0.0, 0.0]


def test_axial_load_gives_the_analytic_length():
    """Straight inclined rods (a hexapod: each rod clamped along its base-to-attachment chord at both ends),
    level platform at height h, load F down its axis: by the pattern's symmetry every rod carries the same
    axial compression f = F / (6 cos γ) and stays straight, so L = d / (1 - f / EA) (d: chord, γ: its angle
    to the vertical)."""
    cfg = _cfg(3)
    h, force = 0.4, 300.0
    bases, attach = [], []
    for b, a in zip(cfg.geometry.rod_bases, cfg.geometry.rod_attachments):
        d = np.array([a[0] - b[0], a[1] - b[1], h])
        rv = _rotvec_z_to(d)
        bases.append([b[0], b[1], 0.0] + rv)
        attach.append([a[0], a[1], 0.0] + rv)
    cfg.geometry.rod_bases, cfg.geometry.rod_attachments = bases, attach
    model = CPRModel.from_config(cfg)
    ps = model.pose_statics(platform_wrench=[0, 0, 0, 0, 0, -force])
    st = ps.solve(_pose([0, 0, h]))
    ea = float(model.stiffness()[0, 5])
    chord = np.linalg.norm(np.array([[a[0] - b[0], a[1] - b[1], h] for a, b in zip(attach, bases)]), axis=1)
    axial = force / (6 * h / chord)
    np.testing.assert_allclose(st.lengths, chord / (1 - axial / ea), rtol=1e-10)
    np.testing.assert_allclose(st.psi, 0.0, atol=1e-10)


@pytest.fixture(scope="module")
def csg_start():
    model = CPRModel.from_config(_cfg(4))
    ps = model.pose_statics()
    st = ps.solve(_pose([0, 0, 0.4]))  # cold start: Hermite shape, straight lengths
    return ps, ps.solve(_pose([0, 0.02, 0.48]), st)


def test_cold_start_and_continuation_converge(csg_start):
    _, st = csg_start
    assert st.lengths.shape == (6,) and np.all(np.isfinite(st.lengths))
    # the reference robot's symmetry: rods 0/3, 1/4, 2/5 share lengths for a platform moved in the y-z plane
    np.testing.assert_allclose(st.lengths[:3], st.lengths[3:], atol=1e-9)


def test_lse_converges_to_shooting_as_elements_are_added():
    g = _pose([0, 0.02, 0.48])
    model = CPRModel.from_config(_cfg(4))
    kd = model.stiffness().numpy()
    _, ref, _ = shoot_pose(model.base_pose0.numpy(), model.tip_local.numpy(), _pose([0, 0, 0.4]), kd)
    x0 = np.concatenate([np.zeros(30), ref])
    _, ref, _ = shoot_pose(model.base_pose0.numpy(), model.tip_local.numpy(), g, kd, x0, ShootingSettings(tol=1e-24))
    errs = []
    for n in (4, 8):
        ps = CPRModel.from_config(_cfg(n)).pose_statics()
        st = ps.solve(g, ps.solve(_pose([0, 0, 0.4])))
        errs.append(np.abs(st.lengths - ref).max())
    assert errs[1] < 0.1e-3 and errs[1] < errs[0] / 4, errs


def test_path_single_and_batched_solves_agree(csg_start):
    ps, st = csg_start
    poses = np.array([_pose([0, 0.02 + 0.001 * i, 0.48 + 0.001 * i]) for i in range(1, 6)])
    path = ps.solve_path(poses, st)
    assert path.iterations.max() <= 4 and path.factorisations.max() <= 2
    single = st
    for i, g in enumerate(poses):
        single = ps.solve(g, single)
        np.testing.assert_allclose(single.lengths, path.lengths[i], atol=1e-9)
    batch = ps.solve_batch(poses, st)
    assert batch.converged.all()
    np.testing.assert_allclose(batch.lengths, path.lengths, atol=1e-9)


def test_clamped_tips_hold_the_twist(csg_start):
    """With clamped attachments the tip twists stay where they start; the solve still converges, and here (the
    free-twist solution turns the tips by ~1e-15 rad: the rods' holonomy is nil for these moves) to the same
    lengths."""
    _, st = csg_start
    model = CPRModel.from_config(_cfg(4))
    clamped = model.pose_statics(twist_free=False).solve(st.g_ee, st)
    np.testing.assert_array_equal(clamped.psi, st.psi)
    np.testing.assert_allclose(clamped.lengths, st.lengths, atol=1e-9)


@pytest.mark.slow
def test_csg_shapes_agree_with_the_cpp_reference(tmp_path):
    """The reference C++ (compiled from the anchor copy, shapes dump only) against the LSE path with 8 elements:
    rod shapes within 0.1 mm over the 200 poses (skipped without g++, Eigen or the anchor); the reference's batch
    build, given the path's positions, repeats its own loop's solutions exactly."""
    import importlib.util
    import shutil

    root = Path(__file__).resolve().parents[3]
    anchor = root.parent / "shared" / "anchors" / "till_csg_ik_speedup"
    if shutil.which("g++") is None or not anchor.is_dir():
        pytest.skip("g++ or the CSG anchor sources are missing")
    spec = importlib.util.spec_from_file_location("bench_csg", root / "scripts" / "bench_csg.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cpp = bench.build_cpp(anchor, tmp_path, rates_too=False)
    if "skipped" in cpp:
        pytest.skip(cpp["skipped"])
    lse = bench.lse_run(8, 1, 1e-6)
    out = bench.compare(lse, cpp["solutions"], 8)
    assert out["max_shape_diff_m"] <= 1e-4 and out["max_length_diff_m"] <= 1e-4, out
    # the reference's batch build (positions from a file) on the path: the same solves as its own loop
    same = bench.cpp_batch(cpp["batch_exe"], bench.path_poses()[:, :3, 3], tmp_path)
    assert same["failures"] == 0 and not same["failed"].any()
    np.testing.assert_array_equal(same["solutions"], np.array(cpp["solutions"])[2:, 3:])


def test_bench_reads_the_reference_batch_output_and_refuses_a_short_one(tmp_path):
    """scripts/bench_csg.py's reader of the reference's batch build (a stand-in executable here): per-pose failure
    flags and solutions when every pose is printed; an error naming the count, not a crash, when some are not."""
    import importlib.util

    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("bench_csg", root / "scripts" / "bench_csg.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    sol = " ".join(["0.5"] * 36)
    for name, lines in (("full", 3), ("short", 2)):
        exe = tmp_path / name
        body = "".join(f'echo "SOL {i % 2} 0 0 0.4 {sol}"\n' for i in range(lines))
        exe.write_text(f'#!/bin/sh\necho "Solution rate: 1234.5Hz"\necho "Failures: 1"\n{body}')
        exe.chmod(0o755)
        res = bench.cpp_batch(exe, np.zeros((3, 3)), tmp_path)
        assert res["solves_per_s"] == 1234.5 and res["failures"] == 1
        if name == "full":
            assert res["failed"].tolist() == [False, True, False] and res["solutions"].shape == (3, 36)
        else:
            assert res["error"] == "printed 2 solutions for 3 poses" and "solutions" not in res


def test_kept_factorisations_give_the_plain_newton_equilibria(csg_start):
    """Chord steps (a factorisation kept across steps and poses) and 2-point tangent quadrature change the path
    to the solution, not the solution: the same lengths and shapes as plain Newton with 3-point tangents."""
    ps, st = csg_start
    poses = np.array([_pose([0, 0.02 - 0.002 * i, 0.48 + 0.001 * i]) for i in range(1, 6)])
    kept = ps.solve_path(poses, st)
    model = CPRModel.from_config(_cfg(4))
    plain = model.pose_statics(chord_keep=0.0, tiny_rotation=0.0).solve_path(poses, st)
    assert plain.factorisations.sum() == plain.iterations.sum()  # one tangent per Newton step
    assert kept.factorisations.sum() < kept.iterations.sum()
    np.testing.assert_allclose(kept.lengths, plain.lengths, atol=1e-9)
    np.testing.assert_allclose(kept.beta, plain.beta, atol=1e-6)


def test_analytic_length_column_matches_finite_differences(csg_start):
    """∂r/∂L of every rod (element pieces, assembled as in the Newton system) against central differences of
    the compiled residual."""
    from flexlearn.physics.lse.compiled.elements import alloc_parts, workspace
    from flexlearn.physics.lse.length_actuated import condense as pc
    from flexlearn.physics.lse.length_actuated.residual import residuals_into

    ps, st = csg_start
    r, n = st.beta.shape[:2]
    state = (st.g_int, st.beta, st.psi, st.lengths)

    def residual(lengths):
        res, ree, tip = np.empty((r, 12 * n)), np.empty(6), np.empty((r, 4, 4))
        residuals_into(
            ps.base,
            st.g_ee,
            state[:3] + (lengths,),
            ps.tip_local,
            ps.kd,
            ps.xi0,
            ps.w_body,
            alloc_parts(r, n),
            workspace(),
            res,
            ree,
            tip,
            np.empty((6, 6)),
        )
        return res

    parts = alloc_parts(r, n)
    residuals_into(
        ps.base,
        st.g_ee,
        state,
        ps.tip_local,
        ps.kd,
        ps.xi0,
        ps.w_body,
        parts,
        workspace(),
        np.empty((r, 12 * n)),
        np.empty(6),
        np.empty((r, 4, 4)),
        np.empty((6, 6)),
    )
    dres = np.empty((r, 12 * n))
    pc.pose_tangent(
        st.beta,
        st.lengths,
        ps.kd,
        ps.xi0,
        parts,
        workspace(),
        np.empty((r, n, 18, 18)),
        dres,
        np.empty(18),
        np.empty((3, 6)),
        0.0,
    )
    for k in range(r):
        step = 1e-6 * st.lengths[k]
        up, down = st.lengths.copy(), st.lengths.copy()
        up[k] += step
        down[k] -= step
        fd = (residual(up)[k] - residual(down)[k]) / (2 * step)
        np.testing.assert_allclose(dres[k], fd, rtol=0, atol=1e-6 * np.abs(fd).max())


def test_compiled_solution_zeroes_the_torch_residual(csg_start):
    """The compiled equilibrium, evaluated by the torch element (fused.element_residual, the reference of the
    compiled kernels): interior-node and slope residuals and the platform balance vanish (relative to the
    element wrenches), tip torsion too (free twist)."""
    import torch

    from flexlearn.physics.lse.fused import element_residual

    ps, st = csg_start
    nodes = torch.from_numpy(ps.nodes(st.g_ee, st.g_int, st.psi))
    r, n = st.beta.shape[:2]
    h = torch.from_numpy(st.lengths / n)[:, None].expand(r, n)
    kd = torch.from_numpy(ps.kd)[:, None].expand(r, n, 6)
    xi0 = torch.from_numpy(ps.xi0)[:, None].expand(r, n, 6)
    el, _ = element_residual(nodes[:, :-1], nodes[:, 1:], torch.from_numpy(st.beta), h, kd, xi0)
    el = el.numpy()
    node = el[:, 1:, :6] + el[:, :-1, 6:12]  # interior nodes: r_a of the next + r_b of the previous
    size = np.abs(el[..., :12]).max()
    assert np.abs(node).max() < 1e-6 * size and np.abs(el[..., 12:]).max() < 1e-6 * size
    tip = el[:, -1, 6:12]
    assert np.abs(tip[:, 2]).max() < 1e-6 * size
    from flexlearn.physics.lse.length_actuated.geometry import ad_inv_t_into

    wrench = np.zeros(6)
    for k in range(r):
        adt = np.empty((6, 6))
        ad_inv_t_into(ps.tip_local[k], st.psi[k], adt)
        wrench += adt @ tip[k]
    assert np.abs(wrench).max() < 1e-6 * size


def test_line_weights_extrapolate_polynomials_along_a_geodesic_only():
    """The extrapolation predictor's weights reproduce any polynomial of degree m - 1 in the position along an
    SE(3) geodesic (irregular spacing, target beyond the last pose or back between them) and are refused off
    the line or too far beyond the latest spacing."""
    import torch

    from flexlearn.lie import se3_exp
    from flexlearn.physics.lse.length_actuated.geometry import line_weights

    g0 = _pose([0.01, -0.02, 0.45])
    twist = np.array([0.3, -0.1, 0.2, 0.01, 0.02, -0.03])

    def at(t):
        return g0 @ se3_exp(torch.from_numpy(twist * t)).numpy()

    ts = np.array([0.0, -0.9, -2.1, -2.9, -4.2])  # latest first
    poses = np.array([at(t) for t in ts])
    coeff = np.array([0.7, -1.3, 0.4, 2.2, -0.6])
    s, w = np.zeros(5), np.zeros(5)
    for target in (1.1, -0.5):
        assert line_weights(poses, 5, at(target), s, w, 5) == 5
        np.testing.assert_allclose(np.sum(w * np.polyval(coeff, ts)), np.polyval(coeff, target), rtol=1e-9)
    off = at(1.0) @ _pose([0.0, 0.0, 1e-4])
    assert line_weights(poses, 5, off, s, w, 5) == 0
    assert line_weights(poses, 5, at(2.0), s, w, 5) == 0  # beyond twice the nearest stored distance (0.9)
    # a pose visited twice (a path that turns back) counts once: the older copy gets weight 0
    ts2 = np.array([0.0, -0.9, 0.0, -2.1, -2.9])
    back = np.array([at(t) for t in ts2])
    assert line_weights(back, 5, at(0.9), s, w, 5) == 4 and w[2] == 0.0
    np.testing.assert_allclose(np.sum(w * np.polyval(coeff[1:], ts2)), np.polyval(coeff[1:], 0.9), rtol=1e-9)


def test_straight_path_solves_start_from_the_extrapolation(csg_start):
    """Along a straight platform path, once four solutions are known each pose starts from their polynomial
    extrapolation, which needs fewer Newton corrections than the sensitivity predictor alone; the equilibria
    are those of pose-by-pose solves."""
    ps, st = csg_start
    poses = np.array([_pose([0, 0.02 + 0.001 * i, 0.48 + 0.001 * i]) for i in range(1, 9)])
    path = ps.solve_path(poses, st)
    sens_only = CPRModel.from_config(_cfg(4)).pose_statics(extrapolation=0).solve_path(poses, st)
    assert path.iterations[3:].sum() < sens_only.iterations[3:].sum(), (path.iterations, sens_only.iterations)
    np.testing.assert_allclose(sens_only.lengths, path.lengths, atol=1e-9)
    single = st
    for i, g in enumerate(poses):
        single = ps.solve(g, single)
        np.testing.assert_allclose(single.lengths, path.lengths[i], atol=1e-9)


def test_pose_log_and_node_rebuild_match_the_lie_group_maps():
    """The kernels' SE(3) log of a relative pose (small and large angles) equals flexlearn.lie.se3_log, and the
    node rebuild from element twists reproduces the chain ``g_j = g_{j-1} exp(Ω_j)`` (lengths untouched) when it
    already closes on the tip."""
    import torch

    from flexlearn.lie import se3_exp, se3_log
    from flexlearn.physics.lse.length_actuated.closure import rebuild_nodes_into
    from flexlearn.physics.lse.length_actuated.geometry import log_se3_into, rel_pose_into

    rng = np.random.default_rng(3)
    rel, out, co = np.empty((4, 4)), np.empty(6), np.empty(6)
    for scale in (1e-9, 1e-3, 0.3, 2.5):
        xa, xb = rng.normal(size=6), rng.normal(size=6) * scale
        ga = se3_exp(torch.from_numpy(xa)).numpy()
        gb = ga @ se3_exp(torch.from_numpy(xb)).numpy()
        rel_pose_into(ga, gb, rel)
        log_se3_into(rel, out, co)
        np.testing.assert_allclose(out, se3_log(torch.from_numpy(rel)).numpy(), rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(out, xb, rtol=1e-7, atol=1e-15)
    r, n = 2, 5
    base = np.stack([se3_exp(torch.from_numpy(rng.normal(size=6))).numpy() for _ in range(r)])
    omega = rng.normal(size=(r, n, 6)) * 0.2
    chain = _chain(base, omega)
    gi, lengths = np.empty((r, n - 1, 4, 4)), np.array([0.4, 0.7])
    rebuild_nodes_into(base, omega.copy(), chain[:, -1].copy(), gi, np.empty((5, 6)), lengths)
    np.testing.assert_allclose(gi, chain[:, 1:-1], atol=1e-12)
    np.testing.assert_allclose(lengths, [0.4, 0.7], atol=1e-15)  # closed: nothing to take up


def _chain(base, omega):
    """Nodes (R, N+1, 4, 4) of ``g_j = g_{j-1} exp(Ω_j)`` from the bases (flexlearn.lie)."""
    import torch

    from flexlearn.lie import se3_exp

    out = np.empty((omega.shape[0], omega.shape[1] + 1, 4, 4))
    for k in range(omega.shape[0]):
        out[k, 0] = base[k]
        for e in range(omega.shape[1]):
            out[k, e + 1] = out[k, e] @ se3_exp(torch.from_numpy(omega[k, e])).numpy()
    return out


def test_node_rebuild_closes_on_the_tip_without_stretching_or_shearing_the_rod():
    """A chain that misses its tip (the element rotations of a Newton step changed, its translations not) is
    closed by the element rotations and the rod length: every element's stretch and shear (log translation over
    h = L/N, the last element ending on the tip) stays as given (to round-off) — a rigid spread of the
    mismatch would change them by ≈ mismatch / L, which EA (≈ 2.7e5 N for a 1.3 mm steel rod) makes a force
    residual far above the solver's tolerance."""
    import torch

    from flexlearn.lie import se3_exp, se3_log
    from flexlearn.physics.lse.length_actuated.closure import rebuild_nodes_into

    rng = np.random.default_rng(5)
    r, n, length = 2, 8, 0.5
    h = length / n
    base = np.stack([se3_exp(torch.from_numpy(rng.normal(size=6) * 0.3)).numpy() for _ in range(r)])
    omega = np.zeros((r, n, 6))
    omega[..., :3] = rng.normal(size=(r, n, 3)) * 0.05  # a bent and twisted rod
    omega[..., 3:] = rng.normal(size=(r, n, 3)) * 1e-5 * h  # shear and stretch ≈ 1e-5
    omega[..., 5] += h
    tips = _chain(base, omega)[:, -1]
    changes, misses = [], []
    for size in (1e-5, 1e-4):
        step = omega.copy()
        step[..., :3] += rng.normal(size=(r, n, 3)) * size
        misses.append(np.abs(_chain(base, step)[:, -1, :3, 3] - tips[:, :3, 3]).max())
        gi, lengths = np.empty((r, n - 1, 4, 4)), np.full(r, length)
        rebuild_nodes_into(base, step.copy(), tips, gi, np.empty((5, 6)), lengths)
        worst = 0.0
        for k in range(r):
            nodes = np.concatenate([base[k : k + 1], gi[k], tips[k : k + 1]])
            for e in range(n):
                x = se3_log(torch.from_numpy(np.linalg.inv(nodes[e]) @ nodes[e + 1])).numpy()
                worst = max(worst, np.abs(x[3:] / (lengths[k] / n) - step[k, e, 3:] / h).max())
        changes.append(worst)
    for miss, change in zip(misses, changes):  # ≈ round-off (1e-15 … 1e-14) against ≈ miss / L ≈ 3e-5 … 3e-4
        assert miss > 1e-6 and change < 1e-6 * miss / length, (misses, changes)


def test_one_element_per_rod_still_solves():
    """With one element per rod the chain has 4 soft unknowns for 6 closure constraints: the node rebuild skips
    its closure by strain (its singular system gave NaN and a ZeroDivisionError) and the solver still finds
    equilibria."""
    ps = CPRModel.from_config(_cfg(1)).pose_statics()
    st = ps.solve(_pose([0, 0, 0.4]))
    poses = np.array([_pose([0, 0.002 * i, 0.4 + 0.002 * i]) for i in range(1, 4)])
    path = ps.solve_path(poses, st)
    assert np.isfinite(path.lengths).all() and np.isfinite(path.beta).all()
    assert np.isfinite(ps.solve(poses[-1], st).lengths).all()  # (a one-element rod has several equilibria here)


def test_node_rebuild_keeps_the_stretch_of_a_straight_rod_whose_tip_moved_along_it():
    """A straight rod of N elements (stretch 1.001) whose tip target lies 1e-6 m further along its axis: the
    length takes it up (δL = 1e-6 / 1.001), so every element's stretch (node spacing over L/N) is unchanged; a
    rigid spread would change it by δp/L = 2e-6, ≈ 0.5 N of axial force on a 1.3 mm steel rod."""
    from flexlearn.physics.lse.length_actuated.closure import rebuild_nodes_into

    n, length, stretch = 8, 0.5, 1.001
    base = np.eye(4)[None]
    omega = np.zeros((1, n, 6))
    omega[0, :, 5] = stretch * length / n
    tip = np.eye(4)[None].copy()
    tip[0, 2, 3] = stretch * length + 1e-6
    gi, lengths = np.empty((1, n - 1, 4, 4)), np.array([length])
    rebuild_nodes_into(base, omega, tip, gi, np.empty((5, 6)), lengths)
    z = np.concatenate([[0.0], gi[0, :, 2, 3], [tip[0, 2, 3]]])
    np.testing.assert_allclose(np.diff(z) / (lengths[0] / n), stretch, rtol=1e-12)
    assert lengths[0] == pytest.approx(length + 1e-6 / stretch, rel=1e-13)


def test_screw_and_curved_paths_equal_pose_by_pose_solves(csg_start):
    """A straight path that also turns the platform (an SE(3) screw, longer than the solution history: the
    extrapolation predictor reuses its storage) and a curved path (sensitivity predictor) give the equilibria of
    pose-by-pose solves."""
    import torch

    from flexlearn.lie import se3_exp

    ps, st = csg_start
    twist = np.array([0.004, -0.002, 0.003, -0.0006, 0.001, 0.0008])
    screw = np.array([st.g_ee @ se3_exp(torch.from_numpy(twist * (i + 1))).numpy() for i in range(12)])
    angles = np.linspace(0.3, 1.8, 5)
    curve = np.array([_pose([0.01 * np.sin(a), 0.02 + 0.01 * (1 - np.cos(a)), 0.48]) for a in angles])
    for poses in (screw, curve):
        path = ps.solve_path(poses, st)
        single = st
        for i, g in enumerate(poses):
            single = ps.solve(g, single)
            np.testing.assert_allclose(single.lengths, path.lengths[i], atol=1e-9)
    assert path.iterations.max() <= 6
