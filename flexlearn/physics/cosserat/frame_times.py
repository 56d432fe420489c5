"""Output at requested frame times: a run whose recorded states fall exactly on evenly spaced times, as a viewer,
a camera or a benchmark asks for them (``n_frames`` from 0 to T, or ``t0, t0 + Δ, …`` with t0 a multiple of Δ).

The step is the largest ``h = Δ/m ≤ max_dt`` (m a whole number), so every frame is a step, ``record_every = m``
keeps exactly those steps, and the fused kernel can still run the problem (no per-step callback)::

    tr = simulate_at(rod, torch.linspace(0, 10, 101), max_dt=1e-3, setup=RodSetup(loads=[Gravity()]))
    tr.times  # exactly the 101 requested times [s]; tr.positions (101, N+1, 3)

Unevenly spaced times are refused (a ConfigError naming ``times``): run once per spacing, or interpolate.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.simulation import RodSetup, SimulationOptions
from flexlearn.physics.cosserat.state import Trajectory

TIME_TOL = 1e-6
"""Relative tolerance (of the last time) within which requested times must be evenly spaced (float32 times pass)."""


class FramePlan(NamedTuple):
    """How to step so that recorded steps are the requested frames.

    Attributes:
        dt: the step h [s] (≤ the largest step allowed).
        record_every: steps per frame, m = Δ/h.
        n_steps: steps to the last frame.
        first: index of the first requested frame among the recorded ones (t0/Δ).
        times: (F,) the requested times [s], float64.
    """

    dt: float
    record_every: int
    n_steps: int
    first: int
    times: Tensor


def plan_frames(times: Union[Sequence[float], Tensor], max_dt: float) -> FramePlan:
    """The step and recording interval that put a recorded state on each of ``times``.

    Args:
        times: (F,) ≥ 2 increasing, evenly spaced times [s], the first ≥ 0 and a multiple of the spacing.
        max_dt: the largest step [s] the scheme may take (:meth:`CosseratRod.stable_dt` for the LGVI,
            :meth:`CosseratRod.accurate_dt` for the implicit step).

    Returns:
        The :class:`FramePlan`.

    Raises:
        ConfigError: naming ``times`` (fewer than 2, not finite, not increasing, not evenly spaced, a first time
            off the grid) or ``max_dt``.
    """
    check(isinstance(max_dt, (int, float)) and math.isfinite(max_dt) and max_dt > 0, "max_dt", max_dt, "must be > 0")
    t = torch.as_tensor(times, dtype=torch.float64).reshape(-1)
    check(t.numel() >= 2, "times", t.tolist(), "need at least 2 frame times")
    check(bool(torch.isfinite(t).all()) and float(t[0]) >= 0, "times", t.tolist()[:5], "must be finite and >= 0")
    gaps = t[1:] - t[:-1]
    check(bool((gaps > 0).all()), "times", t.tolist()[:5], "must increase")
    spacing = float(t[-1] - t[0]) / (t.numel() - 1)
    tol = TIME_TOL * float(t[-1])
    worst = float((gaps - spacing).abs().max())
    check(worst <= tol, "times", t.tolist()[:5], f"must be evenly spaced (spacing {spacing:g} s, off by {worst:.3g} s)")
    first = round(float(t[0]) / spacing)
    check(
        abs(first * spacing - float(t[0])) <= tol,
        "times",
        t.tolist()[:5],
        f"the first time must be a multiple of the spacing {spacing:g} s",
    )
    m = max(1, math.ceil(spacing / max_dt * (1.0 - 1e-12)))
    return FramePlan(spacing / m, m, (first + t.numel() - 1) * m, first, t)


def simulate_at(
    rod,
    times: Union[Sequence[float], Tensor],
    max_dt: float,
    setup: RodSetup,
    options: Optional[SimulationOptions] = None,
) -> Trajectory:
    """Simulate ``rod`` and record it exactly at ``times`` (:func:`plan_frames`).

    Args:
        rod: a :class:`~flexlearn.physics.cosserat.rod.CosseratRod`.
        times: (F,) evenly spaced frame times [s].
        max_dt: the largest step [s].
        setup: loads, damping, initial state, base, observer.
        options: the other options (their ``record_every`` is replaced).

    Returns:
        The :class:`~flexlearn.physics.cosserat.state.Trajectory` of the F frames; ``times`` the requested ones.

    Raises:
        ConfigError: bad ``times`` or ``max_dt``; IntegrationError: a failing step.
    """
    plan = plan_frames(times, max_dt)
    opts = dataclasses.replace(options or SimulationOptions(), record_every=plan.record_every)
    tr = rod.simulate(
        plan.n_steps * plan.dt,
        plan.dt,
        loads=setup.loads,
        damping=setup.damping,
        initial=setup.initial,
        base=setup.base,
        observer=setup.observer,
        options=opts,
    )
    keep = slice(plan.first, plan.first + plan.times.numel())
    recorded = tr.times.to(torch.float64)[keep]
    check(
        recorded.numel() == plan.times.numel()
        and float((recorded - plan.times).abs().max()) <= 1e-6 * float(plan.times[-1]) + 1e-12,
        "times",
        plan.times.tolist()[:5],
        f"the run recorded {tr.times.numel()} frames at other times",
    )
    energy = None if tr.energy is None else tr.energy[keep]
    reactions = None if tr.reactions is None else tr.reactions[keep]
    return Trajectory(tr.positions[keep], tr.rotations[keep], plan.times.clone(), energy, tr.final, reactions=reactions)
