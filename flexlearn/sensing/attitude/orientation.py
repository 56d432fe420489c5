"""Orientation of a raw IMU: 6-axis (accelerometer + gyroscope) or 9-axis (+ magnetometer) attitude filter.

:func:`estimate_orientation` turns logged specific force, angular rate and (optionally) magnetic field into
sensor-to-world unit quaternions (w, x, y, z), world z up; without a magnetometer the heading is that of the
start (unobservable), with one the world is ENU (magnetic north). It checks the input first (shapes, units by
magnitude and by consistency, timestamps) and then runs :func:`flexlearn.sensing.attitude.offline.run_filter`:

* strapdown in an almost-inertial frame I, ``q_g ← q_g ⊗ exp(½ (ω − b̂) Ts)``;
* inclination from the accelerometer low-passed *in I* (τ_acc = 3 s, second-order Butterworth): there linear
  acceleration is the derivative of a bounded velocity and averages out, gravity does not;
  ``q_a ← q(LP(a_I) → e_z) ⊗ q_a``; the estimate is ``q = q_a ⊗ q_g``;
* gyro bias by a Kalman filter at rest (rest detector) and in motion (from the inclination corrections);
* heading ``q_9 = [cos δ/2, 0, 0, sin δ/2] ⊗ q`` with δ from the magnetometer, with magnetic-disturbance
  rejection (a disturbed field holds δ; it never acts on the inclination);
* non-finite samples are skipped and counted; gaps longer than ``gap_time`` restart the low-passes so that
  inclination and heading are re-acquired from the data.

The method is VQF: D. Laidig, T. Seel, "VQF: Highly accurate IMU orientation estimation with bias estimation
and magnetic disturbance rejection", *Information Fusion* 91:187–204, 2023. Equations and scores on BROAD
(Laidig et al., *Data* 6(7):72, 2021) are in ``docs/attitude.md``; the per-sample TorchScript step for the
runtime is :class:`flexlearn.sensing.attitude.step.AttitudeStep`.

:func:`inclination_error` and :func:`heading_error` score an estimate against a reference (BROAD's metrics).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional

import numpy as np
import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.errors import DataError
from flexlearn.lie import quat_to_matrix
from flexlearn.sensing.attitude.offline import AttitudeConfig, FilterResult, run_filter

__all__ = [
    "AttitudeConfig",
    "OrientationWithInfo",
    "estimate_orientation",
    "check_imu_units",
    "regularize_time",
    "inclination_error",
    "heading_error",
    "up_in_sensor",
]

G0 = 9.80665
GYR_MAX = 35.0  # rad/s: 2000 °/s, the largest common MEMS gyro range; beyond it the data are in °/s
_MAG_UNITS = (("µT", 1.0), ("T", 1e6), ("G", 100.0), ("mG", 0.1), ("nT", 1e-3))


def _as_np(x, name: str) -> np.ndarray:
    a = x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 3:
        raise DataError(f"estimate_orientation: '{name}' must have shape (N, 3), got {a.shape}")
    return np.ascontiguousarray(a)


def _turn_ratios(acc: np.ndarray, gyr: np.ndarray, rate_hz: float) -> np.ndarray:
    """Per 0.1 s window of one chunk: ``∠(u_i, u_{i+L}) / (Σ ‖ω × u‖ Ts)`` (u = a/‖a‖) for the windows that
    turn by more than 3° with ‖a‖ within 5 % of g at both ends and no missing sample."""
    L = max(2, int(round(0.1 * rate_hz)))
    if len(acc) <= L:
        return np.empty(0)
    ok = np.isfinite(acc).all(1) & np.isfinite(gyr).all(1)
    a = np.where(ok[:, None], acc, 0.0)
    w = np.where(ok[:, None], gyr, 0.0)
    na = np.linalg.norm(a, axis=1)
    u = a / np.maximum(na, 1e-12)[:, None]
    still = ok & (np.abs(na - G0) < 0.05 * G0)
    pred = np.cumsum(np.r_[0.0, np.linalg.norm(np.cross(w, u), axis=1)[:-1]]) / rate_hz
    i = np.arange(len(a) - L)
    ang = np.arccos(np.clip((u[i] * u[i + L]).sum(1), -1.0, 1.0))
    turn = pred[i + L] - pred[i]
    m = still[i] & still[i + L] & (np.convolve(~ok, np.ones(L + 1), "valid")[: len(i)] == 0) & (turn > 0.05)
    return ang[m] / turn[m]


def _rate_scale(acc: np.ndarray, gyr: np.ndarray, rate_hz: float, chunks: int = 24) -> Optional[float]:
    """How fast the accelerometer direction turns relative to what the gyro says: the median of
    :func:`_turn_ratios` over up to ``chunks`` 2 s chunks spread over the recording (gravity is fixed in
    the world, so ``u̇ = −ω × u`` when ω is in rad/s): ≈ 1 for rad/s, ≈ π/180 for °/s. None when fewer
    than 20 windows turn enough to tell."""
    n = len(acc)
    span = max(1, int(2 * rate_hz))
    starts = np.unique(np.linspace(0, max(0, n - span), chunks).astype(int))
    idx = starts[:, None] + np.arange(span + 1)[None, :]
    idx[:, -1] = n  # one NaN row (index n) after each chunk: no window spans two chunks
    idx = idx.clip(max=n).ravel()
    a, g = acc[np.minimum(idx, n - 1)], gyr[np.minimum(idx, n - 1)]
    a[idx == n] = np.nan
    r = _turn_ratios(a, g, rate_hz)
    return float(np.median(r)) if r.size >= 20 else None


def check_imu_units(acc: np.ndarray, gyr: np.ndarray, rate_hz: float, mag: Optional[np.ndarray] = None) -> None:
    """Check that acc is in m/s², gyr in rad/s and mag in µT.

    acc: median ‖a‖ must lie within 0.4–4 g (g units: ×9.80665; mg: ×0.00980665). gyr: rates
    beyond 35 rad/s (the 99.9th percentile), or an accelerometer direction that turns less than a fifth as
    fast as the gyro says (``u̇ = −ω × u``; 1/57 for °/s, ≈ 1 in rad/s), mean °/s (×π/180). mag: median ‖m‖
    outside 5–500 µT is matched to T (×1e6), G (×100), mG (×0.1) or nT (×1e-3). Non-finite samples are ignored.

    Args:
        acc: accelerometer (N, 3).
        gyr: gyro (N, 3).
        rate_hz: sampling rate [Hz].
        mag: magnetometer (N, 3), or None.

    Raises:
        DataError: naming the field and the factor when a unit is wrong.
    """
    sub = slice(None, None, max(1, len(acc) // 10000))  # magnitudes from at most ~10k samples
    na = np.linalg.norm(acc[sub], axis=1)
    na = na[np.isfinite(na)]
    if na.size == 0:
        raise DataError("estimate_orientation: no finite accelerometer sample")
    med = float(np.median(na))
    if not 0.4 * G0 < med < 4.0 * G0:  # violent motion raises the median, but not to 4 g
        hint = ""
        for unit, f in (("g", G0), ("mg", G0 / 1000)):
            if 0.4 * G0 < med * f < 4.0 * G0:
                hint = f"; it looks like {unit}: multiply 'acc' by {f:g}"
        raise DataError(
            f"estimate_orientation: 'acc' must be specific force in m/s² (median |a| = {med:.4g}, "
            f"expected ≈ {G0}){hint}"
        )
    nw = np.linalg.norm(gyr[sub], axis=1)
    nw = nw[np.isfinite(nw)]
    p999 = float(np.quantile(nw, 0.999)) if nw.size else 0.0
    c = _rate_scale(acc, gyr, rate_hz)
    deg = math.pi / 180
    if p999 > GYR_MAX or (c is not None and c < 0.2):
        raise DataError(
            f"estimate_orientation: 'gyr' must be in rad/s; it looks like °/s (99.9 % of |ω| "
            f"below {p999:.4g}, accelerometer turns {c if c is not None else float('nan'):.3g}× as "
            f"fast as ω): multiply 'gyr' by π/180 = {deg:.6f}"
        )
    if mag is not None:
        nm = np.linalg.norm(mag[sub], axis=1)
        nm = nm[np.isfinite(nm) & (nm > 0)]
        if nm.size == 0:
            raise DataError("estimate_orientation: no finite non-zero magnetometer sample")
        medm = float(np.median(nm))
        if not 5.0 < medm < 500.0:
            unit, f = min(_MAG_UNITS, key=lambda uf: abs(math.log10(medm * uf[1] / 50.0)))
            raise DataError(
                f"estimate_orientation: 'mag' must be in µT (median |m| = {medm:.4g}, Earth's field "
                f"is 25–65 µT); it looks like {unit}: multiply 'mag' by {f:g}"
            )


def regularize_time(t, rate_hz: Optional[float] = None):
    """Map timestamps t [s] (N,) onto a uniform grid.

    The grid index of each sample is ``round((t − t₀)·rate)``. The rate defaults to 1/mean of the regular steps
    (those below 1.5× the median: jitter telescopes, gaps are left out), refined by a line fit of t against
    the slots. Missing samples (gaps) become empty slots (filled with NaN, skipped and counted by the filter).

    Args:
        t: timestamps (N,) [s].
        rate_hz: the grid's rate [Hz]; None: estimated as above.

    Returns:
        ``(rate_hz, slot)`` with slot (N,) int the grid index of each sample.

    Raises:
        DataError: naming the index for a non-finite timestamp, a time that does not increase, or two samples in
            one slot (jitter beyond half a period: pass the true rate or resample first).
    """
    t = np.asarray(t.detach().cpu().numpy() if isinstance(t, Tensor) else t, dtype=np.float64).ravel()
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        raise DataError(
            f"estimate_orientation: timestamp t[{bad[0]}] = {t[bad[0]]} is not finite "
            f"({bad.size} such); fill or drop those samples"
        )
    dec = np.flatnonzero(np.diff(t) <= 0)
    if dec.size:
        i = int(dec[0]) + 1
        raise DataError(
            f"estimate_orientation: timestamps must increase: t[{i}] = {float(t[i])!r} after "
            f"t[{i - 1}] = {float(t[i - 1])!r} ({dec.size} such); sort or drop those samples"
        )
    if rate_hz is None:  # period: mean of the regular steps (jitter telescopes), refined by a line fit
        dt = np.diff(t)
        period, t0 = float(np.mean(dt[dt < 1.5 * np.median(dt)])), t[0]
        for _ in range(2):
            k = np.rint((t - t0) / period)
            period, t0 = np.polyfit(k, t, 1)
        rate_hz = 1.0 / float(period)
    else:
        t0 = t[0]
    slot = np.rint((t - t0) * rate_hz).astype(np.int64)
    slot -= slot[0]
    dup = np.flatnonzero(np.diff(slot) <= 0)
    if dup.size:
        i = int(dup[0]) + 1
        raise DataError(
            f"estimate_orientation: samples {i - 1} and {i} (t = {float(t[i - 1])!r}, {float(t[i])!r}) fall into "
            f"one period of the {rate_hz:.6g} Hz grid; pass the true rate_hz or resample"
        )
    return float(rate_hz), slot


def _on_grid(x: np.ndarray, slot: np.ndarray) -> np.ndarray:
    """Samples x (N, 3) placed at their grid slots; empty slots NaN."""
    out = np.full((int(slot[-1]) + 1, 3), np.nan)
    out[slot] = x
    return out


def _checked_arrays(acc, gyr, mag) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """acc, gyr and mag (or None) as float64 (N, 3) arrays of one length N >= 2; else a `DataError`."""
    A = _as_np(acc, "acc")
    W = _as_np(gyr, "gyr")
    M = _as_np(mag, "mag") if mag is not None else None
    if A.shape[0] != W.shape[0] or A.shape[0] < 2 or (M is not None and M.shape[0] != A.shape[0]):
        raise DataError(
            f"estimate_orientation: acc {A.shape}, gyr {W.shape}"
            + (f", mag {M.shape}" if M is not None else "")
            + " must have the same N >= 2"
        )
    return A, W, M


def _checked_rate(rate_hz: Optional[float], t, n: int) -> tuple[float, Optional[np.ndarray]]:
    """The sampling rate [Hz] and, with timestamps ``t`` (n,), the grid slot of each sample (:func:`regularize_time`).

    A bad rate is a `ConfigError`, timestamps of another length a `DataError`.
    """
    slot = None
    if t is not None:
        check(
            rate_hz is None or (math.isfinite(rate_hz) and rate_hz > 0),
            "estimate_orientation.rate_hz",
            rate_hz,
            "must be > 0",
        )
        if len(t) != n:
            raise DataError(f"estimate_orientation: t has {len(t)} samples, acc {n}")
        rate_hz, slot = regularize_time(t, rate_hz)
    check(
        rate_hz is not None and math.isfinite(rate_hz) and rate_hz > 0,
        "estimate_orientation.rate_hz",
        rate_hz,
        "must be a finite number > 0 (or give t)",
    )
    assert rate_hz is not None  # checked above (check raises ConfigError)
    return float(rate_hz), slot


class OrientationWithInfo(NamedTuple):
    """:func:`estimate_orientation` with ``return_info=True``.

    Attributes:
        quat: sensor-to-world quaternions (N, 4) float64 (w ≥ 0).
        info: bias (N, 3) [rad/s], rest / mag_disturbed / skipped (N,) bool tensors, n_skipped, rate_hz [Hz], and
            result (the :class:`FilterResult` on the grid).
    """

    quat: Tensor
    info: dict[str, Any]


def estimate_orientation(
    acc,
    gyr,
    rate_hz: Optional[float] = None,
    config: Optional[AttitudeConfig] = None,
    *,
    mag=None,
    t=None,
    return_info: bool = False,
    check_units: bool = True,
) -> Tensor | OrientationWithInfo:
    """Sensor-to-world quaternions (N, 4) float64 torch tensor (w ≥ 0) from acc [m/s²] and gyr [rad/s] (N, 3).

    Non-finite samples are skipped and counted; the output never contains NaN.

    Args:
        acc: specific force (N, 3) [m/s²] (numpy array or tensor).
        gyr: angular rate (N, 3) [rad/s].
        rate_hz: sampling rate [Hz]; may be omitted when ``t`` is given.
        config: :class:`AttitudeConfig` (defaults: one parameter set for all recordings).
        mag: magnetometer (N, 3) [µT] → 9-axis, heading in ENU (magnetic north); else 6-axis.
        t: timestamps (N,) [s]: checked (must be finite and increasing; :class:`DataError` names the index)
            and mapped to the grid of ``rate_hz``; gaps are filled with skipped samples.
        return_info: also return a dict (an :class:`OrientationWithInfo`): bias (N, 3) [rad/s] (the gyro-bias
            estimate), rest / mag_disturbed / skipped (N,) bool tensors, n_skipped, rate_hz, and result (the
            :class:`FilterResult` on the grid).
        check_units: check units by magnitude and consistency (:func:`check_imu_units`).

    Returns:
        The quaternions (N, 4), or ``(quat, info)`` (:class:`OrientationWithInfo`) with ``return_info``.

    Raises:
        DataError: bad shapes, units or timestamps.
        ConfigError: a bad rate or config.
    """
    cfg = config or AttitudeConfig()
    cfg.validate()
    A, W, M = _checked_arrays(acc, gyr, mag)
    rate_hz, slot = _checked_rate(rate_hz, t, A.shape[0])
    finite = np.isfinite(A).all(1) & np.isfinite(W).all(1)
    if not finite.any():
        raise DataError("estimate_orientation: no finite sample")
    if check_units:
        check_imu_units(A, W, rate_hz, M)
    if slot is not None:
        A, W = _on_grid(A, slot), _on_grid(W, slot)
        M = _on_grid(M, slot) if M is not None else None
    res: FilterResult = run_filter(W, A, rate_hz, mag=M, config=cfg)
    pick = slot if slot is not None else slice(None)
    q = torch.as_tensor(res.quat[pick])
    if not return_info:
        return q
    info = {
        "bias": torch.as_tensor(res.bias[pick]),
        "rest": torch.as_tensor(res.rest[pick]),
        "mag_disturbed": torch.as_tensor(res.mag_disturbed[pick]),
        "skipped": torch.as_tensor(res.skipped[pick]),
        "n_skipped": res.n_skipped,
        "rate_hz": float(rate_hz),
        "result": res,
    }
    return OrientationWithInfo(q, info)


def up_in_sensor(q: Tensor) -> Tensor:
    """World up direction in the sensor frame, ``R(q)ᵀ e_z`` (..., 3), for sensor-to-world q (..., 4).

    Args:
        q: sensor-to-world quaternions (..., 4), (w, x, y, z).

    Returns:
        Unit up vectors in the sensor frame (..., 3).
    """
    return quat_to_matrix(q)[..., 2, :]


def _mask(q_est: Tensor, q_ref: Tensor, mask) -> Tensor:
    ok = torch.isfinite(q_ref).all(-1) & torch.isfinite(q_est).all(-1)
    if mask is not None:
        ok = ok & torch.as_tensor(mask, dtype=torch.bool).reshape(-1)
    if not bool(ok.any()):
        raise DataError("attitude error: no sample with a finite reference inside the mask")
    return ok


def _summary(ang: Tensor, ok: Tensor) -> dict:
    e = ang[ok]
    return {
        "rms_deg": float(torch.sqrt((e * e).mean())),
        "mean_deg": float(e.mean()),
        "max_deg": float(e.max()),
        "n": int(ok.sum()),
        "errors_deg": torch.where(ok, ang, torch.full_like(ang, float("nan"))),
    }


def inclination_error(q_est: Tensor, q_ref: Tensor, mask: Optional[Tensor] = None) -> dict:
    """Inclination error [deg] between estimated and reference sensor-to-world quaternions (N, 4).

    The angle between the two up directions in the sensor frame, ``∠(R(q̂)ᵀ e_z, R(q)ᵀ e_z)`` (heading-free;
    equal to BROAD's ``2 acos √(w² + z²)`` of ``q̂ ⊗ q⁻¹``). Samples with a non-finite reference are skipped,
    as are those outside ``mask``.

    Args:
        q_est: estimated quaternions q̂ (N, 4).
        q_ref: reference quaternions q (N, 4).
        mask: samples to score (N,) bool; None: all.

    Returns:
        ``{"rms_deg", "mean_deg", "max_deg", "n", "errors_deg"}``.
    """
    q_est = torch.as_tensor(q_est, dtype=torch.float64)
    q_ref = torch.as_tensor(q_ref, dtype=torch.float64)
    ok = _mask(q_est, q_ref, mask)
    one = torch.tensor([1.0, 0, 0, 0], dtype=torch.float64)
    u = up_in_sensor(torch.where(ok.unsqueeze(-1), q_est, one))
    v = up_in_sensor(torch.where(ok.unsqueeze(-1), q_ref, one))
    ang = torch.rad2deg(torch.atan2(torch.linalg.norm(torch.cross(u, v, dim=-1), dim=-1), (u * v).sum(-1)))
    return _summary(ang, ok)


def heading_error(q_est: Tensor, q_ref: Tensor, mask: Optional[Tensor] = None) -> dict:
    """Heading error [deg] (BROAD): with the world-frame error ``e = q̂ ⊗ q⁻¹`` (N, 4), ``2 atan |e_z / e_w|``.

    Both quaternions must map the sensor frame to the same world frame (ENU for 9-axis estimates and the
    BROAD reference).

    Args:
        q_est: estimated quaternions q̂ (N, 4).
        q_ref: reference quaternions q (N, 4).
        mask: samples to score (N,) bool; None: all.

    Returns:
        Same skipping and return value as :func:`inclination_error`.
    """
    q_est = torch.as_tensor(q_est, dtype=torch.float64)
    q_ref = torch.as_tensor(q_ref, dtype=torch.float64)
    ok = _mask(q_est, q_ref, mask)
    one = torch.tensor([1.0, 0, 0, 0], dtype=torch.float64)
    a = torch.where(ok.unsqueeze(-1), q_est, one)
    b = torch.where(ok.unsqueeze(-1), q_ref, one)
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)  # e = a ⊗ conj(b): scalar and z parts
    ew = aw * bw + ax * bx + ay * by + az * bz
    ez = -aw * bz + az * bw - ax * by + ay * bx
    ang = torch.rad2deg(2.0 * torch.atan(torch.abs(ez) / torch.abs(ew).clamp_min(1e-300)))
    return _summary(ang, ok)
