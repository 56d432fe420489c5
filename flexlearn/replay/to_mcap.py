"""Playable MCAP files of estimated and simulated robot shapes (Foxglove schemas, :mod:`.foxglove`).

* :func:`runner_output_to_mcap`: the Pi runner's output (JSON lines ``{"t", "h", "points", "flags", ...}`` or its
  CSV ``t, h, v, status, flags_or, p0x..pNz``), optionally beside the frame log it came from (the magnetometer
  rounds and attitude sweeps as values), becomes ``/<name>/backbone`` (scene entity per step), ``/<name>/status``
  (tip height, flags, control values) and ``/<name>/frames`` (the input).
* :func:`trajectory_to_mcap`: a simulated centreline (T, N+1, 3) [m] with node rotations (T, N+1, 3, 3) becomes
  the backbone and the ``base`` and ``tip`` frames on ``/tf``.

``flexlearn-mcap`` (:mod:`flexlearn.apps.mcap`) converts a runner output from the command line. Lines that
cannot be read are skipped and counted (the summary says how many and the first line number), as the runner
itself does; times must be seconds ≥ 0 on the recording's clock.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

from flexlearn.errors import ArgumentError, DataError
from flexlearn.runtime.pikit.foxglove import ShapeRecording, matrix_to_quaternion, time_ns, write_runner_record

__all__ = ["runner_output_to_mcap", "trajectory_to_mcap"]


def _runner_rows(path: Path) -> Iterator[tuple[int, Optional[dict]]]:
    """(line number, row or None when unreadable) of a runner output file, JSON lines or CSV."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        first = f.readline()
        f.seek(0)
        if first.lstrip().startswith("{") or not first.strip():
            for k, line in enumerate(f, 1):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except ValueError:
                        row = None
                    yield k, row if isinstance(row, dict) else None
            return
        for k, rec in enumerate(csv.DictReader(f), 2):
            yield k, _csv_row(rec)


def _csv_row(rec: Dict[str, str]) -> Optional[dict]:
    try:
        num = {k: float(v) if v not in ("", None) else math.nan for k, v in rec.items() if k is not None}
    except ValueError:
        return None
    n = sum(1 for k in num if k.startswith("p") and k.endswith("x"))
    points = [[num.get(f"p{i}{c}", math.nan) for c in "xyz"] for i in range(n)]
    row = {"t": num.get("t"), "h": num.get("h"), "points": points, "flags_or": num.get("flags_or")}
    row.update({k: num[k] for k in ("v", "status") if k in num})
    return row


def runner_output_to_mcap(output: Path, mcap_path: Path, name: str = "robot", frames: Optional[Path] = None) -> dict:
    """Write the runner's output (and its input frame log) as an MCAP file; returns a summary dict.

    Args:
        output: the runner's ``--out`` file (JSON lines or ``--csv``).
        mcap_path: the ``.mcap`` file to write.
        name: the robot's name (topic prefix).
        frames: the frame log the runner read (``--log``), written beside the shapes; None to leave it out.

    Returns:
        ``{"mcap", "steps", "skipped", "first_skipped_line", "frames", "t_start_s", "t_end_s"}``.

    Raises:
        DataError: a file that cannot be read, or one without any step that has a time and a backbone.
    """
    summary: dict = {"mcap": str(mcap_path), "steps": 0, "skipped": 0, "first_skipped_line": None, "frames": 0}
    times: List[int] = []
    try:
        with ShapeRecording(mcap_path, name) as rec:
            for line, row in _runner_rows(Path(output)):
                t_ns = write_runner_record(rec, row) if row is not None else None
                if t_ns is None:
                    summary["skipped"] += 1
                    summary["first_skipped_line"] = summary["first_skipped_line"] or line
                    continue
                summary["steps"] += 1
                times.append(t_ns)
            if frames is not None:
                summary["frames"] = _write_frames(rec, Path(frames), name)
            if not summary["steps"]:
                raise DataError(f"{output}: no line with a time 't' >= 0 [s] and 'points' (N+1)x3; nothing to play")
    except OSError as e:
        raise DataError(f"{e.filename or output}: cannot be read or written ({e.strerror})") from None
    summary.update(t_start_s=min(times) * 1e-9, t_end_s=max(times) * 1e-9)
    return summary


def _write_frames(rec: ShapeRecording, path: Path, name: str) -> int:
    """The frame log's attitude sweeps and magnetometer rounds on ``/<name>/frames``; returns how many."""
    n = 0
    for _, row in _runner_rows(path):
        t_ns = time_ns(row.get("t")) if row else None
        if t_ns is None or row is None or row.get("type") not in ("att", "mag", "ref", "spool", "target"):
            continue
        rec.values(f"/{name}/frames", t_ns, {k: v for k, v in row.items() if k != "t"})
        n += 1
    return n


def shapes_to_mcap(
    mcap_path: Path,
    shapes: Sequence[np.ndarray],
    name: str,
    period_s: float = 1.0,
    values: Optional[Sequence[dict]] = None,
) -> Path:
    """Several rods per frame (a continuum parallel robot's rods at the samples of a path) as an MCAP file: frame
    k at ``t = k · period_s``, on ``/<name>/backbone`` one scene entity per rod (``<name>/rod<r>``) and the closed
    polygon through the rod tips (``<name>/platform``); ``values[k]`` on ``/<name>/sample``.

    Args:
        mcap_path: the ``.mcap`` file to write.
        shapes: per frame, the rods' centrelines (R, P, 3) [m] in the world frame.
        name: the robot's name (topic prefix).
        period_s: time between frames [s] (> 0).
        values: per frame, numbers or lists to record beside the shapes (e.g. the sample's end-effector position).

    Returns:
        the written path.

    Raises:
        ArgumentError: a frame that is not (R, P, 3), a period that is not > 0, or values of another length.
    """
    if not (isinstance(period_s, (int, float)) and math.isfinite(period_s) and period_s > 0):
        raise ArgumentError(f"period_s: {period_s!r} is not a time > 0 [s]")
    if values is not None and len(values) != len(shapes):
        raise ArgumentError(f"values: {len(values)} entries for {len(shapes)} frames")
    with ShapeRecording(mcap_path, name) as rec:
        for k, frame in enumerate(shapes):
            rods = np.asarray(frame, dtype=float)
            if rods.ndim != 3 or rods.shape[-1] != 3:
                raise ArgumentError(f"shapes[{k}]: shape {rods.shape} is not (rods, points, 3)")
            t_ns = int(round(k * period_s * 1e9))
            for r, rod in enumerate(rods):
                rec.backbone(t_ns, rod.tolist(), entity=f"{rec.name}/rod{r}")
            tips = rods[:, -1].tolist()
            rec.backbone(t_ns, tips + tips[:1], entity=f"{rec.name}/platform", color=(0.2, 0.2, 0.2, 1.0))
            if values is not None:
                rec.values(f"/{rec.name}/sample", t_ns, values[k])
    return Path(mcap_path)


def trajectory_to_mcap(
    mcap_path: Path, times: Sequence[float], positions: np.ndarray, rotations: Optional[np.ndarray], name: str
) -> Path:
    """A simulated centreline as an MCAP file: backbone per recorded time, base and tip frames on ``/tf``.

    Args:
        mcap_path: the ``.mcap`` file to write.
        times: recorded times (T,) [s], ≥ 0.
        positions: node positions (T, N+1, 3) [m] in the world frame.
        rotations: node rotations (T, N+1, 3, 3) (columns: the section's axes in the world), or None.
        name: the rod's name (topic prefix).

    Returns:
        the written path.
    """
    pos = np.asarray(positions, dtype=float)
    if pos.ndim != 3 or pos.shape[-1] != 3 or pos.shape[0] != len(times):
        raise ArgumentError(f"positions: shape {pos.shape} is not (T = {len(times)}, N+1, 3)")
    with ShapeRecording(mcap_path, name) as rec:
        for k, t in enumerate(times):
            t_ns = time_ns(float(t))
            if t_ns is None:
                raise ArgumentError(f"times[{k}]: {t} is not a time >= 0 [s]")
            rec.backbone(t_ns, pos[k].tolist())
            if rotations is not None:
                frames = [
                    ("world", f"{name}/{label}", pos[k, i].tolist(), matrix_to_quaternion(rotations[k, i].tolist()))
                    for label, i in (("base", 0), ("tip", -1))
                ]
                rec.transforms(t_ns, frames)
    return Path(mcap_path)


def arm_to_mcap(mcap_path: Path, sim: dict, name: str = "arm", period_s: float = 0.02) -> Path:
    """A simulated flexible arm (`flexlearn.sim.flexible_arm.simulate_flexible_arm`) as an MCAP file: every
    ``period_s``, one scene entity per deformed link (``<name>/link<i>``: its centreline through the world x–y plane,
    y up, z = 0) on ``/<name>/backbone``; the joint angles, tip deflections and IMU inclinations on
    ``/<name>/state``; the end effector as frame ``<name>/ee`` on ``/tf``.

    Args:
        mcap_path: the ``.mcap`` file to write.
        sim: the simulator's result (``t``, ``theta``, ``link_shapes``, ``tip_deflection``, ``imu_angle``,
            ``ee_pose``).
        name: the arm's name (topic prefix).
        period_s: time between written samples [s] (> 0; the simulator's own step when smaller).

    Returns:
        the written path.

    Raises:
        ArgumentError: a period that is not > 0, or a result without link shapes.
    """
    if not (isinstance(period_s, (int, float)) and math.isfinite(period_s) and period_s > 0):
        raise ArgumentError(f"period_s: {period_s!r} is not a time > 0 [s]")
    if "link_shapes" not in sim:
        raise ArgumentError("sim: no 'link_shapes' (the result of simulate_flexible_arm)")
    t = np.asarray(sim["t"], dtype=float)
    every = max(1, int(round(period_s / (t[1] - t[0])))) if len(t) > 1 else 1
    shapes = np.asarray(sim["link_shapes"], dtype=float)
    with ShapeRecording(mcap_path, name) as rec:
        for k in range(0, len(t), every):
            t_ns = time_ns(float(t[k]))
            if t_ns is None:
                raise ArgumentError(f"sim['t'][{k}]: {t[k]} is not a time >= 0 [s]")
            for i, link in enumerate(shapes[k]):
                rec.backbone(t_ns, np.pad(link, ((0, 0), (0, 1))).tolist(), entity=f"{rec.name}/link{i}")
            x, y, angle = (float(v) for v in sim["ee_pose"][k])
            rec.transforms(
                t_ns, [("world", f"{rec.name}/ee", (x, y, 0.0), (0.0, 0.0, math.sin(angle / 2), math.cos(angle / 2)))]
            )
            state = {key: np.asarray(sim[key][k]).tolist() for key in ("theta", "tip_deflection", "imu_angle")}
            rec.values(f"/{rec.name}/state", t_ns, state)
    return Path(mcap_path)


ESTIMATE_COLORS = ((0.1, 0.45, 0.9, 1.0), (0.9, 0.35, 0.1, 1.0), (0.2, 0.65, 0.3, 1.0), (0.6, 0.3, 0.75, 1.0))
"""Line colours of the estimates, in turn (the truth is grey)."""


def estimates_to_mcap(
    mcap_path: Path,
    times: Sequence[float],
    truth: np.ndarray,
    estimates: Dict[str, np.ndarray],
    name: str = "robot",
    period_s: float = 0.1,
) -> Path:
    """A shape estimation against its truth over time as an MCAP file: every ``period_s``, the true backbone
    (``<name>/truth``, grey) and each estimate (``<name>/<method>``) as scene entities on ``/<name>/backbone``, and
    each estimate's backbone RMS and tip errors [mm] on ``/<name>/errors`` (``<method>/backbone_mm``,
    ``<method>/tip_mm``; null where the estimate is not finite).

    Args:
        mcap_path: the ``.mcap`` file to write.
        times: sample times (K,) [s], ≥ 0 and increasing.
        truth: true backbone points (K, N+1, 3) [m].
        estimates: method → estimated points (K, N+1, 3) [m] (`flexlearn.replay.shapes.run_methods`).
        name: the robot's name (topic prefix).
        period_s: time between written samples [s] (> 0).

    Returns:
        the written path.

    Raises:
        ArgumentError: shapes that differ from the truth's, or a period that is not > 0.
    """
    if not (isinstance(period_s, (int, float)) and math.isfinite(period_s) and period_s > 0):
        raise ArgumentError(f"period_s: {period_s!r} is not a time > 0 [s]")
    ref = np.asarray(truth, dtype=float)
    if ref.ndim != 3 or ref.shape[-1] != 3 or ref.shape[0] != len(times):
        raise ArgumentError(f"truth: shape {ref.shape} is not (K = {len(times)}, N+1, 3)")
    est = {m: np.asarray(p, dtype=float) for m, p in estimates.items()}
    for m, p in est.items():
        if p.shape != ref.shape:
            raise ArgumentError(f"estimates['{m}']: shape {p.shape}, the truth's is {ref.shape}")
    next_t = -math.inf
    with ShapeRecording(mcap_path, name) as rec:
        for k, t in enumerate(times):
            t_ns = time_ns(float(t))
            if t_ns is None:
                raise ArgumentError(f"times[{k}]: {t} is not a time >= 0 [s]")
            if float(t) < next_t:
                continue
            next_t = float(t) + period_s
            rec.backbone(t_ns, ref[k].tolist(), entity=f"{rec.name}/truth", color=(0.55, 0.55, 0.55, 1.0))
            errs: Dict[str, object] = {}
            for i, (m, p) in enumerate(est.items()):
                if np.isfinite(p[k]).all():
                    rec.backbone(t_ns, p[k].tolist(), entity=f"{rec.name}/{m}", color=ESTIMATE_COLORS[i % 4])
                d = 1e3 * np.linalg.norm(p[k, 1:] - ref[k, 1:], axis=-1)
                errs[f"{m}/backbone_mm"], errs[f"{m}/tip_mm"] = float(np.sqrt(np.mean(d**2))), float(d[-1])
            rec.values(f"/{rec.name}/errors", t_ns, errs)
    return Path(mcap_path)
