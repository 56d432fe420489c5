"""Work arrays of the compiled inverse-statics calls (:mod:`flexlearn.physics.lse.length_actuated.kernels`): allocated once
per call by :func:`pose_workspace`, with the current/trial slot switch (:func:`_current`)."""
from __future__ import annotations

import numpy as np

from flexlearn.physics.lse.compiled.elements import (
    alloc_parts,
    njit,
    refresh_pose_cache,
    workspace,
)
from flexlearn.physics.lse.length_actuated.condense import condense_workspace

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = ["HISTORY", "pose_workspace"]

HISTORY = 8           # solutions kept for the extrapolation predictor


@njit(cache=True)
def _state(r, n):
    return (np.empty((r, max(n - 1, 0), 4, 4)), np.empty((r, n, 6)), np.empty(r), np.empty(r))


@njit(cache=True)
def pose_workspace(r, n):
    """Work arrays of one compiled call for R rods of N elements (allocated once): 0, 1 element pieces of the
    current and the trial state; 2 element scratch; 3 :func:`~flexlearn.physics.lse.length_actuated.condense.condense_workspace`;
    4, 5 current and trial state, 6 saved state; 7, 8 rod residuals (R, 12N); 9, 10 platform residuals (6,);
    11, 12 tip poses (R, 4, 4); 13 element tangents; 14 length column; 15 Ad_{T⁻¹}ᵀ (R, 6, 6) at the factorisation;
    16 (18,), 17 (5, 6), 18 (6, 6) scratch; 19 … 21 corrections (R, 12N - 6, 7), (R, 7), (R, 7); 22 flags (has a
    factorisation, has a sensitivity, which of 0/1 is current, has a predictor defect); 23 sensitivity;
    24 predictor defect and 25 this pose's corrections (dy (R, 12N - 6, 1), dpsi, dl (R, 1)); 26 previous move
    (6,); 27 Newton log; 28 solution history (:func:`_push_history`): platform poses (H, 4, 4) latest first, Ω,
    β (H, R, N, 6), ψ, L (H, R) in storage slots, the slots latest first (H,); 29 Ω scratch (R, N, 6);
    30 positions and weights (2, H).
    Flags: 0 has a factorisation, 1 has a sensitivity, 2 which of 0/1 is current, 3 has a predictor defect,
    4 sensitivity columns still to solve from the factorisation, 5 solutions in the history, 6 the last solution
    was left out of it."""
    ny = 12 * n - 6
    return (alloc_parts(r, n), alloc_parts(r, n), workspace(), condense_workspace(r, n), _state(r, n), _state(r, n),
            _state(r, n), np.empty((r, 12 * n)), np.empty((r, 12 * n)), np.empty(6), np.empty(6),
            np.empty((r, 4, 4)), np.empty((r, 4, 4)), np.empty((r, n, 18, 18)), np.empty((r, 12 * n)),
            np.empty((r, 6, 6)), np.empty(18), np.empty((5, 6)), np.empty((6, 6)), np.zeros((r, ny, 7)),
            np.zeros((r, 7)), np.zeros((r, 7)), np.zeros(7, dtype=np.int64),
            (np.zeros((r, ny, 6)), np.zeros((r, 6)), np.zeros((r, 6))),
            (np.zeros((r, ny, 1)), np.zeros((r, 1)), np.zeros((r, 1))),
            (np.zeros((r, ny, 1)), np.zeros((r, 1)), np.zeros((r, 1))), np.zeros(6), np.empty(64),
            (np.zeros((HISTORY, 4, 4)), np.zeros((HISTORY, r, n, 6)), np.zeros((HISTORY, r, n, 6)),
             np.zeros((HISTORY, r)), np.zeros((HISTORY, r)), np.arange(HISTORY)), np.empty((r, n, 6)),
            np.empty((2, HISTORY)))


@njit(cache=True)
def _current(wk):
    """(element pieces, state, rod residuals, platform residual, tip poses) of the current state, and the same of
    the trial slot."""
    if wk[22][2] == 0:
        return (wk[0], wk[4], wk[7], wk[9], wk[11]), (wk[1], wk[5], wk[8], wk[10], wk[12])
    return (wk[1], wk[5], wk[8], wk[10], wk[12]), (wk[0], wk[4], wk[7], wk[9], wk[11])


@njit(cache=True)
def _state_now(wk):
    """The current state alone: ``_current(wk)[0][1]`` without the other nine references (each one counted)."""
    return wk[4] if wk[22][2] == 0 else wk[5]
