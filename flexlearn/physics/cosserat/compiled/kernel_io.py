"""The fused kernel's inputs and outputs (:mod:`flexlearn.physics.cosserat.compiled.lgvi`): the loads, damping and
supports of a run as the kernel's numpy arrays, and the kernel's arrays back as the tensor path's final
state. Plain Python and torch (no numba): what the kernel reads and writes, in SI units, (B, n, …) per rod batch.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from flexlearn.physics.cosserat import implicit
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.implicit import ForceFilter
from flexlearn.physics.cosserat.loads import EmbeddedMagnet, RodLoad, load_forces
from flexlearn.physics.cosserat.simulation import RodSetup
from flexlearn.physics.cosserat.state import RodState, Support
from flexlearn.physics.cosserat.supports import HeldNodes


def as_numpy(t: Tensor) -> np.ndarray:
    """A contiguous float64 numpy copy of a tensor (the kernel's input arrays).

    Args:
        t: any tensor (detached and moved to the CPU here).

    Returns:
        The copy, same shape.
    """
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float64).copy()


FIELD_SAMPLES_MAX = 2 * 10**7  # (steps + 1) · B · 3 field values sampled ahead at most (160 MB)


def magnets(loads: Sequence[RodLoad]) -> List[EmbeddedMagnet]:
    """The magnets among ``loads`` (the kernel sums their body moments in one uniform field).

    Args:
        loads: the run's loads.

    Returns:
        The :class:`~flexlearn.physics.cosserat.loads.EmbeddedMagnet` loads, in order.
    """
    return [ld for ld in loads if isinstance(ld, EmbeddedMagnet)]


class LoadArrays(NamedTuple):
    """The loads and damping as kernel inputs (:func:`_load_arrays`), (B, n, 3) each unless stated."""

    fx: Tensor  # constant world forces [N]
    fx0: Tensor  # all loads and damping at t = 0 (the half-kick start), world force [N]
    tx0: Tensor  # … and body torque [N m]
    cf: Tensor  # damping coefficients of v [N s/m]
    cw: Tensor  # damping coefficients of pi [1/s]
    mmag: Tensor  # summed magnet body moments [A m²]
    bfield: np.ndarray  # (n_steps + 1, B, 3) field at the step times [T], or a (1, B, 3) placeholder


def load_arrays(ctx: RodContext, setup: RodSetup, start: RodState, h: float, n_steps: int) -> LoadArrays:
    """The loads and damping of ``setup`` as kernel inputs, evaluated at the ``start`` state.

    Args:
        ctx: the rod's context.
        setup: the run's loads and damping.
        start: the state at t = 0, (B, n, …).
        h: time step [s] (the field of a magnet is sampled at every step time).
        n_steps: number of steps.

    Returns:
        :class:`LoadArrays`.
    """
    loads, damping = setup.loads, setup.damping
    R, p, v0, w0 = start.rotations, start.positions, start.velocities, start.angular_velocities
    B, n = p.shape[0], p.shape[1]
    mags = magnets(loads)
    fx = torch.zeros_like(p)  # constant world forces
    fx0, tx0 = torch.zeros_like(p), torch.zeros_like(p)  # all loads at t = 0 (half-kick start)
    for ld in loads:
        fl, tl = load_forces(ld, ctx, R, p, v0, 0.0)  # contacts read the start's velocities
        if fl is not None:
            fx0 = fx0 + fl
            if ld not in mags and not getattr(ld, "velocity_dependent", lambda: False)():  # contacts: in the loop
                fx = fx + fl
        if tl is not None:
            tx0 = tx0 + tl
    cf = torch.zeros_like(p)
    cw = torch.zeros_like(p)
    if damping is not None:
        fd, td = damping.external(ctx, v0, w0)
        fx0, tx0 = fx0 + fd, tx0 + td
        e1 = torch.zeros_like(p) + 1.0  # coefficients: the damping of unit velocities
        cf = -damping.external(ctx, e1, torch.zeros_like(p))[0]
        cw = -damping.external(ctx, torch.zeros_like(p), e1)[1] / ctx.inertia  # acts on pi = J ω
    mmag = torch.zeros_like(p)
    bfield = np.zeros((1, B, 3))  # (n_steps + 1, B, 3) only when a magnet is present
    if mags:
        for ld in mags:
            node = ld.node % n
            mmag[:, node] = mmag[:, node] + ld.moment_body.to(p).expand(B, 3)
        x = p[:, -1]
        bfield = as_numpy(mags[0].field.samples(x, [k * h for k in range(n_steps + 1)]))
    return LoadArrays(fx, fx0, tx0, cf, cw, mmag, bfield)


class KernelState(NamedTuple):
    """The kernel's state arrays after a run (B, n, …): R, p, v^{k−½}, Π^k − h/2 τ^k and the last forces."""

    R: np.ndarray
    p: np.ndarray
    v: np.ndarray
    pi: np.ndarray
    f_last: np.ndarray  # model force of the last state (world) [N]
    t_last: np.ndarray  # model torque of the last state (body) [N m]


def final_state(
    ctx: RodContext, out: KernelState, h: float, n_steps: int, step: ForceFilter, held: Optional[HeldNodes]
) -> RodState:
    """The :class:`RodState` after the last step from the kernel's arrays (velocities at the integer step;
    eq. (3) of :mod:`flexlearn.physics.cosserat.implicit` when ``step.beta_h2`` > 0, the implicit step); a held
    node moves (here: not at all) and turns as its support, whatever the force on it.

    Args:
        ctx: the rod's context.
        out: the kernel's arrays after the run.
        h: time step [s].
        n_steps: number of steps run.
        step: the implicit filter of the run (``beta_h2`` 0 for the LGVI) with its held directions.
        held: the run's supports, or None.

    Returns:
        The final :class:`~flexlearn.physics.cosserat.state.RodState`.
    """
    m, J = ctx.mass.unsqueeze(-1), ctx.inertia
    fl, tl = torch.from_numpy(out.f_last), torch.from_numpy(out.t_last)
    vh, ph = torch.from_numpy(out.v), torch.from_numpy(out.pi)
    vv = vh + 0.5 * h * fl / m
    Rf, pf, wf = torch.from_numpy(out.R), torch.from_numpy(out.p), (ph + 0.5 * h * tl) / J
    if held is not None:
        vv, wf = held.replace_held(vv, vh), held.replace_clamped(wf, ph / J)
    if step.beta_h2 > 0.0:
        vv, wf = implicit.unfilter_velocities(ctx, Rf, pf, vv, wf, step.beta_h2, step.held)
    return RodState(pf, Rf, vv, wf, n_steps * h, n_steps)


class HeldArrays(NamedTuple):
    """The kernel's view of the supports: the held directions ``mask`` (n, 6) (1/0, (η, δp) order, world axes),
    each support's ``nodes`` (S,) and its poses at the step times, ``frames`` (T, B, S, 3, 3) (identity at pins) and
    ``positions`` (T, B, S, 3) [m]: T = 1 when every support is fixed, else t_0 … t_{n_steps+1}."""

    mask: np.ndarray
    nodes: np.ndarray
    frames: np.ndarray
    positions: np.ndarray


def held_arrays(held: Optional[HeldNodes], B: int, n: int, h: float, n_steps: int) -> HeldArrays:
    """The supports as kernel inputs: driven ones sampled at every step time (``kernel_eligible_supports`` said
    their slides are along world axes and the samples fit).

    Args:
        held: the supports, or None.
        B: number of rods.
        n: nodes per rod.
        h: time step [s].
        n_steps: number of steps.

    Returns:
        The :class:`HeldArrays`.
    """
    if held is None:
        none = np.zeros(0, dtype=np.int64)
        return HeldArrays(np.zeros((n, 6)), none, np.zeros((1, B, 0, 3, 3)), np.zeros((1, B, 0, 3)))
    mask = as_numpy(torch.diagonal(held.dof_projector(), dim1=-2, dim2=-1))
    driven = any(s.motion is not None for s in held.supports)
    times = [k * h for k in range(n_steps + 2)] if driven else [0.0]
    S = len(held)
    frames = np.zeros((len(times), B, S, 3, 3))
    frames[...] = np.eye(3)
    positions = np.zeros((len(times), B, S, 3))
    slots = held.clamp_slots
    for k, t in enumerate(times):
        target = held.targets(t)
        positions[k] = as_numpy(target.positions)
        if slots:
            frames[k][:, slots] = as_numpy(target.rotations)
    return HeldArrays(mask, np.array(held.nodes, dtype=np.int64), frames, positions)


def kernel_eligible_supports(supports: Sequence[Support], batch_size: int, n_steps: int) -> str:
    """Why the kernel cannot hold these supports ('' when it can): a slide that is not along a world axis (the kernel
    holds world axes), or driven supports whose poses at every step exceed :data:`FIELD_SAMPLES_MAX` values.

    Args:
        supports: the run's supports.
        batch_size: B.
        n_steps: number of steps.

    Returns:
        The reason, or ``''``.
    """
    for s in supports:
        a = s.slides_along
        if a is not None and int((a.abs() > 1e-12).sum()) != 1:
            return f"a support sliding along {a.tolist()}, not a world axis, runs on the tensor path"
    samples = (n_steps + 2) * batch_size * len(supports) * 12
    if any(s.motion is not None for s in supports) and samples > FIELD_SAMPLES_MAX:
        return "too many steps to sample the driven supports ahead"
    return ""
