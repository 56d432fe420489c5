"""The implicit step's contacts held by backward Euler's complementarity: which contact points enter the step is
decided at the step's new velocities, not at the state's (eq. (5) of :mod:`~flexlearn.physics.cosserat.implicit`).

Backward Euler on the penalty law ``f_n = max(k δ − (c + h k) v_n, 0)`` wants the force at the new velocity:
``f_n⁺ = max(k δ − (c + h k) v_n⁺, 0)``. The step's matrix carries ``h (c + h k) n nᵀ`` for the points it holds and
the force vector their ``k δ − (c + h k) v_n`` at the state's velocity, which together give ``k δ − (c + h k) v_n⁺``
exactly. Which points to hold is a complementarity problem: held points must push (``f_n⁺ > 0``), released ones
must not (``f_n⁺ ≤ 0``). A single solve that holds the points where the force at the *state's* velocity pushes
gets it wrong where contact is resting: a node the last step pushed out moves up, so ``k δ − (c + h k) v_n < 0``;
it is released, falls freely for one step (g h²), and is pushed back the next. A 0.2 m rope resting on a plane
(k = 1e4 N/m, h = 2 ms) then sat 11.8 µm deep, alternating by 20 µm every step, where its static penetration is
0.25 µm. With the active set below it rests at 0.224 µm (the nodes' mean: the end nodes carry half) and still.

The active set (:func:`consistent_contact_filter`): solve with the points the clipped law holds, predict every
point's force at the new velocities ``v⁺ = v + h F̃ / m``, switch the points whose sign disagrees, and solve again,
up to :data:`MAX_CONTACT_PASSES` solves; a set still not consistent after them falls back to the first solve (the
clipped law). Held points carry their unclipped force (it may pull at the state's velocity; the solve makes it push
at the new one), friction the clipped normal force. On the benchmark's capstan (a rope sliding over a cylinder, the
first 0.4 s) 911 of 1,060 steps needed one solve, 110 two, 13 three, and 26 fell back. Tested in
tests/physics/cosserat/test_contact_step.py; the numba kernel runs the same passes.

Obstacles (plane, cylinder, sphere) and rod–rod pairs alike. A rod–rod pair's matrix ``h J C Jᵀ`` enters each solve
exactly (`~flexlearn.physics.cosserat.implicit.PairCoupling`): bounded by blocks on its four nodes, as the obstacles'
points are, it resisted the two rods moving together, and with the active set the benchmark's two crossing ropes
swung together by ±1 cm (with the clipped law the contact alternated by ±52 µm every step instead).
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from torch import Tensor

from flexlearn.physics.cosserat import implicit
from flexlearn.physics.cosserat.compiled.contact import MAX_CONTACT_PASSES
from flexlearn.physics.cosserat.contact import PenaltyContact, join_couplings
from flexlearn.physics.cosserat.context import RodContext

__all__ = ["MAX_CONTACT_PASSES", "consistent_contact_filter"]


def consistent_contact_filter(
    ctx: RodContext,
    state: Tuple[Tensor, Tensor, Tensor],
    f: Tensor,
    tau: Tensor,
    step: implicit.ForceFilter,
    velocities: Optional[Tuple[Tensor, Tensor]],
    contacts: Sequence[PenaltyContact],
    h: float,
) -> Tuple[Tensor, Tensor]:
    """The implicit step's filtered forces (eq. (1) of :mod:`~flexlearn.physics.cosserat.implicit`) with the contact
    points held by the active set of the module docstring.

    Args:
        ctx: the rod's context.
        state: ``(R, p, v)``: node rotations (B, n, 3, 3), positions [m] and half-step velocities [m/s] (B, n, 3).
        f: (B, n, 3) world node forces [N], the contacts' clipped forces at ``v`` included.
        tau: (B, n, 3) body node torques [N m].
        step: the filter of the step, its ``contact`` the blocks and ``pairs`` the pair matrices of those clipped
            forces.
        velocities: as :func:`~flexlearn.physics.cosserat.implicit.filter_forces`.
        contacts: the run's contacts (obstacles and rod–rod).
        h: the step [s].

    Returns:
        ``(f̃, τ̃)``, each (B, n, 3).
    """
    R, p, v = state
    f_out, tau_out = first = implicit.filter_forces(ctx, R, p, f, tau, step, velocities)
    held: List[Tensor] = [c.active_before(p, v, h) for c in contacts]
    for attempt in range(MAX_CONTACT_PASSES):
        v_next = v + h * f_out / ctx.mass.unsqueeze(-1)
        switched = [c.active_after(p, v, v_next, h) for c in contacts]
        if all(bool((a == s).all()) for a, s in zip(held, switched)):
            return f_out, tau_out
        if attempt == MAX_CONTACT_PASSES - 1:
            break
        blocks = step.contact
        for contact, before, after in zip(contacts, held, switched):
            old, new = contact.forces(p, v, h, before), contact.forces(p, v, h, after)
            f = f + (new.normal + new.friction) - (old.normal + old.friction)
            if not contact.couples_nodes:
                change = contact.filter_blocks(p, v, h, after) - contact.filter_blocks(p, v, h, before)
                blocks = change if blocks is None else blocks + change
        held = switched
        pairs = join_couplings([c.filter_coupling(p, v, h, a) for c, a in zip(contacts, held) if c.couples_nodes])
        step = step._replace(contact=blocks, pairs=pairs)
        f_out, tau_out = implicit.filter_forces(ctx, R, p, f, tau, step, velocities)
    return first  # no consistent set found: the first solve's clipped law
