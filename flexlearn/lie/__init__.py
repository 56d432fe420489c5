"""Lie groups SO(2), SE(2), SO(3), SE(3) and unit quaternions: pure, batched, differentiable,
TorchScript-compatible functions.

Conventions (docs/architecture.md): batch-first shapes (..., 3), (..., 3, 3), (..., 4, 4) that broadcast; every
function keeps the dtype and device of its inputs; twists are [angular; linear]; quaternions are
(w, x, y, z), Hamilton, R(q) maps body to world, canonical w ≥ 0; perturbations on the right,
g ⊕ δ = g exp(δ^). Thresholds between closed forms and series: :mod:`flexlearn.lie.thresholds`.
"""

from flexlearn.lie.cayley import (
    se3_cayley,
    se3_cayley_inv,
    se3_cayley_jacobian,
    so3_cayley,
    so3_cayley_inv,
    so3_cayley_jacobian,
    so3_cayley_jacobian_inv,
    so3_cayley_lgvi,
    so3_cayley_lgvi_solve,
)
from flexlearn.lie.jacobians import (
    se3_left_jacobian,
    se3_left_jacobian_inv,
    se3_q_matrix,
    se3_right_jacobian,
    se3_right_jacobian_inv,
    so3_jacobians,
    so3_left_jacobian,
    so3_left_jacobian_inv,
    so3_right_jacobian,
    so3_right_jacobian_inv,
)
from flexlearn.lie.quaternion import (
    matrix_to_quat,
    quat_canonical,
    quat_conjugate,
    quat_exp,
    quat_inverse,
    quat_log,
    quat_multiply,
    quat_normalize,
    quat_rotate,
    quat_to_matrix,
)
from flexlearn.lie.se2 import se2_ad, se2_adjoint, se2_exp, se2_hat, se2_inverse, se2_log, se2_vee
from flexlearn.lie.se3 import (
    se3_ad,
    se3_adjoint,
    se3_coad,
    se3_coadjoint,
    se3_exp,
    se3_from_rt,
    se3_hat,
    se3_inverse,
    se3_log,
    se3_vee,
)
from flexlearn.lie.so2 import so2_exp, so2_hat, so2_log, so2_vee
from flexlearn.lie.so3 import (
    rotation_between,
    so3_exp,
    so3_hat,
    so3_hat_sq,
    so3_inverse,
    so3_log,
    so3_vee,
)

__all__ = [
    "matrix_to_quat", "quat_canonical", "quat_conjugate", "quat_exp", "quat_inverse", "quat_log",
    "quat_multiply", "quat_normalize", "quat_rotate", "quat_to_matrix",
    "rotation_between", "so3_exp", "so3_hat", "so3_hat_sq", "so3_inverse", "so3_log", "so3_vee",
    "so3_left_jacobian", "so3_left_jacobian_inv", "so3_right_jacobian", "so3_right_jacobian_inv",
    "so3_jacobians",
    "so3_cayley", "so3_cayley_inv", "so3_cayley_jacobian", "so3_cayley_jacobian_inv",
    "so3_cayley_lgvi", "so3_cayley_lgvi_solve",
    "se3_ad", "se3_adjoint", "se3_coad", "se3_coadjoint", "se3_exp", "se3_from_rt", "se3_hat",
    "se3_inverse", "se3_log", "se3_vee",
    "se3_left_jacobian", "se3_left_jacobian_inv", "se3_right_jacobian", "se3_right_jacobian_inv",
    "se3_q_matrix",
    "se3_cayley", "se3_cayley_inv", "se3_cayley_jacobian",
    "so2_exp", "so2_hat", "so2_log", "so2_vee",
    "se2_ad", "se2_adjoint", "se2_exp", "se2_hat", "se2_inverse", "se2_log", "se2_vee",
]
