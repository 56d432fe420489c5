"""Tip-height PID of seed 002, III-C, as a scriptable stateful module.

    v = k_p e + k_i I_h − k_d ḣ_f,   İ_h = e · 1{|e| < i_band},   e = h* − (h − h_ref)

with ḣ_f the first-order low-pass filtered height derivative (time constant ``tau_d``), conditional integration
(no windup while slack is taken up), |v| ≤ ``v_max`` and the *increase* of |v| limited to ``a_max`` per second
(decreases are immediate), and no unwinding past neutral (v < 0 is zeroed when the spool is at or below its
neutral position, which would reverse the height response). Trial protocol: the first ``settle`` seconds run at
zero command and set the references h_ref and the spool neutral (medians); the trial is rejected (zero command
forever, status REJECTED) if h_ref exceeds the straight configuration by more than ``reject_above`` (5 mm).
Units: m, m/s (tendon velocity at the spool), s. Non-finite height or spool inputs command zero (status HOLD).

Robustness (the controller never outputs NaN): a non-finite target (NaN marks "missing" in both frame protocols)
or one of 1 km or more is refused by `set_target`, which keeps the last valid target, counts ``bad_targets`` and
sets ``target_rejected``; while that is set an active controller reports status TARGET_REJECTED instead of ACTIVE,
until a valid target arrives. Frame times go through `flexlearn.runtime.pikit.time_base.TimeBase`: a single outlier time
(far future, or not after the previous step) is held (HOLD, zero command), and a restarted master clock is taken
as a new time base after ``clock_confirm`` agreeing steps, keeping the controller state. Any non-finite
intermediate (e.g. a derivative over a vanishing step) zeroes the command, the integral and the derivative (HOLD).
"""

import dataclasses
import math
from typing import List, Tuple

import torch
from torch import nn

from .family import ConfigError as _SettingsBase  # flexlearn's error family inside flexlearn
from .time_base import TimeBase

__all__ = [
    "HeightPID",
    "HeightPIDSettings",
    "HeightPIDSettingsError",
    "SETTLING",
    "ACTIVE",
    "REJECTED",
    "HOLD",
    "TARGET_REJECTED",
    "STATUS_NAMES",
]

SETTLING, ACTIVE, REJECTED, HOLD, TARGET_REJECTED = 0, 1, 2, 3, 4
STATUS_NAMES = {
    SETTLING: "settling",
    ACTIVE: "active",
    REJECTED: "rejected",
    HOLD: "hold",
    TARGET_REJECTED: "target_rejected",
}


class HeightPIDSettingsError(_SettingsBase, ValueError):  # type: ignore[valid-type,misc]
    """A `HeightPIDSettings` value is not a finite number (a ValueError for API callers)."""


@dataclasses.dataclass(frozen=True)
class HeightPIDSettings:
    """Gains, limits and trial protocol of `HeightPID` (module docstring; units m, m/s, s).

    Args:
        target: tip-height target h* [m] above the straight configuration.
        kp: proportional gain [1/s].
        ki: integral gain [1/s²].
        kd: derivative gain [-].
        tau_d: time constant of the derivative's low-pass [s].
        i_band: the integral runs only while |e| < i_band [m].
        v_max: speed limit |v| ≤ v_max [m/s].
        a_max: largest increase of |v| per second [m/s²].
        settle: zero-command settling time that sets h_ref and the spool neutral [s].
        reject_above: the trial is rejected when h_ref exceeds this [m].
        clock_jump: the outlier-time rule of `TimeBase` [s].
        clock_confirm: agreeing outliers that establish a new time base.

    Raises:
        HeightPIDSettingsError: a value of the first ten is not finite.
    """

    target: float = 0.040
    kp: float = 0.8
    ki: float = 0.4
    kd: float = 0.05
    tau_d: float = 0.3
    i_band: float = 0.010
    v_max: float = 0.015
    a_max: float = 0.02
    settle: float = 2.0
    reject_above: float = 0.005
    clock_jump: float = 2.0
    clock_confirm: int = 3

    def __post_init__(self) -> None:
        """Refuse non-finite gains, limits and times (the clock rule is checked by `TimeBase`)."""
        for field in dataclasses.fields(self)[:10]:
            val = getattr(self, field.name)
            if not math.isfinite(float(val)):
                raise HeightPIDSettingsError(f"HeightPID: {field.name} = {val}: expected a finite number")


class HeightPID(nn.Module):
    """Stateful controller; `step(t, h, spool)` → (v [m/s], status). Every method is TorchScript-compatible.

    Status: SETTLING, ACTIVE, REJECTED (trial refused), HOLD (bad input or time: zero command), TARGET_REJECTED
    (active on the last valid target after a refused one).

    Args:
        settings: gains, limits, trial protocol and clock rule (`HeightPIDSettings`).
    """

    h_buf: List[float]
    s_buf: List[float]

    def __init__(self, settings: HeightPIDSettings = HeightPIDSettings()) -> None:
        super().__init__()
        self.target = float(settings.target)
        self.kp, self.ki, self.kd = float(settings.kp), float(settings.ki), float(settings.kd)
        self.tau_d = float(settings.tau_d)
        self.i_band = float(settings.i_band)
        self.v_max = float(settings.v_max)
        self.a_max = float(settings.a_max)
        self.settle = float(settings.settle)
        self.reject_above = float(settings.reject_above)
        self.h_ref = 0.0
        self.spool_neutral = 0.0
        self.target_rejected = False
        self.bad_targets = 0
        self.clock = TimeBase(1, float(settings.clock_jump), int(settings.clock_confirm))
        self.h_buf = []
        self.s_buf = []
        self.reset()  # the trial state: one code path with `reset`

    @torch.jit.export
    def reset(self) -> None:
        """Start a new trial (SETTLING): forget times, integral, derivative, command, settling samples and the clock
        offset; the target, its refusals and the last trial's references stay until the new settling ends."""
        self.t0 = float("nan")
        self.t_prev = float("nan")
        self.h_prev = float("nan")
        self.integral = 0.0
        self.hdot = 0.0
        self.v_prev = 0.0
        self.status = 0  # SETTLING
        self.h_buf.clear()
        self.s_buf.clear()
        self.clock.reset()

    @torch.jit.export
    def set_target(self, target: float) -> bool:
        """New tip-height target [m]; a non-finite one (or |target| ≥ 1e3 m) is refused: the last valid target
        stays, ``bad_targets`` counts it and steps report TARGET_REJECTED until a valid one. Returns acceptance.

        Args:
            target: the tip-height target h* [m] (relative to the settled reference h_ref).

        Returns:
            Whether the target was accepted.
        """
        if not (math.isfinite(target) and abs(target) < 1e3):
            self.target_rejected = True
            self.bad_targets += 1
            return False
        self.target = target
        self.target_rejected = False
        return True

    def _median(self, x: List[float]) -> float:
        y = sorted(x)
        n = len(y)
        if n == 0:
            return 0.0
        return y[n // 2] if n % 2 == 1 else 0.5 * (y[n // 2 - 1] + y[n // 2])

    @torch.jit.export
    def step(self, t: float, h: float, spool: float) -> Tuple[float, int]:
        """Command for estimated tip height h [m] (above straight) and spool position [m of tendon] at time t [s].

        Args:
            t: time of the step [s].
            h: estimated tip height [m] above the straight configuration.
            spool: spool position [m of tendon].

        Returns:
            ``(v [m/s], status)``: the tendon velocity command and the status (SETTLING, ACTIVE, REJECTED, HOLD or
            TARGET_REJECTED).
        """
        if self.status == 2:  # REJECTED
            return 0.0, 2
        if not (math.isfinite(h) and math.isfinite(spool) and abs(h) < 1e3):
            self.v_prev = 0.0
            return 0.0, 3  # HOLD: bad input
        last = self.t_prev if math.isfinite(self.t_prev) else -1e300
        if not self.clock.in_order(t, last):
            t = self.clock.check(0, t, last, last)  # outlier, or a restarted clock (resync)
            if math.isnan(t):
                self.v_prev = 0.0
                return 0.0, 3  # HOLD: time not finite or not increasing
        else:
            t = t + self.clock.offset
        if math.isnan(self.t0):
            self.t0 = t
        if t - self.t0 < self.settle:  # settle at zero command
            self.h_buf.append(h)
            self.s_buf.append(spool)
            self.t_prev = t
            self.h_prev = h
            self.status = 0
            return 0.0, 0
        if self.status == 0:
            self.h_ref = self._median(self.h_buf)
            self.spool_neutral = self._median(self.s_buf)
            if self.h_ref > self.reject_above:
                self.status = 2
                return 0.0, 2
            self.status = 1
        dt = t - self.t_prev
        e = self.target - (h - self.h_ref)
        raw = (h - self.h_prev) / dt
        self.hdot += dt / (self.tau_d + dt) * (raw - self.hdot)  # low-pass ḣ
        if abs(e) < self.i_band:
            self.integral += e * dt  # conditional integration
        v = self.kp * e + self.ki * self.integral - self.kd * self.hdot
        v = max(-self.v_max, min(self.v_max, v))
        lim = abs(self.v_prev) + self.a_max * dt  # limit the increase of |v|
        if abs(v) > lim:
            v = lim if v > 0 else -lim
        if spool <= self.spool_neutral and v < 0.0:  # never unwind past neutral
            v = 0.0
        self.t_prev = t
        self.h_prev = h
        if not math.isfinite(v) or not math.isfinite(self.hdot) or not math.isfinite(self.integral):
            self.integral = 0.0
            self.hdot = 0.0
            self.v_prev = 0.0
            return 0.0, 3  # HOLD: non-finite intermediate
        self.v_prev = v
        return v, (4 if self.target_rejected else 1)  # TARGET_REJECTED or ACTIVE

    def forward(self, t: float, h: float, spool: float) -> Tuple[float, int]:
        """Same as :meth:`step`.

        Args:
            t: time of the step [s].
            h: estimated tip height [m] above the straight configuration.
            spool: spool position [m of tendon].

        Returns:
            ``(v [m/s], status)``.
        """
        return self.step(t, h, spool)
