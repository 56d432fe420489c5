"""A fault-laden IMU frame stream for the two-link flexible-arm controller (seed 000): the parity checks of
`flexlearn.runtime.arm.controller`, `flexlearn.runtime.arm.graph`, their exported programs and
``scripts/bench_arm_controller.py`` all run this stream."""

from __future__ import annotations

import math
from typing import Iterator, Sequence, Tuple

import torch

from flexlearn.sensing.imu import GRAVITY

__all__ = ["static_arm_frame", "arm_fault_stream"]


def static_arm_frame(theta: Sequence[float] = (0.2, -0.6), noise: float = 0.02, seed: int = 0) -> torch.Tensor:
    """(5, 6) float64 frame [acc m/s² | gyr rad/s] of a rigid arm at rest at joint angles θ (IMUs 2 + 3: gravity
    only) plus Gaussian noise of ``noise`` per sample (generator seeded with ``seed``).

    Args:
        theta: joint angles (θ₁, θ₂) [rad]; IMUs 0-1 sit on link 1 (θ₁), IMUs 2-4 on link 2 (θ₁ + θ₂).
        noise: standard deviation of the noise added to every value (m/s² and rad/s alike).
        seed: seed of the noise generator.

    Returns:
        The frame (5, 6) float64.
    """
    angs = [theta[0]] * 2 + [theta[0] + theta[1]] * 3
    fr = torch.zeros(5, 6, dtype=torch.float64)
    for k, a in enumerate(angs):
        fr[k, 1], fr[k, 2] = GRAVITY * math.sin(a), GRAVITY * math.cos(a)
    g = torch.Generator().manual_seed(seed)
    return fr + noise * torch.randn(fr.shape, generator=g, dtype=torch.float64)


def arm_fault_stream(steps: int = 1600) -> Iterator[Tuple[torch.Tensor, float]]:
    """(frame, t [s]) at 1 kHz through the rest period (gyro calibration, t < 1 s) into the motion, one step in two
    bad: lost frames (3 rows), NaN and inf samples, saturated accelerometers and gyros, NaN times.

    Args:
        steps: number of frames to yield (1 ms apart).

    Yields:
        (frame, t): the frame (5, 6) float64 (or (3, 6) when lost) and its time [s] (NaN when faulty).
    """
    g = torch.Generator().manual_seed(11)
    for k in range(steps):
        t, fr = k * 1e-3, static_arm_frame(seed=k)
        kind = int(torch.randint(0, 12, (1,), generator=g))
        if kind == 0:
            fr = fr[:3]
        elif kind == 1:
            fr[int(torch.randint(0, 5, (1,), generator=g)), int(torch.randint(0, 6, (1,), generator=g))] = math.nan
        elif kind == 2:
            fr[2, 1] = math.inf
        elif kind == 3:
            fr[4, 2] = 7.0 * GRAVITY
        elif kind == 4:
            fr[0, 3] = 10.0
        elif kind == 5:
            t = math.nan
        yield fr, t
