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
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.lie import so3_cayley
from flexlearn.physics.cosserat import fused as _fused
from flexlearn.physics.cosserat.context import _Ctx
from flexlearn.physics.cosserat.errors import IntegrationError
from flexlearn.physics.cosserat.newton import _cayley_newton, _cayley_newton_fixed
from flexlearn.physics.cosserat.state import Clamp, RodState, Trajectory

if TYPE_CHECKING:  # pragma: no cover
    from flexlearn.physics.cosserat.rod import CosseratRod


def simulate(rod: "CosseratRod", duration: float, dt: float, loads: Sequence[Any] = (), damping: Optional[Any] = None,
             initial: Optional[RodState] = None, base: Union[Clamp, str, None] = None,
             record_every: int = 1, record_energy: bool = False, strain_limit: float = 0.5,
             newton_tol: float = 1e-12, newton_iters: int = 20, callback: Optional[Callable[[int, RodState], None]] = None,
             observer: Optional[Any] = None, compile: bool = False, newton_fixed_iters: int = 3,
             backend: str = "auto") -> Trajectory:
    """Integrate ``rod`` with the LGVI for ``duration`` seconds with step ``dt`` (the implementation of
    :meth:`CosseratRod.simulate <flexlearn.physics.cosserat.rod.CosseratRod.simulate>`, which documents
    the arguments). Kick–drift leapfrog for the positions, Cayley–Newton for the rotations, a half-kick
    start; every state is checked (strain, element rotation, finiteness, Newton convergence) and a failure
    raises :class:`IntegrationError` with the state before the failing step and the trajectory so far."""
    check(isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0, "dt", dt, "must be a finite number > 0 [s]")
    check(math.isfinite(duration) and duration >= 0, "duration", duration, "must be finite and >= 0 [s]")
    check(isinstance(record_every, int) and record_every >= 1, "record_every", record_every, "must be an integer >= 1")
    check(backend in ("auto", "numba", "torch"), "backend", backend, "must be 'auto', 'numba' or 'torch'")
    for name in ("length", "density", "youngs_modulus", "shear_modulus", "area", "second_moment_1",
                 "second_moment_2", "torsion_constant"):
        v = getattr(rod, name).detach()
        bad = ~(torch.isfinite(v) & (v > 0))
        if bool(bad.any()):
            i = int(bad.reshape(-1).nonzero()[0])
            raise IntegrationError(f"non-physical parameter {name}[{i}] = {v.reshape(-1)[i].item()!r} before step 0: "
                                   "must be finite and > 0", step=0, node=-1, rod=i, what="parameter")
    n_steps = int(round(duration / dt))
    dtype = torch.float64
    loads = list(loads)
    ctx = _Ctx(rod, loads, dtype)
    if base is None:
        base = Clamp()
    clamped = isinstance(base, Clamp)
    state = initial if initial is not None else rod.straight_state(base if clamped else None)
    B, n = ctx.B, ctx.n
    p = state.positions.to(dtype=dtype, device=rod.length.device).expand(B, n, 3)
    R = state.rotations.to(dtype=dtype, device=rod.length.device).expand(B, n, 3, 3)
    h = float(dt)

    device = rod.length.device

    def base_pose(t):
        r0, p0 = base.pose(t, dtype, device)
        return r0.expand(B, 3, 3), p0.expand(B, 3)

    if clamped:
        r0, p0 = base_pose(0.0)
        p = torch.cat([p0.unsqueeze(1), p[:, 1:]], 1)
        R = torch.cat([r0.unsqueeze(1), R[:, 1:]], 1)

    if backend != "torch":
        why = _fused.eligible(rod, loads, damping, observer, callback, record_energy, compile, base, initial,
                              n_steps)
        check(backend == "auto" or not why, "backend", backend, f"the fused kernel cannot run this: {why}")
        if not why:
            r1 = p1 = None
            if clamped:
                r1, p1 = base_pose(0.0)
            v0 = state.velocities.to(p).expand(B, n, 3)
            w0 = state.angular_velocities.to(p).expand(B, n, 3)
            out = _fused.simulate(rod, ctx, loads, damping, R, p, v0, w0, float(dt), n_steps, record_every, clamped,
                                  r1, p1, strain_limit, newton_tol, newton_iters)
            if out is not None:
                P, Rt, times, final = out
                sq = (lambda x: x) if rod.batched else (lambda x: x[:, 0])
                traj = Trajectory(sq(P), sq(Rt), times, None)
                traj.final = final
                return traj
            # a failing step: rerun on the tensor path, which raises the IntegrationError (node, step, state)

    damp = damping
    if damp is not None:
        damp.reset(rod, ctx, R, p)
    m = ctx.mass.unsqueeze(-1)
    J = ctx.inertia
    scale = ctx.scale.unsqueeze(-1)
    internal = rod._internal

    def external(R, p, t, v, w):
        fx = torch.zeros_like(p)
        tx = torch.zeros_like(p)
        for load in loads:
            fl, tl = load.apply(ctx, R, p, t)
            if fl is not None:
                fx = fx + fl
            if tl is not None:
                tx = tx + tl
        if damp is not None:
            fd, td = damp.external(ctx, v, w)
            fx = fx + fd
            tx = tx + td
        dn = dm = None
        if damp is not None:
            dn, dm = damp.internal(ctx, R, p, h)
        return fx, tx, dn, dm

    def observe(k, R, p, v, fx, dn, dm):
        """Seed 001, Sec. 3.2: the estimation filters see the undamped model force at state k."""
        f_c, *_ = internal(ctx, R, p, dn, dm)
        fo = observer.update(k, p, v, f_c + fx, ctx.mass, h)
        return fx + fo

    def core(R, p, v, pi, fx, tx, dn, dm, r1, p1, fixed: bool):
        """One LGVI step from state k (pure tensor function; compiled when ``compile=True``)."""
        f, tau, gL, gR, fc, Q = internal(ctx, R, p, dn, dm)
        f = f + fx
        tau = tau + tx
        v2 = v + h * f / m                                   # kick (leapfrog)
        u = pi + h * tau
        p2 = p + h * v2                                      # drift: explicit positions
        un = h * u / scale                                   # Newton on the Cayley map, all nodes
        if fixed:
            fcay, res = _cayley_newton_fixed(un, ctx.jd_n, ctx.j_n, newton_fixed_iters)
        else:
            fcay, res = _cayley_newton(un, ctx.jd_n, ctx.j_n, newton_tol, newton_iters)
        F = so3_cayley(fcay)
        R2 = R @ F
        pi2 = (F.transpose(-1, -2) @ u.unsqueeze(-1)).squeeze(-1)
        if clamped:
            v2 = torch.cat([((p1 - p[:, 0]) / h).unsqueeze(1), v2[:, 1:]], 1)
            p2 = torch.cat([p1.unsqueeze(1), p2[:, 1:]], 1)
            R2 = torch.cat([r1.unsqueeze(1), R2[:, 1:]], 1)
            pi2 = torch.cat([torch.zeros_like(pi2[:, :1]), pi2[:, 1:]], 1)
        strain = torch.maximum(gL.norm(dim=-1), gR.norm(dim=-1))
        tr = Q[..., 0, 0] + Q[..., 1, 1] + Q[..., 2, 2]
        rel = res / (newton_tol * un.norm(dim=-1).clamp_min(1e-3))
        return R2, p2, v2, pi2, f, tau, strain, tr, rel

    core_fn = core
    if compile:
        core_fn = torch.compile(core, dynamic=False)

    v0 = state.velocities.to(p).expand(B, n, 3)
    w0 = state.angular_velocities.to(p).expand(B, n, 3)
    fx, tx, dn, dm = external(R, p, 0.0, v0, w0)
    f0, tau0, *_ = internal(ctx, R, p, dn, dm)
    f0, tau0 = f0 + fx, tau0 + tx
    # half-kick initialisation: v^{-1/2} = v0 − h/2 f0/m, Π^0 = J ω0 − h/2 τ0 (second-order start)
    v = v0 - 0.5 * h * f0 / m
    pi = J * w0 - 0.5 * h * tau0
    if clamped:
        v = torch.cat([torch.zeros_like(v[:, :1]), v[:, 1:]], 1)
        pi = torch.cat([torch.zeros_like(pi[:, :1]), pi[:, 1:]], 1)

    rec_p: List[Tensor] = []
    rec_R: List[Tensor] = []
    rec_t: List[float] = []
    rec_e: List[Tensor] = []
    potentials = [ld for ld in loads if hasattr(ld, "potential")]

    def record(k, R, p, v_int, pi_int):
        rec_p.append(p)
        rec_R.append(R)
        rec_t.append(k * h)
        if record_energy:
            ek = 0.5 * (ctx.mass * (v_int ** 2).sum(-1)).sum(-1) + 0.5 * (pi_int ** 2 / J).sum((-1, -2))
            ek = ek + rod.potential_energy(R, p, ctx)
            for ld in potentials:
                try:
                    ek = ek + ld.potential(ctx, R, p, k * h)
                except TypeError:
                    ek = ek + ld.potential(ctx, p)
            rec_e.append(ek)

    def make_traj():
        sq = (lambda x: x) if rod.batched else (lambda x: x[:, 0])
        energy = sq(torch.stack(rec_e)) if record_energy and rec_e else None
        return Trajectory(sq(torch.stack(rec_p)), sq(torch.stack(rec_R)), torch.tensor(rec_t, dtype=dtype), energy)

    def public_state(k, R, p, v_half, pi_half, f, tau):
        vv = v_half + 0.5 * h * f / m
        if clamped:
            vv = torch.cat([v_half[:, :1], vv[:, 1:]], 1)
        return RodState(p, R, vv, (pi_half + 0.5 * h * tau) / J, k * h, k)

    prev_tuple = None

    def prev_state():
        return None if prev_tuple is None else public_state(*prev_tuple)

    def fail_state(k, strain, tr, f, tau):
        bad_el = ~torch.isfinite(strain) | (strain > strain_limit) | ~(1.0 + tr > 1e-6)
        bad_node = ~torch.isfinite(f).all(-1) | ~torch.isfinite(tau).all(-1)
        if not (bool(bad_el.any()) or bool(bad_node.any())):
            return
        if bool(bad_el.any()):
            b, i = [int(x) for x in bad_el.nonzero()[0]]
            what = (f"element {i} (nodes {i}-{i + 1}) strain |Γ| = {float(strain[b, i]):.3g} "
                    f"(limit {strain_limit}), relative rotation trace {float(tr[b, i]):.3g}")
            node = i + 1
        else:
            b, node = [int(x) for x in bad_node.nonzero()[0]]
            what = f"non-finite force or torque at node {node}"
        fail = max(k - 1, 0)
        msg = (f"integration failed at step {fail} (t = {fail * h:.6g} s → {(fail + 1) * h:.6g} s), "
               f"rod {b}, node {node}: {what}; dt = {h:g} s is probably beyond stability "
               f"(estimate {float(rod.stable_dt()[b]):.3g} s)")
        raise IntegrationError(msg, step=fail, node=node, rod=b, state=prev_state(),
                               trajectory=make_traj() if rec_p else None)

    for k in range(n_steps + 1):
        t = k * h
        fx, tx, dn, dm = external(R, p, t, v, pi / J)
        if observer is not None:
            fx = observe(k, R, p, v, fx, dn, dm)
        if k == n_steps:
            f, tau, gL, gR, fc, Q = internal(ctx, R, p, dn, dm)
            f, tau = f + fx, tau + tx
            strain = torch.maximum(gL.norm(dim=-1), gR.norm(dim=-1))
            tr = Q[..., 0, 0] + Q[..., 1, 1] + Q[..., 2, 2]
            out = None
        else:
            r1 = p1 = None
            if clamped:
                r1, p1 = base_pose(t + h)
            out = core_fn(R, p, v, pi, fx, tx, dn, dm, r1, p1, compile)
            f, tau, strain, tr, rel = out[4:]
        fail_state(k, strain, tr, f, tau)                   # state k valid? (else step k-1 failed)
        if k % record_every == 0 or k == n_steps or callback is not None:
            v_int = v + 0.5 * h * f / m
            pi_int = pi + 0.5 * h * tau
            if clamped:
                v_int = torch.cat([v[:, :1], v_int[:, 1:]], 1)
            if k % record_every == 0 or k == n_steps:
                record(k, R, p, v_int, pi_int)
            if callback is not None:
                callback(k, RodState(p, R, v_int, pi_int / J, t, k))
        prev_tuple = (k, R, p, v, pi, f, tau)
        if out is None:
            break
        bad = ~(rel <= 1.0)
        if clamped:
            bad[:, 0] = False
        if bool(bad.any()):
            b, node = [int(x) for x in bad.nonzero()[0]]
            raise IntegrationError(
                f"Cayley–Newton solve did not converge at step {k} (t = {t:.6g} s), rod {b}, node {node}: "
                f"last Newton update {float(rel[b, node]) * newton_tol:.3g} > {newton_tol:g} (normalised); "
                f"|h ω| too large — reduce dt", step=k, node=node, rod=b, state=prev_state(),
                trajectory=make_traj())
        R, p, v, pi = out[:4]
        if damp is not None:
            damp.advance(ctx, R, p)
    traj = make_traj()
    traj.final = prev_state()
    return traj
