"""Robot shapes as Foxglove messages in an MCAP file: backbones, frames, field vectors and per-frame values.

:class:`ShapeRecording` writes the message types a robotics viewer (Foxglove, or any MCAP reader) plays, JSON
encoded with the published Foxglove JSON schemas (``foxglove_schemas/``, stored in the file):

* ``foxglove.SceneUpdate`` on ``/<name>/backbone``: one scene entity per robot (or module) whose line strip runs
  through the backbone points [m] in ``frame_id`` (spheres mark the points), arrows for vectors such as a
  measured field;
* ``foxglove.FrameTransforms`` on ``/tf``: named frames (base, tip, boards) as parent → child transforms
  (translation [m], rotation as a unit quaternion x, y, z, w);
* ``flexlearn.Values`` on any other topic: flat JSON objects of numbers, lists and flags (fault flags, fix
  confidences, the timing of a step), which Foxglove's plot and raw-message panels show.

Times are nanoseconds on the recording's clock (``log_time``) and, inside each message, ``{sec, nsec}``. Only
the standard library is used, so the same code can run on a Raspberry Pi next to the runtime.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

from .mcap_file import McapWriter

__all__ = [
    "ShapeRecording",
    "stamp",
    "quaternion_x_to",
    "matrix_to_quaternion",
    "VALUES_SCHEMA",
    "time_ns",
    "finite_points",
    "write_runner_record",
]

SCHEMA_DIR = Path(__file__).resolve().parent / "foxglove_schemas"
VALUES_SCHEMA = {
    "title": "flexlearn.Values",
    "description": "Numbers, lists of numbers and flags of one step of a flexlearn runtime or simulator",
    "type": "object",
    "properties": {"timestamp": {"type": "object", "properties": {"sec": {}, "nsec": {}}}},
    "additionalProperties": True,
}
Vec = Sequence[float]


def stamp(t_ns: int) -> Dict[str, int]:
    """Foxglove time ``{sec, nsec}`` of ``t_ns`` [ns].

    Args:
        t_ns: the time [ns].

    Returns:
        ``{"sec": ..., "nsec": ...}``: whole seconds and the remaining nanoseconds.
    """
    return {"sec": int(t_ns // 1_000_000_000), "nsec": int(t_ns % 1_000_000_000)}


def _xyz(v: Vec) -> Dict[str, float]:
    return {"x": float(v[0]), "y": float(v[1]), "z": float(v[2])}


def _color(rgba: Vec) -> Dict[str, float]:
    return {"r": float(rgba[0]), "g": float(rgba[1]), "b": float(rgba[2]), "a": float(rgba[3])}


def quaternion_x_to(v: Vec) -> Tuple[float, float, float, float]:
    """Unit quaternion (x, y, z, w) that turns the +x axis onto the direction of ``v`` (3,) (Foxglove arrows
    point along +x); the identity for a zero vector. q = (x̂ × v̂, 1 + x̂·v̂) normalised; −x → 180° about z.

    Args:
        v: the direction (3,); its length does not matter.

    Returns:
        The unit quaternion (x, y, z, w).
    """
    n = math.sqrt(sum(float(c) * float(c) for c in v))
    if n == 0.0:
        return (0.0, 0.0, 0.0, 1.0)
    x, y, z = (float(c) / n for c in v)
    if x < -1.0 + 1e-12:
        return (0.0, 0.0, 1.0, 0.0)
    q = (0.0, -z, y, 1.0 + x)
    m = math.sqrt(sum(c * c for c in q))
    return (q[0] / m, q[1] / m, q[2] / m, q[3] / m)


def matrix_to_quaternion(r: Sequence[Vec]) -> Tuple[float, float, float, float]:
    """Unit quaternion (x, y, z, w) of a rotation matrix ``r`` (3, 3) (Shepperd's method, w ≥ 0).

    Args:
        r: the rotation matrix (3, 3), as nested rows.

    Returns:
        The unit quaternion (x, y, z, w) with w ≥ 0.
    """
    m = [[float(r[i][j]) for j in range(3)] for i in range(3)]
    tr = m[0][0] + m[1][1] + m[2][2]
    if tr > 0.0:
        s = 2.0 * math.sqrt(tr + 1.0)
        q = ((m[2][1] - m[1][2]) / s, (m[0][2] - m[2][0]) / s, (m[1][0] - m[0][1]) / s, 0.25 * s)
    else:
        i = max(range(3), key=lambda k: m[k][k])
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + m[i][i] - m[j][j] - m[k][k], 1e-300))
        v = [0.0, 0.0, 0.0]
        v[i] = 0.25 * s
        v[j] = (m[j][i] + m[i][j]) / s
        v[k] = (m[k][i] + m[i][k]) / s
        q = (v[0], v[1], v[2], (m[k][j] - m[j][k]) / s)
    sign = -1.0 if q[3] < 0 else 1.0
    n = math.sqrt(sum(c * c for c in q))
    return (sign * q[0] / n, sign * q[1] / n, sign * q[2] / n, sign * q[3] / n)


class ShapeRecording:
    """An MCAP file of robot shapes for Foxglove (module docstring); use as a context manager.

    Args:
        path: the ``.mcap`` file to write.
        name: the robot's name, the first part of its topics (``/<name>/backbone``).
        frame_id: the frame the backbone points are given in (the world or the robot's base).
    """

    def __init__(self, path: os.PathLike | str, name: str = "robot", frame_id: str = "world") -> None:
        self.name, self.frame_id = name.strip("/") or "robot", frame_id
        self.writer = McapWriter(path)
        self._schemas: Dict[str, int] = {}
        self._channels: Dict[str, int] = {}

    def _channel(self, topic: str, schema: str) -> int:
        if topic not in self._channels:
            if schema not in self._schemas:
                if schema == "flexlearn.Values":
                    text = json.dumps(VALUES_SCHEMA).encode()
                else:
                    text = (SCHEMA_DIR / f"{schema.split('.', 1)[1]}.json").read_bytes()
                self._schemas[schema] = self.writer.add_schema(schema, "jsonschema", text)
            self._channels[topic] = self.writer.add_channel(topic, self._schemas[schema], "json")
        return self._channels[topic]

    def _write(self, topic: str, schema: str, t_ns: int, message: dict) -> None:
        data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode()
        self.writer.write_message(self._channel(topic, schema), int(t_ns), data)

    def backbone(self, t_ns: int, points: Iterable[Vec], entity: Optional[str] = None, arrows=(), color=None):
        """One backbone at ``t_ns`` [ns]: points (N+1, 3) [m] joined by a line strip, spheres at the points.

        Args:
            t_ns: time [ns].
            points: backbone points (N+1, 3) [m] in the recording's ``frame_id``.
            entity: the scene entity's id (one per robot or module; the robot's name by default).
            arrows: (origin (3,) [m], vector (3,) [m of arrow length]) pairs drawn as arrows (e.g. a field).
            color: RGBA of the line in 0..1 (a blue by default).
        """
        pts = [_xyz(p) for p in points]
        rgba = _color(color or (0.1, 0.45, 0.9, 1.0))
        pose = {"position": _xyz((0, 0, 0)), "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}
        entity_msg: dict[str, Any] = {
            "timestamp": stamp(t_ns),
            "frame_id": self.frame_id,
            "id": entity or self.name,
            "lifetime": {"sec": 0, "nsec": 0},
            "frame_locked": False,
            "metadata": [],
            "lines": [{"type": 0, "pose": pose, "thickness": 4.0, "scale_invariant": True, "points": pts}],
            "spheres": [{"pose": dict(pose, position=p), "size": _xyz((0.004,) * 3), "color": rgba} for p in pts],
            "arrows": [self._arrow(o, v) for o, v in arrows],
            **{kind: [] for kind in ("cubes", "cylinders", "triangles", "texts", "models")},
        }
        entity_msg["lines"][0].update(color=rgba, colors=[], indices=[])
        self._write(f"/{self.name}/backbone", "foxglove.SceneUpdate", t_ns, {"deletions": [], "entities": [entity_msg]})

    @staticmethod
    def _arrow(origin: Vec, vector: Vec) -> dict:
        length = math.sqrt(sum(float(c) * float(c) for c in vector))
        qx, qy, qz, qw = quaternion_x_to(vector)
        return {
            "pose": {"position": _xyz(origin), "orientation": {"x": qx, "y": qy, "z": qz, "w": qw}},
            "shaft_length": 0.8 * length,
            "shaft_diameter": 0.05 * length + 1e-4,
            "head_length": 0.2 * length,
            "head_diameter": 0.12 * length + 2e-4,
            "color": _color((0.95, 0.35, 0.1, 1.0)),
        }

    def transforms(self, t_ns: int, frames: Iterable[Tuple[str, str, Vec, Vec]]) -> None:
        """Named frames at one time (``foxglove.FrameTransforms`` on ``/tf``).

        Args:
            t_ns: time [ns].
            frames: (parent, child, translation (3,) [m], unit quaternion (x, y, z, w)) of each frame.
        """
        items = [
            {
                "timestamp": stamp(t_ns),
                "parent_frame_id": parent,
                "child_frame_id": child,
                "translation": _xyz(p),
                "rotation": {"x": float(q[0]), "y": float(q[1]), "z": float(q[2]), "w": float(q[3])},
            }
            for parent, child, p, q in frames
        ]
        self._write("/tf", "foxglove.FrameTransforms", t_ns, {"transforms": items})

    def values(self, topic: str, t_ns: int, values: Dict[str, object]) -> None:
        """Numbers, lists and flags at one time (``flexlearn.Values``); NaN and ∞ are written as null.

        Args:
            topic: the topic (``/robot/status``).
            t_ns: time [ns].
            values: name → number, list of numbers or flag.
        """
        clean = {k: _finite(v) for k, v in values.items()}
        self._write(topic, "flexlearn.Values", t_ns, dict(clean, timestamp=stamp(t_ns)))

    def close(self) -> Path:
        """Finish the file (summary, footer) and give it its final name; returns the path."""
        return self.writer.close()

    def __enter__(self) -> "ShapeRecording":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.writer.__exit__(exc_type, exc, tb)


def time_ns(t: object) -> Optional[int]:
    """A record's time [s] as MCAP nanoseconds, or None where it has none (not a finite number ≥ 0).

    Args:
        t: the time [s].

    Returns:
        ``round(t · 1e9)``, or None.
    """
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        return None
    return int(round(float(t) * 1e9))


def finite_points(pts: object) -> Optional[list]:
    """``pts`` when it is a non-empty list of finite 3-vectors (backbone points [m]), else None.

    Args:
        pts: the points.

    Returns:
        The points, or None.
    """
    if not isinstance(pts, list) or not pts:
        return None
    ok = all(isinstance(p, list) and len(p) == 3 and all(isinstance(c, (int, float)) for c in p) for p in pts)
    return pts if ok and all(math.isfinite(float(c)) for p in pts for c in p) else None


def write_runner_record(rec: "ShapeRecording", record: Dict[str, Any]) -> Optional[int]:
    """One record of the Pi runner (``t``, ``points``, ``h``, ``flags`` and, with the controller, ``v`` and
    ``status``): its backbone on ``/<name>/backbone`` and everything else on ``/<name>/status``. The runner's
    ``--mcap`` writes each record so as it runs; `flexlearn.replay.to_mcap.runner_output_to_mcap` writes the
    records of a finished run's output the same way.

    Args:
        rec: the recording.
        record: the record.

    Returns:
        The record's time [ns], or None (nothing written) for a record without a time ≥ 0 or without finite points.
    """
    t_ns, pts = time_ns(record.get("t")), finite_points(record.get("points"))
    if t_ns is None or pts is None:
        return None
    rec.backbone(t_ns, pts)
    rec.values(f"/{rec.name}/status", t_ns, {k: v for k, v in record.items() if k not in ("t", "points")})
    return t_ns


def _finite(v: object) -> object:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v
