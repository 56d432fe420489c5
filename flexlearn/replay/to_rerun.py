"""A flexlearn MCAP file as a rerun recording (``.rrd``), for users who watch their robots in rerun.

rerun (0.41) opens MCAP files itself, but it reads messages only from chunked files and decodes Foxglove's
protobuf messages, not the JSON ones flexlearn writes (measured: our files convert to an ``.rrd`` without a single
time point). `mcap_to_rrd` reads any file of ``flexlearn.runtime.pikit.foxglove`` (runner, replay, Cosserat, CPR and
flexible-arm recordings) with the ``mcap`` package and logs each message with rerun's own types, on the timeline
``time`` (the message's log time as a duration [s]):

* ``foxglove.SceneUpdate`` → per entity ``<topic>/<entity id>``: its line strips (`rerun.LineStrips3D`, with
  colour) and its arrows (`rerun.Arrows3D`);
* ``foxglove.FrameTransforms`` → per frame ``/tf/<child>``: `rerun.Transform3D` (translation and rotation, child
  frame relative to its parent);
* ``flexlearn.Values`` → per number ``<topic>/<key>`` (and ``<key>/<i>`` for each element of a list): a
  `rerun.Scalars` sample; null and text are left out.

rerun-sdk is an optional dependency (``pip install 'flexlearn[rerun]'``, about 230 MB with pyarrow), never needed on
the Pi: the conversion runs on the workstation, from the files the runner or the simulators wrote.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Tuple

from flexlearn.errors import ConfigError, DataError

__all__ = ["mcap_to_rrd", "scalar_items"]

TIMELINE = "time"


def _rerun() -> Tuple[Any, Any]:
    try:
        import rerun as rr  # optional dependency: the 'rerun' extra
        from mcap.reader import make_reader  # optional dependency: the 'rerun' extra
    except ImportError as exc:
        raise ConfigError(
            f"converting to a rerun recording needs rerun-sdk and mcap ({exc.name} is not installed): "
            "pip install 'flexlearn[rerun]'"
        ) from None
    return rr, make_reader


def scalar_items(values: Dict[str, Any], prefix: str = "") -> Iterable[Tuple[str, float]]:
    """The plottable numbers of a ``flexlearn.Values`` message: ``(name, value)``, lists element by element.

    Args:
        values: the decoded message (its ``timestamp`` is left out).
        prefix: put before each name (with a ``/``).

    Yields:
        ``(name, value)`` for each finite number (booleans as 0/1); null, text and nested objects are left out.
    """
    for key, value in values.items():
        if key == "timestamp" and not prefix:
            continue
        name = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, list):
            yield from scalar_items({str(i): v for i, v in enumerate(value)}, name)
        elif isinstance(value, (int, float)) and math.isfinite(float(value)):
            yield name, float(value)


def _xyz(p: Dict[str, float]) -> List[float]:
    return [float(p["x"]), float(p["y"]), float(p["z"])]


def _rgba(c: Dict[str, float]) -> List[int]:
    return [int(round(255 * float(c[k]))) for k in ("r", "g", "b", "a")]


def _rotate_x(q: Dict[str, float], length: float) -> List[float]:
    """The x axis turned by the unit quaternion ``q`` (x, y, z, w), times ``length``."""
    x, y, z, w = (float(q[k]) for k in ("x", "y", "z", "w"))
    return [length * (1 - 2 * (y * y + z * z)), length * 2 * (x * y + w * z), length * 2 * (x * z - w * y)]


def _log_scene(stream: Any, rr: Any, topic: str, msg: Dict[str, Any]) -> int:
    """Log the entities of a ``foxglove.SceneUpdate``; returns how many."""
    for ent in msg.get("entities", []):
        path = f"{topic}/{ent.get('id', 'entity')}"
        strips = [[_xyz(p) for p in line["points"]] for line in ent.get("lines", [])]
        colours = [_rgba(line["color"]) for line in ent.get("lines", []) if "color" in line]
        if strips:
            stream.log(path, rr.LineStrips3D(strips, colors=colours or None))
        arrows = ent.get("arrows", [])
        if arrows:
            origins = [_xyz(a["pose"]["position"]) for a in arrows]
            vectors = [_rotate_x(a["pose"]["orientation"], a["shaft_length"] + a["head_length"]) for a in arrows]
            stream.log(f"{path}/arrows", rr.Arrows3D(vectors=vectors, origins=origins))
    return len(msg.get("entities", []))


def _log_transforms(stream: Any, rr: Any, msg: Dict[str, Any]) -> int:
    """Log the frames of a ``foxglove.FrameTransforms``; returns how many."""
    for tf in msg.get("transforms", []):
        q = tf["rotation"]
        stream.log(
            f"/tf/{tf['child_frame_id']}",
            rr.Transform3D(translation=_xyz(tf["translation"]), quaternion=[q["x"], q["y"], q["z"], q["w"]]),
        )
    return len(msg.get("transforms", []))


def mcap_to_rrd(mcap_path: str | os.PathLike, rrd_path: str | os.PathLike, application_id: str = "flexlearn") -> dict:
    """Convert a flexlearn MCAP file into a rerun recording (module docstring).

    Args:
        mcap_path: the ``.mcap`` file (written by flexlearn).
        rrd_path: the ``.rrd`` file to write (replaced; written as ``<rrd>.partial`` and renamed when complete).
        application_id: the recording's application id in rerun.

    Returns:
        ``{"rrd", "messages", "entities", "transforms", "scalars", "skipped"}``: counts of what was logged;
        ``skipped`` counts messages of other schemas or encodings.

    Raises:
        ConfigError: rerun-sdk or mcap is not installed.
        DataError: the MCAP file cannot be read.
    """
    rr, make_reader = _rerun()
    target = Path(rrd_path)
    partial = target.with_name(target.name + ".partial")
    counts = {"messages": 0, "entities": 0, "transforms": 0, "scalars": 0, "skipped": 0}
    stream = rr.RecordingStream(application_id, recording_id=Path(mcap_path).stem)
    stream.set_log_time_enabled(False)  # only the file's own times: the same file converts to the same data
    stream.set_log_tick_enabled(False)
    stream.save(str(partial))
    try:
        with open(mcap_path, "rb") as f:
            for schema, channel, message in make_reader(f).iter_messages(log_time_order=True):
                counts["messages"] += 1
                if schema is None or channel.message_encoding != "json":
                    counts["skipped"] += 1
                    continue
                msg = json.loads(message.data)
                stream.set_time(TIMELINE, duration=message.log_time * 1e-9)
                if schema.name == "foxglove.SceneUpdate":
                    counts["entities"] += _log_scene(stream, rr, channel.topic, msg)
                elif schema.name == "foxglove.FrameTransforms":
                    counts["transforms"] += _log_transforms(stream, rr, msg)
                elif schema.name == "flexlearn.Values":
                    for name, value in scalar_items(msg):
                        stream.log(f"{channel.topic}/{name}", rr.Scalars(value))
                        counts["scalars"] += 1
                else:
                    counts["skipped"] += 1
    except (OSError, ValueError, KeyError) as exc:
        stream.disconnect()
        partial.unlink(missing_ok=True)
        raise DataError(f"'{mcap_path}': cannot be converted ({type(exc).__name__}: {exc})") from None
    stream.flush()
    stream.disconnect()
    os.replace(partial, target)
    return {"rrd": str(target), **counts}
