"""Planar two-link flexible manipulator: assumed modes, Lagrangian by automatic differentiation (seed 000, §V-A).

Generalised coordinates ``q = [θ₁, θ₂, η₁ (m₁), η₂ (m₂)]``: joint angles [rad] (θ₁ from the horizontal, y up;
θ₂ relative to the *deformed* tip frame of link 1, as in :mod:`flexlearn.physics.modal.estimator` and §IV)
and mass-normalised modal coordinates [kg^(1/2) m] of the clamped assumed modes Φ of
:class:`~flexlearn.physics.modal.FlexibleLink` (seed 000, eq. (9)): ``w_i(ξ) = Φ_i(ξ)·η_i``.

Geometry (small deflection, axial shortening neglected, as §IV): absolute base angles
``φ₁ = θ₁``, ``φ₂ = θ₁ + w₁′(L₁) + θ₂``; points ``p_i(ξ) = b_i + R(φ_i) (ξ, w_i(ξ))`` with ``b₁ = 0``,
``b₂ = p₁(L₁)``. This is the exact nonlinear rigid motion plus linear elastic displacement — the seed's
linearised ``s_i(ξ, t)`` of eq. (43) is its small-angle form.

Energies (quadrature: composite Gauss–Legendre along each link):

    T = Σ_i [ ½∫ρA_i |ṗ_i|² dξ + ½ M_i |ṗ_i(L_i)|² + ½ J_i (φ̇_i + ẇ_i′(L_i))² + ½ I_h,i φ̇_i² ]
    V = Σ_i [ g∫ρA_i y_i dξ + g M_i y_i(L_i) + ½ η_iᵀ K_i η_i ],   K_i = ∫EI_i Φ_i″ Φ_i″ᵀ dξ

(I_h,i: hub inertia of joint i, rotating with link i's base frame; M_i, J_i: tip payload mass and rotary
inertia; for link 1 ``M₁`` is whatever sits at its tip besides link 2: the joint-2 actuator/hub).
Equations of motion, all terms by torch.func autodiff of T and V (nothing written by hand):

    M(q) q̈ = B τ − D η̇ − [ (∂²T/∂q̇∂q) q̇ − ∂T/∂q ] − ∂V/∂q,     M(q) = ∂²T/∂q̇²,

``B`` selects the joints (τ_i does virtual work on θ_i), ``D`` is modal damping ``2ζ ω_j`` on η.

Integrator: implicit midpoint (A-stable, symplectic; seed §VI-A uses 1 kHz) on ``x = (q, q̇, τ_a)``,
solved by simplified Newton with the Jacobian of the linear part (``M(q_n)``, elastic K, D, lag), with an
optional first-order actuator lag ``τ̇_a = (τ_cmd − τ_a)/τ_lag`` standing in for the hydraulic valve.
Everything is batched over a leading dimension, float64.

Validation (tests/physics/arm): M(q) equals Jᵀ diag(m) J of the kinematic Jacobian; the EOM satisfy
Lagrange's equations by finite differences; energy is conserved without damping and input (iterated
midpoint); hub-locked linearised frequencies equal FlexibleLink's (its own modes) and converge from above
for bare-cantilever modes carrying the payload through the Lagrangian; static sag and holding torque match
the cantilever formulas; IMU kinematics equal nested forward-mode autodiff.

Seed discrepancies: eq. (43) is the linearised kinematics (small θ); eq. (44) double-counts gravity — see
:mod:`flexlearn.runtime.arm.controller` — and eq. (8) lacks the rigid-motion term of the tip shear
condition (``EI w‴(L) = M (L θ̈ + ẅ(L))`` for a rotating clamped link); the assumed-mode shapes used here
come from eq. (8) as written (a fixed clamped basis), which is admissible for the Ritz method. Speed: one
EOM evaluation ≈ 3–5 ms (CPU, B ≤ 5), so 10 s of closed loop takes ≈ 1–4 min.

The outputs (tip quantities, end-effector pose, IMU frames) are in :mod:`flexlearn.physics.arm.outputs`.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch import Tensor, nn

from flexlearn.physics.arm.config import ArmConfig
from flexlearn.physics.arm.outputs import ArmOutputsMixin
from flexlearn.physics.modal.link import FlexibleLink
from flexlearn.sensing.imu import GRAVITY as G0

__all__ = [
    "FlexibleArmPlant",
    "assumed_mode_link",
    "G0",
]

f64 = torch.float64


def _gl(panels: int, order: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(order)
    h = 1.0 / panels
    nodes = np.concatenate([(i + 0.5 * (x + 1.0)) * h for i in range(panels)])
    return nodes, np.concatenate([0.5 * w * h] * panels)


def assumed_mode_link(cfg: ArmConfig, i: int) -> FlexibleLink:
    """The clamped FlexibleLink whose modes are link i's assumed-mode basis (see :class:`ArmLinkConfig`).

    Args:
        cfg: the arm.
        i: link index (0-based).

    Returns:
        The link with ``mode_tip_mass`` (< 0: the carried mass) and ``mode_tip_inertia`` (< 0: the link's
        tip inertia) as its tip load.
    """
    ln = cfg.links[i]
    carried = ln.tip_mass + sum(o.rho_A * o.length + o.tip_mass for o in cfg.links[i + 1 :])
    M = carried if ln.mode_tip_mass < 0 else ln.mode_tip_mass
    J = ln.tip_inertia if ln.mode_tip_inertia < 0 else ln.mode_tip_inertia
    return FlexibleLink(ln.EI, ln.rho_A, ln.length, M, J)


class FlexibleArmPlant(ArmOutputsMixin, nn.Module):
    """Truth simulator of the planar flexible arm (module docstring). Buffers float64.

    State ``x = (q (N,), q̇ (N,), τ_a (n,))`` batched as (B, 2N + n); ``N = n + Σ m_i``.
    Methods: :meth:`kinetic`, :meth:`potential` (single sample), :meth:`mass_matrix`, :meth:`accel`,
    :meth:`step`, :meth:`energy`, :meth:`static_equilibrium`; the outputs :meth:`imu`, :meth:`tip_quantities`,
    :meth:`ee_pose` come from `ArmOutputsMixin` (:mod:`flexlearn.physics.arm.outputs`).
    """

    # buffers: stiffness K, damping D (N, N), input map B (N, n); per link tip mass [kg], tip and hub
    # inertia [kg m²] (n,); masses (P,) [kg] and inertias (A,) [kg m²] of the points of :meth:`points`.
    # Per link i also xi{i}, wq{i}, phi{i}, tip{i}, tipslope{i}, curv0_{i}, wn{i} (read by getattr).
    K: Tensor
    D: Tensor
    B: Tensor
    tip_mass: Tensor
    tip_inertia: Tensor
    hub_inertia: Tensor
    _mass: Tensor
    _inert: Tensor

    def __init__(self, cfg: ArmConfig) -> None:
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.n = len(cfg.links)
        self.m = [ln.n_modes for ln in cfg.links]
        self.N = self.n + sum(self.m)
        self.g = float(cfg.gravity)
        self.lag = float(cfg.actuator_tau)
        s, w = _gl(cfg.quad_panels, cfg.quad_order)
        self.links = [assumed_mode_link(cfg, i) for i in range(self.n)]
        o = self.n
        self.slices = []
        K = torch.zeros(self.N, self.N, dtype=f64)
        D = torch.zeros(self.N, self.N, dtype=f64)
        for i, (ln, fl) in enumerate(zip(cfg.links, self.links)):
            m = self.m[i]
            L = ln.length
            xi = torch.as_tensor(s * L, dtype=f64)
            d = fl.modal_data(m)
            self.register_buffer(f"xi{i}", xi)
            self.register_buffer(f"wq{i}", torch.as_tensor(w * L * ln.rho_A, dtype=f64))  # mass per node [kg]
            self.register_buffer(f"phi{i}", fl.mode_shapes(xi, m, 0, d))  # (Q, m)
            tv = fl.tip_values(m, d)
            self.register_buffer(f"tip{i}", tv["tip"].reshape(m))
            self.register_buffer(f"tipslope{i}", tv["tip_slope"].reshape(m))
            self.register_buffer(f"curv0_{i}", tv["base_curvature"].reshape(m))
            pp = fl.mode_shapes(xi, m, 2, d)  # (Q, m)
            Ki = ln.EI * torch.einsum("q,qa,qb->ab", torch.as_tensor(w * L, dtype=f64), pp, pp)
            K[o : o + m, o : o + m] = Ki
            wn = torch.sqrt(torch.clamp(torch.linalg.eigvalsh(Ki), min=0.0))  # ≈ modal frequencies
            D[o : o + m, o : o + m] = torch.diag(2.0 * ln.damping * torch.sqrt(torch.diagonal(Ki)))
            self.slices.append((o, o + m))
            self.register_buffer(f"wn{i}", wn)
            o += m
        self.register_buffer("K", K)
        self.register_buffer("D", D)
        B = torch.zeros(self.N, self.n, dtype=f64)
        B[: self.n, : self.n] = torch.eye(self.n, dtype=f64)
        self.register_buffer("B", B)
        self.register_buffer("tip_mass", torch.tensor([ln.tip_mass for ln in cfg.links], dtype=f64))
        self.register_buffer("tip_inertia", torch.tensor([ln.tip_inertia for ln in cfg.links], dtype=f64))
        self.register_buffer("hub_inertia", torch.tensor([ln.hub_inertia for ln in cfg.links], dtype=f64))
        self.lengths = [ln.length for ln in cfg.links]
        self._rows = [
            torch.cat([getattr(self, f"phi{i}"), getattr(self, f"tip{i}").unsqueeze(0)], 0) for i in range(self.n)
        ]
        self._xs = [
            torch.cat([getattr(self, f"xi{i}"), torch.tensor([self.lengths[i]], dtype=f64)]) for i in range(self.n)
        ]
        _, mass, _, inert = self.points(torch.zeros(1, self.N, dtype=f64))
        self.register_buffer("_mass", mass)
        self.register_buffer("_inert", inert)

    # -- kinematics ------------------------------------------------------------------------------
    def points(self, q: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The mass points and rotating bodies of the arm at q.

        Args:
            q: generalised coordinates (B, N).

        Returns:
            (quadrature + tip points (B, P, 2) [m], their masses (P,) [kg], rotating-body angles (B, A) [rad]
            (hub i and tip payload i), their inertias (A,) [kg m²]).
        """
        pts, masses, angs, inert = [], [], [], []
        bx = torch.zeros_like(q[:, 0])
        by = torch.zeros_like(q[:, 0])
        phi = q[:, 0]
        for i in range(self.n):
            if i > 0:
                phi = phi + q[:, i]
            eta = self.modal_coordinates(q, i)
            c, s = torch.cos(phi).unsqueeze(-1), torch.sin(phi).unsqueeze(-1)
            xi = getattr(self, f"xi{i}")
            w = eta @ getattr(self, f"phi{i}").t()  # (B, Q)
            L = self.lengths[i]
            wt = (eta @ getattr(self, f"tip{i}")).unsqueeze(-1)
            st = eta @ getattr(self, f"tipslope{i}")
            xs = torch.cat([xi.expand_as(w), torch.full_like(wt, L)], -1)
            ws = torch.cat([w, wt], -1)
            x = bx.unsqueeze(-1) + c * xs - s * ws
            y = by.unsqueeze(-1) + s * xs + c * ws
            pts.append(torch.stack([x, y], -1))
            masses.append(getattr(self, f"wq{i}"))
            masses.append(self.tip_mass[i : i + 1])
            angs.append(torch.stack([phi, phi + st], -1))
            inert.append(torch.stack([self.hub_inertia[i], self.tip_inertia[i]]))
            bx, by = x[:, -1], y[:, -1]
            phi = phi + st
        return torch.cat(pts, 1), torch.cat(masses, 0), torch.cat(angs, 1), torch.cat(inert, 0)

    def velocities(self, q: Tensor, qd: Tensor) -> tuple[Tensor, Tensor]:
        """Velocities of the mass points and body rates.

        Planar rigid-body kinematics ``ṗ = ḃ + φ̇ e_z × (p − b) + R(φ)(0, ẇ)``.

        Args:
            q: generalised coordinates (B, N).
            qd: their rates (B, N).

        Returns:
            ``(ṗ, ȧ)``: velocities of the mass points of :meth:`points` (B, P, 2) [m/s] and body rates (B, A)
            [rad/s].
        """
        vx = torch.zeros_like(q[:, 0])
        vy = torch.zeros_like(q[:, 0])
        bx = torch.zeros_like(q[:, 0])
        by = torch.zeros_like(q[:, 0])
        phi, phid = q[:, 0], qd[:, 0]
        V, R = [], []
        for i in range(self.n):
            if i > 0:
                phi, phid = phi + q[:, i], phid + qd[:, i]
            a, b = self.slices[i]
            eta, etad = q[:, a:b], qd[:, a:b]
            c, s = torch.cos(phi).unsqueeze(-1), torch.sin(phi).unsqueeze(-1)
            rows = self._rows[i]  # (Q + 1, m): Φ at the nodes and the tip
            w, wd = eta @ rows.t(), etad @ rows.t()
            xs = self._xs[i]
            rx = c * xs - s * w  # p − b
            ry = s * xs + c * w
            pd = phid.unsqueeze(-1)
            ux = vx.unsqueeze(-1) - pd * ry - s * wd
            uy = vy.unsqueeze(-1) + pd * rx + c * wd
            V.append(torch.stack([ux, uy], -1))
            st, std = eta @ getattr(self, f"tipslope{i}"), etad @ getattr(self, f"tipslope{i}")
            R.append(torch.stack([phid, phid + std], -1))
            vx, vy = ux[:, -1], uy[:, -1]
            bx, by = bx + rx[:, -1], by + ry[:, -1]
            phi, phid = phi + st, phid + std
        return torch.cat(V, 1), torch.cat(R, 1)

    def kinetic(self, q: Tensor, qd: Tensor) -> Tensor:
        """T(q, q̇) [J] per sample (B,).

        ``T = ½Σ m|ṗ|² + ½Σ I ȧ²`` over the quadrature nodes, tip masses, hubs and tip inertias.

        Args:
            q: generalised coordinates (B, N).
            qd: their rates (B, N).

        Returns:
            T (B,) [J].
        """
        pd, ad = self.velocities(q, qd)
        return 0.5 * ((self._mass * (pd * pd).sum(-1)).sum(-1) + (self._inert * ad * ad).sum(-1))

    def _pa(self, q: Tensor) -> tuple[Tensor, Tensor]:
        p, _, a, _ = self.points(q)
        return p, a

    def potential(self, q: Tensor) -> Tensor:
        """V(q) [J] per sample = gravity + elastic ``½ qᵀ K q``.

        Args:
            q: generalised coordinates (B, N).

        Returns:
            V (B,) [J].
        """
        p, mass, _, _ = self.points(q)
        return self.g * (p[..., 1] * mass).sum(-1) + 0.5 * ((q @ self.K) * q).sum(-1)

    # -- dynamics --------------------------------------------------------------------------------
    def _terms(self, q: Tensor, qd: Tensor) -> tuple[Tensor, Tensor]:
        """(M (B, N, N), generalised forces without input and damping ``F = ∂L/∂q − (∂²T/∂q̇∂q)q̇`` (B, N)),
        all by autograd of the Lagrangian ``L = T − V`` in one forward and two backward passes.

        ``M = ∂²T/∂q̇²``: T is quadratic in q̇, so the Hessian's column j is the gradient ∂T/∂q̇ at q̇ = e_j
        (an exact Hessian–vector product; the B·N extra rows ride in the same batch). The velocity terms
        by the identity ``(∂²T/∂q̇∂q) q̇ = ∂/∂q̇ (∂L/∂q · q̇) − ∂L/∂q`` (double backward), so
        ``F = 2 ∂L/∂q − ∂/∂q̇ (∂L/∂q · q̇)``.
        """
        B, N = q.shape
        with torch.enable_grad():
            qr = q.detach().unsqueeze(1).expand(B, N, N).reshape(B * N, N)
            ej = torch.eye(N, dtype=q.dtype).expand(B, N, N).reshape(B * N, N)
            Q = torch.cat([q.detach(), qr], 0).requires_grad_(True)
            Vd = torch.cat([qd.detach(), ej], 0).requires_grad_(True)
            T = self.kinetic(Q, Vd)
            Lsum = T.sum() - self.potential(Q[:B]).sum()
            dQ, dVd = torch.autograd.grad(Lsum, (Q, Vd), create_graph=True)
            dLdq = dQ[:B]
            ds = torch.autograd.grad((dLdq * Vd[:B]).sum(), Vd)[0][:B]
        M = dVd[B:].detach().reshape(B, N, N)
        return M, 2.0 * dLdq.detach() - ds

    def accel(self, q: Tensor, qd: Tensor, tau: Tensor, return_mass: bool = False):
        """q̈ (B, N) from q, q̇ and applied joint torques.

        ``M q̈ = Bτ − D q̇ + ∂L/∂q − (∂²T/∂q̇∂q) q̇`` (seed 000, §V-A, by autodiff).

        Args:
            q: generalised coordinates (B, N).
            qd: their rates (B, N).
            tau: applied joint torques τ (B, n) [N m].
            return_mass: also return M.

        Returns:
            q̈ (B, N); with ``return_mass`` ``(q̈, M)``, M (B, N, N).
        """
        M, F = self._terms(q, qd)
        rhs = tau @ self.B.t() - qd @ self.D.t() + F
        qdd = torch.linalg.solve(M, rhs.unsqueeze(-1)).squeeze(-1)
        return (qdd, M) if return_mass else qdd

    def mass_matrix(self, q: Tensor) -> Tensor:
        """M(q) = ∂²T/∂q̇².

        Args:
            q: generalised coordinates (B, N).

        Returns:
            M (B, N, N).
        """
        return self._terms(q, torch.zeros_like(q))[0]

    def _grad_v(self, q: Tensor) -> Tensor:
        with torch.enable_grad():
            q2 = q.detach().requires_grad_(True)
            return torch.autograd.grad(self.potential(q2).sum(), q2)[0]

    def _hess_v(self, q: Tensor) -> Tensor:
        B, N = q.shape
        with torch.enable_grad():
            q2 = q.detach().requires_grad_(True)
            g = torch.autograd.grad(self.potential(q2).sum(), q2, create_graph=True)[0]
            return torch.stack([torch.autograd.grad(g[:, j].sum(), q2, retain_graph=True)[0] for j in range(N)], 1)

    def gravity_torque(self, q: Tensor) -> Tensor:
        """∂V_gravity/∂q (includes the elastic term K q; zero elastic part at equilibrium only).

        Args:
            q: generalised coordinates (B, N).

        Returns:
            ∂V/∂q (B, N) [N m for θ, generalised force for η].
        """
        return self._grad_v(q)

    def energy(self, x: Tensor) -> Tensor:
        """Total mechanical energy T + V (B,) [J].

        Args:
            x: state ``[q, q̇, τ_a]`` (B, 2N + n).

        Returns:
            T + V (B,) [J].
        """
        q, qd = x[:, : self.N], x[:, self.N : 2 * self.N]
        return self.kinetic(q, qd) + self.potential(q)

    def state_derivative(self, x: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
        """The state's time derivative and the mass matrix.

        Args:
            x: state ``[q, q̇, τ_a]`` (B, 2N + n): the N generalised coordinates (joint angles and modal
                amplitudes), their rates, and the n lagged actuator torques [N m].
            u: commanded joint torques (B, n) [N m].

        Returns:
            ``(ẋ, M)``: the derivative ``[q̇, q̈, (u − τ_a)/lag]`` (B, 2N + n) (τ_a constant without a lag) and
            the mass matrix (B, N, N).
        """
        N = self.N
        q, qd, ta = x[:, :N], x[:, N : 2 * N], x[:, 2 * N :]
        tau = ta if self.lag > 0 else u
        qdd, M = self.accel(q, qd, tau, return_mass=True)
        dta = (u - ta) / self.lag if self.lag > 0 else torch.zeros_like(ta)
        return torch.cat([qd, qdd, dta], -1), M

    def rate(self, x: Tensor, u: Tensor) -> Tensor:
        """ẋ = f(x, u) (B, 2N + n).

        Args:
            x: state ``[q, q̇, τ_a]`` (B, 2N + n).
            u: commanded joint torques (B, n) [N m].

        Returns:
            ẋ (B, 2N + n).
        """
        return self.state_derivative(x, u)[0]

    def step(
        self,
        x: Tensor,
        u: Tensor,
        h: float,
        iters: int = 1,
        tol: float = 1e-12,
        f0: Optional[tuple[Tensor, Tensor]] = None,
    ) -> Tensor:
        """One implicit-midpoint step of length h [s] with the command u (B, n) held; x (B, 2N + n).

        Simplified Newton on ``X − x − h f((x + X)/2) = 0`` from ``X₀ = x`` with the linear-part Jacobian
        ``A = [[0, I, 0], [−M⁻¹K, −M⁻¹D, M⁻¹B], [0, 0, −1/τ_lag]]`` at ``q_n``. ``iters = 1`` is the
        linearly implicit midpoint rule ``X = x + h (I − hA/2)⁻¹ f(x)`` (one autodiff evaluation; exactly
        the Cayley map — unconditionally stable and energy-neutral — on the stiff linear elastic part);
        ``iters > 1`` iterates to the implicit midpoint solution (``tol`` relative).

        Args:
            x: state ``[q, q̇, τ_a]`` (B, 2N + n).
            u: commanded joint torques (B, n) [N m], held over the step.
            h: step length [s].
            iters: Newton iterations (1: linearly implicit midpoint).
            tol: relative stopping tolerance of the iterations.
            f0: a precomputed ``(f(x, u), M(q))`` (reuse of the evaluation that produced the IMU frame).

        Returns:
            The state after the step (B, 2N + n).
        """
        N, n = self.N, self.n
        Bsz = x.shape[0]
        fx, M = self.state_derivative(x, u) if f0 is None else f0
        Minv = torch.linalg.inv(M)
        S = 2 * N + n
        A = torch.zeros(Bsz, S, S, dtype=x.dtype)
        A[:, :N, N : 2 * N] = torch.eye(N, dtype=x.dtype)
        A[:, N : 2 * N, :N] = -Minv @ self.K
        A[:, N : 2 * N, N : 2 * N] = -Minv @ self.D
        if self.lag > 0:
            A[:, N : 2 * N, 2 * N :] = Minv @ self.B
            A[:, 2 * N :, 2 * N :] = -torch.eye(n, dtype=x.dtype) / self.lag
        J = torch.eye(S, dtype=x.dtype) - 0.5 * h * A
        X = x + h * torch.linalg.solve(J, fx.unsqueeze(-1)).squeeze(-1)
        scale = 1.0 + x.abs()
        for _ in range(iters - 1):
            r = X - x - h * self.state_derivative(0.5 * (x + X), u)[0]
            dX = torch.linalg.solve(J, r.unsqueeze(-1)).squeeze(-1)
            X = X - dX
            if float((dX.abs() / scale).max()) < tol:
                break
        return X

    def static_equilibrium(self, theta: Tensor, iters: int = 20) -> Tensor:
        """Modal coordinates at rest under gravity for joint angles θ: ∂V/∂η = 0 (Newton).

        Args:
            theta: joint angles θ (B, n) [rad].
            iters: the most Newton iterations (stops once the update is below 1e-14).

        Returns:
            q (B, N): θ and the equilibrium modal coordinates.
        """
        Bsz = theta.shape[0]
        q = torch.zeros(Bsz, self.N, dtype=f64)
        q[:, : self.n] = theta
        gV, hV = self._grad_v, self._hess_v
        for _ in range(iters):
            r = gV(q)[:, self.n :]
            H = hV(q)[:, self.n :, self.n :]
            d = torch.linalg.solve(H, r.unsqueeze(-1)).squeeze(-1)
            q[:, self.n :] -= d
            if float(d.abs().max()) < 1e-14:
                break
        return q

    def initial_state(self, theta: Tensor) -> Tensor:
        """Rest state at joint angles θ (B, n) with the holding torques in the actuator state.

        Args:
            theta: joint angles θ (B, n) [rad].

        Returns:
            The state ``[q, 0, τ_hold]`` (B, 2N + n).
        """
        q = self.static_equilibrium(theta)
        tau = self._grad_v(q)[:, : self.n]
        return torch.cat([q, torch.zeros_like(q), tau], -1)

    def holding_torque(self, x: Tensor) -> Tensor:
        """Joint torques that hold the configuration of x at rest, ∂V/∂θ.

        Args:
            x: state ``[q, q̇, τ_a]`` (B, 2N + n).

        Returns:
            The torques (B, n) [N m].
        """
        return self._grad_v(x[:, : self.N])[:, : self.n]
