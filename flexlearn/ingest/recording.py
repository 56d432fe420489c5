"""Ingest one recording into a dataset directory: read → check → raw streams → process → report.

Output directory layout (written atomically: a failed run leaves no partial output and keeps a previous one):

    <output>/raw/             the raw-stream form (`flexlearn.sensing.streams.RawSweep`): every stream recorded
    <output>/dataset.parquet  the processed dataset (`flexlearn.data.dataset.DirectionDataset`)
    <output>/ingest.json      fingerprint, source, topic map, message counts, dropped messages and poses by reason
    <output>/report/          quality report (report.md + PNG figures), unless report=False

Idempotent: the fingerprint is a hash of the input's bytes, the topic map, the processing config and the
package version; a second run with the same fingerprint leaves the output untouched (``force`` re-runs).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

import flexlearn
from flexlearn.atomic import atomic_dir, guard_output_dir
from flexlearn.config import to_dict
from flexlearn.data.process import process_sweep
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.errors import DataError
from flexlearn.ingest.assemble import assemble_raw, split_imu
from flexlearn.ingest.records import DropLog, clean_stream
from flexlearn.ingest.rosbag import bag_root, read_rosbag
from flexlearn.ingest.serial import read_serial
from flexlearn.ingest.topic_map import IngestConfig
from flexlearn.progress import ticker
from flexlearn.sensing.streams import RawSweep

log = logging.getLogger(__name__)

INGEST_FILE = "ingest.json"
DATASET_FILE = "dataset.parquet"
RAW_DIR = "raw"
REPORT_DIR = "report"


@dataclass
class IngestResult:
    """What `ingest_recording` did: output paths, whether it was already up to date, and its summary."""

    output: Path
    dataset: Path
    up_to_date: bool
    summary: dict[str, Any]


def detect_format(path: Path, fmt: str) -> str:
    """'rosbag2', 'csv' or 'jsonl' for ``path`` (``fmt`` 'auto' decides from the path); errors name the path."""
    if fmt != "auto":
        return fmt
    if path.is_dir() or path.suffix in (".mcap", ".db3"):
        return "rosbag2"
    if path.suffix.lower() == ".csv":
        return "csv"
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if not path.exists():
        raise DataError(f"{path}: recording not found")
    raise DataError(
        f"{path}: cannot tell the recording's format from its name (expected a rosbag2 directory, "
        "*.csv or *.jsonl); set ingest.format"
    )


def _input_files(path: Path, fmt: str) -> list[Path]:
    if fmt == "rosbag2":
        return sorted(p for p in bag_root(path).iterdir() if p.is_file())
    if not path.is_file():
        raise DataError(f"{path}: recording not found")
    return [path]


def fingerprint(path: Path, fmt: str, cfg: IngestConfig, processing: ProcessingConfig) -> str:
    """SHA-256 over the input files' names and bytes, the topic map, the processing config and the version."""
    h = hashlib.sha256()
    for f in _input_files(path, fmt):
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    h.update(
        json.dumps(
            {"ingest": to_dict(cfg), "processing": to_dict(processing), "version": flexlearn.__version__},
            sort_keys=True,
            default=str,
        ).encode()
    )
    return h.hexdigest()


def _up_to_date(output: Path, digest: str) -> Optional[dict[str, Any]]:
    f = output / INGEST_FILE
    if not (f.is_file() and (output / DATASET_FILE).is_file()):
        return None
    try:
        info = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and info.get("fingerprint") == digest else None


def read_recording(
    path: Path, cfg: IngestConfig, show_progress: Optional[bool] = None
) -> tuple[RawSweep, dict[str, dict[str, np.ndarray]], DropLog, str]:
    """Read and check a recording; return (`RawSweep`, its optional streams as tables, `DropLog`, format)."""
    fmt = detect_format(path, cfg.format)
    if fmt == "rosbag2":
        streams = read_rosbag(path, cfg, show_progress)
    else:
        with ticker(f"reading {path.name}", on=show_progress):
            streams = read_serial(path, cfg, fmt)
    drops = DropLog()
    cleaned, imu_orientation = split_imu({name: clean_stream(s, cfg.checks, drops) for name, s in streams.items()})
    meta = {
        "units": {"time": "s", "mag": "T", "accel": "m/s^2", "rate": "rad/s", "length": "m"},
        "frames": "vectors in the child sensor frame; target in the parent frame (z up, straight = -z)",
        "modules": {"coil": cfg.coil_module, "sensor": cfg.sensor_module},
        "provenance": {
            "ingested_from": str(path),
            "format": fmt,
            "ingester": "flexlearn.ingest",
            "version": flexlearn.__version__,
        },
    }
    if imu_orientation:
        meta["imu_orientation"] = imu_orientation  # reported by the IMU, or computed (`split_imu`)
    raw, extras = assemble_raw(cleaned, meta)
    return raw, extras, drops, fmt


def ingest_recording(
    path: str | Path,
    output: str | Path,
    cfg: IngestConfig,
    processing: Optional[ProcessingConfig] = None,
    force: bool = False,
    report: bool = True,
    show_progress: Optional[bool] = None,
    report_options: Optional[dict[str, Any]] = None,
) -> IngestResult:
    """Ingest ``path`` into the dataset directory ``output`` (layout in the module docstring).

    Raises:
        DataError / ConfigError: one line naming the file, topic or column and what was expected; the
            output directory is then left as it was.
    """
    path, output = Path(path), Path(output)
    guard_output_dir(output, inputs=[path])  # before anything is read or written
    processing = processing or ProcessingConfig()
    fmt = detect_format(path, cfg.format)
    digest = fingerprint(path, fmt, cfg, processing)
    if not force:
        info = _up_to_date(output, digest)
        if info is not None:
            log.info("%s is up to date with %s", output, path)
            return IngestResult(output, output / DATASET_FILE, True, info)
    raw, _, drops, fmt = read_recording(path, cfg, show_progress)
    with ticker(f"processing {path.name}", on=show_progress):
        processed = process_sweep(raw, processing)
    summary = {
        "fingerprint": digest,
        "input": str(path),
        "format": fmt,
        "ingest": to_dict(cfg),
        "processing": to_dict(processing),
        "streams": drops.to_dict(),
        "poses": processed.report.to_dict(),
        "time_origin_ns": raw.meta["time_origin_ns"],
        "flexlearn_version": flexlearn.__version__,
    }
    with atomic_dir(output, inputs=[path]) as tmp, ticker(f"writing {output.name}", on=show_progress):
        raw.save(tmp / RAW_DIR)
        processed.dataset.meta.setdefault("provenance", {})["raw_path"] = str(output / RAW_DIR)
        processed.dataset.save(tmp / DATASET_FILE)
        (tmp / INGEST_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True, default=float) + "\n")
        if report:
            from flexlearn.data.report import write_report  # matplotlib: only when a report is asked for

            write_report([tmp], tmp / REPORT_DIR, names=[output.name], **(report_options or {}))
    log.info("ingested %s: %s", path, processed.report.summary())
    return IngestResult(output, output / DATASET_FILE, False, summary)
