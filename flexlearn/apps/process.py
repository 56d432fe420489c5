"""`flexlearn-process input=<raw dir> output=<file.parquet>`: raw streams to a training dataset."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors, use_progress
from flexlearn.atomic import guard_output_file
from flexlearn.config import from_dict
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.progress import ticker
from flexlearn.sensing.parts import SensorParts


@hydra_app("flexlearn-process", "process")
def main(cfg: DictConfig) -> None:
    """Process the raw sweep ``cfg.input`` into the dataset ``cfg.output``; print its path.

    Args:
        cfg: the composed config (flexlearn/conf/process.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-process"):
        use_progress(cfg)
        from flexlearn.data.sources import process_raw  # heavy import off the start-up path (torch)

        guard_output_file(cfg.output, inputs=[cfg.input])  # before the input is read
        processing = from_dict(ProcessingConfig, cfg.processing, "processing")
        parts = SensorParts.from_config(cfg.get("sensor"), "sensor")
        # The default parts give way to the ones a sweep declares in its meta.json ('sensor', e.g. simulated).
        chosen = None if parts == SensorParts.default() else parts
        with ticker(f"processing {cfg.input}"):
            path = process_raw(Path(cfg.input), processing, Path(cfg.output), chosen)
    print(path)


if __name__ == "__main__":
    main()
