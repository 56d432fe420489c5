"""The solver half of `CPRModel` (seed 003, Sec. V-E): forward statics by Riemannian Newton with warm starts,
the tangent predictor, continuation fallbacks and implicit differentiation.

A mixin of :class:`~flexlearn.physics.lse.model.CPRModel` (uses its buffers, kinematics, ``retract`` and the
residual/tangent of :class:`~flexlearn.physics.lse.assembly.AssemblyMixin`). One ``solve`` call keeps its
decisions and by-products in a :class:`~flexlearn.physics.lse.backend.SolveRun` (backend plan, residual weights,
the compiled driver's last nodes) that every step receives; nothing is written on the model. The Newton rules
(tolerances, failure tests, rotation cap, backtracking) are those of :mod:`flexlearn.physics.lse.newton_policy`,
shared with the compiled driver (:mod:`flexlearn.physics.lse.compiled.newton`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor, nn

from flexlearn.physics.lse import newton_policy as policy
from flexlearn.physics.lse.assembly import AssemblyMixin
from flexlearn.physics.lse.backend import SolverCache, SolveRun, plan
from flexlearn.physics.lse.compiled.problem import load_scale_compiled, newton_compiled, predict_compiled
from flexlearn.physics.lse.errors import ConvergenceError, StaticsInputError
from flexlearn.physics.lse.newton_policy import BACKTRACK_FACTOR, CONTINUE, CONVERGED, FAILED, NewtonSettings
from flexlearn.physics.lse.state import Equilibrium, Loads, Stability

__all__ = ["SolverMixin"]

# the Newton rules as plain Python (the compiled driver inlines the same functions)
_residual_verdict, _step_verdict = policy.py(policy.residual_verdict), policy.py(policy.step_verdict)
_step_scale, _accept_trial = policy.py(policy.step_scale), policy.py(policy.accept_trial)


def _solve_per_matrix(a: Tensor, b: Tensor) -> Tensor:
    """``torch.linalg.solve`` over a batch (R, n, n), (R, n, c); with several intra-op threads one matrix at a
    time: torch 2.13's batched LU (MKL) returned zero pivots with info = 0 for the rods' condensed tangents
    (n = 186, 16 elements per rod) when run on 2 threads, and lu_solve then failed."""
    if torch.get_num_threads() == 1 or a.shape[0] == 1:
        return torch.linalg.solve(a, b)
    return torch.stack([torch.linalg.solve(a[i], b[i]) for i in range(a.shape[0])])


class SolverMixin(AssemblyMixin):
    """``solve`` and its Newton machinery for `CPRModel` (see the module docstring)."""

    # plain attributes of `CPRModel` (its ``__init__`` documents them) and of nn.Module, for the type checker
    solver_cache: SolverCache
    retraction: str
    transport: bool
    predictor: bool
    backtracks: int
    growth: float
    _buffers: dict[str, Tensor | None]
    _parameters: dict[str, nn.Parameter | None]

    if TYPE_CHECKING:  # kinematics of `CPRModel` used here

        def straight_state(self, theta: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]: ...

        def retract(
            self,
            g_ee: Tensor,
            g_int: Tensor,
            beta: Tensor,
            dy: Tensor,
            dz: Tensor,
            alpha: float,
            theta: Optional[Tensor] = None,
            base_old: Optional[Tensor] = None,
        ) -> tuple[Tensor, Tensor, Tensor]: ...

    def solve(
        self,
        theta: Tensor,
        loads: Optional[Loads] = None,
        init: Optional[Equilibrium] = None,
        settings: Optional[NewtonSettings] = None,
        raise_on_failure: bool = True,
        backend: str = "auto",
    ) -> Equilibrium:
        """Forward statics: the equilibrium for motor angles θ (M,) [rad] under ``loads``.

        Riemannian Newton (seed Sec. V-E: ``K_t δq = -r``, ``g ← g exp(δζ^)``, ``β ← β + δβ``) from ``init``
        (warm start) or the straight configuration. The rules below are read from ``settings``
        (:class:`~flexlearn.physics.lse.newton_policy.NewtonSettings`: ``tol``, ``max_iter``,
        ``max_rotation_step``, ``max_continuation``, ``step_tol``; defaults when None). Step control: every step
        is scaled so that no nodal rotation increment exceeds ``max_rotation_step`` [rad] (damping), and when
        Newton fails (``max_iter`` iterations, the residual grows 1e3-fold, or it is still above its start after 6
        iterations) the solver falls back to adaptive continuation: first in θ from the warm start
        (θ(λ) = θ_init + λ (θ - θ_init)), then from the unloaded straight configuration in the
        load/actuation factor λ ∈ [0, 1] (θ(λ) = λ θ, loads(λ) = λ loads); step halved on failure, doubled on
        success, at most ``max_continuation`` stages each. The robot is multistable at large actuation: large
        jumps (≳ 0.1 rad per motor) may land on another branch; follow paths in small warm-started steps.
        Converged when the scaled residual ∞-norm (entries in N·m, relative to max(EI/L, applied-load
        scale)) is below ``tol``, or when the Newton correction falls below 1e-13 (rad, and L-scaled
        lengths; that last correction is applied): the round-off floor of the residual is ~1e-10 for stiff
        rods (these rules: :mod:`flexlearn.physics.lse.newton_policy`). Raises `ConvergenceError` with the last
        residual norm and the iteration count otherwise. ``iterations`` counts all Newton iterations.

        ``backend``: ``"auto"`` (the compiled numba Newton when :func:`~flexlearn.physics.lse.backend.eligible`,
        else the torch one), ``"numba"`` (a ConfigError saying why when it cannot run), ``"torch"`` (fused
        element kernels) or ``"reference"`` (the element functions of element.py); see
        :mod:`flexlearn.physics.lse.backend`. Same equilibria to round-off. Nothing is stored on the model; derived
        data is reused through ``self.solver_cache``.

        Differentiable: when θ, a load tensor or a buffer (e.g. ``youngs_modulus``) requires grad, the
        returned poses and slopes carry gradients from the implicit function theorem, computed by one
        linearisation at the converged point ``q = q* ⊕ (-K_t⁻¹ r(q*, p))`` with K_t detached (the value is
        unchanged, the derivative is ``-K_t⁻¹ ∂r/∂p``); Newton itself is never unrolled.

        Args:
            theta: Motor angles (M,) [rad].
            loads: Applied loads (default: gravity only).
            init: A previous equilibrium to warm-start from.
            settings: Stopping and step rules (default: :class:`NewtonSettings` ()).
            raise_on_failure: Raise `ConvergenceError` when no equilibrium is found (else return the last state).
            backend: ``"auto"``, ``"numba"``, ``"torch"`` or ``"reference"`` (above).

        Returns:
            The :class:`~flexlearn.physics.lse.state.Equilibrium` (poses, nodes, slopes, iterations, residual log,
            sensitivity dq/dθ, :class:`~flexlearn.physics.lse.state.Stability`; ``continuation.follow_stable``).

        Raises:
            StaticsInputError: θ of the wrong shape or not finite (also a ValueError).
            ConvergenceError: Newton and both continuations failed (with ``raise_on_failure``).
            ConfigError: ``backend`` unknown, or ``"numba"`` where the compiled driver cannot run.
        """
        loads = Loads() if loads is None else loads
        theta = self._checked_theta(theta)
        needs_grad = self._needs_grad(theta, loads)
        run = SolveRun(
            plan(self, backend, needs_grad), self.solver_cache, NewtonSettings() if settings is None else settings
        )
        with torch.no_grad():
            th = theta.detach()
            state, sens = self._start(run, th, init, loads)
            ok, state, total, last, s_new = self._solve_from(run, th, loads, init, state)
            log = run.log
            if not ok and raise_on_failure:
                raise ConvergenceError("LSE Newton did not converge", log[-1] if log else float("nan"), total, log)
            sens = s_new if s_new is not None else sens
        g_ee, g_int, beta = state
        nodes = run.nodes_of(g_ee)
        nodes = self.all_nodes(th, g_ee, g_int) if nodes is None else nodes
        eq = Equilibrium(g_ee, nodes, beta, th, total, log, sens)
        eq.stability = self.stability(eq, loads) if run.settings.stability else None
        if needs_grad:
            with torch.no_grad():
                kt, kee, _ = self.tangent(last)
            eq = self._implicit(run, theta, loads, eq, kt, kee)
        return eq

    def _checked_theta(self, theta) -> Tensor:
        """θ as a float64 tensor (M,); StaticsInputError when its shape is not (M,) or an entry is not finite."""
        theta = torch.as_tensor(theta, dtype=torch.float64)
        if theta.shape != (self.motor_axis.shape[0],):
            raise StaticsInputError(f"theta must have shape ({self.motor_axis.shape[0]},), got {tuple(theta.shape)}")
        if not all(math.isfinite(v) for v in theta.tolist()):
            raise StaticsInputError(f"theta must be finite, got {theta.tolist()}")
        return theta

    def _needs_grad(self, theta: Tensor, loads: Loads) -> bool:
        """Whether the solve must carry gradients: θ, a load tensor, a buffer or a parameter requires grad."""
        return torch.is_grad_enabled() and (
            theta.requires_grad
            or any(t.requires_grad for t in loads.tensors())
            or any(b is not None and b.requires_grad for b in self._buffers.values())
            or any(p is not None and p.requires_grad for p in self._parameters.values())
        )

    def _start(self, run: SolveRun, th: Tensor, init: Optional[Equilibrium], loads: Loads):
        """Newton's starting state and the warm start's sensitivity: ``init`` moved by the tangent predictor
        (``self.predictor``), or the straight configuration; optionally transported to the new bases. Sets the
        residual weights of the torch driver (``run.w``) and the residual scale (``run.scale``) on ``run``."""
        if not run.compiled:
            run.w = self.residual_weights()
        sens = None
        if init is not None:
            state = (init.g_ee.detach(), init.nodes[:, 1:-1].detach(), init.beta.detach())
            base_old = init.nodes[:, 0].detach()
            sens = init.sensitivity
            dth = th - init.theta.detach().to(th.dtype)
            if self.predictor and sens is not None and bool((dth != 0).any()):
                state = self._predict(run, state, sens, dth, run.settings.max_rotation_step)
        else:
            state = self.straight_state()
            base_old = self.base_pose0
        if self.transport and self.retraction == "strain" and self.n_elements > 1 and self.motor_axis.shape[0] > 0:
            # transport the guess to the new motor angles: keep every element's relative pose and
            # re-chain the rods from the new bases (the platform follows the rods' mean prediction)
            zero_y = torch.zeros(self.n_rods, self.n_y, dtype=torch.float64)
            state = self.retract(*state, zero_y, torch.zeros(6, dtype=torch.float64), 0.0, th, base_old)
        run.scale = (
            load_scale_compiled(run.cache.constants(self), loads) if run.compiled else self._load_scale(loads, state[0])
        )
        return state, sens

    def _solve_from(self, run: SolveRun, th: Tensor, loads: Loads, init: Optional[Equilibrium], state):
        """Newton from ``state``; on failure continuation in θ from the warm start, then in λ from the straight
        configuration (rules and scale from ``run``). Returns (converged, state, total iterations, last residual
        context, sensitivity)."""
        ok, state, total, last, s_new = self._newton(run, th, loads, state)
        if not ok and init is not None and not torch.equal(init.theta.detach().to(th.dtype), th):
            # continuation in θ from the warm start (same loads)
            th0 = init.theta.detach().to(th.dtype)
            ok, state, it0, last, s_new = self._continuation(
                run,
                lambda lam: (th0 + lam * (th - th0), loads),
                (init.g_ee.detach(), init.nodes[:, 1:-1].detach(), init.beta.detach()),
                True,
            )
            total += it0
        if not ok:  # continuation in λ from the unloaded straight configuration
            ok, state, it0, last, s_new = self._continuation(
                run, lambda lam: (lam * th, loads.scaled(lam)), self.straight_state(), False
            )
            total += it0
        return ok, state, total, last, s_new

    def _predict(
        self,
        run: SolveRun,
        state: tuple[Tensor, Tensor, Tensor],
        sens: tuple[Tensor, Tensor],
        dth: Tensor,
        max_rot: float,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """First-order (tangent) predictor of a warm start: ``q ⊕ (dq/dθ) Δθ`` (nodal update).

        Uses the sensitivity ``dq/dθ = -K_t⁻¹ ∂r/∂θ`` of the previous equilibrium (from its last factorisation).
        Skipped when it would rotate a node by more than ``max_rot`` [rad]. (Applying the change to the
        element twists and re-chaining the rods from the moved bases was tried: no fewer iterations.)"""
        if run.compiled:
            return predict_compiled(state, sens, dth, max_rot)
        dy = sens[0] @ dth
        dz = sens[1] @ dth
        n = self.n_elements
        rot = torch.cat([dy[:, : 6 * (n - 1)].reshape(-1, 6)[:, :3], dz[None, :3]])
        if not float(torch.linalg.vector_norm(rot, dim=-1).max()) <= max_rot:
            return state
        return self.retract(*state, dy, dz, 1.0)

    def _continuation(self, run: SolveRun, problem, cur, start_ok: bool):
        """Adaptive continuation λ: 0 → 1 on ``problem(λ) = (θ, loads)`` from ``cur`` (an equilibrium at λ = 0
        when ``start_ok``); step halved on failure, doubled on success, at most ``run.settings.max_continuation``
        stages."""
        max_stages = run.settings.max_continuation
        total = 0
        last = sens = None
        if start_ok:
            ok0 = True
        else:
            th0, ld0 = problem(0.0)
            ok0, cur, total, last, sens = self._newton(run, th0, ld0, cur)
        lam, step, stages = 0.0, 0.25, 0
        while ok0 and lam < 1.0 and stages < max_stages:
            stages += 1
            trial = min(1.0, lam + step)
            th1, ld1 = problem(trial)
            ok1, new, it1, last1, sens1 = self._newton(run, th1, ld1, cur)
            total += it1
            if ok1:
                lam, cur, last, sens = trial, new, last1, sens1
                step = min(2.0 * step, 1.0)
            else:
                step *= 0.5
        return ok0 and lam >= 1.0, cur, total, last, sens

    def _newton(self, run: SolveRun, th: Tensor, loads: Loads, state):
        """Capped Riemannian Newton iterations with the rules of ``run.settings`` and the residual scale
        ``run.scale``, the norms appended to ``run.log``; returns (converged, state, iterations, last residual
        context, sensitivity dq/dθ from the last factorisation or None). The tangent is formed only when a step is
        taken."""
        scale, log = run.scale, run.log
        tol, max_iter = run.settings.tol, run.settings.max_iter
        max_rot, step_tol = run.settings.max_rotation_step, run.settings.step_tol
        if run.compiled:
            ok, state, it, last, sens, nodes = newton_compiled(
                self, run.cache.constants(self), th, loads, state, run.settings, scale, log
            )
            run.nodes = (state[0], nodes)
            return ok, state, it, last, sens
        g_ee, g_int, beta = state
        n = self.n_elements
        w = run.w
        assert w is not None, "solve() sets the residual weights of the torch driver"
        res, res_ee, last = self.residual(th, g_ee, g_int, beta, loads, run.elements)
        norm = self._scaled_norm(w, res, res_ee, scale)
        log.append(norm)
        first = norm
        it = 0
        sens = None
        while True:  # the rules: flexlearn.physics.lse.newton_policy (shared with the compiled driver)
            verdict = _residual_verdict(norm, first, it, tol, max_iter)
            if verdict != CONTINUE:
                return verdict == CONVERGED, (g_ee, g_int, beta), it, last, sens
            kt, kee, drdth = self.tangent(last)
            dy, dz, sens = self._newton_step(res, kt, res_ee, kee, drdth)
            verdict = _step_verdict(self._step_norm(w, dy, dz), step_tol)
            if verdict == CONVERGED:
                # round-off floor: the correction is below 1e-13 rad / 1e-13 L, the residual cannot drop
                # further; the correction is still applied (no new residual)
                return True, self.retract(g_ee, g_int, beta, dy, dz, 1.0, th), it, last, sens
            if verdict == FAILED:
                return False, (g_ee, g_int, beta), it, last, sens
            rot = torch.cat([dy[:, : 6 * (n - 1)].reshape(-1, 6)[:, :3], dz[None, :3]])
            alpha = _step_scale(float(torch.linalg.vector_norm(rot, dim=-1).max()), max_rot)
            # damping: backtrack while the residual would grow more than `growth`-fold
            for _ in range(self.backtracks + 1):
                cand = self.retract(g_ee, g_int, beta, dy, dz, alpha, th)
                res_c, res_ee_c, last_c = self.residual(th, *cand, loads, run.elements)
                n_c = self._scaled_norm(w, res_c, res_ee_c, scale)
                if _accept_trial(n_c, norm, self.growth):
                    break
                alpha *= BACKTRACK_FACTOR
            g_ee, g_int, beta = cand
            it += 1
            res, res_ee, last, norm = res_c, res_ee_c, last_c, n_c
            log.append(norm)

    def _implicit(
        self, run: SolveRun, theta: Tensor, loads: Loads, eq: Equilibrium, kt: Tensor, kee: Tensor
    ) -> Equilibrium:
        g_ee, g_int, beta = eq.g_ee, eq.nodes[:, 1:-1], eq.beta
        res, _, res_ee, _ = self.assemble(theta, g_ee, g_int, beta, loads, False, run.elements)
        dy, dz = self._newton_step(res, kt.detach(), res_ee, kee.detach())
        g_ee2, g_int2, beta2 = self.retract(g_ee, g_int, beta, dy, dz, 1.0)
        nodes = self.all_nodes(theta, g_ee2, g_int2)
        return Equilibrium(g_ee2, nodes, beta2, theta, eq.iterations, eq.residual_log, eq.sensitivity, eq.stability)

    def reduced_tangent(self, eq: Equilibrium, loads: Optional[Loads] = None) -> Tensor:
        """The tangent stiffness at ``eq`` on the constraint manifold, slopes condensed, scaled (see
        :class:`~flexlearn.physics.lse.state.Stability`).

        Args:
            eq: an equilibrium of this model.
            loads: the loads it was solved under (default: gravity only, as :meth:`solve`).

        Returns:
            (R·6(N−1) + 6, R·6(N−1) + 6) float64 [N·m], unknowns [ζ_1 … ζ_{N−1} of every rod; ζ_ee], rotations in
            rad and translations over the mean rod length L.
        """
        loads = Loads() if loads is None else loads
        th = eq.theta.detach()
        _, kt, _, kee = self.assemble(
            th, eq.g_ee.detach(), eq.nodes[:, 1:-1].detach(), eq.beta.detach(), loads, True, "numba"
        )
        r, ny, nz = self.n_rods, self.n_y, 6 * (self.n_elements - 1)
        w = self.residual_weights()
        kt = w[:, None] * kt * w[None, :]  # (R, 12N, 12N) in N·m
        kee = w[ny:, None] * kee * w[None, ny:]
        keep = torch.cat([torch.arange(nz), torch.arange(ny, ny + 6)])  # node twists ζ_j and ζ_ee
        slopes = torch.arange(nz, ny)
        kk = kt[:, keep][:, :, keep]
        kb = kt[:, keep][:, :, slopes]
        kbb = kt[:, slopes][:, :, slopes]
        kred = kk - kb @ torch.linalg.solve(kbb, kt[:, slopes][:, :, keep])  # (R, nz + 6, nz + 6)
        n = r * nz + 6
        k = kred.new_zeros(n, n)
        for i in range(r):
            s = slice(i * nz, (i + 1) * nz)
            k[s, s] = kred[i, :nz, :nz]
            k[s, r * nz :] = kred[i, :nz, nz:]
            k[r * nz :, s] = kred[i, nz:, :nz]
            k[r * nz :, r * nz :] += kred[i, nz:, nz:]
        k[r * nz :, r * nz :] += kee
        return k

    def stability(self, eq: Equilibrium, loads: Optional[Loads] = None, tol: float = 1e-9) -> Stability:
        """Whether ``eq`` is a stable equilibrium: the smallest eigenvalue of :meth:`reduced_tangent` (its
        symmetric part) over max(EI/L) is above ``-tol``.

        The element slopes β are condensed out first; a slope block that is not positive definite (possible
        only far from any physical state) gives a non-finite condensation and reads as unstable.

        Args:
            eq: an equilibrium of this model.
            loads: the loads it was solved under (default: gravity only, as :meth:`solve`).
            tol: relative tolerance of the sign test [-].

        Returns:
            The :class:`~flexlearn.physics.lse.state.Stability`.
        """
        with torch.no_grad():
            k = self.reduced_tangent(eq, loads)
        kscale = self.stiffness()[:, :3].max(-1).values / self.lengths
        scale = float(kscale.detach().max())
        ks = 0.5 * (k + k.T)
        asym = float((k - k.T).norm() / k.norm().clamp_min(1e-300))
        if not bool(torch.isfinite(ks).all()):
            return Stability(-math.inf, False, torch.zeros(k.shape[0], dtype=k.dtype), asym)
        vals, vecs = torch.linalg.eigh(ks)
        lam = float(vals[0]) / scale
        return Stability(lam, lam > -tol, vecs[:, 0].clone(), asym)

    def _load_scale(self, loads: Loads, g_ee: Tensor) -> float:
        """Residual scale [N·m]: max(EI/L, |applied moments| + |applied forces|·L)."""
        k = self.stiffness()
        length = float(self.lengths.mean())
        s = float((k[:, :3].max(-1).values / self.lengths).max())
        return max(s, loads.magnitude(length))

    def residual_weights(self) -> Tensor:
        """Per-unknown weights (12N,) making residual entries N·m: [1, L] per node, 1/L² per β.

        Returns:
            The weights (12N,), float64, in the rod-local unknown order [ζ_1 … ζ_{N-1}, β_1 … β_N, ζ_ee];
            L is the mean rod length [m].
        """
        n = self.n_elements
        length = float(self.lengths.mean())
        node = torch.tensor([1.0] * 3 + [length] * 3, dtype=torch.float64)
        w = torch.cat([node.repeat(n - 1), torch.full((6 * n,), 1.0 / length**2, dtype=torch.float64), node])
        return w

    def _scaled_norm(self, w: Tensor, res: Tensor, res_ee: Tensor, loads_scale: float) -> float:
        """Scaled residual ∞-norm (entries in N·m by the weights ``w`` (12N,), over ``loads_scale``); ∞ when an
        entry is not finite (a diverged state must not read as converged; as the compiled kernels)."""
        ry = res[:, : self.n_y] * w[: self.n_y]
        rz = (res[:, self.n_y :].sum(0) + res_ee) * w[self.n_y :]
        entries = torch.cat([ry.reshape(-1), rz]).abs()
        if not bool(torch.isfinite(entries).all()):
            return math.inf
        return float(entries.max()) / loads_scale

    def _step_norm(self, w: Tensor, dy: Tensor, dz: Tensor) -> float:
        """Weighted ∞-norm of a step: rotations [rad], translations / L, slopes × L²."""
        ny = self.n_y
        return float(torch.cat([(dy * (1.0 / w[:ny])).abs().reshape(-1), (dz * (1.0 / w[ny:])).abs()]).max())

    def _newton_step(self, res: Tensor, kt: Tensor, res_ee: Tensor, kee: Tensor, drdth: Optional[Tensor] = None):
        """Solve ``K_t δq = -r`` (seed Sec. V-E) by condensing each rod's unknowns onto the platform twist.

        Returns ``(δy (R, ny), δz (6,))``; with ``drdth`` (R, 12N, M) also the sensitivity
        ``(dy/dθ (R, ny, M), dz/dθ (6, M)) = -K_t⁻¹ ∂r/∂θ`` from the same factorisation.
        """
        ny = self.n_y
        kyy, kyz = kt[:, :ny, :ny], kt[:, :ny, ny:]
        kzy, kzz = kt[:, ny:, :ny], kt[:, ny:, ny:]
        rhs = res[..., None] if drdth is None else torch.cat([res[..., None], drdth], -1)  # (R, 12N, c)
        x = _solve_per_matrix(kyy, torch.cat([kyz, rhs[:, :ny]], -1))  # (R, ny, 6 + c)
        s = kzz.sum(0) + kee - (kzy @ x[..., :6]).sum(0)
        rz = rhs[:, ny:].sum(0) - (kzy @ x[..., 6:]).sum(0)
        rz = rz + torch.cat([res_ee[:, None], rz.new_zeros(6, rz.shape[1] - 1)], -1)
        dz = -torch.linalg.solve(s, rz)
        dy = -(x[..., 6:] + x[..., :6] @ dz)
        if drdth is None:
            return dy[..., 0], dz[:, 0]
        return dy[..., 0], dz[:, 0], (dy[..., 1:], dz[:, 1:])
