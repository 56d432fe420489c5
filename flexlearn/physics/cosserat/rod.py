"""The Cosserat rod model (seed 001, Secs. 2–3.1): construction from geometry and materials, parameters,
rest and initial states, elastic energy, internal forces and torques, linearised natural frequencies.
Time stepping behind :meth:`CosseratRod.simulate` (the Lie group variational integrator, LGVI, its discrete
equations and their derivation): :mod:`flexlearn.physics.cosserat.integrator`; the Cayley–Newton rotation
solve: :mod:`flexlearn.physics.cosserat.newton`; :class:`RodState`, :class:`Trajectory`, :class:`Clamp`,
``FREE``: :mod:`flexlearn.physics.cosserat.state` (re-exported here).

Model (seed 001, eqs. (1), (5)–(7)). The rod of length L is cut into N elements of rest length
``l_i = L/N``; node a ∈ {0 … N} carries a rotation ``R_a`` (body → world; the body z-axis ``E3`` is the
rest tangent) and a position ``p_a``. Lumped (half of each adjacent element) node mass
``m_a = ρ A (l_{a-1} + l_a)/2`` and rotational inertia ``J_a = ρ diag(I1, I2, I1 + I2) (l_{a-1} + l_a)/2``
(plus point masses and magnets, Remark 1). Strains of element i (default ``strain='midpoint'``):

    Γ_i = ½ (R_i + R_{i+1})ᵀ (p_{i+1} − p_i)/l_i − E3                  (shear/extension, mid frame)
    ψ_i = 2 cay⁻¹(R_iᵀ R_{i+1}),   κ_i = ψ_i / l_i                     (bending/torsion)

    V = Σ_i  l_i/2 Γ_iᵀ C1 Γ_i + l_i/2 κ_iᵀ C2 κ_i  (+ gravity, + magnets)

with ``C1 = diag(k GA, k GA, EA)``, ``C2 = diag(E I1, E I2, G J_t)``. The Cayley coordinates
``ψ = 2 tan(θ/2) n`` agree with the exponential coordinates ``θ n`` to O(θ³) per element, as in the seed.

The seed's eq. (6) evaluates the shear strain at both end nodes, ``Γ_{i,a} = R_aᵀ e_i/l_i − E3`` and
``V_s = l_i/4 Σ_a Γ_{i,a}ᵀ C1 Γ_{i,a}`` (``strain='nodes'``). That form *locks*: in pure bending the chord
e_i is tilted by ±κl/2 against both node frames, so each element stores ``GA l³κ²/8`` of spurious shear
energy and the bending stiffness grows by ``(G/E)(l/r)²`` (×3.4 at 20 elements of an L/r = 50 rod,
measured frequency ratio 1.84). The mid-frame average ``½(R_i + R_{i+1}) = R_i (I − f^)⁻¹`` (f the Cayley
coordinate of R_iᵀR_{i+1}) is tangent to the chord in pure bending, so no shear is stored; it is a smooth,
rotation-invariant potential, so the scheme stays variational and momentum-preserving.

Internal forces/torques (derived from V, checked against autograd in the tests):

    f: element i pushes node i by  ½ (R_i + R_{i+1}) C1Γ_i  and node i+1 by the opposite;
    τ_i   += ½ (R_iᵀ e_i) × C1Γ_i + (I + f^ + f fᵀ) m_i,
    τ_{i+1} += ½ (R_{i+1}ᵀ e_i) × C1Γ_i − (I − f^ + f fᵀ) m_i,     f = cay⁻¹(R_iᵀR_{i+1}), m_i = C2 κ_i,

(``2 so3_cayley_jacobian_inv(±f)`` in :mod:`flexlearn.lie`).

Seed 001 discrepancies in the model (also in the package docstring; those of the time discretisation,
eqs. (10)–(16), are in :mod:`flexlearn.physics.cosserat.integrator`):
  * eq. (7): the seed's ``Cay⁻¹(R) = 2 (R − I)(R + I)⁻¹`` is the inverse of ``cay(ψ/2)``; we use
    ``ψ = 2 cay⁻¹(Q)`` with ``cay`` of :mod:`flexlearn.lie` (``(I + f^)(I − f^)⁻¹``), the same map.
  * eq. (6) omits the bending term ``l/2 κᵀ C2 κ`` although eqs. (10)–(12) contain its derivative.
  * the sums of eq. (7)ff run over ``i = 0 … N+1`` (N+2 nodes) for N elements; nodes are 0 … N.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.lie import so3_exp
from flexlearn.physics.cosserat import integrator as _integrator
from flexlearn.physics.cosserat.context import _Ctx
from flexlearn.physics.cosserat.errors import IntegrationError  # noqa: F401  (re-export)
from flexlearn.physics.cosserat.newton import _cayley_newton, _cayley_newton_fixed, _solve3  # noqa: F401  (re-export)
from flexlearn.physics.cosserat.strains import strains
from flexlearn.physics.cosserat.state import _E3, FREE, Clamp, Number, RodState, Trajectory  # noqa: F401  (re-export)


def _param(value: Number, name: str, positive: bool = True, upper: Optional[float] = None,
           lower: Optional[float] = None) -> Tensor:
    t = torch.as_tensor(value, dtype=torch.float64)
    if not isinstance(value, Tensor):
        t = t.clone()
    check(t.dim() <= 1, name, tuple(t.shape), "expected a number or a 1-D tensor (one value per rod)")
    flat = t.reshape(-1)
    for i, v in enumerate(flat.tolist()):
        where = name if t.dim() == 0 else f"{name}[{i}]"
        check(math.isfinite(v), where, v, "must be finite")
        if positive:
            check(v > 0, where, v, "must be > 0")
        if upper is not None:
            check(v <= upper, where, v, f"must be <= {upper}")
        if lower is not None:
            check(v > lower, where, v, f"must be > {lower}")
    return t


class CosseratRod(torch.nn.Module):
    """A straight, uniform Cosserat rod of N elements, batched over B parameter variants.

    Physical parameters are float64 buffers of shape () or (B,) (turn any into a ``Parameter`` to identify
    it): ``length`` [m], ``density`` ρ [kg/m³], ``youngs_modulus`` E [Pa], ``shear_modulus`` G [Pa],
    ``area`` A [m²], ``second_moments`` (…, 2) I1, I2 [m⁴], ``torsion_constant`` J_t [m⁴],
    ``shear_coefficient`` k (Timoshenko, 1 as in the seed), and ``point_mass`` (…, N+1) [kg],
    ``point_inertia`` (…, N+1, 3) [kg m²] for masses at nodes (seed 001, Remark 1).

    Use :meth:`circular` / :meth:`rectangular` to compute A, I, J_t from the geometry (SI units).
    """

    # buffers (see above; ``second_moments`` are stored as ``second_moment_1``, ``second_moment_2``)
    length: Tensor
    density: Tensor
    youngs_modulus: Tensor
    shear_modulus: Tensor
    area: Tensor
    second_moment_1: Tensor
    second_moment_2: Tensor
    torsion_constant: Tensor
    shear_coefficient: Tensor
    point_mass: Tensor
    point_inertia: Tensor

    def __init__(self, length: Number, density: Number, youngs_modulus: Number, shear_modulus: Number,
                 area: Number, second_moments: Tuple[Number, Number], torsion_constant: Number,
                 n_elements: int, shear_coefficient: Number = 1.0, strain: str = "midpoint",
                 rotary_inertia: str = "section"):
        super().__init__()
        check(strain in ("midpoint", "nodes"), "strain", strain, "must be 'midpoint' or 'nodes'")
        check(rotary_inertia in ("section", "segment"), "rotary_inertia", rotary_inertia,
              "must be 'section' or 'segment'")
        self.strain = strain
        self.rotary_inertia = rotary_inertia
        check(isinstance(n_elements, int) and n_elements >= 1, "n_elements", n_elements, "must be an integer >= 1")
        self.n_elements = int(n_elements)
        params = dict(length=_param(length, "length"), density=_param(density, "density"),
                      youngs_modulus=_param(youngs_modulus, "youngs_modulus"),
                      shear_modulus=_param(shear_modulus, "shear_modulus"), area=_param(area, "area"),
                      second_moment_1=_param(second_moments[0], "second_moments[0]"),
                      second_moment_2=_param(second_moments[1], "second_moments[1]"),
                      torsion_constant=_param(torsion_constant, "torsion_constant"),
                      shear_coefficient=_param(shear_coefficient, "shear_coefficient"))
        sizes = {k: v.numel() for k, v in params.items() if v.dim() == 1}
        bs = set(sizes.values())
        check(len(bs) <= 1, "batch", sizes, "all batched parameters must have the same length B")
        self.batched = len(bs) == 1
        self._B = bs.pop() if bs else 1
        for k, v in params.items():
            self.register_buffer(k, v)
        n = self.n_elements + 1
        self.register_buffer("point_mass", torch.zeros(self._B, n, dtype=torch.float64))
        self.register_buffer("point_inertia", torch.zeros(self._B, n, 3, dtype=torch.float64))

    # ---------------------------------------------------------------- constructors
    @classmethod
    def circular(cls, length: Number, radius: Number, density: Number, youngs_modulus: Number,
                 poisson_ratio: Number, n_elements: int, shear_coefficient: Number = 1.0,
                 strain: str = "midpoint", rotary_inertia: str = "section") -> "CosseratRod":
        """Solid circular cross-section: A = π r², I1 = I2 = π r⁴/4, J_t = π r⁴/2, G = E / (2 (1 + ν))
        (seed 001, Table 2)."""
        r = _param(radius, "radius")
        nu = _param(poisson_ratio, "poisson_ratio", positive=False, upper=0.5, lower=-1.0)
        e = _param(youngs_modulus, "youngs_modulus")
        i = math.pi * r ** 4 / 4.0
        return cls(length, density, e, e / (2.0 * (1.0 + nu)), math.pi * r ** 2, (i, i), 2.0 * i, n_elements,
                   shear_coefficient, strain, rotary_inertia)

    @classmethod
    def rectangular(cls, length: Number, width: Number, height: Number, density: Number, youngs_modulus: Number,
                    poisson_ratio: Number, n_elements: int, shear_coefficient: Number = 1.0,
                    torsion: str = "saint_venant", strain: str = "midpoint",
                    rotary_inertia: str = "section") -> "CosseratRod":
        """Solid rectangle, ``width`` along body x, ``height`` along body y: A = w h, I1 = w h³/12 (about x),
        I2 = h w³/12. ``torsion='saint_venant'`` uses J_t = β a b³ (a ≥ b, series of Timoshenko & Goodier;
        0.1406 a⁴ for a square); ``'polar'`` uses I1 + I2 as the seed does for its square rod (Table 7:
        C2[0] = G (I1 + I2)), which overestimates the torsional stiffness of a square by 19 %."""
        check(torsion in ("saint_venant", "polar"), "torsion", torsion, "must be 'saint_venant' or 'polar'")
        w = _param(width, "width")
        h = _param(height, "height")
        nu = _param(poisson_ratio, "poisson_ratio", positive=False, upper=0.5, lower=-1.0)
        e = _param(youngs_modulus, "youngs_modulus")
        i1 = w * h ** 3 / 12.0
        i2 = h * w ** 3 / 12.0
        if torsion == "polar":
            jt = i1 + i2
        else:
            a = torch.maximum(w, h)
            b = torch.minimum(w, h)
            ratio = b / a
            k = 1.0 / 3.0 - 0.21 * ratio * (1.0 - ratio ** 4 / 12.0)
            jt = k * a * b ** 3
        return cls(length, density, e, e / (2.0 * (1.0 + nu)), w * h, (i1, i2), jt, n_elements, shear_coefficient,
                   strain, rotary_inertia)

    def add_point_mass(self, node: int, mass: float, inertia: Sequence[float] = (0.0, 0.0, 0.0)) -> "CosseratRod":
        """Add a point mass [kg] (and principal inertia [kg m²]) at ``node`` (−1: tip); returns self."""
        check(math.isfinite(mass) and mass >= 0, "point_mass", mass, "must be finite and >= 0 [kg]")
        node = node % self.n_nodes
        self.point_mass[:, node] += mass
        self.point_inertia[:, node] += torch.as_tensor(inertia).to(self.point_inertia)
        return self

    # ---------------------------------------------------------------- derived quantities
    @property
    def n_nodes(self) -> int:
        return self.n_elements + 1

    @property
    def batch_size(self) -> int:
        return self._B

    def _b(self, t: Tensor) -> Tensor:
        return t.reshape(-1).expand(self._B) if t.dim() == 0 else t

    def rest_lengths(self) -> Tensor:
        """(B, N) element rest lengths l_i = L/N [m]."""
        return (self._b(self.length) / self.n_elements).unsqueeze(-1).expand(self._B, self.n_elements)

    def lumped_lengths(self) -> Tensor:
        """(B, N+1) length represented by each node: l/2 at the ends, l inside."""
        l = self.rest_lengths()
        z = torch.zeros_like(l[:, :1])
        return 0.5 * (torch.cat([z, l], -1) + torch.cat([l, z], -1))

    def mass_per_length(self) -> Tensor:
        """(B,) M = ρ A [kg/m] (seed 001, Table 2)."""
        return self._b(self.density * self.area)

    def inertia_per_length(self) -> Tensor:
        """(B, 3) ρ diag(I1, I2, I1 + I2) [kg m] (seed 001, Table 2: J = −ρ ∫ (x E1 + y E2)^² dA).

        With ``rotary_inertia='segment'`` the bending inertias also get ``ρ A l²/12``, the inertia of the
        element's own length rotating rigidly about its node. This only lowers the spurious
        shear–rotation frequency ``2 √(kGA/ρI)`` (which for thin rods, l ≫ r, sets the stable step) to
        the order of the axial-wave frequency ``2c/l``; it changes bending frequencies by O((βₙ l)²/24)
        (< 0.1 % for mode 1 at 20 elements) and vanishes as l → 0. Opt-in; not in the seed."""
        i1, i2 = self._b(self.second_moment_1), self._b(self.second_moment_2)
        rho = self._b(self.density)
        extra: Tensor | float = 0.0
        if self.rotary_inertia == "segment":
            l = self._b(self.length) / self.n_elements
            extra = rho * self._b(self.area) * l ** 2 / 12.0
        return torch.stack([rho * i1 + extra, rho * i2 + extra, rho * (i1 + i2)], -1)

    def stiffness(self) -> Tuple[Tensor, Tensor]:
        """(B, N, 3) C1 = (k G A, k G A, E A) [N] and C2 = (E I1, E I2, G J_t) [N m²] per element."""
        e, g = self._b(self.youngs_modulus), self._b(self.shear_modulus)
        a, k = self._b(self.area), self._b(self.shear_coefficient)
        c1 = torch.stack([k * g * a, k * g * a, e * a], -1)
        c2 = torch.stack([e * self._b(self.second_moment_1), e * self._b(self.second_moment_2),
                          g * self._b(self.torsion_constant)], -1)
        N = self.n_elements
        return c1.unsqueeze(1).expand(self._B, N, 3), c2.unsqueeze(1).expand(self._B, N, 3)

    def stable_dt(self, safety: float = 0.65) -> Tensor:
        """(B,) estimate of the largest stable step [s] of the explicit part: ``safety · 2/ω_max`` with
        ``ω_max² = ω_axial² + ω_rot²``, ``ω_axial = 2 √(max(E, kG)/ρ) / l`` (axial/shear waves) and the
        shear–rotation mode of one node ``ω_rot = √(kGA / (c ρ I))`` (c = 2 for the mid-frame strain,
        1 for the seed's node strain). The default safety 0.65 keeps the estimate below the largest
        stable step measured by bisection (0.96× of 2/ω_max for the dynamic cantilever of the benchmark,
        0.70× for the 1 mm thin rod). A guide only; instability is detected (:class:`IntegrationError`)."""
        l = self._b(self.length) / self.n_elements
        rho, e, g = self._b(self.density), self._b(self.youngs_modulus), self._b(self.shear_modulus)
        k = self._b(self.shear_coefficient)
        i = torch.minimum(self._b(self.second_moment_1), self._b(self.second_moment_2))
        if self.rotary_inertia == "segment":
            i = i + self._b(self.area) * l ** 2 / 12.0
        c = 2.0 if self.strain == "midpoint" else 1.0
        w_axial = 2.0 * torch.sqrt(torch.maximum(e, k * g) / rho) / l
        w_rot = torch.sqrt(k * g * self._b(self.area) / (c * rho * i))
        w = torch.sqrt(w_axial ** 2 + w_rot ** 2)
        return safety * 2.0 / w

    def accurate_dt(self, rtol: float = 1e-3, n_modes: int = 4, base: Optional[Clamp] = None,
                    implicit_beta: float = 0.25) -> float:
        """The step [s] of the implicit scheme at which the ``n_modes`` lowest modes of the clamped rod
        (:meth:`linear_frequencies`, bending pairs counted twice) have relative frequency error ≤ ``rtol``
        (:func:`flexlearn.physics.cosserat.implicit.accuracy_dt`; the phase error after time t is about
        ``rtol · ω t``). Step-size guidance of the implicit scheme; the LGVI is bounded by :meth:`stable_dt`."""
        from flexlearn.physics.cosserat.implicit import accuracy_dt
        check(isinstance(n_modes, int) and 1 <= n_modes <= 6 * self.n_elements, "n_modes", n_modes,
              f"must be an integer in 1 … {6 * self.n_elements}")
        omega = float(self.linear_frequencies(base)[n_modes - 1])
        return accuracy_dt(omega, rtol, implicit_beta)

    # ---------------------------------------------------------------- states
    def straight_state(self, base: Optional[Clamp] = None, dtype=torch.float64) -> RodState:
        """The rest configuration: nodes on the base's body z-axis, every frame equal to the base frame."""
        base = base if isinstance(base, Clamp) else Clamp()
        dev = self.length.device
        r0, p0 = base.pose(0.0, dtype, dev)
        s = torch.cat([torch.zeros(self._B, 1, dtype=dtype, device=dev), torch.cumsum(self.rest_lengths().to(dtype), -1)], -1)
        axis = r0[..., :, 2]
        pos = p0.unsqueeze(-2) + s.unsqueeze(-1) * axis.unsqueeze(-2) if axis.dim() == 1 else \
            p0.unsqueeze(-2) + s.unsqueeze(-1) * axis.unsqueeze(-2)
        rot = r0.expand(self._B, self.n_nodes, 3, 3).clone() if r0.dim() == 2 else \
            r0.unsqueeze(-3).expand(self._B, self.n_nodes, 3, 3).clone()
        z = torch.zeros(self._B, self.n_nodes, 3, dtype=dtype, device=dev)
        return RodState(pos.expand(self._B, self.n_nodes, 3).clone(), rot, z, z.clone())

    def arc_state(self, tip_angle: float, bend_axis: Sequence[float] = (1.0, 0.0, 0.0),
                  base: Optional[Clamp] = None, dtype=torch.float64) -> RodState:
        """A circular arc of constant curvature about the body axis ``bend_axis`` (base frame) whose tip
        is turned by ``tip_angle`` [rad], at rest: an initial deflection (seed 001, Sec. 4)."""
        base = base if isinstance(base, Clamp) else Clamp()
        dev = self.length.device
        r0, p0 = base.pose(0.0, dtype, dev)
        ax = torch.as_tensor(bend_axis).to(dtype=dtype, device=dev)
        ax = ax / ax.norm()
        s = torch.cat([torch.zeros(self._B, 1, dtype=dtype, device=dev), torch.cumsum(self.rest_lengths().to(dtype), -1)], -1)
        L = s[:, -1:]
        theta = tip_angle * s / L                                      # (B, n)
        rots = so3_exp(theta.unsqueeze(-1) * ax)                      # body-frame rotations
        # position: integrate the tangent R(s) e3 exactly along the arc (midpoint of closed form)
        k = tip_angle / L                                              # curvature (B, 1)
        e3 = torch.tensor(_E3, dtype=dtype, device=dev)
        if abs(tip_angle) < 1e-12:
            local = s.unsqueeze(-1) * e3
        else:
            # ∫0^s exp(k σ a^) e3 dσ = s e3 + (1 − cos ks)/k (a × e3) + (s − sin ks / k) (a × (a × e3))
            ks = k * s
            axe = torch.linalg.cross(ax, e3)
            aaxe = torch.linalg.cross(ax, axe)
            local = (s.unsqueeze(-1) * e3 + ((1 - torch.cos(ks)) / k).unsqueeze(-1) * axe
                     + (s - torch.sin(ks) / k).unsqueeze(-1) * aaxe)
        pos = p0 + (r0 @ local.unsqueeze(-1)).squeeze(-1)
        rot = r0 @ rots
        z = torch.zeros(self._B, self.n_nodes, 3, dtype=dtype, device=dev)
        return RodState(pos, rot, z, z.clone())

    # ---------------------------------------------------------------- mechanics
    @staticmethod
    def _internal(ctx: _Ctx, R: Tensor, p: Tensor, dn: Optional[Tuple[Tensor, Tensor]] = None,
                  dm: Optional[Tensor] = None):
        """Internal node forces (world) and torques (body) = −∂V/∂(p, η) (module docstring), with the strains
        of :func:`~flexlearn.physics.cosserat.strains.strains`: ``(force (B, N+1, 3) [N], torque (B, N+1, 3)
        [N m], Γ_L, Γ_R (B, N, 3), f = cay⁻¹(Q) (B, N, 3), Q (B, N, 3, 3))``. ``dn`` (stress, per side) and
        ``dm`` (moment) are added to C1 Γ and C2 κ (damping)."""
        s = strains(R, p, ctx.l, ctx.e3, ctx.strain == "midpoint")
        xL, xR, gL, gR, fc, Q = s
        l = ctx.l.unsqueeze(-1)
        nL = ctx.C1 * gL
        if ctx.strain == "midpoint":
            if dn is not None:
                nL = nL + dn[0]
            nR = nL
        else:
            nR = ctx.C1 * gR
            if dn is not None:
                nL = nL + dn[0]
                nR = nR + dn[1]
        fe = 0.5 * ((R[:, :-1] @ nL.unsqueeze(-1)) + (R[:, 1:] @ nR.unsqueeze(-1))).squeeze(-1)
        mb = ctx.C2 * (2.0 * fc) / l                                    # C2 κ, ψ = 2 fc
        if dm is not None:
            mb = mb + dm
        fxm = torch.linalg.cross(fc, mb)
        fdm = (fc * mb).sum(-1, keepdim=True) * fc
        ti = 0.5 * torch.linalg.cross(xL, nL) + mb + fxm + fdm
        tj = 0.5 * torch.linalg.cross(xR, nR) - (mb - fxm + fdm)
        zero = torch.zeros_like(fe[:, :1])
        force = torch.cat([fe, zero], 1) - torch.cat([zero, fe], 1)
        torque = torch.cat([ti, zero], 1) + torch.cat([zero, tj], 1)
        return force, torque, gL, gR, fc, Q

    def potential_energy(self, R: Tensor, p: Tensor, ctx: Optional[_Ctx] = None) -> Tensor:
        """(B,) elastic energy V [J] (seed 001, eq. (6) plus the bending term; strains of
        :func:`~flexlearn.physics.cosserat.strains.strains`)."""
        ctx = ctx or _Ctx(self, (), p.dtype)
        s = strains(R, p, ctx.l, ctx.e3, ctx.strain == "midpoint")
        l = ctx.l.unsqueeze(-1)
        if ctx.strain == "midpoint":
            vs = 0.5 * l * s.gL * ctx.C1 * s.gL
        else:
            vs = 0.25 * l * (s.gL * ctx.C1 * s.gL + s.gR * ctx.C1 * s.gR)
        psi = 2.0 * s.f
        vb = 0.5 * psi * ctx.C2 * psi / l
        return (vs + vb).sum((-1, -2))

    def internal_forces(self, R: Tensor, p: Tensor) -> Tuple[Tensor, Tensor]:
        """World node forces (B, N+1, 3) [N] and body node torques (B, N+1, 3) [N m] from the elastic
        energy (free rod; no clamp)."""
        f, t, *_ = self._internal(_Ctx(self, (), p.dtype), R, p)
        return f, t

    def linear_frequencies(self, base: Optional[Clamp] = None, rod_index: int = 0) -> Tensor:
        """Natural angular frequencies [rad/s] (ascending) of the spatially discrete model linearised about
        the straight rest state, clamped at ``base``: ``K φ = ω² M φ`` with K the Hessian of V with respect
        to (δp, η) of the free nodes (autograd) and M = diag(m_a, J_a). The time step adds only the
        LGVI's O((hω)²) frequency shift. Used for the frequency-shaping study (seed 001, Sec. 5)."""
        base = base if isinstance(base, Clamp) else Clamp()
        st = self.straight_state(base)
        R0 = st.rotations[rod_index:rod_index + 1]
        p0 = st.positions[rod_index:rod_index + 1]
        ctx = _Ctx(self, (), torch.float64)
        n = self.n_nodes

        def energy(x):
            x = x.reshape(1, n - 1, 6)
            z = torch.zeros(1, 1, 6, dtype=x.dtype)
            x = torch.cat([z, x], 1)
            R = R0 @ so3_exp(x[..., :3])
            return self.potential_energy(R, p0 + x[..., 3:], ctx)[rod_index if ctx.B == 1 else rod_index]

        x0 = torch.zeros(6 * (n - 1), dtype=torch.float64)
        K = torch.autograd.functional.hessian(energy, x0)
        mdiag = torch.cat([ctx.inertia[rod_index, 1:], ctx.mass[rod_index, 1:].unsqueeze(-1).expand(n - 1, 3)], -1)
        w = mdiag.reshape(-1).rsqrt()
        A = w.unsqueeze(-1) * K * w.unsqueeze(0)
        ev = torch.linalg.eigvalsh(0.5 * (A + A.T))
        return ev.clamp_min(0.0).sqrt()

    def context(self, loads: Sequence[Any] = (), dtype=torch.float64) -> _Ctx:
        return _Ctx(self, loads, dtype)

    def kinetic_energy(self, state: RodState, ctx: Optional[_Ctx] = None) -> Tensor:
        ctx = ctx or _Ctx(self, (), state.positions.dtype)
        t = 0.5 * (ctx.mass * (state.velocities ** 2).sum(-1)).sum(-1)
        r = 0.5 * (ctx.inertia * state.angular_velocities ** 2).sum((-1, -2))
        return t + r

    def momenta(self, state: RodState, ctx: Optional[_Ctx] = None) -> Tuple[Tensor, Tensor]:
        """(B, 3) total linear momentum Σ m v and angular momentum about the origin Σ m p×v + R J ω."""
        ctx = ctx or _Ctx(self, (), state.positions.dtype)
        m = ctx.mass.unsqueeze(-1)
        lin = (m * state.velocities).sum(-2)
        spin = (state.rotations @ (ctx.inertia * state.angular_velocities).unsqueeze(-1)).squeeze(-1)
        ang = (m * torch.linalg.cross(state.positions, state.velocities)).sum(-2) + spin.sum(-2)
        return lin, ang

    # ---------------------------------------------------------------- simulation
    def simulate(self, duration: float, dt: float, loads: Sequence[Any] = (), damping: Optional[Any] = None,
                 initial: Optional[RodState] = None, base: Union[Clamp, str, None] = None,
                 record_every: int = 1, record_energy: bool = False, strain_limit: float = 0.5,
                 newton_tol: float = 1e-12, newton_iters: int = 20, callback: Optional[Callable[[int, RodState], None]] = None,
                 observer: Optional[Any] = None, compile: bool = False, newton_fixed_iters: int = 3,
                 backend: str = "auto", scheme: str = "lgvi", implicit_beta: float = 0.25,
                 implicit_dissipation: float = 0.0) -> Trajectory:
        """Integrate the rod with the LGVI (or its implicit variant) for ``duration`` seconds with step ``dt``
        (the loop: :class:`flexlearn.physics.cosserat.integrator.Stepper`).

        Args:
            loads: :class:`~flexlearn.physics.cosserat.loads.Gravity`, magnets, point forces, …
            damping: a :class:`~flexlearn.physics.cosserat.damping.Damping` (None: conservative).
            initial: the :class:`RodState` at t = 0 (default: at rest, straight along the base axis).
            base: a :class:`Clamp` (default: clamped at the origin, rod along world z) or ``"free"``.
            record_every: keep every k-th step (the first and the last are always kept).
            record_energy: also record the total mechanical energy (for conservative loads).
            strain_limit: a shear/extension strain |Γ| above this (or a non-finite value, or an element
                bent by ≥ 180°) raises :class:`IntegrationError` — the sign of a step beyond stability.
            newton_tol: relative residual the Cayley–Newton solve must reach at every node.
            callback: ``callback(k, state)`` after every step.
            observer: a :class:`~flexlearn.physics.cosserat.damping.DampingEstimator` (seed 001, Sec. 3.2)
                whose damping estimate K̂ drives the model while it is being estimated.
            compile: ``torch.compile`` the step (one fused kernel; ~6× faster per step, tens of seconds
                to compile once per shape): the Newton solve then runs ``newton_fixed_iters`` iterations
                and its residual is still checked.
            backend: ``'auto'`` runs the fused numba kernel (:mod:`~flexlearn.physics.cosserat.compiled.lgvi`, the
                same discrete equations, ~100× faster per step) when numba is installed and the run needs
                no gradient, only gravity, constant point forces and magnets in one spatially uniform field,
                damping without ``beta``, no observer, callback, energy record or base motion; else the
                tensor path. ``'torch'`` forces
                the tensor path, ``'numba'`` the kernel (a ConfigError when it cannot run).
            scheme: ``'lgvi'`` (default; explicit potential, ``dt`` below :meth:`stable_dt`) or ``'implicit'``
                (:mod:`~flexlearn.physics.cosserat.implicit`: forces filtered by ``M (M + β h² K)⁻¹``,
                unconditionally stable for a linear rod, so ``dt`` is chosen by accuracy: :meth:`accurate_dt`).
                Both run on either backend.
            implicit_beta: β ≥ ¼ of the implicit scheme (¼: Newmark's average acceleration, the smallest
                frequency error −(hω)²/12, energy conserved for a linear rod); 0.3 leaves a stability margin for
                the explicit terms (magnets, large deflection): :data:`~flexlearn.physics.cosserat.implicit.DEFAULT_BETA`.
            implicit_dissipation: ζ ∈ [0, 1] of the implicit scheme's numerical damping (eq. (4) of
                :mod:`~flexlearn.physics.cosserat.implicit`: damping ratio ζhω/2 per mode; 0, the default,
                conserves the energy of a linear rod; ≈ 0.01–0.05 for large deflections at large steps).

        Returns a :class:`Trajectory`; on failure raises :class:`IntegrationError` carrying the state before
        the failing step and the trajectory so far. Differentiable with respect to every buffer and load
        parameter (autograd through the unrolled steps and Newton iterations).
        """
        return _integrator.simulate(self, duration, dt, loads=loads, damping=damping, initial=initial, base=base,
                                    record_every=record_every, record_energy=record_energy,
                                    strain_limit=strain_limit, newton_tol=newton_tol, newton_iters=newton_iters,
                                    callback=callback, observer=observer, compile=compile,
                                    newton_fixed_iters=newton_fixed_iters, backend=backend, scheme=scheme,
                                    implicit_beta=implicit_beta, implicit_dissipation=implicit_dissipation)
