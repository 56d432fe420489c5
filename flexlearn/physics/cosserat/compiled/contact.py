"""Contact in the fused kernel: the penalty law with regularised Coulomb friction of
:mod:`flexlearn.physics.cosserat.contact` (obstacles: plane, cylinder, sphere) and
:mod:`flexlearn.physics.cosserat.rod_contact` (rod–rod and self-contact), written as scalar numba loops over the
contact points of every rod at one step, with the implicit step's node blocks ``h C`` (eq. (5) of
:mod:`flexlearn.physics.cosserat.implicit`) of the obstacles' points and the rod–rod pairs' ``h C`` for their exact
solve (:mod:`flexlearn.physics.cosserat.compiled.coupled`), and the active set of
:mod:`flexlearn.physics.cosserat.contact_step`. The torch modules hold the equations and are the reference the kernel
is tested against (tests/physics/cosserat/test_fused_contact.py).

A contact point has a penetration δ, a unit normal n, a relative velocity v and node shares (node, w):

    f_n = max(k δ − (c + h k) v·n, 0),   f_t = −μ f_n v_t / sqrt(|v_t|² + ε²),
    node a: += scale w_a (f_n n + f_t),   obstacle's block a: += scale h (Σ|w|) |w_a| C,
    C = (c + h k) n nᵀ + μ f_n / sqrt(|v_t|² + ε²) (I − n nᵀ)    (where f_n > 0),

a rod–rod pair's ``scale h C`` kept whole for :func:`~flexlearn.physics.cosserat.compiled.coupled.coupled_solve`.

Inputs (built by :func:`contact_arrays`): ``obstacles`` (M, 15) rows ``kind, q, r, k, c, μ, ε, x, a, radius,
length`` (kind :data:`PLANE` x a point and a the normal; :data:`CYLINDER` x the centre, a the axis; :data:`SPHERE`
x the centre); ``pairs`` (P, 3) int64 rows ``(i, j, law)``: the first nodes of two elements in the flattened nodes
(B (N+1)) and the row of ``laws`` (L, 6): ``r, k, c, μ, ε`` and 1.0 for contact on the smooth centreline (0.0: on
the chords). Positions, velocities, forces (B, n, 3), blocks (B, n, 3, 3). SI units.
"""

from __future__ import annotations

import math
from typing import List, NamedTuple, Sequence

import numpy as np
from torch import Tensor

from flexlearn.physics.cosserat.compiled.common import njit
from flexlearn.physics.cosserat.compiled.coupled import (
    FLAG,
    HELD,
    LAW_C,
    LAW_K,
    PAIR,
    PAIR_A,
    PAIR_S,
    POINT_FLOATS,
    POINT_INTS,
    SHARES,
    WEIGHTS,
    coupled_solve,
)
from flexlearn.physics.cosserat.compiled.curve_pairs import (
    NEWTON_ITERATIONS,
    closest_curve_points,
    combine,
    curve_spheres,
    stencil,
)
from flexlearn.physics.cosserat.compiled.implicit import assemble_stiffness
from flexlearn.physics.cosserat.contact import CylinderContact, PenaltyContact, PlaneContact, SphereContact
from flexlearn.physics.cosserat.rod_contact import RodRodContact

PLANE, CYLINDER, SPHERE = 0, 1, 2
MAX_CONTACT_PASSES = 4
"""The most solves of one implicit step's contact active set (:mod:`flexlearn.physics.cosserat.contact_step`; the
last one stands if the set still changes). Here, beside the kernels that read it, so numba's cache sees a change."""
KERNEL_CONTACTS = (PlaneContact, CylinderContact, SphereContact, RodRodContact)
"""The contact loads the kernel runs (exactly these types: a subclass with its own geometry runs on the tensor
path)."""


class ContactArrays(NamedTuple):
    """The contacts of a run as kernel inputs (module docstring)."""

    obstacles: np.ndarray  # (M, 15)
    pairs: np.ndarray  # (P, 3) int64
    laws: np.ndarray  # (L, 5)


def _law_row(contact: PenaltyContact) -> List[float]:
    return [contact.rod_radius, contact.stiffness, contact.damping, contact.friction, contact.slip_velocity]


def contact_arrays(loads: Sequence[object], p: Tensor) -> ContactArrays:
    """The contact loads among ``loads`` as kernel inputs; a rod–rod contact's element pairs from the start state.

    Args:
        loads: the run's loads (those of :data:`KERNEL_CONTACTS` are taken).
        p: (B, N+1, 3) node positions at the start [m] (a rod–rod contact fixes its exclusion from them).

    Returns:
        The :class:`ContactArrays`.
    """
    obstacles: List[List[float]] = []
    pairs: List[np.ndarray] = []
    laws: List[List[float]] = []
    for load in loads:
        if isinstance(load, RodRodContact):
            ni, nj = load.element_pairs(p)
            law = np.full(ni.shape[0], len(laws), dtype=np.int64)
            pairs.append(np.stack([ni.cpu().numpy().astype(np.int64), nj.cpu().numpy().astype(np.int64), law], 1))
            laws.append(_law_row(load) + [1.0 if load.smooth else 0.0])
        elif isinstance(load, (PlaneContact, CylinderContact, SphereContact)):
            row = [0.0, float(load.points_per_element)] + _law_row(load)
            if isinstance(load, PlaneContact):
                row[0] = PLANE
                row += load.point.tolist() + load.normal.tolist() + [0.0, 0.0]
            elif isinstance(load, CylinderContact):
                row[0] = CYLINDER
                row += load.center.tolist() + load.axis.tolist() + [load.radius, load.length]
            else:
                row[0] = SPHERE
                row += load.center.tolist() + [0.0, 0.0, 0.0, load.radius, 0.0]
            obstacles.append(row)
    return ContactArrays(
        np.array(obstacles, dtype=np.float64).reshape(-1, 15),
        np.concatenate(pairs).reshape(-1, 3) if pairs else np.zeros((0, 3), dtype=np.int64),
        np.array(laws, dtype=np.float64).reshape(-1, 6),
    )


@njit(cache=True, error_model="numpy")
def _apply_point(depth, n, v, law, h, scale, nodes, weights, count, force, blocks, flag, coupled):
    """Add one point's forces (and, when h > 0, its blocks) to its ``count`` shares ``(nodes, weights)``: flattened
    node indices into ``force`` (B, n, 3) and ``blocks`` (B, n, 3, 3); ``law`` = (r, k, c, μ, ε) from index 1.
    ``flag``: −1 the clipped law, 1 held (its force unclipped), 0 released. A rod–rod point (``coupled`` of length
    2, not 0) writes there its ``scale h C = a n nᵀ + s (I − n nᵀ)`` as ``(a, s)`` instead of node blocks (the step
    takes it exactly). Returns whether it was held."""
    k, c, mu, eps = law[1], law[2], law[3], law[4]
    vn = v[0] * n[0] + v[1] * n[1] + v[2] * n[2]
    damping = c + h * k
    fn = k * depth - damping * vn if depth > 0.0 else 0.0
    if not (fn > 0.0 if flag < 0 else (flag == 1 and depth > 0.0)):
        return False
    t0, t1, t2 = v[0] - vn * n[0], v[1] - vn * n[1], v[2] - vn * n[2]
    slip = mu * max(fn, 0.0) / math.sqrt(t0 * t0 + t1 * t1 + t2 * t2 + eps * eps)
    f = (fn * n[0] - slip * t0, fn * n[1] - slip * t1, fn * n[2] - slip * t2)
    total = 0.0
    for a in range(count):
        total += abs(weights[a])
    per_node = force.shape[1]
    if coupled.shape[0] == 2:
        coupled[0], coupled[1] = scale * h * damping, scale * h * slip
    for a in range(count):
        b, node, w = nodes[a] // per_node, nodes[a] % per_node, weights[a]
        for r in range(3):
            force[b, node, r] += scale * w * f[r]
        if h > 0.0 and coupled.shape[0] == 0:
            g = total * abs(w) * scale * h
            for r in range(3):
                for col in range(3):
                    eye = 1.0 if r == col else 0.0
                    blocks[b, node, r, col] += g * (damping * n[r] * n[col] + slip * (eye - n[r] * n[col]))
    return True


@njit(cache=True, error_model="numpy")
def _surface(row, x, n):
    """Signed distance of point x to obstacle ``row`` (positive outside; inf beyond a cylinder's ends) and its
    outward unit normal, written into n."""
    kind = int(row[0])
    if kind == PLANE:
        n[0], n[1], n[2] = row[10], row[11], row[12]
        return (x[0] - row[7]) * n[0] + (x[1] - row[8]) * n[1] + (x[2] - row[9]) * n[2]
    r0, r1, r2 = x[0] - row[7], x[1] - row[8], x[2] - row[9]
    if kind == SPHERE:
        dist = math.sqrt(r0 * r0 + r1 * r1 + r2 * r2)
        inv = 1.0 / max(dist, 1e-12)
        n[0], n[1], n[2] = r0 * inv, r1 * inv, r2 * inv
        return dist - row[13]
    along = r0 * row[10] + r1 * row[11] + r2 * row[12]
    r0, r1, r2 = r0 - along * row[10], r1 - along * row[11], r2 - along * row[12]
    radial = math.sqrt(r0 * r0 + r1 * r1 + r2 * r2)
    inv = 1.0 / max(radial, 1e-12)
    n[0], n[1], n[2] = r0 * inv, r1 * inv, r2 * inv
    return radial - row[13] if abs(along) <= 0.5 * row[14] else np.inf


# Columns of the point buffer (:func:`point_buffer`; named in :mod:`~flexlearn.physics.cosserat.compiled.coupled`):
# floats δ, n (3), w (SHARES), k, c and a rod–rod point's ``h C = a n nᵀ + s (I − n nᵀ)`` as (a, s); ints the
# SHARES nodes, the flag index, held (0/1), rod–rod (0/1). An obstacle's point fills two shares (w, nodes) and not
# the pair's (a, s); a rod–rod point all eight (its two curves' stencils, :mod:`.curve_pairs`).


@njit(cache=True)
def point_buffer(n_points):
    """The buffer of one step's penetrating contact points: floats (P, POINT_FLOATS), ints (P, POINT_INTS), count (1,)
    int64.

    Args:
        n_points: P, :func:`n_contact_points`.

    Returns:
        ``(floats, ints, count)``.
    """
    floats, ints = np.empty((n_points, POINT_FLOATS)), np.empty((n_points, POINT_INTS), dtype=np.int64)
    return floats, ints, np.zeros(1, dtype=np.int64)


@njit(cache=True, inline="always", error_model="numpy")
def _keep_point(points, k, c, depth, normal, nodes, weights, count, idx, held, coupled):
    """Write a penetrating point (``count`` shares; law k, c; a rod–rod point's ``coupled`` = (a, s) of its h C) into
    the buffer ``points`` (:data:`POINT_FLOATS`) at its next free row, ``points[2][0]``."""
    at = points[2][0]
    floats, ints = points[0], points[1]
    floats[at, 0], floats[at, 1], floats[at, 2], floats[at, 3] = depth, normal[0], normal[1], normal[2]
    pair = coupled.shape[0] == 2
    for side in range(SHARES if pair else 2):  # an obstacle's point: two shares, the second zero at a node
        floats[at, WEIGHTS + side] = weights[side] if side < count else 0.0
        ints[at, side] = nodes[side] if side < count else nodes[0]
    floats[at, LAW_K], floats[at, LAW_C] = k, c
    if pair:
        floats[at, PAIR_A], floats[at, PAIR_S] = coupled[0], coupled[1]
    ints[at, FLAG], ints[at, HELD], ints[at, PAIR] = idx, 1 if held else 0, 1 if pair else 0
    points[2][0] = at + 1


@njit(cache=True, error_model="numpy")
def _obstacle_point(row, b, e, s, h, p, v, force, blocks, work, flags, idx, points):
    """The point at s ∈ [0, 1] of element e of rod b against obstacle ``row`` (its weights (1 − s, s), scale 1/q),
    kept in ``points`` when it penetrates; ``work`` = (x, vp, normal, nodes, weights, (0,) placeholder)."""
    x, vp, normal, nodes, weights = work[0], work[1], work[2], work[3], work[4]
    for r in range(3):
        x[r] = (1.0 - s) * p[b, e, r] + s * p[b, e + 1, r]
        vp[r] = (1.0 - s) * v[b, e, r] + s * v[b, e + 1, r]
    depth = max(row[2] - _surface(row, x, normal), 0.0)
    nodes[0], nodes[1] = b * p.shape[1] + e, b * p.shape[1] + e + 1
    weights[0], weights[1] = 1.0 - s, s
    none = work[5]
    held = _apply_point(depth, normal, vp, row[2:7], h, 1.0 / row[1], nodes, weights, 2, force, blocks, flags[idx],
                        none)  # fmt: skip
    if depth > 0.0:
        _keep_point(points, row[3], row[4], depth, normal, nodes, weights, 2, idx, held, none)


def n_contact_points(obstacles: np.ndarray, pairs: np.ndarray, n_rods: int, n_nodes: int) -> int:
    """How many contact points the kernel visits per step (the length of ``flags``): q = 1 obstacles' nodes, the
    others' q points per element and the last node, of every rod; then the element pairs.

    Args:
        obstacles: The obstacles, shape (M, 15).
        pairs: The element pairs, shape (P, 3).
        n_rods: B.
        n_nodes: n = N + 1.

    Returns:
        The count.
    """
    per_rod = [n_nodes if int(q) == 1 else (n_nodes - 1) * int(q) + 1 for q in obstacles[:, 1]]
    return n_rods * sum(per_rod) + pairs.shape[0]


@njit(cache=True, error_model="numpy")
def add_obstacle_contacts(obstacles, h, p, v, force, blocks, flags, points):
    """Every obstacle's forces on every rod, added to ``force``, and their blocks to ``blocks`` when h > 0: the nodes
    (q = 1), or q points per element at s = j/q and the last node. The penetrating points are kept in ``points``
    for the active-set check (:func:`switch_points`).

    Args:
        obstacles: The obstacles, shape (M, 15) (module docstring).
        h: The implicit step [s] (its numerical damping h k and blocks h C); 0 for the LGVI.
        p: Node positions [m], shape (B, n, 3).
        v: Node velocities [m/s], shape (B, n, 3).
        force: World node forces [N], shape (B, n, 3), added to.
        blocks: Position blocks h C [kg], shape (B, n, 3, 3), added to (when h > 0).
        flags: Each point's active-set flag (−1 the clipped law, 1 held, 0 released), shape
            (:func:`n_contact_points`,) int64.
        points: The buffer of penetrating points (floats (P, 8), ints (P, 4), count (1,) int64, reset here).
    """
    B, n_nodes = p.shape[0], p.shape[1]
    work = (np.empty(3), np.empty(3), np.empty(3), np.empty(2, dtype=np.int64), np.empty(2), np.empty(0))
    normal, nodes, weights, none = work[2], work[3], work[4], work[5]
    points[2][0] = 0
    idx = 0
    for o in range(obstacles.shape[0]):
        row = obstacles[o]
        q = int(row[1])
        for b in range(B):
            if q == 1:
                for a in range(n_nodes):
                    depth = max(row[2] - _surface(row, p[b, a], normal), 0.0)
                    nodes[0], weights[0] = b * n_nodes + a, 1.0
                    held = _apply_point(
                        depth, normal, v[b, a], row[2:7], h, 1.0, nodes, weights, 1, force, blocks, flags[idx], none
                    )
                    if depth > 0.0:
                        _keep_point(points, row[3], row[4], depth, normal, nodes, weights, 1, idx, held, none)
                    idx += 1
                continue
            for e in range(n_nodes - 1):
                for j in range(q):
                    _obstacle_point(row, b, e, j / q, h, p, v, force, blocks, work, flags, idx, points)
                    idx += 1
            _obstacle_point(row, b, n_nodes - 2, 1.0, h, p, v, force, blocks, work, flags, idx, points)
            idx += 1


@njit(cache=True, error_model="numpy")
def switch_points(points, h, v_next, flags):
    """The active-set check of the kept points (:mod:`flexlearn.physics.cosserat.contact_step`): each flag becomes
    whether ``k δ − (c + h k) v_n⁺`` pushes at the step's new node velocities.

    Args:
        points: The buffer the contacts filled (:func:`point_buffer`).
        h: The implicit step [s].
        v_next: The step's new node velocities [m/s], shape (B, n, 3).
        flags: The points' active-set flags, changed in place.

    Returns:
        How many points changed from held to released or back.
    """
    floats, ints = points[0], points[1]
    per_node = v_next.shape[1]
    changed = 0
    for at in range(points[2][0]):
        vn = 0.0
        for side in range(SHARES if ints[at, PAIR] == 1 else 2):
            node, w = ints[at, side], floats[at, WEIGHTS + side]
            b, a = node // per_node, node % per_node
            vn += w * (
                v_next[b, a, 0] * floats[at, 1] + v_next[b, a, 1] * floats[at, 2] + v_next[b, a, 2] * floats[at, 3]
            )
        k, c = floats[at, LAW_K], floats[at, LAW_C]
        want = k * floats[at, 0] - (c + h * k) * vn > 0.0
        flags[ints[at, FLAG]] = 1 if want else 0
        if want != (ints[at, HELD] == 1):
            changed += 1
    return changed


@njit(cache=True, inline="always", error_model="numpy")
def _apart(spheres, bi, ai, bj, aj, reach):
    """True when elements (bi, ai) and (bj, aj) cannot come within ``reach`` of each other: their midpoints are
    further apart than their half lengths and ``reach`` (each segment lies in the ball of its half length about its
    midpoint, :func:`_element_spheres`). An exact cull: a pair it keeps is tested as before."""
    d2 = 0.0
    for r in range(3):
        d = spheres[bi, ai, r] - spheres[bj, aj, r]
        d2 += d * d
    bound = spheres[bi, ai, 3] + spheres[bj, aj, 3] + reach
    return d2 > bound * bound


@njit(cache=True, inline="always", error_model="numpy")
def _chord_closest(p, bi, ai, bj, aj):
    """The closest points ``(s, t)`` of the chords of elements (bi, ai) and (bj, aj) (Ericson 2005, §5.1.9, as
    :func:`flexlearn.physics.cosserat.rod_contact.closest_points`)."""
    a = c = b = e = f = 0.0
    for r in range(3):
        d1 = p[bi, ai + 1, r] - p[bi, ai, r]
        d2 = p[bj, aj + 1, r] - p[bj, aj, r]
        rr = p[bi, ai, r] - p[bj, aj, r]
        a += d1 * d1
        e += d2 * d2
        b += d1 * d2
        c += d1 * rr
        f += d2 * rr
    denom = a * e - b * b
    s = 0.0
    if denom > 1e-14 * max(a * e, 1e-300):
        s = min(max((b * f - c * e) / max(denom, 1e-300), 0.0), 1.0)
    t = (b * s + f) / e
    if t < 0.0:
        s = min(max(-c / a, 0.0), 1.0)
    elif t > 1.0:
        s = min(max((b - c) / a, 0.0), 1.0)
    return s, min(max(t, 0.0), 1.0)


@njit(cache=True, error_model="numpy")
def add_rod_rod_contacts(pairs, laws, h, p, v, force, flags, points):
    """Every element pair's forces (the closest points of the elements' chords or, for a smooth law, of their curves:
    :func:`.curve_pairs.closest_curve_points`, as :class:`flexlearn.physics.cosserat.rod_contact.RodRodContact`),
    ``+f`` on the first element's stencil and ``−f`` on the second's, added to ``force``; the touching pairs kept in
    ``points`` with their ``h C`` (the step takes each pair's ``h J C Jᵀ`` exactly: :func:`coupled_solve`).

    Args:
        pairs: The element pairs (i, j, law), shape (P, 3) int64 (module docstring).
        laws: The contacts' laws (r, k, c, μ, ε, smooth), shape (L, 6).
        h: The implicit step [s]; 0 for the LGVI.
        p: Node positions [m], shape (B, n, 3).
        v: Node velocities [m/s], shape (B, n, 3).
        force: World node forces [N], shape (B, n, 3), added to.
        flags: The points' active-set flags (the pairs' after the obstacles' points).
        points: The buffer of penetrating points (:func:`point_buffer`), appended to.
    """
    n_nodes = p.shape[1]
    gap, vr, vj = np.empty(3), np.empty(3), np.empty(3)
    nodes, weights, coupled = np.empty(SHARES, dtype=np.int64), np.empty(SHARES), np.zeros(2)
    ni, nj, flags_i, flags_j = np.empty(4, dtype=np.int64), np.empty(4, dtype=np.int64), np.empty(2), np.empty(2)
    work = (np.empty((3, 4)), np.empty((3, 4)), np.empty((6, 3)))
    offset, no_blocks = flags.shape[0] - pairs.shape[0], np.empty((0, 0, 3, 3))
    spheres = curve_spheres(p) if pairs.shape[0] > 0 else np.empty((0, 0, 4))
    for q in range(pairs.shape[0]):
        i, j, law = pairs[q, 0], pairs[q, 1], laws[pairs[q, 2]]
        bi, ai, bj, aj = i // n_nodes, i % n_nodes, j // n_nodes, j % n_nodes
        if _apart(spheres, bi, ai, bj, aj, 2.0 * law[0]):
            continue
        s, t = _chord_closest(p, bi, ai, bj, aj)
        flags_i[0], flags_i[1] = stencil(ai, n_nodes - 1, ni)
        flags_j[0], flags_j[1] = stencil(aj, n_nodes - 1, nj)
        smooth = law[5] != 0.0
        # on the chords: both tangents the chord, eq. (1) the straight segment, (s, t) already its closest points
        if not smooth:
            flags_i[:] = 1.0
            flags_j[:] = 1.0
        s, t = closest_curve_points(p, bi, ni, flags_i, bj, nj, flags_j, s, t, work, NEWTON_ITERATIONS if smooth else 0)
        wi, wj, vecs = work[0][0], work[1][0], work[2]
        for r in range(3):
            gap[r] = vecs[0, r] - vecs[1, r]
        dist = math.sqrt(gap[0] * gap[0] + gap[1] * gap[1] + gap[2] * gap[2])
        depth = 2.0 * law[0] - dist
        if not depth > 0.0:
            continue
        inv = 1.0 / max(dist, 1e-300)
        for r in range(3):
            gap[r] *= inv
        combine(v, bi, ni, wi, vr)
        combine(v, bj, nj, wj, vj)
        for k in range(4):
            nodes[k], nodes[4 + k] = bi * n_nodes + ni[k], bj * n_nodes + nj[k]
            weights[k], weights[4 + k] = wi[k], -wj[k]
        for r in range(3):
            vr[r] -= vj[r]
        held = _apply_point(depth, gap, vr, law, h, 1.0, nodes, weights, SHARES, force, no_blocks, flags[offset + q],
                            coupled)  # fmt: skip
        _keep_point(points, law[1], law[2], depth, gap, nodes, weights, SHARES, offset + q, held, coupled)


@njit(cache=True, error_model="numpy")
def contact_passes(R, p, v, pi, mass, inertia, C1, C2, l, strain_code, beta_h2, damping_c, held, coupling, h,
                    contacts, force, torque, blocks, work, flags):  # fmt: skip
    """The contacts' forces and blocks added to ``force``, then, on the implicit step, every rod's forces filtered
    with the contacts' active set of :mod:`flexlearn.physics.cosserat.contact_step` (up to
    :data:`MAX_CONTACT_PASSES` solves; the rod–rod pairs' matrix exact: :func:`coupled_solve`). Called by the step loop
    (:func:`flexlearn.physics.cosserat.compiled.lgvi.run`), whose arguments these are.

    Args:
        R: Node rotations, shape (B, n, 3, 3).
        p: Node positions [m], shape (B, n, 3).
        v: Half-step node velocities [m/s], shape (B, n, 3).
        pi: Node momenta, shape (B, n, 3).
        mass: Node masses [kg], shape (B, n).
        inertia: Node inertias [kg m²], shape (B, n, 3).
        C1: Shear/extension stiffness [N], shape (B, N, 3).
        C2: Bending/torsion stiffness [N m²], shape (B, N, 3).
        l: Element rest lengths [m], shape (B, N).
        strain_code: The strain model's code.
        beta_h2: β h² [s²] of the implicit step (0 for the LGVI: the forces only).
        damping_c: Its numerical damping c [s].
        held: The supports' held directions.
        coupling: The consistent mass's coupling [kg], shape (B, N).
        h: The step [s].
        contacts: ``(obstacles, pairs, laws)`` (module docstring).
        force: World node forces [N], shape (B, n, 3): in, the other loads'; out, filtered.
        torque: Body node torques [N m], shape (B, n, 3): the same.
        blocks: Work array of the blocks, shape (B, n, 3, 3).
        work: ``(y, G, Ke)`` of the filter, the force and torque (B, n, 3) before the contacts and after the
            first solve, the new velocities (B, n, 3), the buffer of :func:`point_buffer`, the blocks of β h² K of
            every rod (B, n, 6, 6) twice and room for every rod's factor (the same shapes).
        flags: The points' active-set flags, shape (:func:`n_contact_points`,) int64.

    Returns:
        The rod whose filter failed, or −1.
    """
    obstacles, pairs, laws = contacts
    y, G, Ke, base_f, base_t, first_f, first_t, v_next, points, stiff_D, stiff_W, factor_D, factor_W = work
    B, n = force.shape[0], force.shape[1]
    law_h = h if beta_h2 > 0.0 else 0.0
    base_f[:] = force
    base_t[:] = torque
    flags[:] = -1
    for attempt in range(MAX_CONTACT_PASSES):
        if attempt > 0:
            force[:] = base_f
            torque[:] = base_t
        blocks[:] = 0.0
        add_obstacle_contacts(obstacles, law_h, p, v, force, blocks, flags, points)
        add_rod_rod_contacts(pairs, laws, law_h, p, v, force, flags, points)
        if beta_h2 == 0.0:
            return -1
        if attempt == 0:  # β h² K once per step: only the contacts change between the solves
            for b in range(B):
                assemble_stiffness(R, p, C1, C2, l, strain_code, beta_h2, b, stiff_D[b], stiff_W[b], G, Ke)
        failed = coupled_solve((mass, inertia, beta_h2, held, damping_c, v, pi, coupling, blocks), force, torque,
                               (y, stiff_D, stiff_W, factor_D, factor_W), points)  # fmt: skip
        if failed >= 0:
            return failed
        if attempt == 0:
            first_f[:] = force
            first_t[:] = torque
        for b in range(B):
            for a in range(n):
                for r in range(3):
                    v_next[b, a, r] = v[b, a, r] + h * force[b, a, r] / mass[b, a]
        if switch_points(points, h, v_next, flags) == 0:
            return -1
    force[:] = first_f  # no consistent set found: the first solve's clipped law
    torque[:] = first_t
    return -1
