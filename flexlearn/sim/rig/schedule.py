"""Acquisition schedule of the sweep (seed 002, III-B1/B2): pose slots, coil pulses, sensor clocks, coil current.

Each pose owns a fixed time slot: min-jerk move from the previous pose, reported stationary (t_start), hold delay,
then coil-off window / pulse pairs until the firmware has ``min_fresh`` fresh coil-on polls at least ``settle``
after switch-on (≤ ``max_pulses``), a final coil-off window (t_end), and idle until the next slot. Fixed slots keep
everything vectorised over poses. The magnetometer converts on a free-running clock; the master polls it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flexlearn.sim.rig_config import RigConfig

__all__ = ["Clocks", "Schedule", "build_schedule", "coil_integral", "slot_length"]


@dataclass
class Clocks:
    """Magnetometer conversion clock (ready at c0 + n·Tc) and the master's poll instants."""

    c0: float
    tc: float
    poll_t: np.ndarray  # (N_p,) [s]
    poll_period: float

    def conversion(self, t: np.ndarray) -> np.ndarray:
        """Index of the latest conversion ready at time t (−1 before the first).

        Args:
            t: times [s], any shape.

        Returns:
            Conversion indices (int64), shaped like ``t``.
        """
        return np.floor((t - self.c0) / self.tc).astype(np.int64)

    def count_fresh(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Number of polls in [a, b] (per row) that return a new conversion (what the firmware counts).

        Args:
            a: window starts (R,) [s].
            b: window ends (R,) [s].

        Returns:
            Fresh poll counts (R,).
        """
        width = int(math.ceil(float(np.max(b - a, initial=0.0)) / self.poll_period)) + 4
        j = np.floor((a - self.poll_t[0]) / self.poll_period).astype(np.int64)[:, None] - 1 + np.arange(width)
        valid = (j >= 1) & (j < len(self.poll_t))
        j = np.clip(j, 1, len(self.poll_t) - 1)
        t = self.poll_t[j]
        fresh = self.conversion(t) != self.conversion(self.poll_t[j - 1])
        inside = (t >= a[:, None]) & (t <= b[:, None])
        return (fresh & inside & valid).sum(axis=1)


@dataclass
class Schedule:
    """What the rig controller and the coil firmware did, per pose (times [s])."""

    slot: float
    move_dur: np.ndarray  # (P,)
    t_start: np.ndarray  # (P,)
    t_end: np.ndarray  # (P,)
    t_on: np.ndarray  # (P, K), NaN where the pulse was not fired
    t_off: np.ndarray  # (P, K)
    fresh: np.ndarray  # (P,) fresh settled coil-on polls counted by the firmware
    t_total: float


def slot_length(cfg: RigConfig) -> float:
    """Length [s] of one pose slot: move, hold delay, the most pulses the firmware may fire, last off window.

    Args:
        cfg: the rig configuration (``acquisition`` and ``faults.short_pulse``).

    Returns:
        The slot length [s].
    """
    acq, longest = cfg.acquisition, max(cfg.acquisition.pulse, 1.25 * cfg.faults.short_pulse)
    per_pulse = acq.off_window + longest + 2 * acq.switch_jitter
    return (
        acq.move_duration
        + acq.move_jitter
        + acq.hold_delay
        + acq.max_pulses * per_pulse
        + acq.off_window
        + 2 * acq.poll_period
    )


def build_schedule(cfg: RigConfig, short: np.ndarray, rng: np.random.Generator) -> tuple[Schedule, Clocks]:
    """Pose slots, coil pulses (firmware rule of seed 002 III-B1/B2) and the sensor clocks.

    Args:
        cfg: the rig configuration (``n_poses``, ``acquisition``, magnetometer rate, faults).
        short: poses with faulty short pulses (P,) bool.
        rng: generator of the clocks' phases and the jitters.

    Returns:
        (schedule, clocks).
    """
    acq, p, kmax = cfg.acquisition, cfg.n_poses, cfg.acquisition.max_pulses
    slot = slot_length(cfg)
    t_total = p * slot
    tc = 1.0 / cfg.magnetometer.rate
    c0 = rng.uniform(0.0, tc)
    q0 = c0 + rng.uniform(0.0, acq.poll_period)
    n_poll = int(math.floor((t_total - q0) / acq.poll_period)) + 1
    poll_t = q0 + acq.poll_period * np.arange(n_poll) + rng.uniform(-acq.poll_jitter, acq.poll_jitter, n_poll)
    clocks = Clocks(c0, tc, poll_t, acq.poll_period)

    move_dur = acq.move_duration + rng.uniform(-acq.move_jitter, acq.move_jitter, p)
    t_start = np.arange(p) * slot + move_dur
    jit = rng.uniform(-acq.switch_jitter, acq.switch_jitter, (p, kmax, 2))
    length = np.where(short[:, None], cfg.faults.short_pulse * rng.uniform(0.75, 1.25, (p, kmax)), acq.pulse)
    t_on = np.full((p, kmax), np.nan)
    t_off = np.full((p, kmax), np.nan)
    fresh = np.zeros(p, dtype=np.int64)
    active = np.ones(p, dtype=bool)
    last_off = t_start.copy()
    cursor = t_start + acq.hold_delay + acq.off_window
    for k in range(kmax):  # the firmware loop: at most max_pulses pulses
        on = cursor + jit[:, k, 0]
        off = on + length[:, k] + jit[:, k, 1]
        t_on[active, k], t_off[active, k] = on[active], off[active]
        fresh += np.where(active, clocks.count_fresh(on + acq.settle, off), 0)
        last_off = np.where(active, off, last_off)
        active &= fresh < acq.min_fresh
        cursor = off + acq.off_window
    t_end = last_off + acq.off_window
    return Schedule(slot, move_dur, t_start, t_end, t_on, t_off, fresh, t_total), clocks


def coil_integral(t: np.ndarray, ts: np.ndarray, state: np.ndarray, tau: float) -> np.ndarray:
    """F(t) = ∫_{−∞}^t c(t′) dt′ [s] of the normalised coil current c ∈ [0, 1] (first-order settling).

    After switch k (time ts[k], new state s_k, previous state s_{k−1}): c = s_k + (s_{k−1} − s_k) e^{−(t−t_k)/τ}.

    Args:
        t: times (N,) [s].
        ts: switch instants (K,) [s], increasing.
        state: coil state after each switch (K,) (0 off, 1 on); off before the first.
        tau: settling time constant τ [s].

    Returns:
        F(t) (N,) [s].
    """
    if ts.size == 0:
        return np.zeros_like(t)
    prev = np.concatenate([[0.0], state[:-1]])

    def partial(k: np.ndarray, d: np.ndarray) -> np.ndarray:
        return state[k] * d + (prev[k] - state[k]) * tau * -np.expm1(-d / tau)

    idx = np.arange(ts.size - 1)
    cum = np.concatenate([[0.0], np.cumsum(partial(idx, np.diff(ts)))])
    k = np.searchsorted(ts, t, side="right") - 1
    kk = np.maximum(k, 0)
    return np.where(k >= 0, cum[kk] + partial(kk, t - ts[kk]), 0.0)
