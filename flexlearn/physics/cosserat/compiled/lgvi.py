"""A fused, compiled (numba) step loop of the LGVI for the common conservative case: the same discrete
equations as :mod:`flexlearn.physics.cosserat.integrator` (leapfrog positions, Cayley–Newton node
rotations, seed 001 eqs. (7)–(13)), written as scalar loops over the nodes so that one step of a 20-element
rod costs microseconds instead of the ~1 ms of eager tensor operations.

Used by :meth:`CosseratRod.simulate` when ``backend='auto'`` (default) finds numba installed and the run
needs nothing the kernel lacks: no gradient; loads that are constant world forces (gravity, constant point
forces) or magnets in one spatially uniform field (constant, rotating, ideal Helmholtz: sampled at the step
times beforehand); damping without the stiffness-proportional part (mass-proportional and viscous terms,
per-node capacities); contact with planes, cylinders, spheres and between rods
(:mod:`flexlearn.physics.cosserat.compiled.contact`; all rods advance together, step by step); no observer,
callback or energy record; pins and clamps on any node, fixed or driven (their poses sampled at the step times
beforehand), sliding along a world axis; CPU.
Everything else runs on the tensor path, which stays the reference (the tests compare both to round-off).
The implicit step (``scheme='implicit'``) runs in the same loop with its force filter
(:mod:`flexlearn.physics.cosserat.compiled.implicit`) applied to every state's forces.
A failing step (strain beyond the limit, a bent-through element, a non-finite value, a Newton solve that
does not converge) stops the kernel; the caller then reruns the tensor path, which raises the
:class:`~flexlearn.physics.cosserat.errors.IntegrationError` with node, step and the state before.

Shapes: R (B, n, 3, 3), p, v, pi, fext (B, n, 3); mass (B, n); C1, C2 (B, N, 3); l (B, N); scale (B, n);
jd, jn (B, n, 3) (diagonals of the normalised J_d and J of the Newton solve); cf, cw, mmag (B, n, 3);
bfield (n_steps + 1, B, 3). SI units.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, cast

import numpy as np
import torch
from torch import Tensor

from flexlearn.physics.cosserat import implicit
from flexlearn.physics.cosserat.compiled.cayley import cayley_newton
from flexlearn.physics.cosserat.compiled.common import (
    HAVE_NUMBA,
    LOG_CURVATURE,
    element_strain,
    geodesic_apply,
    geodesic_pullback,
    log_curvature_apply,
    log_curvature_factors,
    model_code,
    njit,
)
from flexlearn.physics.cosserat.compiled.contact import (
    KERNEL_CONTACTS,
    contact_arrays,
    contact_passes,
    n_contact_points,
    point_buffer,
)

# the kernel's force filter, under its own name beside the torch reference ``implicit.filter_forces``
from flexlearn.physics.cosserat.compiled.implicit import filter_forces as _filter_forces
from flexlearn.physics.cosserat.compiled.kernel_io import (
    FIELD_SAMPLES_MAX,
    KernelState,
    final_state,
    held_arrays,
    kernel_eligible_supports,
    load_arrays,
    magnets,
)
from flexlearn.physics.cosserat.compiled.kernel_io import (
    as_numpy as _np,
)
from flexlearn.physics.cosserat.contact import contact_coupling, contact_filter_blocks
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.elastic import internal_forces
from flexlearn.physics.cosserat.implicit import ForceFilter
from flexlearn.physics.cosserat.loads import EmbeddedMagnet
from flexlearn.physics.cosserat.simulation import RodSetup, SimulatedRod, SimulationOptions
from flexlearn.physics.cosserat.state import RodState
from flexlearn.physics.cosserat.supports import HeldNodes, support_list

__all__ = [
    "HAVE_NUMBA",
    "OK",
    "BAD_ELEMENT",
    "BAD_NODE",
    "NEWTON",
    "run",
    "eligible",
    "simulate",
    "KernelRun",
    "KernelFailure",
]

# status codes returned by the kernel
OK, BAD_ELEMENT, BAD_NODE, NEWTON = 0, 1, 2, 3


@njit(cache=True, inline="always", error_model="numpy")
def _bending_moment(C2, b, i, f0, f1, f2, il, log):
    """∂V_b/∂(2f) of element i of rod b: ``C2 2f / l`` (Cayley curvature), or ``P C2 ψ / l`` with ψ = α 2f and
    P = α I + (α'/t) f fᵀ (``log``: :func:`~flexlearn.physics.cosserat.compiled.common.log_curvature_factors`)."""
    if not log:
        return C2[b, i, 0] * 2.0 * f0 * il, C2[b, i, 1] * 2.0 * f1 * il, C2[b, i, 2] * 2.0 * f2 * il
    k = 2.0 * log_curvature_factors(f0, f1, f2)[0] * il  # κ = ψ / l = α 2 f / l
    return log_curvature_apply(f0, f1, f2, C2[b, i, 0] * k * f0, C2[b, i, 1] * k * f1, C2[b, i, 2] * k * f2)


@njit(cache=True, inline="always", error_model="numpy")
def _internal(R, p, C1, C2, l, fext, strain_code, limit2, force, torque, b, n):
    """Internal forces (world) and torques (body) of rod ``b`` plus ``fext`` into ``force``/``torque``
    (the expressions of :func:`flexlearn.physics.cosserat.elastic.internal_forces`, strains from
    :func:`~flexlearn.physics.cosserat.compiled.common.element_strain`).
    Returns (status, element)."""
    for a in range(n):
        for c in range(3):
            force[a, c] = fext[b, a, c]
            torque[a, c] = 0.0
    for i in range(n - 1):
        (xL0, xL1, xL2, xR0, xR1, xR2, gL0, gL1, gL2, gR0, gR1, gR2, f0, f1, f2, tr, il) = element_strain(
            R, p, l, strain_code, b, i
        )
        c10, c11, c12 = C1[b, i, 0], C1[b, i, 1], C1[b, i, 2]
        nL0, nL1, nL2 = c10 * gL0, c11 * gL1, c12 * gL2
        u0, u1, u2 = 0.0, 0.0, 0.0  # (l/2) Jᵀ n of the geodesic mid frame, added to the bending moment
        if strain_code & 3 == 2:
            g = (0.5 * (xL0 + xR0) * il, 0.5 * (xL1 + xR1) * il, 0.5 * (xL2 + xR2) * il)
            u0, u1, u2 = geodesic_pullback((f0, f1, f2), g, (nL0, nL1, nL2))
            u0, u1, u2 = 0.5 * u0 / il, 0.5 * u1 / il, 0.5 * u2 / il
            nL0, nL1, nL2 = geodesic_apply((f0, f1, f2), (nL0, nL1, nL2))
            nR0, nR1, nR2 = nL0, nL1, nL2
        else:
            nR0, nR1, nR2 = c10 * gR0, c11 * gR1, c12 * gR2
        sL = gL0 * gL0 + gL1 * gL1 + gL2 * gL2
        sR = gR0 * gR0 + gR1 * gR1 + gR2 * gR2
        strain2 = sL if sL > sR else sR
        # fe = ½ (R_i nL + R_{i+1} nR)
        for c in range(3):
            fe = 0.5 * (
                R[b, i, c, 0] * nL0
                + R[b, i, c, 1] * nL1
                + R[b, i, c, 2] * nL2
                + R[b, i + 1, c, 0] * nR0
                + R[b, i + 1, c, 1] * nR1
                + R[b, i + 1, c, 2] * nR2
            )
            force[i, c] += fe
            force[i + 1, c] -= fe
        if not (strain2 == strain2) or strain2 > limit2 or not (1.0 + tr > 1e-6):
            return BAD_ELEMENT, i
        m0, m1, m2 = _bending_moment(C2, b, i, f0, f1, f2, il, strain_code & LOG_CURVATURE)
        m0, m1, m2 = m0 + u0, m1 + u1, m2 + u2
        x0, x1, x2 = f1 * m2 - f2 * m1, f2 * m0 - f0 * m2, f0 * m1 - f1 * m0  # f × m
        fm = f0 * m0 + f1 * m1 + f2 * m2
        torque[i, 0] += 0.5 * (xL1 * nL2 - xL2 * nL1) + m0 + x0 + fm * f0
        torque[i, 1] += 0.5 * (xL2 * nL0 - xL0 * nL2) + m1 + x1 + fm * f1
        torque[i, 2] += 0.5 * (xL0 * nL1 - xL1 * nL0) + m2 + x2 + fm * f2
        torque[i + 1, 0] += 0.5 * (xR1 * nR2 - xR2 * nR1) - (m0 - x0 + fm * f0)
        torque[i + 1, 1] += 0.5 * (xR2 * nR0 - xR0 * nR2) - (m1 - x1 + fm * f1)
        torque[i + 1, 2] += 0.5 * (xR0 * nR1 - xR1 * nR0) - (m2 - x2 + fm * f2)
    for a in range(n):
        s = force[a, 0] + force[a, 1] + force[a, 2] + torque[a, 0] + torque[a, 1] + torque[a, 2]
        if not np.isfinite(s):
            return BAD_NODE, a
    return OK, 0


@njit(cache=True, inline="always", error_model="numpy")
def _damping_andmagnets(R, v, pi, cf, cw, mmag, bw0, bw1, bw2, force, torque, b, n):
    """Add the damping force ``−cf ∘ v``, torque ``−cw ∘ pi`` and the magnet torques ``m ∘× (Rᵀ B)`` of rod b
    (field ``(bw0, bw1, bw2)`` at this step) into ``force``/``torque``."""
    for a in range(n):
        for c in range(3):
            force[a, c] -= cf[b, a, c] * v[b, a, c]
            torque[a, c] -= cw[b, a, c] * pi[b, a, c]
        m0, m1, m2 = mmag[b, a, 0], mmag[b, a, 1], mmag[b, a, 2]
        if m0 != 0.0 or m1 != 0.0 or m2 != 0.0:
            y0 = R[b, a, 0, 0] * bw0 + R[b, a, 1, 0] * bw1 + R[b, a, 2, 0] * bw2  # Rᵀ B
            y1 = R[b, a, 0, 1] * bw0 + R[b, a, 1, 1] * bw1 + R[b, a, 2, 1] * bw2
            y2 = R[b, a, 0, 2] * bw0 + R[b, a, 1, 2] * bw1 + R[b, a, 2, 2] * bw2
            torque[a, 0] += m1 * y2 - m2 * y1
            torque[a, 1] += m2 * y0 - m0 * y2
            torque[a, 2] += m0 * y1 - m1 * y0


@njit(cache=True, inline="always", error_model="numpy")
def _copy_state(R, p, out_p, out_R, rec, b, n):
    """out_p[rec, b], out_R[rec, b] ← p[b], R[b]."""
    for a in range(n):
        for c in range(3):
            out_p[rec, b, a, c] = p[b, a, c]
            for d in range(3):
                out_R[rec, b, a, c, d] = R[b, a, c, d]


@njit(cache=True, inline="always", error_model="numpy")
def _solve_rotations(pi, torque, scale, jd, jn, h, tol, iters, fs, b, held, n):
    """Cayley–Newton for every node of rod b whose rotation is free into ``fs`` (n, 3); returns the first node
    whose solve did not converge, or −1 (state k is left untouched either way)."""
    for a in range(n):
        if held[a, 0] > 0.0:  # a clamped node: its frame is the clamp's
            continue
        s = h / scale[b, a]
        u0 = pi[b, a, 0] + h * torque[a, 0]
        u1 = pi[b, a, 1] + h * torque[a, 1]
        u2 = pi[b, a, 2] + h * torque[a, 2]
        f0, f1, f2, ok = cayley_newton(
            s * u0,
            s * u1,
            s * u2,
            jd[b, a, 0],
            jd[b, a, 1],
            jd[b, a, 2],
            jn[b, a, 0],
            jn[b, a, 1],
            jn[b, a, 2],
            tol,
            iters,
        )
        if not ok:
            return a
        fs[a, 0], fs[a, 1], fs[a, 2] = f0, f1, f2
    return -1


@njit(cache=True, inline="always", error_model="numpy")
def _rotate_kick_drift(R, p, v, pi, mass, force, torque, fs, h, b, held, n):
    """With F = cay(f) of every node whose rotation is free: ``Π ← Fᵀ (Π + h τ)``, ``R ← R F``; ``v += h f/m``,
    ``p += h v`` in every free direction (a held node keeps its state k: :func:`_hold` moves it)."""
    for a in range(n):
        hm = h / mass[b, a]
        for c in range(3):  # kick, drift
            if held[a, 3 + c] == 0.0:
                v[b, a, c] += hm * force[a, c]
                p[b, a, c] += h * v[b, a, c]
        if held[a, 0] > 0.0:
            continue
        f0, f1, f2 = fs[a, 0], fs[a, 1], fs[a, 2]
        kc = 2.0 / (1.0 + f0 * f0 + f1 * f1 + f2 * f2)
        # F = I + kc (f^ + f^ f^),  f^ f^ = f fᵀ − |f|² I
        ff = f0 * f0 + f1 * f1 + f2 * f2
        F00 = 1.0 + kc * (f0 * f0 - ff)
        F11 = 1.0 + kc * (f1 * f1 - ff)
        F22 = 1.0 + kc * (f2 * f2 - ff)
        F01 = kc * (-f2 + f0 * f1)
        F10 = kc * (f2 + f1 * f0)
        F02 = kc * (f1 + f0 * f2)
        F20 = kc * (-f1 + f2 * f0)
        F12 = kc * (-f0 + f1 * f2)
        F21 = kc * (f0 + f2 * f1)
        u0 = pi[b, a, 0] + h * torque[a, 0]
        u1 = pi[b, a, 1] + h * torque[a, 1]
        u2 = pi[b, a, 2] + h * torque[a, 2]
        pi[b, a, 0] = F00 * u0 + F10 * u1 + F20 * u2  # Π ← Fᵀ u
        pi[b, a, 1] = F01 * u0 + F11 * u1 + F21 * u2
        pi[b, a, 2] = F02 * u0 + F12 * u1 + F22 * u2
        for c in range(3):  # R ← R F
            x0, x1, x2 = R[b, a, c, 0], R[b, a, c, 1], R[b, a, c, 2]
            R[b, a, c, 0] = x0 * F00 + x1 * F10 + x2 * F20
            R[b, a, c, 1] = x0 * F01 + x1 * F11 + x2 * F21
            R[b, a, c, 2] = x0 * F02 + x1 * F12 + x2 * F22


@njit(cache=True, inline="always", error_model="numpy")
def _held_momentum(R, target, scale, jd, h, b, a, u, F):
    """Write u* of supports.py eq. (2) into u and F = R^kᵀ R̄^{k+1} into F (work arrays (3,), (3, 3)) for node a of
    rod b held at frame ``target`` at t_{k+1}: ``u* = (tr J / h) (F J̃_d − J̃_d Fᵀ)ᵛ`` (J̃_d = diag(jd), the
    normalised J_d)."""
    for r in range(3):
        for c in range(3):
            F[r, c] = R[b, a, 0, r] * target[0, c] + R[b, a, 1, r] * target[1, c] + R[b, a, 2, r] * target[2, c]
    d0, d1, d2 = jd[b, a, 0], jd[b, a, 1], jd[b, a, 2]
    k = scale[b, a] / h
    u[0] = k * (F[2, 1] * d1 - d2 * F[1, 2])
    u[1] = k * (F[0, 2] * d2 - d0 * F[2, 0])
    u[2] = k * (F[1, 0] * d0 - d1 * F[0, 1])


@njit(cache=True, error_model="numpy")
def _hold(R, p, v, pi, held, targets_R, targets_p, nodes, tk, scale, jd, h, b, u, F):
    """The held directions of rod b to the supports' poses at t_{k+1} (``targets_*[tk]``; supports.py eqs.
    (1)–(2)): ``v = (p̄ − p^k)/h``, ``p = p̄``; a clamp ``R = R̄``, ``Π = Fᵀ u*`` (0 for a fixed clamp)."""
    for slot in range(nodes.shape[0]):
        a = nodes[slot]
        for c in range(3):
            if held[a, 3 + c] > 0.0:
                v[b, a, c] = (targets_p[tk, b, slot, c] - p[b, a, c]) / h
                p[b, a, c] = targets_p[tk, b, slot, c]
        if held[a, 0] > 0.0:
            _held_momentum(R, targets_R[tk, b, slot], scale, jd, h, b, a, u, F)
            for c in range(3):
                pi[b, a, c] = F[0, c] * u[0] + F[1, c] * u[1] + F[2, c] * u[2]
                for d in range(3):
                    R[b, a, c, d] = targets_R[tk, b, slot, c, d]


@njit(cache=True, error_model="numpy")
def _reactions(R, p, v, pi, mass, force, torque, held, targets_R, targets_p, nodes, tk, scale, jd, h, out, rec, b, u,
               F):  # fmt: skip
    """out[rec, b] ← the force and moment (world) the supports add to the kick of state k of rod b (supports.py,
    eq. (3)): ``λ = m ((p̄ − p^k)/h − v)/h − f``, ``μ = R^k (u* − Π − h τ)/h``; 0 at free nodes."""
    out[rec, b, :, :] = 0.0
    for slot in range(nodes.shape[0]):
        a = nodes[slot]
        for c in range(3):
            if held[a, 3 + c] > 0.0:
                v_held = (targets_p[tk, b, slot, c] - p[b, a, c]) / h
                out[rec, b, a, c] = mass[b, a] * (v_held - v[b, a, c]) / h - force[a, c]
        if held[a, 0] > 0.0:
            _held_momentum(R, targets_R[tk, b, slot], scale, jd, h, b, a, u, F)
            for c in range(3):
                t = 0.0
                for d in range(3):
                    t += R[b, a, c, d] * ((u[d] - pi[b, a, d]) / h - torque[a, d])
                out[rec, b, a, 3 + c] = t


# long: 63 lines of code; its docstring documents all 39 parameters
@njit(cache=True, error_model="numpy")
def run(R, p, v, pi, mass, scale, jd, jn, C1, C2, l, fext, cf, cw, mmag, bfield, h, n_steps, record_every, held,
        targets_R, targets_p, support_nodes, strain_code, limit2, tol, iters, out_p, out_R, f_last, t_last, inertia,
        beta_h2, damping_c, out_react, coupling, obstacles, pairs, laws, n_points):  # fmt: skip
    """Advance every rod ``n_steps`` steps in place from the half-step state (R, p, v = v^{k−½},
    pi = Π^k − h/2 τ^k convention of the tensor path). Records (R, p) at k % record_every == 0 and at the
    last step into out_R/out_p (T, B, n, …); leaves the model force/torque of the last state in
    f_last/t_last. Damping: node force ``−cf ∘ v`` and body torque ``−cw ∘ pi`` (the velocities of the
    tensor path's ``Damping.external``); magnets: body torque ``m ∘× (Rᵀ B_k)`` with the summed body moments
    ``mmag`` (B, n, 3) and the spatially uniform field ``bfield`` (n_steps + 1, B, 3) at the step times
    (a (1, B, 3) placeholder when there is no magnet). ``beta_h2`` = β h² > 0: the implicit step (forces
    filtered by :func:`flexlearn.physics.cosserat.compiled.implicit.filter_forces`, ``inertia`` (B, n, 3);
    ``damping_c`` = c [s] its numerical damping, ``beta_h2`` then being β h² + h c/2).
    Returns (status, step, rod, node/element) with status :data:`OK` when all steps ran.

    Args:
        R: Node rotations, shape (B, n, 3, 3), advanced in place.
        p: Node positions [m], shape (B, n, 3), advanced in place.
        v: Half-step node velocities [m/s], shape (B, n, 3), advanced in place.
        pi: Half-step angular momenta Π − h/2 τ [kg·m²/s], shape (B, n, 3), advanced in place.
        mass: Node masses [kg], shape (B, n).
        scale: Per-node normalisation tr J [kg·m²] of the Newton solve, shape (B, n).
        jd: Diagonal of the normalised J_d, shape (B, n, 3).
        jn: Diagonal of the normalised J, shape (B, n, 3).
        C1: Shear and extension stiffnesses [N], shape (B, N, 3).
        C2: Bending and torsion stiffnesses [N·m²], shape (B, N, 3).
        l: Element rest lengths [m], shape (B, N).
        fext: Constant external world forces [N], shape (B, n, 3).
        cf: Damping coefficients of v [N·s/m], shape (B, n, 3).
        cw: Damping coefficients of pi [1/s], shape (B, n, 3).
        mmag: Summed magnet body moments [A·m²], shape (B, n, 3).
        bfield: Uniform field [T] at the step times, shape (n_steps + 1, B, 3), or a (1, B, 3) placeholder.
        h: Time step [s].
        n_steps: Number of steps.
        record_every: Record every this many steps.
        held: 1 for a direction held by a fixed support, else 0, shape (n, 6) in (η, δp) order (world axes).
        targets_R: Frames of the supports at the step times, shape (T, B, S, 3, 3) (read at clamps): T = 1 for fixed
            supports, n_steps + 2 (t_0 … t_{n_steps+1}) for driven ones.
        targets_p: Positions [m] of the supports at the step times, shape (T, B, S, 3).
        support_nodes: The node of each support, shape (S,) int64.
        strain_code: The strain model (:data:`~flexlearn.physics.cosserat.compiled.common.STRAIN_CODES`).
        limit2: Square of the strain limit.
        tol: Tolerance of the Newton solve of the rotations.
        iters: Maximum Newton iterations.
        out_p: Recorded positions [m], shape (T, B, n, 3), written.
        out_R: Recorded rotations, shape (T, B, n, 3, 3), written.
        f_last: Model world force [N] of the last state, shape (B, n, 3), written.
        t_last: Model body torque [N·m] of the last state, shape (B, n, 3), written.
        inertia: Principal node inertias [kg·m²], shape (B, n, 3) (used by the implicit step).
        beta_h2: β h² [s²] of the implicit step (plus h c/2); 0 for the explicit LGVI.
        damping_c: Numerical damping c [s] of the implicit step; 0 for none.
        out_react: Supports' reactions at the recorded states, world force [N] and moment [N m], shape
            (T, B, n, 6), written (0 at free nodes).
        coupling: The consistent mass's element coupling ρ A l / 6 [kg] of the implicit step, shape (B, N); zeros
            for the lumped mass.
        obstacles: The obstacle contacts, shape (M, 15) (:mod:`~flexlearn.physics.cosserat.compiled.contact`).
        pairs: The element pairs of the rod–rod contacts, shape (P, 3) int64.
        laws: The rod–rod contacts' laws (r, k, c, μ, ε, smooth), shape (L, 6).
        n_points: The contact points per step (:func:`~flexlearn.physics.cosserat.compiled.contact.n_contact_points`).

    Returns:
        Tuple ``(status, step, rod, node/element)``.
    """
    B, n = p.shape[0], p.shape[1]
    force, torque, fs = np.empty((B, n, 3)), np.empty((B, n, 3)), np.empty((n, 3))
    D, W, y, G, Ke = np.empty((n, 6, 6)), np.empty((n, 6, 6)), np.empty((n, 6)), np.empty((6, 12)), np.empty((12, 12))
    u, F = np.empty(3), np.empty((3, 3))  # a held clamp's u* and F (_held_momentum)
    magnetic = bfield.shape[0] > n_steps
    contacts = obstacles.shape[0] > 0 or pairs.shape[0] > 0
    blocks = np.zeros((B, n, 3, 3) if contacts else (1, 1, 3, 3))
    flags = np.empty(n_points, dtype=np.int64)
    buffer = point_buffer(n_points)
    copies = np.empty((5, B, n, 3) if contacts else (5, 1, 1, 3))  # force, torque before and after the first solve; v⁺
    stiff = np.empty((4, B, n, 6, 6) if contacts else (4, 1, 1, 6, 6))  # β h² K of every rod (kept for re-solves)
    work = (
        y,
        G,
        Ke,
        copies[0],
        copies[1],
        copies[2],
        copies[3],
        copies[4],
        buffer,
        stiff[0],
        stiff[1],
        stiff[2],
        stiff[3],
    )  # and its factor
    for k in range(n_steps + 1):  # every rod at step k before any at k + 1: contact couples them
        for b in range(B):
            st, where = _internal(R, p, C1, C2, l, fext, strain_code, limit2, force[b], torque[b], b, n)
            if st != OK:
                return st, k, b, where
            bw0 = bw1 = bw2 = 0.0
            if magnetic:
                bw0, bw1, bw2 = bfield[k, b, 0], bfield[k, b, 1], bfield[k, b, 2]
            _damping_andmagnets(R, v, pi, cf, cw, mmag, bw0, bw1, bw2, force[b], torque[b], b, n)
        if contacts:
            bad = contact_passes(R, p, v, pi, mass, inertia, C1, C2, l, strain_code, beta_h2, damping_c, held,
                                 coupling, h, (obstacles, pairs, laws), force, torque, blocks, work, flags)  # fmt: skip
            if bad >= 0:
                return BAD_NODE, k, bad, 0
        tk = min(k + 1, targets_p.shape[0] - 1)  # the supports' poses at t_{k+1}
        rec = k // record_every if k % record_every == 0 else -1
        if k == n_steps:
            rec = out_p.shape[0] - 1
        for b in range(B):
            if beta_h2 > 0.0 and not contacts and not _filter_forces(
                R, p, C1, C2, l, mass, inertia, strain_code, beta_h2, held, b, force[b], torque[b], D, W, y, G, Ke,
                damping_c, v, pi, coupling, blocks,
            ):  # fmt: skip
                return BAD_NODE, k, b, 0
            if rec >= 0:
                _copy_state(R, p, out_p, out_R, rec, b, n)
                _reactions(R, p, v, pi, mass, force[b], torque[b], held, targets_R, targets_p, support_nodes, tk,
                           scale, jd, h, out_react, rec, b, u, F)  # fmt: skip
            if k == n_steps:
                f_last[b, :, :] = force[b]
                t_last[b, :, :] = torque[b]
                continue
            node = _solve_rotations(pi, torque[b], scale, jd, jn, h, tol, iters, fs, b, held, n)
            if node >= 0:  # Newton first: a failure leaves state k as it is
                return NEWTON, k, b, node
            _rotate_kick_drift(R, p, v, pi, mass, force[b], torque[b], fs, h, b, held, n)
            _hold(R, p, v, pi, held, targets_R, targets_p, support_nodes, tk, scale, jd, h, b, u, F)
    return OK, n_steps, 0, 0


def eligible(rod: SimulatedRod, setup: RodSetup, options: SimulationOptions, n_steps: int = 0) -> str:
    """Why the fused kernel cannot run this simulation ('' when it can).

    Args:
        rod: the rod model.
        setup: loads, damping, initial state, base and observer of the run.
        options: the run's options (callback, energy record, compile).
        n_steps: the number of steps (a magnet's field is sampled ahead for every step).

    Returns:
        The reason, in words, or ``''``.
    """
    loads, damping = setup.loads, setup.damping
    if not HAVE_NUMBA:
        return "numba is not installed"
    if setup.observer is not None or options.callback is not None:
        return "observers and callbacks run on the tensor path"
    if damping is not None and type(damping) is not Damping:  # the kernel takes Damping's linear drag only
        return f"damping model {type(damping).__name__} runs on the tensor path"
    if damping is not None and cast(Damping, damping).has_beta():
        return "stiffness-proportional damping (beta) runs on the tensor path"
    if options.record_energy or options.compile:
        return "record_energy/compile run on the tensor path"
    why = kernel_eligible_supports(support_list(setup.base), rod.batch_size, n_steps)
    if why:
        return why
    if rod.length.device.type != "cpu":
        return "the kernel runs on CPU only"
    mags = magnets(loads)
    for ld in loads:
        if ld in mags:
            field = cast(EmbeddedMagnet, ld).field
            if not field.uniform or field is not mags[0].field:
                return "magnets need one spatially uniform field object for the kernel"
        elif type(ld) in KERNEL_CONTACTS:
            continue
        elif not getattr(ld, "constant_world_force", lambda: False)():
            return f"load {type(ld).__name__} is not a constant world force"
    if mags and (n_steps + 1) * rod.batch_size * 3 > FIELD_SAMPLES_MAX:
        return "too many steps to sample the field ahead"
    tensors = list(rod.parameters()) + list(rod.buffers()) + setup.tensors()
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return "gradients need the tensor path"
    if any(torch.autograd.forward_ad.unpack_dual(t).tangent is not None for t in tensors):
        return "forward-mode tangents need the tensor path"
    return ""


class KernelFailure(NamedTuple):
    """Where a kernel run stopped: ``status`` (:data:`BAD_ELEMENT`, :data:`BAD_NODE`, :data:`NEWTON`), the step
    index k at which it was detected, the rod and the node (or element)."""

    status: int
    step: int
    rod: int
    where: int

    def failed_step(self) -> int:
        """The step k → k+1 that failed: a non-physical state k was made by step k − 1; a Newton failure is step k.

        Returns:
            The index of the failed step.
        """
        return self.step if self.status == NEWTON else max(self.step - 1, 0)


def _coupling(ctx: RodContext) -> Tensor:
    """(B, N) the consistent mass's element couplings of ``ctx`` [kg], zeros for the lumped mass."""
    coupling = ctx.mass_coupling
    return torch.zeros_like(ctx.rest_lengths) if coupling is None else coupling


class KernelRun(NamedTuple):
    """A finished kernel run in the tensor path's layout (T, B, n, …) and its final state."""

    positions: Tensor  # (T, B, n, 3) [m]
    rotations: Tensor  # (T, B, n, 3, 3)
    times: Tensor  # (T,) [s]
    final: RodState
    reactions: Optional[Tensor] = None  # (T, B, S, 6) supports' world force [N] and moment [N m]


def simulate(
    ctx: RodContext,
    setup: RodSetup,
    start: RodState,
    held: Optional[HeldNodes],
    h: float,
    n_steps: int,
    options: SimulationOptions,
) -> KernelRun | KernelFailure:
    """Run the kernel from the ``start`` state (tensors, (B, n, …)).

    Args:
        ctx: the rod's context (with the loads' point masses).
        setup: its loads and damping (``eligible`` said the kernel can take them).
        start: the state at t = 0 (the held nodes already at their supports).
        held: the supports (pins and clamps, fixed or driven, sliding along world axes: ``eligible``), or None.
        h: time step [s].
        n_steps: number of steps.
        options: recording, tolerances, strain limit, scheme (``filter_beta`` β > 0 runs the implicit step,
            :mod:`flexlearn.physics.cosserat.implicit`, with the numerical damping ζ = ``filter_dissipation``).

    Returns:
        The :class:`KernelRun`, or a :class:`KernelFailure` when a step failed (the caller reruns the tensor path
        for the error with the state before it, or raises from the failure with ``backend='numba'``).
    """
    with torch.no_grad():
        R, p, v0, w0 = start.rotations, start.positions, start.velocities, start.angular_velocities
        B, n = p.shape[0], p.shape[1]
        dofs = None if held is None else held.dof_projector()
        m = ctx.mass.unsqueeze(-1)
        J = ctx.inertia
        arrays = load_arrays(ctx, setup, start, h, n_steps)
        f0, tau0, *_ = internal_forces(ctx, R, p)
        f0, tau0 = f0 + arrays.fx0, tau0 + arrays.tx0
        beta_h2 = float(options.filter_beta) * h * h
        zeta = options.filter_dissipation
        contacts = contact_arrays(setup.loads, p)
        if beta_h2 > 0.0:
            blocks, pairs = contact_filter_blocks(setup.loads, p, v0, h), contact_coupling(setup.loads, p, v0, h)
            f0, tau0 = implicit.filter_forces(ctx, R, p, f0, tau0, ForceFilter(beta_h2, dofs, 0.0, blocks, pairs))
            v0, w0 = implicit.filter_velocities(ctx, R, p, v0, w0, beta_h2, dofs)
        v = v0 - 0.5 * h * f0 / m
        pi = J * w0 - 0.5 * h * tau0
        if held is not None:
            v, pi = held.zero_held(v, pi)
        ks = list(range(0, n_steps + 1, options.record_every))
        if n_steps % options.record_every:
            ks.append(n_steps)
        out_p = np.empty((len(ks), B, n, 3))
        out_R = np.empty((len(ks), B, n, 3, 3))
        f_last = np.empty((B, n, 3))
        t_last = np.empty((B, n, 3))
        out_react = np.zeros((len(ks), B, n, 6))
        Rn, pn, vn, pin = _np(R), _np(p), _np(v), _np(pi)
        jd = _np(torch.diagonal(ctx.jd_normalised, dim1=-2, dim2=-1))
        supports = held_arrays(held, B, n, h, n_steps)
        code = model_code(ctx.strain, ctx.curvature)
        status, step, rod, where = run(
            Rn, pn, vn, pin, _np(ctx.mass), _np(ctx.inertia_trace), jd, _np(ctx.j_normalised),
            _np(ctx.shear_stiffness), _np(ctx.bend_stiffness), _np(ctx.rest_lengths), _np(arrays.fx), _np(arrays.cf),
            _np(arrays.cw), _np(arrays.mmag), arrays.bfield, float(h), int(n_steps), int(options.record_every),
            supports.mask, supports.frames, supports.positions, supports.nodes, code, float(options.strain_limit) ** 2,
            float(options.newton_tol), int(options.newton_iters), out_p, out_R, f_last, t_last, _np(J),
            beta_h2 + 0.5 * zeta * h * h if beta_h2 > 0.0 else 0.0,
            zeta * h if beta_h2 > 0.0 else 0.0, out_react, _np(_coupling(ctx)), contacts.obstacles, contacts.pairs,
            contacts.laws, n_contact_points(contacts.obstacles, contacts.pairs, B, n),
        )  # fmt: skip
        if status != OK:
            return KernelFailure(int(status), int(step), int(rod), int(where))
        times = torch.tensor([kk * h for kk in ks], dtype=torch.float64)
        state = KernelState(Rn, pn, vn, pin, f_last, t_last)
        final = final_state(ctx, state, h, n_steps, ForceFilter(beta_h2, dofs), held)
        reactions = None if held is None else torch.from_numpy(out_react)[:, :, held.index]
        return KernelRun(torch.from_numpy(out_p), torch.from_numpy(out_R), times, final, reactions)
