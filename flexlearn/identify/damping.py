"""Damping (and, as an option, stiffness) of a Cosserat rod from what a lab measures: marker positions of a
few nodes from a camera or motion capture, with noise and dropped frames — by maximum likelihood through the
rod model (seed 001 model, not the seed's estimator).

Measurement model: marker k sits on node ``n_k``; frame i at time ``t_i`` (from the release, t = 0) gives
``y_ik = p_{n_k}(t_i; θ) + e_ik``, e white Gaussian with std σ per coordinate; a dropped frame or a lost
marker is NaN (left out). The rod is released at rest from a circular arc (:meth:`CosseratRod.arc_state
<flexlearn.physics.cosserat.rod.CosseratRod.arc_state>`) whose tip rotation vector ``a = (a_x, a_y, 0)``
(base frame, rad) is a nuisance parameter fitted with the damping (or the start is a known
:class:`~flexlearn.physics.cosserat.state.RodState`).

Estimator: θ = (damping coefficient [, Young's modulus], a_x, a_y) minimises ``½ Σ ((y − p(θ))/σ)²``
(single shooting over the whole record: a fraction of a period to a few periods, where the cost is smooth)
by the Levenberg–Marquardt of :func:`flexlearn.identify.fit.lm_step`, after a coarse scan of the damping
over damping ratios 0.3 %–30 % of mode 1. The model runs on the compiled LGVI kernel (no gradient): the
Jacobian is taken by forward differences (``jacobian_mode='difference'``; the tests hold it to the
forward-mode derivative of the tensor path). Uncertainty (:func:`flexlearn.identify.fit.uncertainty`):
``Σ = s² (JᵀJ)⁻¹`` in the fit's coordinates (Gauss–Newton Hessian, the noise level s from the residuals
when σ is not given), mapped to the parameters by the delta method; the reported std is that of the
damping coefficient. The simulation step is the frame period divided into the fewest steps below
``step_fraction`` (0.4) × :meth:`stable_dt <flexlearn.physics.cosserat.rod.CosseratRod.stable_dt>`.

Coverage and accuracy over rods, damping values and noise seeds: ``scripts/bench_damping_coverage.py``.
The seed's pointwise filter (:class:`~flexlearn.physics.cosserat.damping.DampingEstimator`) needs a
noise-free measurement at every step; docs/identify.md says where each is valid.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import math
import re
from pathlib import Path
from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.errors import DataError, FlexlearnError
from flexlearn.identify.fit import fit_quality, lm_step, uncertainty, whitened_residuals
from flexlearn.identify.params import ParameterSet, ParamSpec
from flexlearn.physics.cosserat import Clamp, CosseratRod, Damping, RodState, SimulationOptions

__all__ = [
    "DAMPING_FIELDS",
    "MarkerRecording",
    "DampingFitOptions",
    "DampingEstimate",
    "DampingProblem",
    "read_marker_csv",
    "fit_damping",
]

DAMPING_FIELDS = {"alpha": "1/s", "translational": "N s/m^2", "rotational": "N m s"}
"""The :class:`~flexlearn.physics.cosserat.damping.Damping` coefficients that can be estimated, with units."""

_COLUMN = re.compile(r"^n(\d+)_([xyz])$")


@dataclasses.dataclass(frozen=True)
class MarkerRecording:
    """Marker positions of a released rod.

    Attributes:
        times: (T,) frame times [s] from the release (t = 0), increasing, on a uniform grid (dropped frames
            leave gaps or NaN rows).
        positions: (T, K, 3) world positions [m] of K markers; NaN where a frame or a marker was lost.
        nodes: (K,) the node each marker sits on (0 … N; −1 is the tip).
        sigma: the camera's position noise std [m] (None: estimated from the residuals of the fit).
        source: where the data came from (named by the error messages).
    """

    times: Tensor
    positions: Tensor
    nodes: tuple[int, ...]
    sigma: Optional[float] = None
    source: str = "recording"

    def __post_init__(self) -> None:
        """Shapes, finiteness and order (a DataError naming the source, the field and the value)."""
        t = torch.as_tensor(self.times, dtype=torch.float64)
        y = torch.as_tensor(self.positions, dtype=torch.float64)
        object.__setattr__(self, "times", t)
        object.__setattr__(self, "positions", y)
        object.__setattr__(self, "nodes", tuple(int(n) for n in self.nodes))
        src = self.source
        if t.dim() != 1 or t.numel() < 3:
            raise DataError(f"{src}: times has shape {tuple(t.shape)}; need (T,) with T >= 3 frames")
        if not bool(torch.isfinite(t).all()):
            i = int((~torch.isfinite(t)).nonzero()[0])
            raise DataError(f"{src}: times[{i}] = {float(t[i])!r} is not finite")
        bad = (t[1:] <= t[:-1]).nonzero()
        if bad.numel():
            i = int(bad[0]) + 1
            raise DataError(f"{src}: times[{i}] = {float(t[i])!r} does not increase (after {float(t[i - 1])!r})")
        if float(t[0]) < 0:
            raise DataError(f"{src}: times[0] = {float(t[0])!r} is before the release (t = 0)")
        if y.shape != (t.numel(), len(self.nodes), 3):
            raise DataError(
                f"{src}: positions has shape {tuple(y.shape)}; need (T, K, 3) = ({t.numel()}, {len(self.nodes)}, 3)"
            )
        if bool(torch.isinf(y).any()):
            raise DataError(f"{src}: positions contain an infinite value (use NaN for a lost marker)")
        if int(torch.isfinite(y).sum()) < 10:
            raise DataError(f"{src}: positions has {int(torch.isfinite(y).sum())} finite values; need >= 10")
        if self.sigma is not None:
            s = self.sigma
            if not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0):
                raise DataError(f"{src}: sigma = {s!r} must be a finite number > 0 [m]")


def read_marker_csv(path: Union[str, Path], sigma: Optional[float] = None) -> MarkerRecording:
    """A :class:`MarkerRecording` from a CSV file: a column ``time`` [s] and, per marker on node j, the
    columns ``n<j>_x``, ``n<j>_y``, ``n<j>_z`` [m]; an empty cell or ``nan`` is a lost marker.

    Args:
        path: the CSV file.
        sigma: the camera's noise std [m] (None: estimated by the fit).

    Returns:
        The recording.

    Raises:
        DataError: a missing file or column, a cell that is not a number (naming the file, the column, the row
            and the value), or a recording that :class:`MarkerRecording` rejects.
    """
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
    except OSError as exc:
        raise DataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{path}: not a CSV text file ({exc})") from None
    if not rows:
        raise DataError(f"{path}: empty file; need a header with 'time' and n<j>_x, n<j>_y, n<j>_z columns")
    header = [h.strip() for h in rows[0]]
    if "time" not in header:
        raise DataError(f"{path}: no column 'time' in the header {header}")
    markers: dict[int, dict[str, int]] = {}
    for c, name in enumerate(header):
        m = _COLUMN.match(name)
        if m:
            markers.setdefault(int(m.group(1)), {})[m.group(2)] = c
        elif name != "time":
            raise DataError(f"{path}: column {name!r} is neither 'time' nor n<node>_x|y|z")
    for node, cols in markers.items():
        for ax in "xyz":
            if ax not in cols:
                raise DataError(f"{path}: column n{node}_{ax} is missing (node {node} has {sorted(cols)})")
    if not markers:
        raise DataError(f"{path}: no marker columns n<node>_x|y|z in the header {header}")
    nodes = sorted(markers)
    tcol = header.index("time")
    times, pos = [], []
    for r, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise DataError(f"{path}: row {r} has {len(row)} cells; the header has {len(header)}")
        times.append(_cell(path, row[tcol], "time", r, allow_empty=False))
        pos.append([[_cell(path, row[markers[n][ax]], f"n{n}_{ax}", r) for ax in "xyz"] for n in nodes])
    return MarkerRecording(torch.tensor(times), torch.tensor(pos), tuple(nodes), sigma, str(path))


def _cell(path: Path, text: str, column: str, row: int, allow_empty: bool = True) -> float:
    """One numeric cell (empty or 'nan': NaN where allowed); a DataError naming file, column, row and value."""
    s = text.strip()
    if s == "" and allow_empty:
        return math.nan
    try:
        v = float(s)
    except ValueError:
        raise DataError(f"{path}: column {column}, row {row}: {text!r} is not a number") from None
    if math.isinf(v) or (math.isnan(v) and not allow_empty):
        raise DataError(f"{path}: column {column}, row {row}: {text!r} is not a finite number")
    return v


@dataclasses.dataclass(frozen=True)
class DampingFitOptions:
    """What :func:`fit_damping` estimates and how (checked when built: a ConfigError naming the field).

    Attributes:
        damping: the :class:`~flexlearn.physics.cosserat.damping.Damping` coefficient estimated (a key of
            :data:`DAMPING_FIELDS`); the others are zero.
        fit_stiffness: also estimate Young's modulus (G/E kept).
        initial: None: released at rest from an arc whose tip rotation is fitted; or the known start state.
        loads: loads on the rod during the record (e.g. gravity).
        base: the clamp (None: at the origin along world z).
        max_iter: the most Levenberg–Marquardt iterations.
        rtol: stop when the cost falls by less than this fraction.
        backend: the simulation backend (``'auto'``: the compiled kernel where it can run).
        step_fraction: the simulation step is the frame period split into the fewest steps below this
            fraction of the rod's stable step (smaller: closer to the continuum, slower).
    """

    damping: str = "alpha"
    fit_stiffness: bool = False
    initial: Optional[RodState] = None
    loads: Sequence = ()
    base: Optional[Clamp] = None
    max_iter: int = 40
    rtol: float = 1e-9
    backend: str = "auto"
    step_fraction: float = 0.4

    def __post_init__(self) -> None:
        """Check every field."""
        check(self.damping in DAMPING_FIELDS, "damping", self.damping, f"must be one of {sorted(DAMPING_FIELDS)}")
        check(isinstance(self.max_iter, int) and self.max_iter >= 1, "max_iter", self.max_iter, "must be >= 1")
        check(0 < self.rtol < 1, "rtol", self.rtol, "must be in (0, 1)")
        check(self.backend in ("auto", "numba", "torch"), "backend", self.backend, "must be auto, numba or torch")
        check(0 < self.step_fraction <= 1, "step_fraction", self.step_fraction, "must be in (0, 1]")


@dataclasses.dataclass
class DampingEstimate:
    """The result of :func:`fit_damping`.

    Attributes:
        name: the damping coefficient (``alpha``, ``translational`` or ``rotational``).
        value: its estimate [unit]; std: its standard deviation [unit] (Gauss–Newton Hessian).
        unit: its unit.
        damping_ratio: the mode-1 damping ratio ζ₁ it implies for ``alpha`` (α / 2ω₁; None otherwise), with
            ``damping_ratio_std``.
        youngs_modulus, youngs_modulus_std: [Pa] when fitted (None otherwise).
        tip_angle: the fitted release arc's tip rotation [rad] (NaN for a given start state).
        noise: the residual RMS per coordinate [m] (≈ σ when the model fits).
        chi2_dof: χ²/dof with the given σ (≈ 1 when σ is right and the model fits). The std is scaled by
            √(χ²/dof), never below what the given σ implies.
        n_data: the number of measured coordinates used.
        iterations: Levenberg–Marquardt iterations; converged: the cost stopped falling within ``max_iter``.
        dt: the simulation step [s].
    """

    name: str
    value: float
    std: float
    unit: str
    damping_ratio: Optional[float]
    damping_ratio_std: Optional[float]
    youngs_modulus: Optional[float]
    youngs_modulus_std: Optional[float]
    tip_angle: float
    noise: float
    chi2_dof: float
    n_data: int
    iterations: int
    converged: bool
    dt: float

    def summary(self) -> str:
        """One line: the estimate ± std, the damping ratio and the fit quality."""
        line = f"{self.name} = {self.value:.6g} ± {self.std:.3g} {self.unit}"
        if self.damping_ratio is not None and self.damping_ratio_std is not None:
            line += f" (mode-1 damping ratio {self.damping_ratio:.4g} ± {self.damping_ratio_std:.2g})"
        if self.youngs_modulus is not None:
            line += f", E = {self.youngs_modulus:.6g} ± {self.youngs_modulus_std:.3g} Pa"
        return line + f"; residual RMS {self.noise:.3g} m, χ²/dof {self.chi2_dof:.3g}, {self.n_data} values"


class DampingProblem:
    """The :class:`~flexlearn.identify.fit.IdentificationProblem` of :func:`fit_damping`: parameters
    (damping [, E], a_x, a_y), the finite measurements and their prediction by the rod model.

    Args:
        rod: the rod (geometry, material, elements; not modified).
        recording: the markers.
        options: what is estimated and how.
        damping_init: the damping coefficient's starting value [unit] (> 0).
    """

    jacobian_mode = "difference"

    def __init__(self, rod: CosseratRod, recording: MarkerRecording, options: DampingFitOptions, damping_init: float):
        self.rod, self.rec, self.options = rod, recording, options
        n_nodes = rod.n_nodes
        for k, n in enumerate(recording.nodes):
            if not -n_nodes <= n < n_nodes:
                raise DataError(f"{recording.source}: nodes[{k}] = {n} is not a node of the rod (0 … {n_nodes - 1})")
        self.node_index = torch.tensor([n % n_nodes for n in recording.nodes])
        self.dt, self.steps = _time_grid(rod, recording, options.step_fraction)
        self.mask = torch.isfinite(recording.positions)
        self.measured = recording.positions[self.mask]
        self.sigma = 1.0 if recording.sigma is None else float(recording.sigma)
        specs = [ParamSpec(options.damping, damping_init, unit=DAMPING_FIELDS[options.damping])]
        if options.fit_stiffness:
            specs.append(ParamSpec("youngs_modulus", float(rod.youngs_modulus.reshape(-1)[0]), unit="Pa"))
        if options.initial is None:
            ax, ay = _arc_guess(rod, recording, options.base)
            specs += [ParamSpec("arc_x", ax, unit="rad", scale=0.1), ParamSpec("arc_y", ay, unit="rad", scale=0.1)]
        self.params = ParameterSet(specs)
        self.g_ratio = rod.shear_modulus.detach() / rod.youngs_modulus.detach()

    def start(self, values: Tensor, rod: CosseratRod) -> RodState:
        """The start state: the given one, or the arc of tip rotation (a_x, a_y, 0) at rest.

        Args:
            values: parameter values (P,) (damping [, E], a_x [rad], a_y [rad]); a_x, a_y unused with a given start.
            rod: the rod to bend into the arc.

        Returns:
            The start `RodState`.
        """
        if self.options.initial is not None:
            return self.options.initial
        a = values[-2:]
        angle = torch.sqrt(a[0] ** 2 + a[1] ** 2)
        axis = torch.stack([a[0], a[1], torch.zeros_like(a[0])]) / angle
        return rod.arc_state(angle, axis, base=self.options.base)

    def model_rod(self, values: Tensor) -> CosseratRod:
        """The rod with the fitted Young's modulus (a copy; the given rod when E is not fitted).

        Args:
            values: parameter values (P,); ``values[1]`` is E [Pa] when it is fitted.

        Returns:
            The `CosseratRod` to simulate.
        """
        if not self.options.fit_stiffness:
            return self.rod
        rod = copy.deepcopy(self.rod)
        e = values[1] * torch.ones_like(self.rod.youngs_modulus)
        rod.youngs_modulus = e
        rod.shear_modulus = e * self.g_ratio
        return rod

    def simulate(self, values: Tensor) -> Tensor:
        """(T, K, 3) marker positions [m] predicted for the parameter values (P,).

        Args:
            values: parameter values (P,) (damping [, E [Pa]][, a_x, a_y [rad]]).

        Returns:
            The marker positions (T, K, 3) [m] at the recorded frames.
        """
        rod = self.model_rod(values)
        opts = self.options
        damping = Damping(**{opts.damping: values[0]})
        last = int(self.steps[-1])
        tr = rod.simulate(
            last * self.dt,
            self.dt,
            loads=list(opts.loads),
            damping=damping,
            initial=self.start(values, rod),
            base=opts.base,
            options=SimulationOptions(backend=opts.backend),
        )
        pos = tr.positions
        return pos[self.steps][:, self.node_index]

    def predict(self, values: Tensor) -> Tensor:
        """The measured coordinates (M,) [m] predicted for the parameter values (P,).

        Args:
            values: parameter values (P,).

        Returns:
            The predicted finite coordinates (M,) [m], in the order of ``measured``.
        """
        return self.simulate(values)[self.mask]


def _time_grid(rod: CosseratRod, rec: MarkerRecording, fraction: float) -> tuple[float, Tensor]:
    """The simulation step [s] (the frame period, the median spacing of the frames, split into steps below
    ``fraction`` × stable_dt) and the step index of every frame; a DataError when a frame is more than 1 % of
    a period off that grid (timestamps rounded to a few digits or float32 pass)."""
    t = rec.times
    period = float((t[1:] - t[:-1]).median())  # dropped frames leave gaps of whole periods
    stable = float(rod.stable_dt().detach().min())
    sub = max(1, math.ceil(period / (fraction * stable)))
    frames = torch.round(t / period)
    off = ((t / period - frames).abs() > 0.01).nonzero()
    if off.numel():
        i = int(off[0])
        raise DataError(
            f"{rec.source}: times[{i}] = {float(t[i])!r} is not on the frame grid of period {period:g} s "
            "(frames must be multiples of one period from the release; drop a frame by a gap or a NaN row)"
        )
    return period / sub, frames.to(torch.long) * sub


def _arc_guess(rod: CosseratRod, rec: MarkerRecording, base: Optional[Clamp]) -> tuple[float, float]:
    """The release arc's tip rotation (a_x, a_y) [rad] from the first frame that sees the outermost marker:
    a node at arc length s of an arc of tip angle θ is displaced sideways by ≈ s² θ / 2L along e_z × a."""
    clamp = base if isinstance(base, Clamp) else Clamp()
    r0, p0 = clamp.pose(0.0, torch.float64, rod.length.device)
    lengths = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(rod.rest_lengths()[0].detach(), 0)])
    n_nodes = rod.n_nodes
    s = torch.tensor([float(lengths[n % n_nodes]) for n in rec.nodes], dtype=torch.float64)
    k = int(torch.argmax(s))
    seen = torch.isfinite(rec.positions[:, k]).all(-1).nonzero()
    if not seen.numel() or float(s[k]) <= 0:
        raise DataError(f"{rec.source}: marker on node {rec.nodes[k]} is never seen; cannot start the fit")
    y = rec.positions[int(seen[0]), k]
    local = r0.reshape(3, 3).T @ (y - p0.reshape(3))  # base frame
    L = float(lengths[-1])
    theta = 2.0 * L * float(local[:2].norm()) / float(s[k]) ** 2
    if theta < 1e-6:
        return 1e-3, 0.0
    d = local[:2] / local[:2].norm()  # the sideways direction a × e_z = (a_y, −a_x) / |a|
    return -theta * float(d[1]), theta * float(d[0])


def fit_damping(
    rod: CosseratRod, recording: MarkerRecording, options: Optional[DampingFitOptions] = None
) -> DampingEstimate:
    """The maximum-likelihood damping (± std) of a released rod from its marker record (module docstring).

    Args:
        rod: the rod model (geometry, material, number of elements; its E is the start of a stiffness fit).
        recording: the markers (:class:`MarkerRecording`, :func:`read_marker_csv`).
        options: what is estimated and how (:class:`DampingFitOptions`).

    Returns:
        The :class:`DampingEstimate`.

    Raises:
        DataError: markers on nodes the rod does not have, frames off a uniform grid, a marker never seen.
        ConfigError: a bad option.
    """
    opts = DampingFitOptions() if options is None else options
    omega1 = float(rod.linear_frequencies(opts.base if isinstance(opts.base, Clamp) else None)[0])
    to_coef = _ratio_to_coefficient(rod, opts.damping, omega1)
    problem = DampingProblem(rod, recording, opts, to_coef(0.02))
    _scan_damping(problem, [to_coef(z) for z in (0.003, 0.01, 0.03, 0.1, 0.3)])
    lam, it, converged = 1e-3, 0, False
    while it < opts.max_iter:
        it += 1
        step = lm_step(problem, lam)
        lam = step["lam"]
        if not step["accepted"] or step["cost"] - step["new_cost"] <= opts.rtol * step["cost"]:
            converged = True
            break
    unc = uncertainty(problem)
    quality = fit_quality(problem, unc["residuals"])
    vals, std = unc["values"], unc["std"]
    chi2 = quality["chi2_dof"]
    if recording.sigma is not None and chi2 < 1.0:  # residuals below the stated σ: keep σ's (larger) std
        std = std / math.sqrt(max(chi2, 1e-300))
    value, sd = float(vals[0]), float(std[0])
    ratio = ratio_std = None
    if opts.damping == "alpha":
        ratio, ratio_std = value / (2.0 * omega1), sd / (2.0 * omega1)
    e = e_std = None
    if opts.fit_stiffness:
        e, e_std = float(vals[1]), float(std[1])
    tip_angle = float(vals[-2:].norm()) if opts.initial is None else math.nan
    return DampingEstimate(
        opts.damping,
        value,
        sd,
        DAMPING_FIELDS[opts.damping],
        ratio,
        ratio_std,
        e,
        e_std,
        tip_angle,
        quality["rmse"],
        chi2,
        int(problem.measured.numel()),
        it,
        converged,
        problem.dt,
    )


def _ratio_to_coefficient(rod: CosseratRod, name: str, omega1: float):
    """ζ₁ ↦ the coefficient that gives mode 1 the damping ratio ζ₁ (approximately, for the start of the fit):
    α = 2ζω₁; c_t = α ρA; c_r = α ρI."""
    rho = float(rod.density.reshape(-1)[0])
    area = float(rod.area.reshape(-1)[0])
    i1 = float(rod.second_moment_1.reshape(-1)[0])
    per = {"alpha": 1.0, "translational": rho * area, "rotational": rho * i1}[name]
    return lambda zeta: 2.0 * zeta * omega1 * per


def _scan_damping(problem: DampingProblem, candidates: list[float]) -> None:
    """Start the fit at the candidate damping with the smallest cost (the other parameters at their start)."""
    params = problem.params
    best, best_cost = None, math.inf
    init = params.specs[0].init
    for c in candidates:
        u = params.u.detach().clone()
        u[0] = math.log(c / init)
        with torch.no_grad():
            try:
                r = whitened_residuals(problem, u)
            except (FlexlearnError, ArithmeticError, RuntimeError):  # outside the model's domain: skipped
                continue
        cost = float(r @ r)
        if math.isfinite(cost) and cost < best_cost:
            best, best_cost = u, cost
    if best is not None:
        with torch.no_grad():
            params.u.copy_(best)
