"""Bad input to the inverse pose statics is refused by name before the compiled kernels run (they index without
bounds checks and divide by zero on non-finite poses): poses that are not rigid transforms, a start state of
another element count, a non-finite platform wrench or tolerance."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from flexlearn.physics.lse import CPRModel
from flexlearn.physics.lse.pose_statics import platform_poses

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
    rot[:3, :3] *= 1 + 1e-9                    # round-off of a pose read from a file
    rot[:3, 3] = GOOD[:3, 3]
    assert platform_poses(rot, "g", False).shape == (4, 4)
    assert ps.solve_batch(np.zeros((0, 4, 4)), st).lengths.shape == (0, 6)


@pytest.mark.parametrize("kw, words", [({"platform_wrench": [np.nan] * 6}, "platform_wrench"),
                                       ({"platform_wrench": [1.0] * 5}, "platform_wrench"),
                                       ({"tol": 0.0}, "tol"), ({"tol": float("nan")}, "tol")])
def test_bad_options_are_refused_by_name(kw, words):
    with pytest.raises(ValueError, match=words):
        _statics(**kw)
