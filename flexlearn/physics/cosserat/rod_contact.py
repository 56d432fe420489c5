"""Contact between rods, and of a rod with itself: a penalty on the closest points of element pairs, with friction.

Several rods of one simulation are the batch rows of its state (positions (B, N+1, 3): B rods of the same
section, material and element count, each with its own initial state and supports); `RodRodContact` is the one
load that couples the rows. Each element is a straight segment of the centreline thickened by the radius r. For
elements ``i = [a0, a1]`` and ``j = [b0, b1]`` the closest points ``c_i = a0 + s (a1 − a0)``,
``c_j = b0 + t (b1 − b0)`` (s, t ∈ [0, 1]; Ericson, *Real-Time Collision Detection*, 2005, §5.1.9) give the gap
``g = |c_i − c_j| − 2 r``, the normal ``n = (c_i − c_j) / |c_i − c_j|`` and, with the relative velocity
``v_rel = v_i(s) − v_j(t)`` (the nodes' velocities interpolated), the law of `flexlearn.physics.cosserat.contact`:

    f_n = max(k δ − c (v_rel · n), 0),   δ = max(−g, 0)
    f_t = −μ f_n v_t / sqrt(|v_t|² + ε²),   v_t = v_rel − (v_rel · n) n

The force ``f = f_n n + f_t`` acts on element i, split between its nodes as ``(1 − s) f`` and ``s f``, and ``−f``
on element j likewise: every pair's forces sum to zero, so contact conserves linear momentum exactly, and the
normal force adds no moment about the contact (its line joins c_i and c_j). Self-contact: element pairs of one rod
fewer than ``exclude`` elements apart are skipped (neighbours share a node; default ``ceil(π r / ℓ)``, ℓ the
element length, so that no pair of a straight rod touches at rest).

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

__all__ = ["RodRodContact", "SegmentPairs", "closest_points"]


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
    ) -> None:
        super().__init__(rod_radius, stiffness, damping, friction, slip_velocity)
        check(exclude is None or (isinstance(exclude, int) and exclude >= 1), "RodRodContact.exclude", exclude,
              "expected None or an integer >= 1")  # fmt: skip
        self.self_contact, self.exclude = bool(self_contact), exclude
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
        pair = closest_points(flat_p[ni], flat_p[ni + 1], flat_p[nj], flat_p[nj + 1])
        gap_vec = pair.ci - pair.cj
        dist = gap_vec.norm(dim=-1)
        normal = gap_vec / dist.clamp_min(1e-300).unsqueeze(-1)
        depth = (2 * self.rod_radius - dist).clamp_min(0.0)
        s, t = pair.s.unsqueeze(-1), pair.t.unsqueeze(-1)
        v_rel = (1 - s) * flat_v[ni] + s * flat_v[ni + 1] - (1 - t) * flat_v[nj] - t * flat_v[nj + 1]
        return ContactPoints(((ni, 1 - s), (ni + 1, s), (nj, -(1 - t)), (nj + 1, -t)), depth, normal, v_rel)
