"""Constraint-based baseline: Cosserat-rod shooting for the same continuum parallel robot.

The classic formulation of the parallel-continuum-robot literature (Black, Till & Rucker, IEEE T-RO 2017,
seed 003 ref. [14]): every rod is integrated from its (motor-driven) base with the Cosserat ODE

    p' = R v,  R' = R u^,  n' = -f,  m' = -p' × n,   v = v* + K_se⁻¹ Rᵀ n,  u = u* + K_bt⁻¹ Rᵀ m

(world-frame internal force n [N] and moment m [N·m], f the distributed gravity ρ A g [N/m], body strains
u [rad/m], v; K_bt = diag(EI₁, EI₂, GJ), K_se = diag(GA, GA, EA): the same constitutive law as the LSE
model), with unknown base wrenches (n₀, m₀) per rod and an unknown platform pose; the residual stacks the
loop closures (tip position and orientation of each rod = its platform attachment) and the platform
force/moment balance, and a Newton root finder with a finite-difference Jacobian (all perturbations of all
rods integrated in one vectorised RK4 sweep) solves it. numpy, float64; it reads the geometry, stiffness and
loads of a `CPRModel`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from flexlearn.physics.lse.errors import ShootingError
from flexlearn.physics.lse.model import CPRModel
from flexlearn.physics.lse.state import Loads

__all__ = ["ShootingSolver", "ShootingResult"]


@dataclass
class ShootingResult:
    """A converged shooting solve: platform pose, root-finder unknowns and evaluations."""

    g_ee: np.ndarray  # (4, 4) platform pose
    unknowns: np.ndarray  # (6R + 6,) [n0, m0 per rod, platform twist increment]
    iterations: int  # residual+Jacobian evaluations of the root finder
    residual_norm: float
    theta: np.ndarray | None = None

    @property
    def position(self) -> np.ndarray:
        return self.g_ee[:3, 3]


def _hat(w: np.ndarray) -> np.ndarray:
    o = np.zeros(w.shape[:-1])
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    return np.stack([o, -z, y, z, o, -x, -y, x, o], -1).reshape(w.shape[:-1] + (3, 3))


def _expso3(w: np.ndarray) -> np.ndarray:
    t = np.linalg.norm(w, axis=-1)[..., None, None]
    W = _hat(w)
    small = t < 1e-8
    ts = np.where(small, 1.0, t)
    a = np.where(small, 1.0 - t**2 / 6, np.sin(ts) / ts)
    b = np.where(small, 0.5 - t**2 / 24, (1 - np.cos(ts)) / ts**2)
    return np.eye(3) + a * W + b * (W @ W)


def _logso3(R: np.ndarray) -> np.ndarray:
    c = np.clip((np.trace(R, axis1=-2, axis2=-1) - 1) / 2, -1.0, 1.0)
    t = np.arccos(c)
    v = np.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1)
    s = np.where(t < 1e-6, 0.5 + t**2 / 12, t / (2 * np.sin(np.maximum(t, 1e-6))))
    return s[..., None] * v


class ShootingSolver:
    """Shooting solver for the robot of a `CPRModel` (rods with uniform section, any precurvature).

    steps: RK4 steps per rod. Unknowns are scaled (forces by EI/L², moments by EI/L, platform twist by
    1/L, 1) for the finite-difference Jacobian.
    """

    def __init__(self, model: CPRModel, steps: int = 40):
        t = lambda x: x.detach().cpu().numpy().astype(np.float64)  # noqa: E731
        self.model = model
        self.steps = steps
        self.R = model.n_rods
        k = t(model.stiffness())  # (R, 6) [EI1, EI2, GJ, GA, GA, EA]
        self.kbt_inv = 1.0 / k[:, :3]
        self.kse_inv = 1.0 / k[:, 3:]
        self.u_star = t(model.xi0[:, :3])
        self.v_star = t(model.xi0[:, 3:])
        self.lengths = t(model.lengths)
        self.f_dist = (t(model.density * model.area))[:, None] * t(model.gravity)[None, :]  # (R, 3) N/m
        self.tip_local = t(model.tip_local)
        self.platform_weight = float(model.platform_mass) * t(model.gravity)
        ei = float(k[:, 0].max())
        L = float(self.lengths.mean())
        self.scale = np.concatenate([np.tile(np.r_[[ei / L**2] * 3, [ei / L] * 3], self.R), [L] * 3, [1.0] * 3])
        self.L = L
        self.ei = ei

    def _integrate(self, base: np.ndarray, n0: np.ndarray, m0: np.ndarray, gscale: float):
        """RK4 along all rods; base (B, R, 4, 4), n0, m0 (B, R, 3) → tip p (B,R,3), R (B,R,3,3), n, m."""
        p = base[..., :3, 3].copy()
        Rm = base[..., :3, :3].copy()
        n = n0.copy()
        m = m0.copy()
        ds = self.lengths / self.steps  # (R,)
        f = gscale * self.f_dist

        def deriv(p, Rm, n, m):
            Rt = np.swapaxes(Rm, -1, -2)
            v = self.v_star + self.kse_inv * (Rt @ n[..., None])[..., 0]
            u = self.u_star + self.kbt_inv * (Rt @ m[..., None])[..., 0]
            dp = (Rm @ v[..., None])[..., 0]
            dR = Rm @ _hat(u)
            dn = -np.broadcast_to(f, n.shape)
            dm = -np.cross(dp, n)
            return dp, dR, dn, dm

        h = ds[:, None]
        h3 = ds[:, None, None]
        for _ in range(self.steps):
            k1 = deriv(p, Rm, n, m)
            k2 = deriv(p + 0.5 * h * k1[0], Rm + 0.5 * h3 * k1[1], n + 0.5 * h * k1[2], m + 0.5 * h * k1[3])
            k3 = deriv(p + 0.5 * h * k2[0], Rm + 0.5 * h3 * k2[1], n + 0.5 * h * k2[2], m + 0.5 * h * k2[3])
            k4 = deriv(p + h * k3[0], Rm + h3 * k3[1], n + h * k3[2], m + h * k3[3])
            p = p + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
            Rm = Rm + h3 / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
            n = n + h / 6 * (k1[2] + 2 * k2[2] + 2 * k3[2] + k4[2])
            m = m + h / 6 * (k1[3] + 2 * k2[3] + 2 * k3[3] + k4[3])
        return p, Rm, n, m

    def _residual(self, x: np.ndarray, base: np.ndarray, g_ref: np.ndarray, loads: Loads) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._residual_impl(x, base, g_ref, loads)

    def _residual_impl(self, x: np.ndarray, base: np.ndarray, g_ref: np.ndarray, loads: Loads) -> np.ndarray:
        """X (B, 6R + 6) scaled unknowns → residual (B, 6R + 6) (closure [m, rad]·scaled, balance [N, N·m])."""
        B = x.shape[0]
        R = self.R
        xs = x * self.scale
        nm = xs[:, : 6 * R].reshape(B, R, 6)
        dp = xs[:, 6 * R : 6 * R + 3]
        dphi = xs[:, 6 * R + 3 :]
        Ree = g_ref[:3, :3] @ _expso3(dphi)  # (B, 3, 3)
        pee = g_ref[:3, 3] + dp
        gscale = loads.gravity_scale if loads.gravity else 0.0
        p, Rm, n, m = self._integrate(np.broadcast_to(base, (B,) + base.shape), nm[..., :3], nm[..., 3:], gscale)
        r_loc = self.tip_local[:, :3, 3]
        R_loc = self.tip_local[:, :3, :3]
        p_target = pee[:, None, :] + (Ree[:, None] @ r_loc[None, :, :, None])[..., 0]
        R_target = Ree[:, None] @ R_loc[None]
        e_pos = (p - p_target) / self.L
        e_rot = _logso3(np.swapaxes(R_target, -1, -2) @ Rm)
        # platform balance (world), moments about the platform origin
        F = -n.sum(1)
        M = (-m - np.cross(p - pee[:, None, :], n)).sum(1)
        if loads.gravity:
            F = F + gscale * self.platform_weight
        if loads.ee_wrench is not None:
            w = loads.ee_wrench.detach().cpu().numpy()
            M = M + w[:3]
            F = F + w[3:]
        if loads.pulley_position is not None and loads.pulley_tension is not None:
            c = loads.pulley_position.detach().cpu().numpy()
            d = c - pee
            F = F + float(loads.pulley_tension) * d / np.linalg.norm(d, axis=-1, keepdims=True)
        if loads.node_wrenches is not None:
            raise NotImplementedError("the shooting baseline supports platform loads and gravity only")
        fs = self.ei / self.L**2
        ms = self.ei / self.L
        return np.concatenate([np.concatenate([e_pos, e_rot], -1).reshape(B, -1), F / fs, M / ms], -1)

    def solve(
        self,
        theta,
        loads: Loads | None = None,
        init: ShootingResult | None = None,
        tol: float = 1e-9,
        max_iter: int = 25,
        fd_step: float = 1e-6,
        _depth: int = 0,
    ) -> ShootingResult:
        """Equilibrium for motor angles θ (M,) [rad]; warm start from ``init``. Newton + FD Jacobian.

        When Newton fails from ``init``, the motor increment is bisected (continuation, up to 5 levels).

        Args:
            theta: Motor angles (M,) [rad].
            loads: The applied loads; None = default `Loads` (gravity on).
            init: Result to warm-start from; None = the straight state.
            tol: Tolerance on the ∞-norm of the scaled residual.
            max_iter: Iteration budget (times the number of unknowns + 1 residual evaluations).
            fd_step: Central-difference step on the scaled unknowns.
            _depth: Bisection level (internal).

        Returns:
            The :class:`ShootingResult`.

        Raises:
            ShootingError: No convergence after 5 bisection levels.
        """
        theta = np.asarray(theta, dtype=np.float64)
        try:
            return self._solve(theta, loads, init, tol, max_iter, fd_step)
        except ShootingError:
            if _depth >= 5:
                raise
            th0 = np.zeros_like(theta) if init is None or init.theta is None else init.theta
            mid = self.solve(0.5 * (th0 + theta), loads, init, tol, max_iter, fd_step, _depth + 1)
            out = self.solve(theta, loads, mid, tol, max_iter, fd_step, _depth + 1)
            out.iterations += mid.iterations
            return out

    def _solve(self, theta, loads, init, tol, max_iter, fd_step) -> ShootingResult:
        import scipy.optimize  # heavy, and only this baseline solver needs it: off `import flexlearn.physics.lse`

        loads = Loads() if loads is None else loads
        base = self.model.base_poses(torch.as_tensor(theta, dtype=torch.float64)).detach().numpy()
        if init is None:
            g_ref = self.model.straight_state()[0].numpy()
            x0 = np.zeros(6 * self.R + 6)
        else:
            g_ref = init.g_ee.copy()
            x0 = init.unknowns.copy()
            x0[6 * self.R :] = 0.0
        nx = x0.size
        eye = np.eye(nx) * fd_step

        def fun(x):
            # residual and its central-difference Jacobian from one vectorised integration of 2n+1 rod sets
            X = np.concatenate([x[None], x[None] + eye, x[None] - eye], 0)
            rs = self._residual(X, base, g_ref, loads)
            return rs[0], ((rs[1 : nx + 1] - rs[nx + 1 :]) / (2 * fd_step)).T

        # MINPACK Levenberg–Marquardt (a plain Newton stalls on this stiff problem: the rods' axial
        # compliance makes the closure residual nearly rank deficient)
        sol = scipy.optimize.root(
            fun, x0, jac=True, method="lm", options=dict(xtol=1e-15, ftol=1e-15, maxiter=max_iter * (nx + 1))
        )
        x = sol.x
        norm = float(np.abs(sol.fun).max())
        it = int(getattr(sol, "nfev", 0))
        if not (math.isfinite(norm) and norm <= tol):
            raise ShootingError(f"shooting did not converge ({sol.message})", norm, it)
        xs = x * self.scale
        g_new = np.eye(4)
        g_new[:3, :3] = g_ref[:3, :3] @ _expso3(xs[6 * self.R + 3 :])
        g_new[:3, 3] = g_ref[:3, 3] + xs[6 * self.R : 6 * self.R + 3]
        x = x.copy()
        x[6 * self.R :] = 0.0
        return ShootingResult(g_new, x, it, norm, np.asarray(theta, dtype=np.float64).copy())
