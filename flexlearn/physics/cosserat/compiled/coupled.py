"""The implicit step's solve with contact between rods in the fused kernel: each touching element pair's
``h J C Jᵀ`` (eq. (5) of :mod:`flexlearn.physics.cosserat.implicit`) joins nodes of two rods, or far apart on one,
which the rods' own block-tridiagonal factorisations cannot hold; :func:`coupled_solve` takes it exactly by the
Woodbury identity, as :func:`flexlearn.physics.cosserat.implicit.filter_forces` does with dense tensors (the
reference it is tested against: tests/physics/cosserat/test_fused_contact.py).

The points come from the buffer of :func:`flexlearn.physics.cosserat.compiled.contact.point_buffer` (floats δ, n,
w (:data:`SHARES`), k, c, a, s; ints the nodes, the flag index, held, rod–rod; the columns named below), a rod–rod
point's ``h C = a n nᵀ + s (I − n nᵀ)``. SI units.
"""

from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.cosserat.compiled.common import njit
from flexlearn.physics.cosserat.compiled.implicit import (
    backward,
    factor_assembled,
    forward_columns,
    solve_assembled,
    substitute,
    write_filtered,
)

SHARES = 8
"""The most node shares of one contact point: a rod–rod pair's two stencils of four (an obstacle's point has two)."""
WEIGHTS, LAW_K, LAW_C, PAIR_A, PAIR_S = 4, 4 + SHARES, 5 + SHARES, 6 + SHARES, 7 + SHARES  # float columns
FLAG, HELD, PAIR = SHARES, SHARES + 1, SHARES + 2  # int columns after the nodes
POINT_FLOATS, POINT_INTS = 8 + SHARES, 3 + SHARES


@njit(cache=True, error_model="numpy")
def _any_coupled(points):
    """Whether the buffer holds a held rod–rod point."""
    ints = points[1]
    for at in range(points[2][0]):
        if ints[at, HELD] * ints[at, PAIR] == 1:
            return True
    return False


@njit(cache=True, error_model="numpy")
def _columns(points):
    """The columns of U (:func:`coupled_solve`) of the held rod–rod points: each point's ``h C = a n nᵀ + s (I −
    n nᵀ)`` is diagonal in the basis (n, t₁, t₂), so it gives the column along n with ĉ = a and, where friction acts
    (s > 0), two along t₁, t₂ with ĉ = s. Returns the columns' rows in the buffer (m,), directions (m, 3), ĉ (m,)."""
    floats, ints = points[0], points[1]
    m = 0
    for at in range(points[2][0]):
        if ints[at, HELD] * ints[at, PAIR] == 1:
            m += 1 if floats[at, PAIR_S] == 0.0 else 3
    rows, directions, weights = np.empty(m, dtype=np.int64), np.zeros((m, 3)), np.empty(m)
    k = 0
    for at in range(points[2][0]):
        if ints[at, HELD] * ints[at, PAIR] == 0:
            continue
        n0, n1, n2 = floats[at, 1], floats[at, 2], floats[at, 3]
        rows[k], directions[k, 0], directions[k, 1], directions[k, 2], weights[k] = at, n0, n1, n2, floats[at, PAIR_A]
        k += 1
        if floats[at, PAIR_S] == 0.0:
            continue
        if abs(n0) < 0.9:  # t₁ = n × e_x / |…|, else n × e_y
            t0, t1, t2 = 0.0, n2, -n1
        else:
            t0, t1, t2 = -n2, 0.0, n0
        inv = 1.0 / math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        t0, t1, t2 = t0 * inv, t1 * inv, t2 * inv
        for t in ((t0, t1, t2), (n1 * t2 - n2 * t1, n2 * t0 - n0 * t2, n0 * t1 - n1 * t0)):
            rows[k], directions[k, 0], directions[k, 1], directions[k, 2], weights[k] = (
                at,
                t[0],
                t[1],
                t[2],
                floats[at, PAIR_S],
            )
            k += 1
    return rows, directions, weights


@njit(cache=True, error_model="numpy")
def _solve_dense(S, r):
    """``S⁻¹ r`` by Gaussian elimination with partial pivoting (S (m, m) and r (m,) overwritten)."""
    m = r.shape[0]
    for col in range(m):
        pivot = col
        for row in range(col + 1, m):
            if abs(S[row, col]) > abs(S[pivot, col]):
                pivot = row
        for k in range(m):
            S[col, k], S[pivot, k] = S[pivot, k], S[col, k]
        r[col], r[pivot] = r[pivot], r[col]
        for row in range(col + 1, m):
            factor = S[row, col] / S[col, col]
            for k in range(col, m):
                S[row, k] -= factor * S[col, k]
            r[row] -= factor * r[col]
    for col in range(m - 1, -1, -1):
        t = r[col]
        for k in range(col + 1, m):
            t -= S[col, k] * r[k]
        r[col] = t / S[col, col]
    return r


@njit(cache=True, error_model="numpy")
def _position_columns(points, rows, directions, b, held, Y, first):
    """Rod b's part of the columns of U (:func:`coupled_solve`): column k the node weights of point ``rows[k]`` times
    ``directions[k]`` on the position rows, zero in held directions; ``Y`` (n, 6, m) overwritten, ``first`` (m,) each
    column's first node in rod b (n where it does not touch rod b). Returns the smallest."""
    floats, ints = points[0], points[1]
    n = Y.shape[0]
    Y[:] = 0.0
    for k in range(rows.shape[0]):
        first[k] = n
        for side in range(SHARES):
            node, w = ints[rows[k], side], floats[rows[k], WEIGHTS + side]
            if node // n == b and w != 0.0:
                for j in range(3):
                    Y[node % n, 3 + j, k] += w * directions[k, j] * (1.0 - held[node % n, 3 + j])
                first[k] = min(first[k], node % n)
    return first.min() if rows.shape[0] > 0 else n


@njit(cache=True, error_model="numpy")
def coupled_solve(system, force, torque, work, points):
    """Every rod's forces filtered (:func:`~flexlearn.physics.cosserat.compiled.implicit.solve_assembled`), with the
    held rod–rod points' ``h J C Jᵀ`` taken exactly by the Woodbury identity (as
    :func:`flexlearn.physics.cosserat.implicit.filter_forces`): ``x = x₀ − A⁻¹ U Ĉ (I + Uᵀ A⁻¹ U Ĉ)⁻¹ Uᵀ x₀``, x₀
    each rod's own solve, U the points' columns (:func:`_columns`: one per frictionless point, three with friction).
    With each rod's factor A = L Lᵀ, ``Uᵀ A⁻¹ U = Yᵀ Y`` for ``Y = L⁻¹ U`` (forward sweeps from the columns' first
    node) and ``A⁻¹ U g = L⁻ᵀ (Y g)`` (one backward sweep per rod).

    Args:
        system: ``(mass, inertia, beta_h2, held, damping_c, v, pi, coupling, blocks)`` as in ``solve_assembled``.
        force: World node forces [N], shape (B, n, 3), filtered in place.
        torque: Body node torques [N m], shape (B, n, 3), filtered in place.
        work: ``(y, stiff_D, stiff_W, factor_D, factor_W)``: a work array (n, 6), every rod's β h² K blocks and
            room for every rod's factor (B, n, 6, 6).
        points: The step's contact points (:func:`point_buffer`).

    Returns:
        The rod whose matrix is not positive definite, or −1.
    """
    mass, inertia, beta_h2, held, damping_c, v, pi, coupling, blocks = system
    y, stiff_D, stiff_W, factor_D, factor_W = work
    B, n = force.shape[0], force.shape[1]
    if not _any_coupled(points):  # each rod on its own
        D, W = factor_D[0], factor_W[0]
        for b in range(B):
            D[:] = stiff_D[b]
            W[:] = stiff_W[b]
            if not solve_assembled(mass, inertia, beta_h2, held, b, force[b], torque[b], D, W, y, damping_c, v, pi,
                                   coupling, blocks):  # fmt: skip
                return b
        return -1
    rows, directions, c_hat = _columns(points)
    m = rows.shape[0]
    x0, Y, first = np.empty((B, n, 6)), np.empty((B, n, 6, m)), np.empty((B, m), dtype=np.int64)
    for b in range(B):
        D, W = factor_D[b], factor_W[b]
        D[:] = stiff_D[b]
        W[:] = stiff_W[b]
        if not factor_assembled(mass, inertia, beta_h2, held, b, force[b], torque[b], D, W, y, damping_c, v, pi,
                                coupling, blocks):  # fmt: skip
            return b
        substitute(D, W, y, 0)
        x0[b] = y
        start = _position_columns(points, rows, directions, b, held, Y[b], first[b])
        if start < n:
            forward_columns(D, W, Y[b], start)
    if m > 0:
        g = _woodbury(points, rows, directions, c_hat, held, x0, Y, first)
        for b in range(B):
            y[:] = 0.0
            for a in range(first[b].min(), n):
                for i in range(6):
                    for k in range(m):
                        y[a, i] += Y[b, a, i, k] * g[k]
            backward(factor_D[b], factor_W[b], y)
            x0[b] -= y
    for b in range(B):
        write_filtered(mass, inertia, held, b, force[b], torque[b], x0[b])
    return -1


@njit(cache=True, error_model="numpy")
def _woodbury(points, rows, directions, c_hat, held, x0, Y, first):
    """``g = Ĉ (I + Yᵀ Y Ĉ)⁻¹ Uᵀ x₀`` of :func:`coupled_solve` (Ĉ = diag(ĉ)); x₀ (B, n, 6), Y (B, n, 6, m) zero before
    each column's ``first`` (B, m) node."""
    floats, ints = points[0], points[1]
    B, n, m = Y.shape[0], Y.shape[1], Y.shape[3]
    S, r = np.eye(m), np.zeros(m)
    for k in range(m):  # Uᵀ x₀
        for side in range(SHARES):
            node, w = ints[rows[k], side], floats[rows[k], WEIGHTS + side]
            b, a = node // n, node % n
            for j in range(3):
                r[k] += w * directions[k, j] * (1.0 - held[a, 3 + j]) * x0[b, a, 3 + j]
    for b in range(B):  # I + Yᵀ Y Ĉ
        for a in range(first[b].min(), n):
            for i in range(6):
                for k in range(m):
                    yk = Y[b, a, i, k]
                    if yk != 0.0:
                        for c in range(m):
                            S[k, c] += yk * Y[b, a, i, c] * c_hat[c]
    u = _solve_dense(S, r)
    for k in range(m):
        u[k] *= c_hat[k]
    return u
