"""`IdentificationTask`: a LightningModule that fits a problem's physical parameters.

One training step is one iteration of the optimiser over the whole recording (full batch):
``method='lm'`` (Levenberg–Marquardt on the whitened residuals, Jacobian through the differentiable
model) or ``'adam'`` (plain gradient descent on ``½ rᵀr`` by backpropagation). Training stops when the
relative cost decrease falls below ``tol`` (or at ``trainer.max_epochs``); a problem with
``horizons`` is fitted on growing prefixes of its recording (short horizons first), each stage
warm-started from the previous one. :meth:`report` gives the
identified values, their Hessian uncertainty and identifiability, and the fit quality, as flat
``id/...`` metrics.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from flexlearn.config import check, did_you_mean, is_finite_number
from flexlearn.errors import ConfigError
from flexlearn.identify.fit import (
    IdentificationProblem,
    StagedProblem,
    fit_quality,
    lm_step,
    uncertainty,
    whitened_residuals,
)

log = logging.getLogger(__name__)

__all__ = ["IdentificationTask"]

TASK_KEYS = ("problem_type", "problem", "method", "lam0", "lr", "tol", "max_rel_std")  # the task group's keys


class IdentificationTask(L.LightningModule):
    """Fit ``problem.params`` to ``problem.measured`` (see :mod:`flexlearn.identify.fit` for the protocol)."""

    def __init__(
        self,
        problem: IdentificationProblem,
        method: str = "lm",
        lam0: float = 1e-2,
        lr: float = 0.05,
        tol: float = 1e-9,
        max_rel_std: float = 0.1,
    ) -> None:
        super().__init__()
        if method not in ("lm", "adam"):
            raise ConfigError(f"config 'task.method' = {method!r}: must be 'lm' or 'adam'")
        self.problem = problem
        self.params = problem.params  # registers u as this module's parameter
        self.method, self.lam, self.lr = method, float(lam0), float(lr)
        self.tol, self.max_rel_std = float(tol), float(max_rel_std)
        self.automatic_optimization = False
        self.history: list[float] = []
        self.converged = False
        # short horizons: problems with ``horizons`` (fractions of the recording) are fitted stage by stage
        self.horizons = tuple(problem.horizons) if isinstance(problem, StagedProblem) else (1.0,)
        self.stage = 0
        self.lam0 = float(lam0)

    @staticmethod
    def validate_hparams(hp: dict[str, Any], where: str = "task") -> dict[str, Any]:
        """The ``task`` group's keys checked for `flexlearn.config.target_arguments`: ``method`` 'lm' | 'adam',
        ``lam0``, ``lr``, ``tol``, ``max_rel_std`` positive finite numbers, ``problem_type`` and ``problem`` (checked
        by `flexlearn.identify.run.build_problem`); any other key is a `ConfigError` naming it.

        Args:
            hp: the group's keys and values (without ``_target_``).
            where: the config path the errors name.

        Returns:
            A copy of ``hp``.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        unknown = sorted(set(hp) - set(TASK_KEYS))
        check(
            not unknown,
            where,
            unknown,
            f"unknown key(s){did_you_mean(unknown, TASK_KEYS)}; known keys: {list(TASK_KEYS)}",
        )
        check(hp.get("method", "lm") in ("lm", "adam"), f"{where}.method", hp.get("method"), "must be 'lm' or 'adam'")
        for key in ("lam0", "lr", "tol", "max_rel_std"):
            v = hp.get(key, 1.0)
            check(is_finite_number(v) and v > 0, f"{where}.{key}", v, "must be a positive finite number")
        return dict(hp)

    def _set_horizon(self, fraction: float) -> None:
        """Only reached with more than one horizon, i.e. for a :class:`StagedProblem`."""
        if isinstance(self.problem, StagedProblem):
            self.problem.set_horizon(fraction)

    def train_dataloader(self) -> DataLoader:
        # the recording lives in the problem: one step per epoch (a list is a map-style dataset)
        return DataLoader([0], batch_size=1)  # type: ignore[arg-type]

    def configure_optimizers(self):
        if self.method == "adam":
            return torch.optim.Adam([self.params.u], lr=self.lr)
        return None

    def training_step(self, batch: Any, batch_idx: int) -> None:
        """One Levenberg–Marquardt or Adam iteration; on convergence the next horizon, or the trainer stops.

        Args:
            batch: the placeholder batch (the recording lives in the problem); ignored.
            batch_idx: its index; ignored.

        Raises:
            FloatingPointError: the cost is not finite.
        """
        if self.method == "lm":
            out = lm_step(self.problem, self.lam)
            self.lam = out["lam"]
            cost, new = out["cost"], out["new_cost"]
            done = (not out["accepted"] and self.lam > 1e12) or (out["accepted"] and cost - new <= self.tol * cost)
            self.log("id/lambda", self.lam, on_epoch=True, on_step=False)
        else:
            opt = self.optimizers()
            if isinstance(opt, list):  # one optimizer: configure_optimizers returns a single one
                opt = opt[0]
            opt.zero_grad()
            r = whitened_residuals(self.problem)
            loss = 0.5 * (r @ r)
            self.manual_backward(loss)
            opt.step()
            cost = new = float(loss.detach())
            done = len(self.history) > 0 and abs(self.history[-1] - cost) <= self.tol * cost
        if not math.isfinite(new):
            raise FloatingPointError("identification cost is not finite")
        self.history.append(new)
        self.log("id/cost", new, on_epoch=True, on_step=False)
        if done and self.stage + 1 < len(self.horizons):
            self.stage += 1
            self._set_horizon(self.horizons[self.stage])
            self.lam = self.lam0
            self.log("id/horizon", float(self.horizons[self.stage]), on_epoch=True, on_step=False)
        elif done:
            self.converged = True
            self.trainer.should_stop = True

    def report(self) -> dict[str, Any]:
        """Flat metrics: ``id/<name>``, ``id/<name>_std``, ``id/<name>_rel_std``, ``id/<name>_identifiable``
        (1/0), ``id/<name>_rel_err`` (when the truth is known), ``id/hessian_cond``, ``id/cost``, fit quality
        (``id/rmse``, ``id/chi2_dof``, ``id/r2``, ``id/residual_lag1_autocorr``), ``id/iterations``,
        ``id/converged``, and ``id/not_identifiable`` (the names that are not, as one string)."""
        if self.stage + 1 < len(self.horizons):  # stopped early: report on the whole recording
            self._set_horizon(self.horizons[-1])
        unc = uncertainty(self.problem, self.max_rel_std)
        out: dict[str, Any] = {}
        bad = []
        at_bound = self.params.at_bound()
        for i, spec in enumerate(self.params.specs):
            n = spec.name
            v = float(unc["values"][i])
            out[f"id/{n}"] = v
            out[f"id/{n}_std"] = float(unc["std"][i])
            out[f"id/{n}_rel_std"] = float(unc["rel_std"][i])
            ok = bool(unc["identifiable"][i]) and not at_bound[i]
            out[f"id/{n}_identifiable"] = 1.0 if ok else 0.0
            if spec.truth is not None:
                out[f"id/{n}_rel_err"] = abs(v / spec.truth - 1.0)
            if not ok:
                bad.append(n)
        q = fit_quality(self.problem, unc["residuals"])
        out.update({f"id/{k}": v for k, v in q.items()})
        out["id/hessian_cond"] = float(unc["hessian_cond"])
        out["id/cost"] = 0.5 * float(unc["residuals"] @ unc["residuals"])
        out["id/iterations"] = float(len(self.history))
        out["id/converged"] = 1.0 if self.converged else 0.0
        out["id/not_identifiable"] = ",".join(bad)
        if bad:
            w = unc["weakest_direction"]
            log.warning(
                "the data do not identify %s (Hessian condition number %.3g; weakest direction %s); "
                "their values are not reliable",
                ", ".join(bad),
                out["id/hessian_cond"],
                dict(zip(self.params.names, [round(float(x), 3) for x in w])),
            )
        return out
