"""Continuum parallel robot: rod Young's modulus from end-effector positions over the actuation cycle
(seed 003, Sec. VI-B), through the LSE statics and its implicit gradients.

Forward model: :class:`~flexlearn.physics.lse.CPRModel` equilibria at the seed's phase-sampled motor
angles (:func:`~flexlearn.physics.lse.actuation_path`: zero angles, the end of the ramp, ten phases of
eq. (39)), warm-started along the path, for the unloaded robot (Experiment I) and with the pulley
tension (Experiment II). One Young's modulus for all rods, G/E kept (the Poisson ratio is known).
Sensitivities ``∂p_ee/∂E`` by implicit differentiation of the equilibrium (``K_t`` linearisation at the
converged point, Newton not unrolled), hence a reverse-mode Jacobian.

The simulated recording is solved with ``truth_elements`` LSE elements per rod (finer than the
``n_elements`` of the fitted model, so that the fit also absorbs the discretisation error, as with a
real robot) at the true E, plus white noise ``position_noise`` [m] per coordinate (a camera-tracked
marker; 0.2 mm is our choice, the seed gives no figure).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, cast

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.identify.params import ParameterSet, config_spec
from flexlearn.physics.lse import CPRModel, Equilibrium, actuation_path

__all__ = ["LseIdConfig", "CprStiffnessProblem"]


@dataclasses.dataclass
class LseIdConfig:
    """Robot (``cpr``: a :class:`~flexlearn.physics.lse.CPRConfig` mapping; empty: the default robot),
    truth, noise, protocol, fit settings."""

    cpr: dict = dataclasses.field(default_factory=dict)
    youngs_modulus: float = 1.13e10  # Pa, truth (seed 003, Sec. VI-B)
    n_elements: int = 4
    truth_elements: int = 8
    n_phases: int = 10
    actuation_scale: float = 1.0  # multiplies the motor angles of eq. (39) (1: the seed's protocol)
    substeps: int = 4  # warm-start points between consecutive samples on the first pass
    experiments: tuple[str, ...] = ("free", "pulley")
    position_noise: float = 2.0e-4  # m
    seed: int = 0
    init: dict = dataclasses.field(default_factory=lambda: {"youngs_modulus": 5.0e9})
    bounds: dict = dataclasses.field(default_factory=lambda: {"youngs_modulus": [1.0e8, 1.0e12]})

    def validate(self) -> None:
        for k in ("youngs_modulus", "position_noise", "actuation_scale"):
            v = getattr(self, k)
            check(math.isfinite(v) and v > 0, f"task.problem.{k}", v, "must be a finite number > 0")
        check(self.substeps >= 1, "task.problem.substeps", self.substeps, "must be >= 1")
        check(
            self.n_elements >= 1 and self.truth_elements >= 1,
            "task.problem.n_elements",
            (self.n_elements, self.truth_elements),
            "must be >= 1",
        )
        check(
            len(self.experiments) >= 1 and set(self.experiments) <= {"free", "pulley"},
            "task.problem.experiments",
            self.experiments,
            "a non-empty subset of ('free', 'pulley')",
        )
        check(
            set(self.init) == {"youngs_modulus"},
            "task.problem.init",
            dict(self.init),
            "needs exactly the key youngs_modulus",
        )


def _model(cpr: dict, n_elements: int, e: float) -> CPRModel:
    d = {k: dict(v) if isinstance(v, dict) else v for k, v in cpr.items()}
    d.setdefault("rod", {})
    d["rod"] = {**d["rod"], "n_elements": int(n_elements), "youngs_modulus": float(e)}
    return CPRModel.from_config(d)


class CprStiffnessProblem:
    """Young's modulus [Pa] of a CPR's rods from end-effector positions (seed 003, Sec. VI-B)."""

    jacobian_mode = "reverse"

    def __init__(self, cfg: LseIdConfig) -> None:
        cfg.validate()
        self.cfg = cfg
        samples, dense, index = actuation_path(cfg.n_phases, substeps=cfg.substeps)
        self.thetas = samples * cfg.actuation_scale
        self.dense, self.sample_index = dense * cfg.actuation_scale, index
        truth_model = _model(cfg.cpr, cfg.truth_elements, cfg.youngs_modulus)
        with torch.no_grad():
            clean = self._positions(truth_model, None)[0]
        gen = torch.Generator().manual_seed(cfg.seed)
        self.measured = (
            clean + cfg.position_noise * torch.randn(clean.shape, generator=gen, dtype=torch.float64)
        ).reshape(-1)
        self.sigma = cfg.position_noise
        self.model = _model(cfg.cpr, cfg.n_elements, cfg.youngs_modulus)
        self.g_ratio = (cast(Tensor, self.model.shear_modulus) / cast(Tensor, self.model.youngs_modulus)).clone()
        self._inits: Optional[list[Equilibrium]] = None
        self.params = ParameterSet(
            [config_spec("youngs_modulus", cfg.init["youngs_modulus"], cfg.bounds, truth=cfg.youngs_modulus, unit="Pa")]
        )

    def _positions(self, model: CPRModel, inits) -> tuple[Tensor, list[Equilibrium]]:
        """End-effector positions (K·E, 3) at the samples of every experiment.

        Without ``inits`` the dense path (``substeps`` points between samples) is followed in small
        warm-started steps, so that every equilibrium stays on the branch the robot follows; with
        ``inits`` (the equilibria of the previous evaluation) each sample is warm-started from its own.
        """
        out, eqs, k = [], [], 0
        for exp in self.cfg.experiments:
            loads = model.default_loads(pulley=exp == "pulley")
            if inits is None:
                prev = None
                sols = []
                for th in self.dense:
                    prev = model.solve(th, loads, init=None if prev is None else prev.detach())
                    sols.append(prev)
                chosen = [sols[i] for i in self.sample_index]
            else:
                chosen = [model.solve(th, loads, init=inits[k + j]) for j, th in enumerate(self.thetas)]
            for eq in chosen:
                out.append(eq.position)
                eqs.append(eq.detach())
            k += len(self.thetas)
        return torch.stack(out), eqs

    def predict(self, values: Tensor) -> Tensor:
        """End-effector positions at the samples of every experiment, warm-started from the previous call.

        Args:
            values: (Young's modulus [Pa],) (1,).

        Returns:
            The positions (K·E·3,) [m] (K samples, E experiments), flattened like ``measured``.
        """
        e = values[0]
        ones = torch.ones_like(cast(Tensor, self.model.lengths))
        self.model.youngs_modulus = e * ones
        self.model.shear_modulus = e * self.g_ratio
        pos, eqs = self._positions(self.model, self._inits)
        self._inits = eqs  # warm start the next evaluation from these equilibria
        return pos.reshape(-1)
