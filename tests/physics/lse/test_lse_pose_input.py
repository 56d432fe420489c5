"""Bad input to the inverse pose statics is refused by name before the compiled kernels run (they index without
bounds checks and divide by zero on non-finite poses): poses that are not rigid transforms, a start state of
another element count, a non-finite platform wrench or tolerance. And a state gone non-finite inside Newton is a
failure, never a convergence (``max`` skips NaN, so the residual norms read such a state as 0)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from flexlearn.physics.lse import CPRModel
from flexlearn.physics.lse.length_actuated.statics import platform_poses

CSG = Path(__file__).resolve().parents[3] / "flexlearn" / "conf" / "cpr" / "csg.yaml"


def _statics(n_elements=2, **kw):
    cfg = OmegaConf.load(CSG)
    cfg.rod.n_elements = n_elements
    return CPRModel.from_config(cfg).pose_statics(**kw)


def _pose(p):
    g = np.eye(4)
    g[:3, 3] = p
    return g


@pytest.fixture(scope="module")
def solved():
    ps = _statics()
    return ps, ps.solve(_pose([0, 0, 0.4]))


GOOD = _pose([0, 0.01, 0.42])
BAD = {
    "non-finite": (_pose([np.nan, 0, 0.4]), "non-finite"),
    "bottom row": (np.vstack([GOOD[:3], [1.0, 1, 1, 1]]), "bottom row"),
    "scaled": (np.diag([2.0, 1, 1, 1]) @ GOOD, "not a rotation"),
    "reflected": (np.diag([1.0, 1, -1, 1]) @ GOOD, "reflection"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_pose_that_is_not_a_rigid_transform_is_refused_with_its_index(solved, case):
    ps, st = solved
    bad, words = BAD[case]
    with pytest.raises(ValueError, match=f"g_ee: .*{words}"):
        ps.solve(bad, st)
    for call in (ps.solve_path, ps.solve_batch):
        with pytest.raises(ValueError, match=rf"poses\[1\]: .*{words}"):
            call(np.stack([GOOD, bad]), st)


def test_wrong_shapes_and_non_numbers_are_refused(solved):
    ps, st = solved
    with pytest.raises(ValueError, match=r"g_ee: shape \(3, 3\)"):
        ps.solve(np.eye(3), st)
    with pytest.raises(ValueError, match=r"poses: shape \(4, 4\), expected \(P, 4, 4\)"):
        ps.solve_path(GOOD, st)
    with pytest.raises(ValueError, match="not an array of numbers"):
        ps.solve("pose", st)


def test_a_state_of_another_element_count_is_refused(solved):
    ps, st = solved
    other = _statics(3)
    with pytest.raises(ValueError, match=r"init.g_int: shape \(6, 1, 4, 4\).*6 rods of 3 elements"):
        other.solve(GOOD, st)
    with pytest.raises(ValueError, match="ref.g_int"):
        other.solve_batch(GOOD[None], st)
    with pytest.raises(ValueError, match="init: a PoseState"):
        ps.solve_path(GOOD[None], "state")


def test_rotation_tolerance_accepts_round_off_and_empty_batches_solve_nothing(solved):
    ps, st = solved
    rot = np.eye(4)
    rot[:3, :3] = [[np.cos(0.3), -np.sin(0.3), 0], [np.sin(0.3), np.cos(0.3), 0], [0, 0, 1]]
    rot[:3, :3] *= 1 + 1e-9  # round-off of a pose read from a file
    rot[:3, 3] = GOOD[:3, 3]
    assert platform_poses(rot, "g", False).shape == (4, 4)
    assert ps.solve_batch(np.zeros((0, 4, 4)), st).lengths.shape == (0, 6)


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"platform_wrench": [np.nan] * 6}, "platform_wrench"),
        ({"platform_wrench": [1.0] * 5}, "platform_wrench"),
        ({"tol": 0.0}, "tol"),
        ({"tol": float("nan")}, "tol"),
    ],
)
def test_bad_options_are_refused_by_name(kw, words):
    with pytest.raises(ValueError, match=words):
        _statics(**kw)


def test_a_non_finite_residual_is_an_infinite_norm_and_newton_fails_on_it(solved):
    from numba import njit

    from flexlearn.physics.lse.compiled.newton import _scaled_norm
    from flexlearn.physics.lse.length_actuated import kernels as pk
    from flexlearn.physics.lse.length_actuated.residual import residual_norm
    from flexlearn.physics.lse.length_actuated.work import pose_workspace
    from flexlearn.physics.lse.newton_policy import CONVERGED, residual_verdict

    forward_norm = njit(lambda res, res_ee, w, ny: _scaled_norm(res, res_ee, w, ny, 1.0))  # an inner kernel
    ps, st = solved
    r, n = 6, ps.n_elements
    w = np.ones(12 * n)
    for bad in (np.nan, np.inf):
        res = np.zeros((r, 12 * n))
        res[2, 5] = bad
        assert residual_norm(res, np.zeros(6), w, 1.0, True) == np.inf
        assert forward_norm(res, np.zeros(6), w, 12 * n - 6) == np.inf
        assert residual_verdict(residual_norm(res, np.zeros(6), w, 1.0, True), 1.0, 1, 1e-6, 50) != CONVERGED
    assert residual_norm(np.zeros((r, 12 * n)), np.zeros(6), w, 1.0, True) == 0.0
    beta = st.beta.copy()
    beta[0, 0, 0] = np.nan  # a state gone non-finite (no public call can pass one in)
    state = (st.g_int, beta, st.psi, st.lengths)
    wk = pose_workspace(r, n)
    pk.load_state(ps.base, st.g_ee, ps.tip_local, ps.kd, ps.xi0, ps.w_body, state, st.sens, wk)
    status, _it, _nf, _nlog = pk.pose_newton(
        ps.base, st.g_ee, ps.tip_local, ps.kd, ps.xi0, ps.w_body, ps.kernel_options, wk
    )
    assert status == 0


def test_node_and_point_reconstruction_check_their_arrays(solved):
    ps, st = solved
    pts = ps.rod_points(st.g_ee, st.g_int, st.beta, st.psi, st.lengths, 4)
    assert pts.shape == (6, ps.n_elements * 4 + 1, 3) and np.isfinite(pts).all()
    with pytest.raises(ValueError, match=r"psi: shape \(3,\)"):
        ps.nodes(st.g_ee, st.g_int, st.psi[:3])  # read past the array by the compiled tip poses before
    with pytest.raises(ValueError, match="g_int: non-finite"):
        ps.nodes(st.g_ee, np.full_like(st.g_int, np.nan), st.psi)
    with pytest.raises(ValueError, match="beta: shape"):
        ps.rod_points(st.g_ee, st.g_int, st.beta[:, :1], st.psi, st.lengths)
    with pytest.raises(ValueError, match="samples_per_element"):
        ps.rod_points(st.g_ee, st.g_int, st.beta, st.psi, st.lengths, 0)
