"""Failing sensors per pose: absent, stuck and clipped readings, judged against the module's sensor parts.

The parts (`flexlearn.sensing.parts.SensorParts`) give each stream its clip level (the full scale, less half
an LSB: a reading within half a step of the rail is clipped), its quantisation step and its expected noise
σ = √(nd²·f/2 + lsb²/12). A pose is checked per stream over its hold window [t_start, t_end]:

* absent: a reading that is non-finite or exactly (0, 0, 0) (a failed bus read) is not a sample;
* stuck: an axis whose valid samples in the window are all bit-identical, when the part's noise is at least
  `STUCK_NOISE_LSB` steps (below it identical readings are plausible), over at least `MIN_STUCK_SAMPLES`
  samples; a magnetometer whose polls of a window are all bit-identical (the coil pulse must change it) is
  stuck whatever its noise, and an accelerometer stream bit-identical through the whole sweep of differing
  commanded poses is stuck at every pose;
* clipped: a valid sample with some |component| at or above the clip level.

The rate gyro, when a recording has one (stream ``rate``), is judged the same way per pose (stuck axes where its
noise allows the test, clipped at its full scale): the dataset does not use it, but a frozen gyro is a frozen IMU
and a gyro at its rail is a module that turns.

Quantisation (`grid_notes`): raw readings lie on a grid of one step per axis; a step that is not the part's LSB
means the chip runs at another range than the parts say, so the clip level derived from them is wrong (a finer
step: real clipping goes unseen). Readings on no grid (filtered or calibrated by the logger) are not judged.

Every array is SI: s, T, m/s², rad/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from flexlearn.sensing.parts import ChipAxis, SensorParts

MIN_STUCK_SAMPLES = 3
"""Samples of one pose and axis needed before bit-identical readings count as a stuck sensor."""
STUCK_NOISE_LSB = 2.0
"""The part's noise σ (density over the Nyquist band) in LSB above which identical readings mean a stuck axis:
for σ = 2 LSB two samples quantise to the same step with probability ≈ 0.14, three with ≈ 0.02 ... ."""
MIN_ACCEL_STD = 0.05
"""Floor of the derived stationarity bound on the per-axis std of the specific force [m/s²]."""
STATIONARY_SIGMAS = 2.5
"""The derived stationarity bound is max(`MIN_ACCEL_STD`, 2.5·σ_accel)."""


def clip_level(axis: ChipAxis) -> float:
    """Readings with some |component| ≥ full_scale − lsb/2 are clipped [unit of the axis].

    Args:
        axis: the sensor axis (full scale, lsb).

    Returns:
        The clip level, in the axis's unit.
    """
    return axis.full_scale - 0.5 * axis.lsb


def stuck_testable(axis: ChipAxis, rate_hz: float) -> bool:
    """True when the part's white noise at ``rate_hz`` is at least `STUCK_NOISE_LSB` steps.

    Args:
        axis: the sensor axis (noise density, lsb).
        rate_hz: output rate [Hz].

    Returns:
        ``noise_density · sqrt(rate_hz / 2) ≥ STUCK_NOISE_LSB · lsb``.
    """
    return axis.noise_density * np.sqrt(rate_hz / 2.0) >= STUCK_NOISE_LSB * axis.lsb


@dataclass(frozen=True)
class Limits:
    """What the parts imply for processing.

    Attributes:
        mag_clip: field clip level [T] (or ``processing.saturation_limit`` when set).
        accel_clip: specific-force clip level [m/s²].
        mag_stuck_axes / accel_stuck_axes: per-axis stuck test applies (noise ≥ 2 LSB).
        gyro_clip: angular-rate clip level [rad/s]; gyro_stuck_axes: as ``accel_stuck_axes``.
        accel_noise: expected σ of one accelerometer sample [m/s²].
        max_accel_std: stationarity bound [m/s²] (``processing.max_accel_std`` when set).
    """

    mag_clip: float
    accel_clip: float
    mag_stuck_axes: bool
    accel_stuck_axes: bool
    gyro_clip: float
    gyro_stuck_axes: bool
    accel_noise: float
    max_accel_std: float

    @classmethod
    def from_parts(
        cls, parts: SensorParts, saturation_limit: Optional[float], max_accel_std: Optional[float]
    ) -> "Limits":
        """The limits of a module's sensor parts.

        Args:
            parts: the sensor parts.
            saturation_limit: magnetometer clip level [T]; None: the part's (`clip_level`).
            max_accel_std: stationarity bound [m/s²]; None: max(`MIN_ACCEL_STD`, `STATIONARY_SIGMAS` · accel noise).

        Returns:
            The `Limits`.
        """
        m, imu = parts.magnetometer, parts.imu
        return cls(
            mag_clip=saturation_limit if saturation_limit is not None else clip_level(m.field),
            accel_clip=clip_level(imu.accel),
            mag_stuck_axes=stuck_testable(m.field, m.output_rate_hz),
            accel_stuck_axes=stuck_testable(imu.accel, imu.output_rate_hz),
            gyro_clip=clip_level(imu.gyro),
            gyro_stuck_axes=stuck_testable(imu.gyro, imu.output_rate_hz),
            accel_noise=imu.accel_noise_std,
            max_accel_std=max_accel_std
            if max_accel_std is not None
            else max(MIN_ACCEL_STD, STATIONARY_SIGMAS * imu.accel_noise_std),
        )


def valid_readings(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(finite (M,), present (M,)): finite readings, and finite readings that are not exactly (0, 0, 0).

    Args:
        values: readings (M, 3).

    Returns:
        (finite (M,) bool, present (M,) bool).
    """
    finite = np.all(np.isfinite(values), axis=1)
    return finite, finite & np.any(values != 0.0, axis=1)


def frozen(pose: np.ndarray, values: np.ndarray, use: np.ndarray, n_poses: int) -> tuple[np.ndarray, np.ndarray]:
    """Bit-identical readings per pose, over samples with ``use`` (M,) and ``pose`` (M,) ≥ 0 (non-decreasing).

    Args:
        pose: pose index of each sample (M,) (−1: outside every pose).
        values: readings (M, 3).
        use: samples to consider (M,) bool.
        n_poses: P.

    Returns:
        (count (P,), identical (P, 3)): the sample count, and per axis whether every sample equals the pose's
        first one bitwise (False where count < `MIN_STUCK_SAMPLES`).
    """
    sel = use & (pose >= 0)
    k = pose[sel]
    v = np.ascontiguousarray(values[sel], dtype=np.float64).view(np.uint64)
    count = np.bincount(k, minlength=n_poses)
    if k.size == 0:
        return count, np.zeros((n_poses, 3), dtype=bool)
    first = np.zeros((n_poses, 3), dtype=np.uint64)
    first_idx = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    first[k[first_idx]] = v[first_idx]
    differ = v != first[k]
    n_differ = np.stack([np.bincount(k, weights=differ[:, j], minlength=n_poses) for j in range(3)], -1)
    return count, (n_differ == 0) & (count[:, None] >= MIN_STUCK_SAMPLES)


def whole_stream_frozen(values: np.ndarray, use: np.ndarray, targets: np.ndarray) -> bool:
    """True when every used reading of the sweep is bit-identical although the commanded ``targets`` (P, 3) differ.

    Args:
        values: readings (M, 3).
        use: samples to consider (M,) bool (fewer than `MIN_STUCK_SAMPLES`: False).
        targets: commanded targets (P, 3).

    Returns:
        Whether the whole stream is frozen.
    """
    v = np.ascontiguousarray(values[use], dtype=np.float64)
    if v.shape[0] < MIN_STUCK_SAMPLES:
        return False
    t = np.asarray(targets, dtype=np.float64).reshape(-1, 3)
    targets_differ = t.shape[0] > 1 and bool(np.any(np.ptp(t, axis=0) > 0))
    return targets_differ and bool(np.all(v == v[0]))


def clipped(pose: np.ndarray, values: np.ndarray, use: np.ndarray, level: float, n_poses: int) -> np.ndarray:
    """(P,) some used sample of the pose has |component| ≥ ``level``.

    Args:
        pose: pose index of each sample (M,) (−1: outside every pose).
        values: readings (M, 3).
        use: samples to consider (M,) bool.
        level: the clip level, in the readings' unit.
        n_poses: P.

    Returns:
        (P,) bool.
    """
    with np.errstate(invalid="ignore"):
        hit = use & (pose >= 0) & np.any(np.abs(values) >= level, axis=1)
    return np.bincount(pose[hit], minlength=n_poses) > 0


GRID_TOLERANCE = 1e-3
"""Readings lie on a grid when every distinct value of an axis is x₀ + k·q within this fraction of q."""
STEP_RATIO_BOUNDS = (0.8, 1.25)
"""An observed grid step q within these multiples of the part's LSB agrees with it."""
MIN_GRID_LEVELS = 8
"""Distinct values an axis needs before its grid step is judged."""


def grid_step(values: np.ndarray) -> Optional[float]:
    """The quantisation step q of readings (M, 3): the smallest gap between distinct values of an axis, when every
    distinct value of every judged axis is x₀ + k·q (within `GRID_TOLERANCE`·q) and the axes agree; else None.

    Args:
        values: readings (M, 3); non-finite and (0, 0, 0) rows are ignored.

    Returns:
        q in the readings' unit, or None (too few levels, or no common grid: filtered or calibrated readings).
    """
    _, present = valid_readings(values)
    steps = []
    for j in range(3):
        levels = np.unique(values[present, j])
        if levels.size < MIN_GRID_LEVELS:
            continue
        q = float(np.min(np.diff(levels)))
        k = (levels - levels[0]) / q
        if q <= 0 or np.max(np.abs(k - np.round(k))) > GRID_TOLERANCE:
            return None
        steps.append(q)
    if not steps or max(steps) > min(steps) * (1 + GRID_TOLERANCE):
        return None
    return float(np.median(steps))


def grid_notes(streams: dict[str, tuple[np.ndarray, ChipAxis, str]]) -> list[str]:
    """One line per stream whose readings lie on a grid whose step disagrees with its part's LSB.

    Args:
        streams: name → (readings (M, 3) [SI], the part's axis, the part's config key, e.g.
            ``sensor.magnetometer.field``).

    Returns:
        The lines (none when every step agrees or no grid is seen).
    """
    notes = []
    for name, (values, axis, key) in streams.items():
        q = grid_step(np.asarray(values, dtype=np.float64))
        if q is None:
            continue
        ratio = q / axis.lsb
        if STEP_RATIO_BOUNDS[0] <= ratio <= STEP_RATIO_BOUNDS[1]:
            continue
        rail = f"{ratio * axis.full_scale:.3g} {axis.unit}"  # the same count of steps at the observed step
        consequence = (
            f"the chip runs at a smaller range than the part says (its rail near {rail}), so clipping below "
            f"{clip_level(axis):.4g} {axis.unit} goes unseen"
            if ratio < 1
            else f"the chip runs at a wider range (rail near {rail}) or a coarser mode than the part says, so "
            f"readings past {clip_level(axis):.4g} {axis.unit} are taken as clipped"
        )
        group = "/".join(key.split(".")[:2])  # sensor.imu.gyro -> sensor/imu, the preset's config group
        notes.append(
            f"stream '{name}': readings step by {q:.4g} {axis.unit}, {ratio:.3g}x the LSB {axis.lsb:.4g} {axis.unit} "
            f"of {key}: {consequence}; set the part's range ({group}=<preset>, or {key}.full_scale and {key}.lsb)"
        )
    return notes
