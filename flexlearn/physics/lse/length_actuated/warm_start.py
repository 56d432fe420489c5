"""Warm starts of the inverse pose statics (numba): the solution history, the extrapolation along a straight
platform path, and the sensitivity predictor.

Along a straight platform path (the last solutions and the new pose on one SE(3) geodesic) :func:`extrapolate`
takes the Lagrange polynomial of up to ``max_points`` stored solutions (:func:`push_history`) in their element
twists Ω (R, N, 6), slopes β (R, N, 6), tip twists ψ (R,) [rad] and lengths L (R,) [m]; otherwise
:func:`predict_start` steps ``q ⊕ ((dq/dζ_ee) dz + s² d)``, dz = log(g_old⁻¹ g_new) (6,), with the sensitivity
dq/dζ_ee (R, 12N - 6, 6) of :func:`ensure_sens`. Called by
:func:`~flexlearn.physics.lse.length_actuated.kernels.solve_stepped`; part of the pose kernels' cache group
(:data:`flexlearn.physics.lse.compiled.elements.POSE_CACHE_SOURCES`). SI units.
"""

from __future__ import annotations

import math

from flexlearn.physics.lse.compiled.elements import refresh_pose_cache
from flexlearn.physics.lse.compiled.linalg import njit
from flexlearn.physics.lse.length_actuated.closure import rebuild_nodes_into, retract_strain_into
from flexlearn.physics.lse.length_actuated.condense import pose_solve_column
from flexlearn.physics.lse.length_actuated.geometry import (
    combine_solutions_into,
    line_weights,
    record_solution_into,
    rel_log,
    tip_poses_into,
)
from flexlearn.physics.lse.length_actuated.residual import largest_rotation
from flexlearn.physics.lse.length_actuated.work import HISTORY, current_and_trial

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = ["EXTRAP_MIN", "PARALLEL_COS", "ensure_sens", "extrapolate", "predict_start", "push_history"]

PARALLEL_COS = 0.9  # second-order predictor term only for platform moves this parallel to the previous one
EXTRAP_MIN = 4  # fewest solutions it extrapolates from (degree ≥ 3; lower degrees predict worse)


@njit(cache=True)
def ensure_sens(wk, twist_free):
    """Solve the sensitivity columns 1 … 6 (platform twists) of the latest factorisation into the workspace's
    sensitivity when they are pending (flag 4).

    Args:
        wk: The workspace (:func:`~flexlearn.physics.lse.length_actuated.work.pose_workspace`), its flags and
            sensitivity written.
        twist_free: The tip torsion is an unknown.
    """
    flags, dy, dpsi, dl = wk[22], wk[19], wk[20], wk[21]
    if flags[4] == 0:
        return
    cur, _ = current_and_trial(wk)
    ok = True
    for c in range(1, 7):
        ok = pose_solve_column(wk[3], wk[13], wk[15], cur[2], cur[3], twist_free, c, dy, dpsi, dl) and ok
    if ok:
        wk[23][0][:] = dy[:, :, 1:]
        wk[23][1][:] = dpsi[:, 1:]
        wk[23][2][:] = dl[:, 1:]
    flags[1], flags[4] = (1 if ok else 0), 0


@njit(cache=True)
def push_history(g_ee, wk):
    """Add the current state (a solution at ``g_ee``, its element pieces evaluated) to the front of the
    solution history, dropping the oldest beyond HISTORY. The platform poses shift (latest first); Ω, β, ψ, L
    stay in their storage slots, ``slots[i]`` naming the slot of the i-th latest (no copies of older ones).

    Args:
        g_ee: Platform pose (4, 4) of the current state.
        wk: The workspace (:func:`~flexlearn.physics.lse.length_actuated.work.pose_workspace`), its history written.
    """
    flags, hist = wk[22], wk[28]
    slots = hist[5]
    m = min(flags[5] + 1, HISTORY)
    new = slots[m - 1]  # a free slot, or the oldest one's when the history is full
    for i in range(m - 1, 0, -1):
        slots[i] = slots[i - 1]
        hist[0][i] = hist[0][i - 1]
    slots[0] = new
    cur, _ = current_and_trial(wk)
    parts, st = cur[0], cur[1]
    hist[0][0] = g_ee
    record_solution_into(parts, st, hist[1][new], hist[2][new], hist[3][new], hist[4][new])
    flags[5] = m


@njit(cache=True)
def extrapolate(base, g_new, tip_local, max_points, wk):
    """Warm start at ``g_new`` by polynomial extrapolation of the stored solutions (:func:`push_history`) when
    they and ``g_new`` lie on one SE(3) geodesic
    (:func:`~flexlearn.physics.lse.length_actuated.geometry.line_weights`):
    Ω, β, ψ, L each ``Σ_i w_i x_i`` (Lagrange weights in the position along the line over at most
    ``max_points`` solutions, error O(|move|^max_points)), the nodes rebuilt from Ω and closed onto the new tips
    (:func:`~flexlearn.physics.lse.length_actuated.closure.rebuild_nodes_into`; the lengths stay as extrapolated,
    its length change dropped, though the element twists it rescaled are kept: applying it cost the CSG path 0.635
    instead of 0.555 corrections per pose).

    Args:
        base: Rod base poses (R, 4, 4).
        g_new: Platform pose (4, 4) to start at.
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        max_points: Most stored solutions used.
        wk: The workspace (:func:`~flexlearn.physics.lse.length_actuated.work.pose_workspace`); the start becomes
            its current state.

    Returns:
        False (the state unchanged) with fewer than EXTRAP_MIN solutions stored or off the line.
    """
    flags, hist, om, sw = wk[22], wk[28], wk[29], wk[30]
    m = flags[5]
    if m < EXTRAP_MIN or line_weights(hist[0], m, g_new, sw[0], sw[1], max_points) < EXTRAP_MIN:
        return False
    _, trl = current_and_trial(wk)
    gi, be, ps, ln = trl[1]
    r = be.shape[0]
    combine_solutions_into(sw[1], hist[5], m, hist[1], hist[2], hist[3], hist[4], om, be, ps, ln)
    tip_poses_into(g_new, tip_local, ps, trl[4])
    rebuild_nodes_into(base, om, trl[4], gi, wk[17], wk[16][:r])  # its length change dropped (docstring)
    flags[2] = 1 - flags[2]
    return True


@njit(cache=True)
def predict_start(base, g_old, g_new, tip_local, kd, xi0, w_body, max_rot, wk):
    """Warm start for the platform move ``g_old → g_new`` from the current (solved) state:
    ``q ⊕ ((dq/dζ_ee) dz + s² d)``, dz = log(g_old⁻¹ g_new), by the strain retraction; ``d``: the corrections
    Newton added to the previous pose's prediction (its second-order defect), s = dz·dz_prev / |dz_prev|², used
    when the move is nearly parallel to the previous one (|cos| ≥ PARALLEL_COS; the defect is quadratic in the
    move, so a reversal keeps it).

    Args:
        base: Rod base poses (R, 4, 4).
        g_old: Platform pose (4, 4) of the current state.
        g_new: Platform pose (4, 4) to start at.
        tip_local: Platform attachments g^loc (R, 4, 4), platform frame.
        kd: Section stiffness diagonal of each rod (R, 6) (unused here; the signature of the solver calls).
        xi0: Reference strain of each rod (R, 6) (unused here).
        w_body: External platform wrench (6,) (unused here).
        max_rot: Largest nodal rotation a prediction may make [rad].
        wk: The workspace (:func:`~flexlearn.physics.lse.length_actuated.work.pose_workspace`); the start becomes
            its current state.

    Returns:
        False (the state unchanged) when a node would turn by more than ``max_rot``.
    """
    flags, dy, dpsi, dl = wk[22], wk[19], wk[20], wk[21]
    sy, spsi, sl = wk[23]
    dz = rel_log(g_old, g_new)
    zp = wk[26]
    dot, nn, np2 = 0.0, 0.0, 0.0
    for i in range(6):
        dot += dz[i] * zp[i]
        nn += dz[i] * dz[i]
        np2 += zp[i] * zp[i]
    s2 = 0.0
    if flags[3] == 1 and np2 > 0 and abs(dot) >= PARALLEL_COS * math.sqrt(nn * np2):
        s2 = (dot / np2) ** 2
    d_y, d_psi, d_l = wk[24]
    a_y, a_psi, a_l = wk[25]  # this pose's defect starts with the predicted part
    r, ny = sy.shape[0], sy.shape[1]
    for k in range(r):
        for i in range(ny):
            a_y[k, i, 0] = s2 * d_y[k, i, 0]
            acc = a_y[k, i, 0]
            for c in range(6):
                acc += sy[k, i, c] * dz[c]
            dy[k, i, 0] = acc
        a_psi[k, 0], a_l[k, 0] = s2 * d_psi[k, 0], s2 * d_l[k, 0]
        acc_p, acc_l = a_psi[k, 0], a_l[k, 0]
        for c in range(6):
            acc_p += spsi[k, c] * dz[c]
            acc_l += sl[k, c] * dz[c]
        dpsi[k, 0], dl[k, 0] = acc_p, acc_l
    zp[:] = dz
    cur, trl = current_and_trial(wk)
    if not largest_rotation(dy, dpsi, dl, cur[1][3], 0) <= max_rot:
        return False
    tip_poses_into(g_old, tip_local, cur[1][2], trl[4])
    tip_old = trl[4].copy()
    for k in range(r):
        wk[17][4, k] = cur[1][2][k] + dpsi[k, 0]
    tip_poses_into(g_new, tip_local, wk[17][4], trl[4])
    retract_strain_into(base, cur[1], dy, dpsi, dl, 1.0, 0, tip_old, trl[4].copy(), cur[0], trl[1], wk[17], wk[29])
    flags[2] = 1 - flags[2]
    return True
