"""Minimum observable IMU configuration and IMU placement (seed 000, §III-C, eq. (18)).

Each slope IMU at ``l_s`` on link i measures the absolute inclination ``ψ_s = φ_i + w′(l_s)`` (φ_i the
rigid link angle); the reference IMU at ``l_r`` measures ``ψ_r = φ_i + w′(l_r)``. Their difference
removes the unknown rigid angle and gives (seed 000, eq. (18), generalised to a reference IMU that is
not exactly at the clamp)

    ψ_s − ψ_r = Σⱼ [Φ′ⱼ(l_s) − Φ′ⱼ(l_r)] ηⱼ,      s = 1..S.

With ``l_r = 0`` this is the seed's system ``w′(l_s) = Σⱼ Φ′ⱼ(l_s) ηⱼ``. The m modal coordinates are
observable iff the S×m slope matrix ``O`` has rank m; the minimum configuration is S = m slope IMUs
plus the reference (m + 1 IMUs per link). The seed's eq. (18) assumes ``l_r = 0``; in hardware the
first IMU sits a little way from the joint, and ignoring ``Φ′(l_r)`` biases η (see the reconstruction
module).

Placement (beyond the seed): :func:`optimize_placement` maximises σ_min(O) of the mass-normalised slope
matrix over candidate positions within mounting intervals and a minimum spacing (exhaustive when the
number of combinations is small, otherwise greedy + coordinate exchange), and warns for positions near
a slope node of a retained mode (``|Φ′ⱼ(l)| < tol · max_ξ |Φ′ⱼ|``), where that IMU carries no information
on mode j.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.errors import ConfigError
from flexlearn.physics.modal.link import FlexibleLink

__all__ = [
    "ObservabilityWarning",
    "slope_matrix",
    "observability",
    "slope_node_warnings",
    "PlacementOptions",
    "Placement",
    "optimize_placement",
]


class ObservabilityWarning(UserWarning):
    """An IMU placement is (nearly) blind to a retained mode."""


def _positions(link: FlexibleLink, positions: Sequence[float] | Tensor) -> Tensor:
    pos = torch.as_tensor(positions, dtype=link.length.dtype)
    if pos.dim() == 0:
        pos = pos.reshape(1)
    if not bool(torch.isfinite(pos).all()) or bool((pos < 0).any()) or bool((pos > link.length.max() + 1e-12).any()):
        raise ConfigError(f"IMU positions {pos.tolist()}: must be finite and within [0, L]")
    return pos


def slope_matrix(
    link: FlexibleLink, positions, n: int, reference: Optional[float] = None, data: Optional[dict] = None
) -> Tensor:
    """Observation matrix O (*batch, S, n) [kg^(−1/2) m^(−1)] of seed 000, eq. (18).

    Rows ``Φ′ⱼ(l_s)``, minus ``Φ′ⱼ(l_r)`` when a reference position is given.

    Args:
        link: the link.
        positions: the S slope-IMU positions l_s [m], within [0, L].
        n: number of modes.
        reference: the reference position l_r [m], or None.
        data: :meth:`FlexibleLink.modal_data` of ``n`` modes, computed when None.

    Returns:
        O (*batch, S, n).

    Raises:
        ConfigError: if a position is not finite or outside [0, L].
    """
    pos = _positions(link, positions)
    O = link.mode_shapes(pos, n, 1, data)
    if reference is not None:
        ref = _positions(link, [reference])
        O = O - link.mode_shapes(ref, n, 1, data)
    return O


def observability(link: FlexibleLink, positions, n: int, reference: Optional[float] = None, rtol: float = 1e-9) -> dict:
    """Rank, condition number and singular values of the slope matrix (seed 000, §III-C).

    rank counts singular values above ``rtol · max_j max_ξ |Φ′ⱼ|`` (a scale of the matrix that does not
    depend on the placement).

    Args:
        link: the link.
        positions: the S slope-IMU positions [m].
        n: number of modes.
        reference: the reference position [m], or None.
        rtol: relative rank tolerance.

    Returns:
        ``{"rank", "cond", "sigma_min", "singular_values", "observable"}`` with batch-shaped tensors;
        ``cond`` is ``inf`` when rank-deficient.
    """
    O = slope_matrix(link, positions, n, reference)
    sv = torch.linalg.svdvals(O)
    xi = torch.linspace(0, 1, 401, dtype=O.dtype) * link.length.unsqueeze(-1)
    scale = link.mode_shapes(xi, n, 1).abs().amax((-1, -2))
    tol = rtol * scale.unsqueeze(-1)
    rank = (sv > tol).sum(-1)
    smin = sv[..., -1] if sv.shape[-1] >= n else torch.zeros_like(sv[..., 0])
    full = rank >= n
    cond = torch.where(
        full, sv[..., 0] / torch.where(full, smin, torch.ones_like(smin)), torch.full_like(smin, math.inf)
    )
    return {"rank": rank, "cond": cond, "sigma_min": smin, "singular_values": sv, "observable": full}


def slope_node_warnings(link: FlexibleLink, positions, n: int, tol: float = 0.05, warn: bool = True) -> list:
    """Positions within a slope node of a retained mode: list of (position [m], mode index 1..n).

    A position is flagged when ``|Φ′ⱼ(l)| < tol · max_ξ |Φ′ⱼ(ξ)|``; with ``warn`` an
    :class:`ObservabilityWarning` is issued. Scalar links only.

    Args:
        link: the scalar link.
        positions: the IMU positions [m].
        n: number of retained modes.
        tol: relative slope threshold.
        warn: issue the warning when a position is flagged.

    Returns:
        The flagged ``(position [m], mode index 1..n)`` pairs.
    """
    pos = _positions(link, positions)
    xi = torch.linspace(0, 1, 801, dtype=pos.dtype) * link.length
    d = link.modal_data(n)
    peak = link.mode_shapes(xi, n, 1, d).abs().amax(-2).reshape(-1)
    vals = link.mode_shapes(pos, n, 1, d).reshape(len(pos), n).abs()
    out = []
    for s in range(len(pos)):
        for j in range(n):
            if float(vals[s, j]) < tol * float(peak[j]):
                out.append((float(pos[s]), j + 1))
    if out and warn:
        warnings.warn(f"IMU placement near slope nodes (position m, mode): {out}", ObservabilityWarning, stacklevel=2)
    return out


def _candidate_positions(
    length: float,
    intervals: Sequence[tuple[float, float]] | None,
    candidates: int,
    reference: Optional[float],
    min_spacing: float,
) -> list[float]:
    """Sorted, distinct candidate IMU positions [m]: ``candidates`` points spread over the ``intervals`` in
    proportion to their lengths (default [(0.05 L, L)]), without those closer than ``min_spacing`` to the
    reference IMU."""
    ivs = list(intervals) if intervals is not None else [(0.05 * length, length)]
    for a, b in ivs:
        check(
            0 <= a < b <= length + 1e-12,
            "optimize_placement.intervals",
            (a, b),
            f"must satisfy 0 <= a < b <= L = {length}",
        )
    total = sum(b - a for a, b in ivs)
    cand: list[float] = []
    for a, b in ivs:
        k = max(2, int(round(candidates * (b - a) / total)))
        cand += torch.linspace(a, b, k, dtype=torch.float64).tolist()
    if reference is not None:
        cand = [c for c in cand if abs(c - reference) >= min_spacing]
    return sorted(set(cand))


def _exhaustive_placement(O: Tensor, cand: list[float], n_sensors: int, min_spacing: float) -> list[int]:
    """Indices into ``cand`` of the ``n_sensors`` rows of the slope matrix O (C, m) with the largest σ_min
    among all combinations whose positions are at least ``min_spacing`` apart (one batched SVD)."""
    combos = torch.tensor(list(itertools.combinations(range(len(cand)), n_sensors)), dtype=torch.long)
    pos = torch.tensor(cand, dtype=torch.float64)[combos]
    ok = torch.ones(len(combos), dtype=torch.bool)
    if n_sensors > 1:
        ok = ((pos[:, 1:] - pos[:, :-1]) >= min_spacing - 1e-12).all(-1)
    sv = torch.linalg.svdvals(O[combos])[:, -1]
    sv = torch.where(ok, sv, torch.full_like(sv, -1.0))
    best = int(torch.argmax(sv))
    if float(sv[best]) < 0:
        raise ConfigError("optimize_placement: no placement satisfies the spacing constraint")
    return combos[best].tolist()


def _greedy_exchange_placement(O: Tensor, cand: list[float], n: int, n_sensors: int, min_spacing: float) -> list[int]:
    """Indices into ``cand`` of ``n_sensors`` rows of the slope matrix O (C, m), m = ``n``, when there are too
    many combinations to try: greedy selection on the volume (product of the leading singular values), then
    coordinate exchange on σ_min until no single swap improves it; positions stay ``min_spacing`` apart."""
    C = len(cand)

    def smin(idx: list[int]) -> float:
        return float(torch.linalg.svdvals(O[idx])[-1]) if len(idx) >= n else 0.0

    def feasible(idx: Sequence[int]) -> bool:
        ps = sorted(cand[i] for i in idx)
        return all(ps[i + 1] - ps[i] >= min_spacing - 1e-12 for i in range(len(ps) - 1))

    idx: list[int] = []
    for _ in range(n_sensors):  # greedy on the product of the leading singular values (volume)
        best_i, best_v = -1, -1.0
        for i in range(C):
            if i in idx or not feasible(idx + [i]):
                continue
            svs = torch.linalg.svdvals(O[idx + [i]])
            v = float(torch.prod(svs[: min(n, len(idx) + 1)]))
            if v > best_v:
                best_i, best_v = i, v
        if best_i < 0:
            raise ConfigError("optimize_placement: no placement satisfies the spacing constraint")
        idx.append(best_i)
    improved = True
    while improved:  # coordinate exchange on σ_min
        improved = False
        for k in range(n_sensors):
            cur = smin(idx)
            for i in range(C):
                if i in idx:
                    continue
                trial = idx[:k] + [i] + idx[k + 1 :]
                if feasible(trial) and smin(trial) > cur * (1 + 1e-12):
                    idx, cur, improved = trial, smin(trial), True
    return idx


@dataclass(frozen=True)
class PlacementOptions:
    """Search space and stopping rule of :func:`optimize_placement`.

    Attributes:
        n_sensors: slope IMUs to place (None: the number of modes m, the minimum configuration).
        intervals: allowed mounting intervals [(a, b), ...] [m] (None: [(0.05 L, L)]).
        min_spacing: minimum distance between IMUs [m] (also from the reference).
        reference: reference-IMU position [m] (None: at the clamp, as in the seed).
        candidates: number of candidate points spread over the intervals.
        max_combinations: exhaustive search up to this many placements, else greedy + coordinate exchange.
        node_tol: slope-node tolerance of :func:`slope_node_warnings` (fraction of max_ξ |Φ′ⱼ|).
    """

    n_sensors: Optional[int] = None
    intervals: Optional[Sequence[tuple[float, float]]] = None
    min_spacing: float = 0.1
    reference: Optional[float] = None
    candidates: int = 181
    max_combinations: int = 200_000
    node_tol: float = 0.05


@dataclass(frozen=True)
class Placement:
    """An IMU placement found by :func:`optimize_placement`.

    Attributes:
        positions: sorted slope-IMU positions [m].
        sigma_min: smallest singular value of the slope matrix [kg^(−1/2) m^(−1)].
        cond: its condition number.
        method: ``"exhaustive"`` or ``"greedy+exchange"``.
        node_warnings: (position [m], mode 1..m) pairs near a slope node (:func:`slope_node_warnings`).
    """

    positions: list[float]
    sigma_min: float
    cond: float
    method: str
    node_warnings: list[tuple[float, int]]


def optimize_placement(link: FlexibleLink, n: int, options: Optional[PlacementOptions] = None) -> Placement:
    """IMU positions maximising σ_min of the slope matrix (beyond seed 000, §III-C).

    Exhaustive search over all placements of the candidate points when there are at most
    ``options.max_combinations`` of them, else greedy selection followed by coordinate exchange.

    Args:
        link: a scalar (un-batched) FlexibleLink.
        n: retained modes m.
        options: sensors, mounting intervals, spacing, reference and search size (:class:`PlacementOptions`;
            defaults if None).

    Returns:
        The :class:`Placement` (positions, σ_min, condition number, method, slope-node warnings).

    Raises:
        ConfigError: a batched link, fewer sensors than modes, bad intervals or spacing, too few admissible
            candidates, or no placement that satisfies the spacing.
    """
    o = options if options is not None else PlacementOptions()
    if link.length.numel() != 1:
        raise ConfigError("optimize_placement: needs a scalar (un-batched) FlexibleLink")
    S = n if o.n_sensors is None else o.n_sensors
    check(S >= n, "optimize_placement.n_sensors", S, f"must be >= the number of modes {n}")
    check(o.min_spacing >= 0, "optimize_placement.min_spacing", o.min_spacing, "must be >= 0")
    cand = _candidate_positions(float(link.length), o.intervals, o.candidates, o.reference, o.min_spacing)
    if len(cand) < S:
        raise ConfigError(f"optimize_placement: only {len(cand)} admissible candidate positions for {S} IMUs")
    O = slope_matrix(link, cand, n, o.reference).reshape(len(cand), n)
    if math.comb(len(cand), S) <= o.max_combinations:
        idx = _exhaustive_placement(O, cand, S, o.min_spacing)
        method = "exhaustive"
    else:
        idx = _greedy_exchange_placement(O, cand, n, S, o.min_spacing)
        method = "greedy+exchange"
    positions = sorted(cand[i] for i in idx)
    res = observability(link, positions, n, o.reference)
    nodes = slope_node_warnings(link, positions, n, o.node_tol, warn=True)
    return Placement(
        positions=positions,
        sigma_min=float(res["sigma_min"]),
        cond=float(res["cond"]),
        method=method,
        node_warnings=nodes,
    )
