"""The seed's experiments (seed 001, Tables 3–7, Sec. 4) as validated configs, in SI units computed from the
stated geometry and materials (not from the tables, which are scaled; see the package docstring).

World frame = the seed's fixed frame (E1, E2, E3); at rest the rod lies along ``rest_axis``. Assumptions
where the seed is silent are stated per field in ``conf/cosserat/*.yaml``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, NamedTuple, Optional, Tuple

import torch
from omegaconf import DictConfig, OmegaConf

from flexlearn.config import check, check_finite, check_non_negative, from_dict
from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.fields import Field, RotatingField, UniformField
from flexlearn.physics.cosserat.loads import EmbeddedMagnet, Gravity, RodLoad
from flexlearn.physics.cosserat.properties import CrossSection, Material
from flexlearn.physics.cosserat.rod import STRAIN_MODELS, CosseratRod
from flexlearn.physics.cosserat.simulation import SimulationOptions
from flexlearn.physics.cosserat.state import Clamp, RodState

_AXES = {"+x": (1, 0, 0), "-x": (-1, 0, 0), "+y": (0, 1, 0), "-y": (0, -1, 0), "+z": (0, 0, 1), "-z": (0, 0, -1)}


@dataclasses.dataclass
class MagnetConfig:
    """A permanent magnet of an experiment (``magnets[i]`` of the config), attached to a node's cross-section."""

    node: int = -1  # node index (−1: tip)
    moment: float = 0.0  # |m| [A m²] (0: computed from remanence and size)
    direction: Tuple[float, float, float] = (0.0, 0.0, 1.0)  # body frame
    diameter: float = 2e-3  # [m]
    height: float = 4e-3  # [m]
    remanence: float = 1.345  # [T] (N45; the seed's "mT" is a unit typo)
    mass: float = 0.0  # [kg]

    def validate(self):
        check(math.isfinite(self.mass) and self.mass >= 0, "magnet.mass", self.mass, "must be >= 0 [kg]")
        check(self.diameter > 0 and self.height > 0, "magnet.size", (self.diameter, self.height), "must be > 0")
        check_non_negative(self, "magnet", "moment", "remanence")
        check(
            len(self.direction) == 3
            and all(math.isfinite(x) for x in self.direction)
            and any(x != 0 for x in self.direction),
            "magnet.direction",
            self.direction,
            "must be a finite, non-zero 3-vector (body frame)",
        )

    def moment_magnitude(self) -> float:
        if self.moment > 0:
            return self.moment
        return self.remanence * math.pi * self.diameter**2 / 4 * self.height / (4e-7 * math.pi)


@dataclasses.dataclass
class FieldConfig:
    """The magnetic field of an experiment (``field`` of the config): none, uniform or rotating."""

    kind: str = "none"  # none | uniform | rotating
    flux_density: Tuple[float, float, float] = (0.0, 0.0, 0.0)  # uniform part / offset [T]
    amplitude: float = 0.0  # rotating part [T]
    frequency: float = 0.0  # [Hz]
    axes: Tuple[Tuple[float, float, float], Tuple[float, float, float]] = ((0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
    phase: float = 0.0
    ramp: float = 0.0  # [s]

    def validate(self):
        check(self.kind in ("none", "uniform", "rotating"), "field.kind", self.kind, "none | uniform | rotating")
        check_non_negative(self, "field", "amplitude", "frequency", "ramp")
        check_finite(self, "field", "phase")
        check(
            len(self.flux_density) == 3 and all(math.isfinite(x) for x in self.flux_density),
            "field.flux_density",
            self.flux_density,
            "must be a finite 3-vector [T]",
        )


@dataclasses.dataclass
class CosseratExperimentConfig:
    """One of the seed's experiments (``conf/cosserat/<name>.yaml``): rod, loads, field, damping and run settings."""

    name: str = "experiment"
    table: str = ""
    cross_section: str = "circular"  # circular | rectangular
    length: float = 0.1  # [m]
    radius: float = 1e-3  # [m] (circular)
    width: float = 0.0  # [m] (rectangular)
    height: float = 0.0  # [m] (rectangular)
    density: float = 1000.0  # [kg/m³]
    youngs_modulus: float = 1e6  # [Pa]
    poisson_ratio: float = 0.3
    torsion: str = "saint_venant"  # rectangular: saint_venant | polar (the seed's choice)
    shear_coefficient: Optional[float] = None  # Timoshenko's k; None: the section's own (CrossSection); the seed: 1
    n_elements: int = 10
    rotary_inertia: str = "section"  # section | segment
    strain: str = "midpoint"  # midpoint | geodesic (tens of degrees per element) | nodes (seed eq. (6))
    dt: float = 1e-5  # [s]
    scheme: str = "lgvi"  # lgvi | implicit (steps beyond the LGVI's limit, set by accuracy)
    implicit_beta: float = 0.25  # β of the implicit step (≥ 0.25; 0.3: margin for magnets, large bends)
    implicit_dissipation: float = 0.0  # ζ ∈ [0, 1]: numerical damping of the implicit step (ratio ζ h ω / 2)
    duration: float = 1.0  # [s]
    gravity: Tuple[float, float, float] = (0.0, 0.0, -9.81)
    rest_axis: str = "+z"  # world direction of the rod at rest
    bend_axis: Tuple[float, float, float] = (1.0, 0.0, 0.0)  # body axis of the initial deflection
    initial_tip_angle_deg: float = 0.0
    magnets: Tuple[MagnetConfig, ...] = ()
    field: FieldConfig = dataclasses.field(default_factory=FieldConfig)
    damping_alpha: float = 0.0  # [1/s]
    damping_beta: float = 0.0  # [s]
    record_every: int = 100
    estimator_r: float = 1.0  # seed Tables: R = 1e4..1e5 I (g-mm-s units)
    estimator_w: float = 0.0  # seed Tables: W = 0.1 I

    def validate(self):
        check(
            self.cross_section in ("circular", "rectangular"),
            "cross_section",
            self.cross_section,
            "circular | rectangular",
        )
        check(self.length > 0, "length", self.length, "must be > 0 [m]")
        check(self.density > 0, "density", self.density, "must be > 0 [kg/m^3]")
        check(self.youngs_modulus > 0, "youngs_modulus", self.youngs_modulus, "must be > 0 [Pa]")
        check(-1 < self.poisson_ratio <= 0.5, "poisson_ratio", self.poisson_ratio, "must be in (-1, 0.5]")
        check(self.n_elements >= 1, "n_elements", self.n_elements, "must be >= 1")
        check(self.dt > 0 and self.duration > 0, "dt/duration", (self.dt, self.duration), "must be > 0 [s]")
        check(self.rest_axis in _AXES, "rest_axis", self.rest_axis, f"one of {sorted(_AXES)}")
        if self.cross_section == "rectangular":
            check(self.width > 0 and self.height > 0, "width/height", (self.width, self.height), "must be > 0 [m]")
        else:
            check(self.radius > 0, "radius", self.radius, "must be > 0 [m]")
        check(
            self.shear_coefficient is None or (math.isfinite(self.shear_coefficient) and self.shear_coefficient > 0),
            "shear_coefficient",
            self.shear_coefficient,
            "must be finite and > 0, or null (the section's own k)",
        )
        check(self.torsion in ("saint_venant", "polar"), "torsion", self.torsion, "saint_venant | polar")
        check(self.rotary_inertia in ("section", "segment"), "rotary_inertia", self.rotary_inertia, "section | segment")
        check(self.strain in STRAIN_MODELS, "strain", self.strain, " | ".join(STRAIN_MODELS))
        check(self.record_every >= 1, "record_every", self.record_every, "must be an integer >= 1")
        check(self.scheme in ("lgvi", "implicit"), "scheme", self.scheme, "lgvi | implicit")
        check(
            math.isfinite(self.implicit_beta) and self.implicit_beta >= 0.25,
            "implicit_beta",
            self.implicit_beta,
            "must be >= 0.25",
        )
        check(
            0 <= self.implicit_dissipation <= 1, "implicit_dissipation", self.implicit_dissipation, "must be in [0, 1]"
        )
        check_non_negative(self, "experiment", "damping_alpha", "damping_beta")
        check(
            len(self.gravity) == 3 and all(math.isfinite(g) for g in self.gravity),
            "gravity",
            self.gravity,
            "must be a finite 3-vector [m/s^2]",
        )
        check(
            len(self.bend_axis) == 3 and any(x != 0 for x in self.bend_axis),
            "bend_axis",
            self.bend_axis,
            "must be a non-zero 3-vector",
        )
        check_finite(self, "experiment", "initial_tip_angle_deg")
        for i, m in enumerate(self.magnets):
            check(
                -(self.n_elements + 1) <= m.node <= self.n_elements,
                f"magnets[{i}].node",
                m.node,
                f"must index a node of the {self.n_elements}-element rod "
                f"(0 … {self.n_elements}, negative from the tip)",
            )


def load_experiment(data, where: str = "") -> CosseratExperimentConfig:
    """Validated :class:`CosseratExperimentConfig` from a dict / OmegaConf node (magnets as a list);
    errors name the key (prefixed by ``where``).

    Args:
        data: The experiment as a dict or OmegaConf ``DictConfig``.
        where: Key path prefixed to error messages; ``''`` names the block ``experiment``.

    Returns:
        The validated :class:`CosseratExperimentConfig`.

    Raises:
        ConfigError: If a key is unknown or a value is invalid.
    """
    if isinstance(data, DictConfig):
        data = OmegaConf.to_container(data, resolve=True)
    check(isinstance(data, dict), where or "experiment", type(data).__name__, "must be a mapping")
    data = dict(data)
    mags = data.pop("magnets", None) or []
    pre = f"{where}." if where else ""
    check(isinstance(mags, (list, tuple)), f"{pre}magnets", mags, "must be a list of magnets")
    magnets = tuple(from_dict(MagnetConfig, m, f"{pre}magnets[{i}]") for i, m in enumerate(mags))
    cfg = from_dict(CosseratExperimentConfig, data, where)
    cfg.magnets = magnets
    cfg.validate()
    return cfg


def _base_rotation(axis: str) -> torch.Tensor:
    """A rotation whose body z is the world ``axis`` (x, y completed right-handed)."""
    z = torch.tensor(_AXES[axis], dtype=torch.float64)
    helper = torch.tensor([0.0, 1.0, 0.0]) if abs(float(z[1])) < 0.9 else torch.tensor([1.0, 0.0, 0.0])
    x = torch.linalg.cross(helper.to(z), z)
    x = x / x.norm()
    y = torch.linalg.cross(z, x)
    return torch.stack([x, y, z], -1)


class Experiment(NamedTuple):
    """One configured experiment: ``rod.simulate(duration, dt, loads=…, damping=…, initial=…, base=…)`` runs it."""

    rod: CosseratRod
    loads: List[RodLoad]
    damping: Optional[Damping]
    initial: RodState
    base: Clamp


def build_experiment(cfg: CosseratExperimentConfig) -> Experiment:
    """The rod, loads, damping, initial state and base of an experiment.

    Args:
        cfg: the validated experiment (:func:`load_experiment`).

    Returns:
        The :class:`Experiment`.
    """
    material = Material(cfg.density, cfg.youngs_modulus, cfg.poisson_ratio)
    if cfg.cross_section == "circular":
        section = CrossSection.circular(cfg.radius, cfg.shear_coefficient)
    else:
        section = CrossSection.rectangular(cfg.width, cfg.height, cfg.torsion, cfg.shear_coefficient)
    rod = CosseratRod(cfg.length, section, material, cfg.n_elements, cfg.strain, cfg.rotary_inertia)
    base = Clamp(rotation=_base_rotation(cfg.rest_axis))
    loads: List[RodLoad] = [Gravity(cfg.gravity)]
    field: Field
    if cfg.field.kind == "uniform":
        field = UniformField(cfg.field.flux_density)
    elif cfg.field.kind == "rotating":
        field = RotatingField(
            cfg.field.amplitude,
            cfg.field.frequency,
            axes=cfg.field.axes,
            offset=cfg.field.flux_density,
            phase=cfg.field.phase,
            ramp=cfg.field.ramp,
        )
    else:
        field = UniformField((0.0, 0.0, 0.0))
    for mcfg in cfg.magnets:
        d = torch.tensor(mcfg.direction, dtype=torch.float64)
        loads.append(EmbeddedMagnet(mcfg.node, mcfg.moment_magnitude() * d / d.norm(), field, mass=mcfg.mass))
    damping: Optional[Damping] = None
    if cfg.damping_alpha > 0 or cfg.damping_beta > 0:
        damping = Damping(alpha=cfg.damping_alpha, beta=cfg.damping_beta)
    initial = rod.arc_state(math.radians(cfg.initial_tip_angle_deg), cfg.bend_axis, base)
    return Experiment(rod, loads, damping, initial, base)


def simulation_options(cfg: CosseratExperimentConfig, backend: str = "auto") -> SimulationOptions:
    """The experiment's integration options: its recording interval and step scheme.

    Args:
        cfg: the validated experiment.
        backend: ``'auto'``, ``'numba'`` or ``'torch'``.

    Returns:
        The :class:`~flexlearn.physics.cosserat.simulation.SimulationOptions`.
    """
    return SimulationOptions(
        record_every=cfg.record_every,
        backend=backend,
        scheme=cfg.scheme,
        implicit_beta=cfg.implicit_beta,
        implicit_dissipation=cfg.implicit_dissipation,
    )
