"""Validated configuration of a continuum parallel robot (CPR) for the LSE statics (conf/cpr/*.yaml).

Build with ``flexlearn.config.from_dict(CPRConfig, d)`` (d a dict or OmegaConf node): unknown keys, wrong
types, invalid geometry and non-positive stiffness raise `ConfigError` naming the key. SI units.

Default = the seed-003 prototype (Sec. VI-A/VI-B): three servomotors on a rigid base, two rods per motor (six
rods), four LSE elements per rod, rod diameter 1 mm, E = 1.13e10 Pa. The seed gives neither the base and
platform dimensions nor the rod length, the Poisson ratio, the density, the platform mass or the pulley
position: the values below are our plausible choices (a palm-sized robot, glass-fibre rods):

* motor axes horizontal, tangent to a circle of radius ``base_radius`` = 50 mm in the plane z = 0 (the
  seed's global frame: origin on the central axis, in the plane of the motor axes, Fig. 5), motor 0 at
  azimuth ``motor_phase`` = 90°, the others every 120°; a positive motor angle tilts the rods outward;
* a motor's two rods are clamped on its shaft ``rod_spacing`` = 40 mm apart (±20 mm along the axis), at
  ``horn_length`` = 0 from the axis, and meet the platform at ``platform_radius`` / ``base_radius`` of
  their horizontal position (30/50), ``platform_height`` = 180 mm above the base: straight rods of
  ≈ 181 mm, clamped at both ends, inclined 6.8° inward;
* Poisson ratio 0.3 (G = E / 2.6), density 1900 kg/m³, platform mass 5 g, gravity −9.81 m/s² along z;
* Experiment II pulley: a 5 g payload (0.049 N) on a rope over a pulley at (0, 0.25, 0.10) m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from flexlearn.config import check, check_finite, check_positive

__all__ = ["RodConfig", "GeometryConfig", "PulleyConfig", "CPRConfig"]


@dataclass
class RodConfig:
    """Rod material and section; all rods of a robot share it.

    ``section`` ``"circle"`` uses ``diameter``; ``"rectangle"`` uses ``width`` × ``thickness`` (body x × y).
    ``precurvature`` is the reference curvature κ₀ [rad/m] in the body frame (ξ₀ = [κ₀; 0, 0, 1]).
    ``shear_modulus`` ≤ 0 means E / (2 (1 + ν)).
    """

    n_elements: int = 4
    section: str = "circle"
    diameter: float = 1.0e-3
    width: float = 2.0e-3
    thickness: float = 0.5e-3
    youngs_modulus: float = 1.13e10
    poisson_ratio: float = 0.3
    shear_modulus: float = 0.0
    density: float = 1900.0
    precurvature: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def validate(self, where: str = "rod") -> None:
        """Check the rod settings.

        Args:
            where: Key prefix named in the error messages.

        Raises:
            ConfigError: A value out of range, naming its key.
        """
        check(self.n_elements >= 1, f"{where}.n_elements", self.n_elements, "must be >= 1")
        check(
            self.section in ("circle", "rectangle"), f"{where}.section", self.section, "must be 'circle' or 'rectangle'"
        )
        check_positive(self, where, "youngs_modulus", "diameter", "width", "thickness")
        check(math.isfinite(self.density) and self.density >= 0, f"{where}.density", self.density, "must be >= 0")
        check(-1.0 < self.poisson_ratio < 0.5, f"{where}.poisson_ratio", self.poisson_ratio, "must lie in (-1, 0.5)")
        check(
            math.isfinite(self.shear_modulus) and self.shear_modulus >= 0,
            f"{where}.shear_modulus",
            self.shear_modulus,
            "must be > 0 (or 0 for E / (2 (1 + nu)))",
        )
        check_finite(self, where, "precurvature")

    @property
    def g(self) -> float:
        """Shear modulus [Pa]."""
        return self.shear_modulus if self.shear_modulus > 0 else self.youngs_modulus / (2 * (1 + self.poisson_ratio))

    @property
    def section_dims(self) -> tuple[float, ...]:
        return (0.5 * self.diameter,) if self.section == "circle" else (self.width, self.thickness)


@dataclass
class GeometryConfig:
    """Base, motors and platform (lengths in m, angles in rad); see the module docstring."""

    n_motors: int = 3
    rods_per_motor: int = 2
    base_radius: float = 0.05
    motor_phase: float = math.pi / 2
    rod_spacing: float = 0.04
    horn_length: float = 0.0
    platform_radius: float = 0.03
    platform_height: float = 0.18
    motor_limits: tuple[float, float] = (-math.pi / 2, math.pi / 2)
    # layout "rods": fixed rod bases and platform attachments given per rod as [x, y, z, rx, ry, rz] (position
    # [m], rotation vector [rad]; rod along its body z), bases in the world, attachments in the platform frame
    layout: str = "motors"
    rod_bases: tuple[tuple[float, ...], ...] = ()
    rod_attachments: tuple[tuple[float, ...], ...] = ()
    actuation: str = "motors"  # "motors" (angles) | "length" (rod lengths: inverse statics to a pose)
    tip_twist: str = "clamped"  # "clamped" | "free" (a swivel about the rod axis at the platform)

    def validate(self, where: str = "geometry") -> None:
        """Check the geometry settings (the per-rod frames for layout ``"rods"``).

        Args:
            where: Key prefix named in the error messages.

        Raises:
            ConfigError: A value out of range or inconsistent, naming its key.
        """
        check(self.layout in ("motors", "rods"), f"{where}.layout", self.layout, "must be 'motors' or 'rods'")
        check(
            self.actuation in ("motors", "length"), f"{where}.actuation", self.actuation, "must be 'motors' or 'length'"
        )
        check(
            self.tip_twist in ("clamped", "free"), f"{where}.tip_twist", self.tip_twist, "must be 'clamped' or 'free'"
        )
        if self.layout == "rods":
            self._validate_rods(where)
            return
        check(self.actuation == "motors", f"{where}.actuation", self.actuation, "length actuation needs layout 'rods'")
        check(self.n_motors >= 1, f"{where}.n_motors", self.n_motors, "must be >= 1")
        check(self.rods_per_motor >= 1, f"{where}.rods_per_motor", self.rods_per_motor, "must be >= 1")
        check_positive(self, where, "base_radius", "platform_radius", "platform_height")
        check(
            math.isfinite(self.rod_spacing) and self.rod_spacing >= 0,
            f"{where}.rod_spacing",
            self.rod_spacing,
            "must be >= 0",
        )
        check(
            self.rods_per_motor == 1 or self.rod_spacing > 0,
            f"{where}.rod_spacing",
            self.rod_spacing,
            "must be > 0 with several rods per motor (coincident rods)",
        )
        check_finite(self, where, "motor_phase", "horn_length", "motor_limits")
        lo, hi = self.motor_limits
        check(lo < hi, f"{where}.motor_limits", self.motor_limits, "must be (low, high) with low < high")

    def _validate_rods(self, where: str) -> None:
        n = len(self.rod_bases)
        check(n >= 1, f"{where}.rod_bases", self.rod_bases, "layout 'rods' needs at least one rod")
        check(
            len(self.rod_attachments) == n,
            f"{where}.rod_attachments",
            len(self.rod_attachments),
            f"must list one frame per rod ({n})",
        )
        for key in ("rod_bases", "rod_attachments"):
            for i, frame in enumerate(getattr(self, key)):
                check(
                    len(frame) == 6 and all(math.isfinite(x) for x in frame),
                    f"{where}.{key}[{i}]",
                    frame,
                    "must be [x, y, z, rx, ry, rz] (finite)",
                )
        check(
            self.actuation == "motors" or n == 6,
            f"{where}.rod_bases",
            n,
            "length actuation to a 6-D platform pose needs 6 rods",
        )
        check_positive(self, where, "platform_height")


@dataclass
class PulleyConfig:
    """Rope–pulley–mass load of seed Experiment II (Sec. VI-D): constant tension m·g toward ``position``."""

    position: tuple[float, float, float] = (0.0, 0.25, 0.10)
    mass: float = 0.005

    def validate(self, where: str = "pulley") -> None:
        """Check the pulley settings.

        Args:
            where: Key prefix named in the error messages.

        Raises:
            ConfigError: A non-finite position or a negative mass, naming its key.
        """
        check_finite(self, where, "position")
        check(math.isfinite(self.mass) and self.mass >= 0, f"{where}.mass", self.mass, "must be >= 0")


@dataclass
class CPRConfig:
    """A continuum parallel robot: rod properties, geometry, platform mass, gravity and the pulley."""

    rod: RodConfig = field(default_factory=RodConfig)
    geometry: GeometryConfig = field(default_factory=GeometryConfig)
    pulley: PulleyConfig = field(default_factory=PulleyConfig)
    platform_mass: float = 0.005
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)

    def validate(self, where: str = "cpr") -> None:
        """Check the robot-level settings (platform mass, gravity).

        Args:
            where: Key prefix named in the error messages.

        Raises:
            ConfigError: A negative platform mass or a non-finite gravity, naming its key.
        """
        check(
            math.isfinite(self.platform_mass) and self.platform_mass >= 0,
            f"{where}.platform_mass",
            self.platform_mass,
            "must be >= 0",
        )
        check_finite(self, where, "gravity")
