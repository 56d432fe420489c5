"""Frame streams of a simulated robot recording in the Pi runner's protocols (JSON lines, binary), for dry runs
and runtime tests.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from flexlearn.atomic import atomic_path
from flexlearn.runtime.pikit.serial_frames import encode_frame
from flexlearn.sim.robot import RobotRecording


def write_frames_jsonl(rec: RobotRecording, path: Any) -> None:
    """Write a recording in the runner's frame protocol (``flexlearn-frames/1``, see scripts/pi_runner.py).

    Args:
        rec: the recording.
        path: the JSON-lines file written, atomically.
    """

    def rows(a: np.ndarray) -> list:
        return [[None if not np.isfinite(c) else float(c) for c in r] for r in a]

    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write(json.dumps({"type": "ref", "t": float(rec.att_t[0]), "q": rows(rec.quats[0])}) + "\n")
        for t, kind, i in rec.frames():
            if kind == "att":
                f.write(json.dumps({"type": "att", "t": t, "q": rows(rec.quats[i])}) + "\n")
            else:
                f.write(json.dumps({"type": "mag", "t": t, "coil": int(rec.coil[i]), "m": rows(rec.mags[i])}) + "\n")


def write_frames_binary(rec: RobotRecording, path: Any) -> None:
    """Write a recording in the binary frame protocol (``flexlearn-binframes/1``,
    `flexlearn.runtime.pikit.serial_frames`).

    Args:
        rec: the recording.
        path: the file written, atomically.
    """
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(encode_frame("ref", float(rec.att_t[0]), 0, q=rec.quats[0].tolist()))
        for seq, (t, kind, i) in enumerate(rec.frames(), start=1):
            if kind == "att":
                f.write(encode_frame("att", t, seq, q=rec.quats[i].tolist()))
            else:
                f.write(encode_frame("mag", t, seq, m=rec.mags[i].tolist(), coil=int(rec.coil[i])))
