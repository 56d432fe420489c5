"""What a Cosserat rod is made of: its :class:`Material` and its :class:`CrossSection` (seed 001, Table 2), the two
option objects of :class:`~flexlearn.physics.cosserat.rod.CosseratRod`, and :func:`checked_parameter`, the check
every physical parameter passes (a ConfigError naming it, with the batch index of a 1-D value). SI units.

Each value may be a number or a 1-D tensor (one value per rod of a batch). A material is given by (E, ν) or by
(E, G)::

    PDMS = Material(density=1101.0, youngs_modulus=3.65e5, poisson_ratio=0.5)
    STEEL = Material(density=7850.0, youngs_modulus=2.0e11, shear_modulus=7.9e10)
    rod = CosseratRod.circular(length=0.06, radius=2e-3, material=PDMS, n_elements=10)

The Timoshenko shear coefficient k (``C1 = diag(k G A, k G A, E A)``) is, by default, the section's own
(:meth:`CrossSection.shear_coefficient_for`): ``6 (1 + ν)² / (7 + 12 ν + 4 ν²)`` for a solid circle (Timoshenko's
value, which Hutchinson's analysis confirms for the circle; 27/28 at ν = ½, the value PyElastica uses; Cowper's
``6 (1 + ν)/(7 + 6 ν)`` gives 0.9 there) and ``10 (1 + ν)/(12 + 11 ν)`` for a solid rectangle (Cowper, 1966).
Before, the default was k = 1, the seed's value; pass ``shear_coefficient=1.0`` to the section to keep it. k matters
only where shear does: the seed's PDMS rod (L/r = 30, 10 elements) has its first bending frequency 7e-5 lower with
k = 27/28 than with 1, its second 4.8e-4.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.state import Number

TORSION_MODELS = ("saint_venant", "polar")


def checked_parameter(
    value: Number, name: str, positive: bool = True, upper: Optional[float] = None, lower: Optional[float] = None
) -> Tensor:
    """A float64 tensor () or (B,) of a physical parameter, every element checked.

    Args:
        value: a number or a 1-D tensor (one value per rod); a tensor is kept (its gradient, its dual), any
            other value is copied.
        name: the name an error gives (``name[i]`` for element i of a batch).
        positive: require > 0.
        upper: require ≤ upper (None: no bound).
        lower: require > lower (None: no bound).

    Returns:
        The tensor.

    Raises:
        ConfigError: not 0-D or 1-D, not finite, or out of the range (naming ``name``).
    """
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


@dataclasses.dataclass(frozen=True)
class Material:
    """An isotropic, linear-elastic rod material, given by (E, ν) or by (E, G); each value a number or a 1-D tensor
    (one per rod).

    Attributes:
        density: ρ [kg/m³].
        youngs_modulus: E [Pa].
        poisson_ratio: ν ∈ (−1, ½]; the shear modulus is then G = E / (2 (1 + ν)) (seed 001, Table 2).
        shear_modulus: G [Pa] instead of ν, with E/3 ≤ G (ν = E/(2G) − 1 ≤ ½); give exactly one of the two.
    """

    density: Number
    youngs_modulus: Number
    poisson_ratio: Optional[Number] = None
    shear_modulus: Optional[Number] = None

    def moduli(self) -> tuple[Tensor, Tensor, Tensor]:
        """The checked density, Young's and shear moduli.

        Returns:
            ``(ρ [kg/m³], E [Pa], G [Pa])``, each () or (B,).

        Raises:
            ConfigError: naming ``density``, ``youngs_modulus``, ``poisson_ratio`` or ``shear_modulus``.
        """
        e = checked_parameter(self.youngs_modulus, "youngs_modulus")
        rho = checked_parameter(self.density, "density")
        if self.shear_modulus is None:
            return rho, e, e / (2.0 * (1.0 + self.poisson()))
        self.poisson()  # checks G against E
        return rho, e, checked_parameter(self.shear_modulus, "shear_modulus")

    def poisson(self) -> Tensor:
        """Poisson's ratio ν, given or from (E, G): ``ν = E / (2 G) − 1``.

        Returns:
            ν, () or (B,).

        Raises:
            ConfigError: both or neither of ``poisson_ratio`` and ``shear_modulus`` given, or ν ∉ (−1, ½] (a G
                below E/3), naming the value.
        """
        given = (self.poisson_ratio is not None, self.shear_modulus is not None)
        check(
            given in ((True, False), (False, True)),
            "Material",
            f"poisson_ratio={self.poisson_ratio}, shear_modulus={self.shear_modulus}",
            "give exactly one of poisson_ratio (nu) and shear_modulus (G)",
        )
        if self.shear_modulus is None:
            nu_given: Number = self.poisson_ratio  # type: ignore[assignment]  # not None: checked above
            return checked_parameter(nu_given, "poisson_ratio", positive=False, upper=0.5, lower=-1.0)
        g = checked_parameter(self.shear_modulus, "shear_modulus")
        e = checked_parameter(self.youngs_modulus, "youngs_modulus")
        nu = e / (2.0 * g) - 1.0
        for i, v in enumerate(nu.detach().reshape(-1).tolist()):
            where = "shear_modulus" if nu.dim() == 0 else f"shear_modulus[{i}]"
            gi = float(g.detach().reshape(-1)[i if g.dim() else 0])
            check(v <= 0.5 + 1e-12, where, gi, f"must be >= E/3 (it gives Poisson's ratio E/(2G) - 1 = {v:.6g} > 0.5)")
        return nu


SECTION_SHAPES = ("circle", "rectangle", "custom")


@dataclasses.dataclass(frozen=True)
class CrossSection:
    """A uniform cross-section: each value a number or a 1-D tensor (one per rod). Build the usual shapes with
    :meth:`circular` and :meth:`rectangular`.

    Attributes:
        area: A [m²].
        second_moment_1: I1 about body x [m⁴].
        second_moment_2: I2 about body y [m⁴].
        torsion_constant: J_t [m⁴].
        shear_coefficient: Timoshenko's k; None (the default): the shape's own, :meth:`shear_coefficient_for`
            (the seed uses 1: pass ``1.0`` to keep it).
        shape: ``'circle'``, ``'rectangle'`` (set by :meth:`circular`, :meth:`rectangular`) or ``'custom'``, which
            needs an explicit ``shear_coefficient``.
    """

    area: Number
    second_moment_1: Number
    second_moment_2: Number
    torsion_constant: Number
    shear_coefficient: Optional[Number] = None
    shape: str = "custom"

    def __post_init__(self) -> None:
        """Check the shape name, and that a custom section states its shear coefficient."""
        check(self.shape in SECTION_SHAPES, "shape", self.shape, "must be 'circle', 'rectangle' or 'custom'")
        check(
            self.shape != "custom" or self.shear_coefficient is not None,
            "shear_coefficient",
            None,
            "a custom cross-section needs its Timoshenko shear coefficient (1.0: the seed's)",
        )

    def shear_coefficient_for(self, poisson_ratio: Tensor) -> Tensor:
        """Timoshenko's shear coefficient k of this section for Poisson's ratio ν: the given value, else
        ``6 (1 + ν)² / (7 + 12 ν + 4 ν²)`` for a solid circle (Timoshenko, 1922; Hutchinson, 2001, J. Appl. Mech.
        68: 87–92; 27/28 at ν = ½) or ``10 (1 + ν)/(12 + 11 ν)`` for a solid rectangle (Cowper, 1966, J. Appl.
        Mech. 33: 335–340).

        Args:
            poisson_ratio: ν, () or (B,).

        Returns:
            k, () or (B,).

        Raises:
            ConfigError: a given value that is not finite and > 0 (naming ``shear_coefficient``).
        """
        if self.shear_coefficient is not None:
            return checked_parameter(self.shear_coefficient, "shear_coefficient")
        nu = poisson_ratio
        if self.shape == "circle":
            return 6.0 * (1.0 + nu) ** 2 / (7.0 + 12.0 * nu + 4.0 * nu**2)
        return 10.0 * (1.0 + nu) / (12.0 + 11.0 * nu)

    @classmethod
    def circular(cls, radius: Number, shear_coefficient: Optional[Number] = None) -> CrossSection:
        """A solid circle: A = π r², I1 = I2 = π r⁴/4, J_t = π r⁴/2 (seed 001, Table 2).

        Args:
            radius: r [m].
            shear_coefficient: Timoshenko's k (None: ``6 (1 + ν)² / (7 + 12 ν + 4 ν²)``, :meth:`shear_coefficient_for`).

        Returns:
            The cross-section.

        Raises:
            ConfigError: naming ``radius``.
        """
        r = checked_parameter(radius, "radius")
        i = math.pi * r**4 / 4.0
        return cls(math.pi * r**2, i, i, 2.0 * i, shear_coefficient, "circle")

    @classmethod
    def rectangular(
        cls, width: Number, height: Number, torsion: str = "saint_venant", shear_coefficient: Optional[Number] = None
    ) -> CrossSection:
        """A solid rectangle, ``width`` along body x, ``height`` along body y: A = w h, I1 = w h³/12 (about x),
        I2 = h w³/12.

        Args:
            width: w [m].
            height: h [m].
            torsion: ``'saint_venant'`` uses J_t = β a b³ (a ≥ b, series of Timoshenko & Goodier; 0.1406 a⁴ for
                a square); ``'polar'`` uses I1 + I2 as the seed does for its square rod (Table 7:
                C2[0] = G (I1 + I2)), which overestimates the torsional stiffness of a square by 19 %.
            shear_coefficient: Timoshenko's k (None: ``10 (1 + ν)/(12 + 11 ν)``, :meth:`shear_coefficient_for`).

        Returns:
            The cross-section.

        Raises:
            ConfigError: naming ``torsion``, ``width`` or ``height``.
        """
        check(torsion in TORSION_MODELS, "torsion", torsion, "must be 'saint_venant' or 'polar'")
        w = checked_parameter(width, "width")
        h = checked_parameter(height, "height")
        i1 = w * h**3 / 12.0
        i2 = h * w**3 / 12.0
        if torsion == "polar":
            jt = i1 + i2
        else:
            a = torch.maximum(w, h)
            b = torch.minimum(w, h)
            ratio = b / a
            k = 1.0 / 3.0 - 0.21 * ratio * (1.0 - ratio**4 / 12.0)
            jt = k * a * b**3
        return cls(w * h, i1, i2, jt, shear_coefficient, "rectangle")
