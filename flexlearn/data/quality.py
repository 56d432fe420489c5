"""Sample acceptance and pose quality filters for sweep processing (seed 002, III-B1 and III-B2).

Everything is vectorised over samples and poses: samples are assigned to hold windows and pulses by
`np.searchsorted` over sorted times, and per-pose quantities are segment sums (`np.bincount`).
Times in s, fields in T.

Acceptance of a magnetometer poll (III-B2):
* fresh: it differs bitwise from the previous poll (a stale repeat of an unreplaced conversion is not a
  sample); the first poll is fresh;
* coil-on: its last pulse started at t_on ≤ t, and t_on + settle_time ≤ t ≤ t_off, and that pulse belongs
  to the same pose (its t_on lies in the pose's hold window);
* coil-off: t lies outside [t_on, t_off + settle_time] of every pulse;
* only polls inside a pose's hold window [t_start, t_end] are used for that pose.

NaN handling (decision): a poll or accelerometer sample with any non-finite component is discarded as a
sample, like a stale poll; the pose is kept if enough valid samples remain. A pose that fails the sample
count checks only because of discarded non-finite samples is dropped with reason ``nan`` (so that a bus
fault is told apart from a short pulse).

Drop reasons, one per pose, the first that applies in the order of `REASONS`:
``no_pulse`` (no coil switch-on inside the hold window), ``no_accel`` (fewer than min_accel_samples
accelerometer samples), ``nan`` (see above), ``absent`` (as ``nan``, for readings of exactly (0, 0, 0): a
failed bus read, or a window without any magnetometer poll), ``accel_saturated`` (a specific force at the IMU
part's full scale), ``accel_stuck`` (bit-identical readings where the part's noise forbids them,
`flexlearn.data.faults`), ``gyro_saturated`` and ``gyro_stuck`` (the same of the rate gyro, when the recording
has a ``rate`` stream), ``saturated`` (a used poll with |component| ≥ the magnetometer's clip level:
``saturation_limit``, or the part's full scale; a clipped axis is also constant, so this comes first),
``mag_stuck`` (as ``accel_stuck``), ``too_few_coil_on`` (fewer than min_coil_on accepted coil-on
samples over all the pose's pulses), ``missing_coil_off`` (fewer than min_coil_off_per_side accepted coil-off
samples in the hold window before t_on or after t_off of some pulse: the linear ambient fit would extrapolate),
and
``not_stationary`` (per-axis std of the specific force over the hold window above max_accel_std).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.errors import DataError
from flexlearn.sensing.streams import RawSweep

REASONS = (
    "no_pulse",
    "no_accel",
    "nan",
    "absent",
    "accel_saturated",
    "accel_stuck",
    "gyro_saturated",
    "gyro_stuck",
    "saturated",
    "mag_stuck",
    "too_few_coil_on",
    "missing_coil_off",
    "not_stationary",
)
REASON_HINTS = {
    "no_pulse": "the coil was not switched on inside the hold windows (stream 'coil' against table 'poses')",
    "no_accel": "the accelerometer stream has no samples inside the hold windows",
    "nan": "the readings are NaN/inf (a bus fault, or a failed conversion)",
    "absent": "the readings are (0, 0, 0) or missing (a failed bus read)",
    "accel_stuck": "the accelerometer repeats one reading bit for bit (a stuck or disconnected sensor; if it is "
    "really that quiet, set the IMU part: sensor/imu=...)",
    "accel_saturated": "the specific force reaches the IMU's full scale (sensor.imu.accel.full_scale)",
    "gyro_saturated": "the angular rate reaches the gyroscope's full scale in a hold window (the module turns; "
    "or sensor.imu.gyro.full_scale is smaller than the chip's range)",
    "gyro_stuck": "the gyroscope repeats one reading bit for bit (a frozen IMU; if it is really that quiet, set the "
    "IMU part: sensor/imu=...)",
    "mag_stuck": "the magnetometer repeats one reading bit for bit (a stuck sensor or a stale register)",
    "saturated": "the field reaches the magnetometer's full scale (sensor.magnetometer.field.full_scale, or "
    "processing.saturation_limit): a range too small for the coil and ambient field",
    "too_few_coil_on": "too few settled coil-on readings (pulses shorter than settle_time, or a slow sensor)",
    "missing_coil_off": "too few coil-off readings around the pulses",
    "not_stationary": "the module still moves in the hold windows (processing.max_accel_std)",
}
"""What a user checks when most poses are dropped for a reason (named in the refusal)."""


@dataclass
class Windows:
    """Hold windows of the P poses, sorted by start time.

    Attributes:
        order: (P,) indices into the raw pose table, in order of t_start.
        t_start, t_end: (P,) window bounds [s], sorted.
    """

    order: np.ndarray
    t_start: np.ndarray
    t_end: np.ndarray

    @property
    def n(self) -> int:
        return int(self.order.shape[0])

    @classmethod
    def from_sweep(cls, raw: RawSweep) -> "Windows":
        """Sort the pose table by start time; overlapping windows raise `DataError` naming both poses.

        Args:
            raw: the sweep (its pose table's t_start, t_end [s]).

        Returns:
            The sorted `Windows`.

        Raises:
            DataError: two hold windows overlap.
        """
        order = np.argsort(raw.pose_t_start, kind="stable")
        ts = np.asarray(raw.pose_t_start, dtype=np.float64)[order]
        te = np.asarray(raw.pose_t_end, dtype=np.float64)[order]
        bad = np.flatnonzero(ts[1:] < te[:-1])
        if bad.size:
            i = int(bad[0])
            a, b = raw.pose_id[order[i]], raw.pose_id[order[i + 1]]
            raise DataError(
                f"table 'poses': hold windows of pose_id {a} [{ts[i]}, {te[i]}] s and pose_id {b} "
                f"[{ts[i + 1]}, {te[i + 1]}] s overlap"
            )
        return cls(order=order, t_start=ts, t_end=te)

    def locate(self, t: np.ndarray) -> np.ndarray:
        """(M,) index (in sorted order) of the window containing each time of ``t`` (M,), or -1.

        Args:
            t: sample times (M,) [s].

        Returns:
            Window indices (M,); -1 outside every window.
        """
        k = np.searchsorted(self.t_start, t, side="right") - 1
        kc = np.maximum(k, 0)
        return np.where((k >= 0) & (t <= self.t_end[kc]), k, -1)


@dataclass
class Pulses:
    """K coil pulses (off→on ... on→off) from the switch events; the coil is off before the first event.

    Attributes:
        t_on, t_off: (K,) switch-on and switch-off times [s]; t_off = inf if the coil is never switched off.
        pose: (K,) window index (sorted order) containing t_on, or -1.
        per_pose: (P,) number of pulses starting in each window.
    """

    t_on: np.ndarray
    t_off: np.ndarray
    pose: np.ndarray
    per_pose: np.ndarray

    @property
    def n(self) -> int:
        return int(self.t_on.shape[0])

    @classmethod
    def from_events(cls, coil_t: np.ndarray, coil_on: np.ndarray, win: Windows) -> "Pulses":
        """Coil pulses from the coil events: each switch-on to the next switch-off (inf when none follows).

        Args:
            coil_t: event times [s].
            coil_on: coil state after each event (bool).
            win: the hold windows (the pose of each pulse's switch-on).

        Returns:
            The `Pulses`.
        """
        state = np.asarray(coil_on, dtype=bool)
        prev = np.concatenate([[False], state[:-1]])
        rise, fall = np.flatnonzero(state & ~prev), np.flatnonzero(~state & prev)
        t_on = np.asarray(coil_t, dtype=np.float64)[rise]
        nxt = np.searchsorted(fall, rise)  # first switch-off event after each switch-on
        t_off = np.full(t_on.shape, np.inf)
        closed = nxt < fall.shape[0]
        t_off[closed] = np.asarray(coil_t, dtype=np.float64)[fall[nxt[closed]]]
        pose = win.locate(t_on)
        return cls(t_on=t_on, t_off=t_off, pose=pose, per_pose=np.bincount(pose[pose >= 0], minlength=win.n))


@dataclass
class Polls:
    """Per-poll classification of the M magnetometer polls (all (M,)).

    Attributes:
        t: poll times [s]. pose: window index or -1. fresh: differs bitwise from the previous poll.
        on_ok: settled coil-on poll of a pulse of its own pose. off_window: outside every pulse's
        [t_on, t_off + settle_time]. saturated: some |component| ≥ saturation_limit.
    """

    t: np.ndarray
    pose: np.ndarray
    fresh: np.ndarray
    on_ok: np.ndarray
    off_window: np.ndarray
    saturated: np.ndarray


def classify_polls(
    t: np.ndarray, mag: np.ndarray, pulses: Pulses, win: Windows, cfg: ProcessingConfig, clip: float
) -> Polls:
    """Classify polls by freshness, coil state and settling (III-B2).

    Args:
        t: poll times (M,) [s].
        mag: readings (M, 3) float64 [T].
        pulses: the coil pulses.
        win: the hold windows.
        cfg: the processing settings.
        clip: the saturation level [T].

    Returns:
        The `Polls`.
    """
    bits = np.ascontiguousarray(mag, dtype=np.float64).view(np.uint64)
    fresh = np.ones(t.shape[0], dtype=bool)
    fresh[1:] = np.any(bits[1:] != bits[:-1], axis=1)
    pose = win.locate(t)
    k = np.searchsorted(pulses.t_on, t, side="right") - 1  # last pulse switched on at or before t
    has = k >= 0
    kc = np.maximum(k, 0)
    if pulses.n == 0:
        on_ok = np.zeros(t.shape[0], dtype=bool)
        off_window = np.ones(t.shape[0], dtype=bool)
    else:
        t_on, t_off = pulses.t_on[kc], pulses.t_off[kc]
        on_ok = has & (t >= t_on + cfg.settle_time) & (t <= t_off) & (pose >= 0) & (pulses.pose[kc] == pose)
        off_window = ~has | (t > t_off + cfg.settle_time)
    with np.errstate(invalid="ignore"):
        saturated = np.any(np.abs(mag) >= clip, axis=1)
    return Polls(t=t, pose=pose, fresh=fresh, on_ok=on_ok, off_window=off_window, saturated=saturated)


@dataclass
class Selection:
    """Samples used for each pose under one validity mask.

    Attributes:
        pose: (M,) window index per poll (as `Polls.pose`). on, off: (M,) masks of used coil-on/off samples.
        n_on, n_off: (P,) counts. side_fail: (P,) some pulse lacks min_coil_off_per_side coil-off samples
        before or after it. saturated: (P,) some used sample is saturated.
    """

    pose: np.ndarray
    on: np.ndarray
    off: np.ndarray
    n_on: np.ndarray
    n_off: np.ndarray
    side_fail: np.ndarray
    saturated: np.ndarray


def select(polls: Polls, pulses: Pulses, win: Windows, valid: np.ndarray, cfg: ProcessingConfig) -> Selection:
    """Accepted samples among the polls with ``valid`` (M,) True, and the per-pose support checks.

    Args:
        polls: the classified polls.
        pulses: the coil pulses.
        win: the hold windows.
        valid: polls to consider (M,) bool.
        cfg: the processing settings.

    Returns:
        The `Selection`.
    """
    on = valid & polls.on_ok
    off = valid & polls.off_window & (polls.pose >= 0)
    n_on = np.bincount(polls.pose[on], minlength=win.n)
    n_off = np.bincount(polls.pose[off], minlength=win.n)
    t_off_samples = polls.t[off]  # sorted, since poll times are
    mine = pulses.pose >= 0
    p = pulses.pose[mine]
    before = np.searchsorted(t_off_samples, pulses.t_on[mine], side="left") - np.searchsorted(
        t_off_samples, win.t_start[p], side="left"
    )
    after = np.searchsorted(t_off_samples, win.t_end[p], side="right") - np.searchsorted(
        t_off_samples, pulses.t_off[mine], side="right"
    )
    short = np.minimum(before, after) < cfg.min_coil_off_per_side
    side_fail = np.bincount(p, weights=short, minlength=win.n) > 0
    used_sat = (on | off) & polls.saturated
    saturated = np.bincount(polls.pose[used_sat], minlength=win.n) > 0
    return Selection(pose=polls.pose, on=on, off=off, n_on=n_on, n_off=n_off, side_fail=side_fail, saturated=saturated)


@dataclass
class PoseEvidence:
    """Per-pose counts and flags behind the drop reasons (all (P,) unless noted).

    Attributes:
        n_pulses: pulses starting in the window. sel: selection over valid polls (fresh, finite, non-zero);
        sel_nan_blind: as if non-finite polls were valid; sel_zero_blind: as if zero polls were valid.
        n_acc, n_acc_finite, n_acc_all: accelerometer samples that are valid / finite / any.
        acc_std: (P, 3) per-axis std of the valid specific force [m/s²]. n_polls: magnetometer polls in the window.
        accel_stuck, mag_stuck, accel_saturated, gyro_stuck, gyro_saturated: `flexlearn.data.faults` flags (the
        gyro's all False without a ``rate`` stream).
    """

    n_pulses: np.ndarray
    sel: Selection
    sel_nan_blind: Selection
    sel_zero_blind: Selection
    n_acc: np.ndarray
    n_acc_finite: np.ndarray
    n_acc_all: np.ndarray
    acc_std: np.ndarray
    n_polls: np.ndarray
    accel_stuck: np.ndarray
    mag_stuck: np.ndarray
    accel_saturated: np.ndarray
    gyro_stuck: np.ndarray
    gyro_saturated: np.ndarray


def drop_reasons(ev: PoseEvidence, cfg: ProcessingConfig, max_accel_std: float) -> np.ndarray:
    """(P,) int: index into `REASONS` of the first failed check of each pose, or -1 if the pose is kept.

    A failure is put down to non-finite (``nan``) or zero (``absent``) readings when the same pose would pass
    with those readings counted.

    Args:
        ev: the per-pose evidence.
        cfg: the processing settings.
        max_accel_std: the stationarity bound [m/s²].

    Returns:
        (P,) int.
    """

    def short(s: Selection) -> np.ndarray:
        return (s.n_on < cfg.min_coil_on) | s.side_fail

    def few(n: np.ndarray) -> np.ndarray:
        return n < cfg.min_accel_samples

    checks = {
        "no_pulse": ev.n_pulses == 0,
        "no_accel": few(ev.n_acc_all),
        "nan": (few(ev.n_acc_finite) & ~few(ev.n_acc_all)) | (short(ev.sel) & ~short(ev.sel_nan_blind)),
        "absent": (few(ev.n_acc) & ~few(ev.n_acc_finite))
        | (short(ev.sel) & ~short(ev.sel_zero_blind))
        | (ev.n_polls == 0),
        "accel_stuck": ev.accel_stuck,
        "accel_saturated": ev.accel_saturated,
        "gyro_saturated": ev.gyro_saturated,
        "gyro_stuck": ev.gyro_stuck,
        "mag_stuck": ev.mag_stuck,
        "saturated": ev.sel.saturated,
        "too_few_coil_on": ev.sel.n_on < cfg.min_coil_on,
        "missing_coil_off": ev.sel.side_fail,
        "not_stationary": np.any(ev.acc_std > max_accel_std, axis=1),
    }
    reason = np.full(ev.n_pulses.shape[0], -1, dtype=np.int64)
    for k, name in enumerate(REASONS):
        reason[(reason < 0) & checks[name]] = k
    return reason
