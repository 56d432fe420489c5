"""The smooth centreline that rod–rod contact measures with ``RodRodContact(smooth=True)``: on each element a cubic
Hermite curve through its two nodes with Catmull–Rom tangents, and the closest points of two such curves.

A polygonal centreline makes contact cog: a straight element resting across another rope at its middle holds the
rope higher, by the sagitta ``κ ℓ² / 8`` of its bend, than a node resting there, so a frictionless rope slides until
a node sits on the contact (docs/cosserat.md, "Chords or curve", measures both surfaces and where each fails). On
element ``e = [x_e, x_{e+1}]`` (parameter s ∈ [0, 1]) the curve

    x(s) = h₀₀ x_e + h₀₁ x_{e+1} + h₁₀ m_e + h₁₁ m_{e+1},                                       (1)
    h₀₀ = 2s³ − 3s² + 1,  h₁₀ = s³ − 2s² + s,  h₀₁ = −2s³ + 3s²,  h₁₁ = s³ − s²,
    m_a = (x_{a+1} − x_{a−1}) / 2 inside the rod,  m_0 = x_1 − x_0,  m_N = x_N − x_{N−1}

(Catmull & Rom, 1974) passes through the nodes with a continuous tangent and reproduces any quadratic, so its
sagitta error is O(ℓ³). It is linear in the four nodes ``e − 1 … e + 2``: ``x(s) = Σ w_a(s) x_a`` with Σ w_a = 1 and
Σ w_a x_a = x(s), so a force split by these weights conserves linear and angular momentum exactly, as on the chord.

Closest points (:func:`closest_curve_points`): from the chords' closest points (Ericson, *Real-Time Collision
Detection*, 2005, §5.1.9), :data:`NEWTON_ITERATIONS` Newton steps on ``|x_i(s) − x_j(t)|²`` over (s, t) ∈ [0, 1]²
(a clamped coordinate then held while the other takes its one-dimensional step; where the Hessian is not positive
definite, far from contact, its Gauss–Newton part; for parallel elements a step in s, then one in t). At the
minimiser the normal ``(x_i − x_j) / |x_i − x_j|`` is the gradient of the gap, so the penalty force is
conservative.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

__all__ = ["NEWTON_ITERATIONS", "CurvePoints", "closest_curve_points", "element_stencil", "stencil_weights"]

NEWTON_ITERATIONS = 3
"""Newton steps of :func:`closest_curve_points` from the chords' closest points."""


class CurvePoints(NamedTuple):
    """Closest points of curve pairs: parameters ``s``, ``t`` (P,) in [0, 1], each curve's node weights ``wi``,
    ``wj`` (P, 4) on its stencil (:func:`element_stencil`) and the points ``ci``, ``cj`` (P, 3) [m]."""

    s: Tensor
    t: Tensor
    wi: Tensor
    wj: Tensor
    ci: Tensor
    cj: Tensor


def element_stencil(first: Tensor, n_elements: int) -> tuple[Tensor, Tensor, Tensor]:
    """The four nodes ``e − 1 … e + 2`` that eq. (1) reads on each element, in the flattened nodes (B (N+1)).

    Args:
        first: each element's first node in the flattened nodes, (P,) int64.
        n_elements: N, the elements per rod.

    Returns:
        ``(nodes (P, 4) int64, at_start (P,), at_end (P,))``: a node off the rod is replaced by one on it (its weight
        is zero), and the flags (1.0 or 0.0) mark the rod's first and last elements.
    """
    e = first % (n_elements + 1)
    at_start, at_end = (e == 0).to(torch.float64), (e == n_elements - 1).to(torch.float64)
    nodes = torch.stack([first - 1 + (e == 0).long(), first, first + 1, first + 2 - (e == n_elements - 1).long()], -1)
    return nodes, at_start, at_end


def stencil_weights(s: Tensor, at_start: Tensor, at_end: Tensor, derivative: int = 0) -> Tensor:
    """The weights of eq. (1) on an element's stencil (:func:`element_stencil`), or of its derivatives in s.

    Args:
        s: parameters (P,) in [0, 1].
        at_start: (P,) 1.0 on a rod's first element (its first tangent the chord), else 0.0.
        at_end: (P,) 1.0 on a rod's last element.
        derivative: 0, 1 or 2: the weights of x(s), x'(s) or x''(s).

    Returns:
        (P, 4): the weights of nodes e − 1, e, e + 1, e + 2.
    """
    s2 = s * s
    if derivative == 0:
        h00, h10, h01, h11 = 2 * s2 * s - 3 * s2 + 1, s2 * s - 2 * s2 + s, -2 * s2 * s + 3 * s2, s2 * s - s2
    elif derivative == 1:
        h00, h10, h01, h11 = 6 * s2 - 6 * s, 3 * s2 - 4 * s + 1, -6 * s2 + 6 * s, 3 * s2 - 2 * s
    else:
        h00, h10, h01, h11 = 12 * s - 6, 6 * s - 4, -12 * s + 6, 6 * s - 2
    at_start, at_end = at_start.to(s.dtype), at_end.to(s.dtype)
    inner_start, inner_end = 1 - at_start, 1 - at_end
    return torch.stack(
        [
            -0.5 * h10 * inner_start,
            h00 - h10 * at_start - h11 * (0.5 * inner_end + at_end),
            h01 + h10 * (0.5 * inner_start + at_start) + h11 * at_end,
            0.5 * h11 * inner_end,
        ],
        -1,
    )


def _point(x: Tensor, w: Tensor) -> Tensor:
    """``Σ_a w_a x_a``: x (P, 4, 3) the stencil's nodes, w (P, 4) → (P, 3)."""
    return (w.unsqueeze(-1) * x).sum(-2)


def closest_curve_points(
    xi: Tensor,
    xj: Tensor,
    flags_i: tuple[Tensor, Tensor],
    flags_j: tuple[Tensor, Tensor],
    s: Tensor,
    t: Tensor,
    iterations: int = NEWTON_ITERATIONS,
) -> CurvePoints:
    """The closest points of two elements' curves (eq. (1)), by Newton's method from ``(s, t)`` (module docstring).

    Args:
        xi: the first elements' stencil nodes [m], (P, 4, 3); xj the second's.
        xj: (P, 4, 3).
        flags_i: ``(at_start, at_end)`` of the first elements (:func:`element_stencil`); flags_j the second's.
        flags_j: the same, (P,) each.
        s: starting parameters (P,) on the first curves (the chords' closest points); t on the second.
        t: (P,).
        iterations: Newton steps (0: the curves' points at ``(s, t)``).

    Returns:
        The `CurvePoints`.
    """
    for _ in range(iterations):
        wi, wj = stencil_weights(s, *flags_i), stencil_weights(t, *flags_j)
        di, dj = _point(xi, stencil_weights(s, *flags_i, 1)), _point(xj, stencil_weights(t, *flags_j, 1))
        d = _point(xi, wi) - _point(xj, wj)
        ddi, ddj = _point(xi, stencil_weights(s, *flags_i, 2)), _point(xj, stencil_weights(t, *flags_j, 2))
        gs, gt, hst = (d * di).sum(-1), -(d * dj).sum(-1), -(di * dj).sum(-1)
        hss, htt = (di * di).sum(-1) + (d * ddi).sum(-1), (dj * dj).sum(-1) - (d * ddj).sum(-1)
        convex = (hss > 0) & (htt > 0) & (hss * htt - hst * hst > 1e-12 * hss * htt)
        hss = torch.where(convex, hss, (di * di).sum(-1))  # else Gauss–Newton: always positive semi-definite
        htt = torch.where(convex, htt, (dj * dj).sum(-1))
        det = hss * htt - hst * hst
        joint = det > 1e-12 * hss * htt  # else parallel: a step in s, then one in t
        det = det.clamp_min(1e-300)
        s_new = torch.where(joint, s - (htt * gs - hst * gt) / det, s - gs / hss).clamp(0.0, 1.0)
        t_new = torch.where(joint, t - (hss * gt - hst * gs) / det, t - (gt + hst * (s_new - s)) / htt).clamp(0.0, 1.0)
        # a coordinate clamped by the joint step stays; the other takes its own step there (gradient to first order)
        s_held = joint & ((s_new == 0) | (s_new == 1))
        t_new = torch.where(s_held, (t - (gt + hst * (s_new - s)) / htt).clamp(0.0, 1.0), t_new)
        t_held = joint & ((t_new == 0) | (t_new == 1))
        s_new = torch.where(t_held, (s - (gs + hst * (t_new - t)) / hss).clamp(0.0, 1.0), s_new)
        s, t = s_new, t_new
    wi, wj = stencil_weights(s, *flags_i), stencil_weights(t, *flags_j)
    return CurvePoints(s, t, wi, wj, _point(xi, wi), _point(xj, wj))
