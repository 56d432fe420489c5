"""Runtime replay: drive an exported direction model (TorchScript, `flexlearn-export`) with a recording.

The recording is read and checked like in ingestion, each stationary pose's coil field ΔB is estimated by
the processing of `flexlearn.data.process` (seed 002, III-B1), and the exported module — loaded with
`flexlearn.runtime.export.load_torchscript`, as on the robot — maps ΔB to the parent axis. The result holds,
per kept pose, the prediction, the accelerometer label and the angle between them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from flexlearn.data.process import process_sweep
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.ingest.recording import read_recording
from flexlearn.ingest.topic_map import IngestConfig
from flexlearn.runtime.export import load_torchscript


def replay_recording(
    model_path: str | Path, recording: str | Path, cfg: IngestConfig, processing: Optional[ProcessingConfig] = None
) -> dict[str, Any]:
    """Predictions of the exported model over the poses of ``recording``.

    Args:
        model_path: the exported TorchScript model.
        recording: the recording.
        cfg: the topic map.
        processing: the processing settings; None: the defaults.

    Returns:
        dict with 'pose_id' (N,), 'delta_b' (N, 3) [T], 'pred' and 'label' (N, 3) unit vectors in the child
        sensor frame, 'error_deg' (N,) and 'median_error_deg'.
    """
    raw, _, _, _ = read_recording(Path(recording), cfg)
    ds = process_sweep(raw, processing).dataset
    module, _ = load_torchscript(model_path)
    with torch.no_grad():
        pred = module(torch.as_tensor(ds.delta_b, dtype=torch.float32)).double().numpy()
    cos = np.clip(np.sum(pred * ds.label, axis=1) / np.linalg.norm(pred, axis=1), -1.0, 1.0)
    err = np.degrees(np.arccos(cos))
    return {
        "pose_id": ds.pose_id,
        "delta_b": ds.delta_b,
        "pred": pred,
        "label": ds.label,
        "error_deg": err,
        "median_error_deg": float(np.median(err)),
    }
