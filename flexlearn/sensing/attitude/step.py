"""Per-sample attitude filter for the runtime: a TorchScript module (``torch.jit.script``-able, float64).

:class:`AttitudeStep` runs the kernels of :mod:`flexlearn.sensing.attitude.kernels` — the same functions
the offline path (:func:`flexlearn.sensing.attitude.offline.run_filter`, numba) compiles — on one sample per
call. The filter state and parameters are ``List[float]`` attributes that the kernels update in place: no
tensor ↔ list conversion of the state per sample (TorchScript saves list attributes with the module, so
``torch.jit.save`` / ``load`` carry the running state). Offline and step agree to round-off (tests:
< 1e-9 rad over a recording; the same arithmetic in float64).

Usage::

    step = torch.jit.script(AttitudeStep(rate_hz=285.7, use_mag=False))
    for g, a in samples:                      # gyr [rad/s] (3,), acc [m/s²] (3,), float64 tensors
        q = step(g, a)                        # (4,) q_{E_i S} (w, x, y, z), w ≥ 0
    step.bias(); step.rest(); step.skipped()  # [rad/s] (3,), bool, count of non-finite samples

With ``use_mag=True`` pass ``mag`` (3,) (µT by convention; only direction, norm and dip are used): the
output is q_{ES} in ENU (magnetic north). A sample with ``mag=None`` then only skips the heading update.
The output tensor is built with ``torch.scalar_tensor(x, dtype=float64)`` per component: in TorchScript
``torch.tensor(List[float], dtype=float64)`` and ``t[i] = x`` round x through float32.
"""

from typing import List, Optional

import torch
from torch import Tensor

from flexlearn.errors import CheckpointError
from flexlearn.sensing.attitude.kernels import output, step
from flexlearn.sensing.attitude.offline import AttitudeConfig, initial_state, make_params

__all__ = ["AttitudeStep", "exact_tensor"]

F64 = torch.float64


def exact_tensor(s: List[float]) -> Tensor:
    """float64 tensor (n,) of ``s`` without rounding (one ``scalar_tensor`` per value; for rare calls such as
    :meth:`AttitudeStep.state` — in TorchScript ``torch.tensor(List[float], dtype=float64)`` rounds through
    float32).

    Args:
        s: the values, e.g. the filter state.

    Returns:
        float64 tensor (n,) holding ``s`` exactly.
    """
    return torch.stack([torch.scalar_tensor(x, dtype=torch.float64) for x in s])


class AttitudeStep(torch.nn.Module):
    """One filter step per call: ``forward(gyr (3,), acc (3,), mag (3,) | None) → q (4,)`` float64.

    Attributes: ``p`` (kernel parameters), ``s`` (kernel state, updated in place), ``s0`` (start state for
    :meth:`reset`). Non-finite samples are skipped and counted, never propagated (see ``kernels.step``).
    """

    use_mag: bool
    s: List[float]
    s0: List[float]
    p: List[float]

    def __init__(self, rate_hz: float, config: Optional[AttitudeConfig] = None, use_mag: bool = False) -> None:
        super().__init__()
        p = make_params(rate_hz, config)
        self.p = [float(x) for x in p]
        self.s0 = [float(x) for x in initial_state(p)]
        self.s = list(self.s0)
        self.use_mag = bool(use_mag)

    def forward(self, gyr: Tensor, acc: Tensor, mag: Optional[Tensor] = None) -> Tensor:
        """One filter step (see the class docstring); non-finite samples are skipped and counted.

        Args:
            gyr: gyro (3,) [rad/s].
            acc: accelerometer (3,) [m/s²].
            mag: magnetometer (3,) [any unit, µT by convention], used only with ``use_mag``.

        Returns:
            q (4,) float64, unit with w ≥ 0.
        """
        g: List[float] = gyr.tolist()  # float32 or float64 tensors: Python floats (float64) either way
        a: List[float] = acc.tolist()
        if mag is not None and self.use_mag:
            m: List[float] = mag.tolist()
            step(self.s, self.p, g[0], g[1], g[2], a[0], a[1], a[2], m[0], m[1], m[2], True)
        else:
            step(self.s, self.p, g[0], g[1], g[2], a[0], a[1], a[2], 0.0, 0.0, 0.0, False)
        w, x, y, z = output(self.s, self.use_mag)
        return torch.stack(
            [
                torch.scalar_tensor(w, dtype=torch.float64),
                torch.scalar_tensor(x, dtype=torch.float64),
                torch.scalar_tensor(y, dtype=torch.float64),
                torch.scalar_tensor(z, dtype=torch.float64),
            ]
        )

    @torch.jit.export
    def reset(self) -> None:
        """Back to the start state (identity, zero bias, every low-pass in its start-up)."""
        for i in range(len(self.s0)):
            self.s[i] = self.s0[i]

    @torch.jit.export
    def state(self) -> Tensor:
        """The kernel state (``kernels.STATE_SIZE``,) float64 (layout in ``kernels``)."""
        return exact_tensor(self.s)

    @torch.jit.export
    def load_state(self, state: Tensor) -> None:
        """Continue from a kernel state (e.g. ``FilterResult.state`` of the offline path, or :meth:`state`).

        Args:
            state: the kernel state (``kernels.STATE_SIZE``,), any float dtype.

        Raises:
            CheckpointError: the state has another length (saved by another version of the filter); a scripted
                module raises it as ``torch.jit.Error`` naming the class.
        """
        v: List[float] = state.to(torch.float64).tolist()
        if len(v) != len(self.s):
            raise CheckpointError(
                "AttitudeStep.load_state: the state has "
                + str(len(v))
                + " values, this filter's has "
                + str(len(self.s))
                + " (a state saved by another version of the filter)"
            )
        for i in range(len(v)):
            self.s[i] = v[i]

    @torch.jit.export
    def bias(self) -> Tensor:
        """Gyro bias estimate (3,) [rad/s]."""
        return exact_tensor(self.s[12:15])

    @torch.jit.export
    def rest(self) -> bool:
        """Rest detected at the last sample."""
        return self.s[9] > 0.5

    @torch.jit.export
    def mag_disturbed(self) -> bool:
        """Magnetic disturbance detected at the last sample (9-axis)."""
        return self.s[11] > 0.5

    @torch.jit.export
    def skipped(self) -> int:
        """Samples skipped so far because a value was NaN or infinite."""
        return int(self.s[24])
