"""Ingest one recording into a dataset directory: read → check → raw streams → process → report.

Output directory layout (written atomically: a failed run leaves no partial output and keeps a previous one):

    <output>/raw/             the raw-stream form (`flexlearn.sensing.streams.RawSweep`): every stream recorded
    <output>/dataset.parquet  the processed dataset (`flexlearn.data.dataset.DirectionDataset`)
    <output>/ingest.json      fingerprint, source, topic map, message counts, dropped messages and poses by reason
    <output>/report/          quality report (report.md + PNG figures), unless report=False

Idempotent: the fingerprint is a hash of the input's bytes (and those of a separate tumble recording), the
topic map, the processing config and the package version; a second run with the same fingerprint leaves the
output untouched (``force`` re-runs).

Before any other check, the values and times of every stream are checked for their unit
(`flexlearn.ingest.units`: an error names the ``key=value`` that fixes it) and every conversion is said in one
log line. The module's hand tumble (a ``tumble`` topic or serial stream, or ``ingest.tumble_recording``) goes
into the raw sweep's ``meta['tumble']``, where processing fits W.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

import flexlearn
from flexlearn.atomic import atomic_dir, guard_output_dir, json_text
from flexlearn.config import to_dict
from flexlearn.data.process import process_sweep
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.errors import ConfigError, DataError
from flexlearn.ingest.assemble import assemble_raw, split_imu
from flexlearn.ingest.records import DropLog, Stream, clean_stream
from flexlearn.ingest.rosbag import bag_root, read_rosbag
from flexlearn.ingest.serial import read_serial
from flexlearn.ingest.topic_map import IngestConfig
from flexlearn.ingest.units import TimeSetting, magnitude_problem, spacing_problem
from flexlearn.progress import ticker
from flexlearn.sensing.parts import SensorParts
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
    """'rosbag2', 'csv' or 'jsonl' for ``path``.

    Args:
        path: the recording.
        fmt: the declared format; 'auto' decides from the path.

    Returns:
        The format.

    Raises:
        DataError: naming the path when it is missing or of no known kind.
    """
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


def fingerprint(
    path: Path, fmt: str, cfg: IngestConfig, processing: ProcessingConfig, parts: Optional[SensorParts] = None
) -> str:
    """SHA-256 over the input files' names and bytes, the topic map, the processing config, the sensor parts and
    the version.

    The input files are the recording's and a separate tumble recording's.

    Args:
        path: the recording.
        fmt: its format.
        cfg: the topic map.
        processing: the processing settings.
        parts: the sensor parts named (None: the defaults).

    Returns:
        The hex digest.
    """
    h = hashlib.sha256()
    files = _input_files(path, fmt)
    if cfg.tumble_recording:
        files += _input_files(Path(cfg.tumble_recording), tumble_recording_format(cfg))
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    h.update(
        json.dumps(
            {
                "ingest": to_dict(cfg),
                "processing": to_dict(processing),
                "sensor": parts.to_config() if parts is not None else None,
                "version": flexlearn.__version__,
            },
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


def read_streams(
    path: Path, cfg: IngestConfig, fmt: str, show_progress: Optional[bool], only: Optional[str] = None, **kw: Any
) -> dict[str, Stream]:
    """The streams of the recording at ``path`` (format ``fmt``): all the map names, or only the stream ``only``.

    Args:
        path: the recording.
        cfg: the topic map.
        fmt: the recording's format.
        show_progress: progress bar on stderr (None: when stderr is a terminal).
        only: read only this stream.
        **kw: goes to the reader (``skipped``).

    Returns:
        The streams by name.
    """
    if fmt == "rosbag2":
        specs = cfg.topic_specs()
        if only is not None:
            specs = {only: specs[only]}
        elif cfg.tumble_recording:
            specs.pop("tumble", None)
        return read_rosbag(path, cfg, show_progress, specs=specs, **kw)
    streams = cfg.serial.parsed()
    if only is not None:
        streams = {only: streams[only]}
    elif cfg.tumble_recording:
        streams.pop("tumble", None)
    with ticker(f"reading {path.name}", on=show_progress):
        return read_serial(path, cfg, fmt, streams=streams, **kw)


def tumble_recording_format(cfg: IngestConfig) -> str:
    """The format of the separate tumble recording ``cfg.tumble_recording``; one that is not there, not readable as
    a recording, or of a format the map does not describe, is an error naming the key.

    Args:
        cfg: the topic map, with ``tumble_recording`` set.

    Returns:
        The format ('rosbag2' or a serial format).

    Raises:
        DataError: the recording is missing or not readable as one.
        ConfigError: the map does not describe its format.
    """
    t_path = Path(cfg.tumble_recording)
    where = f"config 'ingest.tumble_recording' = '{cfg.tumble_recording}'"
    try:
        if not t_path.exists():
            raise DataError("recording not found")
        fmt = detect_format(t_path, cfg.format)
        if fmt == "rosbag2":
            bag_root(t_path)
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from exc
    if (fmt == "rosbag2" and not cfg.topics) or (fmt != "rosbag2" and not cfg.serial.streams):
        described = "a rosbag2 recording" if cfg.topics else "a serial dump"
        raise ConfigError(f"{where}: a {fmt} recording, but the map (ingest) describes {described}")
    return fmt


def read_tumble_recording(cfg: IngestConfig, show_progress: Optional[bool] = None) -> Stream:
    """The ``mag`` stream of the separate tumble recording ``cfg.tumble_recording``, as the stream ``tumble``.

    Args:
        cfg: the topic map.
        show_progress: progress bar on stderr (None: when stderr is a terminal).

    Returns:
        The ``tumble`` stream.

    Raises:
        DataError: naming the key (`tumble_recording_format`).
    """
    fmt = tumble_recording_format(cfg)
    try:
        tumble = read_streams(Path(cfg.tumble_recording), cfg, fmt, show_progress, only="mag")["mag"]
    except DataError as exc:
        raise DataError(f"config 'ingest.tumble_recording' = '{cfg.tumble_recording}': {exc}") from exc
    tumble.name = "tumble"
    return tumble


def check_units(streams: dict[str, Stream], cfg: IngestConfig, processing: ProcessingConfig, drops: DropLog) -> None:
    """Refuse streams whose values or times are in another unit than the map says (`flexlearn.ingest.units`).

    Log one line per conversion (kept in ``drops.conversions``).

    Args:
        streams: the streams by name.
        cfg: the topic map.
        processing: the plausible field and specific-force magnitudes.
        drops: the drop log.

    Raises:
        DataError: in one line naming every override that fixes them.
    """
    bounds = {"T": processing.field_median_bounds, "m/s^2": processing.accel_median_bounds}
    problems = []
    for name, s in streams.items():
        for col, setting in s.units.items():
            problems.append(magnitude_problem(s.values[col], setting, s.source, bounds.get(setting.si)))
            note = setting.note(f"{s.source} ({name})")
            if note and note not in drops.conversions:
                drops.conversions.append(note)
        if s.time is not None and not s.time.unit_key and s.time.rate_hz > 0:  # rosbag2: stamps in ns
            problems.append(spacing_problem(s.stamp_ns * 1e-9, TimeSetting(s.time.rate_key, s.time.rate_hz), s.source))
    found = [p for p in problems if p]
    if len(found) == 1:
        raise DataError(found[0])
    if found:
        fixes = [m[1] for p in found for m in [re.search(r" set (\S+=\S+)$", p)] if m]
        together = f"; together: set {' '.join(fixes)}" if len(fixes) == len(found) else ""
        raise DataError(f"{len(found)} streams in another unit: " + " | ".join(found) + together)
    if cfg.serial.time_unit != "s" and any(s.time is not None and s.time.unit_key for s in streams.values()):
        drops.conversions.append(
            f"serial times read in {cfg.serial.time_unit} (ingest.serial.time_unit={cfg.serial.time_unit}), "
            "converted to s"
        )
    for line in drops.conversions:
        log.info("%s", line)


def tumble_meta(s: Stream, hint: str) -> dict[str, Any]:
    """``meta['tumble']`` of the raw sweep from the tumble's stream: its finite readings [T] (N, 3).

    They are checked by the ellipsoid fit here so that a poor tumble is named with its source and ``hint``.

    Args:
        s: the tumble stream.
        hint: how to go without it.

    Returns:
        ``meta['tumble']``.

    Raises:
        DataError: for a poor tumble.
    """
    from flexlearn.sensing.module_cal import tumble_calibration  # torch: only for a recording with a tumble

    m = np.asarray(s.values["mag"], dtype=np.float64)
    m = m[np.isfinite(m).all(axis=1)]
    try:
        tumble_calibration(m, s.source)
    except DataError as exc:
        raise DataError(f"{exc}; {hint}") from exc
    return {
        "mag": m.tolist(),
        "units": "T",
        "frame": "magnetometer",
        "what": "readings while the module is tumbled by hand in the ambient field (seed 002, III-B3)",
        "source": s.source,
    }


def read_recording(
    path: Path,
    cfg: IngestConfig,
    show_progress: Optional[bool] = None,
    processing: Optional[ProcessingConfig] = None,
) -> tuple[RawSweep, dict[str, dict[str, np.ndarray]], DropLog, str]:
    """Read and check a recording; return (`RawSweep`, its optional streams as tables, `DropLog`, format).

    Args:
        path: the recording.
        cfg: the topic map.
        show_progress: progress bar on stderr (None: when stderr is a terminal).
        processing: the plausible field and specific-force magnitudes of the unit checks (default
            `ProcessingConfig`).

    Returns:
        (`RawSweep`, its optional streams as tables, `DropLog`, format).
    """
    fmt = detect_format(path, cfg.format)
    drops = DropLog()
    streams = read_streams(path, cfg, fmt, show_progress, skipped=drops.skipped)
    tumble = streams.pop("tumble", None)
    drop_hint = f"{'ingest.topics' if fmt == 'rosbag2' else 'ingest.serial.streams'}.tumble=null"
    if cfg.tumble_recording:
        tumble = read_tumble_recording(cfg, show_progress)
        drop_hint = "ingest.tumble_recording='' (empty)"
    check_units({**streams, **({"tumble": tumble} if tumble else {})}, cfg, processing or ProcessingConfig(), drops)
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
    if tumble is not None:
        meta["tumble"] = tumble_meta(tumble, f"{drop_hint} ingests without it (W = identity)")
        drops.messages["tumble"] = len(tumble)
    raw, extras = assemble_raw(cleaned, meta)
    return raw, extras, drops, fmt


def ingest_recording(
    path: str | Path,
    output: str | Path,
    cfg: IngestConfig,
    processing: Optional[ProcessingConfig] = None,
    force: bool = False,
    report: Union[bool, dict[str, Any]] = True,
    show_progress: Optional[bool] = None,
    parts: Optional[SensorParts] = None,
) -> IngestResult:
    """Ingest ``path`` into the dataset directory ``output`` (layout in the module docstring).

    Args:
        path: the recording.
        output: the dataset directory.
        cfg: the topic map.
        processing: the processing settings; None: the defaults.
        force: ingest again even when ``output`` is up to date.
        report: also write the session report; a dict: with these keyword arguments of
            `flexlearn.data.report.write_report`.
        show_progress: progress bars on stderr (None: when stderr is a terminal).
        parts: the module's sensor parts the poses are checked against (saturation, stuck readings, noise,
            quantisation); None: the defaults (`flexlearn.sensing.parts.SensorParts.default`).

    Returns:
        The `IngestResult`.

    Raises:
        DataError / ConfigError: one line naming the file, topic or column and what was expected; the
            output directory is then left as it was.
    """
    path, output = Path(path), Path(output)
    inputs = [path, *([Path(cfg.tumble_recording)] if cfg.tumble_recording else [])]
    if cfg.tumble_recording:
        tumble_recording_format(cfg)
    guard_output_dir(output, inputs=inputs)  # before anything is read or written
    processing = processing or ProcessingConfig()
    fmt = detect_format(path, cfg.format)
    digest = fingerprint(path, fmt, cfg, processing, parts)
    if not force:
        info = _up_to_date(output, digest)
        if info is not None:
            log.info("%s is up to date with %s", output, path)
            return IngestResult(output, output / DATASET_FILE, True, info)
    raw, _, drops, fmt = read_recording(path, cfg, show_progress, processing)
    with ticker(f"processing {path.name}", on=show_progress):
        processed = process_sweep(raw, processing, parts)
    summary = {
        "fingerprint": digest,
        "input": str(path),
        "format": fmt,
        "ingest": to_dict(cfg),
        "processing": to_dict(processing),
        "sensor": parts.to_config() if parts is not None else None,
        "streams": drops.to_dict(),
        "poses": processed.report.to_dict(),
        "time_origin_ns": raw.meta["time_origin_ns"],
        "flexlearn_version": flexlearn.__version__,
    }
    with atomic_dir(output, inputs=inputs) as tmp, ticker(f"writing {output.name}", on=show_progress):
        raw.save(tmp / RAW_DIR)
        processed.dataset.meta.setdefault("provenance", {})["raw_path"] = str(output / RAW_DIR)
        processed.dataset.save(tmp / DATASET_FILE)
        (tmp / INGEST_FILE).write_text(json_text(summary))
        if report:
            from flexlearn.data.report import write_report  # matplotlib: only when a report is asked for

            options = report if isinstance(report, dict) else {}
            write_report([tmp], tmp / REPORT_DIR, names=[output.name], **options)
    log.info("ingested %s: %s", path, processed.report.summary())
    return IngestResult(output, output / DATASET_FILE, False, summary)
