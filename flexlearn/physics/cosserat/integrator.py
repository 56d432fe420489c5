"""The LGVI time-stepping loop behind :meth:`CosseratRod.simulate
<flexlearn.physics.cosserat.rod.CosseratRod.simulate>` (seed 001, Secs. 2–3.1, eqs. (7)–(16)). The model is in
:mod:`flexlearn.physics.cosserat.rod`, its potential V and the internal forces in
:mod:`flexlearn.physics.cosserat.elastic`.

Discrete Lagrangian per step (eq. (7), potential at the left time point):

    L_d = Σ_a [ m_a/(2h) |p_a^{k+1} − p_a^k|² + 1/h tr((I − F_a^k) J_{d,a}) ] − h V(q^k),
    F_a^k = (R_a^k)ᵀ R_a^{k+1},   J_d = ½ tr(J) I − J.

Discrete Lagrange–d'Alembert (eqs. (8)–(9)) with node forces ``f_a`` (world, = −∂V/∂p_a + external) and
body torques ``τ_a`` (= −∂V/∂η_a + external, for the right perturbation ``R_a exp(η_a^)``) gives

    m_a (p^{k+1} − 2 p^k + p^{k−1}) / h² = f_a^k                                        (translations)
    (F^k J_d − J_d F^{kᵀ})ᵛ = (J_d F^{k−1} − F^{k−1ᵀ} J_d)ᵛ + h² τ_a^k                 (rotations)

i.e. with the body momentum ``Π_a^k := (J_d F^{k−1} − F^{k−1ᵀ} J_d)ᵛ / h = F^{k−1ᵀ}(Π^{k−1} + h τ^{k−1})``:
``u = Π + h τ``; solve ``(F J_d − J_d Fᵀ)ᵛ = h u`` for F ∈ SO(3) by Newton on the Cayley map
(:mod:`flexlearn.physics.cosserat.newton`; residual and Jacobian from :func:`flexlearn.lie.so3_cayley_lgvi`,
batched over all nodes); ``R ← R F``; ``Π ← Fᵀ u``. Positions update explicitly (leapfrog). Both total
momenta are invariants of the map: ``Σ m_a v_a^{k−½}`` and ``Σ m_a p_a^k × v_a^{k−½} + R_a^k Π_a^k`` are
conserved to round-off for a free rod (the Newton tolerance does not enter: ``R^{k+1} Π^{k+1} = R^k F Fᵀ u
= R^k u``).

Seed 001 discrepancies in the time discretisation (also in the package docstring; those of the model are in
:mod:`flexlearn.physics.cosserat.rod`):
  * eqs. (14)–(16): ``+ 2 p^j + p^{j−1}`` must read ``+ 2 p^j − p^{j−1}`` (central difference).
  * Sec. 3.1: ``Δt = t_j − t_{j+1}`` is negative; it is ``t_{j+1} − t_j``.
  * after eq. (12): ``Δp_{a_i}|_{t=t^j} = p^{j+1}_{a_i} − p^j_{a_i}`` (a time difference) is used in
    eqs. (6), (10)–(16) as the *spatial* difference ``p^j_{a_{i+1}} − p^j_{a_i}``.
  * eqs. (10)–(16): the external loads appear as ``Δt O⁻¹ N`` inside a bracket multiplied by ``Δt²``:
    by the discrete Lagrange–d'Alembert principle a force enters as ``h f``, i.e. ``h² f`` in the
    position equation; ``Δt³`` would make the load vanish as Δt → 0. And ``O⁻¹ 𝓕`` rotates a force into
    the body frame in an equation that lives in the world frame (positions): the world force enters.

Implicit variant (``scheme='implicit'``, :mod:`flexlearn.physics.cosserat.implicit`): every kick's forces become
``F̃ = M (M + β h² K)⁻¹ F`` (Newmark's average acceleration for a linear rod at β = ¼: the step is set by accuracy),
with obstacle contacts held by the active set of :mod:`~flexlearn.physics.cosserat.contact_step`; the rest is shared.

:class:`Stepper` holds one simulation's constants and runs the loop; :func:`simulate` checks the time step
and the rod and picks the fused kernel or the tensor path.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, NamedTuple, Optional, Tuple, Union, cast

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.lie import so3_cayley
from flexlearn.physics.cosserat import implicit
from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.contact import PenaltyContact, contact_coupling, contact_filter_blocks
from flexlearn.physics.cosserat.contact_step import consistent_contact_filter
from flexlearn.physics.cosserat.damping import RodObserver
from flexlearn.physics.cosserat.elastic import elastic_energy, internal_forces
from flexlearn.physics.cosserat.errors import IntegrationError
from flexlearn.physics.cosserat.implicit import ForceFilter, PairCoupling
from flexlearn.physics.cosserat.loads import load_forces, potential_loads
from flexlearn.physics.cosserat.newton import cayley_newton, cayley_newton_fixed, cayley_newton_globalised
from flexlearn.physics.cosserat.run_checks import (
    check_time_and_rod,
    implicit_remedy,
    kernel_error,
    load_names,
    unphysical,
)
from flexlearn.physics.cosserat.simulation import RodSetup, SimulatedRod, SimulationOptions
from flexlearn.physics.cosserat.state import Clamp, RodState, Trajectory
from flexlearn.physics.cosserat.supports import FreeStep, HeldNodes, HeldTargets, support_list


class HalfStep(NamedTuple):
    """State k as the loop carries it (B, n, …): ``R^k``, ``p^k``, ``v^{k−½}`` and ``Π^k − h/2 τ^k``."""

    R: Tensor  # (B, n, 3, 3) node rotations, body → world
    p: Tensor  # (B, n, 3) node positions [m]
    v: Tensor  # (B, n, 3) half-step velocities v^{k−½} [m/s] (world)
    pi: Tensor  # (B, n, 3) body momenta Π^k − h/2 τ^k [kg m²/s]


class NodeLoads(NamedTuple):
    """Loads and damping at state k (:meth:`Stepper.external`)."""

    force: Tensor  # (B, n, 3) world force of the loads and the damping [N]
    torque: Tensor  # (B, n, 3) body torque of the loads and the damping [N m]
    damping_stress: Optional[Tuple[Tensor, Tensor]]  # added to C1 Γ (elastic.internal_forces)
    damping_moment: Optional[Tensor]  # added to C2 κ
    contact: Optional[Tensor] = None  # (B, n, 3, 3) contacts' share of the implicit filter (implicit.py eq. (5))
    pairs: Optional[PairCoupling] = None  # the contact points the filter takes exactly (rod–rod pairs)


class StateForces(NamedTuple):
    """The kick's forces of state k and the element measures its check reads."""

    force: Tensor  # (B, n, 3) world node forces [N] (filtered for the implicit step)
    torque: Tensor  # (B, n, 3) body node torques [N m]
    strain: Tensor  # (B, N) max |Γ| of every element, seen from either node [-]
    trace: Tensor  # (B, N) tr Q of every element's relative rotation


class StepResult(NamedTuple):
    """State k's forces and, unless k is the last state, the step k → k+1 (:meth:`Stepper.core`)."""

    forces: StateForces
    next_state: Optional[HalfStep]  # state k+1 (None at the last state)
    newton_residual: Optional[Tensor]  # (B, n) last Newton update over the tolerance (≤ 1: converged)
    halvings: int = 0  # step halvings of the globalised Newton fallback (0: the plain Newton converged)
    reaction: Optional[Tensor] = None  # (B, S, 6) world force [N] and moment [N m] of each support (supports.py)


class Visited(NamedTuple):
    """The last state the loop checked and recorded: its index, state and forces."""

    k: int
    state: HalfStep
    forces: StateForces


def simulate(rod: SimulatedRod, duration: float, dt: float, setup: RodSetup, options: SimulationOptions) -> Trajectory:
    """Integrate ``rod`` for ``duration`` seconds with step ``dt``: the fused kernel when it can run the problem
    (``options.backend``), else :meth:`Stepper.run` (the implementation of :meth:`CosseratRod.simulate
    <flexlearn.physics.cosserat.rod.CosseratRod.simulate>`, which documents the arguments).

    Args:
        rod: the rod model.
        duration: simulated time [s].
        dt: time step h [s].
        setup: loads, damping, initial state, base and observer.
        options: recording, scheme, backend and tolerances.

    Returns:
        The recorded :class:`~flexlearn.physics.cosserat.state.Trajectory`.

    Raises:
        ConfigError: a bad time step or duration, or ``backend='numba'`` for a run the kernel cannot take.
        IntegrationError: a non-physical rod parameter, or a failing step (node, step, state before it).
    """
    check_time_and_rod(rod, duration, dt)
    n_steps = int(round(duration / dt))
    stepper = Stepper(rod, setup, float(dt), options)
    if options.backend != "torch":
        why = lgvi.eligible(rod, stepper.setup, options, n_steps)
        check(
            options.backend == "auto" or not why, "backend", options.backend, f"the fused kernel cannot run this: {why}"
        )
        if not why:
            traj = stepper.run_fused(n_steps)
            if isinstance(traj, Trajectory):
                return traj
            if options.backend == "numba":
                raise kernel_error(traj, dt)
            # a failing step: rerun on the tensor path, which raises the IntegrationError (node, step, state)
    return stepper.run(n_steps)


class Stepper:
    """One simulation on the tensor path: its constants (context, base, masses, step ``h``), the step map
    :meth:`core`, the half-kick start, the checks of every state and the records.

    States are carried at half steps (:class:`HalfStep`: ``(R^k, p^k, v^{k−½}, Π^k − h/2 τ^k)``, (B, n, …)).
    ``options.filter_beta`` β > 0 selects the implicit variant (forces filtered by
    :func:`~flexlearn.physics.cosserat.implicit.filter_forces`); 0 is the LGVI.

    Args:
        rod: the rod model.
        setup: loads, damping, initial state, base and observer.
        h: time step [s].
        options: recording, scheme and tolerances.
    """

    def __init__(self, rod: SimulatedRod, setup: RodSetup, h: float, options: SimulationOptions):
        self.rod, self.h, self.dtype, self.options = rod, h, torch.float64, options
        base = Clamp() if setup.base is None else setup.base
        self.setup = dataclasses.replace(setup, loads=list(setup.loads), base=base)
        self.loads = self.setup.loads
        self.contacts = [load for load in self.loads if isinstance(load, PenaltyContact)]  # contact_step's
        self.beta, self.zeta = options.filter_beta, options.filter_dissipation
        ctx = dataclasses.replace(rod.context(self.loads, self.dtype), consistent_mass=options.consistent_mass)
        self.ctx = ctx = dataclasses.replace(ctx, implicit_step=h if self.beta else 0.0)
        self.base = base
        self.device = cast(Tensor, rod.length).device
        supports = support_list(base)
        self.held = HeldNodes(supports, ctx.n_nodes, ctx.batch_size, self.dtype, self.device) if supports else None
        self.dofs = None if self.held is None else self.held.dof_projector()
        self.damping, self.observer = setup.damping, setup.observer
        state = (
            setup.initial
            if setup.initial is not None
            else rod.straight_state(next((c for c in supports if isinstance(c, Clamp) and c.node == 0), None))
        )
        B, n = ctx.batch_size, ctx.n_nodes
        p = state.positions.to(dtype=self.dtype, device=self.device).expand(B, n, 3)
        R = state.rotations.to(dtype=self.dtype, device=self.device).expand(B, n, 3, 3)
        if self.held is not None:
            R, p = self.held.place(R, p)
        self.R0, self.p0 = R, p
        self.v0 = state.velocities.to(p).expand(B, n, 3)
        self.w0 = state.angular_velocities.to(p).expand(B, n, 3)
        self.m, self.J, self.scale = ctx.mass.unsqueeze(-1), ctx.inertia, ctx.inertia_trace.unsqueeze(-1)
        self.potentials = potential_loads(self.loads) if options.record_energy else []
        self.rec_p: List[Tensor] = []
        self.rec_R: List[Tensor] = []
        self.rec_t: List[float] = []
        self.rec_e: List[Tensor] = []
        self.prev: Optional[Visited] = None
        self.line_searches: List[Tuple[int, int]] = []  # (step, halvings) where the globalised Newton ran
        self.rec_reaction: List[Tensor] = []

    def squeeze(self, x: Tensor) -> Tensor:
        """Drop the rod batch dimension (axis 1) of a record of an unbatched rod.

        Args:
            x: A record, shape (T, B, …).
        """
        return x if self.rod.batched else x[:, 0]

    # ------------------------------------------------------------ forces
    def external(self, R: Tensor, p: Tensor, t: float, v: Tensor, w: Tensor) -> NodeLoads:
        """Loads and damping at state k.

        Args:
            R: Node rotations, shape (B, n, 3, 3).
            p: Node positions [m], shape (B, n, 3).
            t: Time [s].
            v: Node velocities [m/s], shape (B, n, 3).
            w: Element angular velocities [rad/s], shape (B, n − 1, 3).
        """
        fx = torch.zeros_like(p)
        tx = torch.zeros_like(p)
        for load in self.loads:
            fl, tl = load_forces(load, self.ctx, R, p, v, t)
            if fl is not None:
                fx = fx + fl
            if tl is not None:
                tx = tx + tl
        damp = self.damping
        if damp is not None:
            fd, td = damp.external(self.ctx, v, w)
            fx = fx + fd
            tx = tx + td
        dn = dm = None
        if damp is not None:
            dn, dm = damp.internal(self.ctx, R, p, self.h)
        if self.beta == 0.0 or not self.contacts:
            return NodeLoads(fx, tx, dn, dm)
        blocks = contact_filter_blocks(self.loads, p, v, self.h)
        return NodeLoads(fx, tx, dn, dm, blocks, contact_coupling(self.loads, p, v, self.h))

    def observe(self, k: int, state: HalfStep, loads: NodeLoads) -> NodeLoads:
        """Seed 001, Sec. 3.2: the estimation filters see the undamped model force at state k; their force
        is added to the loads.

        Args:
            k: Step index.
            state: The half-step state k.
            loads: The loads and damping at state k.
        """
        R, p = state.R, state.p
        f_c = internal_forces(self.ctx, R, p, loads.damping_stress, loads.damping_moment).force
        observer = cast(RodObserver, self.setup.observer)
        fo = observer.update(k, p, state.v, f_c + loads.force, self.ctx.mass, self.h)
        return loads._replace(force=loads.force + fo)

    def filtered(
        self, R: Tensor, p: Tensor, f: Tensor, tau: Tensor, loads: NodeLoads, state: Optional[HalfStep] = None
    ) -> Tuple[Tensor, Tensor]:
        """The kick's forces, the internal ones plus ``loads``: unchanged for the LGVI, ``M (M + β h² K)⁻¹ F`` for
        the implicit variant (with the contacts' blocks of ``loads``, eq. (5), and the numerical damping of the
        half-step velocities of ``state`` when ζ > 0, eq. (4) of :mod:`~flexlearn.physics.cosserat.implicit`).

        Args:
            R: Node rotations, shape (B, n, 3, 3).
            p: Node positions [m], shape (B, n, 3).
            f: Internal node forces [N], shape (B, n, 3).
            tau: Internal element torques [N m] in the element frames, shape (B, n − 1, 3).
            loads: The loads, damping and contact blocks at the state.
            state: The half-step state whose velocities are damped (None: no numerical damping).
        """
        f, tau = f + loads.force, tau + loads.torque
        if self.beta == 0.0:
            return f, tau
        h, zeta = self.h, (self.zeta if state is not None else 0.0)
        step = ForceFilter((self.beta + 0.5 * zeta) * h * h, self.dofs, zeta * h, loads.contact, loads.pairs)
        velocities = None if state is None or zeta == 0.0 else (state.v, state.pi / self.J)
        if loads.contact is None or state is None:  # the start: its clipped law as it is
            return implicit.filter_forces(self.ctx, R, p, f, tau, step, velocities)
        return consistent_contact_filter(self.ctx, (R, p, state.v), f, tau, step, velocities, self.contacts, h)

    # ------------------------------------------------------------ the step
    def velocities(self, R: Tensor, p: Tensor, v_int: Tensor, pi_int: Tensor) -> Tuple[Tensor, Tensor]:
        """Velocities (v, ω) of state k from the means of its half-step velocities and momenta (the identity
        for the LGVI; eq. (3) of :mod:`~flexlearn.physics.cosserat.implicit` for the implicit variant).

        Args:
            R: Node rotations, shape (B, n, 3, 3).
            p: Node positions [m], shape (B, n, 3).
            v_int: Mean of the half-step node velocities [m/s], shape (B, n, 3).
            pi_int: Mean of the half-step element momenta, shape (B, n − 1, 3).
        """
        if self.beta == 0.0:
            return v_int, pi_int / self.J
        return implicit.unfilter_velocities(
            self.ctx, R, p, v_int, pi_int / self.J, self.beta * self.h * self.h, self.dofs
        )

    def start(self, R: Tensor, p: Tensor) -> HalfStep:
        """Half-kick initialisation: ``v^{−½} = v0 − h/2 f0/m``, ``Π^0 = J ω0 − h/2 τ0`` (second order).

        Args:
            R: Initial node rotations, shape (B, n, 3, 3).
            p: Initial node positions [m], shape (B, n, 3).
        """
        h, v0, w0 = self.h, self.v0, self.w0
        loads = self.external(R, p, 0.0, v0, w0)
        f0, tau0, *_ = internal_forces(self.ctx, R, p, loads.damping_stress, loads.damping_moment)
        f0, tau0 = self.filtered(R, p, f0, tau0, loads)
        if self.beta != 0.0:  # the scheme's velocity variable (implicit.py, eq. (3))
            v0, w0 = implicit.filter_velocities(self.ctx, R, p, v0, w0, self.beta * h * h, self.dofs)
        v = v0 - 0.5 * h * f0 / self.m
        pi = self.J * w0 - 0.5 * h * tau0
        if self.held is not None:
            v, pi = self.held.zero_held(v, pi)
        return HalfStep(R, p, v, pi)

    def core(self, state: HalfStep, loads: NodeLoads, held_next: Optional[HeldTargets], fixed: bool) -> StepResult:
        """One step from state k (pure tensor function; compiled when ``compile=True``): state k+1, the forces
        of state k, its strains, the relative Newton residual and the supports' reactions. ``held_next`` is
        where the supports hold their nodes at k+1 (:mod:`~flexlearn.physics.cosserat.supports`).

        Args:
            state: The half-step state k.
            loads: The loads and damping at state k.
            held_next: The supports' targets at k+1 (None: no supports).
            fixed: Whether the Cayley–Newton solve runs a fixed number of iterations (compiled graphs).
        """
        h, ctx = self.h, self.ctx
        R, p, v, pi = state
        f, tau, gL, gR, fc, Q = internal_forces(ctx, R, p, loads.damping_stress, loads.damping_moment)
        f, tau = self.filtered(R, p, f, tau, loads, state)
        v2 = v + h * f / self.m  # kick (leapfrog)
        u = pi + h * tau
        p2 = p + h * v2  # drift: explicit positions
        un = h * u / self.scale  # Newton on the Cayley map, all nodes
        if fixed:
            fcay, res = cayley_newton_fixed(un, ctx.jd_normalised, ctx.j_normalised, self.options.newton_fixed_iters)
        else:
            opts = self.options
            fcay, res = cayley_newton(un, ctx.jd_normalised, ctx.j_normalised, opts.newton_tol, opts.newton_iters)
        halvings = 0
        if not fixed and not self.converged(res, un):  # globalised fallback: line search per node
            opts = self.options
            fcay, res, halvings = cayley_newton_globalised(
                un, ctx.jd_normalised, ctx.j_normalised, opts.newton_tol, 2 * opts.newton_iters, 20
            )
            halvings = max(halvings, 1)
        F = so3_cayley(fcay)
        R2 = R @ F
        pi2 = (F.transpose(-1, -2) @ u.unsqueeze(-1)).squeeze(-1)
        reaction = None
        if held_next is not None:
            held = cast(HeldNodes, self.held).hold((R, p), FreeStep(v2, p2, R2, pi2, u), held_next, h, ctx)
            v2, p2, R2, pi2, reaction = held
        strain = torch.maximum(gL.norm(dim=-1), gR.norm(dim=-1))
        tr = Q[..., 0, 0] + Q[..., 1, 1] + Q[..., 2, 2]
        rel = res / (self.options.newton_tol * un.norm(dim=-1).clamp_min(1e-3))
        return StepResult(StateForces(f, tau, strain, tr), HalfStep(R2, p2, v2, pi2), rel, halvings, reaction)

    def converged(self, res: Tensor, un: Tensor) -> bool:
        """Whether the last Newton update ``res`` (B, n) met the tolerance at every free node.

        Args:
            res: Last Newton update per node, shape (B, n).
            un: Normalised Newton right-hand side h u / tr J, shape (B, n, 3).
        """
        rel = res / (self.options.newton_tol * un.norm(dim=-1).clamp_min(1e-3))
        ok = rel <= 1.0
        if self.held is not None:
            ok = ok | self.held.rotation_held()
        return bool(ok.all())

    def advance(self, k: int, state: HalfStep, core: Callable[..., StepResult], fixed: bool, last: bool) -> StepResult:
        """Loads at state k and the step k → k+1 (none at the last state) with ``core``.

        Args:
            k: Step index.
            state: The half-step state k.
            core: :meth:`core`, compiled or not.
            fixed: Passed to ``core``.
            last: Whether k is the last state (no step is taken).
        """
        t = k * self.h
        R, p = state.R, state.p
        loads = self.external(R, p, t, state.v, state.pi / self.J)
        if self.setup.observer is not None:
            loads = self.observe(k, state, loads)
        held_next = None if self.held is None else self.held.targets(t + self.h)
        if last and self.held is not None:  # the supports' reactions of the last state: the step it would take
            return core(state, loads, held_next, fixed)._replace(next_state=None, newton_residual=None)
        if last:
            f, tau, gL, gR, fc, Q = internal_forces(self.ctx, R, p, loads.damping_stress, loads.damping_moment)
            f, tau = self.filtered(R, p, f, tau, loads, state)
            strain = torch.maximum(gL.norm(dim=-1), gR.norm(dim=-1))
            tr = Q[..., 0, 0] + Q[..., 1, 1] + Q[..., 2, 2]
            return StepResult(StateForces(f, tau, strain, tr), None, None)
        return core(state, loads, held_next, fixed)

    def run(self, n_steps: int) -> Trajectory:
        """The loop on the tensor path: every state is checked (strain, element rotation, finiteness, Newton
        convergence) and a failure raises :class:`IntegrationError` with the state before the failing step
        and the trajectory so far.

        Args:
            n_steps: Number of steps.
        """
        compile_step = self.options.compile
        core = torch.compile(self.core, dynamic=False) if compile_step else self.core
        R, p = self.R0, self.p0
        if self.damping is not None:
            self.damping.reset(self.rod, self.ctx, R, p)
        state = self.start(R, p)
        for k in range(n_steps + 1):
            step = self.advance(k, state, core, compile_step, k == n_steps)
            self.check_state(k, step.forces)  # state k valid? (else step k-1 failed)
            self.emit(k, state, step.forces, n_steps)
            if step.reaction is not None and (k % self.options.record_every == 0 or k == n_steps):
                self.rec_reaction.append(step.reaction)
            self.prev = Visited(k, state, step.forces)
            if step.next_state is None:
                break
            self.check_newton(k, cast(Tensor, step.newton_residual))
            if step.halvings:
                self.line_searches.append((k, step.halvings))
            state = step.next_state
            if self.damping is not None:
                self.damping.advance(self.ctx, state.R, state.p)
        traj = self.trajectory()
        traj.final = self.prev_state()
        traj.line_searches = list(self.line_searches)
        return traj

    def run_fused(self, n_steps: int) -> Union[Trajectory, lgvi.KernelFailure]:
        """The same run in the fused kernel (:func:`flexlearn.physics.cosserat.compiled.lgvi.simulate`); where it
        stopped when a step failed there.

        Args:
            n_steps: Number of steps.
        """
        start = RodState(self.p0, self.R0, self.v0, self.w0)
        out = lgvi.simulate(self.ctx, self.setup, start, self.held, self.h, n_steps, self.options)
        if isinstance(out, lgvi.KernelFailure):
            return out
        reactions = None if out.reactions is None else self.squeeze(out.reactions)
        return Trajectory(
            self.squeeze(out.positions), self.squeeze(out.rotations), out.times, None, out.final, reactions=reactions
        )

    # ------------------------------------------------------------ records and checks
    def emit(self, k: int, state: HalfStep, forces: StateForces, n_steps: int) -> None:
        """Record state k (and call the callback) with the velocities at the integer step.

        Args:
            k: Step index.
            state: The half-step state k.
            forces: The forces of state k.
            n_steps: The number of steps of the run (its last state is always recorded).
        """
        every, callback = self.options.record_every, self.options.callback
        if k % every == 0 or k == n_steps or callback is not None:
            h = self.h
            R, p, v, pi = state
            v_int = v + 0.5 * h * forces.force / self.m
            pi_int = pi + 0.5 * h * forces.torque
            if self.held is not None:
                v_int, pi_int = self.held.replace_held(v_int, v), self.held.replace_clamped(pi_int, pi)
            if self.beta != 0.0:
                v_int, w_int = self.velocities(R, p, v_int, pi_int)
                pi_int = self.J * w_int
            if k % every == 0 or k == n_steps:
                self.record(k, R, p, v_int, pi_int)
            if callback is not None:
                callback(k, RodState(p, R, v_int, pi_int / self.J, k * h, k))

    def record(self, k: int, R: Tensor, p: Tensor, v_int: Tensor, pi_int: Tensor) -> None:
        """Append state k (and its energy when recorded) to the records.

        Args:
            k: Step index.
            R: Node rotations, shape (B, n, 3, 3).
            p: Node positions [m], shape (B, n, 3).
            v_int: Node velocities at step k [m/s], shape (B, n, 3).
            pi_int: Element momenta at step k, shape (B, n − 1, 3).
        """
        ctx = self.ctx
        self.rec_p.append(p)
        self.rec_R.append(R)
        self.rec_t.append(k * self.h)
        if self.options.record_energy:
            ek = 0.5 * (v_int * ctx.translational_momentum(v_int) + pi_int**2 / self.J).sum((-1, -2))
            ek = ek + elastic_energy(ctx, R, p)
            for ld in self.potentials:
                ek = ek + ld.potential(ctx, R, p, k * self.h)
            self.rec_e.append(ek)

    def trajectory(self) -> Trajectory:
        """The records so far as a :class:`Trajectory`."""
        energy = self.squeeze(torch.stack(self.rec_e)) if self.options.record_energy and self.rec_e else None
        reactions = self.squeeze(torch.stack(self.rec_reaction)) if self.rec_reaction else None
        return Trajectory(
            self.squeeze(torch.stack(self.rec_p)),
            self.squeeze(torch.stack(self.rec_R)),
            torch.tensor(self.rec_t, dtype=self.dtype),
            energy,
            reactions=reactions,
        )

    def public_state(self, visited: Visited) -> RodState:
        """The :class:`RodState` of a visited state (velocities at the integer step).

        Args:
            visited: The visited state with its forces.
        """
        h, k = self.h, visited.k
        R, p, v_half, pi_half = visited.state
        f, tau = visited.forces.force, visited.forces.torque
        vv = v_half + 0.5 * h * f / self.m
        pi = pi_half + 0.5 * h * tau
        if self.held is not None:
            vv, pi = self.held.replace_held(vv, v_half), self.held.replace_clamped(pi, pi_half)
        if self.beta == 0.0:
            return RodState(p, R, vv, pi / self.J, k * h, k)
        vv, ww = self.velocities(R, p, vv, pi)
        return RodState(p, R, vv, ww, k * h, k)

    def prev_state(self) -> Optional[RodState]:
        """The last visited state as a :class:`RodState` (None before the first)."""
        return None if self.prev is None else self.public_state(self.prev)

    def check_state(self, k: int, forces: StateForces) -> None:
        """IntegrationError when state k is not physical (strain beyond the limit, an element bent through,
        a non-finite force or torque): the step k−1 → k failed.

        Args:
            k: Step index of the state.
            forces: The forces, strains and rotation traces of state k.
        """
        bad = unphysical(*forces, self.options.strain_limit)
        if bad is None:
            return
        b, node, what = bad
        fail, h = max(k - 1, 0), self.h
        if self.beta == 0.0:
            hint = f"dt = {h:g} s is probably beyond stability (estimate {float(self.rod.stable_dt()[b]):.3g} s)"
        else:
            hint = implicit_remedy(self.h, self.beta, self.zeta, self.loads)
        msg = (
            f"integration failed at step {fail} (t = {fail * h:.6g} s → {(fail + 1) * h:.6g} s), "
            f"rod {b}, node {node}: {what}; {hint}"
        )
        raise IntegrationError(
            msg,
            step=fail,
            node=node,
            rod=b,
            state=self.prev_state(),
            trajectory=self.trajectory() if self.rec_p else None,
        )

    def check_newton(self, k: int, rel: Tensor) -> None:
        """IntegrationError when the Cayley–Newton solve of step k did not converge at some free node.

        Args:
            k: Step index.
            rel: Newton update relative to the tolerance per node, shape (B, n).
        """
        bad = ~(rel <= 1.0)
        if self.held is not None:
            bad = bad & ~self.held.rotation_held()
        if bool(bad.any()):
            b, node = [int(x) for x in bad.nonzero()[0]]
            tol = self.options.newton_tol
            raise IntegrationError(
                f"Cayley–Newton solve did not converge at step {k} (t = {k * self.h:.6g} s), rod {b}, node {node}: "
                f"last Newton update {float(rel[b, node]) * tol:.3g} > {tol:g} (normalised), also with the line "
                f"search: the node would turn by more than a quarter turn in one step; "
                + (
                    f"|h ω| too large — reduce dt (loads: {load_names(self.loads)})"
                    if self.beta == 0.0
                    else implicit_remedy(self.h, self.beta, self.zeta, self.loads)
                ),
                step=k,
                node=node,
                rod=b,
                state=self.prev_state(),
                trajectory=self.trajectory(),
            )
