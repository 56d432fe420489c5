"""Warm starts for a batch of independent poses: a local polynomial fit of the solutions already found.

For a new platform pose ``g`` and the poses ``g_i`` solved so far, the K nearest (distance² = |p_i − p|² +
L̄² |R_i − R|²_F / 2, L̄ [m] a length that puts rotations in metres: :meth:`PoseStatics.solve_batch` takes the
mean radius of the platform attachments, the arc a rotation moves them by) give displacement coordinates
``x_i = [L̄ φ_i; ρ_i]`` with ``[φ_i; ρ_i] = log(g⁻¹ g_i)``, projected on the subspace they span (m ≤ 6
directions: the eigenvectors of Σ x_i x_iᵀ above EIG_REL of the largest; a batch of positions at one orientation
spans 3) and scaled to unit radius. Each stored solution quantity — element twists Ω, slopes β, tip twists ψ,
lengths L — is fitted by a polynomial of degree ≤ 3 in these coordinates (degree 2 when m > 3, so that the
basis stays ≤ 28 monomials), least squares over K = ⌈NEIGHBOUR_RATIO × basis size⌉ neighbours, and evaluated at
``g`` (the origin): the warm start is ``Σ_i w_i x_i`` with weights ``w = Q R⁻ᵀ e₀`` (A = QR, A (K, M) the
monomials of the neighbours, e₀ the constant's coefficient). Its nodes are rebuilt from Ω and closed onto the
tips at ``g`` (:func:`~flexlearn.physics.lse.length_actuated.closure.rebuild_nodes_into`), as for the path
extrapolation.

On the CSG batch of ``scripts/bench_csg.py`` (1,000 random positions, visited in nearest-neighbour order) the
fit's first scaled residual is ≈ 0.05 against ≈ 1.6 for the sensitivity predictor from the previous pose, and
Newton then needs ≈ 1.1 corrections per pose instead of ≈ 2.7 (``scripts/bench_csg_budget.py``).
"""

from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.lse.compiled.elements import refresh_pose_cache
from flexlearn.physics.lse.compiled.linalg import njit, njit_leaf
from flexlearn.physics.lse.length_actuated.closure import rebuild_nodes_into
from flexlearn.physics.lse.length_actuated.geometry import (
    combine_solutions_into,
    log_se3_into,
    record_solution_into,
    rel_pose_into,
    tip_poses_into,
)

refresh_pose_cache()  # before any kernel of this file loads its cache

__all__ = ["MAX_NEIGHBOURS", "fit_neighbours", "fit_workspace", "fit_start_into", "store_solution"]

EIG_REL = 1e-10  # eigenvalues of the displacement scatter below this fraction of the largest: no direction
NEIGHBOUR_RATIO = 1.2  # neighbours per monomial of the fit
MAX_NEIGHBOURS = 34  # ⌈1.2 × 28⌉: degree 2 in six directions
RANK_REL = 1e-9  # a fit whose QR pivot falls below this fraction of the first is rank deficient: not used


@njit(cache=True)
def fit_workspace(capacity, r, n):
    """Stored solutions of a batch (capacity poses, R rods of N elements): 0 poses (P, 4, 4), 1 Ω (P, R, N, 6),
    2 β (P, R, N, 6), 3 ψ (P, R), 4 L (P, R); 5 neighbour indices (MAX_NEIGHBOURS,) and 6 their distances;
    7 coordinates (MAX_NEIGHBOURS, 6); 8 monomials / Q (MAX_NEIGHBOURS, 28); 9 R (28, 28); 10 weights
    (MAX_NEIGHBOURS,); 11 scratch (3, 6, 6): scatter, eigenvectors; 12 scratch (3, 28): R⁻ᵀ e₀,
    a twist and the log's coefficients; 13 relative pose (4, 4).

    Args:
        capacity: Solutions stored at most P.
        r: Number of rods R.
        n: Number of elements per rod N.
    """
    m = MAX_NEIGHBOURS
    return (
        np.zeros((capacity, 4, 4)),
        np.zeros((capacity, r, n, 6)),
        np.zeros((capacity, r, n, 6)),
        np.zeros((capacity, r)),
        np.zeros((capacity, r)),
        np.zeros(m, dtype=np.int64),
        np.zeros(m),
        np.zeros((m, 6)),
        np.zeros((m, 28)),
        np.zeros((28, 28)),
        np.zeros(m),
        np.zeros((3, 6, 6)),
        np.zeros((3, 28)),
        np.zeros((4, 4)),
    )


@njit(cache=True)
def store_solution(fw, s, g, parts, state):
    """Store the solution ``state`` at ``g`` as entry ``s``: Ω from its element pieces (``parts`` of the residual
    pass at the solution), β, ψ, L.

    Args:
        fw: The arrays of :func:`fit_workspace`.
        s: Storage slot (< capacity).
        g: Platform pose (4, 4) of the solution.
        parts: Element pieces of the residual pass at the solution.
        state: The solution (g_int, beta, psi, lengths).
    """
    fw[0][s] = g
    record_solution_into(parts, state, fw[1][s], fw[2][s], fw[3][s], fw[4][s])


@njit_leaf
def _nearest(poses, count, g, lbar, k, idx, dist):
    """Indices of the ``k`` poses among ``poses[:count]`` nearest to ``g`` into ``idx`` (nearest first), their
    squared distances into ``dist`` (insertion into a sorted list of k)."""
    filled = 0
    for i in range(count):
        d = 0.0
        for a in range(3):
            d += (poses[i, a, 3] - g[a, 3]) ** 2
            for b in range(3):
                d += 0.5 * lbar * lbar * (poses[i, a, b] - g[a, b]) ** 2
        if filled == k and not d < dist[k - 1]:
            continue
        j = filled if filled < k else k - 1
        while j > 0 and dist[j - 1] > d:
            dist[j], idx[j] = dist[j - 1], idx[j - 1]
            j -= 1
        dist[j], idx[j] = d, i
        if filled < k:
            filled += 1


@njit_leaf
def _jacobi_eigen(a, v):
    """Eigen-decomposition of the symmetric ``a`` (6, 6) in place (cyclic Jacobi): eigenvalues on its diagonal,
    eigenvectors in the columns of ``v``."""
    for i in range(6):
        for j in range(6):
            v[i, j] = 1.0 if i == j else 0.0
    for _sweep in range(30):
        off = 0.0
        for i in range(6):
            for j in range(i + 1, 6):
                off += a[i, j] * a[i, j]
        if off <= 1e-30 * (a[0, 0] ** 2 + a[1, 1] ** 2 + a[2, 2] ** 2 + a[3, 3] ** 2 + a[4, 4] ** 2 + a[5, 5] ** 2):
            return
        for p in range(6):
            for q in range(p + 1, 6):
                if a[p, q] == 0.0:
                    continue
                theta = (a[q, q] - a[p, p]) / (2.0 * a[p, q])
                t = (1.0 if theta >= 0 else -1.0) / (abs(theta) + math.sqrt(theta * theta + 1.0))
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                for i in range(6):
                    aip, aiq = a[i, p], a[i, q]
                    a[i, p], a[i, q] = c * aip - s * aiq, s * aip + c * aiq
                for i in range(6):
                    api, aqi = a[p, i], a[q, i]
                    a[p, i], a[q, i] = c * api - s * aqi, s * api + c * aqi
                for i in range(6):
                    vip, viq = v[i, p], v[i, q]
                    v[i, p], v[i, q] = c * vip - s * viq, s * vip + c * viq


@njit_leaf
def _monomials(x, k, m, degree, a):
    """Monomials up to ``degree`` of the first ``m`` coordinates of the k rows of ``x`` into ``a[:k]``: 1, x_j,
    x_j x_l (j ≤ l), x_j x_l x_q (j ≤ l ≤ q). Returns the column count."""
    for i in range(k):
        c = 0
        a[i, c] = 1.0
        c += 1
        for j in range(m if degree >= 1 else 0):
            a[i, c] = x[i, j]
            c += 1
        for j in range(m if degree >= 2 else 0):
            for ll in range(j, m):
                a[i, c] = x[i, j] * x[i, ll]
                c += 1
        for j in range(m if degree >= 3 else 0):
            for ll in range(j, m):
                for q in range(ll, m):
                    a[i, c] = x[i, j] * x[i, ll] * x[i, q]
                    c += 1
    return _basis_size(m, degree)


@njit_leaf
def _value_weights(a, k, cols, rr, v, w):
    """Least-squares weights of the value at the origin: ``w = Q R⁻ᵀ e₀`` (k,) for ``a[:k, :cols] = QR``
    (modified Gram–Schmidt, twice; Q overwrites ``a``; ``v`` (cols,) receives R⁻ᵀ e₀). False when rank
    deficient (a pivot below RANK_REL of the first)."""
    for j in range(cols):
        for i in range(j):
            rr[i, j] = 0.0
        for _ in range(2):
            for i in range(j):
                dot = 0.0
                for t in range(k):
                    dot += a[t, i] * a[t, j]
                rr[i, j] += dot
                for t in range(k):
                    a[t, j] -= dot * a[t, i]
        nrm = 0.0
        for t in range(k):
            nrm += a[t, j] * a[t, j]
        nrm = math.sqrt(nrm)
        if not nrm > RANK_REL * (rr[0, 0] if j > 0 else 0.0):
            return False
        rr[j, j] = nrm
        for t in range(k):
            a[t, j] /= nrm
    for t in range(k):
        w[t] = 0.0
    for j in range(cols):  # Rᵀ v = e₀ by forward substitution, then w = Q v
        acc = 1.0 if j == 0 else 0.0
        for i in range(j):
            acc -= rr[i, j] * v[i]
        v[j] = acc / rr[j, j]
        for t in range(k):
            w[t] += a[t, j] * v[j]
    return True


@njit_leaf
def _basis_size(m, degree):
    return 1 + m + (m * (m + 1) // 2 if degree >= 2 else 0) + (m * (m + 1) * (m + 2) // 6 if degree >= 3 else 0)


@njit_leaf
def fit_neighbours(fw, count, g, lbar):
    """Fit weights at the pose ``g`` (4, 4) over the first ``count`` stored solutions of ``fw`` (module
    docstring): the neighbour indices in ``fw[5][:k]``, their weights in ``fw[10][:k]``. Returns k, or 0 when
    there are too few solutions or the fit is rank deficient (no warm start from it then).

    Args:
        fw: The arrays of :func:`fit_workspace`.
        count: Stored solutions to search.
        g: Platform pose (4, 4) to start at.
        lbar: Length L̄ [m] that scales rotations in the distances.
    """
    idx, dist, x, a, rr, w = fw[5], fw[6], fw[7], fw[8], fw[9], fw[10]
    scat, vec, rel = fw[11][0], fw[11][1], fw[13]
    v, tw, co = fw[12][0], fw[12][1], fw[12][2]
    big = MAX_NEIGHBOURS
    if count < big:
        return 0
    _nearest(fw[0], count, g, lbar, big, idx, dist)
    for i in range(big):
        rel_pose_into(g, fw[0][idx[i]], rel)
        log_se3_into(rel, tw, co)
        for j in range(3):
            x[i, j] = lbar * tw[j]
            x[i, 3 + j] = tw[3 + j]
    for p in range(6):  # the scatter of the displacements and its eigenvectors
        for q in range(6):
            acc = 0.0
            for i in range(big):
                acc += x[i, p] * x[i, q]
            scat[p, q] = acc
    _jacobi_eigen(scat, vec)
    top = 0.0
    for p in range(6):
        top = max(top, scat[p, p])
    m = 0
    for p in range(6):  # the directions spanned: eigenvectors moved to the first m columns
        if scat[p, p] > EIG_REL * top:
            for i in range(6):
                vec[i, m] = vec[i, p]
            m += 1
    if m == 0:
        return 0
    degree = 3 if m <= 3 else 2
    k = min(big, int(math.ceil(NEIGHBOUR_RATIO * _basis_size(m, degree))))
    radius = 0.0
    for i in range(k):  # coordinates in the spanned directions (row i → a[i, :m] scratch)
        nrm = 0.0
        for c in range(m):
            acc = 0.0
            for j in range(6):
                acc += x[i, j] * vec[j, c]
            a[i, c] = acc
            nrm += acc * acc
        radius = max(radius, math.sqrt(nrm))
    if not radius > 0.0:
        return 0
    for i in range(k):
        for c in range(m):
            x[i, c] = a[i, c] / radius
    cols = _monomials(x, k, m, degree, a)
    if not _value_weights(a, k, cols, rr, v, w):
        return 0
    return k


@njit(cache=True)
def fit_start_into(fw, k, base, g, tip_local, state, tip, omega, scratch):
    """The warm start at ``g`` from the weights of :func:`fit_neighbours` (k > 0) into ``state`` (g_int, β, ψ, L)
    and its tip poses ``tip`` (R, 4, 4): Ω, β, ψ, L as Σ_i w_i x_i, the nodes rebuilt from Ω (``omega`` (R, N, 6)
    scratch) and closed onto the tips, the lengths taking the closure's change. scratch (5, 6).

    Args:
        fw: The arrays of :func:`fit_workspace`, weighted by :func:`fit_neighbours`.
        k: Neighbours used (the return value of :func:`fit_neighbours`).
        base: Rod base poses (R, 4, 4).
        g: Platform pose (4, 4).
        tip_local: Platform attachments g^loc (R, 4, 4).
        state: Output state (g_int, beta, psi, lengths), written.
        tip: Output tip poses (R, 4, 4), written.
        omega: Scratch (R, N, 6).
        scratch: Scratch (5, 6).
    """
    gi, be, psi, ln = state
    combine_solutions_into(fw[10], fw[5], k, fw[1], fw[2], fw[3], fw[4], omega, be, psi, ln)
    tip_poses_into(g, tip_local, psi, tip)
    rebuild_nodes_into(base, omega, tip, gi, scratch, ln)
