"""Calibration of a new module for a trained direction model: tumble (W) + a few stationary poses (A).

Seed 002, III-B3: an ellipsoid fit to ambient readings while the sensor is tumbled gives the gain and soft-iron
correction W; the remaining alignment A is fitted on stationary fixes so that f(A W ΔB) matches the
accelerometer's parent axis. Here:

* `tumble_calibration`: `flexlearn.sensing.magcal.fit_ellipsoid`, W rescaled to det W = 1 (the direction model
  removes the amplitude; ΔB keeps its tesla scale). Refused below `MIN_TUMBLE_SAMPLES` readings or
  `MIN_TUMBLE_COVERAGE` of the sphere (20 equal-solid-angle bins), naming both.
* `fit_input_map`: A (3, 3) minimising Σ_n ∠(f(A x_n), â_n)² / σ_n² + ‖θ‖² / σ_θ² (L-BFGS), x_n = W ΔB_n,
  â_n the stationary label. ``kind="rotation"``: A = exp([a]×) (seed 002's A_i); ``kind="linear"``:
  A = exp([a]×)(I + E), E symmetric and trace-free (what is left of a 3×3 map once the amplitude is removed),
  which also absorbs the first-order change of the field map from the module's geometry tolerances.
  Refused below `MIN_POSES` poses or `MIN_POSE_COVERAGE` of the cap cells (`pose_coverage`), naming both.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

from flexlearn.errors import DataError
from flexlearn.sensing.magcal import apply_calibration, fit_ellipsoid, icosahedron_face_centres

__all__ = [
    "MIN_TUMBLE_SAMPLES",
    "MIN_TUMBLE_COVERAGE",
    "MIN_POSES",
    "MIN_POSE_COVERAGE",
    "tumble_calibration",
    "pose_coverage",
    "fit_input_map",
    "input_map",
]

MIN_TUMBLE_SAMPLES = 50
MIN_TUMBLE_COVERAGE = 0.7  # of the 20 icosahedron bins holding half a uniform share (`sphere_coverage`)
MIN_POSES = 12
MIN_POSE_COVERAGE = 0.6  # of the cap cells of `pose_coverage`
_RINGS = (0.0, math.radians(8.0), math.radians(16.0), math.radians(24.0))  # cap cell ring edges (colatitude)


def sphere_coverage(directions: Tensor) -> float:
    """Fraction of the 20 equal-solid-angle (icosahedron-face) bins holding at least half of a uniform share.

    Args:
        directions: calibrated readings or directions (N, 3), any scale (normalised here).

    Returns:
        The fraction in [0, 1]: 1 for a full tumble, ≈ 0.35 for a tumble about one axis only.
    """
    d = directions / torch.linalg.vector_norm(directions, dim=-1, keepdim=True).clamp_min(1e-300)
    counts = torch.bincount(torch.argmax(d @ icosahedron_face_centres().to(d.dtype).T, dim=-1), minlength=20)
    return float((counts >= 0.5 * d.shape[0] / 20).to(torch.float64).mean())


def tumble_calibration(samples: Any, where: str = "tumble") -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(W (3, 3) with det 1, hard-iron offset (3,) [T], quality dict) from tumble readings (N, 3) [T].

    Args:
        samples: tumble readings (N, 3) [T]; non-finite rows are dropped.
        where: the name used in error messages.

    Returns:
        ``(W, offset, quality)``.

    Raises:
        DataError: below `MIN_TUMBLE_SAMPLES` finite readings or `MIN_TUMBLE_COVERAGE` of the sphere.
    """
    m = np.asarray(samples, dtype=np.float64).reshape(-1, 3)
    m = m[np.isfinite(m).all(axis=1)]
    if m.shape[0] < MIN_TUMBLE_SAMPLES:
        raise DataError(
            f"{where}: {m.shape[0]} finite tumble readings, at least {MIN_TUMBLE_SAMPLES} are needed; "
            "record the module turned through all orientations"
        )
    w, o, quality = fit_ellipsoid(torch.from_numpy(m), return_quality=True)
    quality.coverage = sphere_coverage(apply_calibration(torch.from_numpy(m), w, o))
    if quality.coverage < MIN_TUMBLE_COVERAGE:
        raise DataError(
            f"{where}: the tumble covers {quality.coverage:.0%} of the sphere ({m.shape[0]} readings), "
            f"at least {MIN_TUMBLE_COVERAGE:.0%} is needed; turn the module through more orientations"
        )
    w = w / torch.linalg.det(w).abs() ** (1.0 / 3.0)
    return w.numpy(), o.numpy(), quality.as_dict()


def pose_coverage(label: Any) -> float:
    """Fraction of the cap cells (3 rings of 6 sectors within 32° of straight, plus the centre) holding a pose.

    ``label`` (N, 3): the parent axis in the child frame (straight = +z); its colatitude is the bend.

    Args:
        label: directions (N, 3) (or anything reshapable to it), any length; need not be unit.

    Returns:
        The covered fraction of the 19 cells, in [0, 1].
    """
    a = np.asarray(label, dtype=np.float64).reshape(-1, 3)
    col = np.arccos(np.clip(a[:, 2] / np.linalg.norm(a, axis=1), -1.0, 1.0))
    ring = np.searchsorted(_RINGS, col, side="right") - 1  # 0 = centre
    sector = np.floor((np.arctan2(a[:, 1], a[:, 0]) + math.pi) / (2 * math.pi / 6)).astype(int) % 6
    cell = np.where(ring == 0, 0, 1 + (np.minimum(ring, 3) - 1) * 6 + sector)
    return float(np.unique(cell).size / 19)


def _skew(v: Tensor) -> Tensor:
    z = torch.zeros((), dtype=v.dtype)
    return torch.stack([torch.stack([z, -v[2], v[1]]), torch.stack([v[2], z, -v[0]]), torch.stack([-v[1], v[0], z])])


def input_map(theta: Tensor, kind: str) -> Tensor:
    """A (3, 3) from parameters θ: rotation exp([θ₀:₃]×), times I + E(θ₃:₈) for ``kind="linear"``.

    Args:
        theta: parameters θ (3,) for "rotation", (8,) for "linear".
        kind: "rotation" or "linear".

    Returns:
        A (3, 3).
    """
    rot = torch.linalg.matrix_exp(_skew(theta[:3]))
    if kind == "rotation":
        return rot
    d = theta[3:5]
    e = torch.stack(
        [
            torch.stack([d[0], theta[5], theta[6]]),
            torch.stack([theta[5], d[1], theta[7]]),
            torch.stack([theta[6], theta[7], -d[0] - d[1]]),
        ]
    )
    return rot @ (torch.eye(3, dtype=theta.dtype) + e)


def fit_input_map(
    model: Callable[[Tensor], Tensor],
    delta_b: Any,
    label: Any,
    kind: str = "linear",
    sigma_fix: float = math.radians(0.5),
    prior_rotation: float = math.radians(3.0),
    prior_shape: float = 0.03,
    where: str = "calibration",
) -> tuple[np.ndarray, dict[str, Any]]:
    """Fit A (3, 3) so that ``model(A x)`` matches ``label`` (see the module docstring); return (A, report).

    Args:
        model: the direction model f, (N, 3) → (N, 3).
        delta_b: calibrated fields x = W ΔB (N, 3) [T].
        label: unit parent axes (N, 3) (child frame).
        kind: "rotation" or "linear".
        sigma_fix: σ_n per fix [rad].
        prior_rotation: prior σ_θ of the rotation [rad].
        prior_shape: prior σ of the shape E [-].
        where: the name used in error messages.

    Returns:
        ``(A, report)``.

    Raises:
        DataError: for an unknown ``kind``, or below `MIN_POSES` poses or `MIN_POSE_COVERAGE` of the cap cells.
    """
    if kind not in ("rotation", "linear"):
        raise DataError(f"{where}: kind {kind!r} must be 'rotation' or 'linear'")
    x = torch.as_tensor(np.asarray(delta_b, dtype=np.float64))
    y = torch.as_tensor(np.asarray(label, dtype=np.float64))
    ok = torch.isfinite(x).all(-1) & torch.isfinite(y).all(-1)
    x, y = x[ok], y[ok] / torch.linalg.vector_norm(y[ok], dim=-1, keepdim=True)
    n, cover = int(x.shape[0]), pose_coverage(y.numpy()) if x.shape[0] else 0.0
    if n < MIN_POSES or cover < MIN_POSE_COVERAGE:
        raise DataError(
            f"{where}: {n} stationary poses covering {cover:.0%} of the cap; at least {MIN_POSES} poses "
            f"covering {MIN_POSE_COVERAGE:.0%} are needed (bend the joint around the whole cap)"
        )
    n_par = 3 if kind == "rotation" else 8
    prior = torch.tensor([prior_rotation] * 3 + [prior_shape] * (n_par - 3), dtype=torch.float64)
    dtype = next(iter(getattr(model, "parameters", lambda: iter(()))()), torch.zeros((), dtype=torch.float32)).dtype

    def angles(theta: Tensor) -> Tensor:
        pred = model((x @ input_map(theta, kind).T).to(dtype)).to(torch.float64)
        cross = torch.linalg.vector_norm(torch.linalg.cross(pred, y, dim=-1), dim=-1)
        return torch.atan2(cross, (pred * y).sum(-1))

    theta = torch.zeros(n_par, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [theta], lr=1.0, max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-15, line_search_fn="strong_wolfe"
    )

    def closure() -> Tensor:
        opt.zero_grad()
        loss = 0.5 * (angles(theta) ** 2).sum() / sigma_fix**2 + 0.5 * ((theta / prior) ** 2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        before = float(angles(torch.zeros(n_par, dtype=torch.float64)).detach().median())
        opt.step(closure)
    th = theta.detach()
    after = angles(th).detach()
    a = input_map(th, kind)
    report = {
        "kind": kind,
        "n_poses": n,
        "pose_coverage": cover,
        "theta": th.tolist(),
        "rotation_deg": math.degrees(float(torch.linalg.vector_norm(th[:3]))),
        "median_residual_deg_before": math.degrees(before),
        "median_residual_deg_after": math.degrees(float(after.median())),
    }
    return a.numpy(), report
