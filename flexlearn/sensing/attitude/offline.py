"""Attitude filter configuration, coefficients and the offline (numba) path.

:class:`AttitudeConfig` holds one default parameter set, in physical units (seconds, rad/s, m/s²), used
for every recording; :func:`make_params` turns it and the sampling rate into the parameter vector of the
kernels (:mod:`flexlearn.sensing.attitude.kernels`) and :func:`initial_state` gives the start state.
:func:`run_filter` runs a logged recording through the compiled kernel (about a microsecond per sample);
:class:`~flexlearn.sensing.attitude.step.AttitudeStep` runs the same kernel sample by sample in TorchScript.

Method: D. Laidig, T. Seel, "VQF: Highly accurate IMU orientation estimation with bias estimation and
magnetic disturbance rejection", *Information Fusion* 91:187–204, 2023 — see ``docs/attitude.md``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional

import numpy as np

from flexlearn.config import check
from flexlearn.errors import DataError
from flexlearn.sensing.attitude import kernels as K

__all__ = ["AttitudeConfig", "FilterResult", "butter2", "make_params", "initial_state", "run_filter"]

DEG = math.pi / 180.0
_BIAS_DRIFT = 0.1 * DEG  # rad/s: the bias variance grows by this squared over one forgetting time


@dataclasses.dataclass
class AttitudeConfig:
    """One parameter set for every recording (the defaults; not tuned per trial). Units in brackets.

    Inclination: ``tau_acc`` [s] time constant of the accelerometer low-pass in the almost-inertial frame
    once the gyro bias is known to ``bias_sigma_motion``; ``adaptive_tau``: while the bias is less certain
    (start-up) the time constant is ``tau_acc (σ_motion/σ_b)^(1/3)`` (`kernels.acc_time_constant`).
    Gyro bias: ``bias_sigma_init`` [rad/s] initial uncertainty; ``bias_forgetting_time`` [s] time in
    which the variance grows by (0.1 °/s)²; ``bias_clip`` [rad/s] bound on the estimate and the innovation;
    ``bias_sigma_motion`` / ``bias_sigma_rest`` [rad/s] steady uncertainty reached in motion / at rest;
    ``bias_vertical_forgetting`` [-] weight ratio of the (unobservable) vertical axis in motion.
    Rest: ``rest_time`` [s] minimum duration; ``rest_filter_tau`` [s] low-pass of the detector;
    ``rest_gyr`` [rad/s] and ``rest_acc`` [m/s²] deviation thresholds.
    Heading (9-axis): ``tau_mag`` [s]; ``mag_current_tau`` [s] low-pass of norm and dip;
    ``mag_ref_tau`` [s] reference tracking; ``mag_norm_th`` [-] relative and ``mag_dip_th`` [rad]
    disturbance thresholds; ``mag_new_time`` / ``mag_new_first_time`` [s] to accept a new field while
    turning faster than ``mag_new_min_gyr`` [rad/s]; ``mag_min_undisturbed_time`` [s];
    ``mag_max_rejection_time`` [s] longest full rejection, then the gain is divided by
    ``mag_rejection_factor`` [-]. Gaps: ``gap_time`` [s] longest gap bridged with the last rate; after a
    longer one the filter restarts its low-passes (re-acquires inclination and heading from the data);
    ``gap_uncertainty``: the inclination uncertainty grown through a gap, (‖ω_last‖ + σ_b)·gap, shortens the
    accelerometer time constant like a bias uncertainty σ_θ/τ_acc until the filter has re-acquired it
    (`kernels.gap_uncertainty`; needs ``adaptive_tau``).
    """

    tau_acc: float = 3.0
    tau_mag: float = 9.0
    bias_sigma_init: float = 0.5 * DEG
    bias_forgetting_time: float = 100.0
    bias_clip: float = 2.0 * DEG
    bias_sigma_motion: float = 0.1 * DEG
    bias_vertical_forgetting: float = 1e-4
    bias_sigma_rest: float = 0.03 * DEG
    rest_time: float = 1.5
    rest_filter_tau: float = 0.5
    rest_gyr: float = 2.0 * DEG
    rest_acc: float = 0.5
    mag_current_tau: float = 0.05
    mag_ref_tau: float = 20.0
    mag_norm_th: float = 0.1
    mag_dip_th: float = 10.0 * DEG
    mag_new_time: float = 20.0
    mag_new_first_time: float = 5.0
    mag_new_min_gyr: float = 20.0 * DEG
    mag_min_undisturbed_time: float = 0.5
    mag_max_rejection_time: float = 60.0
    mag_rejection_factor: float = 2.0
    gap_time: float = 0.05
    motion_bias: bool = True
    rest_bias: bool = True
    mag_rejection: bool = True
    adaptive_tau: bool = True
    gap_uncertainty: bool = True

    def validate(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool):
                continue
            check(
                isinstance(v, (int, float)) and math.isfinite(v) and v > 0,
                f"attitude.{f.name}",
                v,
                "must be a finite number > 0",
            )


@dataclasses.dataclass
class FilterResult:
    """Output of :func:`run_filter`: quat (N, 4) unit (w ≥ 0), bias (N, 3) [rad/s], rest and
    mag_disturbed (N,) bool, skipped (N,) bool (non-finite input), state (the final kernel state)."""

    quat: np.ndarray
    bias: np.ndarray
    rest: np.ndarray
    mag_disturbed: np.ndarray
    skipped: np.ndarray
    state: np.ndarray

    @property
    def n_skipped(self) -> int:
        return int(self.skipped.sum())


def butter2(tau: float, ts: float) -> List[float]:
    """Second-order Butterworth low-pass (b0, b1, b2, a1, a2) for time constant tau [s], sample time ts [s].

    Cut-off ``f_c = √2/(2π τ)``; bilinear transform with pre-warping, ``C = tan(π f_c Ts)``,
    ``D = C² + √2 C + 1``: ``b = (C², 2C², C²)/D``, ``a1 = 2(C² − 1)/D``, ``a2 = (C² − √2 C + 1)/D``.
    For ``τ < Ts/2`` (f_c near Nyquist) the filter is a pass-through.

    Args:
        tau: time constant τ [s].
        ts: sample time Ts [s].

    Returns:
        ``[b0, b1, b2, a1, a2]``.
    """
    if tau < ts / 2:
        return [1.0, 0.0, 0.0, 0.0, 0.0]
    fc = math.sqrt(2.0) / (2.0 * math.pi * tau)
    c = math.tan(math.pi * fc * ts)
    d = c * c + math.sqrt(2.0) * c + 1.0
    b0 = c * c / d
    return [b0, 2.0 * b0, b0, 2.0 * (c * c - 1.0) / d, (c * c - math.sqrt(2.0) * c + 1.0) / d]


def make_params(rate_hz: float, config: Optional[AttitudeConfig] = None) -> np.ndarray:
    """Kernel parameter vector (``kernels.PARAM_SIZE``,) float64 for a sampling rate [Hz].

    Bias noise model (VQF §3.3): ``P0 = σ_init²``; per-sample process noise ``V = (0.1 °/s)² Ts / T_f``;
    measurement noise chosen so that continuous updates settle at σ: ``W = σ⁴/V + σ²`` (motion: σ_motion,
    vertical: W/f_v, rest: σ_rest). Heading gains ``k = 1 − exp(−Ts/τ)``.

    Args:
        rate_hz: sampling rate [Hz], finite and > 0.
        config: the filter's parameters; None: the defaults.

    Returns:
        The parameter vector (``kernels.PARAM_SIZE``,) float64.

    Raises:
        ConfigError: for an invalid ``config`` or ``rate_hz``.
    """
    cfg = config or AttitudeConfig()
    cfg.validate()
    check(math.isfinite(rate_hz) and rate_hz > 0, "attitude.rate_hz", rate_hz, "must be a finite number > 0")
    ts = 1.0 / rate_hz
    v = _BIAS_DRIFT**2 * ts / cfg.bias_forgetting_time
    wm = cfg.bias_sigma_motion**4 / v + cfg.bias_sigma_motion**2
    wr = cfg.bias_sigma_rest**4 / v + cfg.bias_sigma_rest**2
    p = [ts] + butter2(cfg.tau_acc, ts) + [cfg.tau_acc]
    p += butter2(cfg.rest_filter_tau, ts) + [cfg.rest_filter_tau]
    p += butter2(cfg.mag_current_tau, ts) + [cfg.mag_current_tau]
    p += [
        1.0 - math.exp(-ts / cfg.tau_mag),
        1.0 - math.exp(-ts / cfg.mag_ref_tau),
        cfg.bias_clip,
        cfg.bias_sigma_init**2,
        v,
        wm,
        wm / max(cfg.bias_vertical_forgetting, 1e-10),
        wr,
        cfg.rest_gyr,
        cfg.rest_acc,
        cfg.rest_time,
        cfg.mag_norm_th,
        cfg.mag_dip_th,
        cfg.mag_new_time,
        cfg.mag_new_first_time,
        cfg.mag_new_min_gyr,
        cfg.mag_min_undisturbed_time,
        cfg.mag_max_rejection_time,
        cfg.mag_rejection_factor,
        cfg.tau_mag,
        cfg.gap_time,
        float(cfg.motion_bias),
        float(cfg.rest_bias),
        float(cfg.mag_rejection),
        float(cfg.gap_uncertainty),
        float(cfg.adaptive_tau),
        cfg.bias_sigma_motion**2,
    ]  # p[43], p[44], p[45]
    assert len(p) == K.PARAM_SIZE
    return np.asarray(p, dtype=np.float64)


def initial_state(params: np.ndarray, bias=None) -> np.ndarray:
    """Start state (``kernels.STATE_SIZE``,).

    Identity quaternions, zero bias (or ``bias`` [rad/s]) with covariance σ_init² I, every low-pass in its
    averaging start-up, magnetic field not yet accepted (disturbed, rejection time spent so the start runs at the
    reduced gain), 1/n heading gain.

    Args:
        params: the parameter vector (`make_params`).
        bias: start gyro bias (3,) [rad/s]; None: zero.

    Returns:
        The state (``kernels.STATE_SIZE``,) float64.
    """
    s = np.zeros(K.STATE_SIZE)
    s[0] = s[4] = 1.0
    s[134] = s[138] = s[142] = 1.0  # H = I of the rest update
    s[11] = 1.0
    if bias is not None:
        s[12:15] = np.asarray(bias, dtype=np.float64)
    s[15] = s[19] = s[23] = params[22]
    s[29] = 1.0
    s[33] = params[36]
    s[34] = -1.0
    return s


def _arr(x, name: str, n: Optional[int]) -> np.ndarray:
    a = x.detach().cpu().numpy() if hasattr(x, "detach") else x
    a = np.ascontiguousarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 3 or (n is not None and a.shape[0] != n):
        raise DataError(f"attitude: '{name}' must have shape (N, 3) like gyr, got {a.shape}")
    return a


def run_filter(
    gyr, acc, rate_hz: float, mag=None, config: Optional[AttitudeConfig] = None, state: Optional[np.ndarray] = None
) -> FilterResult:
    """Run the filter over a recording.

    With ``mag`` the quaternions are q_{ES} with E = ENU (magnetic north), else q_{E_i S}
    (z up, heading of the start). No unit or timestamp checks here (see ``estimate_orientation``).

    Args:
        gyr: gyro (N, 3) [rad/s].
        acc: accelerometer (N, 3) [m/s²].
        rate_hz: sampling rate [Hz].
        mag: optional magnetometer (N, 3) (any unit; µT by convention).
        config: the filter's parameters; None: the defaults.
        state: continues a previous run (from :attr:`FilterResult.state`); it is copied, not changed.

    Returns:
        The `FilterResult`.
    """
    p = make_params(rate_hz, config)
    g = _arr(gyr, "gyr", None)
    a = _arr(acc, "acc", g.shape[0])
    use_mag = mag is not None
    m = _arr(mag, "mag", g.shape[0]) if use_mag else np.zeros((1, 3))
    s = initial_state(p) if state is None else np.array(state, dtype=np.float64)
    n = g.shape[0]
    quat = np.empty((n, 4))
    bias = np.empty((n, 3))
    flags = np.empty(n, dtype=np.int8)
    K.run_batch(g, a, m, use_mag, s, p, quat, bias, flags)
    return FilterResult(quat, bias, (flags & 1) > 0, (flags & 2) > 0, (flags & 4) > 0, s)
