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
(`flexlearn.sensing.streams.StreamSchema`) add their hold-window means as dataset columns (`per_pose_means`).

Every array here is in SI units: s, T, m/s².
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from flexlearn.config import to_dict
from flexlearn.data import quality as q
from flexlearn.data.dataset import DirectionDataset, assign_splits, column_units
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.errors import ConfigError, DataError
from flexlearn.sensing.streams import RAW_SCHEMA_VERSION, STREAMS, RawSweep

G0 = 9.80665  # standard gravity [m/s^2]
# Candidate units of a magnetometer stream: name -> tesla per unit. Used to name a wrong unit.
_FIELD_UNITS = {"T": 1.0, "mT": 1e-3, "gauss": 1e-4, "µT": 1e-6, "nT": 1e-9}
_TYPICAL_FIELD = 5e-5  # geomagnetic field magnitude [T]
_ACCEL_UNITS = {"m/s^2": 1.0, "g": G0, "mg": G0 * 1e-3}


@dataclass
class DropReport:
    """Which poses were kept and why the others were dropped (one reason each, first in `quality.REASONS`).

    Attributes:
        n_poses: poses in the raw pose table.
        n_kept: poses in the dataset.
        dropped: reason -> pose_ids dropped for it (every reason present, possibly empty).
        samples: sweep-level sample counts (mag polls, stale, non-finite, accepted coil-on/off, ...).
    """

    n_poses: int
    n_kept: int
    dropped: dict[str, list[int]]
    samples: dict[str, int] = field(default_factory=dict)

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
        }


@dataclass
class ProcessedSweep:
    """Result of `process_sweep`: the dataset of kept poses and the drop report."""

    dataset: DirectionDataset
    report: DropReport


# ---------------------------------------------------------------------------------------------- checks
def _guess_unit(median: float, units: dict[str, float], typical: float) -> tuple[str, float]:
    """The unit in which ``median`` is closest (in log scale) to ``typical`` SI units, and its SI value."""
    name = min(units, key=lambda u: abs(np.log10(median * units[u] / typical)) if median > 0 else 0.0)
    return name, median * units[name]


def _check_stream(
    name: str,
    field_name: str,
    values: np.ndarray,
    bounds: tuple[float, float],
    what: str,
    si: str,
    units: dict[str, float],
    typical: float,
) -> np.ndarray:
    """Reject an empty or all-NaN stream, or one whose median norm is outside ``bounds``; return finite mask."""
    if values.shape[0] == 0:
        raise DataError(f"stream '{name}' is empty")
    finite = np.all(np.isfinite(values), axis=1)
    if not finite.any():
        raise DataError(f"stream '{name}': field '{field_name}' has only NaN/inf values ({values.shape[0]} samples)")
    median = float(np.median(np.linalg.norm(values[finite], axis=1)))
    lo, hi = bounds
    if not lo <= median <= hi:
        guess, value_si = _guess_unit(median, units, typical)
        hint = (
            f"it looks like {guess} ({median:.4g} {guess} = {value_si:.4g} {si}); convert to {si} at ingest"
            if guess != si
            else f"no common unit explains it (widen {what} if the data are right)"
        )
        raise DataError(
            f"stream '{name}': field '{field_name}' has median |{field_name}| = {median:.4g}, outside "
            f"the range [{lo:.3g}, {hi:.3g}] expected in {si}; {hint}"
        )
    return finite


def _check_sweep(raw: RawSweep, cfg: ProcessingConfig) -> tuple[np.ndarray, np.ndarray]:
    """Whole-sweep errors (`DataError`); returns the finite masks of the mag and accel streams."""
    if raw.pose_id.shape[0] == 0:
        raise DataError("table 'poses' is empty")
    mag_finite = _check_stream(
        "mag", "m", raw.mag, cfg.field_median_bounds, "field_median_bounds", "T", _FIELD_UNITS, _TYPICAL_FIELD
    )
    acc_finite = _check_stream(
        "accel", "a", raw.accel, cfg.accel_median_bounds, "accel_median_bounds", "m/s^2", _ACCEL_UNITS, G0
    )
    if raw.coil_t.shape[0] == 0:
        raise DataError("stream 'coil': no coil switch events; the coil field cannot be measured")
    if not np.any(raw.coil_on):
        raise DataError(
            f"stream 'coil': field 'on' is false in all {raw.coil_t.shape[0]} events; the coil is never switched on"
        )
    return mag_finite, acc_finite


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


def _accel_stats(
    win: q.Windows, accel_t: np.ndarray, accel: np.ndarray, finite: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pose: finite sample count (P,), count incl. non-finite (P,), mean (P, 3), per-axis std (P, 3)."""
    pose = win.locate(accel_t)
    inside = pose >= 0
    n_all = np.bincount(pose[inside], minlength=win.n)
    use = inside & finite
    idx = pose[use]
    n = np.bincount(idx, minlength=win.n)
    mean = _segment_mean(idx, accel[use], n)
    var = _segment_mean(idx, (accel[use] - mean[idx]) ** 2, n)
    return n, n_all, mean, np.sqrt(var)


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
    over the finite samples (NaN where n_p = 0). Returns (column ``<stream>_<c>`` -> (P,), column -> unit).
    A name that is one of the dataset's own columns (stream 'label', column 'x') is a `ConfigError`.
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
    ``ProcessingConfig.soft_iron``); a tumble too poor to fit raises `DataError` naming coverage and samples."""
    tumble = raw.meta.get("tumble") if isinstance(raw.meta, dict) else None
    if cfg.soft_iron == "none" or not isinstance(tumble, dict) or not len(tumble.get("mag") or []):
        return None
    from flexlearn.sensing.module_cal import tumble_calibration  # heavy import off the start-up path (torch)

    w, offset, quality = tumble_calibration(np.asarray(tumble["mag"], dtype=np.float64), "meta.json 'tumble'")
    return {"W": w.tolist(), "offset": offset.tolist(), "quality": quality, "source": "tumble"}


def _sample_counts(raw: RawSweep, polls, sel, pulses, keep: np.ndarray, finite: tuple) -> dict[str, int]:
    """Sample counts of the drop report: polls, stale and non-finite readings, accepted coil-on/off samples of the
    kept poses, pulses. ``finite`` is (mag_finite, acc_finite), boolean per sample."""
    mag_finite, acc_finite = finite
    return {
        "mag_polls": int(np.asarray(raw.mag_t).shape[0]),
        "mag_stale": int((~polls.fresh).sum()),
        "mag_nonfinite": int((~mag_finite).sum()),
        "coil_on_accepted": int(sel.n_on[keep].sum()),
        "coil_off_accepted": int(sel.n_off[keep].sum()),
        "accel_samples": int(raw.accel_t.shape[0]),
        "accel_nonfinite": int((~acc_finite).sum()),
        "pulses": int(pulses.n),
        "pulses_outside_poses": int((pulses.pose < 0).sum()),
    }


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


def process_sweep(raw: RawSweep, cfg: Optional[ProcessingConfig] = None) -> ProcessedSweep:
    """Turn one raw sweep into a `DirectionDataset` of kept poses and a `DropReport` (seed 002, III-B1/B2).

    Args:
        raw: the streams (`flexlearn.sensing.streams.RawSweep`), SI units, child sensor frame.
        cfg: processing parameters (default `ProcessingConfig()`).

    Returns:
        `ProcessedSweep` with the dataset (rows in hold-window order) and the drop report.

    Raises:
        DataError: naming stream, field and value for a whole-sweep problem: a field stream not in tesla
            (median magnitude says which unit it looks like), accel not in m/s², an empty or all-NaN stream,
            no coil events, no coil-off samples at all, overlapping hold windows, every pose dropped.
    """
    cfg = cfg or ProcessingConfig()
    cfg.validate()
    mag_finite, acc_finite = _check_sweep(raw, cfg)
    calibration = _soft_iron(raw, cfg)  # a tumble too poor to fit is refused before any work
    mag_t = np.asarray(raw.mag_t, dtype=np.float64)
    mag = np.ascontiguousarray(raw.mag, dtype=np.float64)
    win = q.Windows.from_sweep(raw)
    pulses = q.Pulses.from_events(raw.coil_t, raw.coil_on, win)
    polls = q.classify_polls(mag_t, mag, pulses, win, cfg)
    if not np.any(polls.fresh & mag_finite & polls.off_window):
        raise DataError(
            f"stream 'mag': no coil-off samples in all {mag_t.shape[0]} polls: every poll lies "
            f"within a coil pulse or its settling time ({cfg.settle_time} s)"
        )
    sel = q.select(polls, pulses, win, polls.fresh & mag_finite, cfg)
    # As if every non-finite poll had been a fresh reading: tells failures caused by NaN from others.
    sel_nan_blind = q.select(polls, pulses, win, polls.fresh | ~mag_finite, cfg)
    n_acc, n_acc_all, acc_mean, acc_std = _accel_stats(win, raw.accel_t, raw.accel, acc_finite)
    reason = q.drop_reasons(pulses.per_pose, sel, sel_nan_blind, n_acc, n_acc_all, acc_std, cfg)

    keep = reason < 0
    sorted_ids = raw.pose_id[win.order].astype(np.int64)
    dropped = {r: sorted(sorted_ids[reason == k].tolist()) for k, r in enumerate(q.REASONS)}
    samples = _sample_counts(raw, polls, sel, pulses, keep, (mag_finite, acc_finite))
    report = DropReport(n_poses=win.n, n_kept=int(keep.sum()), dropped=dropped, samples=samples)
    if not keep.any():
        raise DataError(
            f"raw sweep: every one of the {win.n} poses was dropped ({report.summary()}); "
            "check the processing config against the recording"
        )

    delta_b = _delta_b(win, mag_t, mag, sel)[keep]
    label = acc_mean[keep] / np.linalg.norm(acc_mean[keep], axis=1, keepdims=True)
    pose_id = sorted_ids[keep]
    truth = _truth_columns(raw, pose_id)
    per_pose, per_pose_units = per_pose_means(raw, win)
    if calibration is not None:
        w = np.asarray(calibration["W"])
        delta_b = delta_b @ w.T
        if truth["truth_delta_b"] is not None:
            truth["truth_delta_b"] = truth["truth_delta_b"] @ w.T
    meta = _dataset_meta(raw, cfg, report, calibration)
    ds = DirectionDataset(
        pose_id=pose_id,
        delta_b=delta_b,
        label=label,
        split=assign_splits(pose_id, cfg.split_fractions, cfg.split_seed),
        n_coil_on=sel.n_on[keep],
        **truth,
        meta=meta,
        per_pose={c: v[keep] for c, v in per_pose.items()},
        per_pose_units=per_pose_units,
    )
    return ProcessedSweep(dataset=ds, report=report)
