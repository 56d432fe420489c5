"""The Cramér–Rao bound of the field-to-direction fix: how well *any* estimator can do on a simulated module.

A stationary pose gives one coil field ΔB = b(u) + n in the child sensor frame, n ~ N(0, σ² I) per axis, σ²
set by the samples averaged (σ²_pose = σ²_mag (1/N_on + 1/N_off), seed 002 III-B1). The direction network sees
only the unit field ΔB/‖ΔB‖ (the amplitude is normalised away), whose Fisher information about the child
direction u (two tangent angles, rad) is

    F = Jᵀ (I − b̂ b̂ᵀ) J / σ²,      J = ∂b/∂u  (3 × 2, T per rad),

and every unbiased estimator of u has covariance ⪰ F⁻¹. The label it is scored against (the accelerometer's
parent axis, `flexlearn.data.process`) carries its own error; the bound on the scored angular error is the
distribution of |K e + e_l|, e ~ N(0, F⁻¹), e_l the label error, K = ∂label/∂u. ``full_vector=True`` also uses
the field magnitude (F = JᵀJ / σ²): what a model fed the raw ΔB could reach on this one module.

The noise levels are measured from the dataset (ΔB − truth ΔB, label − truth label), not taken from the
simulator's configuration; the field b(u) is the module's own (its tolerance draw, coil current, sensor mount,
gain and the tumble's W), rebuilt from the sweep's metadata. Simulated datasets only (they carry the truth).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import torch

from flexlearn.config import from_dict
from flexlearn.errors import DataError
from flexlearn.metrics import CAP_DEG, angular_error_deg, colatitude_deg
from flexlearn.sim.modules import ModuleDraw, PlacedCoil
from flexlearn.sim.rig import build_coil, child_frame, sensor_position
from flexlearn.sim.rig_config import RigConfig

__all__ = ["module_field", "tangent_jacobian", "measured_noise", "error_bound", "recording_bound", "model_efficiency"]

FieldFn = Callable[[np.ndarray], np.ndarray]


def module_field(meta: dict[str, Any]) -> tuple[FieldFn, FieldFn]:
    """(ΔB(u), label(u)) of the simulated module a dataset's ``meta`` describes; u (N, 3) child directions in
    the parent frame → (N, 3) [T] noise-free field in the sensor frame (after the processing's W), and the
    noise-free label (unit, sensor frame).

    Args:
        meta: the dataset's metadata; needs ``source`` with the simulated sweep's ``module`` draw, ``config``,
            ``coil`` current and ``sensors`` block (``calibration.W`` is applied when present).

    Returns:
        (field, label): functions of u (N, 3) giving ΔB (N, 3) [T] and the unit label (N, 3).

    Raises:
        DataError: ``meta`` describes no simulated sweep.
    """
    src = meta.get("source") if isinstance(meta, dict) else None
    if not isinstance(src, dict) or "module" not in src or "config" not in src:
        raise DataError(
            "dataset meta has no simulated sweep ('source' with 'module' and 'config'): "
            "the bound needs the module's geometry"
        )
    nominal = from_dict(RigConfig, src["config"])
    d = src["module"]["draw"]
    arr = {k: np.asarray(d[k], dtype=np.float64) for k in ("mag_axes", "sensor_offset", "coil_offset", "coil_tilt")}
    draw = ModuleDraw(
        arr["mag_axes"],
        arr["sensor_offset"],
        float(d["pivot_radius"]),
        float(d["joint_length"]),
        arr["coil_offset"],
        arr["coil_tilt"],
    )
    cfg = dataclasses.replace(nominal, geometry=draw.geometry(nominal.geometry))
    coil = PlacedCoil(build_coil(cfg.coil, cfg.coil_layers), draw)
    current = float(src["coil"]["current"])
    mag = src["sensors"]["magnetometer"]
    mount = np.asarray(mag["mount"], dtype=np.float64)
    axes = np.asarray(mag["axes"], dtype=np.float64) if "axes" in mag else draw.mag_axes  # chips' rotations too
    gain = np.asarray(mag["soft_iron"], dtype=np.float64) @ axes.T
    cal = meta.get("calibration")
    w = np.asarray(cal["W"], dtype=np.float64) if isinstance(cal, dict) and "W" in cal else np.eye(3)
    joint = cfg.geometry.joint

    def field(u: np.ndarray) -> np.ndarray:
        r_rel, r_child = child_frame(u, mount, joint)
        b = coil.field(torch.from_numpy(sensor_position(u, r_rel, cfg))).numpy()
        return current * np.einsum("ij,jk,nlk,nl->ni", w, gain, r_child, b)

    def label(u: np.ndarray) -> np.ndarray:
        return child_frame(u, mount, joint)[1][:, 2, :]

    return field, label


def tangent_jacobian(fn: FieldFn, u: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """∂fn/∂(tangent angles) (N, 3, 2) at unit directions u (N, 3), central differences along an orthonormal
    tangent basis of u on S² (t₁ = ∂u/∂colatitude, unit everywhere, t₂ = u × t₁).

    Args:
        fn: function of directions (N, 3) returning (N, 3).
        u: unit directions (N, 3).
        step: finite-difference angle [rad].

    Returns:
        The Jacobian (N, 3, 2) per tangent angle [fn's unit per rad].
    """
    lam = np.arccos(np.clip(-u[:, 2], -1.0, 1.0))
    th = np.arctan2(u[:, 1], u[:, 0])
    t1 = np.stack([np.cos(lam) * np.cos(th), np.cos(lam) * np.sin(th), np.sin(lam)], axis=-1)
    t2 = np.cross(u, t1)
    cols = [
        (fn(u * np.cos(step) + t * np.sin(step)) - fn(u * np.cos(step) - t * np.sin(step))) / (2 * step)
        for t in (t1, t2)
    ]
    return np.stack(cols, axis=-1)


def measured_noise(
    delta_b: np.ndarray, truth_delta_b: np.ndarray, n_coil_on: np.ndarray, perpendicular: bool = False
) -> np.ndarray:
    """Per-pose field noise variance (N,) [T² per axis]: |ΔB − truth|²/3 fitted as c₀ + c₁/N_on (least squares
    over the poses given; the coil-off baseline gives c₀, the coil-on mean c₁/N_on).

    ``perpendicular``: from the two components ⟂ the true field only, |(I − b̂b̂ᵀ)(ΔB − truth)|²/2 — the ones the
    unit field sees. An error along b̂ (a coil-on sample taken before the current settled scales ΔB) leaves the
    direction alone and would otherwise count as noise.

    Args:
        delta_b: measured coil fields (N, 3) [T].
        truth_delta_b: noise-free coil fields (N, 3) [T].
        n_coil_on: coil-on samples averaged per pose (N,).
        perpendicular: use only the two components ⟂ the true field.

    Returns:
        The fitted variance (N,) [T²] per axis.

    Raises:
        DataError: the fit gives a non-positive variance.
    """
    r = delta_b - truth_delta_b
    if perpendicular:
        bh = truth_delta_b / np.linalg.norm(truth_delta_b, axis=-1, keepdims=True)
        r = r - np.sum(r * bh, axis=-1, keepdims=True) * bh
    r2 = np.sum(r**2, axis=-1) / (2.0 if perpendicular else 3.0)
    a = np.stack([np.ones_like(r2), 1.0 / np.asarray(n_coil_on, dtype=np.float64)], axis=-1)
    coef, *_ = np.linalg.lstsq(a, r2, rcond=None)
    var = a @ coef
    if not np.all(var > 0):
        raise DataError(f"field noise fit c0 + c1/N_on gave a non-positive variance (c0, c1 = {coef.tolist()})")
    return var


def label_noise_var(label: np.ndarray, truth_label: np.ndarray) -> tuple[float, np.ndarray]:
    """Random label error variance [rad² per tangent axis] and the module's constant accelerometer bias β (3,)
    [in g] it leaves out.

    label = (l + β + n)/|l + β + n| ≈ l + P(β + n), P = I − llᵀ, for the true label l: a constant bias β is a
    smooth function of the pose that a model learns with the labels, so only the rest, n, limits the score.
    β = argmin Σ|e_i − P_i β|² (e = label − l), i.e. (Σ P_i) β = Σ P_i e_i.

    Args:
        label: measured unit labels (N, 3).
        truth_label: true unit labels (N, 3).

    Returns:
        (variance [rad²] per tangent axis, β (3,)).
    """
    e = label - truth_label
    proj = np.eye(3)[None] - truth_label[:, :, None] * truth_label[:, None, :]
    beta = np.linalg.solve(proj.sum(axis=0), np.einsum("nij,nj->i", proj, e))
    rest = e - np.einsum("nij,j->ni", proj, beta)
    return float(np.mean(np.sum(rest**2, axis=-1)) / 2.0), beta


def error_bound(
    field: FieldFn,
    label: FieldFn,
    u: np.ndarray,
    noise_var: np.ndarray,
    label_var: float,
    full_vector: bool = False,
    draws: int = 64,
    seed: int = 0,
) -> np.ndarray:
    """Samples (N·draws,) [deg] of the smallest achievable scored angular error at directions u (N, 3).

    ``noise_var`` (N,) [T²] field noise per axis; ``label_var`` [rad²] label error variance per tangent axis.
    e = K e_u + e_l with e_u ~ N(0, F⁻¹) (see the module docstring), e_l ~ N(0, label_var I₂) in the label's
    tangent plane; returned as |e| in degrees (first order in the errors).

    Args:
        field: noise-free field ΔB(u) (N, 3) [T], e.g. from `module_field`.
        label: noise-free unit label(u) (N, 3).
        u: unit child directions (N, 3) in the parent frame.
        noise_var: field noise variance (N,) [T²] per axis.
        label_var: label error variance [rad²] per tangent axis.
        full_vector: use the full field, magnitude included (else the unit field only).
        draws: Monte Carlo draws per direction.
        seed: seed of the draws.

    Returns:
        The error samples (N·draws,) [deg].
    """
    j = tangent_jacobian(field, u)
    b = field(u)
    bh = b / np.linalg.norm(b, axis=-1, keepdims=True)
    proj = np.eye(3)[None] - (0.0 if full_vector else 1.0) * bh[:, :, None] * bh[:, None, :]
    fisher = np.einsum("nki,nkl,nlj->nij", j, proj, j) / np.asarray(noise_var)[:, None, None]
    k = tangent_jacobian(label, u)  # (N, 3, 2) label per tangent angle
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((u.shape[0], draws, 2))
    e_u = np.einsum("nij,ndj->ndi", np.linalg.cholesky(np.linalg.inv(fisher)), z)
    e = np.einsum("nki,ndi->ndk", k, e_u)
    basis = np.linalg.qr(k)[0]  # (N, 3, 2) the label's tangent plane
    e_l = np.sqrt(max(label_var, 0.0)) * rng.standard_normal((u.shape[0], draws, 2))
    e += np.einsum("nki,ndi->ndk", basis, e_l)
    return np.degrees(np.linalg.norm(e, axis=-1)).ravel()


def _truth_rows(truth: Any, pose_id: np.ndarray) -> dict[str, np.ndarray]:
    """The simulator's truth (u, label, db: (N, 3) each) of the dataset's poses, matched by ``pose_id``."""
    table = truth.truth
    if not isinstance(table, dict) or "pose_id" not in table:
        raise DataError("the truth sweep has no 'truth' table (pose_id, u, label, db): not a simulated sweep")
    order = np.argsort(table["pose_id"])
    at = np.searchsorted(table["pose_id"], pose_id, sorter=order)
    rows = order[np.clip(at, 0, len(order) - 1)]
    missing = pose_id[table["pose_id"][rows] != pose_id]
    if missing.size:
        raise DataError(f"dataset pose_id {int(missing[0])} (and {missing.size - 1} more) not in the truth sweep")
    return {k: np.stack([table[f"{k}_{c}"][rows] for c in "xyz"], axis=-1) for k in ("u", "label", "db")}


def recording_bound(truth: Any, dataset: Any) -> tuple[dict[str, Any], np.ndarray]:
    """The bound on a dataset ingested from a recording of a simulated sweep.

    The recording carries no truth; ``truth`` (the simulator's `RawSweep`, with ``truth`` and ``meta``) gives the
    true direction, label and coil field of each pose (by ``pose_id``), and the module for `module_field`. The
    dataset's tumble calibration W (``meta['calibration']``) is applied to the true field as processing applied it
    to ΔB. Field noise (`measured_noise` ⟂ the field) and label noise (`label_noise_var`, without the constant
    accelerometer bias a model learns) are measured on the dataset against the truth. Scored on
    the dataset's test split within the trained cap (true label colatitude ≤ `flexlearn.metrics.CAP_DEG`).

    Args:
        truth: the simulated sweep that was recorded.
        dataset: the `DirectionDataset` ingested from its recording.

    Returns:
        (JSON-ready dict: poses, noise levels, ``bound_unit_field_{median,p95}_deg``; the dataset rows (N,) bool
        the bound is taken over, to score a model on the same poses).

    Raises:
        DataError: the truth sweep lacks truth, a pose is not in it, or no test pose lies within the cap.
    """
    t = _truth_rows(truth, np.asarray(dataset.pose_id))
    cal = dataset.meta.get("calibration") if isinstance(dataset.meta, dict) else None
    w = np.asarray(cal["W"], dtype=np.float64) if isinstance(cal, dict) and "W" in cal else np.eye(3)
    truth_db = t["db"] @ w.T
    noise = measured_noise(dataset.delta_b, truth_db, dataset.n_coil_on, perpendicular=True)
    label_var, beta = label_noise_var(dataset.label, t["label"])
    rows = (np.asarray(dataset.split) == "test") & (colatitude_deg(torch.as_tensor(t["label"])).numpy() <= CAP_DEG)
    if not rows.any():
        raise DataError(f"no test pose of the dataset lies within the trained cap ({CAP_DEG} deg)")
    field, label = module_field({"source": truth.meta, "calibration": {"W": w.tolist()}})
    e = error_bound(field, label, t["u"][rows], noise[rows], label_var)
    return {
        "test_poses_in_cap": int(rows.sum()),
        "field_noise_uT_median": float(np.sqrt(np.median(noise)) * 1e6),
        "field_uT_median": float(np.median(np.linalg.norm(truth_db, axis=-1)) * 1e6),
        "label_noise_deg": float(np.degrees(np.sqrt(label_var))),
        "accel_bias_deg": float(np.degrees(np.linalg.norm(beta))),
        "bound_unit_field_median_deg": float(np.median(e)),
        "bound_unit_field_p95_deg": float(np.percentile(e, 95)),
    }, rows


def model_efficiency(model: torch.nn.Module, dataset: Any, rows: np.ndarray, bound: dict[str, Any]) -> dict[str, float]:
    """A direction model's angular error on the dataset's ``rows`` and its ratio to the unit-field bound.

    Args:
        model: the direction MLP (Δb (n, 3) [T] → direction (n, 3)).
        dataset: the DirectionDataset (``delta_b``, ``label``).
        rows: boolean mask of the rows scored (the test poses inside the cap).
        bound: holds ``bound_unit_field_median_deg`` and ``bound_unit_field_p95_deg`` (see :func:`error_bound`).

    Returns:
        ``model_median_deg``, ``model_p95_deg`` and their ratios to the bound, ``efficiency_median`` and
        ``efficiency_p95``.
    """
    with torch.no_grad():
        pred = model(torch.as_tensor(dataset.delta_b[rows], dtype=torch.float32)).double()
    err = angular_error_deg(pred, torch.as_tensor(dataset.label[rows], dtype=torch.float64)).numpy()
    median, p95 = float(np.median(err)), float(np.percentile(err, 95))
    return {
        "model_median_deg": median,
        "model_p95_deg": p95,
        "efficiency_median": median / float(bound["bound_unit_field_median_deg"]),
        "efficiency_p95": p95 / float(bound["bound_unit_field_p95_deg"]),
    }
