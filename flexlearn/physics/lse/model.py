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
import warnings
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from flexlearn.config import check_memory, from_dict
from flexlearn.errors import ConfigError
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
from flexlearn.physics.lse import newton_policy as policy
from flexlearn.physics.lse.assembly import AssemblyMixin
from flexlearn.physics.lse.backend import KERNELS, SolverCache
from flexlearn.physics.lse.compiled.linalg import HAVE_NUMBA
from flexlearn.physics.lse.config import CPRConfig
from flexlearn.physics.lse.element import magnus_omega, mean_strain, section_properties
from flexlearn.physics.lse.errors import StaticsInputError
from flexlearn.physics.lse.fused import se3_exp_fused
from flexlearn.physics.lse.solver import SolverMixin
from flexlearn.physics.lse.state import Equilibrium, Loads, motor_twist

__all__ = ["CPRModel", "RobotLayout", "RodMaterial"]


@dataclass(frozen=True)
class RobotLayout:
    """Where the rods of a CPR sit: its motors, the rod frames and the rest lengths (tensors or array-likes,
    converted to float64 by `CPRModel`).

    Args:
        motor_axis: (M, 3) unit world axes of the motors (M may be 0).
        motor_pivot: (M, 3) [m] a point on each motor axis.
        rod_motor: (R,) the motor that turns each rod's base (−1: fixed base).
        base_pose0: (R, 4, 4) rod base poses at θ = 0 (rod along body z).
        tip_local: (R, 4, 4) platform attachment frames (in the platform frame).
        lengths: (R,) or () rest lengths [m].
    """

    motor_axis: Tensor
    motor_pivot: Tensor
    rod_motor: Tensor
    base_pose0: Tensor
    tip_local: Tensor
    lengths: Tensor


@dataclass(frozen=True)
class RodMaterial:
    """Material, section and reference strain of the rods (each a scalar for all rods, or one value per rod).

    Args:
        youngs_modulus: E [Pa].
        shear_modulus: G [Pa].
        area: Cross-section area A [m²].
        i1: Second moment of area about body x [m⁴].
        i2: Second moment of area about body y [m⁴].
        torsion: Torsion constant J [m⁴].
        density: ρ [kg/m³].
        xi0: Reference strain ξ₀ = [κ₀; ν₀] (6,) or (R, 6) (straight, unstretched: [0, 0, 0, 0, 0, 1]).
    """

    youngs_modulus: Tensor | float
    shear_modulus: Tensor | float
    area: Tensor | float
    i1: Tensor | float
    i2: Tensor | float
    torsion: Tensor | float
    density: Tensor | float
    xi0: Tensor


def model_bytes(n_rods: int, n_elements: int) -> float:
    """Bytes the dense LSE model of ``n_rods`` rods of ``n_elements`` holds at least: its projections
    (R, N, 18, 12N) and (R, N+1, 6, 12N), and one dense tangent of the 12 N R unknowns (float64).

    Args:
        n_rods: R.
        n_elements: N, per rod.

    Returns:
        The estimate [bytes].
    """
    unknowns = 12.0 * n_elements * n_rods
    return 8.0 * n_rods * n_elements * 24 * 12 * n_elements + 8.0 * unknowns**2


class CPRModel(SolverMixin, AssemblyMixin, nn.Module):
    """LSE statics of a continuum parallel robot (a single rod with a free tip is the special case R = 1).

    Buffers (float64): ``motor_axis`` (M, 3), ``motor_pivot`` (M, 3), ``rod_motor`` (R,) (−1: fixed base),
    ``base_pose0`` (R, 4, 4) rod base poses at θ = 0, ``tip_local`` (R, 4, 4) platform attachment frames,
    ``lengths`` (R,) [m], ``youngs_modulus`` (R,) [Pa], ``shear_modulus`` (R,) [Pa], ``area`` (R,) [m²],
    ``i1``, ``i2``, ``torsion`` (R,) [m⁴], ``density`` (R,) [kg/m³], ``xi0`` (R, 6) reference strain,
    ``gravity`` (3,) [m/s²], ``platform_mass`` () [kg], ``motor_limits`` (2,) [rad]. Any of them can be made a
    Parameter (or given ``requires_grad``) and receives gradients by implicit differentiation.

    Built from a config by :meth:`from_config`; directly:
    ``CPRModel(RobotLayout(...), RodMaterial(...), n_elements, gravity, platform_mass, motor_limits)``.

    Args:
        layout: Motors, rod frames and rest lengths (:class:`RobotLayout`).
        material: Rod material and section (:class:`RodMaterial`).
        n_elements: LSE elements per rod N (≥ 1).
        gravity: (3,) [m/s²].
        platform_mass: [kg].
        motor_limits: (low, high) [rad].

    Raises:
        StaticsInputError: ``n_elements`` < 1 (also a ValueError).
    """

    # set by `from_config` (the configured Experiment-II pulley and the config the model was built from)
    pulley_position: Tensor
    pulley_tension: Tensor
    config: CPRConfig

    def __init__(
        self,
        layout: RobotLayout,
        material: RodMaterial,
        n_elements: int,
        gravity: Tensor,
        platform_mass: float = 0.0,
        motor_limits: tuple[float, float] = (-math.pi, math.pi),
    ) -> None:
        super().__init__()
        dt = torch.float64
        r = layout.base_pose0.shape[0]
        n = int(n_elements)
        if n < 1:
            raise StaticsInputError("n_elements must be >= 1")
        self.n_rods, self.n_elements = r, n
        f = lambda x: torch.as_tensor(x, dtype=dt).clone()  # noqa: E731
        self.register_buffer("motor_axis", f(layout.motor_axis).reshape(-1, 3))
        self.register_buffer("motor_pivot", f(layout.motor_pivot).reshape(-1, 3))
        self.register_buffer("rod_motor", torch.as_tensor(layout.rod_motor, dtype=torch.long).reshape(r))
        self.register_buffer("base_pose0", f(layout.base_pose0))
        self.register_buffer("tip_local", f(layout.tip_local))
        self.register_buffer("lengths", f(layout.lengths).expand(r).clone())
        for name in ("youngs_modulus", "shear_modulus", "area", "i1", "i2", "torsion", "density"):
            self.register_buffer(name, f(getattr(material, name)).expand(r).clone())
        self.register_buffer("xi0", f(material.xi0).expand(r, 6).clone())
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
        self.backtracks = policy.BACKTRACKS  # step control of both Newton drivers (newton_policy)
        self.growth = policy.GROWTH
        # derived data reused between solves, keyed by buffer identity and version (flexlearn.physics.lse.backend)
        self.solver_cache = SolverCache()
        self._kernels: Optional[str] = None  # the deprecated `kernels` setting (None: not set)
        # "motors": motor angles drive the bases; "length": rod lengths, solved for by `pose_statics`
        self.actuation = "motors"
        self.tip_twist_free = False  # platform attachments free to twist about the rod axis

    @property
    def kernels(self) -> str:
        """Deprecated: pass ``backend`` to :meth:`solve`. The element kernels of solves with ``backend="auto"``:
        ``"numba"`` (= "auto", the default when numba imports), ``"fused"`` (= "torch") or ``"reference"``."""
        if self._kernels is not None:
            return self._kernels
        return "numba" if HAVE_NUMBA else "fused"

    @kernels.setter
    def kernels(self, value: str) -> None:
        """Deprecated setter of :attr:`kernels` (warns).

        Args:
            value: ``"numba"``, ``"fused"`` or ``"reference"``.

        Raises:
            StaticsInputError: Another value.
        """
        warnings.warn(
            "CPRModel.kernels is deprecated: pass backend='auto'|'numba'|'torch'|'reference' to solve()",
            DeprecationWarning,
            stacklevel=2,
        )
        if value not in KERNELS:
            raise StaticsInputError(f"kernels must be one of {sorted(KERNELS)}, got {value!r}")
        self._kernels = value

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, cfg: CPRConfig | dict | None = None) -> "CPRModel":
        """Build the robot of a `CPRConfig` (or a dict / OmegaConf node validated into one).

        Args:
            cfg: The robot's config (default: ``CPRConfig()``, the seed-003 prototype).

        Returns:
            The model, with ``pulley_position``, ``pulley_tension`` and ``config`` set.

        Raises:
            ConfigError: An invalid config (the key is named), or a rod of zero length.
        """
        if cfg is None:
            cfg = CPRConfig()
        elif not isinstance(cfg, CPRConfig):
            cfg = from_dict(CPRConfig, cfg, "cpr")
        g = cfg.geometry
        dt = torch.float64
        if g.layout == "rods":
            return cls._from_rod_frames(cfg)
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
        return cls._with_rods(
            cfg,
            torch.stack(axes),
            torch.stack(pivots),
            torch.tensor(rod_motor),
            torch.stack(bases),
            torch.stack(tips),
            lengths,
        )

    @classmethod
    def _from_rod_frames(cls, cfg: CPRConfig) -> "CPRModel":
        """Fixed rods from per-rod base poses and platform attachment frames (``geometry.layout: rods``); the
        rest lengths are the base-to-attachment distances with the platform level at ``platform_height``."""
        g = cfg.geometry
        dt = torch.float64

        def pose(frame):
            f = torch.tensor(frame, dtype=dt)
            return se3_from_rt(so3_exp(f[3:]), f[:3])

        bases = torch.stack([pose(f) for f in g.rod_bases])
        tips = torch.stack([pose(f) for f in g.rod_attachments])
        p_ee = torch.tensor([0.0, 0.0, g.platform_height], dtype=dt)
        lengths = [float(torch.linalg.vector_norm(t[:3, 3] + p_ee - b[:3, 3])) for b, t in zip(bases, tips)]
        r = bases.shape[0]
        model = cls._with_rods(
            cfg,
            torch.zeros(0, 3, dtype=dt),
            torch.zeros(0, 3, dtype=dt),
            torch.full((r,), -1, dtype=torch.long),
            bases,
            tips,
            lengths,
        )
        model.actuation = g.actuation
        model.tip_twist_free = g.tip_twist == "free"
        return model

    @classmethod
    def _with_rods(
        cls, cfg: CPRConfig, axes: Tensor, pivots: Tensor, rod_motor: Tensor, bases: Tensor, tips: Tensor, lengths: list
    ) -> "CPRModel":
        """The model of ``cfg`` with the given motors, rod frames and rest lengths (m)."""
        dt = torch.float64
        g = cfg.geometry
        rc = cfg.rod
        area, i1, i2, jt = section_properties(rc.section, rc.section_dims)
        for k, length in enumerate(lengths):
            if not (length > 0 and math.isfinite(length)):
                raise ConfigError(f"config 'cpr.geometry': rod {k} has zero length")
        check_memory("cpr.rod.n_elements", rc.n_elements, model_bytes(len(lengths), rc.n_elements),
                     f"the LSE model of {len(lengths)} rods")  # fmt: skip
        xi0 = torch.tensor(list(rc.precurvature) + [0.0, 0.0, 1.0], dtype=dt)
        layout = RobotLayout(axes, pivots, rod_motor, bases, tips, torch.tensor(lengths, dtype=dt))
        material = RodMaterial(
            youngs_modulus=rc.youngs_modulus,
            shear_modulus=rc.g,
            area=area,
            i1=i1,
            i2=i2,
            torsion=jt,
            density=rc.density,
            xi0=xi0,
        )
        model = cls(
            layout, material, rc.n_elements, torch.tensor(cfg.gravity, dtype=dt), cfg.platform_mass, g.motor_limits
        )
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
            pn[:, j, :, 6 * (j - 1) : 6 * j] = eye
        pn[:, n, :, nl - 6 :] = adinv
        for e in range(n):
            p[:, e, :6] = pn[:, e]
            p[:, e, 6:12] = pn[:, e + 1]
            p[:, e, 12:, 6 * (n - 1) + 6 * e : 6 * (n - 1) + 6 * e + 6] = eye
        self.register_buffer("proj", p, persistent=False)
        self.register_buffer("proj_nodes", pn, persistent=False)
        self.register_buffer("proj_t", p.transpose(-1, -2).contiguous(), persistent=False)
        # the same, elements stacked: (R, 12N, 18N), (R, 18N, 12N) and (R, 12N, 6(N+1))
        self.register_buffer("proj_cat_t", p.permute(0, 3, 1, 2).reshape(r, nl, 18 * n).contiguous(), persistent=False)
        self.register_buffer("proj_cat", p.reshape(r, 18 * n, nl).contiguous(), persistent=False)
        self.register_buffer(
            "proj_nodes_cat_t", pn.permute(0, 3, 1, 2).reshape(r, nl, 6 * (n + 1)).contiguous(), persistent=False
        )

    # ------------------------------------------------------------------ kinematics
    def stiffness(self) -> Tensor:
        """Diagonal section stiffness (R, 6) ``[EI₁, EI₂, GJ, GA, GA, EA]`` (N·m², N)."""
        e, g = self.youngs_modulus, self.shear_modulus
        return torch.stack(
            [e * self.i1, e * self.i2, g * self.torsion, g * self.area, g * self.area, e * self.area], -1
        )

    def base_poses(self, theta: Tensor) -> Tensor:
        """Rod base poses (R, 4, 4) ``g_{k,0} = G_m(θ_m) g⁰_{k,0}`` (seed Sec. IV-B); θ (M,) [rad].

        Args:
            theta: Motor angles (M,) [rad].

        Returns:
            The base poses (R, 4, 4); fixed rods keep g⁰.
        """
        fixed = self.rod_motor < 0
        idx = self.rod_motor.clamp_min(0)
        if self.motor_axis.shape[0] == 0:
            return self.base_pose0
        s = motor_twist(self.motor_axis, self.motor_pivot)[idx]  # (R, 6)
        th = theta.to(self.base_pose0.dtype)[idx]
        th = torch.where(fixed, torch.zeros_like(th), th)
        return se3_exp(th[:, None] * s) @ self.base_pose0

    def element_lengths(self) -> Tensor:
        return (self.lengths / self.n_elements)[:, None].expand(self.n_rods, self.n_elements)

    def straight_state(self, theta: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
        """The unloaded straight configuration at θ = 0 (or rods straight from the bases at θ): state tuple.

        Args:
            theta: Motor angles (M,) [rad]; None = the bases at θ = 0.

        Returns:
            ``(g_ee (4, 4), g_int (R, N-1, 4, 4), beta (R, N, 6))``, β zero.
        """
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
    def all_nodes(self, theta: Tensor, g_ee: Tensor, g_int: Tensor) -> Tensor:
        """Every node pose (R, N+1, 4, 4): the bases at θ (cached), the interior nodes, the platform attachments.

        Args:
            theta: Motor angles (M,) [rad].
            g_ee: Platform pose (4, 4) [m].
            g_int: Interior node poses (R, N-1, 4, 4) [m].
        """
        base = self.solver_cache.base_poses(self, theta)
        tip = g_ee @ self.tip_local
        return torch.cat([base[:, None], g_int, tip[:, None]], 1)

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
    ):
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

        Args:
            g_ee: Platform pose (4, 4) [m].
            g_int: Interior node poses (R, N-1, 4, 4) [m].
            beta: Element strain forces (R, N, 6).
            dy: Rod-local direction (R, 12N): δζ of the interior nodes (R, 6(N-1)), then δβ (R, 6N).
            dz: Platform direction δζ_ee (6,).
            alpha: Step length.
            theta: Motor angles (M,) [rad] (None: the nodal update).
            base_old: Base poses (R, 4, 4) the state was built on, when the motors moved since (None: those at θ).

        Returns:
            ``(g_ee, g_int, beta)`` after the step.
        """
        n = self.n_elements
        dzeta = dy[:, : 6 * (n - 1)].reshape(self.n_rods, n - 1, 6)
        dbeta = dy[:, 6 * (n - 1) :].reshape(self.n_rods, n, 6)
        if self.retraction == "nodal" or theta is None:
            steps = se3_exp_fused(alpha * torch.cat([dzeta.reshape(-1, 6), dz[None]]))
            return (g_ee @ steps[-1], g_int @ steps[:-1].reshape(g_int.shape), beta + alpha * dbeta)
        g_ee_new = g_ee @ se3_exp(alpha * dz)
        base = self.base_poses(theta)
        old_base = base if base_old is None else base_old
        tip = g_ee @ self.tip_local
        nodes_old = torch.cat([old_base[:, None], g_int, tip[:, None]], 1)  # (R, N+1, 4, 4)
        dtip = (self.proj_nodes[:, n, :, 12 * n - 6 :] @ dz).unsqueeze(1)  # Ad_{(g^loc)⁻¹} δζ_ee
        dnodes = torch.cat([dz.new_zeros(self.n_rods, 1, 6), dzeta, dtip], 1)  # (R, N+1, 6)
        omega = se3_log(se3_inverse(nodes_old[:, :-1]) @ nodes_old[:, 1:])  # (R, N, 6)
        d_omega = -(se3_left_jacobian_inv(omega) @ dnodes[:, :-1].unsqueeze(-1)).squeeze(-1) + (
            se3_right_jacobian_inv(omega) @ dnodes[:, 1:].unsqueeze(-1)
        ).squeeze(-1)
        steps = se3_exp(omega + alpha * d_omega)
        out = []
        g = base
        for j in range(n):
            g = g @ steps[:, j]
            out.append(g)
        # platform: each rod predicts it; their first-order SE(3) mean (all agree to first order). Each
        # rod's remaining closure mismatch (second order in the step, or the motion of the bases when
        # transporting a warm start) is spread along the rod as the fraction s/L of the rigid correction.
        pred = out[-1] @ se3_inverse(self.tip_local)  # (R, 4, 4)
        inner = torch.stack(out[:-1], 1) if n > 1 else g_int
        if self.n_rods == 1:
            return (pred[0], inner, beta + alpha * dbeta)
        rel = se3_log(se3_inverse(pred[0]) @ pred)
        g_ee_new = pred[0] @ se3_exp(rel.mean(0))
        target = g_ee_new @ self.tip_local
        dp = target[:, :3, 3] - out[-1][:, :3, 3]  # (R, 3)
        dphi = so3_log(target[:, :3, :3] @ out[-1][:, :3, :3].transpose(-1, -2))  # (R, 3) world
        frac = (torch.arange(1, n, dtype=dp.dtype) / n)[None, :, None]
        g_int_new = inner.clone()
        g_int_new[..., :3, 3] = inner[..., :3, 3] + frac * dp[:, None, :]
        g_int_new[..., :3, :3] = so3_exp(frac * dphi[:, None, :]) @ inner[..., :3, :3]
        return (g_ee_new, g_int_new, beta + alpha * dbeta)

    # ------------------------------------------------------------------ conveniences
    def pose_statics(self, platform_wrench=None, **settings):
        """Inverse statics to a 6-D platform pose with the rod lengths as unknowns (fixed bases, six rods).

        Args:
            platform_wrench: Applied platform wrench (6,) [N·m; N] in the platform frame (default: none).
            **settings: Fields of :class:`~flexlearn.physics.lse.length_actuated.statics.PoseSettings` (``tol``,
                ``twist_free``, ``chord_keep``, ...).

        Returns:
            A :class:`flexlearn.physics.lse.length_actuated.statics.PoseStatics` of this model.
        """
        # `import flexlearn.physics.lse` and a flexlearn-cpr run never load the compiled pose kernels (docs/cpr.md)
        from flexlearn.physics.lse.length_actuated import statics  # lazy: pose kernels off the forward start-up

        return statics.PoseStatics(self, statics.PoseSettings(**settings), platform_wrench)

    def rod_poses(self, eq: Equilibrium, samples_per_element: int = 8) -> Tensor:
        """Poses along every rod (R, N·k + 1, 4, 4) from the element strain fields (k = samples_per_element).

        Inside element e: ``g(s) = g_a exp(Ω_s^)`` with the 4th-order Magnus map of the linear strain on [0, s]
        (mean ξ̄ + (s - h)/2 β, slope β; seed eqs. (3), (8)); at s = h it reproduces g_b up to the Magnus
        truncation. Differentiable like ``eq``.

        Args:
            eq: The equilibrium.
            samples_per_element: Samples k per element.

        Returns:
            The poses (R, N·k + 1, 4, 4), the base node first.
        """
        k = int(samples_per_element)
        h = self.element_lengths()  # (R, N)
        ga, gb = eq.nodes[:, :-1], eq.nodes[:, 1:]
        xibar = mean_strain(ga, gb, eq.beta, h)  # (R, N, 6)
        frac = torch.arange(1, k + 1, dtype=h.dtype) / k  # (k,)
        s = frac[None, None, :] * h[..., None]  # (R, N, k)
        xi_mean = xibar[..., None, :] + ((s - h[..., None]) / 2)[..., None] * eq.beta[..., None, :]
        om = magnus_omega(xi_mean, eq.beta[..., None, :].expand_as(xi_mean), s)
        g = ga[..., None, :, :] @ se3_exp(om)  # (R, N, k, 4, 4)
        g = g.reshape(self.n_rods, self.n_elements * k, 4, 4)
        return torch.cat([eq.nodes[:, :1], g], 1)

    def default_loads(self, pulley: bool = False) -> Loads:
        """Gravity, plus the configured Experiment-II pulley when ``pulley``.

        Args:
            pulley: Add the configured pulley load.

        Returns:
            The `Loads`.
        """
        if pulley:
            return Loads(pulley_position=self.pulley_position, pulley_tension=self.pulley_tension)
        return Loads()
