"""The Cosserat rod model (seed 001, Secs. 2–3.1): construction from geometry and materials, parameters,
rest and initial states, elastic energy, internal forces and torques, linearised natural frequencies.
Materials and cross-sections: :mod:`flexlearn.physics.cosserat.properties`. Time stepping behind
:meth:`CosseratRod.simulate` (the Lie group variational integrator, LGVI, its discrete equations and their
derivation): :mod:`flexlearn.physics.cosserat.integrator`, its options :mod:`flexlearn.physics.cosserat.simulation`;
the Cayley–Newton rotation solve: :mod:`flexlearn.physics.cosserat.newton`; :class:`RodState`, :class:`Trajectory`,
:class:`Clamp`, ``FREE``: :mod:`flexlearn.physics.cosserat.state`.

Model (seed 001, eqs. (1), (5)–(7)). The rod of length L is cut into N elements of rest length
``l_i = L/N``; node a ∈ {0 … N} carries a rotation ``R_a`` (body → world; the body z-axis ``E3`` is the
rest tangent) and a position ``p_a``. Lumped (half of each adjacent element) node mass
``m_a = ρ A (l_{a-1} + l_a)/2`` and rotational inertia ``J_a = ρ diag(I1, I2, I1 + I2) (l_{a-1} + l_a)/2``
(plus point masses and magnets, Remark 1). Strains of element i (default ``strain='midpoint'``):

    Γ_i = ½ (R_i + R_{i+1})ᵀ (p_{i+1} − p_i)/l_i − E3                  (shear/extension, mid frame)
    ψ_i = 2 cay⁻¹(R_iᵀ R_{i+1}),   κ_i = ψ_i / l_i                     (bending/torsion)

    V = Σ_i  l_i/2 Γ_iᵀ C1 Γ_i + l_i/2 κ_iᵀ C2 κ_i  (+ gravity, + magnets)

with ``C1 = diag(k GA, k GA, EA)``, ``C2 = diag(E I1, E I2, G J_t)``. The Cayley coordinates
``ψ = 2 tan(θ/2) n`` agree with the exponential coordinates ``θ n`` to O(θ³) per element, as in the seed;
``curvature='log'`` takes ``ψ = θ n`` itself (exact at any rotation per element; :mod:`.strains`).

The seed's eq. (6) evaluates the shear strain at both end nodes, ``Γ_{i,a} = R_aᵀ e_i/l_i − E3`` and
``V_s = l_i/4 Σ_a Γ_{i,a}ᵀ C1 Γ_{i,a}`` (``strain='nodes'``). That form *locks*: in pure bending the chord
e_i is tilted by ±κl/2 against both node frames, so each element stores ``GA l³κ²/8`` of spurious shear
energy and the bending stiffness grows by ``(G/E)(l/r)²`` (×3.4 at 20 elements of an L/r = 50 rod,
measured frequency ratio 1.84). The mid-frame average ``½(R_i + R_{i+1}) = R_i (I − f^)⁻¹`` (f the Cayley
coordinate of R_iᵀR_{i+1}) is tangent to the chord in pure bending, so no shear is stored; it is a smooth,
rotation-invariant potential, so the scheme stays variational and momentum-preserving. It sees the chord shortened
by cos(θ/2) for a bend θ per element; ``strain='geodesic'`` corrects that (:mod:`.strains`).

Internal forces and torques (−∂V/∂(p, η), derived in :mod:`flexlearn.physics.cosserat.elastic`, checked against
autograd in the tests) and the energy V are evaluated there, from the rod's
:class:`~flexlearn.physics.cosserat.context.RodContext` (:meth:`CosseratRod.context`).

Seed 001's discrepancies in the model (eqs. (6)–(7)) are listed in the package docstring, those of the time
discretisation (eqs. (10)–(16)) in :mod:`flexlearn.physics.cosserat.integrator`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat import elastic, integrator, rest_states
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.damping import DampingModel, RodObserver
from flexlearn.physics.cosserat.implicit import accuracy_dt
from flexlearn.physics.cosserat.loads import RodLoad
from flexlearn.physics.cosserat.modes import clamped_frequencies
from flexlearn.physics.cosserat.properties import CrossSection, Material, checked_parameter
from flexlearn.physics.cosserat.simulation import RodSetup, SimulationOptions
from flexlearn.physics.cosserat.state import Clamp, Number, RodState, Trajectory
from flexlearn.physics.cosserat.supports import Supports

STRAIN_MODELS = ("midpoint", "geodesic", "nodes")
ROTARY_INERTIA_MODELS = ("section", "segment")
CURVATURE_MODELS = ("cayley", "log")


class CosseratRod(torch.nn.Module):
    """A straight, uniform Cosserat rod of N elements, batched over B parameter variants.

    Physical parameters are float64 buffers of shape () or (B,) (turn any into a ``Parameter`` to identify
    it): ``length`` [m], ``density`` ρ [kg/m³], ``youngs_modulus`` E [Pa], ``shear_modulus`` G [Pa],
    ``area`` A [m²], ``second_moment_1``, ``second_moment_2`` I1, I2 [m⁴], ``torsion_constant`` J_t [m⁴],
    ``shear_coefficient`` k (Timoshenko; by default the section's own, 27/28 for a solid circle at ν = ½, where the
    seed uses 1: :mod:`~flexlearn.physics.cosserat.properties`), and ``point_mass`` (…, N+1) [kg],
    ``point_inertia`` (…, N+1, 3) [kg m²] for masses at nodes (seed 001, Remark 1).

    Use :meth:`circular` / :meth:`rectangular` to compute A, I, J_t from the geometry (SI units).

    Args:
        length: L [m], a number or (B,).
        section: the :class:`~flexlearn.physics.cosserat.properties.CrossSection` (its ``shear_coefficient``, or
            the shape's own for the material's ν: ``CrossSection.shear_coefficient_for``).
        material: the :class:`~flexlearn.physics.cosserat.properties.Material`: (E, ν), G = E / (2 (1 + ν)),
            or (E, G).
        n_elements: N ≥ 1.
        strain: ``'midpoint'`` (shear strain at the element mid frame, the default), ``'geodesic'`` (at the
            geodesic mid frame, for tens of degrees per element) or ``'nodes'`` (seed 001, eq. (6), which locks).
        rotary_inertia: ``'section'`` (ρ I, the seed's) or ``'segment'`` (adds the element's own rotary
            inertia, :meth:`inertia_per_length`).
        curvature: ``'cayley'`` (κ = 2 cay⁻¹(Q) / l, seed 001, the default) or ``'log'`` (κ = log(Q)^∨ / l: exact
            at any bend or twist per element, :func:`~flexlearn.physics.cosserat.strains.log_curvature`).

    Raises:
        ConfigError: naming the first bad value (``length``, ``density``, ``youngs_modulus[1]``, …).
    """

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

    def __init__(
        self,
        length: Number,
        section: CrossSection,
        material: Material,
        n_elements: int,
        strain: str = "midpoint",
        rotary_inertia: str = "section",
        curvature: str = "cayley",
    ):
        super().__init__()
        check(strain in STRAIN_MODELS, "strain", strain, "must be 'midpoint', 'geodesic' or 'nodes'")
        check(curvature in CURVATURE_MODELS, "curvature", curvature, "must be 'cayley' or 'log'")
        self.curvature = curvature
        check(
            rotary_inertia in ROTARY_INERTIA_MODELS, "rotary_inertia", rotary_inertia, "must be 'section' or 'segment'"
        )
        self.strain = strain
        self.rotary_inertia = rotary_inertia
        check(isinstance(n_elements, int) and n_elements >= 1, "n_elements", n_elements, "must be an integer >= 1")
        self.n_elements = int(n_elements)
        density, youngs_modulus, shear_modulus = material.moduli()
        params = dict(
            length=checked_parameter(length, "length"),
            density=density,
            youngs_modulus=youngs_modulus,
            shear_modulus=checked_parameter(shear_modulus, "shear_modulus"),
            area=checked_parameter(section.area, "area"),
            second_moment_1=checked_parameter(section.second_moment_1, "second_moment_1"),
            second_moment_2=checked_parameter(section.second_moment_2, "second_moment_2"),
            torsion_constant=checked_parameter(section.torsion_constant, "torsion_constant"),
            shear_coefficient=checked_parameter(section.shear_coefficient_for(material.poisson()), "shear_coefficient"),
        )
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
        self._accurate_dt: dict = {}  # accurate_dt by (rod values, arguments)

    # ---------------------------------------------------------------- constructors
    @classmethod
    def circular(
        cls,
        length: Number,
        radius: Number,
        material: Material,
        n_elements: int,
        strain: str = "midpoint",
        rotary_inertia: str = "section",
        curvature: str = "cayley",
    ) -> CosseratRod:
        """A rod of solid circular cross-section (:meth:`CrossSection.circular
        <flexlearn.physics.cosserat.properties.CrossSection.circular>`: A = π r², I1 = I2 = π r⁴/4, J_t = π r⁴/2;
        G = E / (2 (1 + ν)), seed 001, Table 2; shear coefficient k = 6 (1 + ν)²/(7 + 12 ν + 4 ν²): for another k, pass
        ``CrossSection.circular(radius, shear_coefficient=k)`` to the constructor).

        Args:
            length: L [m].
            radius: r [m].
            material: density, Young's modulus, Poisson's ratio or shear modulus.
            n_elements: N ≥ 1.
            strain: ``'midpoint'``, ``'geodesic'`` or ``'nodes'`` (class docstring).
            rotary_inertia: ``'section'`` or ``'segment'`` (class docstring).
            curvature: ``'cayley'`` or ``'log'`` (class docstring).

        Returns:
            The rod.
        """
        return cls(length, CrossSection.circular(radius), material, n_elements, strain, rotary_inertia, curvature)

    @classmethod
    def rectangular(
        cls,
        length: Number,
        width: Number,
        height: Number,
        material: Material,
        n_elements: int,
        torsion: str = "saint_venant",
        strain: str = "midpoint",
        rotary_inertia: str = "section",
    ) -> CosseratRod:
        """A rod of solid rectangular cross-section, ``width`` along body x, ``height`` along body y
        (:meth:`CrossSection.rectangular <flexlearn.physics.cosserat.properties.CrossSection.rectangular>`:
        A = w h, I1 = w h³/12 (about x), I2 = h w³/12; shear coefficient k = 10 (1 + ν)/(12 + 11 ν): for another k,
        pass ``CrossSection.rectangular(width, height, torsion, shear_coefficient=k)`` to the constructor).

        Args:
            length: L [m].
            width: w [m].
            height: h [m].
            material: density, Young's modulus, Poisson's ratio or shear modulus.
            n_elements: N ≥ 1.
            torsion: ``'saint_venant'`` uses J_t = β a b³ (a ≥ b, series of Timoshenko & Goodier; 0.1406 a⁴ for
                a square); ``'polar'`` uses I1 + I2 as the seed does for its square rod (Table 7:
                C2[0] = G (I1 + I2)), which overestimates the torsional stiffness of a square by 19 %.
            strain: ``'midpoint'``, ``'geodesic'`` or ``'nodes'`` (class docstring).
            rotary_inertia: ``'section'`` or ``'segment'`` (class docstring; for ``curvature='log'`` pass the
                section to the constructor).

        Returns:
            The rod.
        """
        section = CrossSection.rectangular(width, height, torsion)
        return cls(length, section, material, n_elements, strain, rotary_inertia)

    def add_point_mass(self, node: int, mass: float, inertia: Sequence[float] = (0.0, 0.0, 0.0)) -> CosseratRod:
        """Add a point mass [kg] (and principal inertia [kg m²]) at ``node`` (−1: tip); returns self.

        Args:
            node: Node index (negative counts from the tip).
            mass: Point mass [kg].
            inertia: Principal rotational inertia [kg·m²], shape (3,).

        Returns:
            This rod.

        Raises:
            ConfigError: If ``mass`` is negative or not finite.
        """
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
            extra = rho * self._b(self.area) * l**2 / 12.0
        return torch.stack([rho * i1 + extra, rho * i2 + extra, rho * (i1 + i2)], -1)

    def stiffness(self) -> Tuple[Tensor, Tensor]:
        """(B, N, 3) C1 = (k G A, k G A, E A) [N] and C2 = (E I1, E I2, G J_t) [N m²] per element."""
        e, g = self._b(self.youngs_modulus), self._b(self.shear_modulus)
        a, k = self._b(self.area), self._b(self.shear_coefficient)
        c1 = torch.stack([k * g * a, k * g * a, e * a], -1)
        c2 = torch.stack(
            [e * self._b(self.second_moment_1), e * self._b(self.second_moment_2), g * self._b(self.torsion_constant)],
            -1,
        )
        N = self.n_elements
        return c1.unsqueeze(1).expand(self._B, N, 3), c2.unsqueeze(1).expand(self._B, N, 3)

    def stable_dt(self, safety: float = 0.65) -> Tensor:
        """(B,) estimate of the largest stable step [s] of the explicit part: ``safety · 2/ω_max`` with
        ``ω_max² = ω_axial² + ω_rot²``, ``ω_axial = 2 √(max(E, kG)/ρ) / l`` (axial/shear waves) and the
        shear–rotation mode of one node ``ω_rot = √(kGA / (c ρ I))`` (c = 2 for the mid-frame strains,
        1 for the seed's node strain). The default safety 0.65 keeps the estimate below the largest
        stable step measured by bisection (0.96× of 2/ω_max for the dynamic cantilever of the benchmark,
        0.70× for the 1 mm thin rod). A guide only; instability is detected (:class:`IntegrationError`).

        Args:
            safety: Factor applied to 2/ω_max.
        """
        l = self._b(self.length) / self.n_elements
        rho, e, g = self._b(self.density), self._b(self.youngs_modulus), self._b(self.shear_modulus)
        k = self._b(self.shear_coefficient)
        i = torch.minimum(self._b(self.second_moment_1), self._b(self.second_moment_2))
        if self.rotary_inertia == "segment":
            i = i + self._b(self.area) * l**2 / 12.0
        c = 1.0 if self.strain == "nodes" else 2.0
        w_axial = 2.0 * torch.sqrt(torch.maximum(e, k * g) / rho) / l
        w_rot = torch.sqrt(k * g * self._b(self.area) / (c * rho * i))
        w = torch.sqrt(w_axial**2 + w_rot**2)
        return safety * 2.0 / w

    def accurate_dt(
        self, rtol: float = 1e-3, n_modes: int = 4, base: Optional[Clamp] = None, implicit_beta: float = 0.25
    ) -> float:
        """The step [s] of the implicit scheme at which the ``n_modes`` lowest modes of the clamped rod
        (:meth:`linear_frequencies`, bending pairs counted twice) have relative frequency error ≤ ``rtol``
        (:func:`flexlearn.physics.cosserat.implicit.accuracy_dt`; the phase error after time t is about
        ``rtol · ω t``). Step-size guidance of the implicit scheme; the LGVI is bounded by :meth:`stable_dt`.

        The frequencies come from the closed-form stiffness matrix (:mod:`~flexlearn.physics.cosserat.modes`) and
        the answer is kept per value of the rod's buffers and the arguments, so a repeated call costs a lookup.
        ``base`` does not change it (the modes of a clamped straight rod do not depend on the clamp's pose).

        Args:
            rtol: relative frequency error in (0, 0.1).
            n_modes: how many of the lowest modes must be that accurate (1 … 6N).
            base: the clamp (accepted for symmetry with :meth:`linear_frequencies`).
            implicit_beta: β of the implicit step.

        Returns:
            The step [s] of rod 0 of a batch.

        Raises:
            ConfigError: ``n_modes`` out of range.
            ArgumentError: ``rtol`` out of range.
        """
        check(
            isinstance(n_modes, int) and 1 <= n_modes <= 6 * self.n_elements,
            "n_modes",
            n_modes,
            f"must be an integer in 1 … {6 * self.n_elements}",
        )
        key = (self._values_key(), float(rtol), n_modes, float(implicit_beta))
        cached = self._accurate_dt.get(key)
        if cached is None:
            omega = float(self.linear_frequencies(base)[n_modes - 1])
            cached = accuracy_dt(omega, rtol, implicit_beta)
            if len(self._accurate_dt) >= 64:  # an identification loop changes the rod at every call: keep it small
                self._accurate_dt.pop(next(iter(self._accurate_dt)))
            self._accurate_dt[key] = cached
        return cached

    def _values_key(self) -> tuple:
        """Everything the linear frequencies depend on, as plain numbers (a changed buffer is a new key)."""
        with torch.no_grad():
            values = tuple(tuple(b.detach().reshape(-1).tolist()) for b in self.buffers())
        return (values, self.n_elements, self.strain, self.rotary_inertia, self.curvature)

    # ---------------------------------------------------------------- states
    def straight_state(self, base: Optional[Clamp] = None, dtype=torch.float64) -> RodState:
        """The rest configuration: nodes on the base's body z-axis, every frame equal to the base frame.

        Args:
            base: The clamp; None for a clamp at the origin with the identity frame.
            dtype: dtype of the state's tensors.

        Returns:
            The :class:`RodState`, (B, N+1, …), with zero velocities (:func:`.rest_states.straight_state`).
        """
        return rest_states.straight_state(self, base, dtype)

    def arc_state(
        self,
        tip_angle: Union[float, Tensor],
        bend_axis: Union[Sequence[float], Tensor] = (1.0, 0.0, 0.0),
        base: Optional[Clamp] = None,
        dtype=torch.float64,
    ) -> RodState:
        """A circular arc of constant curvature about the body axis ``bend_axis`` (base frame) whose tip
        is turned by ``tip_angle`` [rad], at rest: an initial deflection (seed 001, Sec. 4).

        Args:
            tip_angle: Tip rotation angle [rad].
            bend_axis: Bending axis in the base frame, shape (3,) (normalised here).
            base: The clamp; None for a clamp at the origin with the identity frame.
            dtype: dtype of the state's tensors.

        Returns:
            The :class:`RodState`, (B, N+1, …), with zero velocities (:func:`.rest_states.arc_state`).
        """
        return rest_states.arc_state(self, tip_angle, bend_axis, base, dtype)

    # ---------------------------------------------------------------- mechanics
    def potential_energy(self, R: Tensor, p: Tensor, ctx: Optional[RodContext] = None) -> Tensor:
        """(B,) elastic energy V [J] (seed 001, eq. (6) plus the bending term;
        :func:`~flexlearn.physics.cosserat.elastic.elastic_energy`) of the configuration R (B, N+1, 3, 3),
        p (B, N+1, 3) [m]; ``ctx`` defaults to :meth:`context` without loads.

        Args:
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            ctx: The rod's context; None for :meth:`context` without loads.

        Returns:
            Elastic energy [J], shape (B,).
        """
        return elastic.elastic_energy(self.context((), p.dtype) if ctx is None else ctx, R, p)

    def internal_forces(self, R: Tensor, p: Tensor) -> Tuple[Tensor, Tensor]:
        """World node forces (B, N+1, 3) [N] and body node torques (B, N+1, 3) [N m] from the elastic
        energy (free rod; no clamp) of the configuration R (B, N+1, 3, 3), p (B, N+1, 3) [m].

        Args:
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).

        Returns:
            Tuple ``(force, torque)``.
        """
        out = elastic.internal_forces(self.context((), p.dtype), R, p)
        return out.force, out.torque

    def linear_frequencies(self, base: Optional[Clamp] = None, rod_index: int = 0) -> Tensor:
        """Natural angular frequencies [rad/s] (ascending) of the spatially discrete model linearised about
        the straight rest state, clamped at node 0: ``K φ = ω² M φ`` with K the Hessian of V with respect
        to (η, δp) of the free nodes, assembled in closed form
        (:func:`~flexlearn.physics.cosserat.modes.clamped_frequencies`), and M = diag(J_a, m_a). The time step
        adds only the LGVI's O((hω)²) frequency shift. Used for the frequency-shaping study (seed 001, Sec. 5).

        Args:
            base: the clamp (the frequencies do not depend on its pose; accepted for the callers that pass it).
            rod_index: which rod of a batch.

        Returns:
            (6N,) angular frequencies [rad/s].
        """
        with torch.no_grad():
            return clamped_frequencies(self.context((), torch.float64))[rod_index]

    def context(self, loads: Sequence[RodLoad] = (), dtype: torch.dtype = torch.float64) -> RodContext:
        """The per-simulation quantities of this rod (differentiable functions of its buffers), with the point
        masses of ``loads`` added to their nodes (seed 001, Remark 1).

        Args:
            loads: the loads of the simulation (their ``point_masses``).
            dtype: dtype of the context's tensors.

        Returns:
            The :class:`~flexlearn.physics.cosserat.context.RodContext` (the ``ctx`` of loads and damping).
        """
        device = self.length.device
        n = self.n_nodes
        B = self.batch_size
        rest_lengths = self.rest_lengths().to(dtype)  # (B, N)
        c1, c2 = self.stiffness()
        lumped = self.lumped_lengths().to(dtype)  # (B, n)
        mass = self.mass_per_length().to(dtype).unsqueeze(-1) * lumped + self.point_mass.to(dtype)
        inertia = self.inertia_per_length().to(dtype).unsqueeze(-2) * lumped.unsqueeze(-1) + self.point_inertia.to(
            dtype
        )
        for load in loads:
            for node, m, jd in load.point_masses(n):
                onehot = torch.zeros(n, dtype=dtype, device=device)
                onehot[node] = 1.0
                mass = mass + m.to(onehot).reshape(-1, 1) * onehot
                inertia = inertia + jd.to(onehot).reshape(-1, 1, 3) * onehot.unsqueeze(-1)
        element_mass = (self.mass_per_length().to(dtype).unsqueeze(-1) * rest_lengths).expand(B, n - 1)
        masses = (mass.expand(B, n), inertia.expand(B, n, 3), element_mass)
        ctx = RodContext.from_masses(self.strain, rest_lengths, (c1.to(dtype), c2.to(dtype)), lumped, *masses)
        return dataclasses.replace(ctx, curvature=self.curvature)

    def kinetic_energy(self, state: RodState, ctx: Optional[RodContext] = None) -> Tensor:
        """(B,) kinetic energy [J] of ``state``: ½ vᵀ M v + ½ Σ ωᵀ J ω (M the lumped or the consistent mass of ``ctx``,
        :meth:`RodContext.translational_momentum`; ``ctx`` defaults to :meth:`context`).

        Args:
            state: The rod state (velocities [m/s], body angular velocities [rad/s]).
            ctx: The rod's context; None for :meth:`context` without loads.

        Returns:
            Kinetic energy [J], shape (B,).
        """
        ctx = self.context((), state.positions.dtype) if ctx is None else ctx
        t = 0.5 * (state.velocities * ctx.translational_momentum(state.velocities)).sum((-1, -2))
        r = 0.5 * (ctx.inertia * state.angular_velocities**2).sum((-1, -2))
        return t + r

    def momenta(self, state: RodState, ctx: Optional[RodContext] = None) -> Tuple[Tensor, Tensor]:
        """(B, 3) total linear momentum Σ (M v)_a and angular momentum about the origin Σ p_a × (M v)_a + R J ω.

        Args:
            state: The rod state.
            ctx: The rod's context; None for :meth:`context` without loads.

        Returns:
            Tuple ``(linear [kg·m/s], angular [kg·m²/s])``, shape (B, 3) each.
        """
        ctx = self.context((), state.positions.dtype) if ctx is None else ctx
        mv = ctx.translational_momentum(state.velocities)
        spin = (state.rotations @ (ctx.inertia * state.angular_velocities).unsqueeze(-1)).squeeze(-1)
        lin, ang = mv.sum(-2), torch.linalg.cross(state.positions, mv).sum(-2) + spin.sum(-2)
        return lin, ang

    # ---------------------------------------------------------------- simulation
    def simulate(
        self,
        duration: float,
        dt: float,
        loads: Sequence[RodLoad] = (),
        damping: Optional[DampingModel] = None,
        initial: Optional[RodState] = None,
        base: Supports = None,
        observer: Optional[RodObserver] = None,
        options: Optional[SimulationOptions] = None,
    ) -> Trajectory:
        """Integrate the rod with the LGVI (or its implicit variant) for ``duration`` seconds with step ``dt``.

        The loop is :class:`flexlearn.physics.cosserat.integrator.Stepper`::

            tr = rod.simulate(0.5, 1e-5, loads=[Gravity()], base=Clamp.horizontal(),
                              options=SimulationOptions(record_every=100, scheme="implicit"))

        Args:
            duration: simulated time [s].
            dt: time step [s] (the LGVI is stable below :meth:`stable_dt`; the implicit scheme's step is set by
                accuracy, :meth:`accurate_dt`).
            loads: :class:`~flexlearn.physics.cosserat.loads.Gravity`, magnets, point forces, … (any
                :class:`~flexlearn.physics.cosserat.loads.RodLoad`).
            damping: a :class:`~flexlearn.physics.cosserat.damping.Damping` (None: conservative).
            initial: the :class:`RodState` at t = 0 (default: at rest, straight along the base axis).
            base: how the rod is held: a :class:`Clamp` (default: clamped at the origin, rod along world z) or a
                :class:`Pin` (node 0 unless it names another), a list of them (each names its ``node``, −1 the last;
                optionally driven, a clamp optionally sliding), or ``"free"``. The supports' reactions are
                ``Trajectory.reactions``.
            observer: a :class:`~flexlearn.physics.cosserat.damping.DampingEstimator` (seed 001, Sec. 3.2)
                whose damping estimate K̂ drives the model while it is being estimated.
            options: recording (``record_every``, ``record_energy``, ``callback``), the step scheme (``scheme``,
                ``implicit_beta``, ``implicit_dissipation``), the backend (``backend``, ``compile``) and the
                checks (``strain_limit``, ``newton_tol``, …):
                :class:`~flexlearn.physics.cosserat.simulation.SimulationOptions` (None: its defaults).

        Returns:
            A :class:`Trajectory`. Differentiable with respect to every buffer and load parameter (autograd
            through the unrolled steps and Newton iterations).

        Raises:
            IntegrationError: a failing step, carrying the state before it and the trajectory so far.
            ConfigError: a bad ``dt`` or ``duration``, or ``backend='numba'`` for a run the kernel cannot take.
        """
        setup = RodSetup(loads, damping, initial, base, observer)
        return integrator.simulate(self, duration, dt, setup, SimulationOptions() if options is None else options)
