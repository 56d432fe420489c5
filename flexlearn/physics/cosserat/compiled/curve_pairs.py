"""The smooth centreline of rod–rod contact in the fused kernel: the cubic Hermite curve with Catmull–Rom tangents on
each element and the closest points of two such curves by Newton's method, as
:mod:`flexlearn.physics.cosserat.smooth_centreline` (eq. (1) there; the reference these loops are tested against,
tests/physics/cosserat/test_fused_contact.py). Positions (B, n, 3) [m]; an element is (rod b, first node a).
"""

from __future__ import annotations

import math

import numpy as np

from flexlearn.physics.cosserat.compiled.common import njit

NEWTON_ITERATIONS = 3
"""As :data:`flexlearn.physics.cosserat.smooth_centreline.NEWTON_ITERATIONS` (a test holds them equal)."""


@njit(cache=True, inline="always", error_model="numpy")
def stencil_weights(s, at_start, at_end, derivative, out):
    """The weights (4,) of eq. (1) on nodes a − 1 … a + 2 of an element at parameter s.

    Args:
        s: The parameter in [0, 1].
        at_start: 1.0 on a rod's first element (its first tangent the chord), else 0.0.
        at_end: 1.0 on a rod's last element.
        derivative: 0, 1 or 2: the weights of x, x' or x''.
        out: (4,), overwritten.
    """
    s2 = s * s
    if derivative == 0:
        h00, h10, h01, h11 = 2 * s2 * s - 3 * s2 + 1, s2 * s - 2 * s2 + s, -2 * s2 * s + 3 * s2, s2 * s - s2
    elif derivative == 1:
        h00, h10, h01, h11 = 6 * s2 - 6 * s, 3 * s2 - 4 * s + 1, -6 * s2 + 6 * s, 3 * s2 - 2 * s
    else:
        h00, h10, h01, h11 = 12 * s - 6, 6 * s - 4, -12 * s + 6, 6 * s - 2
    inner_start, inner_end = 1 - at_start, 1 - at_end
    out[0] = -0.5 * h10 * inner_start
    out[1] = h00 - h10 * at_start - h11 * (0.5 * inner_end + at_end)
    out[2] = h01 + h10 * (0.5 * inner_start + at_start) + h11 * at_end
    out[3] = 0.5 * h11 * inner_end


@njit(cache=True, inline="always", error_model="numpy")
def stencil(a, n_elements, nodes):
    """The nodes a − 1 … a + 2 (in the rod) that element a's curve reads (a node off the rod replaced by one on it;
    its weight is zero).

    Args:
        a: The element.
        n_elements: N, the rod's elements.
        nodes: (4,) int64, overwritten.

    Returns:
        ``(at_start, at_end)``, 1.0 or 0.0.
    """
    at_start, at_end = 1.0 if a == 0 else 0.0, 1.0 if a == n_elements - 1 else 0.0
    nodes[0], nodes[1], nodes[2], nodes[3] = a - 1 + (1 if a == 0 else 0), a, a + 1, a + 2 - (1 if at_end else 0)
    return at_start, at_end


@njit(cache=True, inline="always", error_model="numpy")
def combine(x, b, nodes, w, out):
    """``out = Σ_k w_k x[b, nodes_k]``.

    Args:
        x: Node vectors, shape (B, n, 3).
        b: The rod.
        nodes: (4,) int64, the stencil (:func:`stencil`).
        w: (4,), its weights.
        out: (3,), overwritten.
    """
    for r in range(3):
        out[r] = w[0] * x[b, nodes[0], r] + w[1] * x[b, nodes[1], r]
        out[r] += w[2] * x[b, nodes[2], r] + w[3] * x[b, nodes[3], r]


@njit(cache=True, inline="always", error_model="numpy")
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(cache=True, error_model="numpy")
def closest_curve_points(p, bi, ni, flags_i, bj, nj, flags_j, s, t, work, iterations):
    """The closest points of two elements' curves from the chords' ``(s, t)`` (Newton, as
    :func:`flexlearn.physics.cosserat.smooth_centreline.closest_curve_points`, the same steps in the same order).

    Args:
        p: Node positions [m], shape (B, n, 3).
        bi: The first element's rod; ``ni`` its stencil (4,) int64 (:func:`stencil`), ``flags_i`` its
            ``(at_start, at_end)``.
        ni: (4,) int64.
        flags_i: (2,) floats.
        bj: The second element's rod.
        nj: (4,) int64.
        flags_j: (2,) floats.
        s: The start on the first curve (the chords' closest point).
        t: The start on the second.
        work: ``(wi, wj, vecs)``: (3, 4) each, the weights of x, x', x'' (row 0 at the result), and (6, 3), the
            points and derivatives (rows 0 and 1 the two closest points at the result).
        iterations: Newton steps (:data:`NEWTON_ITERATIONS`; 0: the curves' points at ``(s, t)``).

    Returns:
        ``(s, t)``.
    """
    wi, wj, vecs = work
    xi, xj, di, dj, ddi, ddj = vecs[0], vecs[1], vecs[2], vecs[3], vecs[4], vecs[5]
    d = np.empty(3)
    for _ in range(iterations):
        for k in range(3):
            stencil_weights(s, flags_i[0], flags_i[1], k, wi[k])
            stencil_weights(t, flags_j[0], flags_j[1], k, wj[k])
        combine(p, bi, ni, wi[0], xi)
        combine(p, bj, nj, wj[0], xj)
        combine(p, bi, ni, wi[1], di)
        combine(p, bj, nj, wj[1], dj)
        combine(p, bi, ni, wi[2], ddi)
        combine(p, bj, nj, wj[2], ddj)
        for r in range(3):
            d[r] = xi[r] - xj[r]
        gs, gt, hst = _dot(d, di), -_dot(d, dj), -_dot(di, dj)
        hss, htt = _dot(di, di) + _dot(d, ddi), _dot(dj, dj) - _dot(d, ddj)
        if not (hss > 0 and htt > 0 and hss * htt - hst * hst > 1e-12 * hss * htt):
            hss, htt = _dot(di, di), _dot(dj, dj)  # Gauss–Newton
        det = hss * htt - hst * hst
        joint = det > 1e-12 * hss * htt
        det = max(det, 1e-300)
        if joint:
            s_new = min(max(s - (htt * gs - hst * gt) / det, 0.0), 1.0)
            t_new = min(max(t - (hss * gt - hst * gs) / det, 0.0), 1.0)
        else:  # parallel: a step in s, then one in t
            s_new = min(max(s - gs / hss, 0.0), 1.0)
            t_new = min(max(t - (gt + hst * (s_new - s)) / htt, 0.0), 1.0)
        if joint and (s_new == 0.0 or s_new == 1.0):
            t_new = min(max(t - (gt + hst * (s_new - s)) / htt, 0.0), 1.0)
        if joint and (t_new == 0.0 or t_new == 1.0):
            s_new = min(max(s - (gs + hst * (t_new - t)) / hss, 0.0), 1.0)
        s, t = s_new, t_new
    stencil_weights(s, flags_i[0], flags_i[1], 0, wi[0])
    stencil_weights(t, flags_j[0], flags_j[1], 0, wj[0])
    combine(p, bi, ni, wi[0], xi)
    combine(p, bj, nj, wj[0], xj)
    return s, t


@njit(cache=True, error_model="numpy")
def curve_spheres(p):
    """Each element's curve (eq. (1)) inside a ball: its midpoint and the largest distance from it to the curve's Bézier
    control points ``x_a, x_a + m_a / 3, x_{a+1} − m_{a+1} / 3, x_{a+1}`` (the curve lies in their convex hull).

    Args:
        p: Node positions [m], shape (B, n, 3).

    Returns:
        (B, N, 4): the centres [m] and radii [m].
    """
    B, N = p.shape[0], p.shape[1] - 1
    out = np.empty((B, N, 4))
    for b in range(B):
        for e in range(N):
            lo, hi = max(e - 1, 0), min(e + 2, N)
            scale_lo, scale_hi = (1.0 if e == 0 else 0.5) / 3.0, (1.0 if e == N - 1 else 0.5) / 3.0
            radius2 = 0.0
            for r in range(3):
                out[b, e, r] = 0.5 * (p[b, e, r] + p[b, e + 1, r])
            for k in range(4):
                d2 = 0.0
                for r in range(3):
                    if k == 0:
                        c = p[b, e, r]
                    elif k == 1:
                        c = p[b, e, r] + scale_lo * (p[b, e + 1, r] - p[b, lo, r])
                    elif k == 2:
                        c = p[b, e + 1, r] - scale_hi * (p[b, hi, r] - p[b, e, r])
                    else:
                        c = p[b, e + 1, r]
                    d2 += (c - out[b, e, r]) ** 2
                radius2 = max(radius2, d2)
            out[b, e, 3] = math.sqrt(radius2)
    return out
