"""`flexlearn-ingest input=<recording> output=<dir> ingest=<topic map>`: a recording to a training dataset."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors
from flexlearn.config import from_dict, to_plain_dict
from flexlearn.data.processing_config import ProcessingConfig


@hydra_app("flexlearn-ingest", "ingest")
def main(cfg: DictConfig) -> None:
    """Ingest ``cfg.input`` into a dataset under ``cfg.output``; print its path and how to train on it."""
    with readable_errors("flexlearn-ingest"):
        # heavy imports off the start-up path (the data stack)
        from flexlearn.ingest.recording import ingest_recording
        from flexlearn.ingest.topic_map import load_ingest_config

        topic_map = load_ingest_config(cfg.ingest)
        processing = from_dict(ProcessingConfig, cfg.processing, "processing")
        options = to_plain_dict(cfg.report_options, "report_options") if cfg.get("report_options") else {}
        result = ingest_recording(
            Path(cfg.input),
            Path(cfg.output),
            topic_map,
            processing,
            force=bool(cfg.force),
            report=bool(cfg.report),
            show_progress=cfg.get("progress"),
            report_options=options,
        )
    state = "up to date" if result.up_to_date else "written"
    print(f"{result.dataset} ({state})")
    print(f"train with: flexlearn-train data=dataset data.path={result.dataset}")


if __name__ == "__main__":
    main()
