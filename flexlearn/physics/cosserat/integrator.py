"""The LGVI time-stepping loop behind :meth:`CosseratRod.simulate
<flexlearn.physics.cosserat.rod.CosseratRod.simulate>` (seed 001, Secs. 2–3.1, eqs. (7)–(16)). The model,
its potential V and the internal forces are in :mod:`flexlearn.physics.cosserat.rod`.

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

Implicit variant (``scheme='implicit'``, :mod:`flexlearn.physics.cosserat.implicit`): the same map with the
node forces and torques of every kick replaced by ``F̃ = M (M + β h² K)⁻¹ F`` (M = diag(J_a, m_a), K the
Gauss–Newton tangent stiffness of the elastic energy at state k): for a linear rod this is Newmark's
average-acceleration rule (β = ¼), unconditionally stable, so the step is set by accuracy, not by the stiff
shear/extension modes. Everything else (Cayley–Newton rotations, momenta, checks, records) is shared.

:class:`Stepper` holds one simulation's constants and runs the loop; :func:`simulate` validates the
arguments and picks the fused kernel or the tensor path.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple, Union, cast

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.lie import so3_cayley
from flexlearn.physics.cosserat.compiled import lgvi as _fused
from flexlearn.physics.cosserat import implicit as _implicit
from flexlearn.physics.cosserat.context import _Ctx
from flexlearn.physics.cosserat.damping import DampingModel, RodObserver
from flexlearn.physics.cosserat.errors import IntegrationError
from flexlearn.physics.cosserat.loads import RodLoad, potential_loads
from flexlearn.physics.cosserat.newton import _cayley_newton, _cayley_newton_fixed
from flexlearn.physics.cosserat.state import Clamp, RodState, Trajectory

if TYPE_CHECKING:  # pragma: no cover
    from flexlearn.physics.cosserat.rod import CosseratRod

SCHEMES = ("lgvi", "implicit")
_PARAMETERS = ("length", "density", "youngs_modulus", "shear_modulus", "area", "second_moment_1",
               "second_moment_2", "torsion_constant")


def simulate(rod: "CosseratRod", duration: float, dt: float, loads: Sequence[RodLoad] = (),
             damping: Optional[DampingModel] = None,
             initial: Optional[RodState] = None, base: Union[Clamp, str, None] = None,
             record_every: int = 1, record_energy: bool = False, strain_limit: float = 0.5,
             newton_tol: float = 1e-12, newton_iters: int = 20, callback: Optional[Callable[[int, RodState], None]] = None,
             observer: Optional[RodObserver] = None, compile: bool = False, newton_fixed_iters: int = 3,
             backend: str = "auto", scheme: str = "lgvi", implicit_beta: float = 0.25,
             implicit_dissipation: float = 0.0) -> Trajectory:
    """Integrate ``rod`` for ``duration`` seconds with step ``dt`` (the implementation of
    :meth:`CosseratRod.simulate <flexlearn.physics.cosserat.rod.CosseratRod.simulate>`, which documents
    the arguments): the fused kernel when it can run the problem (``backend``), else :meth:`Stepper.run`."""
    _check_arguments(rod, duration, dt, record_every, backend, scheme, implicit_beta, implicit_dissipation)
    n_steps = int(round(duration / dt))
    beta = float(implicit_beta) if scheme == "implicit" else 0.0
    zeta = float(implicit_dissipation) if scheme == "implicit" else 0.0
    stepper = Stepper(rod, loads, damping, float(dt), base, initial, observer, strain_limit, newton_tol,
                      newton_iters, newton_fixed_iters, record_energy, beta, zeta)
    if backend != "torch":
        why = _fused.eligible(rod, stepper.loads, damping, observer, callback, record_energy, compile, stepper.base,
                              initial, n_steps)
        check(backend == "auto" or not why, "backend", backend, f"the fused kernel cannot run this: {why}")
        if not why:
            traj = stepper.run_fused(n_steps, record_every)
            if traj is not None:
                return traj
            # a failing step: rerun on the tensor path, which raises the IntegrationError (node, step, state)
    return stepper.run(n_steps, record_every, callback, compile)


def _check_arguments(rod, duration, dt, record_every, backend, scheme, implicit_beta, implicit_dissipation) -> None:
    """ConfigError naming the argument, or IntegrationError naming a non-physical rod parameter."""
    check(isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0, "dt", dt, "must be a finite number > 0 [s]")
    check(math.isfinite(duration) and duration >= 0, "duration", duration, "must be finite and >= 0 [s]")
    check(isinstance(record_every, int) and record_every >= 1, "record_every", record_every, "must be an integer >= 1")
    check(backend in ("auto", "numba", "torch"), "backend", backend, "must be 'auto', 'numba' or 'torch'")
    check(scheme in SCHEMES, "scheme", scheme, "must be 'lgvi' or 'implicit'")
    check(isinstance(implicit_beta, (int, float)) and math.isfinite(implicit_beta) and implicit_beta >= 0.25,
          "implicit_beta", implicit_beta, "must be a finite number >= 0.25 (unconditional stability)")
    check(isinstance(implicit_dissipation, (int, float)) and 0 <= implicit_dissipation <= 1,
          "implicit_dissipation", implicit_dissipation, "must be a number in [0, 1]")
    for name in _PARAMETERS:
        v = getattr(rod, name).detach()
        bad = ~(torch.isfinite(v) & (v > 0))
        if bool(bad.any()):
            i = int(bad.reshape(-1).nonzero()[0])
            raise IntegrationError(f"non-physical parameter {name}[{i}] = {v.reshape(-1)[i].item()!r} before step 0: "
                                   "must be finite and > 0", step=0, node=-1, rod=i, what="parameter")


class Stepper:
    """One simulation on the tensor path: its constants (context, base, masses, step ``h``), the step map
    :meth:`core`, the half-kick start, the checks of every state and the records.

    States are carried at half steps: ``(R^k, p^k, v^{k−½}, Π^k − h/2 τ^k)`` (B, n, …). ``implicit_beta``
    β > 0 selects the implicit variant (forces filtered by :func:`~flexlearn.physics.cosserat.implicit.filter_forces`);
    0 is the LGVI."""

    def __init__(self, rod: "CosseratRod", loads: Sequence[RodLoad], damping: Optional[DampingModel], h: float,
                 base: Union[Clamp, str, None], initial: Optional[RodState], observer: Optional[RodObserver] = None,
                 strain_limit: float = 0.5, newton_tol: float = 1e-12, newton_iters: int = 20,
                 newton_fixed_iters: int = 3, record_energy: bool = False, implicit_beta: float = 0.0,
                 implicit_dissipation: float = 0.0):
        self.rod, self.h, self.dtype = rod, h, torch.float64
        self.loads = list(loads)
        self.ctx = ctx = _Ctx(rod, self.loads, self.dtype)
        self.base = Clamp() if base is None else base
        self.clamped = isinstance(self.base, Clamp)
        self.damping, self.observer = damping, observer
        self.strain_limit, self.newton_tol, self.newton_iters = strain_limit, newton_tol, newton_iters
        self.newton_fixed_iters, self.record_energy, self.beta = newton_fixed_iters, record_energy, implicit_beta
        self.zeta = implicit_dissipation
        self.device = cast(Tensor, rod.length).device
        clamp = self.base if isinstance(self.base, Clamp) else None
        state = initial if initial is not None else rod.straight_state(clamp)
        B, n = ctx.B, ctx.n
        p = state.positions.to(dtype=self.dtype, device=self.device).expand(B, n, 3)
        R = state.rotations.to(dtype=self.dtype, device=self.device).expand(B, n, 3, 3)
        if self.clamped:
            r0, p0 = self.base_pose(0.0)
            p = torch.cat([p0.unsqueeze(1), p[:, 1:]], 1)
            R = torch.cat([r0.unsqueeze(1), R[:, 1:]], 1)
        self.R0, self.p0 = R, p
        self.v0 = state.velocities.to(p).expand(B, n, 3)
        self.w0 = state.angular_velocities.to(p).expand(B, n, 3)
        self.m, self.J, self.scale = ctx.mass.unsqueeze(-1), ctx.inertia, ctx.scale.unsqueeze(-1)
        self.potentials = potential_loads(self.loads) if record_energy else []
        self.rec_p: List[Tensor] = []
        self.rec_R: List[Tensor] = []
        self.rec_t: List[float] = []
        self.rec_e: List[Tensor] = []
        self.prev: Optional[tuple] = None

    def base_pose(self, t: float) -> Tuple[Tensor, Tensor]:
        r0, p0 = cast(Clamp, self.base).pose(t, self.dtype, self.device)
        return r0.expand(self.ctx.B, 3, 3), p0.expand(self.ctx.B, 3)

    def squeeze(self, x: Tensor) -> Tensor:
        """Drop the rod batch dimension (axis 1) of a record of an unbatched rod."""
        return x if self.rod.batched else x[:, 0]

    # ------------------------------------------------------------ forces
    def external(self, R: Tensor, p: Tensor, t: float, v: Tensor, w: Tensor):
        """Loads and damping at state k: ``(force, torque, damping stress dn, damping moment dm)``."""
        fx = torch.zeros_like(p)
        tx = torch.zeros_like(p)
        for load in self.loads:
            fl, tl = load.apply(self.ctx, R, p, t)
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
        return fx, tx, dn, dm

    def observe(self, k: int, R: Tensor, p: Tensor, v: Tensor, fx: Tensor, dn, dm) -> Tensor:
        """Seed 001, Sec. 3.2: the estimation filters see the undamped model force at state k."""
        f_c, *_ = self.rod._internal(self.ctx, R, p, dn, dm)
        fo = cast(RodObserver, self.observer).update(k, p, v, f_c + fx, self.ctx.mass, self.h)
        return fx + fo

    def filtered(self, R: Tensor, p: Tensor, f: Tensor, tau: Tensor, v: Optional[Tensor] = None,
                 pi: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """The kick's forces: unchanged for the LGVI, ``M (M + β h² K)⁻¹ F`` for the implicit variant (with
        the numerical damping of the half-step velocities ``v``, ``pi / J`` when ζ > 0: eq. (4) of
        :mod:`~flexlearn.physics.cosserat.implicit`)."""
        if self.beta == 0.0:
            return f, tau
        h = self.h
        if self.zeta == 0.0 or v is None or pi is None:
            return _implicit.filter_forces(self.ctx, R, p, f, tau, self.beta * h * h, self.clamped)
        return _implicit.filter_forces(self.ctx, R, p, f, tau, (self.beta + 0.5 * self.zeta) * h * h, self.clamped,
                                       self.zeta * h, v, pi / self.J)

    # ------------------------------------------------------------ the step
    def velocities(self, R: Tensor, p: Tensor, v_int: Tensor, pi_int: Tensor) -> Tuple[Tensor, Tensor]:
        """Velocities (v, ω) of state k from the means of its half-step velocities and momenta (the identity
        for the LGVI; eq. (3) of :mod:`~flexlearn.physics.cosserat.implicit` for the implicit variant)."""
        if self.beta == 0.0:
            return v_int, pi_int / self.J
        if self.clamped:          # the base node's momentum is not integrated (Π = 0, like v in emit)
            pi_int = torch.cat([torch.zeros_like(pi_int[:, :1]), pi_int[:, 1:]], 1)
        return _implicit.unfilter_velocities(self.ctx, R, p, v_int, pi_int / self.J, self.beta * self.h * self.h,
                                             self.clamped)

    def start(self, R: Tensor, p: Tensor) -> Tuple[Tensor, Tensor]:
        """Half-kick initialisation: ``v^{−½} = v0 − h/2 f0/m``, ``Π^0 = J ω0 − h/2 τ0`` (second order)."""
        h, v0, w0 = self.h, self.v0, self.w0
        fx, tx, dn, dm = self.external(R, p, 0.0, v0, w0)
        f0, tau0, *_ = self.rod._internal(self.ctx, R, p, dn, dm)
        f0, tau0 = self.filtered(R, p, f0 + fx, tau0 + tx)
        if self.beta != 0.0:                                 # the scheme's velocity variable (implicit.py, eq. (3))
            v0, w0 = _implicit.filter_velocities(self.ctx, R, p, v0, w0, self.beta * h * h, self.clamped)
        v = v0 - 0.5 * h * f0 / self.m
        pi = self.J * w0 - 0.5 * h * tau0
        if self.clamped:
            v = torch.cat([torch.zeros_like(v[:, :1]), v[:, 1:]], 1)
            pi = torch.cat([torch.zeros_like(pi[:, :1]), pi[:, 1:]], 1)
        return v, pi

    def core(self, R, p, v, pi, fx, tx, dn, dm, r1, p1, fixed: bool):
        """One step from state k (pure tensor function; compiled when ``compile=True``): returns
        ``(R, p, v, Π) of k+1, the forces f, τ of state k, strain, tr Q, relative Newton residual``."""
        h, ctx = self.h, self.ctx
        f, tau, gL, gR, fc, Q = self.rod._internal(ctx, R, p, dn, dm)
        f = f + fx
        tau = tau + tx
        f, tau = self.filtered(R, p, f, tau, v, pi)
        v2 = v + h * f / self.m                              # kick (leapfrog)
        u = pi + h * tau
        p2 = p + h * v2                                      # drift: explicit positions
        un = h * u / self.scale                              # Newton on the Cayley map, all nodes
        if fixed:
            fcay, res = _cayley_newton_fixed(un, ctx.jd_n, ctx.j_n, self.newton_fixed_iters)
        else:
            fcay, res = _cayley_newton(un, ctx.jd_n, ctx.j_n, self.newton_tol, self.newton_iters)
        F = so3_cayley(fcay)
        R2 = R @ F
        pi2 = (F.transpose(-1, -2) @ u.unsqueeze(-1)).squeeze(-1)
        if self.clamped:
            v2 = torch.cat([((p1 - p[:, 0]) / h).unsqueeze(1), v2[:, 1:]], 1)
            p2 = torch.cat([p1.unsqueeze(1), p2[:, 1:]], 1)
            R2 = torch.cat([r1.unsqueeze(1), R2[:, 1:]], 1)
            pi2 = torch.cat([torch.zeros_like(pi2[:, :1]), pi2[:, 1:]], 1)
        strain = torch.maximum(gL.norm(dim=-1), gR.norm(dim=-1))
        tr = Q[..., 0, 0] + Q[..., 1, 1] + Q[..., 2, 2]
        rel = res / (self.newton_tol * un.norm(dim=-1).clamp_min(1e-3))
        return R2, p2, v2, pi2, f, tau, strain, tr, rel

    def advance(self, k: int, R, p, v, pi, core, fixed: bool, last: bool):
        """Loads at state k and the step k → k+1 (none at the last state): ``(out of core or None, f, τ,
        strain, tr Q, Newton residual)``."""
        t = k * self.h
        fx, tx, dn, dm = self.external(R, p, t, v, pi / self.J)
        if self.observer is not None:
            fx = self.observe(k, R, p, v, fx, dn, dm)
        if last:
            f, tau, gL, gR, fc, Q = self.rod._internal(self.ctx, R, p, dn, dm)
            f, tau = self.filtered(R, p, f + fx, tau + tx, v, pi)
            strain = torch.maximum(gL.norm(dim=-1), gR.norm(dim=-1))
            tr = Q[..., 0, 0] + Q[..., 1, 1] + Q[..., 2, 2]
            return None, f, tau, strain, tr, None
        r1 = p1 = None
        if self.clamped:
            r1, p1 = self.base_pose(t + self.h)
        out = core(R, p, v, pi, fx, tx, dn, dm, r1, p1, fixed)
        return (out,) + tuple(out[4:])

    def run(self, n_steps: int, record_every: int = 1, callback: Optional[Callable[[int, RodState], None]] = None,
            compile: bool = False) -> Trajectory:
        """The loop on the tensor path: every state is checked (strain, element rotation, finiteness, Newton
        convergence) and a failure raises :class:`IntegrationError` with the state before the failing step
        and the trajectory so far."""
        core = torch.compile(self.core, dynamic=False) if compile else self.core
        R, p = self.R0, self.p0
        if self.damping is not None:
            self.damping.reset(self.rod, self.ctx, R, p)
        v, pi = self.start(R, p)
        for k in range(n_steps + 1):
            out, f, tau, strain, tr, rel = self.advance(k, R, p, v, pi, core, compile, k == n_steps)
            self.check_state(k, strain, tr, f, tau)             # state k valid? (else step k-1 failed)
            self.emit(k, R, p, v, pi, f, tau, record_every, n_steps, callback)
            self.prev = (k, R, p, v, pi, f, tau)
            if out is None:
                break
            self.check_newton(k, rel)
            R, p, v, pi = out[:4]
            if self.damping is not None:
                self.damping.advance(self.ctx, R, p)
        traj = self.trajectory()
        traj.final = self.prev_state()
        return traj

    def run_fused(self, n_steps: int, record_every: int) -> Optional[Trajectory]:
        """The same run in the fused kernel (:func:`flexlearn.physics.cosserat.compiled.lgvi.simulate`); None when a
        step failed there."""
        r1 = p1 = None
        if self.clamped:
            r1, p1 = self.base_pose(0.0)
        out = _fused.simulate(self.rod, self.ctx, self.loads, self.damping, self.R0, self.p0, self.v0, self.w0,
                              self.h, n_steps, record_every, self.clamped, r1, p1, self.strain_limit,
                              self.newton_tol, self.newton_iters, self.beta, self.zeta)
        if out is None:
            return None
        P, Rt, times, final = out
        traj = Trajectory(self.squeeze(P), self.squeeze(Rt), times, None)
        traj.final = final
        return traj

    # ------------------------------------------------------------ records and checks
    def emit(self, k, R, p, v, pi, f, tau, record_every, n_steps, callback) -> None:
        """Record state k (and call ``callback``) with the velocities at the integer step."""
        if k % record_every == 0 or k == n_steps or callback is not None:
            h = self.h
            v_int = v + 0.5 * h * f / self.m
            pi_int = pi + 0.5 * h * tau
            if self.clamped:
                v_int = torch.cat([v[:, :1], v_int[:, 1:]], 1)
            if self.beta != 0.0:
                v_int, w_int = self.velocities(R, p, v_int, pi_int)
                pi_int = self.J * w_int
            if k % record_every == 0 or k == n_steps:
                self.record(k, R, p, v_int, pi_int)
            if callback is not None:
                callback(k, RodState(p, R, v_int, pi_int / self.J, k * h, k))

    def record(self, k: int, R: Tensor, p: Tensor, v_int: Tensor, pi_int: Tensor) -> None:
        ctx = self.ctx
        self.rec_p.append(p)
        self.rec_R.append(R)
        self.rec_t.append(k * self.h)
        if self.record_energy:
            ek = 0.5 * (ctx.mass * (v_int ** 2).sum(-1)).sum(-1) + 0.5 * (pi_int ** 2 / self.J).sum((-1, -2))
            ek = ek + self.rod.potential_energy(R, p, ctx)
            for ld in self.potentials:
                ek = ek + ld.potential(ctx, R, p, k * self.h)
            self.rec_e.append(ek)

    def trajectory(self) -> Trajectory:
        energy = self.squeeze(torch.stack(self.rec_e)) if self.record_energy and self.rec_e else None
        return Trajectory(self.squeeze(torch.stack(self.rec_p)), self.squeeze(torch.stack(self.rec_R)),
                          torch.tensor(self.rec_t, dtype=self.dtype), energy)

    def public_state(self, k, R, p, v_half, pi_half, f, tau) -> RodState:
        h = self.h
        vv = v_half + 0.5 * h * f / self.m
        if self.clamped:
            vv = torch.cat([v_half[:, :1], vv[:, 1:]], 1)
        if self.beta == 0.0:
            return RodState(p, R, vv, (pi_half + 0.5 * h * tau) / self.J, k * h, k)
        vv, ww = self.velocities(R, p, vv, pi_half + 0.5 * h * tau)
        return RodState(p, R, vv, ww, k * h, k)

    def prev_state(self) -> Optional[RodState]:
        return None if self.prev is None else self.public_state(*self.prev)

    def check_state(self, k: int, strain: Tensor, tr: Tensor, f: Tensor, tau: Tensor) -> None:
        """IntegrationError when state k is not physical (strain beyond the limit, an element bent through,
        a non-finite force or torque): the step k−1 → k failed."""
        bad_el = ~torch.isfinite(strain) | (strain > self.strain_limit) | ~(1.0 + tr > 1e-6)
        bad_node = ~torch.isfinite(f).all(-1) | ~torch.isfinite(tau).all(-1)
        if not (bool(bad_el.any()) or bool(bad_node.any())):
            return
        if bool(bad_el.any()):
            b, i = [int(x) for x in bad_el.nonzero()[0]]
            what = (f"element {i} (nodes {i}-{i + 1}) strain |Γ| = {float(strain[b, i]):.3g} "
                    f"(limit {self.strain_limit}), relative rotation trace {float(tr[b, i]):.3g}")
            node = i + 1
        else:
            b, node = [int(x) for x in bad_node.nonzero()[0]]
            what = f"non-finite force or torque at node {node}"
        fail, h = max(k - 1, 0), self.h
        if self.beta == 0.0:
            hint = f"dt = {h:g} s is probably beyond stability (estimate {float(self.rod.stable_dt()[b]):.3g} s)"
        else:
            hint = f"dt = {h:g} s is too large for the implicit step's accuracy here — reduce dt"
        msg = (f"integration failed at step {fail} (t = {fail * h:.6g} s → {(fail + 1) * h:.6g} s), "
               f"rod {b}, node {node}: {what}; {hint}")
        raise IntegrationError(msg, step=fail, node=node, rod=b, state=self.prev_state(),
                               trajectory=self.trajectory() if self.rec_p else None)

    def check_newton(self, k: int, rel: Tensor) -> None:
        """IntegrationError when the Cayley–Newton solve of step k did not converge at some free node."""
        bad = ~(rel <= 1.0)
        if self.clamped:
            bad[:, 0] = False
        if bool(bad.any()):
            b, node = [int(x) for x in bad.nonzero()[0]]
            raise IntegrationError(
                f"Cayley–Newton solve did not converge at step {k} (t = {k * self.h:.6g} s), rod {b}, node {node}: "
                f"last Newton update {float(rel[b, node]) * self.newton_tol:.3g} > {self.newton_tol:g} (normalised); "
                f"|h ω| too large — reduce dt", step=k, node=node, rod=b, state=self.prev_state(),
                trajectory=self.trajectory())
