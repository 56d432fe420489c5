"""Raw sweep streams → direction dataset: coil field ΔB and accelerometer label per stationary pose.

Implements seed 002, III-B1 and III-B2:

* ΔB = m_on − b(t), with the ambient b(t) fitted linearly (least squares, per axis) to the coil-off samples
  surrounding the pose's pulses (III-B1); ΔB of a pose is the mean over its accepted coil-on samples.
  Because b is linear, mean(m_on − b(t_on)) = mean(m_on) − b(mean(t_on)), which is what is computed.
* A poll is a sample only if it is a new conversion, i.e. differs bitwise from the previous poll, and a
  coil-on sample only after settling (III-B2).
* Label â = ā/‖ā‖, ā the mean specific force over the pose's hold window; with the base level and the
  parent above, it is the parent axis (pointing from the child toward the parent) in the child sensor
  frame (III-B1).

III-B2's online rule (mean of fresh coil-on samples minus the latest confirmed coil-off baseline) is the
causal special case of this; offline we can use III-B1's line through coil-off samples on both sides, which
also removes a linear drift. The label sign assumes the rig's parent is above the child (seed: "with the
base leveled"); a rig mounted the other way round needs −â.

Per-sample acceptance and per-pose quality filters are in `flexlearn.data.quality`; this module checks
whole-sweep errors (units, empty streams), computes the estimates with segment sums (no Python loop over
poses) and assembles the `DirectionDataset` and its `DropReport`. Streams registered with ``per_pose``
(`flexlearn.sensing.stream_schema.StreamSchema`) add their hold-window means as dataset columns (`per_pose_means`).

Every array here is in SI units: s, T, m/s².
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from flexlearn.config import to_dict
from flexlearn.data import faults
from flexlearn.data import quality as q
from flexlearn.data import units as u
from flexlearn.data.dataset import DirectionDataset, assign_splits, column_units
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.data.sweep_meta import check_meta, sweep_parts
from flexlearn.errors import ConfigError, DataError
from flexlearn.sensing.parts import SensorParts
from flexlearn.sensing.streams import RAW_SCHEMA_VERSION, STREAMS, RawSweep

G0 = 9.80665  # standard gravity [m/s^2]
log = logging.getLogger(__name__)


@dataclass
class DropReport:
    """Which poses were kept and why the others were dropped (one reason each, first in `quality.REASONS`).

    Attributes:
        n_poses: poses in the raw pose table.
        n_kept: poses in the dataset.
        dropped: reason -> pose_ids dropped for it (every reason present, possibly empty).
        samples: sweep-level sample counts (mag polls, stale, non-finite, accepted coil-on/off, ...).
        notes: one line per unit conversion or noise remark (also logged).
        sensor: the sensor parts the checks derived from (`SensorParts.to_config`).
    """

    n_poses: int
    n_kept: int
    dropped: dict[str, list[int]]
    samples: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sensor: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Number of dropped poses per reason."""
        return {r: len(ids) for r, ids in self.dropped.items()}

    def summary(self) -> str:
        """One line: kept/total and the non-zero drop counts."""
        reasons = ", ".join(f"{r}: {n}" for r, n in self.counts().items() if n) or "none dropped"
        return f"kept {self.n_kept} of {self.n_poses} poses ({reasons})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, stored in the dataset metadata under 'report'."""
        return {
            "n_poses": self.n_poses,
            "n_kept": self.n_kept,
            "n_dropped": self.n_poses - self.n_kept,
            "dropped_counts": self.counts(),
            "dropped_pose_ids": self.dropped,
            "samples": self.samples,
            "notes": self.notes,
            "sensor": self.sensor,
        }


@dataclass
class ProcessedSweep:
    """Result of `process_sweep`: the dataset of kept poses and the drop report."""

    dataset: DirectionDataset
    report: DropReport


# ---------------------------------------------------------------------------------------------- checks
def _check_stream(name: str, field_name: str, values: np.ndarray, bounds: tuple[float, float], kind: str) -> None:
    """Reject an empty or all-NaN stream, or one whose median norm is outside ``bounds`` (naming the unit key)."""
    if values.shape[0] == 0:
        raise DataError(f"stream '{name}' is empty")
    finite, valid = faults.valid_readings(values)
    if not valid.any():
        what = "NaN/inf values" if not finite.any() else "NaN/inf or (0, 0, 0) values (absent readings)"
        raise DataError(f"stream '{name}': field '{field_name}' has only {what} ({values.shape[0]} samples)")
    median = float(np.median(np.linalg.norm(values[valid], axis=1)))  # absent readings are judged per pose
    lo, hi = bounds
    if not lo <= median <= hi:
        si = "T" if kind == "field" else "m/s^2"
        guess, key = u.unit_hint(median, kind)
        bounds_key = "field_median_bounds" if kind == "field" else "accel_median_bounds"
        hint = (
            f"it looks like {guess}: set {key} (raw sweep) or the stream's scale in the ingest map"
            if guess not in ("T", "m/s^2")
            else f"no common unit explains it (if the data are right, widen +processing.{bounds_key}=[lo,hi])"
        )
        raise DataError(
            f"stream '{name}': field '{field_name}' has median |{field_name}| = {median:.4g} {si} (after "
            f"processing.{kind}_unit), outside [{lo:.3g}, {hi:.3g}] {si}; {hint}"
        )


def _check_sweep(raw: RawSweep, cfg: ProcessingConfig) -> None:
    """Whole-sweep errors (`DataError`): empty pose table or streams, wrong magnitudes, no coil switch-on."""
    if raw.pose_id.shape[0] == 0:
        raise DataError("table 'poses' is empty")
    _check_stream("mag", "m", raw.mag, cfg.field_median_bounds, "field")
    _check_stream("accel", "a", raw.accel, cfg.accel_median_bounds, "accel")
    if raw.coil_t.shape[0] == 0:
        raise DataError("stream 'coil': no coil switch events; the coil field cannot be measured")
    if not np.any(raw.coil_on):
        raise DataError(
            f"stream 'coil': field 'on' is false in all {raw.coil_t.shape[0]} events; the coil is never switched on"
        )


def resolve_parts(raw: RawSweep, parts: Optional[SensorParts]) -> SensorParts:
    """The parts to check against.

    Args:
        raw: the sweep.
        parts: the parts given, or None.

    Returns:
        ``parts`` if given, else the sweep's own (``meta.json`` 'sensor'), else the simulator's default
        (`SensorParts.default`).
    """
    return parts or sweep_parts(raw.meta) or SensorParts.default()


def prepare(raw: RawSweep, cfg: ProcessingConfig, parts: SensorParts) -> tuple[RawSweep, list[str]]:
    """Convert the declared units to SI and check times, fields and specific force.

    Args:
        raw: the sweep in its declared units.
        cfg: the processing settings (``time_unit``, ``field_unit``, ``accel_unit`` and the checks).
        parts: the sensor parts the times are checked against.

    Returns:
        (the SI sweep, notes: one line per conversion).
    """
    si, notes = u.to_si(raw, {"time": cfg.time_unit, "field": cfg.field_unit, "accel": cfg.accel_unit})
    _check_sweep(si, cfg)
    notes += u.check_times(si, parts, cfg.time_unit)
    return si, notes


# ----------------------------------------------------------------------------------------- estimation
def _segment_sum(idx: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Sums of ``values`` (M,) or (M, k) grouped by ``idx`` (M,) into (n,) or (n, k) bins."""
    if values.ndim == 1:
        return np.bincount(idx, weights=values, minlength=n)
    return np.stack([np.bincount(idx, weights=values[:, j], minlength=n) for j in range(values.shape[1])], -1)


def _segment_mean(idx: np.ndarray, values: np.ndarray, count: np.ndarray) -> np.ndarray:
    s = _segment_sum(idx, values, count.shape[0])
    c = np.maximum(count, 1).astype(np.float64)
    return s / (c[:, None] if s.ndim == 2 else c)


def _delta_b(win: q.Windows, mag_t: np.ndarray, mag: np.ndarray, sel: q.Selection) -> np.ndarray:
    """ΔB (P, 3) [T] per pose: mean(m_on) − b(mean(t_on)), b the per-axis least-squares line (III-B1)."""
    p = win.n
    t_rel = mag_t - win.t_start[np.maximum(sel.pose, 0)]  # times relative to the pose start, for precision
    off, on = sel.off, sel.on
    i_off, i_on = sel.pose[off], sel.pose[on]
    t_off_mean = _segment_mean(i_off, t_rel[off], sel.n_off)
    m_off_mean = _segment_mean(i_off, mag[off], sel.n_off)
    dt = t_rel[off] - t_off_mean[i_off]
    sxx = _segment_sum(i_off, dt * dt, p)
    sxy = _segment_sum(i_off, dt[:, None] * (mag[off] - m_off_mean[i_off]), p)
    slope = np.divide(sxy, sxx[:, None], out=np.zeros_like(sxy), where=sxx[:, None] > 0)
    t_on_mean = _segment_mean(i_on, t_rel[on], sel.n_on)
    m_on_mean = _segment_mean(i_on, mag[on], sel.n_on)
    return m_on_mean - (m_off_mean + slope * (t_on_mean - t_off_mean)[:, None])


@dataclass
class AccelStats:
    """Per-pose accelerometer statistics over the hold windows.

    Attributes:
        pose: (M,) window index per sample or -1. valid, finite: (M,) masks (valid: finite and not (0, 0, 0)).
        n, n_finite, n_all: (P,) valid / finite / all samples in the window. mean, std: (P, 3) of the valid
        samples [m/s²].
    """

    pose: np.ndarray
    valid: np.ndarray
    finite: np.ndarray
    n: np.ndarray
    n_finite: np.ndarray
    n_all: np.ndarray
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def of(cls, win: q.Windows, accel_t: np.ndarray, accel: np.ndarray) -> "AccelStats":
        """Per-pose accelerometer statistics over the hold windows.

        Args:
            win: the hold windows.
            accel_t: sample times (M,) [s].
            accel: specific force (M, 3) [m/s²].

        Returns:
            The pose of each sample, the valid and finite masks, the per-pose counts (valid, finite, all) and the
            per-pose mean and std of the valid samples.
        """
        pose = win.locate(np.asarray(accel_t, dtype=np.float64))
        inside = pose >= 0
        finite, valid = faults.valid_readings(accel)
        counts = [np.bincount(pose[inside & m], minlength=win.n) for m in (valid, finite, np.ones_like(finite))]
        use = inside & valid
        idx = pose[use]
        mean = _segment_mean(idx, accel[use], counts[0])
        var = _segment_mean(idx, (accel[use] - mean[idx]) ** 2, counts[0])
        return cls(pose, valid, finite, counts[0], counts[1], counts[2], mean=mean, std=np.sqrt(var))


def _truth_columns(raw: RawSweep, pose_id: np.ndarray) -> dict[str, Optional[np.ndarray]]:
    """truth_label, truth_u, truth_delta_b (N, 3) of the kept poses from ``raw.truth`` (or all None)."""
    if raw.truth is None:
        return {"truth_label": None, "truth_u": None, "truth_delta_b": None}
    tid = np.asarray(raw.truth["pose_id"]).astype(np.int64)
    order = np.argsort(tid)
    pos = np.clip(np.searchsorted(tid[order], pose_id), 0, max(len(tid) - 1, 0))
    found = tid[order][pos] == pose_id if len(tid) else np.zeros(len(pose_id), bool)
    if not found.all():
        raise DataError(f"table 'truth': field 'pose_id' lacks pose {int(pose_id[~found][0])}")
    rows = order[pos]
    out: dict[str, Optional[np.ndarray]] = {}
    for name, prefix in (("truth_label", "label"), ("truth_u", "u"), ("truth_delta_b", "db")):
        cols = [np.asarray(raw.truth[f"{prefix}_{a}"], dtype=np.float64)[rows] for a in "xyz"]
        out[name] = np.stack(cols, axis=-1)
    return out


def per_pose_means(raw: RawSweep, win: q.Windows) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Hold-window means of the registered ``per_pose`` streams the sweep holds, in sorted-window order.

    For each such stream and each column c of its ``float`` fields: x̄_p = Σ_{t_i ∈ [t_start,p, t_end,p]} x_i / n_p
    over the finite samples (NaN where n_p = 0).

    Args:
        raw: the SI sweep.
        win: the hold windows.

    Returns:
        (column ``<stream>_<c>`` -> (P,), column -> unit).

    Raises:
        ConfigError: for a name that is one of the dataset's own columns (stream 'label', column 'x').
    """
    fixed = set(column_units())
    values: dict[str, np.ndarray] = {}
    units: dict[str, str] = {}
    for name, data in raw.streams.items():
        schema = STREAMS[name]
        if not (schema.per_pose and schema.timed):
            continue
        k = win.locate(np.asarray(data["t"], dtype=np.float64))
        for f in schema.values:
            if f.kind != "float":
                continue
            block = np.asarray(data[f.name], dtype=np.float64).reshape(k.shape[0], f.width)
            for x, col in zip(block.T, f.columns):
                if f"{name}_{col}" in fixed:
                    raise ConfigError(
                        f"stream '{name}', column '{col}': its per-pose column '{name}_{col}' is one of "
                        f"the dataset's own columns; rename the stream or the column"
                    )
                use = (k >= 0) & np.isfinite(x)
                n = np.bincount(k[use], minlength=win.n)
                total = np.bincount(k[use], weights=x[use], minlength=win.n)
                values[f"{name}_{col}"] = np.where(n > 0, total / np.maximum(n, 1), np.nan)
                units[f"{name}_{col}"] = f.unit
    return values, units


def _soft_iron(raw: RawSweep, cfg: ProcessingConfig) -> Optional[dict[str, Any]]:
    """The tumble calibration {W (3, 3) det 1, offset (3,) [T], quality} to apply to ΔB, or None (see
    ``ProcessingConfig.soft_iron``); a tumble too poor to fit raises `DataError` naming coverage and samples.
    The readings are in ``meta['tumble']['units']`` (else ``processing.field_unit``)."""
    tumble = raw.meta.get("tumble") if isinstance(raw.meta, dict) else None
    if cfg.soft_iron == "none" or not isinstance(tumble, dict) or not len(tumble.get("mag") or []):
        return None
    from flexlearn.sensing.module_cal import tumble_calibration  # heavy import off the start-up path (torch)

    readings = np.asarray(tumble["mag"], dtype=np.float64) * u.tumble_factor(raw.meta, cfg.field_unit)
    w, offset, quality = tumble_calibration(readings, "meta.json 'tumble'")
    return {"W": w.tolist(), "offset": offset.tolist(), "quality": quality, "source": "tumble"}


def _sample_counts(raw: RawSweep, polls: q.Polls, ev: q.PoseEvidence, acc: AccelStats, keep: np.ndarray) -> dict:
    """Sample counts of the drop report: polls, stale, non-finite and zero readings, accepted coil-on/off samples
    of the kept poses, pulses."""
    mag_finite, mag_valid = faults.valid_readings(raw.mag)
    return {
        "mag_polls": int(np.asarray(raw.mag_t).shape[0]),
        "mag_stale": int((~polls.fresh).sum()),
        "mag_nonfinite": int((~mag_finite).sum()),
        "mag_zero": int((mag_finite & ~mag_valid).sum()),
        "mag_saturated": int(polls.saturated.sum()),
        "coil_on_accepted": int(ev.sel.n_on[keep].sum()),
        "coil_off_accepted": int(ev.sel.n_off[keep].sum()),
        "accel_samples": int(raw.accel_t.shape[0]),
        "accel_nonfinite": int((~acc.finite).sum()),
        "accel_zero": int((acc.finite & ~acc.valid).sum()),
        "pulses": int(ev.n_pulses.shape[0] and ev.n_pulses.sum()),
        **_rate_counts(raw),
    }


def _rate_counts(raw: RawSweep) -> dict[str, int]:
    """{rate_samples, rate_nonfinite} of the ``rate`` stream, or {} without one."""
    if "rate" not in raw.streams:
        return {}
    rate = _rate_stream(raw)[1]
    return {"rate_samples": int(rate.shape[0]), "rate_nonfinite": int((~np.all(np.isfinite(rate), axis=1)).sum())}


def _dataset_meta(raw: RawSweep, cfg: ProcessingConfig, report: DropReport, calibration) -> dict:
    """The processed dataset's ``meta``: the raw sweep's meta, provenance, processing config, report, calibration."""
    prov = raw.meta.get("provenance")
    return {
        "source": copy.deepcopy(raw.meta),
        "provenance": {
            **(prov if isinstance(prov, dict) else {"raw": prov} if prov is not None else {}),
            "raw_schema_version": RAW_SCHEMA_VERSION,
            "processed_by": "flexlearn.data.process.process_sweep",
        },
        "processing": to_dict(cfg),
        "report": report.to_dict(),
        "calibration": calibration,
    }


def _evidence(raw: RawSweep, cfg: ProcessingConfig, lim: faults.Limits, win: q.Windows) -> tuple:
    """(polls, pulses, `quality.PoseEvidence`, `AccelStats`) of the SI sweep ``raw``."""
    mag_t = np.asarray(raw.mag_t, dtype=np.float64)
    mag = np.ascontiguousarray(raw.mag, dtype=np.float64)
    mag_finite, mag_valid = faults.valid_readings(mag)
    pulses = q.Pulses.from_events(raw.coil_t, raw.coil_on, win)
    polls = q.classify_polls(mag_t, mag, pulses, win, cfg, lim.mag_clip)
    if not np.any(polls.fresh & mag_valid & polls.off_window):
        raise DataError(
            f"stream 'mag': no coil-off samples in all {mag_t.shape[0]} polls: every poll lies "
            f"within a coil pulse or its settling time ({cfg.settle_time} s), or reads NaN or zero"
        )
    acc = AccelStats.of(win, raw.accel_t, raw.accel)
    _, mag_same = faults.frozen(polls.pose, mag, mag_valid, win.n)
    _, mag_axes = faults.frozen(polls.pose, mag, mag_valid & polls.fresh, win.n)
    _, acc_axes = faults.frozen(acc.pose, raw.accel, acc.valid, win.n)
    acc_stream = faults.whole_stream_frozen(raw.accel, acc.valid, raw.target)
    ev = q.PoseEvidence(
        n_pulses=pulses.per_pose,
        sel=q.select(polls, pulses, win, polls.fresh & mag_valid, cfg),
        # As if non-finite (zero) polls had been valid readings: tells failures caused by them from others.
        sel_nan_blind=q.select(polls, pulses, win, (polls.fresh & mag_valid) | ~mag_finite, cfg),
        sel_zero_blind=q.select(polls, pulses, win, polls.fresh & mag_finite, cfg),
        n_acc=acc.n,
        n_acc_finite=acc.n_finite,
        n_acc_all=acc.n_all,
        acc_std=acc.std,
        n_polls=np.bincount(polls.pose[polls.pose >= 0], minlength=win.n),
        accel_stuck=(np.any(acc_axes, axis=1) & lim.accel_stuck_axes) | (acc_stream & (acc.n > 0)),
        mag_stuck=np.all(mag_same, axis=1) | (np.any(mag_axes, axis=1) & lim.mag_stuck_axes),
        accel_saturated=faults.clipped(acc.pose, raw.accel, acc.valid, lim.accel_clip, win.n),
        **_gyro_flags(raw, lim, win),
    )
    return polls, pulses, ev, acc


def _gyro_flags(raw: RawSweep, lim: faults.Limits, win: q.Windows) -> dict[str, np.ndarray]:
    """{gyro_stuck, gyro_saturated} (P,) of the ``rate`` stream [rad/s] (all False without one). Every finite
    reading counts: a gyroscope at rest may read (0, 0, 0)."""
    if "rate" not in raw.streams:
        none = np.zeros(win.n, dtype=bool)
        return {"gyro_stuck": none, "gyro_saturated": none}
    t, rate = _rate_stream(raw)
    pose = win.locate(t)
    finite = np.all(np.isfinite(rate), axis=1)
    _, axes = faults.frozen(pose, rate, finite, win.n)
    return {
        "gyro_stuck": np.any(axes, axis=1) & lim.gyro_stuck_axes,
        "gyro_saturated": faults.clipped(pose, rate, finite, lim.gyro_clip, win.n),
    }


def _rate_stream(raw: RawSweep) -> tuple[np.ndarray, np.ndarray]:
    """(t (M,) [s], rate (M, 3) [rad/s]) of the sweep's ``rate`` stream (missing values NaN)."""
    rate = raw.streams["rate"]
    return np.asarray(rate["t"], dtype=np.float64), np.asarray(rate["rate"], dtype=np.float64).reshape(-1, 3)


def _grid_notes(raw: RawSweep, parts: SensorParts) -> list[str]:
    """`flexlearn.data.faults.grid_notes` of the magnetometer, accelerometer and (if recorded) gyroscope."""
    streams = {
        "mag": (raw.mag, parts.magnetometer.field, "sensor.magnetometer.field"),
        "accel": (raw.accel, parts.imu.accel, "sensor.imu.accel"),
    }
    if "rate" in raw.streams:
        streams["rate"] = (_rate_stream(raw)[1], parts.imu.gyro, "sensor.imu.gyro")
    return faults.grid_notes(streams)


def _noise_notes(acc: AccelStats, keep: np.ndarray, lim: faults.Limits, parts: SensorParts) -> list[str]:
    """A note when the kept poses' median accelerometer noise is over 3x off what the IMU part expects."""
    if not keep.any() or not lim.accel_stuck_axes:  # a part quieter than 2 LSB: no noise to compare
        return []
    measured = float(np.median(acc.std[keep]))
    ratio = measured / lim.accel_noise
    if 1 / 3 <= ratio <= 3:
        return []
    return [
        f"stream 'accel': median per-axis noise {measured:.3g} m/s^2 in the hold windows is {ratio:.2g}x the "
        f"{lim.accel_noise:.3g} m/s^2 expected of sensor.imu '{parts.imu.name}'; check the parts (sensor/imu=...)"
    ]


def _refuse_if_too_few(report: DropReport, cfg: ProcessingConfig) -> None:
    """`DataError` when fewer than ``min_kept_fraction`` of the poses (or none) are kept, saying how many and why."""
    need = cfg.min_kept_fraction * report.n_poses
    if report.n_kept > 0 and report.n_kept >= need:
        return
    worst = max(report.counts().items(), key=lambda kv: kv[1])
    raise DataError(
        f"raw sweep: only {report.n_kept} of {report.n_poses} poses ({report.n_kept / report.n_poses:.0%}) are "
        f"left, at least {cfg.min_kept_fraction:.0%} are needed (processing.min_kept_fraction); "
        f"{report.summary()}; most were dropped as '{worst[0]}' ({worst[1]} poses): "
        f"{q.REASON_HINTS.get(worst[0], 'check the recording')}"
    )


def process_sweep(
    raw: RawSweep, cfg: Optional[ProcessingConfig] = None, parts: Optional[SensorParts] = None
) -> ProcessedSweep:
    """Turn one raw sweep into a `DirectionDataset` of kept poses and a `DropReport` (seed 002, III-B1/B2).

    Args:
        raw: the streams (`flexlearn.sensing.streams.RawSweep`), child sensor frame, in SI or in the units
            ``cfg`` declares.
        cfg: processing parameters (default `ProcessingConfig()`).
        parts: the module's sensor parts; None: the sweep's own (``meta.json`` 'sensor') or the default.

    Returns:
        `ProcessedSweep` with the dataset (rows in hold-window order) and the drop report.

    Raises:
        DataError: naming stream, field and value for a whole-sweep problem: a malformed ``meta.json``, a
            stream in another unit than declared (naming the key that fixes it), an empty or all-NaN stream,
            no coil events, no coil-off samples at all, overlapping hold windows, fewer poses kept than
            ``min_kept_fraction``.
    """
    cfg = cfg or ProcessingConfig()
    cfg.validate()
    check_meta(raw.meta, "meta.json")
    parts = resolve_parts(raw, parts)
    raw, notes = prepare(raw, cfg, parts)
    calibration = _soft_iron(raw, cfg)  # a tumble too poor to fit is refused before any work
    lim = faults.Limits.from_parts(parts, cfg.saturation_limit, cfg.max_accel_std)
    win = q.Windows.from_sweep(raw)
    polls, pulses, ev, acc = _evidence(raw, cfg, lim, win)
    reason = q.drop_reasons(ev, cfg, lim.max_accel_std)
    keep = reason < 0
    sorted_ids = raw.pose_id[win.order].astype(np.int64)
    dropped = {r: sorted(sorted_ids[reason == k].tolist()) for k, r in enumerate(q.REASONS)}
    samples = {**_sample_counts(raw, polls, ev, acc, keep), "pulses_outside_poses": int((pulses.pose < 0).sum())}
    notes += _noise_notes(acc, keep, lim, parts) + _grid_notes(raw, parts)
    report = DropReport(win.n, int(keep.sum()), dropped, samples, notes, parts.to_config())
    _refuse_if_too_few(report, cfg)
    for note in notes:
        log.warning("%s", note)
    return _assemble(raw, cfg, (win, ev, acc, keep, sorted_ids), report, calibration)


def _assemble(raw: RawSweep, cfg: ProcessingConfig, parts_of: tuple, report: DropReport, calibration) -> ProcessedSweep:
    """The dataset of the kept poses: ΔB (calibrated by the tumble's W when given), labels, truth, per-pose means."""
    win, ev, acc, keep, sorted_ids = parts_of
    delta_b = _delta_b(win, np.asarray(raw.mag_t, dtype=np.float64), np.asarray(raw.mag, np.float64), ev.sel)[keep]
    label = acc.mean[keep] / np.linalg.norm(acc.mean[keep], axis=1, keepdims=True)
    pose_id = sorted_ids[keep]
    truth = _truth_columns(raw, pose_id)
    per_pose, per_pose_units = per_pose_means(raw, win)
    if calibration is not None:
        w = np.asarray(calibration["W"])
        delta_b = delta_b @ w.T
        if truth["truth_delta_b"] is not None:
            truth["truth_delta_b"] = truth["truth_delta_b"] @ w.T
    target = np.asarray(raw.target, dtype=np.float64)[win.order][keep]
    ds = DirectionDataset(
        target=target if np.all(np.isfinite(target)) else None,  # the commanded bend bands evaluation
        pose_id=pose_id,
        delta_b=delta_b,
        label=label,
        split=assign_splits(pose_id, cfg.split_fractions, cfg.split_seed),
        n_coil_on=ev.sel.n_on[keep],
        **truth,
        meta=_dataset_meta(raw, cfg, report, calibration),
        per_pose={c: v[keep] for c, v in per_pose.items()},
        per_pose_units=per_pose_units,
    )
    return ProcessedSweep(dataset=ds, report=report)
