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

The rule is one branch-free function, `clock_step`, over a `ClockState` of tensors: `TimeBase` runs it for the
scripted modules (on its slow path only; the in-order test stays on Python floats), and the `torch.export` twin of
the estimator (`flexlearn.runtime.fusion.graph`) runs the same function on its buffers.
"""

import math
from typing import NamedTuple, Tuple

import torch
from torch import Tensor, nn

from .family import ConfigError as _FamilyBase  # flexlearn's error family inside flexlearn


class ClockSettingsError(_FamilyBase, ValueError):  # type: ignore[valid-type,misc]
    """A `TimeBase` setting is out of range (a ValueError for API callers)."""


NO_TIME = -1e300  # "no frame accepted yet" (τ_last of an empty stream)
RESYNC_FLAG_S = 1.0  # a resynchronised module flags its outputs for this long [s] (CLOCK_RESYNC)


class ClockState(NamedTuple):
    """The time base's state, float64 unless noted; S streams.

    Fields: ``offset`` () τ − t [s]; ``resyncs`` () int64 count; ``t_resync`` () τ of the last resync [s];
    per stream (S,): ``cand_first`` master time of the current run's first candidate [s], ``cand_prev`` of its
    latest [s], ``cand_last`` the stream's τ_last when that candidate came [s], ``cand_n`` the run's length (int64).
    """

    offset: Tensor
    resyncs: Tensor
    t_resync: Tensor
    cand_first: Tensor
    cand_prev: Tensor
    cand_last: Tensor
    cand_n: Tensor


def initial_clock_state(n_streams: int) -> ClockState:
    """A time base with no offset, no candidates and no resync.

    Args:
        n_streams: number of streams S.

    Returns:
        The `ClockState`.
    """
    f64 = torch.float64
    return ClockState(
        torch.zeros((), dtype=f64),
        torch.zeros((), dtype=torch.int64),
        torch.full((), -1e300, dtype=f64),  # NO_TIME
        torch.zeros(n_streams, dtype=f64),
        torch.zeros(n_streams, dtype=f64),
        torch.zeros(n_streams, dtype=f64),
        torch.zeros(n_streams, dtype=torch.int64),
    )


def clock_step(
    state: ClockState, k: int, t: Tensor, last: Tensor, latest: Tensor, active: Tensor, max_gap: float, confirm: int
) -> Tuple[Tensor, ClockState]:
    """The module docstring's rule for one frame of stream k, without data-dependent branches.

    Args:
        state: the time base before the frame.
        k: the stream's index.
        t: master time of the frame () [s].
        last: the stream's last accepted τ () [s] (`NO_TIME`: none).
        latest: the latest τ accepted on any stream () [s] (`NO_TIME`: none).
        active: () bool; where False the state is returned unchanged (the caller took its fast path).
        max_gap: largest accepted forward step of one stream [s].
        confirm: consecutive agreeing outliers that establish a new time base.

    Returns:
        ``(τ () [s] to accept the frame, or NaN to drop it; the state after it)``.
    """
    finite = torch.isfinite(t)
    tau = t + state.offset
    first = last <= -1e299
    in_order = torch.where(
        first, (latest <= -1e299) | ((tau - latest).abs() <= max_gap), (tau > last) & (tau - last <= max_gap)
    )
    accept = in_order & finite
    repeat = ~first & ~accept & (tau == last) & finite
    candidate = finite & ~accept & ~repeat & active
    n = state.cand_n[k]
    run = (n > 0) & (last == state.cand_last[k])
    step = t - state.cand_prev[k]
    stay = run & (step == 0.0)  # a repeated candidate neither agrees nor breaks the run
    grow = run & (step > 0.0) & (step <= max_gap)
    n_new = torch.where(grow, n + 1, torch.ones_like(n))
    first_new = torch.where(grow, state.cand_first[k], t)
    update = candidate & ~stay
    resync = update & (n_new >= confirm)
    offset = torch.where(resync, torch.maximum(latest, last) - first_new, state.offset)
    tau_resync = t + offset
    stream = (torch.arange(state.cand_n.shape[0]) == k) & update
    cand_n = torch.where(stream & ~resync, n_new, state.cand_n)
    cand_n = torch.where(resync | ((torch.arange(cand_n.shape[0]) == k) & accept & active), 0, cand_n)
    new = ClockState(
        offset,
        state.resyncs + resync.to(torch.int64),
        torch.where(resync, tau_resync, state.t_resync),
        torch.where(stream, first_new, state.cand_first),
        torch.where(stream, t, state.cand_prev),
        torch.where(stream, last, state.cand_last),
        cand_n,
    )
    out = torch.where(accept, tau, torch.where(resync, tau_resync, torch.full_like(tau, math.nan)))
    return out, new


class TimeBase(nn.Module):
    """Shared offset and per-stream candidate state, TorchScript-compatible; `clock_step` is the rule.

    Args:
        n_streams: number of independent streams (frame kinds) of the module.
        max_gap: largest accepted forward step of one stream [s]; a larger one is an outlier.
        confirm: consecutive agreeing outliers (≥ 2) that establish a new time base.

    The state is ``state`` (a `ClockState`); ``offset`` [s], ``resyncs`` and ``t_resync`` [s] are its Python
    copies, read on every frame by the modules' fast paths and rewritten by each `check`.
    """

    state: ClockState

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
        self.state = initial_clock_state(self.n_streams)
        self.offset = 0.0
        self.resyncs = 0
        self.t_resync = NO_TIME

    @torch.jit.export
    def reset(self) -> None:
        """Forget the offset, the candidates and the resync count (a new session)."""
        self.state = initial_clock_state(self.n_streams)
        self.offset = 0.0
        self.resyncs = 0
        self.t_resync = -1e300  # NO_TIME

    @torch.jit.export
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

    @torch.jit.export
    def check(self, k: int, t: float, last: float, latest: float) -> float:
        """Slow path of stream k for master time t [s] (`clock_step`).

        Args:
            k: the stream's index.
            t: master time of the frame [s].
            last: the stream's last accepted τ [s] (`NO_TIME`: none).
            latest: the latest τ accepted on any stream [s] (`NO_TIME`: none).

        Returns:
            τ [s] to accept the frame (a resync may have set a new offset), or NaN to drop it.
        """
        f64 = torch.float64
        tau, self.state = clock_step(
            self.state,
            k,
            torch.full((), t, dtype=f64),
            torch.full((), last, dtype=f64),
            torch.full((), latest, dtype=f64),
            torch.ones((), dtype=torch.bool),
            self.max_gap,
            self.confirm,
        )
        self.offset = float(self.state.offset)
        self.resyncs = int(self.state.resyncs)
        self.t_resync = float(self.state.t_resync)
        return float(tau)
