"""What the Pi runner writes and measures: JSON-lines or CSV records (optionally an MCAP file for Foxglove and ROS 2
topics), bounded latency statistics, and real-time pacing of a replayed log. Standard library + torch; part of the
kit (``pikit``).
"""

from __future__ import annotations

import functools
import json
import math
import sys
import time
from typing import Callable, Iterator, Optional

import torch

from .foxglove import ShapeRecording, write_runner_record

NAN = float("nan")
MAX_WAIT = 1.0  # --realtime: longest sleep for one frame [s]; a larger jump re-anchors pacing


def paced(
    frames: Iterator[dict],
    realtime: bool,
    max_wait: float = MAX_WAIT,
    clock: Optional[Callable[[], float]] = None,
    sleep: Optional[Callable[[float], None]] = None,
) -> Iterator[dict]:
    """With ``realtime``, sleep so that frame times map onto wall-clock time (replaying a log).

    A frame more than ``max_wait`` [s] ahead of (or behind) the pacing clock is a jump of the master's clock (or a
    stall): wait at most ``max_wait`` and re-anchor the pacing on that frame. ``clock`` / ``sleep`` default to
    `time.monotonic` / `time.sleep`.

    Args:
        frames: the frames, each with its time ``t`` [s] (a missing or non-finite one is not paced).
        realtime: pace the frames (False: pass them through at once).
        max_wait: the longest sleep for one frame [s]; a larger gap re-anchors the pacing.
        clock: a monotonic clock [s] (None: `time.monotonic`).
        sleep: a sleep function taking seconds (None: `time.sleep`).

    Yields:
        The frames, unchanged, each when it is due.
    """
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    t_wall0: Optional[float] = None
    t_log0 = 0.0
    for fr in frames:
        t = fr.get("t", NAN)
        if realtime and isinstance(t, float) and math.isfinite(t):
            now = clock()
            if t_wall0 is None:
                t_wall0, t_log0 = now, t
            delay = (t - t_log0) - (now - t_wall0)
            if abs(delay) > max_wait:
                if delay > 0:
                    sleep(max_wait)
                t_wall0, t_log0 = clock(), t
            elif delay > 0:
                sleep(delay)
        yield fr


class LatencyStats:
    """Bounded latency statistics [s]: count, mean, max and a histogram with log-spaced bins (ratio 1.02, from 0.1 µs
    to ~100 s) for quantiles (within 1 %); constant memory however many samples are added."""

    LO = 1e-7
    LOG_RATIO = math.log(1.02)
    BINS = 1050

    def __init__(self) -> None:
        self.hist = [0] * self.BINS
        self.n, self.total, self.max = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        """Count one sample.

        Args:
            x: the latency [s].
        """
        i = int(math.log(x / self.LO) / self.LOG_RATIO) if x > self.LO else 0
        self.hist[min(i, self.BINS - 1)] += 1
        self.n += 1
        self.total += x
        self.max = max(self.max, x)

    def quantile(self, q: float) -> float:
        """The sample of rank ⌊q n⌋ (q = 0.5: the upper median), as its bin's geometric centre [s].

        Args:
            q: the quantile, in [0, 1].

        Returns:
            The quantile [s], NaN without samples.
        """
        if self.n == 0:
            return NAN
        rank = min(int(q * self.n), self.n - 1)
        cum = 0
        for i, c in enumerate(self.hist):
            cum += c
            if cum > rank:
                return self.LO * math.exp((i + 0.5) * self.LOG_RATIO)
        return self.max

    def summary(self, prefix: str) -> dict:
        """Median, 99th percentile, mean and max in microseconds.

        Args:
            prefix: the start of the keys (``<prefix>_us_median``, ``_us_p99``, ``_us_mean``, ``_us_max``).

        Returns:
            The four values [µs], ``{}`` without samples.
        """
        if self.n == 0:
            return {}
        return {
            f"{prefix}_us_median": 1e6 * self.quantile(0.5),
            f"{prefix}_us_p99": 1e6 * self.quantile(0.99),
            f"{prefix}_us_mean": 1e6 * self.total / self.n,
            f"{prefix}_us_max": 1e6 * self.max,
        }


def json_num(x: Optional[float]) -> Optional[float]:
    """``x``, or None where JSON cannot hold it (NaN, ±inf: written as null).

    Args:
        x: a number or None.

    Returns:
        ``x``, or None where it is not finite.
    """
    return x if x is None or math.isfinite(x) else None


def json_safe(x):
    """``x`` with every non-finite float in nested lists and dicts replaced by None.

    Args:
        x: a JSON-like value (numbers, strings, lists, dicts).

    Returns:
        A copy of its lists and dicts with non-finite floats as None; other values as they are.
    """
    if isinstance(x, float):
        return json_num(x)
    if isinstance(x, (list, dict)):
        return [json_safe(c) for c in x] if isinstance(x, list) else {k: json_safe(v) for k, v in x.items()}
    return x


class Outputs:
    """JSON-lines or CSV writer, plus optional ROS 2 publishers (height, backbone as PoseArray, spool command) and an
    MCAP file of the run (`foxglove.write_runner_record`: the backbone as a ``foxglove.SceneUpdate`` on
    ``/robot/backbone``, the rest of each record on ``/robot/status``; the file is ``<mcap>.partial`` until
    `close` finishes it).

    Args:
        path: the output file (None: stdout).
        csv: CSV rows instead of JSON lines.
        ros: also publish on ROS 2 (when rclpy is installed).
        mcap: also write this MCAP file (None: none).
    """

    def __init__(self, path: Optional[str], csv: bool, ros: bool, mcap: Optional[str] = None) -> None:
        self.f = open(path, "w") if path else sys.stdout
        self.csv = csv
        self.mcap = ShapeRecording(mcap) if mcap else None
        self.header = False
        self.ros: Optional[tuple] = None
        if ros:
            try:
                import rclpy  # optional: ROS 2 only with --ros
                from geometry_msgs.msg import Pose, PoseArray  # optional: ROS 2
                from std_msgs.msg import Float64  # optional: ROS 2

                rclpy.init()
                node = rclpy.create_node("flexlearn_shape")
                self.ros = (
                    node,
                    node.create_publisher(Float64, "tip_height", 10),
                    node.create_publisher(PoseArray, "backbone", 10),
                    node.create_publisher(Float64, "spool_velocity", 10),
                    Float64,
                    Pose,
                    PoseArray,
                )
            except ImportError:
                print("rclpy not available: ROS 2 publishing disabled", file=sys.stderr)

    def write(
        self, t: float, pts: torch.Tensor, h: float, flags: torch.Tensor, v: Optional[float], status: Optional[int]
    ) -> None:
        """Write one record (a CSV row, or a JSON line), publish it on ROS 2 and add it to the MCAP file when enabled.

        Args:
            t: time of the frame [s].
            pts: backbone points (N + 1, 3) [m].
            h: tip height [m].
            flags: per-segment flag words (N,).
            v: the controller's tendon velocity command [m/s] (None: no controller).
            status: the controller status (None: no controller).
        """
        points, flag_words = pts.tolist(), flags.tolist()  # once per record, for every output
        if self.csv:
            if not self.header:
                cols = ["t", "h", "v", "status", "flags_or"] + [f"p{i}{c}" for i in range(pts.shape[0]) for c in "xyz"]
                self.f.write(",".join(cols) + "\n")
                self.header = True
            f_or = functools.reduce(lambda acc, x: acc | int(x), flag_words, 0)
            vals = [t, h, NAN if v is None else v, -1 if status is None else status, f_or] + [
                c for p in points for c in p
            ]
            self.f.write(",".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in vals) + "\n")
        else:
            rec = {
                "t": json_num(t),
                "h": json_num(h),
                "points": [[round(c, 6) for c in p] for p in points],
                "flags": flag_words,
            }
            if v is not None:
                rec["v"], rec["status"] = json_num(v), status
            try:
                text = json.dumps(rec, allow_nan=False)
            except ValueError:  # a non-finite number somewhere: null, never NaN
                text = json.dumps(json_safe(rec), allow_nan=False)
            self.f.write(text + "\n")
        if self.ros is not None:
            self._publish(points, h, v)
        if self.mcap is not None:
            rec = {"t": t, "points": points, "h": h, "flags": flag_words}
            if v is not None:
                rec["v"], rec["status"] = v, status
            write_runner_record(self.mcap, rec)

    def _publish(self, points: list, h: float, v: Optional[float]) -> None:
        if self.ros is None:
            return
        node, pub_h, pub_b, pub_v, f64, pose_t, arr_t = self.ros
        m = f64()
        m.data = h
        pub_h.publish(m)
        arr = arr_t()
        arr.header.frame_id = "robot_base"
        for p in points:
            ps = pose_t()
            ps.position.x, ps.position.y, ps.position.z = p
            arr.poses.append(ps)
        pub_b.publish(arr)
        if v is not None:
            m2 = f64()
            m2.data = v
            pub_v.publish(m2)

    def close(self) -> None:
        """Close the output file and finish the MCAP file (a kill before leaves ``<mcap>.partial``)."""
        try:
            if self.f is not sys.stdout:
                self.f.close()
        finally:
            if self.mcap is not None:
                self.mcap.close()
