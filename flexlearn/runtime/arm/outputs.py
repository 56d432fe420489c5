"""What one step of the flexible-arm controller returns (seed 000, §V-B): the fault bits of its fault code and the
layout of its packed state. Shared by the scripted controller (`flexlearn.runtime.arm.controller`), its
`torch.export` twin (`flexlearn.runtime.arm.graph`) and the export metadata (`flexlearn.runtime.arm.export`)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "FAULT_LOST_FRAME",
    "FAULT_NONFINITE",
    "FAULT_SATURATED",
    "FAULT_TORQUE_LIMIT",
    "FAULT_BAD_TORQUE",
    "FAULT_BAD_TIME",
    "FAULT_BITS",
    "state_layout",
]

FAULT_LOST_FRAME: Final[int] = 1  # frame of the wrong shape, empty or complex
FAULT_NONFINITE: Final[int] = 2  # NaN or inf sample
FAULT_SATURATED: Final[int] = 4  # |acc| ≥ acc_range or |gyr| ≥ gyr_range
FAULT_TORQUE_LIMIT: Final[int] = 8  # torque clamped to ±tau_max
FAULT_BAD_TORQUE: Final[int] = 16  # non-finite torque or state (held)
FAULT_BAD_TIME: Final[int] = 32  # non-finite time
FAULT_BITS: Final[dict[str, int]] = {
    "lost_frame": FAULT_LOST_FRAME,
    "nonfinite": FAULT_NONFINITE,
    "saturated": FAULT_SATURATED,
    "torque_limit": FAULT_TORQUE_LIMIT,
    "bad_torque": FAULT_BAD_TORQUE,
    "bad_time": FAULT_BAD_TIME,
}  # metadata names


def state_layout(n_modes_total: int) -> dict[str, list[int]]:
    """Slices of the packed state vector, by name.

    Args:
        n_modes_total: M, the number of modal coordinates of both links together.

    Returns:
        name → [start, stop) of θ (2) [rad], θ̇ (2) [rad/s], η (M), w(L) (2) [m], w′(L) (2), w″(0) (2) [1/m]
        (modal), pose (x, y [m], angle [rad]), θ_d (2) [rad], hub loads (the root moments from the measured link
        loads, :mod:`flexlearn.runtime.arm.load`) (2) [N m]; 17 + M entries in all.
    """
    M = n_modes_total
    names = [
        ("theta", 2),
        ("theta_rate", 2),
        ("eta", M),
        ("tip_deflection", 2),
        ("tip_slope", 2),
        ("base_curvature", 2),
        ("pose", 3),
        ("theta_desired", 2),
        ("hub_load", 2),
    ]
    out, o = {}, 0
    for k, m in names:
        out[k] = [o, o + m]
        o += m
    return out
