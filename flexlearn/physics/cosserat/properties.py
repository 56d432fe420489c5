"""What a Cosserat rod is made of: its :class:`Material` and its :class:`CrossSection` (seed 001, Table 2), the two
option objects of :class:`~flexlearn.physics.cosserat.rod.CosseratRod`, and :func:`checked_parameter`, the check
every physical parameter passes (a ConfigError naming it, with the batch index of a 1-D value). SI units.

Each value may be a number or a 1-D tensor (one value per rod of a batch)::

    PDMS = Material(density=1101.0, youngs_modulus=3.65e5, poisson_ratio=0.5)
    rod = CosseratRod.circular(length=0.06, radius=2e-3, material=PDMS, n_elements=10)
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
    """An isotropic, linear-elastic rod material; each value a number or a 1-D tensor (one per rod).

    Attributes:
        density: ρ [kg/m³].
        youngs_modulus: E [Pa].
        poisson_ratio: ν ∈ (−1, 0.5]; the shear modulus is G = E / (2 (1 + ν)) (seed 001, Table 2).
    """

    density: Number
    youngs_modulus: Number
    poisson_ratio: Number

    def moduli(self) -> tuple[Tensor, Tensor, Tensor]:
        """The checked density, Young's and shear moduli.

        Returns:
            ``(ρ [kg/m³], E [Pa], G [Pa])``, each () or (B,).

        Raises:
            ConfigError: naming ``density``, ``youngs_modulus`` or ``poisson_ratio``.
        """
        nu = checked_parameter(self.poisson_ratio, "poisson_ratio", positive=False, upper=0.5, lower=-1.0)
        e = checked_parameter(self.youngs_modulus, "youngs_modulus")
        rho = checked_parameter(self.density, "density")
        return rho, e, e / (2.0 * (1.0 + nu))


@dataclasses.dataclass(frozen=True)
class CrossSection:
    """A uniform cross-section: each value a number or a 1-D tensor (one per rod). Build the usual shapes with
    :meth:`circular` and :meth:`rectangular`.

    Attributes:
        area: A [m²].
        second_moment_1: I1 about body x [m⁴].
        second_moment_2: I2 about body y [m⁴].
        torsion_constant: J_t [m⁴].
        shear_coefficient: Timoshenko's k (1 as in the seed).
    """

    area: Number
    second_moment_1: Number
    second_moment_2: Number
    torsion_constant: Number
    shear_coefficient: Number = 1.0

    @classmethod
    def circular(cls, radius: Number) -> CrossSection:
        """A solid circle: A = π r², I1 = I2 = π r⁴/4, J_t = π r⁴/2 (seed 001, Table 2).

        Args:
            radius: r [m].

        Returns:
            The cross-section.

        Raises:
            ConfigError: naming ``radius``.
        """
        r = checked_parameter(radius, "radius")
        i = math.pi * r**4 / 4.0
        return cls(math.pi * r**2, i, i, 2.0 * i)

    @classmethod
    def rectangular(cls, width: Number, height: Number, torsion: str = "saint_venant") -> CrossSection:
        """A solid rectangle, ``width`` along body x, ``height`` along body y: A = w h, I1 = w h³/12 (about x),
        I2 = h w³/12.

        Args:
            width: w [m].
            height: h [m].
            torsion: ``'saint_venant'`` uses J_t = β a b³ (a ≥ b, series of Timoshenko & Goodier; 0.1406 a⁴ for
                a square); ``'polar'`` uses I1 + I2 as the seed does for its square rod (Table 7:
                C2[0] = G (I1 + I2)), which overestimates the torsional stiffness of a square by 19 %.

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
        return cls(w * h, i1, i2, jt)
