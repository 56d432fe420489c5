"""Work arrays of the compiled inverse-statics calls (:mod:`flexlearn.physics.lse.length_actuated.kernels`): allocated
once per call by :func:`pose_workspace`, with the current/trial slot switch (:func:`current_and_trial`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from flexlearn.physics.lse.compiled.elements import alloc_parts, refresh_pose_cache, workspace
from flexlearn.physics.lse.compiled.linalg import njit
from flexlearn.physics.lse.length_actuated.condense import condense_workspace

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = [
    "HISTORY",
    "PoseNewtonOptions",
    "PoseSensitivity",
    "current_and_trial",
    "current_state",
    "empty_state",
    "pose_workspace",
]

HISTORY = 8  # solutions kept for the extrapolation predictor


class PoseNewtonOptions(NamedTuple):
    """The options every compiled inverse-statics call reads (built by :attr:`PoseStatics.kernel_options
    <flexlearn.physics.lse.length_actuated.statics.PoseStatics.kernel_options>`; a NamedTuple: numba reads it
    by name). This file is in the pose kernels' cache fingerprint, so a change of its fields recompiles them."""

    w: np.ndarray  # (12N,) residual weights: [1, L] per node, 1/L² per β (entries in N·m)
    scale: float  # residual scale [N·m] (max EI/L)
    tol: float  # scaled residual ∞-norm of convergence
    max_iter: int  # Newton iterations before failure
    max_rot: float  # [rad] largest nodal rotation of one step
    step_tol: float  # weighted step ∞-norm of the round-off floor
    growth: float  # a trial is accepted when its residual is ≤ growth × the current one
    backtracks: int  # halvings of a rejected trial step
    twist_free: bool  # platform attachments free to turn about the rod axis
    chord_keep: float  # a kept factorisation is refreshed after a step that lowered the residual less
    tiny_t2: float  # θ² [rad²] below which an element's tangent uses 2 quadrature points
    extrapolation: int  # solutions the path extrapolation uses at most (below EXTRAP_MIN: off)


class PoseSensitivity(NamedTuple):
    """The sensitivity of a solved pose to the platform twist ζ_ee, used by the warm-start predictor."""

    sens_y: np.ndarray  # (R, 12N - 6, 6) d(ζ, β)/dζ_ee
    sens_psi: np.ndarray  # (R, 6) dψ/dζ_ee [rad]
    sens_l: np.ndarray  # (R, 6) dL/dζ_ee [m]
    has_sens: bool  # False: not computed (the arrays are zeros)


@njit(cache=True)
def empty_state(r, n):
    """Storage of one kernel state (g_int (R, N-1, 4, 4), beta (R, N, 6), psi (R,), lengths (R,)), uninitialised.

    Args:
        r: Number of rods R.
        n: Number of elements per rod N.
    """
    return (np.empty((r, max(n - 1, 0), 4, 4)), np.empty((r, n, 6)), np.empty(r), np.empty(r))


@njit(cache=True)
def pose_workspace(r, n):
    """Work arrays of one compiled call for R rods of N elements (allocated once): 0, 1 element pieces of the
    current and the trial state; 2 element scratch; 3
    :func:`~flexlearn.physics.lse.length_actuated.condense.condense_workspace`; 4, 5 current and trial state, 6 saved
    state; 7, 8 rod residuals (R, 12N); 9, 10 platform residuals (6,); 11, 12 tip poses (R, 4, 4); 13 element tangents;
    14 length column; 15 Ad_{T⁻¹}ᵀ (R, 6, 6) at the factorisation; 16 (18,), 17 (5, 6), 18 (6, 6) scratch; 19 … 21
    corrections (R, 12N - 6, 7), (R, 7), (R, 7); 22 flags (has a factorisation, has a sensitivity, which of 0/1 is
    current, has a predictor defect); 23 sensitivity; 24 predictor defect and 25 this pose's corrections (dy (R, 12N -
    6, 1), dpsi, dl (R, 1)); 26 previous move (6,); 27 Newton log; 28 solution history (:func:`_push_history`): platform
    poses (H, 4, 4) latest first, Ω, β (H, R, N, 6), ψ, L (H, R) in storage slots, the slots latest first (H,); 29 Ω
    scratch (R, N, 6); 30 positions and weights (2, H).
    Flags: 0 has a factorisation, 1 has a sensitivity, 2 which of 0/1 is current, 3 has a predictor defect,
    4 sensitivity columns still to solve from the factorisation, 5 solutions in the history, 6 the last solution
    was left out of it.

    Args:
        r: Number of rods R.
        n: Number of elements per rod N.
    """
    ny = 12 * n - 6
    return (
        alloc_parts(r, n),
        alloc_parts(r, n),
        workspace(),
        condense_workspace(r, n),
        empty_state(r, n),
        empty_state(r, n),
        empty_state(r, n),
        np.empty((r, 12 * n)),
        np.empty((r, 12 * n)),
        np.empty(6),
        np.empty(6),
        np.empty((r, 4, 4)),
        np.empty((r, 4, 4)),
        np.empty((r, n, 18, 18)),
        np.empty((r, 12 * n)),
        np.empty((r, 6, 6)),
        np.empty(18),
        np.empty((5, 6)),
        np.empty((6, 6)),
        np.zeros((r, ny, 7)),
        np.zeros((r, 7)),
        np.zeros((r, 7)),
        np.zeros(7, dtype=np.int64),
        (np.zeros((r, ny, 6)), np.zeros((r, 6)), np.zeros((r, 6))),
        (np.zeros((r, ny, 1)), np.zeros((r, 1)), np.zeros((r, 1))),
        (np.zeros((r, ny, 1)), np.zeros((r, 1)), np.zeros((r, 1))),
        np.zeros(6),
        np.empty(64),
        (
            np.zeros((HISTORY, 4, 4)),
            np.zeros((HISTORY, r, n, 6)),
            np.zeros((HISTORY, r, n, 6)),
            np.zeros((HISTORY, r)),
            np.zeros((HISTORY, r)),
            np.arange(HISTORY),
        ),
        np.empty((r, n, 6)),
        np.empty((2, HISTORY)),
    )


@njit(cache=True)
def current_and_trial(wk):
    """(element pieces, state, rod residuals, platform residual, tip poses) of the current state, and the same of
    the trial slot.

    Args:
        wk: The workspace of :func:`pose_workspace`.
    """
    if wk[22][2] == 0:
        return (wk[0], wk[4], wk[7], wk[9], wk[11]), (wk[1], wk[5], wk[8], wk[10], wk[12])
    return (wk[1], wk[5], wk[8], wk[10], wk[12]), (wk[0], wk[4], wk[7], wk[9], wk[11])


@njit(cache=True)
def current_state(wk):
    """The current state alone: ``current_and_trial(wk)[0][1]`` without the other nine references (each one
    counted).

    Args:
        wk: The workspace of :func:`pose_workspace`.
    """
    return wk[4] if wk[22][2] == 0 else wk[5]
