"""Per-sample attitude filter for the runtime: a TorchScript module (``torch.jit.script``-able, float64).

:class:`AttitudeStep` runs the kernels of :mod:`flexlearn.sensing.attitude_kernels` — the same functions
the offline path (:func:`flexlearn.sensing.attitude_filter.run_filter`, numba) compiles — on one sample per
call, with the filter state and parameters held as float64 buffers (so ``state_dict``, ``to()`` and
TorchScript export carry them). Offline and step agree to round-off (tests: < 1e-9 rad over a recording).

Usage::

    step = torch.jit.script(AttitudeStep(rate_hz=285.7, use_mag=False))
    for g, a in samples:                      # gyr [rad/s] (3,), acc [m/s²] (3,), float64 tensors
        q = step(g, a)                        # (4,) q_{E_i S} (w, x, y, z), w ≥ 0
    step.bias(); step.rest(); step.skipped()  # [rad/s] (3,), bool, count of non-finite samples

With ``use_mag=True`` pass ``mag`` (3,) (µT by convention; only direction, norm and dip are used): the
output is q_{ES} in ENU (magnetic north). A sample with ``mag=None`` then only skips the heading update.
"""

from typing import List, Optional

import torch
from torch import Tensor

from flexlearn.sensing.attitude_filter import AttitudeConfig, initial_state, make_params
from flexlearn.sensing.attitude_kernels import STATE_SIZE, output, step

__all__ = ["AttitudeStep"]

PERSIST = 134  # state slots kept between samples; the rest is scratch of the Kalman update


def exact_tensor(s: List[float]) -> Tensor:
    """float64 tensor of ``s`` without rounding. (In TorchScript ``torch.tensor(List[float], dtype=float64)``
    goes through the default dtype, float32; so each value is split exactly into three float32-exact parts,
    Veltkamp's split with 2²⁹ + 1: ``x = hi + mid + lo``, and the parts are summed in float64.)"""
    hi: List[float] = []
    mid: List[float] = []
    lo: List[float] = []
    for x in s:
        c = 536870913.0 * x
        h = c - (c - x)
        r = x - h
        c2 = 536870913.0 * r
        m = c2 - (c2 - r)
        hi.append(h)
        mid.append(m)
        lo.append(r - m)
    return (torch.tensor(hi, dtype=torch.float64) + torch.tensor(mid, dtype=torch.float64)) \
        + torch.tensor(lo, dtype=torch.float64)


class AttitudeStep(torch.nn.Module):
    """One filter step per call: ``forward(gyr (3,), acc (3,), mag (3,) | None) → q (4,)`` float64.

    Buffers: ``params`` (kernel parameters), ``state`` (kernel state), ``state0`` (start state for
    :meth:`reset`). Non-finite samples are skipped and counted, never propagated (see ``step``).
    """

    use_mag: bool
    scratch: List[float]

    def __init__(self, rate_hz: float, config: Optional[AttitudeConfig] = None, use_mag: bool = False) -> None:
        super().__init__()
        p = make_params(rate_hz, config)
        s0 = torch.as_tensor(initial_state(p)[:PERSIST], dtype=torch.float64)
        self.register_buffer("params", torch.as_tensor(p, dtype=torch.float64))
        self.register_buffer("state", s0.clone())
        self.register_buffer("state0", s0)
        self.use_mag = bool(use_mag)
        self.scratch: List[float] = [0.0] * (STATE_SIZE - PERSIST)

    def forward(self, gyr: Tensor, acc: Tensor, mag: Optional[Tensor] = None) -> Tensor:
        s: List[float] = self.state.tolist()
        s.extend(self.scratch)
        p: List[float] = self.params.tolist()
        g: List[float] = gyr.to(torch.float64).tolist()
        a: List[float] = acc.to(torch.float64).tolist()
        upd = False
        m: List[float] = [0.0, 0.0, 0.0]
        if mag is not None and self.use_mag:
            mm: List[float] = mag.to(torch.float64).tolist()
            m = mm
            upd = True
        step(s, p, g[0], g[1], g[2], a[0], a[1], a[2], m[0], m[1], m[2], upd)
        q = output(s, self.use_mag)
        self.state.copy_(exact_tensor(s[: self.state.numel()]))
        return exact_tensor([q[0], q[1], q[2], q[3]])

    @torch.jit.export
    def reset(self) -> None:
        """Back to the start state (identity, zero bias, every low-pass in its start-up)."""
        self.state.copy_(self.state0)

    @torch.jit.export
    def bias(self) -> Tensor:
        """Gyro bias estimate (3,) [rad/s]."""
        return self.state[12:15].clone()

    @torch.jit.export
    def rest(self) -> bool:
        """Rest detected at the last sample."""
        return bool(self.state[9] > 0.5)

    @torch.jit.export
    def mag_disturbed(self) -> bool:
        """Magnetic disturbance detected at the last sample (9-axis)."""
        return bool(self.state[11] > 0.5)

    @torch.jit.export
    def skipped(self) -> int:
        """Samples skipped so far because a value was NaN or infinite."""
        return int(self.state[24])
