"""`flexlearn-ingest input=<recording> output=<dir> ingest=<topic map>`: a recording to a training dataset.

``inspect=true``: a dry run that prints what the recording holds and what the map makes of it (topics or record
kinds → streams, message counts, rates, unit checks, what is missing) and writes nothing.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors
from flexlearn.config import check, from_dict, to_plain_dict
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.sensing.parts import SensorParts


@hydra_app("flexlearn-ingest", "ingest")
def main(cfg: DictConfig) -> None:
    """Ingest ``cfg.input`` into a dataset under ``cfg.output`` (print its path and how to train on it), or with
    ``inspect=true`` print what the recording holds.

    Args:
        cfg: the composed config (flexlearn/conf/ingest.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-ingest"):
        # heavy imports off the start-up path (the data stack)
        from flexlearn.ingest.recording import ingest_recording
        from flexlearn.ingest.topic_map import load_ingest_config

        check(isinstance(cfg.get("inspect", False), bool), "inspect", cfg.get("inspect"), "must be true or false")
        topic_map = load_ingest_config(cfg.ingest)
        processing = from_dict(ProcessingConfig, cfg.processing, "processing")
        if cfg.get("inspect"):
            from flexlearn.ingest.inspection import format_inspection, inspect_recording  # the dry run only

            print(format_inspection(inspect_recording(Path(cfg.input), topic_map, processing)))
            return
        options = to_plain_dict(cfg.report_options, "report_options") if cfg.get("report_options") else {}
        parts = SensorParts.from_config(cfg.get("sensor"), "sensor")
        result = ingest_recording(
            Path(cfg.input),
            Path(cfg.output),
            topic_map,
            processing,
            force=bool(cfg.force),
            report=options if cfg.report else False,
            show_progress=cfg.get("progress"),
            parts=None if parts == SensorParts.default() else parts,
        )
    state = "up to date" if result.up_to_date else "written"
    print(f"{result.dataset} ({state})")
    print(f"train with: flexlearn-train data=dataset data.path={result.dataset}")


if __name__ == "__main__":
    main()
