"""Time base of the runtime modules: the master's clock → a monotonic module time, with clock-restart and outlier
detection (used by `flexlearn.runtime.fusion.estimator.FusedEstimator` and
`flexlearn.runtime.pikit.height_control.HeightPID`).

The master (ESP32) stamps every frame with its monotonic clock t [s]. Two faults freeze a module that only accepts
increasing times: one frame with a wild time (t = 1e9: every later frame looks old) and a restart of the master's
clock at 0 (ESP32 reset: every later frame looks old until the clock passes its old value). `TimeBase` maps t onto
the module time τ = t + offset [s]. A *stream* is a sequence of frames that must increase on its own (attitude
sweeps; magnetometer rounds; controller steps); every stream of a module shares the offset. Per stream:

* in order — τ > τ_last and τ − τ_last ≤ ``max_gap``: accepted (the caller tests this inline, the fast path);
* a repeated time (τ = τ_last) or a non-finite t: dropped (the caller flags it), never a new time base;
* otherwise an *outlier* (not after τ_last, or more than ``max_gap`` after it): dropped and kept as a candidate
  of a new time base. ``confirm`` consecutive candidates of one stream, each after the previous by at most
  ``max_gap`` (no frame of the stream accepted in between), are a new time base: the offset is set so that the
  first candidate maps to the latest τ accepted on any stream (as if the candidates followed immediately), the
  current frame is accepted, ``resyncs`` is incremented and ``t_resync`` records its τ.

Times that a module stores (τ) therefore stay valid across a resync: no state is lost, and a single outlier costs
one frame while a restarted clock costs ``confirm`` − 1 frames. A legitimate pause longer than ``max_gap`` costs
``confirm`` − 1 frames as well (and is shortened to zero in τ).
"""

import math
from typing import List

import torch
from torch import nn

from .family import ConfigError as _FamilyBase  # flexlearn's error family inside flexlearn


class ClockSettingsError(_FamilyBase, ValueError):  # type: ignore[valid-type,misc]
    """A `TimeBase` setting is out of range (a ValueError for API callers)."""


NO_TIME = -1e300  # "no frame accepted yet" (τ_last of an empty stream)
RESYNC_FLAG_S = 1.0  # a resynchronised module flags its outputs for this long [s] (CLOCK_RESYNC)


class TimeBase(nn.Module):
    """Shared offset and per-stream candidate state; TorchScript-compatible (plain float/int attributes).

    Args:
        n_streams: number of independent streams (frame kinds) of the module.
        max_gap: largest accepted forward step of one stream [s]; a larger one is an outlier.
        confirm: consecutive agreeing outliers (≥ 2) that establish a new time base.
    """

    cand_first: List[float]
    cand_prev: List[float]
    cand_last: List[float]
    cand_n: List[int]

    def __init__(self, n_streams: int = 1, max_gap: float = 2.0, confirm: int = 3) -> None:
        super().__init__()
        if n_streams < 1:
            raise ClockSettingsError(f"n_streams = {n_streams}: expected ≥ 1")
        if not (math.isfinite(max_gap) and max_gap > 0.0):
            raise ClockSettingsError(f"max_gap = {max_gap}: expected a finite time > 0 [s]")
        if confirm < 2:
            raise ClockSettingsError(f"confirm = {confirm}: expected ≥ 2 frames")
        self.n_streams = int(n_streams)
        self.max_gap = float(max_gap)
        self.confirm = int(confirm)
        self.offset = 0.0
        self.resyncs = 0
        self.t_resync = NO_TIME
        self.cand_first = [0.0] * self.n_streams  # master time t of the run's first candidate [s]
        self.cand_prev = [0.0] * self.n_streams  # master time t of the run's latest candidate [s]
        self.cand_last = [0.0] * self.n_streams  # the stream's τ_last when that candidate came [s]
        self.cand_n = [0] * self.n_streams  # length of the current run of candidates

    @torch.jit.export
    def reset(self) -> None:
        """Forget the offset, the candidates and the resync count (a new session)."""
        self.offset = 0.0
        self.resyncs = 0
        self.t_resync = -1e300  # NO_TIME
        for k in range(self.n_streams):
            self.cand_n[k] = 0

    def in_order(self, t: float, last: float) -> bool:
        """Fast-path test: τ = t + offset after ``last`` [s] by at most ``max_gap`` (False for NaN and ±inf).

        Args:
            t: master time of the frame [s].
            last: the stream's last accepted τ [s].

        Returns:
            Whether the frame is in order.
        """
        tau = t + self.offset
        return tau > last and tau - last <= self.max_gap

    def check(self, k: int, t: float, last: float, latest: float) -> float:
        """Slow path of stream k for master time t [s]: returns τ [s] to accept the frame, or NaN to drop it.

        ``last``: the stream's last accepted τ (`NO_TIME`: none); ``latest``: the latest τ accepted on any stream.

        Args:
            k: the stream's index.
            t: master time of the frame [s].
            last: the stream's last accepted τ [s] (`NO_TIME`: none).
            latest: the latest τ accepted on any stream [s] (`NO_TIME`: none).

        Returns:
            τ [s] to accept the frame (a resync may have set a new offset), or NaN to drop it.
        """
        if not math.isfinite(t):
            return math.nan
        tau = t + self.offset
        if last <= -1e299:  # first frame of this stream: compare with the others
            if latest <= -1e299 or abs(tau - latest) <= self.max_gap:
                self.cand_n[k] = 0
                return tau
        elif tau > last and tau - last <= self.max_gap:
            self.cand_n[k] = 0
            return tau
        elif tau == last:
            return math.nan  # repeated time
        return self._candidate(k, t, last, max(latest, last))

    def _candidate(self, k: int, t: float, last: float, ref: float) -> float:
        """Record outlier t of stream k; after ``confirm`` agreeing ones, resync so that the first maps to ``ref``."""
        n = self.cand_n[k]
        run = n > 0 and last == self.cand_last[k]
        step = t - self.cand_prev[k]
        if run and step == 0.0:
            return math.nan  # repeated candidate: neither agrees nor breaks the run
        if run and step > 0.0 and step <= self.max_gap:
            n += 1
        else:
            n = 1
            self.cand_first[k] = t
        self.cand_n[k] = n
        self.cand_prev[k] = t
        self.cand_last[k] = last
        if n < self.confirm:
            return math.nan
        self.offset = ref - self.cand_first[k]
        self.resyncs += 1
        for j in range(self.n_streams):
            self.cand_n[j] = 0
        tau = t + self.offset
        self.t_resync = tau
        return tau
