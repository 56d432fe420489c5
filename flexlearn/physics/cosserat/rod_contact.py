"""Contact between rods, and of a rod with itself: a penalty on the closest points of element pairs, with friction.

Several rods of one simulation are the batch rows of its state (positions (B, N+1, 3): B rods of the same
section, material and element count, each with its own initial state and supports); `RodRodContact` is the one
load that couples the rows. The surface of a rod is its centreline thickened by the radius r, the centreline taken
on each element either as the straight chord between its nodes (default; segments, as PyElastica's and MuJoCo's
capsules) or, with ``smooth=True``, as the cubic Hermite curve through its nodes with Catmull–Rom tangents (eq. (1)
of :mod:`~flexlearn.physics.cosserat.smooth_centreline`; the chord is the same curve with both tangents the chord).
For elements i and j the closest points ``c_i = x_i(s)``, ``c_j = x_j(t)`` (the chords': Ericson, *Real-Time
Collision Detection*, 2005, §5.1.9; the curves': Newton's method from there) give the gap ``g = |c_i − c_j| − 2 r``,
the normal ``n = (c_i − c_j) / |c_i − c_j|`` and, with the relative velocity ``v_rel = Σ w_a(s) v_a − Σ w_b(t) v_b``
(the node weights of the points), the law of `flexlearn.physics.cosserat.contact`:

    f_n = max(k δ − c (v_rel · n), 0),   δ = max(−g, 0)
    f_t = −μ f_n v_t / sqrt(|v_t|² + ε²),   v_t = v_rel − (v_rel · n) n

The force ``f = f_n n + f_t`` acts on element i's nodes as ``w_a(s) f`` (the chord: ``1 − s`` and ``s`` on its two
nodes; the curve: its four stencil nodes e − 1 … e + 2), and ``−f`` on element j's likewise: the weights of each
side sum to one and ``Σ w_a x_a = c_i``, so every pair's forces sum to zero, contact conserves linear momentum
exactly, and the normal force adds no moment about the contact (its line joins c_i and c_j). Self-contact: element
pairs of one rod fewer than ``exclude`` elements apart are skipped (neighbours share a node; default ``ceil(π r /
ℓ)``, ℓ the element length, so that no pair of a straight rod touches at rest).

Which surface (docs/cosserat.md measures both): on the chords a pressed rope is held higher, by the sagitta of its
bend, with the contact inside an element than at a node, so frictionless contact cogs toward nodes; the curve
removes most of that, but a node crossing then loses the chords' grip and stiff frictionless ropes can slide off it.

Limits: the penalty's penetration at rest is ``f_n / k``; on the LGVI the penalty adds ``k / m_a`` to the squared
frequencies (``h < 2 sqrt(m_a / k)``) and friction is explicit (ε above ``h μ f_n / m_a``), while the implicit step
takes both into its matrix, each pair's ``h J C Jᵀ`` exactly (`PenaltyContact.filter_coupling`, solved by a low-rank
update of the rods' own matrices: :mod:`~flexlearn.physics.cosserat.implicit`); two elements that
cross each other faster than ``2 r`` per step can pass through (choose h so that the relative speed times h stays
below r). All B (N) elements are tested against each other: O((B N)²) per step, fine for tens of rods of tens of
elements.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.contact import ContactPoints, PenaltyContact
from flexlearn.physics.cosserat.smooth_centreline import NEWTON_ITERATIONS, closest_curve_points, element_stencil

__all__ = ["RodRodContact", "SegmentPairs", "closest_points", "deepest_curve_overlap"]


class SegmentPairs(NamedTuple):
    """Closest points of segment pairs: parameters ``s``, ``t`` (P,) in [0, 1] and the points ``ci``, ``cj`` (P, 3)."""

    s: Tensor
    t: Tensor
    ci: Tensor
    cj: Tensor


def closest_points(a0: Tensor, a1: Tensor, b0: Tensor, b1: Tensor) -> SegmentPairs:
    """The closest points of segments ``[a0, a1]`` and ``[b0, b1]`` (Ericson 2005, §5.1.9), pairwise.

    Args:
        a0: first segments' starts [m], (P, 3); a1 their ends.
        a1: (P, 3).
        b0: second segments' starts [m], (P, 3); b1 their ends.
        b1: (P, 3).

    Returns:
        The `SegmentPairs` (parallel segments: s from the first end that projects inside, as Ericson).
    """
    d1, d2, r = a1 - a0, b1 - b0, a0 - b0
    a, e = (d1 * d1).sum(-1), (d2 * d2).sum(-1)
    b, c, f = (d1 * d2).sum(-1), (d1 * r).sum(-1), (d2 * r).sum(-1)
    denom = a * e - b * b
    tiny = 1e-14 * (a * e).clamp_min(1e-300)
    s = torch.where(denom > tiny, ((b * f - c * e) / denom.clamp_min(1e-300)).clamp(0.0, 1.0), torch.zeros_like(a))
    t = (b * s + f) / e
    s = torch.where(t < 0, (-c / a).clamp(0.0, 1.0), torch.where(t > 1, ((b - c) / a).clamp(0.0, 1.0), s))
    t = t.clamp(0.0, 1.0)
    return SegmentPairs(s, t, a0 + s.unsqueeze(-1) * d1, b0 + t.unsqueeze(-1) * d2)


class RodRodContact(PenaltyContact):
    """Penalty contact with Coulomb friction between the rods of a simulation (its batch rows) and, with
    ``self_contact``, of each rod with itself (module docstring).

    Args:
        rod_radius: r [m] (> 0).
        stiffness: k per contact pair [N/m] (> 0).
        damping: c per contact pair [N s/m] (≥ 0).
        friction: μ (≥ 0).
        slip_velocity: ε [m/s] (> 0).
        self_contact: also between elements of one rod.
        exclude: element pairs of one rod fewer than this many elements apart are skipped (None: ``ceil(π r / ℓ)``,
            at least 2, from the first state seen).
        smooth: the surface about the smooth centreline (module docstring); False (default): about the chords
            (segments, as PyElastica's and MuJoCo's capsules).
    """

    couples_nodes = True  # the implicit step takes each pair's h J C Jᵀ exactly (contact_step)

    def __init__(
        self,
        rod_radius: float,
        stiffness: float,
        damping: float = 0.0,
        friction: float = 0.0,
        slip_velocity: float = 1e-3,
        self_contact: bool = True,
        exclude: Optional[int] = None,
        smooth: bool = False,
    ) -> None:
        super().__init__(rod_radius, stiffness, damping, friction, slip_velocity)
        check(exclude is None or (isinstance(exclude, int) and exclude >= 1), "RodRodContact.exclude", exclude,
              "expected None or an integer >= 1")  # fmt: skip
        self.self_contact, self.exclude, self.smooth = bool(self_contact), exclude, bool(smooth)
        self._cached_pairs: Optional[tuple] = None

    def element_pairs(self, p: Tensor) -> tuple[Tensor, Tensor]:
        """Indices (P,) of the first nodes, in the flattened nodes (B (N+1)), of the element pairs that may touch
        (cached per shape; the first state seen fixes the default ``exclude``).

        Args:
            p: node positions [m], (B, N+1, 3).

        Returns:
            ``(i, j)``, each (P,) int64.
        """
        b, n = p.shape[0], p.shape[1] - 1
        if self.exclude is None:
            ell = float((p[:, 1:] - p[:, :-1]).norm(dim=-1).mean())
            self.exclude = max(2, math.ceil(math.pi * self.rod_radius / max(ell, 1e-300)))
        key = (b, n, p.device)
        if self._cached_pairs is None or self._cached_pairs[0] != key:
            idx = torch.arange(b * n, device=p.device)
            rod, elem = idx // n, idx % n
            i, j = torch.triu_indices(b * n, b * n, offset=1, device=p.device)
            same = rod[i] == rod[j]
            keep = ~same | ((elem[j] - elem[i]).abs() >= self.exclude) if self.self_contact else ~same
            first_node = rod * (n + 1) + elem  # element e of rod r starts at node r (N+1) + e
            self._cached_pairs = (key, first_node[i[keep]], first_node[j[keep]])
        return self._cached_pairs[1], self._cached_pairs[2]

    def points(self, p: Tensor, v: Tensor) -> ContactPoints:
        """`PenaltyContact.points`: the closest points of every element pair that may touch (module docstring).

        Args:
            p: node positions [m], (B, N+1, 3): B rods.
            v: node velocities [m/s], (B, N+1, 3).
        """
        ni, nj = self.element_pairs(p)
        flat_p, flat_v = p.reshape(-1, 3), v.reshape(-1, 3)
        chord = closest_points(flat_p[ni], flat_p[ni + 1], flat_p[nj], flat_p[nj + 1])
        stencil_i, start_i, end_i = element_stencil(ni, p.shape[1] - 1)
        stencil_j, start_j, end_j = element_stencil(nj, p.shape[1] - 1)
        if not self.smooth:  # both tangents the chord: eq. (1) is the straight segment, its closest points the chords'
            start_i = end_i = start_j = end_j = torch.ones_like(start_i)
        pair = closest_curve_points(
            flat_p[stencil_i],
            flat_p[stencil_j],
            (start_i, end_i),
            (start_j, end_j),
            chord.s,
            chord.t,
            NEWTON_ITERATIONS if self.smooth else 0,
        )
        gap_vec = pair.ci - pair.cj
        dist = gap_vec.norm(dim=-1)
        normal = gap_vec / dist.clamp_min(1e-300).unsqueeze(-1)
        depth = (2 * self.rod_radius - dist).clamp_min(0.0)
        v_i, v_j = (
            (pair.wi.unsqueeze(-1) * flat_v[stencil_i]).sum(-2),
            (pair.wj.unsqueeze(-1) * flat_v[stencil_j]).sum(-2),
        )
        v_rel = v_i - v_j
        shares = tuple((stencil_i[:, a], pair.wi[:, a : a + 1]) for a in range(4))
        shares += tuple((stencil_j[:, a], -pair.wj[:, a : a + 1]) for a in range(4))
        return ContactPoints(shares, depth, normal, v_rel)


def deepest_curve_overlap(frames: Tensor, rod_radius: float, exclude: int, self_contact: bool = True) -> float:
    """How far the rods' smooth centrelines (the surfaces `RodRodContact(smooth=True)` keeps apart) pass into each
    other or themselves, deepest over recorded frames [m]. The polylines through the same nodes overlap more where
    rods bend away from a contact: each chord cuts inside its bend by its sagitta, up to ``ℓ θ / 8`` for a node bend
    θ.

    Args:
        frames: node positions [m], (F, B, N+1, 3): F frames of B rods.
        rod_radius: r [m].
        exclude: element pairs of one rod fewer than this many elements apart are skipped.
        self_contact: measure each rod against itself too.

    Returns:
        The deepest overlap ``2 r − |x_i − x_j|`` [m] (0 where nothing overlaps).
    """
    probe = RodRodContact(rod_radius, 1.0, self_contact=self_contact, exclude=exclude, smooth=True)
    deepest = 0.0
    for p in frames:
        depth = probe.points(p, torch.zeros_like(p)).depth
        deepest = max(deepest, float(depth.max()) if depth.numel() else 0.0)
    return deepest
