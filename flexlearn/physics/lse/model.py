"""Continuum parallel robot statics with linear strain elements and a Riemannian Newton solver.

Seed 003, Sec. IV-B/IV-C (kinematic embeddings, generalized coordinates, sparse projection P_{k,e}) and
Sec. V (virtual-work residual, tangent stiffness, Riemannian Newton with exponential updates).

Topology: R rods with N elements each. Rod k's base node g_{k,0} is clamped to motor m(k) (or to the
ground when m(k) = -1): ``g_{k,0} = G_m(θ_m) g⁰_{k,0}``, ``G_m(θ) = [[exp(θ a_m^), c_m - exp(θ a_m^) c_m],
[0, 1]]`` (rotation by θ about the world axis a_m through the pivot c_m; seed Sec. IV-B third display). Its
tip node is clamped to the end-effector platform: ``g_{k,N} = g_ee g^loc_{b,k}`` with
``δζ_{k,N} = Ad_{(g^loc)⁻¹} δζ_ee`` (seed Sec. IV-B second display). Generalized coordinates with the motor
angles prescribed (seed Sec. V-E, last paragraph): ``q = [g_ee; g_int; β]``; no Lagrange multipliers.

The global tangent is never formed densely: each rod's 12N × 12N block (its interior nodes, its slopes β
and the shared platform twist) is assembled by one batched ``Pᵀ H P`` product, the rod-internal unknowns
are condensed by one batched solve over rods, and the 6 × 6 Schur complement on the platform is solved.
Everything is vectorised over all elements of all rods; the only Python loop is over Newton iterations.

Units: SI (m, N, N·m, rad). Wrenches are [moment; force]; world-frame loads are given as such.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from flexlearn.lie import (
    rotation_between,
    se3_adjoint,
    se3_exp,
    se3_from_rt,
    se3_inverse,
    se3_left_jacobian_inv,
    se3_log,
    se3_right_jacobian_inv,
    so3_exp,
    so3_log,
)
from flexlearn.physics.lse.config import CPRConfig
from flexlearn.physics.lse.assembly import AssemblyMixin
from flexlearn.physics.lse.element import section_properties
from flexlearn.physics.lse.compiled import HAVE_NUMBA
from flexlearn.physics.lse.compiled_problem import load_scale_compiled, newton_compiled, nodes_of, predict_compiled
from flexlearn.physics.lse.fused import se3_exp_fused

__all__ = ["ConvergenceError", "Loads", "Equilibrium", "CPRModel", "motor_twist"]


from flexlearn.physics.lse.state import ConvergenceError, Equilibrium, Loads, motor_twist  # noqa: F401


def _solve_per_matrix(a: Tensor, b: Tensor) -> Tensor:
    """``torch.linalg.solve`` over a batch (R, n, n), (R, n, c); with several intra-op threads one matrix at a
    time: torch 2.13's batched LU (MKL) returned zero pivots with info = 0 for the rods' condensed tangents
    (n = 186, 16 elements per rod) when run on 2 threads, and lu_solve then failed."""
    if torch.get_num_threads() == 1 or a.shape[0] == 1:
        return torch.linalg.solve(a, b)
    return torch.stack([torch.linalg.solve(a[i], b[i]) for i in range(a.shape[0])])


class CPRModel(AssemblyMixin, nn.Module):
    """LSE statics of a continuum parallel robot (a single rod with a free tip is the special case R = 1).

    Buffers (float64): ``motor_axis`` (M, 3), ``motor_pivot`` (M, 3), ``rod_motor`` (R,) (−1: fixed base),
    ``base_pose0`` (R, 4, 4) rod base poses at θ = 0, ``tip_local`` (R, 4, 4) platform attachment frames,
    ``lengths`` (R,) [m], ``youngs_modulus`` (R,) [Pa], ``shear_modulus`` (R,) [Pa], ``area`` (R,) [m²],
    ``i1``, ``i2``, ``torsion`` (R,) [m⁴], ``density`` (R,) [kg/m³], ``xi0`` (R, 6) reference strain,
    ``gravity`` (3,) [m/s²], ``platform_mass`` () [kg], ``motor_limits`` (2,) [rad]. Any of them can be made a
    Parameter (or given ``requires_grad``) and receives gradients by implicit differentiation.
    """

    def __init__(self, motor_axis: Tensor, motor_pivot: Tensor, rod_motor: Tensor, base_pose0: Tensor,
                 tip_local: Tensor, lengths: Tensor, n_elements: int, youngs_modulus: Tensor,
                 shear_modulus: Tensor, area: Tensor, i1: Tensor, i2: Tensor, torsion: Tensor,
                 density: Tensor, xi0: Tensor, gravity: Tensor, platform_mass: float = 0.0,
                 motor_limits: tuple[float, float] = (-math.pi, math.pi)):
        super().__init__()
        dt = torch.float64
        r = base_pose0.shape[0]
        n = int(n_elements)
        if n < 1:
            raise ValueError("n_elements must be >= 1")
        self.n_rods, self.n_elements = r, n
        f = lambda x: torch.as_tensor(x, dtype=dt).clone()  # noqa: E731
        self.register_buffer("motor_axis", f(motor_axis).reshape(-1, 3))
        self.register_buffer("motor_pivot", f(motor_pivot).reshape(-1, 3))
        self.register_buffer("rod_motor", torch.as_tensor(rod_motor, dtype=torch.long).reshape(r))
        self.register_buffer("base_pose0", f(base_pose0))
        self.register_buffer("tip_local", f(tip_local))
        self.register_buffer("lengths", f(lengths).expand(r).clone())
        for name, v in (("youngs_modulus", youngs_modulus), ("shear_modulus", shear_modulus), ("area", area),
                        ("i1", i1), ("i2", i2), ("torsion", torsion), ("density", density)):
            self.register_buffer(name, f(v).expand(r).clone())
        self.register_buffer("xi0", f(xi0).expand(r, 6).clone())
        self.register_buffer("gravity", f(gravity).reshape(3))
        self.register_buffer("platform_mass", f(platform_mass).reshape(()))
        self.register_buffer("motor_limits", f(motor_limits).reshape(2))
        self._build_projection()
        # "strain" for single rods (cantilevers: 1-6 iterations up to PL²/EI = 20 from straight), the seed's
        # "nodal" update for closed chains (the per-rod strain rebuild fights the loop closure there)
        self.retraction = "strain" if r == 1 else "nodal"
        # solver knobs (plain attributes): warm-start transport for the strain retraction (off: it did not
        # help), residual-growth backtracking (off: the transient growth belongs to good Newton steps on
        # these stiff rods; measured 4-5 vs 25-112 iterations for the pulley load at θ = 0)
        self.transport = False
        # first-order warm-start predictor q ⊕ (dq/dθ) Δθ (closed chains with motors; see `_predict`)
        self.predictor = True
        # element kernels: "fused" (flexlearn.physics.lse.fused), "reference" (element.py) or "numba"
        # (flexlearn.physics.lse.compiled; with the nodal update and no gradients the whole Newton iteration
        # is compiled, flexlearn.physics.lse.compiled_solver); same values. Default: "numba" when it imports
        self.kernels = "numba" if HAVE_NUMBA else "fused"
        self.backtracks = 0
        self.growth = 3.0

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, cfg: CPRConfig | dict | None = None) -> "CPRModel":
        """Build the robot of a `CPRConfig` (or a dict / OmegaConf node validated into one)."""
        from flexlearn.config import from_dict

        if cfg is None:
            cfg = CPRConfig()
        elif not isinstance(cfg, CPRConfig):
            cfg = from_dict(CPRConfig, cfg, "cpr")
        g = cfg.geometry
        dt = torch.float64
        axes, pivots, rod_motor, bases, tips, lengths = [], [], [], [], [], []
        ez = torch.tensor([0.0, 0.0, 1.0], dtype=dt)
        offsets = [((j - (g.rods_per_motor - 1) / 2) * g.rod_spacing) for j in range(g.rods_per_motor)]
        p_ee = torch.tensor([0.0, 0.0, g.platform_height], dtype=dt)
        for m in range(g.n_motors):
            phi = g.motor_phase + 2 * math.pi * m / g.n_motors
            radial = torch.tensor([math.cos(phi), math.sin(phi), 0.0], dtype=dt)
            axis = torch.tensor([-math.sin(phi), math.cos(phi), 0.0], dtype=dt)
            pivot = g.base_radius * radial
            axes.append(axis)
            pivots.append(pivot)
            for s in offsets:
                pb = pivot + s * axis + g.horn_length * ez
                horiz = pb.clone()
                horiz[2] = 0.0
                pt = horiz * (g.platform_radius / g.base_radius)
                pt[2] = g.platform_height
                d = pt - pb
                length = float(torch.linalg.vector_norm(d))
                rot = so3_exp(rotation_between(ez, d))
                bases.append(se3_from_rt(rot, pb))
                # platform attachment: same orientation as the straight rod at rest, platform frame at p_ee
                tips.append(se3_from_rt(rot, pt - p_ee))
                rod_motor.append(m)
                lengths.append(length)
        rc = cfg.rod
        area, i1, i2, jt = section_properties(rc.section, rc.section_dims)
        for k, length in enumerate(lengths):
            if not (length > 0 and math.isfinite(length)):
                from flexlearn.errors import ConfigError
                raise ConfigError(f"config 'cpr.geometry': rod {k} has zero length")
        xi0 = torch.tensor(list(rc.precurvature) + [0.0, 0.0, 1.0], dtype=dt)
        model = cls(torch.stack(axes), torch.stack(pivots), torch.tensor(rod_motor), torch.stack(bases),
                    torch.stack(tips), torch.tensor(lengths, dtype=dt), rc.n_elements, rc.youngs_modulus,
                    rc.g, area, i1, i2, jt, rc.density, xi0, torch.tensor(cfg.gravity, dtype=dt),
                    cfg.platform_mass, g.motor_limits)
        model.pulley_position = torch.tensor(cfg.pulley.position, dtype=dt)
        model.pulley_tension = torch.tensor(cfg.pulley.mass * 9.81, dtype=dt)
        model.config = cfg
        return model

    def _build_projection(self) -> None:
        """Constant sparse projections P_{k,e} (seed eq. (17)/(18)) as dense (R, N, 18, 12N) tensors.

        Rod-local unknown layout: ``[ζ_1 … ζ_{N-1}, β_1 … β_N, ζ_ee]``; the base node has no unknown (θ
        prescribed), the tip node maps to ζ_ee through Ad_{(g^loc)⁻¹}.
        """
        r, n = self.n_rods, self.n_elements
        nl = 12 * n
        self.n_y = nl - 6
        adinv = se3_adjoint(se3_inverse(self.tip_local))  # (R, 6, 6)
        p = torch.zeros(r, n, 18, nl, dtype=torch.float64)
        pn = torch.zeros(r, n + 1, 6, nl, dtype=torch.float64)
        eye = torch.eye(6, dtype=torch.float64)
        for j in range(1, n):
            pn[:, j, :, 6 * (j - 1):6 * j] = eye
        pn[:, n, :, nl - 6:] = adinv
        for e in range(n):
            p[:, e, :6] = pn[:, e]
            p[:, e, 6:12] = pn[:, e + 1]
            p[:, e, 12:, 6 * (n - 1) + 6 * e:6 * (n - 1) + 6 * e + 6] = eye
        self.register_buffer("proj", p, persistent=False)
        self.register_buffer("proj_nodes", pn, persistent=False)
        self.register_buffer("proj_t", p.transpose(-1, -2).contiguous(), persistent=False)
        # the same, elements stacked: (R, 12N, 18N), (R, 18N, 12N) and (R, 12N, 6(N+1))
        self.register_buffer("proj_cat_t", p.permute(0, 3, 1, 2).reshape(r, nl, 18 * n).contiguous(),
                             persistent=False)
        self.register_buffer("proj_cat", p.reshape(r, 18 * n, nl).contiguous(), persistent=False)
        self.register_buffer("proj_nodes_cat_t", pn.permute(0, 3, 1, 2).reshape(r, nl, 6 * (n + 1)).contiguous(),
                             persistent=False)

    # ------------------------------------------------------------------ kinematics
    def stiffness(self) -> Tensor:
        """Diagonal section stiffness (R, 6) ``[EI₁, EI₂, GJ, GA, GA, EA]`` (N·m², N)."""
        e, g = self.youngs_modulus, self.shear_modulus
        return torch.stack([e * self.i1, e * self.i2, g * self.torsion, g * self.area, g * self.area,
                            e * self.area], -1)

    def base_poses(self, theta: Tensor) -> Tensor:
        """Rod base poses (R, 4, 4) ``g_{k,0} = G_m(θ_m) g⁰_{k,0}`` (seed Sec. IV-B); θ (M,) [rad]."""
        fixed = self.rod_motor < 0
        idx = self.rod_motor.clamp_min(0)
        if self.motor_axis.shape[0] == 0:
            return self.base_pose0
        s = motor_twist(self.motor_axis, self.motor_pivot)[idx]            # (R, 6)
        th = theta.to(self.base_pose0.dtype)[idx]
        th = torch.where(fixed, torch.zeros_like(th), th)
        return se3_exp(th[:, None] * s) @ self.base_pose0

    def _h(self) -> Tensor:
        return (self.lengths / self.n_elements)[:, None].expand(self.n_rods, self.n_elements)

    def straight_state(self, theta: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
        """The unloaded straight configuration at θ = 0 (or rods straight from the bases at θ): state tuple."""
        r, n = self.n_rods, self.n_elements
        dt = self.base_pose0.dtype
        base = self.base_pose0 if theta is None else self.base_poses(theta)
        s = torch.arange(1, n, dtype=dt)[None, :, None] * (self.lengths / n)[:, None, None]  # (R, N-1, 1)
        xi = torch.zeros(r, n - 1, 6, dtype=dt)
        xi[..., 3:] = self.xi0[:, None, 3:].expand(r, n - 1, 3)
        xi[..., :3] = self.xi0[:, None, :3].expand(r, n - 1, 3)
        g_int = base[:, None] @ se3_exp(s * xi)
        # platform pose consistent with rod 0's straight tip
        tip0 = base[0] @ se3_exp(self.lengths[0] * self.xi0[0])
        g_ee = tip0 @ se3_inverse(self.tip_local[0])
        beta = torch.zeros(r, n, 6, dtype=dt)
        return g_ee.detach(), g_int.detach(), beta

    # ------------------------------------------------------------------ residual and tangent
    def _bases_cached(self, theta: Tensor) -> Tensor:
        """:meth:`base_poses`, memoised on the value of θ while nothing needs gradients (Newton keeps θ fixed)."""
        if torch.is_grad_enabled() and (theta.requires_grad or any(b.requires_grad for b in self.buffers())):
            return self.base_poses(theta)
        key = (tuple(theta.tolist()), self.base_pose0._version, self.motor_axis._version,
               self.motor_pivot._version, id(self.base_pose0))
        cached = getattr(self, "_base_memo", None)
        if cached is None or cached[0] != key:
            cached = (key, self.base_poses(theta).detach())
            self._base_memo = cached
        return cached[1]

    def _all_nodes(self, theta: Tensor, g_ee: Tensor, g_int: Tensor) -> Tensor:
        base = self._bases_cached(theta)
        tip = g_ee @ self.tip_local
        return torch.cat([base[:, None], g_int, tip[:, None]], 1)

    def _scales(self) -> Tensor:
        """Per-unknown weights (12N,) making residual entries N·m: [1, L] per node, 1/L² per β."""
        n = self.n_elements
        length = float(self.lengths.mean())
        node = torch.tensor([1.0] * 3 + [length] * 3, dtype=torch.float64)
        w = torch.cat([node.repeat(n - 1), torch.full((6 * n,), 1.0 / length ** 2, dtype=torch.float64), node])
        return w

    def _scaled_norm(self, res: Tensor, res_ee: Tensor, loads_scale: float) -> float:
        w = self._w
        ry = res[:, :self.n_y] * w[:self.n_y]
        rz = (res[:, self.n_y:].sum(0) + res_ee) * w[self.n_y:]
        return float(torch.cat([ry.reshape(-1), rz]).abs().max()) / loads_scale

    def _step_norm(self, dy: Tensor, dz: Tensor) -> float:
        """Weighted ∞-norm of a step: rotations [rad], translations / L, slopes × L²."""
        w = self._w
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
        rhs = res[..., None] if drdth is None else torch.cat([res[..., None], drdth], -1)   # (R, 12N, c)
        x = _solve_per_matrix(kyy, torch.cat([kyz, rhs[:, :ny]], -1))     # (R, ny, 6 + c)
        s = kzz.sum(0) + kee - (kzy @ x[..., :6]).sum(0)
        rz = rhs[:, ny:].sum(0) - (kzy @ x[..., 6:]).sum(0)
        rz = rz + torch.cat([res_ee[:, None], rz.new_zeros(6, rz.shape[1] - 1)], -1)
        dz = -torch.linalg.solve(s, rz)
        dy = -(x[..., 6:] + x[..., :6] @ dz)
        if drdth is None:
            return dy[..., 0], dz[:, 0]
        return dy[..., 0], dz[:, 0], (dy[..., 1:], dz[:, 1:])

    def _retract(self, g_ee: Tensor, g_int: Tensor, beta: Tensor, dy: Tensor, dz: Tensor, alpha: float,
                 theta: Optional[Tensor] = None, base_old: Optional[Tensor] = None):
        """Update along a Newton direction (δζ_int, δβ, δζ_ee) scaled by α.

        ``retraction == "nodal"``: the seed's ``g ← g exp(α δζ^)`` on every SE(3) factor, ``β ← β + α δβ``
        (seed Sec. V-E). ``"strain"`` (default): the same first-order update, but interior nodes are rebuilt
        from the base along the rod, ``g_j ← g_{j-1} exp((Ω_j + α δΩ_j)^)`` with the linearised change
        ``δΩ_j = -J_l⁻¹(Ω_j) δζ_{j-1} + J_r⁻¹(Ω_j) δζ_j`` of each element's relative pose; default for a
        single rod (``self.retraction``), the seed's nodal update for closed chains. Both are
        retractions with the same differential, so Newton stays quadratic; the strain form does not stretch
        the nearly inextensible rods along tangent lines (the nodal update does, by O(|δζ|²) · EA, which
        makes plain Newton crawl from the straight configuration under large loads). Our deviation from
        the seed, measured in tests/physics/lse (iteration counts).
        """
        n = self.n_elements
        dzeta = dy[:, :6 * (n - 1)].reshape(self.n_rods, n - 1, 6)
        dbeta = dy[:, 6 * (n - 1):].reshape(self.n_rods, n, 6)
        if self.retraction == "nodal" or theta is None:
            steps = se3_exp_fused(alpha * torch.cat([dzeta.reshape(-1, 6), dz[None]]))
            return (g_ee @ steps[-1], g_int @ steps[:-1].reshape(g_int.shape), beta + alpha * dbeta)
        g_ee_new = g_ee @ se3_exp(alpha * dz)
        base = self.base_poses(theta)
        old_base = base if base_old is None else base_old
        tip = g_ee @ self.tip_local
        nodes_old = torch.cat([old_base[:, None], g_int, tip[:, None]], 1)  # (R, N+1, 4, 4)
        dtip = (self.proj_nodes[:, n, :, 12 * n - 6:] @ dz).unsqueeze(1)    # Ad_{(g^loc)⁻¹} δζ_ee
        dnodes = torch.cat([dz.new_zeros(self.n_rods, 1, 6), dzeta, dtip], 1)  # (R, N+1, 6)
        omega = se3_log(se3_inverse(nodes_old[:, :-1]) @ nodes_old[:, 1:])  # (R, N, 6)
        d_omega = -(se3_left_jacobian_inv(omega) @ dnodes[:, :-1].unsqueeze(-1)).squeeze(-1) \
            + (se3_right_jacobian_inv(omega) @ dnodes[:, 1:].unsqueeze(-1)).squeeze(-1)
        steps = se3_exp(omega + alpha * d_omega)
        out = []
        g = base
        for j in range(n):
            g = g @ steps[:, j]
            out.append(g)
        # platform: each rod predicts it; their first-order SE(3) mean (all agree to first order). Each
        # rod's remaining closure mismatch (second order in the step, or the motion of the bases when
        # transporting a warm start) is spread along the rod as the fraction s/L of the rigid correction.
        pred = out[-1] @ se3_inverse(self.tip_local)                          # (R, 4, 4)
        inner = torch.stack(out[:-1], 1) if n > 1 else g_int
        if self.n_rods == 1:
            return (pred[0], inner, beta + alpha * dbeta)
        rel = se3_log(se3_inverse(pred[0]) @ pred)
        g_ee_new = pred[0] @ se3_exp(rel.mean(0))
        target = g_ee_new @ self.tip_local
        dp = target[:, :3, 3] - out[-1][:, :3, 3]                               # (R, 3)
        dphi = so3_log(target[:, :3, :3] @ out[-1][:, :3, :3].transpose(-1, -2))  # (R, 3) world
        frac = (torch.arange(1, n, dtype=dp.dtype) / n)[None, :, None]
        g_int_new = inner.clone()
        g_int_new[..., :3, 3] = inner[..., :3, 3] + frac * dp[:, None, :]
        g_int_new[..., :3, :3] = so3_exp(frac * dphi[:, None, :]) @ inner[..., :3, :3]
        return (g_ee_new, g_int_new, beta + alpha * dbeta)

    # ------------------------------------------------------------------ solver
    def solve(self, theta: Tensor, loads: Optional[Loads] = None, init: Optional[Equilibrium] = None,
              tol: float = 1e-8, max_iter: int = 15, max_rotation_step: float = 0.5,
              max_continuation: int = 64, raise_on_failure: bool = True) -> Equilibrium:
        """Forward statics: the equilibrium for motor angles θ (M,) [rad] under ``loads``.

        Riemannian Newton (seed Sec. V-E: ``K_t δq = -r``, ``g ← g exp(δζ^)``, ``β ← β + δβ``) from ``init``
        (warm start) or the straight configuration. Step control: every step is scaled so that no nodal
        rotation increment exceeds ``max_rotation_step`` [rad] (damping), and when Newton fails
        (``max_iter`` iterations, the residual grows 1e3-fold, or it is still above its start after 6
        iterations) the solver falls back to adaptive continuation: first in θ from the warm start
        (θ(λ) = θ_init + λ (θ - θ_init)), then from the unloaded straight configuration in the
        load/actuation factor λ ∈ [0, 1] (θ(λ) = λ θ, loads(λ) = λ loads); step halved on failure, doubled on
        success, at most ``max_continuation`` stages each. The robot is multistable at large actuation: large
        jumps (≳ 0.1 rad per motor) may land on another branch; follow paths in small warm-started steps.
        Converged when the scaled residual ∞-norm (entries in N·m, relative to max(EI/L, applied-load
        scale)) is below ``tol``, or when the Newton correction falls below 1e-13 (rad, and L-scaled
        lengths; that last correction is applied): the round-off floor of the residual is ~1e-10 for stiff rods. Raises `ConvergenceError`
        with the last residual norm and the iteration count otherwise. ``iterations`` counts all Newton iterations.

        Differentiable: when θ, a load tensor or a buffer (e.g. ``youngs_modulus``) requires grad, the
        returned poses and slopes carry gradients from the implicit function theorem, computed by one
        linearisation at the converged point ``q = q* ⊕ (-K_t⁻¹ r(q*, p))`` with K_t detached (the value is
        unchanged, the derivative is ``-K_t⁻¹ ∂r/∂p``); Newton itself is never unrolled.
        """
        loads = Loads() if loads is None else loads
        theta = torch.as_tensor(theta, dtype=torch.float64)
        if theta.shape != (self.motor_axis.shape[0],):
            raise ValueError(f"theta must have shape ({self.motor_axis.shape[0]},), got {tuple(theta.shape)}")
        if not all(math.isfinite(v) for v in theta.tolist()):
            raise ValueError(f"theta must be finite, got {theta.tolist()}")
        needs_grad = torch.is_grad_enabled() and (
            theta.requires_grad or any(t.requires_grad for t in loads.tensors())
            or any(b is not None and b.requires_grad for b in self._buffers.values())
            or any(p is not None and p.requires_grad for p in self._parameters.values()))
        # compiled Newton (flexlearn.physics.lse.compiled_solver): same iterations, no gradients, nodal update
        self._compiled = (self.kernels == "numba" and HAVE_NUMBA and not needs_grad
                          and self.retraction == "nodal")
        if not self._compiled:
            self._w = self._scales()
        with torch.no_grad():
            th = theta.detach()
            sens = None
            if init is not None:
                state = (init.g_ee.detach(), init.nodes[:, 1:-1].detach(), init.beta.detach())
                base_old = init.nodes[:, 0].detach()
                sens = init.sensitivity
                dth = th - init.theta.detach().to(th.dtype)
                if self.predictor and sens is not None and bool((dth != 0).any()):
                    state = self._predict(state, sens, dth, max_rotation_step)
            else:
                state = self.straight_state()
                base_old = self.base_pose0
            if self.transport and self.retraction == "strain" and self.n_elements > 1 and self.motor_axis.shape[0] > 0:
                # transport the guess to the new motor angles: keep every element's relative pose and
                # re-chain the rods from the new bases (the platform follows the rods' mean prediction)
                zero_y = torch.zeros(self.n_rods, self.n_y, dtype=torch.float64)
                state = self._retract(*state, zero_y, torch.zeros(6, dtype=torch.float64), 0.0, th, base_old)
            scale = load_scale_compiled(self, loads) if self._compiled else self._load_scale(loads, state[0])
            log: list[float] = []
            ok, state, it, last, s_new = self._newton(th, loads, state, scale, tol, max_iter, max_rotation_step, log)
            total = it
            if not ok and init is not None and not torch.equal(init.theta.detach().to(th.dtype), th):
                # continuation in θ from the warm start (same loads)
                th0 = init.theta.detach().to(th.dtype)
                ok, state, it0, last, s_new = self._continuation(
                    lambda lam: (th0 + lam * (th - th0), loads),
                    (init.g_ee.detach(), init.nodes[:, 1:-1].detach(), init.beta.detach()),
                    scale, tol, max_iter, max_rotation_step, max_continuation, log, True)
                total += it0
            if not ok:  # continuation in λ from the unloaded straight configuration
                ok, state, it0, last, s_new = self._continuation(
                    lambda lam: (lam * th, loads.scaled(lam)), self.straight_state(),
                    scale, tol, max_iter, max_rotation_step, max_continuation, log, False)
                total += it0
            if not ok:
                if raise_on_failure:
                    raise ConvergenceError("LSE Newton did not converge", log[-1] if log else float("nan"),
                                           total, log)
            sens = s_new if s_new is not None else sens
        g_ee, g_int, beta = state
        nodes = nodes_of(self, g_ee) if self._compiled else None
        nodes = self._all_nodes(th, g_ee, g_int) if nodes is None else nodes
        eq = Equilibrium(g_ee, nodes, beta, th, total, log, sens)
        if needs_grad:
            with torch.no_grad():
                kt, kee, _ = self._tangent(last)
            eq = self._implicit(theta, loads, eq, kt, kee)
        return eq

    def _predict(self, state, sens, dth: Tensor, max_rot: float):
        """First-order (tangent) predictor of a warm start: ``q ⊕ (dq/dθ) Δθ`` (nodal update) with the
        sensitivity ``dq/dθ = -K_t⁻¹ ∂r/∂θ`` of the previous equilibrium (from its last factorisation).
        Skipped when it would rotate a node by more than ``max_rot`` [rad]. (Applying the change to the
        element twists and re-chaining the rods from the moved bases was tried: no fewer iterations.)"""
        if getattr(self, "_compiled", False):
            return predict_compiled(state, sens, dth, max_rot)
        dy = sens[0] @ dth
        dz = sens[1] @ dth
        n = self.n_elements
        rot = torch.cat([dy[:, :6 * (n - 1)].reshape(-1, 6)[:, :3], dz[None, :3]])
        if not float(torch.linalg.vector_norm(rot, dim=-1).max()) <= max_rot:
            return state
        return self._retract(*state, dy, dz, 1.0)

    def _continuation(self, problem, cur, scale, tol, max_iter, max_rot, max_stages, log, start_ok):
        """Adaptive continuation λ: 0 → 1 on ``problem(λ) = (θ, loads)`` from ``cur`` (an equilibrium at λ = 0
        when ``start_ok``); step halved on failure, doubled on success."""
        total = 0
        last = sens = None
        if start_ok:
            ok0 = True
        else:
            th0, ld0 = problem(0.0)
            ok0, cur, total, last, sens = self._newton(th0, ld0, cur, scale, tol, max_iter, max_rot, log)
        lam, step, stages = 0.0, 0.25, 0
        while ok0 and lam < 1.0 and stages < max_stages:
            stages += 1
            trial = min(1.0, lam + step)
            th1, ld1 = problem(trial)
            ok1, new, it1, last1, sens1 = self._newton(th1, ld1, cur, scale, tol, max_iter, max_rot, log)
            total += it1
            if ok1:
                lam, cur, last, sens = trial, new, last1, sens1
                step = min(2.0 * step, 1.0)
            else:
                step *= 0.5
        return ok0 and lam >= 1.0, cur, total, last, sens

    def _newton(self, th: Tensor, loads: Loads, state, scale: float, tol: float, max_iter: int,
                max_rot: float, log: list[float], step_tol: float = 1e-13):
        """Capped Riemannian Newton iterations; returns (converged, state, iterations, last residual context,
        sensitivity dq/dθ from the last factorisation or None). The tangent is formed only when a step is taken."""
        if getattr(self, "_compiled", False):
            return newton_compiled(self, th, loads, state, scale, tol, max_iter, max_rot, log, step_tol)
        g_ee, g_int, beta = state
        n = self.n_elements
        res, res_ee, last = self._residual(th, g_ee, g_int, beta, loads)
        norm = self._scaled_norm(res, res_ee, scale)
        log.append(norm)
        first = norm
        it = 0
        sens = None
        while norm > tol:
            if (it >= max_iter or not math.isfinite(norm) or norm > 1e3 * max(first, 10.0)
                    or (it >= 6 and norm > first)):
                return False, (g_ee, g_int, beta), it, last, sens
            kt, kee, drdth = self._tangent(last)
            dy, dz, sens = self._newton_step(res, kt, res_ee, kee, drdth)
            if self._step_norm(dy, dz) < step_tol:
                # round-off floor: the correction is below 1e-13 rad / 1e-13 L, the residual cannot drop
                # further; the correction is still applied (no new residual)
                return True, self._retract(g_ee, g_int, beta, dy, dz, 1.0, th), it, last, sens
            rot = torch.cat([dy[:, :6 * (n - 1)].reshape(-1, 6)[:, :3], dz[None, :3]])
            big = float(torch.linalg.vector_norm(rot, dim=-1).max())
            if not math.isfinite(big):
                return False, (g_ee, g_int, beta), it, last, sens
            alpha = 1.0 if big <= max_rot else max_rot / big
            # damping: backtrack while the residual would grow more than `growth`-fold (a relaxed test: the
            # stiff axial/shear terms make a good Newton step raise the residual transiently)
            for _ in range(self.backtracks + 1):
                cand = self._retract(g_ee, g_int, beta, dy, dz, alpha, th)
                res_c, res_ee_c, last_c = self._residual(th, *cand, loads)
                n_c = self._scaled_norm(res_c, res_ee_c, scale)
                if n_c <= self.growth * norm:
                    break
                alpha *= 0.5
            g_ee, g_int, beta = cand
            it += 1
            res, res_ee, last, norm = res_c, res_ee_c, last_c, n_c
            log.append(norm)
        return True, (g_ee, g_int, beta), it, last, sens

    def _implicit(self, theta: Tensor, loads: Loads, eq: Equilibrium, kt: Tensor, kee: Tensor) -> Equilibrium:
        g_ee, g_int, beta = eq.g_ee, eq.nodes[:, 1:-1], eq.beta
        res, _, res_ee, _ = self._assemble(theta, g_ee, g_int, beta, loads, False)
        dy, dz = self._newton_step(res, kt.detach(), res_ee, kee.detach())
        g_ee2, g_int2, beta2 = self._retract(g_ee, g_int, beta, dy, dz, 1.0)
        nodes = self._all_nodes(theta, g_ee2, g_int2)
        return Equilibrium(g_ee2, nodes, beta2, theta, eq.iterations, eq.residual_log, eq.sensitivity)

    def _load_scale(self, loads: Loads, g_ee: Tensor) -> float:
        """Residual scale [N·m]: max(EI/L, |applied moments| + |applied forces|·L)."""
        k = self.stiffness()
        length = float(self.lengths.mean())
        s = float((k[:, :3].max(-1).values / self.lengths).max())
        return max(s, loads.magnitude(length))

    # ------------------------------------------------------------------ conveniences
    def rod_poses(self, eq: Equilibrium, samples_per_element: int = 8) -> Tensor:
        """Poses along every rod (R, N·k + 1, 4, 4) from the element strain fields (k = samples_per_element).

        Inside element e: ``g(s) = g_a exp(Ω_s^)`` with the 4th-order Magnus map of the linear strain on [0, s]
        (mean ξ̄ + (s - h)/2 β, slope β; seed eqs. (3), (8)); at s = h it reproduces g_b up to the Magnus
        truncation. Differentiable like ``eq``.
        """
        from flexlearn.physics.lse.element import magnus_omega, mean_strain

        k = int(samples_per_element)
        h = self._h()                                                           # (R, N)
        ga, gb = eq.nodes[:, :-1], eq.nodes[:, 1:]
        xibar = mean_strain(ga, gb, eq.beta, h)                                 # (R, N, 6)
        frac = torch.arange(1, k + 1, dtype=h.dtype) / k                        # (k,)
        s = frac[None, None, :] * h[..., None]                                  # (R, N, k)
        xi_mean = xibar[..., None, :] + ((s - h[..., None]) / 2)[..., None] * eq.beta[..., None, :]
        om = magnus_omega(xi_mean, eq.beta[..., None, :].expand_as(xi_mean), s)
        g = ga[..., None, :, :] @ se3_exp(om)                                  # (R, N, k, 4, 4)
        g = g.reshape(self.n_rods, self.n_elements * k, 4, 4)
        return torch.cat([eq.nodes[:, :1], g], 1)

    def default_loads(self, pulley: bool = False) -> Loads:
        """Gravity, plus the configured Experiment-II pulley when ``pulley``."""
        if pulley:
            return Loads(pulley_position=self.pulley_position, pulley_tension=self.pulley_tension)
        return Loads()
