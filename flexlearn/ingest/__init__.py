"""Ingestion of logged data (rosbag2 MCAP/sqlite3, CSV and JSON-lines serial dumps) into the raw-stream form
and a processed dataset; writers that turn simulated sweeps into such recordings; sweep planning."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from flexlearn.ingest.topic_map import IngestConfig, load_ingest_config

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def topic_map(name: str, overrides: Sequence[str] = ()) -> IngestConfig:
    """The topic map ``conf/ingest/<name>.yaml`` (defaults and interpolations resolved), validated.

    Args:
        name: the map's name.
        overrides: Hydra overrides applied to it.

    Returns:
        The validated `IngestConfig`.
    """
    from hydra import compose, initialize_config_dir  # hydra: kept off the import of every flexlearn.ingest module
    from hydra.core.global_hydra import GlobalHydra  # hydra: kept off the import of every flexlearn.ingest module

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
            cfg = compose(config_name="ingest", overrides=[f"ingest={name}", "input=-", *overrides])
    finally:
        GlobalHydra.instance().clear()
    return load_ingest_config(cfg.ingest)
