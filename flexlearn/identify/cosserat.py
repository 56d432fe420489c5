"""Cosserat rod: Young's modulus E and damping from a tracked tip trajectory (seed 001, Secs. 3–5).

Forward model: :meth:`flexlearn.physics.cosserat.CosseratRod.simulate` (LGVI), a horizontal cantilever
under gravity with mass-proportional Rayleigh damping ``α`` [1/s] (every mode decays at the rate α/2,
:class:`~flexlearn.physics.cosserat.Damping`); the recorded tip positions (T, 3) [m] are compared with
the simulated ones every ``record_every`` steps. Derivatives of the tip track with respect to (E, α) by
forward-mode differentiation through the unrolled integrator.

Short horizons: long horizons make the cost landscape in E rugged (a few percent of stiffness shifts
the phase by a whole period late in the track), so the fit starts on the first ``horizons[0]`` fraction
of the track and lengthens it stage by stage (each stage warm-started from the previous one), see
:class:`~flexlearn.identify.task.IdentificationTask`.

Experiments: ``initial='pluck'`` releases the rod at rest from a circular arc (tip turned by
``tip_angle``): both E (frequency) and α (decay) are identifiable. ``initial='static'`` records the rod
hanging still at its gravity equilibrium: the track carries no information on the damping, which the
Hessian reports (its α direction is singular) instead of returning a confident value.

The simulated recording uses the same model at the true parameters plus white noise ``tip_noise`` [m]
per coordinate (a stereo-camera track; 50 µm is our choice, the seed gives no figure).
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.identify.params import ParameterSet, config_spec
from flexlearn.physics.cosserat import Clamp, CosseratRod, Damping, Gravity, Material, SimulationOptions

__all__ = ["CosseratIdConfig", "CosseratTipProblem"]


@dataclasses.dataclass
class CosseratIdConfig:
    """Rod geometry (known), truth of the simulated track, noise, horizon, fit settings."""

    length: float = 0.02  # m
    radius: float = 2.0e-3  # m
    density: float = 1101.0  # kg/m³ (PDMS, seed 001 Table 5)
    poisson_ratio: float = 0.5
    n_elements: int = 3
    youngs_modulus: float = 3.65e5  # Pa, truth (PDMS, seed 001 Table 5)
    alpha: float = 10.0  # 1/s, truth
    initial: str = "pluck"  # 'pluck' | 'static'
    tip_angle: float = 0.3  # rad, initial arc for 'pluck'
    dt: float = 1.5e-4  # s (stable up to E ≈ 1.8× the truth for this rod)
    steps: int = 300
    record_every: int = 4
    tip_noise: float = 5.0e-5  # m
    seed: int = 0
    horizons: tuple[float, ...] = (0.35, 1.0)
    init: dict = dataclasses.field(default_factory=lambda: {"youngs_modulus": 3.0e5, "alpha": 5.0})
    bounds: dict = dataclasses.field(
        default_factory=lambda: {"youngs_modulus": [1.0e4, 6.0e5], "alpha": [1.0e-2, 1.0e3]}
    )

    def validate(self) -> None:
        for k in ("length", "radius", "density", "youngs_modulus", "alpha", "dt", "tip_noise"):
            v = getattr(self, k)
            check(math.isfinite(v) and v > 0, f"task.problem.{k}", v, "must be a finite number > 0")
        check(self.initial in ("pluck", "static"), "task.problem.initial", self.initial, "must be 'pluck' or 'static'")
        check(self.steps >= 2 * self.record_every, "task.problem.steps", self.steps, "too short for record_every")
        check(
            len(self.horizons) >= 1 and all(0 < h <= 1 for h in self.horizons) and self.horizons[-1] == 1.0,
            "task.problem.horizons",
            self.horizons,
            "fractions in (0, 1], the last one 1.0",
        )
        check(
            set(self.init) == {"youngs_modulus", "alpha"},
            "task.problem.init",
            dict(self.init),
            "needs exactly the keys youngs_modulus, alpha",
        )


class CosseratTipProblem:
    """E [Pa] and α [1/s] of a clamped rod from its tip track."""

    jacobian_mode = "forward"

    def __init__(self, cfg: CosseratIdConfig) -> None:
        cfg.validate()
        self.cfg = cfg
        self.base = Clamp.horizontal()
        truth = torch.tensor([cfg.youngs_modulus, cfg.alpha], dtype=torch.float64)
        self._initial = self._initial_state(cfg)
        with torch.no_grad():
            clean = self._simulate(truth, cfg.steps)
        gen = torch.Generator().manual_seed(cfg.seed)
        self.full_measured = clean + cfg.tip_noise * torch.randn(clean.shape, generator=gen, dtype=torch.float64)
        self.sigma = cfg.tip_noise
        self.set_horizon(cfg.horizons[0])
        truths = {"youngs_modulus": cfg.youngs_modulus, "alpha": cfg.alpha}
        units = {"youngs_modulus": "Pa", "alpha": "1/s"}
        self.params = ParameterSet(
            [
                config_spec(k, cfg.init[k], cfg.bounds, truth=truths[k], unit=units[k])
                for k in ("youngs_modulus", "alpha")
            ]
        )

    @property
    def horizons(self) -> tuple[float, ...]:
        return tuple(self.cfg.horizons)

    def set_horizon(self, fraction: float) -> None:
        """Use the first ``fraction`` of the track (whole recorded samples).

        Args:
            fraction: share of the track in (0, 1]; at least two recorded samples are kept.
        """
        n_rec = self.full_measured.shape[0]
        keep = max(2, int(round(fraction * (n_rec - 1))) + 1)
        self._steps = (keep - 1) * self.cfg.record_every
        self.measured = self.full_measured[:keep].reshape(-1)

    def _rod(self, E: Tensor) -> CosseratRod:
        c = self.cfg
        material = Material(c.density, E, c.poisson_ratio)
        return CosseratRod.circular(c.length, c.radius, material, c.n_elements, rotary_inertia="segment")

    def _initial_state(self, cfg: CosseratIdConfig):
        rod = self._rod(torch.tensor(cfg.youngs_modulus, dtype=torch.float64))
        if cfg.initial == "pluck":
            return rod.arc_state(cfg.tip_angle, base=self.base)
        # the rod at rest at its gravity equilibrium: settle a heavily damped copy, then zero the velocities
        with torch.no_grad():
            tr = rod.simulate(
                1500 * cfg.dt,
                cfg.dt,
                loads=[Gravity()],
                damping=Damping(alpha=3000.0),
                base=self.base,
                options=SimulationOptions(record_every=1500),
            )
        s = tr.final
        if s is None:  # pragma: no cover  (every run sets it)
            raise RuntimeError("the settling simulation returned no final state")
        return type(s)(s.positions, s.rotations, torch.zeros_like(s.velocities), torch.zeros_like(s.angular_velocities))

    def _simulate(self, values: Tensor, steps: int) -> Tensor:
        c = self.cfg
        # the tensor path: the fused (numba) kernel would drop forward-mode tangents (dual tensors do not
        # report requires_grad)
        options = SimulationOptions(record_every=c.record_every, backend="torch")
        tr = self._rod(values[0]).simulate(
            steps * c.dt,
            c.dt,
            loads=[Gravity()],
            damping=Damping(alpha=values[1]),
            initial=self._initial,
            base=self.base,
            options=options,
        )
        tip = tr.tip
        return tip.reshape(tip.shape[0], 3)

    def predict(self, values: Tensor) -> Tensor:
        """Simulate the rod over the current horizon.

        Args:
            values: (E [Pa], α [1/s]) (2,).

        Returns:
            The tip track (K·3,), flattened from (K, 3) recorded tip positions, like ``measured``.
        """
        return self._simulate(values, self._steps).reshape(-1)
