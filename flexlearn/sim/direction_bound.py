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
from flexlearn.sensing.coil import PlanarCoil
from flexlearn.sim.modules import ModuleDraw, PlacedCoil
from flexlearn.sim.rig import child_frame, sensor_position
from flexlearn.sim.rig_config import RigConfig

__all__ = ["module_field", "tangent_jacobian", "measured_noise", "error_bound"]

FieldFn = Callable[[np.ndarray], np.ndarray]


def module_field(meta: dict[str, Any]) -> tuple[FieldFn, FieldFn]:
    """(ΔB(u), label(u)) of the simulated module a dataset's ``meta`` describes; u (N, 3) child directions in
    the parent frame → (N, 3) [T] noise-free field in the sensor frame (after the processing's W), and the
    noise-free label (unit, sensor frame)."""
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
    coil = PlacedCoil(PlanarCoil(cfg.coil), draw)
    current = float(src["coil"]["current"])
    mag = src["sensors"]["magnetometer"]
    mount = np.asarray(mag["mount"], dtype=np.float64)
    gain = np.asarray(mag["soft_iron"], dtype=np.float64) @ draw.mag_axes.T
    cal = meta.get("calibration")
    w = np.asarray(cal["W"], dtype=np.float64) if isinstance(cal, dict) and "W" in cal else np.eye(3)

    def field(u: np.ndarray) -> np.ndarray:
        r_rel, r_child = child_frame(u, mount)
        b = coil.field(torch.from_numpy(sensor_position(u, r_rel, cfg))).numpy()
        return current * np.einsum("ij,jk,nlk,nl->ni", w, gain, r_child, b)

    def label(u: np.ndarray) -> np.ndarray:
        return child_frame(u, mount)[1][:, 2, :]

    return field, label


def tangent_jacobian(fn: FieldFn, u: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """∂fn/∂(tangent angles) (N, 3, 2) at unit directions u (N, 3), central differences along an orthonormal
    tangent basis of u on S² (t₁ = ∂u/∂colatitude, unit everywhere, t₂ = u × t₁)."""
    lam = np.arccos(np.clip(-u[:, 2], -1.0, 1.0))
    th = np.arctan2(u[:, 1], u[:, 0])
    t1 = np.stack([np.cos(lam) * np.cos(th), np.cos(lam) * np.sin(th), np.sin(lam)], axis=-1)
    t2 = np.cross(u, t1)
    cols = [
        (fn(u * np.cos(step) + t * np.sin(step)) - fn(u * np.cos(step) - t * np.sin(step))) / (2 * step)
        for t in (t1, t2)
    ]
    return np.stack(cols, axis=-1)


def measured_noise(delta_b: np.ndarray, truth_delta_b: np.ndarray, n_coil_on: np.ndarray) -> np.ndarray:
    """Per-pose field noise variance (N,) [T² per axis]: |ΔB − truth|²/3 fitted as c₀ + c₁/N_on (least squares
    over the poses given; the coil-off baseline gives c₀, the coil-on mean c₁/N_on)."""
    r2 = np.sum((delta_b - truth_delta_b) ** 2, axis=-1) / 3.0
    a = np.stack([np.ones_like(r2), 1.0 / np.asarray(n_coil_on, dtype=np.float64)], axis=-1)
    coef, *_ = np.linalg.lstsq(a, r2, rcond=None)
    var = a @ coef
    if not np.all(var > 0):
        raise DataError(f"field noise fit c0 + c1/N_on gave a non-positive variance (c0, c1 = {coef.tolist()})")
    return var


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
