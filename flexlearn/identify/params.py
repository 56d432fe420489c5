"""Physical parameters to identify, with positivity and bounds by reparametrization.

Every parameter is positive and is optimised in an unconstrained coordinate ``u``:

* no bounds:        ``p = p_ref · exp(u)``                      (positivity only);
* bounds [lo, hi]:  ``p = exp(log lo + (log hi − log lo) σ(u))``  (log-sigmoid, lo > 0);
* ``scale`` s given: ``p = init + s u``  (a signed parameter, e.g. an angle of an initial state; no bounds).

``p_ref`` is the initial guess, so ``u = 0`` at the start of a fit and each coordinate is O(1): the
Gauss–Newton Hessian in ``u`` is well scaled whatever the physical units. Uncertainties computed in
``u`` are mapped to the parameter by the delta method, ``σ_p = |dp/du| σ_u``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional, Sequence

import torch
from torch import Tensor

from flexlearn.config import check

__all__ = ["ParamSpec", "ParameterSet", "config_spec"]


@dataclasses.dataclass
class ParamSpec:
    """One identified parameter: ``name``, initial guess ``init`` (> 0), optional bounds, the true value
    when the data are simulated (``truth``, for the relative-error report) and a unit string."""

    name: str
    init: float
    lower: Optional[float] = None
    upper: Optional[float] = None
    truth: Optional[float] = None
    unit: str = ""
    scale: Optional[float] = None  # signed parameter p = init + scale · u (no positivity, no bounds)

    def validate(self) -> None:
        if self.scale is not None:
            check(math.isfinite(self.init), f"params.{self.name}.init", self.init, "must be a finite number")
            check(math.isfinite(self.scale) and self.scale > 0, f"params.{self.name}.scale", self.scale, "must be > 0")
            check(
                self.lower is None and self.upper is None,
                f"params.{self.name}",
                (self.lower, self.upper),
                "a signed parameter (scale) takes no bounds",
            )
            return
        check(
            math.isfinite(self.init) and self.init > 0,
            f"params.{self.name}.init",
            self.init,
            "must be a finite number > 0",
        )
        if self.lower is None or self.upper is None:
            check(
                self.lower is None and self.upper is None,
                f"params.{self.name}",
                (self.lower, self.upper),
                "give both lower and upper bounds, or neither",
            )
            return
        check(
            0 < self.lower < self.init < self.upper,
            f"params.{self.name}",
            (self.lower, self.init, self.upper),
            "needs 0 < lower < init < upper",
        )


def config_spec(
    name: str, init: float, bounds: Mapping[str, Sequence[float]], truth: Optional[float] = None, unit: str = ""
) -> ParamSpec:
    """The :class:`ParamSpec` of a problem config: initial guess ``init``, bounds ``bounds[name]`` =
    ``[lower, upper]`` when the mapping has the name (else positivity only).

    Args:
        name: the parameter's name.
        init: its initial guess, in its physical unit.
        bounds: ``name -> [lower, upper]`` of the config's bounded parameters.
        truth: the true value (simulated recordings), or None when unknown.
        unit: the unit's label ("" for a dimensionless parameter).

    Returns:
        The `ParamSpec`.

    Raises:
        ConfigError: ``bounds[name]`` is not a pair.
    """
    if name not in bounds:
        return ParamSpec(name, float(init), truth=truth, unit=unit)
    b = [float(x) for x in bounds[name]]
    check(len(b) == 2, f"task.problem.bounds.{name}", list(bounds[name]), "must be [lower, upper]")
    return ParamSpec(name, float(init), b[0], b[1], truth=truth, unit=unit)


class ParameterSet(torch.nn.Module):
    """The unconstrained vector ``u`` (a float64 ``Parameter`` of shape (P,)) and its map to the physical
    values ``p(u)`` (P,) of the :class:`ParamSpec` list."""

    def __init__(self, specs: Sequence[ParamSpec]) -> None:
        super().__init__()
        check(len(specs) >= 1, "params", len(specs), "at least one parameter is needed")
        names = [s.name for s in specs]
        check(len(set(names)) == len(names), "params", names, "names must be unique")
        for s in specs:
            s.validate()
        self.specs = list(specs)
        u0 = []
        for s in specs:
            if s.lower is None or s.upper is None:
                u0.append(0.0)
            else:
                frac = (math.log(s.init) - math.log(s.lower)) / (math.log(s.upper) - math.log(s.lower))
                u0.append(math.log(frac / (1.0 - frac)))
        self.u = torch.nn.Parameter(torch.tensor(u0, dtype=torch.float64))

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def values(self, u: Optional[Tensor] = None) -> Tensor:
        """Physical values (P,) for ``u`` (default: the current parameter).

        Args:
            u: unconstrained coordinates (P,); None: ``self.u``.

        Returns:
            The physical values (P,).
        """
        u = self.u if u is None else u
        out = []
        for i, s in enumerate(self.specs):
            if s.scale is not None:
                out.append(s.init + s.scale * u[i])
            elif s.lower is None or s.upper is None:
                out.append(s.init * torch.exp(u[i]))
            else:
                lo, hi = math.log(s.lower), math.log(s.upper)
                out.append(torch.exp(lo + (hi - lo) * torch.sigmoid(u[i])))
        return torch.stack(out)

    def value_dict(self, u: Optional[Tensor] = None) -> dict[str, Tensor]:
        """Physical values by parameter name.

        Args:
            u: unconstrained coordinates (P,); None: ``self.u``.

        Returns:
            ``name -> value`` (0-d tensors).
        """
        v = self.values(u)
        return {s.name: v[i] for i, s in enumerate(self.specs)}

    def dvalue_du(self) -> Tensor:
        """Diagonal of the reparametrization Jacobian dp/du (P,)."""
        u = self.u.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            v = self.values(u)
            return torch.autograd.grad(v.sum(), u)[0]

    def at_bound(self, tol: float = 1e-3) -> list[bool]:
        """True where a bounded parameter sits within ``tol`` (relative, in log space) of a bound.

        Args:
            tol: distance from a bound as a fraction of the log-space interval.

        Returns:
            One flag per parameter (False for unbounded ones).
        """
        out = []
        for i, s in enumerate(self.specs):
            if s.lower is None:
                out.append(False)
            else:
                frac = float(torch.sigmoid(self.u.detach()[i]))
                out.append(frac < tol or frac > 1.0 - tol)
        return out
