"""Magnetometer calibration: ellipsoid fit (hard iron, gain, soft iron) and receiver alignment (seed 002, III-B3).

Model: a raw reading m (3,) of a field of constant magnitude |B| = r, seen under all orientations, lies on the
ellipsoid (m − o)ᵀ Q (m − o) = 1 with Q = WᵀW symmetric positive definite. `fit_ellipsoid` returns (W, o) such
that ``(m − o) @ W.T`` lies on the unit sphere: o is the hard-iron offset (sensor units), W (3, 3, symmetric
positive definite, units 1/sensor-unit) removes gain and soft-iron distortion. The field *direction* is then
calibrated up to one rotation (a symmetric W is the choice that adds no rotation); the remaining alignment is the
receiver alignment A of seed 002, III-B3, fitted by `fit_alignment`.

Method (seed 002, III-B3: "an ellipsoid fit to ambient-field measurements during sensor rotation determines the
gain and soft-iron correction W_i"):
1. algebraic least squares on the general quadric aᵀ[x², y², z², 2xy, 2xz, 2yz, 2x, 2y, 2z] = 1
   (after centring and scaling the data for conditioning), giving Q and o in closed form;
2. Gauss–Newton refinement of the geometric residual ‖W(m − o)‖ − 1 over the 9 parameters (o, the 6 entries of
   the symmetric W), which removes the algebraic fit's bias for partial coverage and noisy data.
Everything is float64 torch; inputs may be numpy arrays or tensors.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal, NamedTuple, Optional, overload

import torch
from torch import Tensor

from flexlearn.errors import DataError
from flexlearn.lie import so3_exp

__all__ = [
    "EllipsoidQuality",
    "fit_ellipsoid",
    "apply_calibration",
    "calibration_quality",
    "icosahedron_face_centres",
    "AlignmentOptions",
    "AlignmentFit",
    "fit_alignment",
]


@dataclass
class EllipsoidQuality:
    """Fit quality of a magnetometer calibration on the samples it is scored on.

    radius_* are statistics of ‖W(m − o)‖ (1 is perfect); ``radius_std_over_mean`` is the normalised radius
    spread (the issue's target ≤ 0.5 %); ``raw_*`` are the same for the uncalibrated, mean-centred samples.
    ``coverage`` is the fraction of 20 equal-solid-angle (icosahedron-face) direction bins holding ≥ 25 % of a
    uniform share of the samples; ``condition`` the condition number of W (soft-iron anisotropy);
    ``offset``/``gains`` are in sensor units (gains = 1 / singular values of W = ellipsoid semi-axes).
    """

    n: int
    radius_mean: float
    radius_std: float
    radius_std_over_mean: float
    radius_max_abs_dev: float
    raw_radius_std_over_mean: float
    coverage: float
    condition: float
    offset: list
    gains: list
    iterations: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _as64(x: Any) -> Tensor:
    t = torch.as_tensor(x)
    return t.to(torch.float64) if t.dtype != torch.float64 else t


def _sym(p: Tensor) -> Tensor:
    """Symmetric 3×3 from (xx, yy, zz, xy, xz, yz)."""
    return torch.stack(
        [torch.stack([p[0], p[3], p[4]]), torch.stack([p[3], p[1], p[5]]), torch.stack([p[4], p[5], p[2]])]
    )


def _algebraic(x: Tensor) -> tuple[Tensor, Tensor]:
    """Closed-form quadric fit on (N, 3) scaled data → (Q (3, 3) SPD scaled to the unit sphere, offset (3,))."""
    d = torch.stack(
        [
            x[:, 0] ** 2,
            x[:, 1] ** 2,
            x[:, 2] ** 2,
            2 * x[:, 0] * x[:, 1],
            2 * x[:, 0] * x[:, 2],
            2 * x[:, 1] * x[:, 2],
            2 * x[:, 0],
            2 * x[:, 1],
            2 * x[:, 2],
        ],
        dim=-1,
    )
    # Least squares D a = 1 by the normal equations: x is scaled to [−1, 1], so DᵀD is well conditioned for a
    # tumble that spans the sphere, and a 9×9 solve rounds the same on every call (MKL's lstsq does not:
    # its blocked reductions follow memory alignment, so one sweep would give W differing in its last bits).
    try:
        a = torch.linalg.solve(d.T @ d, d.T @ torch.ones(x.shape[0], dtype=x.dtype))
        m = _sym(a[:6])
        o = -torch.linalg.solve(m, a[6:])
    except RuntimeError as exc:  # singular quadric: the samples span no ellipsoid
        raise DataError(
            "ellipsoid fit: the samples do not determine an ellipsoid (singular quadric); rotate "
            "the sensor through more orientations"
        ) from exc
    k = 1.0 + o @ m @ o  # (x − o)ᵀ M (x − o) = 1 + oᵀ M o
    q = m / k
    evals = torch.linalg.eigvalsh(q)
    if not bool((evals > 0).all()):
        raise DataError(
            f"ellipsoid fit: the samples do not determine an ellipsoid (quadric eigenvalues "
            f"{evals.tolist()}); rotate the sensor through more orientations"
        )
    return q, o


def _sqrtm_spd(q: Tensor) -> Tensor:
    evals, evecs = torch.linalg.eigh(q)
    return (evecs * evals.clamp_min(0).sqrt()) @ evecs.T


def _resid_jac(m: Tensor, p: Tensor) -> tuple[Tensor, Tensor]:
    """Residuals r = ‖W d‖ − 1, d = m − o (N,) and their Jacobian (N, 9) w.r.t. (o, xx, yy, zz, xy, xz, yz)."""
    d = m - p[:3]
    v = d @ _sym(p[3:]).T
    n = torch.linalg.vector_norm(v, dim=-1).clamp_min(1e-300)
    vn = v / n[:, None]
    j_o = -(vn @ _sym(p[3:]))
    j_w = torch.stack(
        [
            vn[:, 0] * d[:, 0],
            vn[:, 1] * d[:, 1],
            vn[:, 2] * d[:, 2],
            vn[:, 0] * d[:, 1] + vn[:, 1] * d[:, 0],
            vn[:, 0] * d[:, 2] + vn[:, 2] * d[:, 0],
            vn[:, 1] * d[:, 2] + vn[:, 2] * d[:, 1],
        ],
        dim=-1,
    )
    return n - 1.0, torch.cat([j_o, j_w], dim=-1)


def _refine(m: Tensor, w: Tensor, o: Tensor, iters: int) -> tuple[Tensor, Tensor, int]:
    """Gauss–Newton (Levenberg-damped) on r_n = ‖W(m_n − o)‖ − 1 over (o, sym(W)); returns (W, o, iterations)."""
    iu = [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)]
    p = torch.cat([o, torch.stack([w[i, j] for i, j in iu])])
    lam = 1e-6
    done = 0
    for iteration in range(1, iters + 1):
        done = iteration
        r, jac = _resid_jac(m, p)
        c0 = float((r * r).sum())
        jtj = jac.T @ jac
        step = torch.linalg.solve(jtj + lam * torch.diag(torch.diagonal(jtj)), -(jac.T @ r))
        p_new = p + step
        c1 = float((_resid_jac(m, p_new)[0] ** 2).sum())
        if c1 < c0:
            p, lam = p_new, max(lam / 10, 1e-12)
            if (c0 - c1) <= 1e-12 * max(c0, 1e-300):
                break
        else:
            lam *= 10
            if lam > 1e6:
                break
    return _sym(p[3:]), p[:3], done


@overload
def fit_ellipsoid(samples: Any, iters: int = 50, return_quality: Literal[False] = False) -> tuple[Tensor, Tensor]: ...


@overload
def fit_ellipsoid(
    samples: Any, iters: int = 50, *, return_quality: Literal[True]
) -> tuple[Tensor, Tensor, EllipsoidQuality]: ...


@overload
def fit_ellipsoid(
    samples: Any, iters: int, return_quality: Literal[True]
) -> tuple[Tensor, Tensor, EllipsoidQuality]: ...


@overload
def fit_ellipsoid(
    samples: Any, iters: int = 50, return_quality: bool = False
) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, EllipsoidQuality]: ...


def fit_ellipsoid(
    samples: Any, iters: int = 50, return_quality: bool = False
) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, EllipsoidQuality]:
    """Fit (W, offset) so that ``(m − offset) @ W.T`` lies on the unit sphere (seed 002, III-B3).

    Args:
        samples: raw readings m (N, 3), any unit (T, gauss, counts), rotated through many orientations in a
            constant field. Non-finite rows are dropped; N ≥ 9 finite rows are needed (≫ 9 for a useful fit).
        iters: Gauss–Newton refinement iterations of the geometric residual.
        return_quality: also return an `EllipsoidQuality` computed on the same samples.

    Returns:
        W (3, 3) symmetric positive definite [1/unit] and offset (3,) [unit], float64 (+ the quality report).
    """
    m = _as64(samples)
    if m.ndim != 2 or m.shape[-1] != 3:
        raise DataError(f"fit_ellipsoid: samples must have shape (N, 3), got {tuple(m.shape)}")
    m = m[torch.isfinite(m).all(dim=-1)]
    if m.shape[0] < 9:
        raise DataError(f"fit_ellipsoid: {m.shape[0]} finite samples; at least 9 are needed")
    centre = m.mean(dim=0)
    scale = (m - centre).abs().max().clamp_min(1e-300)
    x = (m - centre) / scale
    q, o = _algebraic(x)
    w, o, n_it = _refine(x, _sqrtm_spd(q), o, iters)
    w, o = w / scale, centre + o * scale
    w = 0.5 * (w + w.T)
    if not return_quality:
        return w, o
    quality = calibration_quality(m, w, o)
    quality.iterations = n_it
    return w, o, quality


def apply_calibration(samples: Any, w: Tensor, offset: Tensor) -> Tensor:
    """Calibrated readings (m − offset) @ Wᵀ (..., 3): unit-sphere scaled for W from `fit_ellipsoid`.

    Args:
        samples: raw readings m (..., 3).
        w: W (3, 3).
        offset: hard-iron offset (3,), in the readings' unit.

    Returns:
        The calibrated readings (..., 3).
    """
    m = torch.as_tensor(samples)
    return (m - offset.to(m.dtype)) @ w.to(m.dtype).T


_ICO: Optional[Tensor] = None


def icosahedron_face_centres() -> Tensor:
    """Unit centres of the icosahedron's 20 faces: equal-solid-angle direction bins for sphere coverage.

    Shared by `calibration_quality` and the module calibration (`flexlearn.sensing.module_cal`); computed once.

    Returns:
        (20, 3) float64 unit vectors (the dodecahedron's vertices).
    """
    global _ICO
    if _ICO is None:
        ph = (1 + math.sqrt(5)) / 2
        # dodecahedron vertices are the icosahedron's face centres
        v: list[tuple[float, float, float]] = [(sx, sy, sz) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
        for a in (-1, 1):
            for b in (-1, 1):
                v += [(0, a / ph, b * ph), (a / ph, b * ph, 0), (a * ph, 0, b / ph)]
        t = torch.tensor(v, dtype=torch.float64)
        _ICO = t / torch.linalg.vector_norm(t, dim=-1, keepdim=True)
    return _ICO


def calibration_quality(samples: Any, w: Tensor, offset: Tensor) -> EllipsoidQuality:
    """Score a calibration on samples (N, 3): radius spread, coverage, anisotropy (see `EllipsoidQuality`).

    Args:
        samples: raw readings (N, 3) (non-finite rows are dropped).
        w: W (3, 3).
        offset: hard-iron offset (3,).

    Returns:
        The `EllipsoidQuality`.
    """
    m = _as64(samples)
    m = m[torch.isfinite(m).all(dim=-1)]
    w, offset = _as64(w), _as64(offset)
    r = torch.linalg.vector_norm(apply_calibration(m, w, offset), dim=-1)
    raw = torch.linalg.vector_norm(m - m.mean(dim=0), dim=-1)
    dirs = apply_calibration(m, w, offset)
    dirs = dirs / torch.linalg.vector_norm(dirs, dim=-1, keepdim=True).clamp_min(1e-300)
    cell = torch.argmax(dirs @ icosahedron_face_centres().T, dim=-1)
    counts = torch.bincount(cell, minlength=20).to(torch.float64)
    sv = torch.linalg.svdvals(w)
    return EllipsoidQuality(
        n=int(m.shape[0]),
        radius_mean=float(r.mean()),
        radius_std=float(r.std()),
        radius_std_over_mean=float(r.std() / r.mean()),
        radius_max_abs_dev=float((r - 1).abs().max()),
        raw_radius_std_over_mean=float(raw.std() / raw.mean()),
        coverage=float((counts >= 0.25 * m.shape[0] / 20).to(torch.float64).mean()),
        condition=float(sv.max() / sv.min()),
        offset=offset.tolist(),
        gains=(1.0 / sv).tolist(),
        iterations=0,
    )


@dataclass(frozen=True)
class AlignmentOptions:
    """Settings of `fit_alignment` (defaults: the seed 002 rig).

    Attributes:
        iters: L-BFGS iterations on the mean angle.
        lr: L-BFGS step scale.
        prior: σ_A [rad], the mounting tolerance per axis that the fit is shrunk toward identity by; None: no
            shrinkage.
        min_fixes: fewer usable samples than this (at least 2) give the identity.
    """

    iters: int = 100
    lr: float = 1.0
    prior: Optional[float] = math.radians(2.0)
    min_fixes: int = 6


class AlignmentFit(NamedTuple):
    """`fit_alignment` with ``return_report=True``: the alignment and how well the fixes determine it.

    Attributes:
        alignment: A (3, 3) rotation, float64.
        report: {n, angle_deg (fit), angle_deg_shrunk, std_deg (3,), mean_residual_deg_identity,
            mean_residual_deg} (the last two only when a fit was made).
    """

    alignment: Tensor
    report: dict[str, Any]


def _minimise_lbfgs(loss_of: Callable[[Tensor], Tensor], opts: AlignmentOptions) -> Tensor:
    """The rotation vector a (3,) minimising ``loss_of(a)`` by L-BFGS (strong Wolfe) from a = 0 (detached)."""
    a = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [a],
        lr=opts.lr,
        max_iter=opts.iters,
        tolerance_grad=1e-12,
        tolerance_change=1e-15,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Tensor:
        opt.zero_grad()
        loss = loss_of(a)
        loss.backward()
        return loss

    opt.step(closure)
    return a.detach()


def _gauss_newton_information(residuals_of: Callable[[Tensor], Tensor], a: Tensor, n: int) -> Tensor:
    """Gauss–Newton information H = JᵀJ / σ̂² (3, 3) of the residuals (3N,) at a, σ̂² from them (2N − 3 d.o.f.)."""
    with torch.enable_grad():
        jac = torch.autograd.functional.jacobian(residuals_of, a)  # (3N, 3)
    res = residuals_of(a).detach()
    sigma2 = float((res * res).sum()) / max(2 * n - 3, 1)
    return jac.T @ jac / max(sigma2, 1e-18)


@overload
def fit_alignment(
    model: Callable[[Tensor], Tensor],
    delta_b: Tensor,
    target_parent: Tensor,
    w: Optional[Tensor] = None,
    options: Optional[AlignmentOptions] = None,
    return_report: Literal[False] = False,
) -> Tensor: ...


@overload
def fit_alignment(
    model: Callable[[Tensor], Tensor],
    delta_b: Tensor,
    target_parent: Tensor,
    w: Optional[Tensor] = None,
    options: Optional[AlignmentOptions] = None,
    *,
    return_report: Literal[True],
) -> AlignmentFit: ...


def fit_alignment(
    model: Callable[[Tensor], Tensor],
    delta_b: Tensor,
    target_parent: Tensor,
    w: Optional[Tensor] = None,
    options: Optional[AlignmentOptions] = None,
    return_report: bool = False,
) -> Tensor | AlignmentFit:
    """Receiver alignment A (3, 3) rotation of seed 002, III-B3, fitted by minimising the mean angle.

    Minimises Σ_n ∠( M f(A W ΔB_n), R_{i−1,n}ᵀ u_n^q ) over A = exp([a]×), a ∈ R³ (L-BFGS on the angle, from a = 0).
    M = I − 2eeᵀ, e = −ẑ maps f's parent axis to the child direction u (the seed writes 2eeᵀ − I, which gives −u
    for a label pointing from child to parent; see `flexlearn.runtime.fusion.estimator`). Stationary samples fix
    the tilt part of A; bending motion is needed for its axial part (about e).

    Robustness: a few noisy fixes (≈ 16 in the seed's 45 s) determine a poorly, above all its axial part. With
    ``options.prior`` σ_A [rad] (mounting tolerance per axis; None: no shrinkage) the fit is shrunk toward identity
    by its uncertainty — Gauss–Newton information H = JᵀJ / σ̂² of the residuals r_n = pred_n × target_n (σ̂² from
    the residuals, 2N − 3 degrees of freedom), a ← (H + I/σ_A²)⁻¹ H a (the Gaussian posterior mean), so
    well-determined directions keep the fit and poorly determined ones fall back to identity. Fewer than
    ``options.min_fixes`` samples: identity.

    Args:
        model: the direction model f (ΔB → parent axis in the child frame, e.g. `DirectionMLP`).
        delta_b: (N, 3) coil fields [T] in the child sensor frame.
        target_parent: (N, 3) the quaternion directions expressed in the parent frame, R_{i−1}ᵀ u_i^q.
        w: the soft-iron W (3, 3) (identity if None).
        options: iterations, step, prior and minimum number of fixes (`AlignmentOptions`; defaults if None).
        return_report: also return the report (an `AlignmentFit`).

    Returns:
        A (3, 3) float64, or `AlignmentFit` (A and the report dict {n, angle_deg (fit), angle_deg_shrunk,
        std_deg (3,), mean_residual_deg before/after}) with ``return_report``.
    """
    opts = options if options is not None else AlignmentOptions()

    db = _as64(delta_b)
    if w is not None:
        db = db @ _as64(w).T
    tgt = _as64(target_parent)
    ok = torch.isfinite(db).all(-1) & torch.isfinite(tgt).all(-1) & (torch.linalg.vector_norm(tgt, dim=-1) > 0)
    db, tgt = db[ok], tgt[ok]
    tgt = tgt / torch.linalg.vector_norm(tgt, dim=-1, keepdim=True)
    n = int(db.shape[0])
    eye = torch.eye(3, dtype=torch.float64)
    report: dict[str, Any] = {"n": n, "angle_deg": 0.0, "angle_deg_shrunk": 0.0, "std_deg": [float("inf")] * 3}
    if n < max(int(opts.min_fixes), 2):
        return AlignmentFit(eye, report) if return_report else eye
    flip = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)  # I − 2eeᵀ for e = −ẑ is diag(1, 1, −1)
    dtype = torch.float32
    for prm in getattr(model, "parameters", lambda: iter(()))():
        dtype = prm.dtype
        break

    def predict(a: Tensor) -> Tensor:
        pred = model((db @ so3_exp(a).T).to(dtype)).to(torch.float64)
        return pred * (flip / torch.linalg.vector_norm(pred, dim=-1, keepdim=True))

    def mean_angle(a: Tensor) -> Tensor:
        return torch.acos((predict(a) * tgt).sum(-1).clamp(-1 + 1e-12, 1 - 1e-12)).mean()

    a_fit = _minimise_lbfgs(mean_angle, opts)
    a_out = a_fit
    info = _gauss_newton_information(lambda v: torch.linalg.cross(predict(v), tgt).reshape(-1), a_fit, n)
    cov = torch.linalg.pinv(info)
    report["std_deg"] = [math.degrees(math.sqrt(max(float(c), 0.0))) for c in torch.diagonal(cov)]
    if opts.prior is not None:
        a_out = torch.linalg.solve(info + eye / float(opts.prior) ** 2, info @ a_fit)
    with torch.no_grad():
        report.update(
            angle_deg=math.degrees(float(torch.linalg.vector_norm(a_fit))),
            angle_deg_shrunk=math.degrees(float(torch.linalg.vector_norm(a_out))),
            mean_residual_deg_identity=math.degrees(float(mean_angle(torch.zeros(3, dtype=torch.float64)))),
            mean_residual_deg=math.degrees(float(mean_angle(a_out))),
        )
    out = so3_exp(a_out)
    return AlignmentFit(out, report) if return_report else out
