"""The per-frame rules of the fused estimator, shared by its two twins.

`flexlearn.runtime.fusion.estimator.FusedEstimator` (TorchScript, branches on the outcomes for speed) and
`flexlearn.runtime.fusion.graph.FusedEstimatorGraph` (`torch.export`, selects them with ``torch.where``) decide
each outcome with these functions, so the two cannot disagree on what a frame is worth:

* `held_quaternions`: which quaternion rows are usable (|q|² in (0.25, 4)), normalised, the others held;
* `good_readings` (usable and fresh) and `magnetometer_flags`: BAD_MAG (non-finite or saturated) and REPEATED_MAG
  (a bitwise-repeated conversion);
* `timed_flags`: NO_FIX (no fix for more than ``fix_timeout``) and CLOCK_RESYNC (within `RESYNC_FLAG_S` of a
  resync) with the time these flags next change;
* `usable_fix`: whether a coil field and the direction model's answer make a fix (seed 002, III-B3);
* `child_direction`: d, the child's direction in the parent frame (u^m = R̂_{i−1} d).

All are pure tensor functions (TorchScript and `torch.export` both accept them). Units: s, T; flags int64 bits of
`flexlearn.runtime.fusion.flags`.
"""

from typing import Tuple

import torch
from torch import Tensor

from flexlearn.runtime.fusion.flags import FlagBit

__all__ = ["held_quaternions", "good_readings", "magnetometer_flags", "timed_flags", "usable_fix", "child_direction"]


def held_quaternions(q: Tensor, n2: Tensor, q_last: Tensor) -> Tuple[Tensor, Tensor]:
    """Rows with |q|² in (0.25, 4) normalised, the others replaced by the module's last valid quaternion.

    Args:
        q: quaternions (N + 1, 4), float64.
        n2: their squared norms (N + 1,).
        q_last: the last valid quaternions (N + 1, 4).

    Returns:
        ``(ok (N + 1,) bool, quaternions (N + 1, 4))``; NaN and inf rows are not ok.
    """
    ok = (n2 > 0.25) & (n2 < 4.0)  # False for NaN; inf fails the upper bound
    return ok, torch.where(ok.unsqueeze(-1), q * torch.rsqrt(n2.clamp_min(0.25)).unsqueeze(-1), q_last)


def usable_readings(m: Tensor, full_scale: float) -> Tensor:
    """Readings that are finite and below the rail.

    Args:
        m: raw readings (N, 3) [T], float64.
        full_scale: the magnetometer's rail [T]; a reading at or beyond it is saturated.

    Returns:
        (N,) bool (NaN fails the comparison).
    """
    return (m.abs() < full_scale).all(-1)


def fresh_readings(m: Tensor, prev_raw: Tensor) -> Tensor:
    """Readings that are a new conversion: bitwise different from the previous finite ones.

    Args:
        m: raw readings (N, 3) [T].
        prev_raw: the previous finite readings (N, 3) [T] (NaN before the first: every reading is new).

    Returns:
        (N,) bool.
    """
    return (m != prev_raw).any(-1)


def good_readings(m: Tensor, prev_raw: Tensor, full_scale: float) -> Tensor:
    """The readings of a round that count (the fast test of every round).

    Args:
        m: raw readings (N, 3) [T], float64.
        prev_raw: the previous finite readings (N, 3) [T].
        full_scale: the magnetometer's rail [T].

    Returns:
        (N,) bool: usable (`usable_readings`) and fresh (`fresh_readings`).
    """
    return usable_readings(m, full_scale) & fresh_readings(m, prev_raw)


def magnetometer_flags(m: Tensor, prev_raw: Tensor, full_scale: float) -> Tuple[Tensor, Tensor, Tensor]:
    """Every check of a round's readings at once: which count (`good_readings`) and the flags of the others.

    Args:
        m: raw readings (N, 3) [T], float64.
        prev_raw: the previous finite readings (N, 3) [T].
        full_scale: the magnetometer's rail [T].

    Returns:
        ``(good (N,) bool, finite (N,) bool, flags (N,) int64)``: BAD_MAG where not usable, REPEATED_MAG where
        finite and not fresh.
    """
    usable = usable_readings(m, full_scale)
    fresh = fresh_readings(m, prev_raw)
    finite = torch.isfinite(m).all(-1)
    flags = torch.where(usable, 0, FlagBit.BAD_MAG.value) | torch.where(fresh | ~finite, 0, FlagBit.REPEATED_MAG.value)
    return usable & fresh, finite, flags


def timed_flags(t: Tensor, t_fix: Tensor, fix_timeout: float, resync_until: Tensor) -> Tuple[Tensor, Tensor]:
    """NO_FIX on segments without a fix for more than ``fix_timeout``, CLOCK_RESYNC on all before ``resync_until``.

    Args:
        t: estimator time () [s].
        t_fix: time of each segment's last fix (N,) [s].
        fix_timeout: the longest time without a fix [s].
        resync_until: end of the flagged time after a resync () [s].

    Returns:
        ``(flags (N,) int64, the next time these flags change () [s]: the earliest deadline)``.
    """
    late = t - t_fix > fix_timeout
    flags = torch.where(late, FlagBit.NO_FIX.value, 0)
    next_change = torch.where(late, torch.inf, t_fix + fix_timeout).min()
    resync = t < resync_until
    flags = torch.where(resync, flags | FlagBit.CLOCK_RESYNC.value, flags)
    return flags, torch.where(resync, torch.minimum(next_change, resync_until), next_change)


def usable_fix(delta_b: Tensor, f: Tensor) -> Tensor:
    """Whether a coil field ΔB and the direction model's answer f make a fix.

    Args:
        delta_b: the coil field (3,) [T].
        f: the model's direction (3,); exactly zero means "no direction".

    Returns:
        () bool: ΔB finite and non-zero, f finite and at least 0.5 long.
    """
    return (
        torch.isfinite(delta_b).all()
        & (torch.linalg.vector_norm(delta_b) > 0.0)
        & torch.isfinite(f).all()
        & (torch.linalg.vector_norm(f) >= 0.5)
    )


def child_direction(f: Tensor, flip: Tensor) -> Tensor:
    """d, the child segment's direction in the parent frame, from the direction model's answer (seed 002, III-B3).

    Args:
        f: the direction model's answer (3,) (usable: `usable_fix`).
        flip: M = diag(1, 1, −1) as a vector (3,) (the label's sign convention, `FusedEstimator`).

    Returns:
        d (3,), a unit vector; u^m = R̂_{i−1} d is the fix's measured direction.
    """
    return flip * f / torch.linalg.vector_norm(f).clamp_min(1e-12)
