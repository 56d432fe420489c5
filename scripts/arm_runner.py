"""Runner mode of the two-link flexible-arm controller (seed 000, eq. (45); docs/arm_controller.md): IMU frames
in, joint torques out. Used by ``pi_runner.py --arm`` (copy this file next to it); torch and the standard library
only.

    python pi_runner.py arm_controller.pt --arm --log imu.jsonl --out torques.jsonl
    python pi_runner.py arm_controller.pt --arm --serial /dev/ttyACM0

Input, protocol ``flexlearn-armframes/1`` (UTF-8 JSON lines, SI units, ``null`` for a missing sample)::

  {"type": "imu", "t": 1.234, "frame": [[ax, ay, az, gx, gy, gz], ...]}   one row per IMU [m/s², rad/s]

with the IMUs in the controller's order (link by link, reference IMU first; ``imu_positions`` in the metadata).
Output, one JSON line per ``imu`` frame: ``t``, ``tau`` (2,) [N m], ``theta`` (2,) [rad] (the estimated joint
angles), ``fault`` (bit mask, names in the metadata's ``faults``). A frame the controller cannot use (wrong shape,
NaN, saturated, bad time) still gets a line: the last valid torques with its fault bits; a line that is not JSON
or not an ``imu`` frame is counted in ``bad`` and skipped. The run never stops on one frame.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import IO, Any, Iterator, Optional

import torch

KIND = "flexible_arm_controller"
REPORT_BAD = 10


def check_metadata(meta: dict, path: str) -> None:
    """Raise ValueError unless ``meta`` is an arm controller's metadata."""
    if meta.get("kind") != KIND:
        raise ValueError(
            f"model file '{path}': metadata kind {meta.get('kind')!r}, expected '{KIND}' "
            "(export it with: flexlearn-export target=arm_controller)"
        )


def _frame_tensor(rows: Any) -> torch.Tensor:
    """(S, 6) float64 from the JSON rows (null → NaN); anything not a list of 6-number rows → an empty
    tensor, which the controller flags as a lost frame."""
    try:
        data = [[math.nan if v is None else float(v) for v in row] for row in rows]
        out = torch.tensor(data, dtype=torch.float64)
        return out if out.dim() == 2 else torch.zeros(0, 6, dtype=torch.float64)
    except (TypeError, ValueError):
        return torch.zeros(0, 6, dtype=torch.float64)


def _frames(source: IO, counts: dict) -> Iterator[tuple[float, torch.Tensor]]:
    for k, raw in enumerate(source, start=1):
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not line.strip():
            continue
        try:
            fr = json.loads(line)
            if not isinstance(fr, dict) or fr.get("type") != "imu":
                raise ValueError(f"not an imu frame (type {fr.get('type') if isinstance(fr, dict) else None!r})")
            t = fr.get("t")
            t = math.nan if t is None or isinstance(t, bool) else float(t)
        except (ValueError, TypeError) as exc:
            counts["bad"] += 1
            if counts["bad"] <= REPORT_BAD:
                print(f"arm_runner: line {k} skipped: {str(exc).splitlines()[0][:120]}", file=sys.stderr)
            continue
        yield t, _frame_tensor(fr.get("frame"))


def run_arm(controller: Any, meta: dict, source: IO, out: Optional[IO] = None) -> dict:
    """Step ``controller`` (a loaded arm controller) on every ``imu`` frame of ``source``; JSON lines to ``out``
    (default stdout). Returns counters: frames, bad lines, frames per fault bit, step latency quantiles [µs]."""
    out = out or sys.stdout
    names = {int(v): k for k, v in (meta.get("faults") or {}).items()}
    counts: dict = {"frames": 0, "bad": 0, "faults": {name: 0 for name in names.values()}}
    lat = []
    theta = (meta.get("state_layout") or {}).get("theta", [0, 2])
    torch.set_num_threads(1)
    with torch.inference_mode():
        for t, frame in _frames(source, counts):
            t0 = time.perf_counter()
            tau, state, fault = controller(frame, t)
            lat.append(time.perf_counter() - t0)
            code = int(fault)
            for bit, name in names.items():
                if code & bit:
                    counts["faults"][name] += 1
            rec = {
                "t": t if math.isfinite(t) else None,
                "tau": [float(x) for x in tau],
                "theta": [float(x) for x in state[theta[0] : theta[1]]],
                "fault": code,
            }
            out.write(json.dumps(rec) + "\n")
            counts["frames"] += 1
    if lat:
        lat.sort()
        counts["step_us_median"] = 1e6 * lat[len(lat) // 2]
        counts["step_us_p99"] = 1e6 * lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    return counts
