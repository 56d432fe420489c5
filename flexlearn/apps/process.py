"""`flexlearn-process input=<raw dir> output=<file.parquet>`: raw streams to a training dataset."""
from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from flexlearn.apps._runner import CONF_DIR, readable_errors
from flexlearn.atomic import guard_output_file
from flexlearn.config import from_dict
from flexlearn.data.process import ProcessingConfig
from flexlearn.data.sources import process_raw


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="process")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-process"):
        guard_output_file(cfg.output, inputs=[cfg.input])  # before the input is read
        processing = from_dict(ProcessingConfig, cfg.processing, "processing")
        path = process_raw(Path(cfg.input), processing, Path(cfg.output))
    print(path)


if __name__ == "__main__":
    main()
