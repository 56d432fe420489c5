"""Inverse statics of a length-actuated continuum parallel robot: the platform pose given, the rod lengths solved.

The front door of :mod:`flexlearn.physics.lse.length_actuated.kernels` (compiled Newton, one system per pose with the
six lengths among the unknowns; seed 003 element and embeddings, see that module). Built from a `CPRModel` with
fixed rod bases (``geometry.layout: rods`` in conf/cpr, e.g. ``csg.yaml``)::

    model = CPRModel.from_config(cfg)
    ps = model.pose_statics()
    st = ps.solve(g_ee)                       # cold start (clamped-clamped Hermite shape), then Newton
    path = ps.solve_path(poses, st)           # warm-started along poses (P, 4, 4), one compiled call
    batch = ps.solve_batch(poses, st)         # independent poses, each started from st

SI units; poses (4, 4) numpy or torch, float64. Rod weight is not modelled here (``density`` or gravity
must be zero); an applied platform wrench ``[m; f]`` is given in the platform frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from flexlearn.lie import se3_exp
from flexlearn.physics.lse.element import magnus_omega, mean_strain
from flexlearn.physics.lse.errors import PoseStaticsError, StaticsInputError
from flexlearn.physics.lse.length_actuated import geometry, kernels
from flexlearn.physics.lse.length_actuated.batch import pose_batch_chain, visiting_order
from flexlearn.physics.lse.length_actuated.condense import TINY_ELEMENT_T2
from flexlearn.physics.lse.length_actuated.work import HISTORY, PoseNewtonOptions, PoseSensitivity
from flexlearn.physics.lse.newton_policy import (
    BACKTRACKS,
    GROWTH,
    MAX_ITER,
    MAX_ROTATION_STEP,
    STEP_TOL,
    TOL,
)

__all__ = ["BatchResult", "PathResult", "PoseSettings", "PoseState", "PoseStatics"]


@dataclass(frozen=True)
class PoseSettings:
    """Solver options of :class:`PoseStatics` (the keywords of ``CPRModel.pose_statics``).

    Args:
        twist_free: The platform attachments turn freely about the rod axis (torsion-free swivel); None: the
            model's ``tip_twist_free``.
        tol: Scaled residual ∞-norm of convergence (N·m over max EI/L, as
            :mod:`~flexlearn.physics.lse.newton_policy`).
        max_iter: Newton iterations per solve before failure (≥ 1).
        max_rot: Largest nodal rotation of one Newton step [rad].
        predictor: Warm starts by the sensitivity predictor / path extrapolation (else from the last solution as
            it is).
        chord_keep: A factorisation is kept for the next Newton step (and pose) while each step lowers the
            residual by at least this factor (0: a fresh tangent every step, plain Newton); None: CHORD_KEEP of
            :mod:`~flexlearn.physics.lse.length_actuated.kernels`.
        tiny_rotation: Elements turning by less [rad] use 2 quadrature points in the tangent (0: at least 3);
            None: the square root of TINY_ELEMENT_T2.
        extrapolation: Along a straight platform path (poses on one SE(3) geodesic) each solve starts from the
            polynomial extrapolation of up to this many previous solutions (below 4: never; the sensitivity
            predictor is used otherwise); None: EXTRAP_POINTS.
    """

    twist_free: bool | None = None
    tol: float = TOL
    max_iter: int = MAX_ITER
    max_rot: float = MAX_ROTATION_STEP
    predictor: bool = True
    chord_keep: float | None = None
    tiny_rotation: float | None = None
    extrapolation: int | None = None


@dataclass
class PoseState:
    """A solved pose: platform pose (4, 4), interior nodes (R, N-1, 4, 4), slopes (R, N, 6), tip twists ψ (R,)
    [rad], rod lengths (R,) [m], Newton corrections, and the sensitivity used by the predictor
    (:class:`~flexlearn.physics.lse.length_actuated.work.PoseSensitivity`: d(ζ, β)/dζ_ee (R, 12N - 6, 6),
    dψ/dζ_ee (R, 6), dL/dζ_ee (R, 6), has_sens)."""

    g_ee: np.ndarray
    g_int: np.ndarray
    beta: np.ndarray
    psi: np.ndarray
    lengths: np.ndarray
    iterations: int
    sens: PoseSensitivity

    def kernel_state(self) -> tuple:
        """The compiled kernels' state tuple (g_int, beta, psi, lengths) of this pose."""
        return (self.g_int, self.beta, self.psi, self.lengths)


@dataclass
class PathResult:
    """The solutions along a path of platform poses (:meth:`PoseStatics.solve_path`)."""

    lengths: np.ndarray  # (P, R) [m]
    psi: np.ndarray  # (P, R) [rad]
    g_int: np.ndarray  # (P, R, N-1, 4, 4)
    beta: np.ndarray  # (P, R, N, 6)
    iterations: np.ndarray  # (P,) Newton corrections per pose
    factorisations: np.ndarray  # (P,) tangent factorisations per pose (a kept one is reused: chord steps)


@dataclass
class BatchResult:
    """The solutions of independent platform poses (:meth:`PoseStatics.solve_batch`), in the given order."""

    converged: np.ndarray  # (P,) bool
    lengths: np.ndarray  # (P, R) [m]
    psi: np.ndarray  # (P, R) [rad]
    iterations: np.ndarray  # (P,)
    fit_started: np.ndarray  # (P,) bool: started from the fit of solved neighbours (solve_batch's ``fit``)


def nearest_neighbour_order(points: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Greedy nearest-neighbour visiting order (P,) of ``points`` (P, D) from ``start`` (D,) (Euclidean; compiled,
    :func:`~flexlearn.physics.lse.length_actuated.batch.visiting_order`).

    Args:
        points: Points (P, D) (trailing axes are flattened).
        start: Starting point (D,).

    Returns:
        Indices into ``points`` (P,).
    """
    pts = np.ascontiguousarray(points, dtype=np.float64)
    pts = pts.reshape(pts.shape[0], int(np.prod(pts.shape[1:])))
    return visiting_order(pts, np.ascontiguousarray(start, dtype=np.float64).reshape(pts.shape[1]))


def pose_features(poses: np.ndarray, rotation_scale: float) -> np.ndarray:
    """Points (P, 12) whose squared distance is that of the batch fit
    (:mod:`~flexlearn.physics.lse.length_actuated.fit`): ``|p_i − p_j|² + s² |R_i − R_j|²_F / 2`` for poses (P, 4, 4),
    ``s`` = ``rotation_scale`` [m].

    Args:
        poses: Platform poses (P, 4, 4) or (4, 4).
        rotation_scale: Length s [m] that scales the rotation part.

    Returns:
        The features (P, 12).
    """
    p = poses.reshape(-1, 4, 4)
    return np.concatenate([p[:, :3, 3], rotation_scale / np.sqrt(2.0) * p[:, :3, :3].reshape(-1, 9)], 1)


def _np(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64))


RIGID_TOL = 1e-6  # largest |RᵀR - I| entry of a platform pose accepted as a rotation


def platform_poses(x, name: str, batch: bool) -> np.ndarray:
    """``x`` as float64 platform poses, (4, 4) or with ``batch`` (P, 4, 4), checked to be rigid transforms:
    finite, RᵀR = I within RIGID_TOL, det R = +1, bottom row [0, 0, 0, 1]. Raises StaticsInputError (a
    ValueError) naming the pose (its index in a batch) and what is wrong with it.

    Args:
        x: Array-like (tensor or numpy) poses.
        name: Name of the argument in the error messages.
        batch: Expect a batch (P, 4, 4) instead of one (4, 4).

    Returns:
        The poses, float64 and contiguous.

    Raises:
        StaticsInputError: Not numbers, the wrong shape, or not a rigid transform.
    """
    try:
        g = _np(x)
    except (TypeError, ValueError) as err:
        raise StaticsInputError(f"{name}: not an array of numbers ({err})") from None
    want = "(P, 4, 4)" if batch else "(4, 4)"
    if g.ndim != (3 if batch else 2) or g.shape[-2:] != (4, 4):
        raise StaticsInputError(f"{name}: shape {tuple(g.shape)}, expected {want} homogeneous transforms")
    flat = g.reshape(-1, 4, 4)
    rot = flat[:, :3, :3]
    finite = np.isfinite(flat).all((1, 2))
    bottom = finite & (flat[:, 3] == (0.0, 0.0, 0.0, 1.0)).all(1)
    off = np.where(finite, np.abs(np.swapaxes(rot, 1, 2) @ rot - np.eye(3)).max((1, 2)), 0.0)
    det = np.where(finite, np.linalg.det(np.where(finite[:, None, None], rot, np.eye(3))), 1.0)
    bad = np.flatnonzero(~finite | ~bottom | (off > RIGID_TOL) | (det < 0))
    if bad.size:
        i = int(bad[0])
        m, where = flat[i], (f"{name}[{i}]" if batch else name)
        if not finite[i]:
            raise StaticsInputError(f"{where}: non-finite entries {m.tolist()}")
        if not bottom[i]:
            raise StaticsInputError(f"{where}: bottom row {m[3].tolist()}, a rigid transform has [0, 0, 0, 1]")
        raise StaticsInputError(
            f"{where}: the rotation block is not a rotation (|RᵀR - I| up to {off[i]:.3g}, det "
            f"{det[i]:.6g}): a platform pose has a proper rotation, without scale, shear or reflection"
        )
    return g


class PoseStatics:
    """Compiled inverse pose statics of ``model`` (six fixed, length-actuated rods).

    Args:
        model: A `CPRModel` with six fixed rods and no rod or platform weight.
        settings: Solver options (:class:`PoseSettings`; default: its defaults).
        platform_wrench: Applied platform wrench (6,) [N·m; N] in the platform frame (default: none).

    Raises:
        StaticsInputError: A model this solver cannot handle, or settings out of range (also a ValueError).
    """

    def __init__(self, model, settings: PoseSettings | None = None, platform_wrench=None):
        settings = PoseSettings() if settings is None else settings
        if model.n_rods != 6:
            raise StaticsInputError(f"inverse pose statics needs 6 length-actuated rods, the model has {model.n_rods}")
        if bool((model.rod_motor >= 0).any()):
            raise StaticsInputError("inverse pose statics needs fixed rod bases (geometry.layout: rods)")
        weight = (model.density * model.area).abs().max() * model.gravity.norm()
        if float(weight) > 0 or float(model.platform_mass * model.gravity.norm()) > 0:
            raise StaticsInputError(
                "inverse pose statics does not model rod or platform weight: set density or "
                "gravity (and platform_mass) to zero, or pass platform_wrench"
            )
        n = model.n_elements
        self.n_elements = n
        self.base = _np(model.base_pose0)
        self.tip_local = _np(model.tip_local)
        self.kd = _np(model.stiffness())
        self.xi0 = _np(model.xi0)
        self.w = _np(model.residual_weights())
        self.scale = float((model.stiffness()[:, :3].max(-1).values / model.lengths).max())
        self.w_body = np.zeros(6) if platform_wrench is None else _np(platform_wrench)
        if self.w_body.shape != (6,) or not np.isfinite(self.w_body).all():
            raise StaticsInputError(
                f"platform_wrench: six finite numbers [N·m; N] in the platform frame, got {self.w_body.tolist()}"
            )
        tol, max_iter = settings.tol, settings.max_iter
        if not (tol > 0 and math.isfinite(tol)) or int(max_iter) < 1:
            raise StaticsInputError(
                f"tol must be a positive number and max_iter ≥ 1, got tol={tol}, max_iter={max_iter}"
            )
        twist_free = settings.twist_free
        self.twist_free = bool(model.tip_twist_free if twist_free is None else twist_free)
        self.tol, self.max_iter, self.max_rot = float(tol), int(max_iter), float(settings.max_rot)
        self.predictor = bool(settings.predictor)
        chord_keep, tiny_rotation, extrapolation = settings.chord_keep, settings.tiny_rotation, settings.extrapolation
        self.chord_keep = float(kernels.CHORD_KEEP if chord_keep is None else chord_keep)
        self.tiny_t2 = float(TINY_ELEMENT_T2 if tiny_rotation is None else tiny_rotation**2)
        self.step_tol, self.growth, self.backtracks = STEP_TOL, float(GROWTH), int(BACKTRACKS)
        self.extrapolation = int(kernels.EXTRAP_POINTS if extrapolation is None else extrapolation)
        if not 0 <= self.extrapolation <= HISTORY:
            raise StaticsInputError(f"extrapolation: 0 … {HISTORY} solutions, got {self.extrapolation}")

    @property
    def kernel_options(self) -> PoseNewtonOptions:
        """The options the compiled kernels read (:class:`PoseNewtonOptions`), from this object's attributes."""
        return PoseNewtonOptions(
            self.w,
            self.scale,
            self.tol,
            self.max_iter,
            self.max_rot,
            self.step_tol,
            self.growth,
            self.backtracks,
            self.twist_free,
            self.chord_keep,
            self.tiny_t2,
            self.extrapolation,
        )

    def _checked(self, prefix: str, **fields) -> dict:
        """``fields`` (any of g_ee, g_int, beta, psi, lengths) as float64 arrays, checked against this robot's
        rod and element counts and for finite entries; StaticsInputError naming the field (``prefix`` + name)."""
        r, n = self.base.shape[0], self.n_elements
        want = {"g_ee": (4, 4), "g_int": (r, n - 1, 4, 4), "beta": (r, n, 6), "psi": (r,), "lengths": (r,)}
        out = {}
        for field, value in fields.items():
            try:
                arr = _np(value)
            except (TypeError, ValueError) as err:
                raise StaticsInputError(f"{prefix}{field}: not an array of numbers ({err})") from None
            if arr.shape != want[field]:
                raise StaticsInputError(
                    f"{prefix}{field}: shape {arr.shape}, this robot ({r} rods of {n} elements) needs "
                    f"{want[field]}: a state solved with another element count?"
                )
            if not np.isfinite(arr).all():
                raise StaticsInputError(f"{prefix}{field}: non-finite entries")
            out[field] = arr
        return out

    def _check_init(self, init, name: str = "init") -> PoseState:
        """``init`` if it is a solved state of this robot (a PoseState of its rod and element counts, finite);
        StaticsInputError naming what does not fit otherwise."""
        if not isinstance(init, PoseState):
            raise StaticsInputError(f"{name}: a PoseState (from solve or cold_state), got {type(init).__name__}")
        self._checked(f"{name}.", **{f: getattr(init, f) for f in ("g_ee", "g_int", "beta", "psi", "lengths")})
        return init

    def cold_state(self, g_ee) -> PoseState:
        """The unsolved start at ``g_ee``: rods on clamped-clamped Hermite curves (see ``cold_state`` kernel).

        Args:
            g_ee: Platform pose (4, 4).

        Returns:
            The :class:`PoseState`, 0 iterations, without a sensitivity.

        Raises:
            StaticsInputError: ``g_ee`` is not a rigid transform.
        """
        g = platform_poses(g_ee, "g_ee", False)
        gi, be, ps, ln = geometry.cold_state(self.base, g, self.tip_local, self.n_elements)
        r, n = self.base.shape[0], self.n_elements
        sens = PoseSensitivity(np.zeros((r, 12 * n - 6, 6)), np.zeros((r, 6)), np.zeros((r, 6)), False)
        return PoseState(g, gi, be, ps, ln, 0, sens)

    def solve(self, g_ee, init: PoseState | None = None) -> PoseState:
        """Equilibrium at the platform pose ``g_ee`` (4, 4): from ``init`` (with the predictor and sub-stepped
        continuation along the SE(3) geodesic when needed), or from the cold start. Raises PoseStaticsError.

        Args:
            g_ee: Platform pose (4, 4).
            init: Solved state to start from; None = the cold start at ``g_ee``.

        Returns:
            The solved :class:`PoseState` at ``g_ee``.

        Raises:
            StaticsInputError: An invalid pose or ``init``.
            PoseStaticsError: No equilibrium found.
        """
        g = platform_poses(g_ee, "g_ee", False)
        start = self.cold_state(g) if init is None else self._check_init(init)
        g_from = g if init is None else init.g_ee
        ok, st, it, _nf, sens = kernels.pose_solve(
            self.base,
            g_from,
            g,
            self.tip_local,
            self.kd,
            self.xi0,
            self.w_body,
            start.kernel_state(),
            start.sens,
            self.kernel_options,
            self.predictor,
        )
        if not ok:
            raise PoseStaticsError(
                f"no equilibrium found at the platform pose {g[:3, 3].tolist()} ({it} Newton "
                "iterations, continuation down to 1/1024 of the step)"
            )
        return PoseState(g, st[0], st[1], st[2], st[3], int(it), sens)

    def solve_path(self, poses, init: PoseState) -> PathResult:
        """Warm-started solves along ``poses`` (P, 4, 4) from the solution ``init``, in one compiled call.

        Args:
            poses: Platform poses along the path (P, 4, 4).
            init: Solved state at the path's start.

        Returns:
            The :class:`PathResult`, one row per pose.

        Raises:
            StaticsInputError: An invalid pose or ``init``.
            PoseStaticsError: A pose of the path without an equilibrium.
        """
        pz = platform_poses(poses, "poses", True)
        init = self._check_init(init)
        count, ln, ps, gi, be, its, nf, _sens = kernels.pose_path(
            self.base,
            init.g_ee,
            pz,
            self.tip_local,
            self.kd,
            self.xi0,
            self.w_body,
            init.kernel_state(),
            init.sens,
            self.kernel_options,
            self.predictor,
        )
        if count < pz.shape[0]:
            raise PoseStaticsError(f"path pose {count} of {pz.shape[0]}: no equilibrium found")
        return PathResult(ln, ps, gi, be, its, nf)

    def solve_batch(self, poses, ref: PoseState, chain: bool = True, fit: bool = True) -> BatchResult:
        """Independent solves at ``poses`` (P, 4, 4).

        ``chain`` (default): the poses are visited in a greedy nearest-neighbour order from ``ref`` (positions and
        rotations, :func:`pose_features`), in one
        compiled call (:mod:`~flexlearn.physics.lse.length_actuated.batch`). With ``fit`` (default), once enough poses
        are solved each starts from the local polynomial fit of its nearest solutions
        (:mod:`~flexlearn.physics.lse.length_actuated.fit`); otherwise, and where that fails, from the previous solution
        (the path step). A pose that fails is marked and the chain goes on from the last solution. Each result is
        the equilibrium at its pose, whatever the order and start (to the solver tolerance). ``chain=False``:
        every pose from ``ref`` (predictor over the whole move, adaptive continuation, the cold start as the last
        resort), in one compiled call.

        Args:
            poses: Platform poses (P, 4, 4).
            ref: Solved reference state.
            chain: Visit in nearest-neighbour order, each pose from earlier solutions.
            fit: With ``chain``, start from the fit of solved neighbours when enough exist.

        Returns:
            The :class:`BatchResult`, rows in the order of ``poses``.

        Raises:
            StaticsInputError: An invalid pose or ``ref``.
        """
        pz = platform_poses(poses, "poses", True)
        ref = self._check_init(ref, "ref")
        if not chain:
            st, ln, ps, its = kernels.pose_batch(
                self.base,
                pz,
                self.tip_local,
                self.kd,
                self.xi0,
                self.w_body,
                ref.g_ee,
                ref.kernel_state(),
                ref.sens,
                self.kernel_options,
            )
            return BatchResult(st.astype(bool), ln, ps, its, np.zeros(pz.shape[0], dtype=bool))
        scale = float(np.linalg.norm(self.tip_local[:, :3, 3], axis=1).mean())  # rotations: arcs at the attachments
        order = nearest_neighbour_order(pose_features(pz, scale), pose_features(ref.g_ee, scale)[0])
        st, ln, ps, its, fitted = pose_batch_chain(
            self.base,
            ref.g_ee,
            np.ascontiguousarray(pz[order]),
            self.tip_local,
            self.kd,
            self.xi0,
            self.w_body,
            ref.kernel_state(),
            ref.sens,
            self.kernel_options,
            self.predictor,
            bool(fit),
            scale,
        )
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        return BatchResult(st[back].astype(bool), ln[back], ps[back], its[back], fitted[back])

    def nodes(self, g_ee, g_int, psi) -> np.ndarray:
        """All node poses (R, N+1, 4, 4): bases, interior nodes, platform attachments.

        Args:
            g_ee: Platform pose (4, 4).
            g_int: Interior nodal poses (R, N-1, 4, 4).
            psi: Tip twists ψ (R,) [rad].

        Returns:
            The poses (R, N+1, 4, 4), float64.

        Raises:
            StaticsInputError: An input of the wrong shape or not finite.
        """
        a = self._checked("", g_ee=platform_poses(g_ee, "g_ee", False), g_int=g_int, psi=psi)
        tip = geometry.tip_poses(a["g_ee"], self.tip_local, a["psi"])
        return np.concatenate([self.base[:, None], a["g_int"], tip[:, None]], 1)

    def rod_points(self, g_ee, g_int, beta, psi, lengths, samples_per_element: int = 8) -> np.ndarray:
        """Centre-line points (R, N·k + 1, 3) from the element strain fields (k = samples_per_element), at arc
        lengths s = j L / (N k) (seed eqs. (3), (8); as :meth:`CPRModel.rod_poses`).

        Args:
            g_ee: Platform pose (4, 4).
            g_int: Interior nodal poses (R, N-1, 4, 4).
            beta: Strain slopes (R, N, 6) [1/m²].
            psi: Tip twists ψ (R,) [rad].
            lengths: Rod lengths (R,) [m].
            samples_per_element: Samples k per element (≥ 1).

        Returns:
            The points (R, N·k + 1, 3) [m], the base first.

        Raises:
            StaticsInputError: ``samples_per_element`` < 1, or an input of the wrong shape or not finite.
        """
        if int(samples_per_element) < 1:
            raise StaticsInputError(f"samples_per_element must be ≥ 1, got {samples_per_element}")
        a = self._checked("", beta=beta, lengths=lengths)
        nodes = torch.from_numpy(self.nodes(g_ee, g_int, psi))
        be = torch.from_numpy(a["beta"])
        r, n, k = nodes.shape[0], self.n_elements, int(samples_per_element)
        h = (torch.from_numpy(a["lengths"]) / n)[:, None].expand(r, n)
        ga, gb = nodes[:, :-1], nodes[:, 1:]
        xibar = mean_strain(ga, gb, be, h)
        s = (torch.arange(1, k + 1, dtype=h.dtype) / k)[None, None, :] * h[..., None]
        xi_mean = xibar[..., None, :] + ((s - h[..., None]) / 2)[..., None] * be[..., None, :]
        om = magnus_omega(xi_mean, be[..., None, :].expand_as(xi_mean), s)
        g = (ga[..., None, :, :] @ se3_exp(om)).reshape(r, n * k, 4, 4)
        pts = torch.cat([nodes[:, :1, :3, 3], g[..., :3, 3]], 1)
        return pts.numpy()
