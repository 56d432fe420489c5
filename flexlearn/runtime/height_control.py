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
until a valid target arrives. Frame times go through `flexlearn.runtime.time_base.TimeBase`: a single outlier time
(far future, or not after the previous step) is held (HOLD, zero command), and a restarted master clock is taken
as a new time base after ``clock_confirm`` agreeing steps, keeping the controller state. Any non-finite
intermediate (e.g. a derivative over a vanishing step) zeroes the command, the integral and the derivative (HOLD).
"""

import math
from typing import List, Tuple

import torch
from torch import nn

from flexlearn.runtime.time_base import TimeBase

SETTLING, ACTIVE, REJECTED, HOLD, TARGET_REJECTED = 0, 1, 2, 3, 4
STATUS_NAMES = {SETTLING: "settling", ACTIVE: "active", REJECTED: "rejected", HOLD: "hold",
                TARGET_REJECTED: "target_rejected"}


class HeightPID(nn.Module):
    """Stateful controller; `step(t, h, spool)` → (v [m/s], status). Every method is TorchScript-compatible.

    Status: SETTLING, ACTIVE, REJECTED (trial refused), HOLD (bad input or time: zero command), TARGET_REJECTED
    (active on the last valid target after a refused one). ``clock_jump`` [s] / ``clock_confirm``: `TimeBase`.
    """

    h_buf: List[float]
    s_buf: List[float]

    def __init__(self, target: float = 0.040, kp: float = 0.8, ki: float = 0.4, kd: float = 0.05,
                 tau_d: float = 0.3, i_band: float = 0.010, v_max: float = 0.015, a_max: float = 0.02,
                 settle: float = 2.0, reject_above: float = 0.005, clock_jump: float = 2.0,
                 clock_confirm: int = 3) -> None:
        super().__init__()
        for name, val in (("target", target), ("kp", kp), ("ki", ki), ("kd", kd), ("tau_d", tau_d),
                          ("i_band", i_band), ("v_max", v_max), ("a_max", a_max), ("settle", settle),
                          ("reject_above", reject_above)):
            if not math.isfinite(float(val)):
                raise ValueError(f"HeightPID: {name} = {val}: expected a finite number")
        self.target = float(target)
        self.kp, self.ki, self.kd = float(kp), float(ki), float(kd)
        self.tau_d = float(tau_d)
        self.i_band = float(i_band)
        self.v_max = float(v_max)
        self.a_max = float(a_max)
        self.settle = float(settle)
        self.reject_above = float(reject_above)
        self.t0 = float("nan")
        self.t_prev = float("nan")
        self.h_prev = float("nan")
        self.integral = 0.0
        self.hdot = 0.0
        self.v_prev = 0.0
        self.h_ref = 0.0
        self.spool_neutral = 0.0
        self.status = SETTLING
        self.h_buf = []
        self.s_buf = []
        self.target_rejected = False
        self.bad_targets = 0
        self.clock = TimeBase(1, float(clock_jump), int(clock_confirm))

    @torch.jit.export
    def reset(self) -> None:
        self.t0 = float("nan")
        self.t_prev = float("nan")
        self.h_prev = float("nan")
        self.integral = 0.0
        self.hdot = 0.0
        self.v_prev = 0.0
        self.status = 0
        self.h_buf.clear()
        self.s_buf.clear()
        self.clock.reset()

    @torch.jit.export
    def set_target(self, target: float) -> bool:
        """New tip-height target [m]; a non-finite one (or |target| ≥ 1e3 m) is refused: the last valid target
        stays, ``bad_targets`` counts it and steps report TARGET_REJECTED until a valid one. Returns acceptance."""
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
        """Command for estimated tip height h [m] (above straight) and spool position [m of tendon] at time t [s]."""
        if self.status == 2:                                         # REJECTED
            return 0.0, 2
        if not (math.isfinite(h) and math.isfinite(spool) and abs(h) < 1e3):
            self.v_prev = 0.0
            return 0.0, 3                                            # HOLD: bad input
        last = self.t_prev if math.isfinite(self.t_prev) else -1e300
        if not self.clock.in_order(t, last):
            t = self.clock.check(0, t, last, last)                   # outlier, or a restarted clock (resync)
            if math.isnan(t):
                self.v_prev = 0.0
                return 0.0, 3                                        # HOLD: time not finite or not increasing
        else:
            t = t + self.clock.offset
        if math.isnan(self.t0):
            self.t0 = t
        if t - self.t0 < self.settle:                                # settle at zero command
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
        self.hdot += dt / (self.tau_d + dt) * (raw - self.hdot)     # low-pass ḣ
        if abs(e) < self.i_band:
            self.integral += e * dt                                  # conditional integration
        v = self.kp * e + self.ki * self.integral - self.kd * self.hdot
        v = max(-self.v_max, min(self.v_max, v))
        lim = abs(self.v_prev) + self.a_max * dt                     # limit the increase of |v|
        if abs(v) > lim:
            v = lim if v > 0 else -lim
        if spool <= self.spool_neutral and v < 0.0:                  # never unwind past neutral
            v = 0.0
        self.t_prev = t
        self.h_prev = h
        if not math.isfinite(v) or not math.isfinite(self.hdot) or not math.isfinite(self.integral):
            self.integral = 0.0
            self.hdot = 0.0
            self.v_prev = 0.0
            return 0.0, 3                                            # HOLD: non-finite intermediate
        self.v_prev = v
        return v, (4 if self.target_rejected else 1)                 # TARGET_REJECTED or ACTIVE

    def forward(self, t: float, h: float, spool: float) -> Tuple[float, int]:
        return self.step(t, h, spool)
