"""Where a training dataset comes from: the simulated sweep (default), a raw recording, or a dataset file.

`prepare_dataset` turns the ``data`` config block into the path of a processed dataset. Simulated
sweeps and their processed datasets are cached under ``cache_dir`` by a hash of everything that
determines them (simulator config, processing config, package version), so runs with the same config
reuse the same sweep. A raw recording (``data.source: raw``) is keyed by a SHA-256 of the bytes of its
files (`raw_fingerprint`), not by its path: after the recording changes, its dataset is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import flexlearn
from flexlearn.atomic import OutputPathError
from flexlearn.config import check, from_dict, to_dict
from flexlearn.data.dataset import DirectionDataset, merge_modules
from flexlearn.data.process import process_sweep
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.errors import ConfigError, DataError
from flexlearn.fingerprint import file_sha256, update_with_file
from flexlearn.sensing.parts import SensorParts
from flexlearn.sensing.streams import RawSweep
from flexlearn.sim.rig import RigConfig, simulate_sweep

log = logging.getLogger(__name__)

SOURCES = ("sim", "raw", "dataset")


@dataclass
class DataConfig:
    """The ``data`` config group: where the dataset comes from and how it is batched."""

    source: str = "sim"
    path: Optional[str] = None  # raw sweep directory (source=raw) or dataset file (source=dataset)
    # Several modules in one dataset (a ``module`` column, `merge_modules`): simulated modules by module seed
    # (source=sim; each its own sweep, seeded by its module seed) or one raw sweep / dataset per module
    # (source=raw|dataset, instead of ``path``). Module k is the k-th entry.
    module_seeds: list[int] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    batch_size: Optional[int] = None  # None: follows the train split's size (`datamodule.auto_batch_size`)
    eval_batch_size: int = 8192
    sim: dict[str, Any] = field(default_factory=dict)  # RigConfig overrides
    processing: dict[str, Any] = field(default_factory=dict)  # ProcessingConfig overrides
    # The module's sensor parts (`flexlearn.sensing.parts.SensorParts`): {magnetometer: <preset or values>,
    # imu: <preset or values>}, a part left out being the default's; None: the sweep's own or the default.
    sensor: Optional[dict[str, Any]] = None

    def parts(self) -> Optional[SensorParts]:
        """The parts ``sensor`` names, or None (processing then takes the sweep's own or the default)."""
        if self.sensor is None:
            return None
        if not isinstance(self.sensor, dict):
            raise ConfigError(f"config 'data.sensor' = {self.sensor!r}: expected {{magnetometer: ..., imu: ...}}")
        return SensorParts.from_config(
            {"magnetometer": "sim_default", "imu": "sim_default", **self.sensor}, "data.sensor"
        )

    def validate(self) -> None:
        check(self.source in SOURCES, "data.source", self.source, f"expected one of {SOURCES}")
        check(
            self.source == "sim" or bool(self.path) != bool(self.paths),
            "data.path",
            self.path,
            f"data.source = {self.source} needs exactly one of data.path (one module) and data.paths "
            f"(several modules; now {list(self.paths)})",
        )
        check(
            not self.module_seeds or self.source == "sim",
            "data.module_seeds",
            list(self.module_seeds),
            "simulated modules need data.source = sim (recorded modules: data.paths)",
        )
        check(
            not self.paths or self.source != "sim",
            "data.paths",
            list(self.paths),
            "needs data.source = raw or dataset (simulated modules: data.module_seeds)",
        )
        check(
            not self.path or self.source != "sim",
            "data.path",
            self.path,
            "is not read with data.source = sim (the simulated sweep would be trained on instead): add "
            "data=dataset (a .parquet or a flexlearn-ingest directory) or data=raw (a raw sweep directory)",
        )
        for key, items in (("module_seeds", self.module_seeds), ("paths", self.paths)):
            check(len(set(map(str, items))) == len(items), f"data.{key}", list(items), "lists a module twice")
        check(
            all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in self.module_seeds),
            "data.module_seeds",
            list(self.module_seeds),
            "must be integers >= 0",
        )
        check(
            self.batch_size is None or self.batch_size >= 1,
            "data.batch_size",
            self.batch_size,
            "must be >= 1 (or null: follows the dataset size)",
        )
        check(self.eval_batch_size >= 1, "data.eval_batch_size", self.eval_batch_size, "must be >= 1")
        # Building the blocks validates them and names any unknown key.
        from_dict(RigConfig, self.sim, "data.sim")
        from_dict(ProcessingConfig, self.processing, "data.processing")
        self.parts()


def raw_fingerprint(raw_dir: Path) -> str:
    """SHA-256 (hex) of every regular file under ``raw_dir``: relative name, size and bytes, streamed.

    Sizes and modification times are not trusted (a rewrite can keep both); hidden files (names starting
    with '.') are skipped. A missing or empty directory raises `DataError`.

    Args:
        raw_dir: the raw sweep directory.

    Returns:
        The hex digest.

    Raises:
        DataError: ``raw_dir`` is missing or holds no regular file.
    """
    if not raw_dir.is_dir():
        raise DataError(f"{raw_dir}: raw sweep directory not found (data.path)")
    files = sorted(
        p
        for p in raw_dir.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(raw_dir).parts)
    )
    if not files:
        raise DataError(f"{raw_dir}: raw sweep directory is empty (data.path)")
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(raw_dir).as_posix()}\0{p.stat().st_size}\0".encode())
        update_with_file(h, p)
    return h.hexdigest()


def _digest(obj: Mapping[str, Any]) -> str:
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def process_raw(
    raw_dir: Path, processing: ProcessingConfig, out_file: Path, parts: Optional[SensorParts] = None
) -> Path:
    """Process a raw sweep directory into a dataset file (drop report in its metadata).

    Args:
        raw_dir: the raw sweep directory.
        processing: the processing settings.
        out_file: the dataset file written.
        parts: the module's sensor parts; None: the sweep's own (``meta.json`` 'sensor') or the default.

    Returns:
        ``out_file``.

    Raises:
        DataError: naming the recording on every line.
    """
    raw = RawSweep.load(raw_dir)
    try:
        result = process_sweep(raw, processing, parts)
    except DataError as exc:  # name the recording on every line
        lines = str(exc).splitlines() or [""]
        raise DataError("\n".join(f"{raw_dir}: {line}" for line in lines)) from None
    result.dataset.meta.setdefault("provenance", {})["raw_path"] = str(raw_dir)
    result.dataset.save(out_file)
    log.info("processed %s: %s", raw_dir, result.report.summary())
    return out_file


def prepare_dataset(data: DataConfig, cache_dir: str | Path) -> Path:
    """Return the path of the processed dataset the ``data`` block describes, building it if needed.

    With ``module_seeds`` or ``paths``, one dataset of all the modules (a ``module`` column, `merge_modules`).

    Args:
        data: the ``data`` block.
        cache_dir: where built datasets are cached.

    Returns:
        The dataset's path.
    """
    if data.module_seeds or data.paths:
        return _prepare_modules(data, Path(cache_dir))
    return _prepare_one(data, Path(cache_dir))


def _prepare_modules(data: DataConfig, cache_dir: Path) -> Path:
    """The merged dataset of every module in ``data.module_seeds`` / ``data.paths``, cached by their datasets'
    fingerprints (a changed recording rebuilds it)."""
    parts: list[Path] = []
    for seed in data.module_seeds:
        sim = {**data.sim, "seed": int(seed), "module_seed": int(seed)}
        parts.append(
            _prepare_one(DataConfig(source="sim", sim=sim, processing=data.processing, sensor=data.sensor), cache_dir)
        )
    for path in data.paths:
        parts.append(
            _prepare_one(
                DataConfig(source=data.source, path=path, processing=data.processing, sensor=data.sensor), cache_dir
            )
        )
    key = _digest({"parts": [file_sha256(p) for p in parts], "version": flexlearn.__version__})
    out = cache_dir / "datasets" / f"modules{len(parts)}-{key}.parquet"
    if not out.exists():
        merge_modules([DirectionDataset.load(p) for p in parts]).save(out)
        log.info("merged %d modules into %s", len(parts), out)
    return out


def _save_cache_entry(raw: RawSweep, raw_dir: Path) -> None:
    """Save a simulated sweep as the cache entry ``raw_dir``. Jobs of a sweep running at once may simulate the same
    entry (the same key, so the same content): when another one's entry appears while this one commits, it is kept
    and this copy dropped, instead of the commit failing on a directory that is not empty."""
    try:
        raw.save(raw_dir)
    except OutputPathError:
        if not (raw_dir / "meta.json").exists():
            raise
        log.info("%s was written meanwhile by a concurrent run (the same key): used as it is", raw_dir)


def _prepare_one(data: DataConfig, cache_dir: Path) -> Path:
    """The dataset of one module: a dataset file, a processed raw sweep, or a simulated and processed sweep."""
    processing = from_dict(ProcessingConfig, data.processing, "data.processing")
    parts = data.parts()
    sensor_key = parts.to_config() if parts is not None else None
    if data.source == "dataset":
        path = Path(data.path or "")
        if path.is_dir() and (path / "dataset.parquet").is_file():  # a flexlearn-ingest output directory
            path = path / "dataset.parquet"
        if not path.is_file():
            raise DataError(
                f"{path}: dataset file not found (data.path: a .parquet file or a directory holding dataset.parquet)"
            )
        return path
    if data.source == "raw":
        raw_dir = Path(data.path or "")
        key = _digest(
            {
                "raw": raw_fingerprint(raw_dir),
                "processing": to_dict(processing),
                "sensor": sensor_key,
                "version": flexlearn.__version__,
            }
        )
        out = cache_dir / "datasets" / f"{raw_dir.name}-{key}.parquet"
        return out if out.exists() else process_raw(raw_dir, processing, out, parts)
    rig = from_dict(RigConfig, data.sim, "data.sim")
    sim_key = _digest({"sim": to_dict(rig), "version": flexlearn.__version__})
    raw_dir = cache_dir / "sweeps" / f"rig-{sim_key}"
    if not (raw_dir / "meta.json").exists():
        log.info("simulating the sweep rig (%d poses) into %s", rig.n_poses, raw_dir)
        _save_cache_entry(simulate_sweep(rig), raw_dir)
    key = _digest(
        {"sim": sim_key, "processing": to_dict(processing), "sensor": sensor_key, "version": flexlearn.__version__}
    )
    out = cache_dir / "datasets" / f"rig-{sim_key}-{key}.parquet"
    return out if out.exists() else process_raw(raw_dir, processing, out, parts)
