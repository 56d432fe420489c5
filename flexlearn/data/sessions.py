"""Recorded sessions of the dataset quality report (`flexlearn.data.report`): loading and the numbers of each.

A *session* is an ingested dataset directory (``raw/``, ``dataset.parquet``, ``ingest.json``; see
`flexlearn.ingest.recording`) or a bare raw sweep directory (processed here with the default config).
Per session: child directions u (P, 3) (motion capture if recorded, else the commanded targets), bend angle
λ = arccos(−u_z) [deg], the coverage cap [deg], per-pose noise (magnetometer [T], specific force [m/s²],
rate gyro [rad/s]) and the JSON-serialisable numbers of `session_stats` (fields shown in µT and nT).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from flexlearn.config import from_dict
from flexlearn.data import quality as q
from flexlearn.data.dataset import DirectionDataset
from flexlearn.data.faults import valid_readings
from flexlearn.data.process import process_sweep
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.data.sweep_meta import sweep_cap
from flexlearn.data.units import to_si
from flexlearn.errors import DataError
from flexlearn.sensing.streams import RawSweep
from flexlearn.sim.targets import assign_cells, cell_quotas
from flexlearn.tables import parse_json_object


@dataclass
class Session:
    """One recorded session: raw streams, its dataset, ingestion summary and optional motion capture."""

    name: str
    raw: RawSweep
    dataset: DirectionDataset
    ingest: dict[str, Any] = field(default_factory=dict)
    mocap: Optional[dict[str, np.ndarray]] = None
    rate: Optional[dict[str, np.ndarray]] = None

    @property
    def kept(self) -> np.ndarray:
        """(P,) bool over the raw pose table: the pose is in the dataset."""
        return np.isin(self.raw.pose_id, self.dataset.pose_id)

    def directions(self, use_mocap: bool = True) -> np.ndarray:
        """(P, 3) child direction per raw pose: the mean motion-capture direction over the hold window if
        recorded (u = R(q)·e, e = (0, 0, −1)), else the commanded target.

        Args:
            use_mocap: use the motion capture when recorded; False: always the commanded target.

        Returns:
            Unit directions (P, 3) in raw pose-table order.
        """
        u = self.raw.target.astype(np.float64).copy()
        if not (use_mocap and self.mocap is not None and len(self.mocap["t"])):
            return u
        qw, qx, qy, qz = (self.mocap[k] for k in ("qw", "qx", "qy", "qz"))
        # third column of R(q), negated: R(q)·(0, 0, −1)
        m = -np.stack([2 * (qx * qz + qw * qy), 2 * (qy * qz - qw * qx), 1 - 2 * (qx * qx + qy * qy)], axis=-1)
        win = q.Windows.from_sweep(self.raw)
        k = win.locate(self.mocap["t"])
        inside = k >= 0
        n = np.bincount(k[inside], minlength=win.n)
        s = np.stack([np.bincount(k[inside], weights=m[inside, j], minlength=win.n) for j in range(3)], -1)
        have = n > 0
        mean = s[have] / np.linalg.norm(s[have], axis=1, keepdims=True)
        u[win.order[have]] = mean
        return u

    def processing(self) -> ProcessingConfig:
        """The processing config the dataset was made with (its ``meta["processing"]``; defaults if absent).

        Returns:
            The `ProcessingConfig`.
        """
        return from_dict(ProcessingConfig, self.dataset.meta.get("processing", {}), "dataset processing")


def load_session(path: Path, name: Optional[str] = None) -> Session:
    """Load an ingested session directory or a raw sweep directory (processed with defaults).

    Args:
        path: the directory.
        name: the session's name; None: the directory's.

    Returns:
        The `Session`.

    Raises:
        DataError: when the directory is neither.
    """
    path = Path(path)
    if (path / "raw").is_dir():
        raw = RawSweep.load(path / "raw")
        dataset = DirectionDataset.load(path / "dataset.parquet")
        info_file = path / "ingest.json"
        info = parse_json_object(info_file.read_text(), str(info_file), "ingest summary") if info_file.is_file() else {}
    elif (path / "mag.parquet").is_file():
        raw = RawSweep.load(path)
        dataset, info = process_sweep(raw).dataset, {}
    else:
        raise DataError(
            f"{path}: not a session (expected an ingested directory with raw/ and dataset.parquet, "
            "or a raw sweep directory)"
        )
    return Session(
        name or path.name,
        raw,
        dataset,
        info,
        *(raw.columns(n) if n in raw.streams else None for n in ("mocap", "rate")),
    )


# ---------------------------------------------------------------------------------------------- statistics
def bend_angle_deg(u: np.ndarray) -> np.ndarray:
    """Bend angle λ [deg] of child directions u (N, 3) (angle from the straight axis −z).

    Args:
        u: unit child directions (N, 3).

    Returns:
        λ (N,) [deg].
    """
    return np.degrees(np.arccos(np.clip(-u[:, 2], -1.0, 1.0)))


def session_cap_deg(s: Session) -> tuple[float, str]:
    """(the session's cap λmax [deg], where it comes from): ``meta.json`` rig.max_colatitude, else the largest
    commanded bend of its pose table rounded up to 0.1°.

    Args:
        s: the session.

    Returns:
        (λmax [deg], its source).
    """
    cap = sweep_cap(s.raw.meta)
    if cap is not None:
        return math.degrees(cap), "meta.json rig.max_colatitude"
    lam = bend_angle_deg(np.asarray(s.raw.target, dtype=np.float64).reshape(-1, 3))
    return max(math.ceil(float(lam.max()) * 10.0) / 10.0, 0.1), "largest commanded bend"


def noise_per_pose(s: Session) -> dict[str, np.ndarray]:
    """Per-pose noise (P,) in sorted-window order: 'mag' [T] (rms over axes of the std of the accepted coil-off
    samples about their mean), 'accel' [m/s²] (same over the hold window), 'rate' [rad/s] if recorded.

    Args:
        s: the session (its processing config converts the raw units to SI).

    Returns:
        The noise (P,) by sensor; NaN for a pose with fewer than 2 samples.
    """
    cfg = s.processing()
    raw, _ = to_si(s.raw, {"time": cfg.time_unit, "field": cfg.field_unit, "accel": cfg.accel_unit})
    win = q.Windows.from_sweep(raw)
    pulses = q.Pulses.from_events(raw.coil_t, raw.coil_on, win)
    polls = q.classify_polls(raw.mag_t, raw.mag, pulses, win, cfg, clip=np.inf)  # noise of every sample
    _, present = valid_readings(raw.mag)
    sel = q.select(polls, pulses, win, polls.fresh & present, cfg)

    def rms_std(idx: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Per-pose RMS over the 3 axes of the sample std (NaN below 2 samples).

        Args:
            idx: pose index of each sample (M,).
            x: readings (M, 3).

        Returns:
            (P,).
        """
        n = np.bincount(idx, minlength=win.n).astype(np.float64)
        mean = (
            np.stack([np.bincount(idx, weights=x[:, j], minlength=win.n) for j in range(3)], -1)
            / np.maximum(n, 1)[:, None]
        )
        var = (
            np.stack([np.bincount(idx, weights=(x[:, j] - mean[idx, j]) ** 2, minlength=win.n) for j in range(3)], -1)
            / np.maximum(n - 1, 1)[:, None]
        )
        return np.where(n > 1, np.sqrt(var.mean(axis=1)), np.nan)

    out = {"mag": rms_std(sel.pose[sel.off], raw.mag[sel.off])}
    series = [("accel", raw.accel_t, raw.accel)]
    if "rate" in raw.streams:
        rate = raw.streams["rate"]  # times in s, like the other streams
        series.append(("rate", np.asarray(rate["t"], dtype=np.float64), np.asarray(rate["rate"]).reshape(-1, 3)))
    for name, t, x in series:
        k = win.locate(t)
        ok = (k >= 0) & valid_readings(x)[1]
        out[name] = rms_std(k[ok], x[ok])
    return out


def binned_median(x: np.ndarray, y: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Median of ``y`` in each bin of ``x``.

    Args:
        x: the binned values (N,), e.g. λ [deg].
        y: the values (N,) whose medians are taken.
        edges: bin edges (B + 1,), in the unit of ``x``.

    Returns:
        (B,) medians; NaN for an empty bin.
    """
    b = np.digitize(x, edges) - 1
    return np.array([np.median(y[b == i]) if np.any(b == i) else np.nan for i in range(len(edges) - 1)])


def session_stats(
    s: Session, centres: np.ndarray, max_colatitude: float, min_fill: float, edges: np.ndarray
) -> dict[str, Any]:
    """Numbers of the report for one session (JSON-serialisable).

    Args:
        s: the session.
        centres: cell centres of the coverage grid (C, 3).
        max_colatitude: the cap of the coverage check.
        min_fill: a cell is under-filled below this fraction of its quota.
        edges: histogram bin edges.

    Returns:
        The numbers by name.
    """
    kept = s.kept
    u = s.directions()
    db = np.linalg.norm(s.dataset.delta_b, axis=1)
    lam_kept = bend_angle_deg(u[dataset_rows(s)])  # in dataset row order, like db
    noise = noise_per_pose(s)
    counts = (
        np.bincount(assign_cells(u[kept], centres), minlength=centres.shape[0])
        if kept.any()
        else np.zeros(centres.shape[0], int)
    )
    expected = cell_quotas(int(kept.sum()), centres, max_colatitude)
    under = np.flatnonzero(counts < min_fill * expected)
    report = s.dataset.meta.get("report", {})
    off = np.all(np.isfinite(s.raw.mag), axis=1)
    stats = {
        "poses": int(len(kept)),
        "kept": int(kept.sum()),
        "kept_fraction": float(kept.mean()),
        "dropped_poses": report.get("dropped_counts", {}),
        "samples": report.get("samples", {}),
        "dropped_messages": s.ingest.get("streams", {}).get("dropped", {}),
        "gap_time_s": s.ingest.get("streams", {}).get("gap_time_s", {}),
        "delta_b_median_uT": float(np.median(db) * 1e6),
        "delta_b_binned_uT": (binned_median(lam_kept, db, edges) * 1e6).tolist(),
        "mag_noise_nT": float(np.nanmedian(noise["mag"]) * 1e9),
        "accel_noise_mps2": float(np.nanmedian(noise["accel"])),
        "ambient_uT": float(np.median(np.linalg.norm(s.raw.mag[off], axis=1)) * 1e6) if off.any() else float("nan"),
        "bend_max_deg": float(lam_kept.max()) if lam_kept.size else float("nan"),
        "under_covered_cells": [int(i) for i in under],
        "mocap": s.mocap is not None,
    }
    if "rate" in noise:
        stats["rate_noise_radps"] = float(np.nanmedian(noise["rate"]))
    if s.mocap is not None:
        err = np.degrees(np.arccos(np.clip(np.sum(u[kept] * s.raw.target[kept], axis=1), -1, 1)))
        stats["positioning_error_deg_median"] = float(np.median(err))
    return stats


def dataset_rows(s: Session) -> np.ndarray:
    """Raw pose-table row of each dataset row.

    Args:
        s: the session.

    Returns:
        (N,) int indices into the raw pose table, one per dataset row.
    """
    order = np.argsort(s.raw.pose_id)
    return order[np.searchsorted(s.raw.pose_id, s.dataset.pose_id, sorter=order)]
