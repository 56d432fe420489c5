"""Per-segment flag bits of the fused shape estimator (`flexlearn.runtime.fusion.estimator`), one int64 word each.

A flagged segment keeps its last valid state; the estimator never outputs NaN. The same bits are written by the
Pi runner (`scripts/pi_runner.py`, documented in docs/raspberry_pi.md).
"""

from __future__ import annotations

import enum
from typing import List

BAD_QUAT, STALE_QUAT, BAD_MAG, REPEATED_MAG, TIME_ORDER, MAG_REJECTED, NO_FIX, NO_REFERENCE = (
    1,
    2,
    4,
    8,
    16,
    32,
    64,
    128,
)
CLOCK_RESYNC = 256  # the master's clock restarted or jumped: the estimator took a new time base (time_base.py)
LOW_CONFIDENCE = 512  # with MAG_REJECTED: the fix was rejected by the confidence source (fusion/confidence.py)
FLAG_BITS = {
    "BAD_QUAT": BAD_QUAT,
    "STALE_QUAT": STALE_QUAT,
    "BAD_MAG": BAD_MAG,
    "REPEATED_MAG": REPEATED_MAG,
    "TIME_ORDER": TIME_ORDER,
    "MAG_REJECTED": MAG_REJECTED,
    "NO_FIX": NO_FIX,
    "NO_REFERENCE": NO_REFERENCE,
    "CLOCK_RESYNC": CLOCK_RESYNC,
    "LOW_CONFIDENCE": LOW_CONFIDENCE,
}  # by name: the TorchScript constants of `FusedEstimator`


class FlagBit(enum.Enum):
    """The bits as an enum: TorchScript reads ``FlagBit.BAD_MAG.value`` in a free function as a constant (a plain
    module-level int it refuses); `flexlearn.runtime.fusion.frame_rules` uses them."""

    BAD_QUAT = BAD_QUAT
    STALE_QUAT = STALE_QUAT
    BAD_MAG = BAD_MAG
    REPEATED_MAG = REPEATED_MAG
    TIME_ORDER = TIME_ORDER
    MAG_REJECTED = MAG_REJECTED
    NO_FIX = NO_FIX
    NO_REFERENCE = NO_REFERENCE
    CLOCK_RESYNC = CLOCK_RESYNC
    LOW_CONFIDENCE = LOW_CONFIDENCE


FLAG_NAMES = {
    BAD_QUAT: "bad_quat",
    STALE_QUAT: "stale_quat",
    BAD_MAG: "bad_mag",
    REPEATED_MAG: "repeated_mag",
    TIME_ORDER: "time_order",
    MAG_REJECTED: "mag_rejected",
    NO_FIX: "no_fix",
    NO_REFERENCE: "no_reference",
    CLOCK_RESYNC: "clock_resync",
    LOW_CONFIDENCE: "low_confidence",
}


def decode_flags(flags: int) -> List[str]:
    """Names of the bits set in one segment's flag word.

    Args:
        flags: the segment's flag word (bit mask of `FLAG_BITS`).

    Returns:
        The names (`FLAG_NAMES`) of the bits set, in bit order.
    """
    return [name for bit, name in FLAG_NAMES.items() if flags & bit]
