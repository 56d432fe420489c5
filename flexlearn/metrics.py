"""Angular error between predicted and reference unit directions, and its summary statistics.

A prediction that is not a usable direction — non-finite, or shorter than `DIRECTION_FLOOR` (the zero
vector `DirectionMLP` returns when it has no direction) — scores the maximal error, 180°, and is counted
as invalid: a collapsed model that outputs (0, 0, 0) everywhere therefore scores 180°, never 0°.
"""

from __future__ import annotations

from typing import Optional

import torch

DIRECTION_FLOOR = 1e-6  # predictions shorter than this carry no direction
MAX_ERROR_DEG = 180.0


def invalid_direction(pred: torch.Tensor, floor: float = DIRECTION_FLOOR) -> torch.Tensor:
    """Mask (...) of the rows of ``pred`` (..., 3) that are not a usable direction (non-finite or ‖p‖ < floor).

    Args:
        pred: predicted directions (..., 3), any length.
        floor: the shortest norm that still counts as a direction (default `DIRECTION_FLOOR`).

    Returns:
        Boolean mask (...), True where the row is non-finite or shorter than ``floor``.
    """
    norm = torch.linalg.vector_norm(pred, dim=-1)
    return ~(torch.isfinite(pred).all(dim=-1) & (norm >= floor))


def angular_error_deg(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Angle [deg] between directions ``pred`` and ``target``, shapes (..., 3) -> (...).

    Computed as atan2(|p x t|, p . t), which stays accurate for small angles (acos of the dot product
    loses half the digits there). Inputs need not be unit length. An invalid prediction
    (`invalid_direction`) scores 180°; a non-finite ``target`` gives NaN.

    Args:
        pred: predicted directions (..., 3), any length.
        target: reference directions (..., 3), any length.

    Returns:
        The angles (...) [deg]: 180 for an invalid prediction, NaN for a non-finite target.
    """
    cross = torch.linalg.vector_norm(torch.cross(pred, target, dim=-1), dim=-1)
    dot = (pred * target).sum(dim=-1)
    err = torch.rad2deg(torch.atan2(cross, dot))
    bad_target = ~torch.isfinite(target).all(dim=-1)
    err = torch.where(invalid_direction(pred), torch.full_like(err, MAX_ERROR_DEG), err)
    return torch.where(bad_target, torch.full_like(err, float("nan")), err)


def angular_error_summary(
    err_deg: torch.Tensor, prefix: str = "", invalid: Optional[torch.Tensor] = None
) -> dict[str, float]:
    """Mean, median, RMS and 95th percentile of angular errors [deg] as ``{prefix}ang_err_<stat>_deg``.

    Non-finite errors are counted under ``{prefix}n_nonfinite`` and excluded from the statistics;
    an empty input gives NaN statistics. With ``invalid`` (a mask shaped like ``err_deg`` of the
    predictions that were not a usable direction, already scored 180°) also ``{prefix}n_invalid`` and
    ``{prefix}invalid_fraction`` (of all samples).

    Args:
        err_deg: angular errors [deg], any shape.
        prefix: prepended to every key.
        invalid: mask shaped like ``err_deg`` of the invalid predictions; None: no invalid counts.

    Returns:
        Metric name -> value: ``ang_err_{mean,median,rms,p95}_deg``, ``n_samples``, ``n_nonfinite`` (and
        ``n_invalid``, ``invalid_fraction`` with ``invalid``), each with ``prefix``.
    """
    err = err_deg.detach().double().flatten()
    finite = torch.isfinite(err)
    e = err[finite]
    nan = float("nan")
    stats = {
        "mean": e.mean().item() if e.numel() else nan,
        "median": torch.quantile(e, 0.5).item() if e.numel() else nan,
        "rms": e.square().mean().sqrt().item() if e.numel() else nan,
        "p95": torch.quantile(e, 0.95).item() if e.numel() else nan,
    }
    out = {f"{prefix}ang_err_{k}_deg": v for k, v in stats.items()}
    out[f"{prefix}n_samples"] = int(err.numel())
    out[f"{prefix}n_nonfinite"] = int((~finite).sum().item())
    if invalid is not None:
        n_invalid = int(invalid.flatten().sum().item())
        out[f"{prefix}n_invalid"] = n_invalid
        out[f"{prefix}invalid_fraction"] = n_invalid / err.numel() if err.numel() else nan
    return out


COLATITUDE_EDGES_DEG = (0.0, 10.0, 20.0, 29.5, 35.0, 40.0, 90.0)
"""Bands of the bend [deg] (the commanded bend where the dataset records it, else the label's colatitude from
straight); the default training cap is 29.5°."""
CAP_DEG = 29.5
PAST_CAP_DEG = (30.0, 40.0)


def colatitude_deg(label: torch.Tensor) -> torch.Tensor:
    """Bend [deg] of unit parent axes ``label`` (..., 3) in the child frame (straight = +z).

    Args:
        label: unit parent axes (..., 3) in the child frame.

    Returns:
        The bend from +z (...) [deg], in [0, 180].
    """
    return torch.rad2deg(torch.acos(label[..., 2].clamp(-1.0, 1.0)))


def commanded_bend_deg(target: torch.Tensor) -> torch.Tensor:
    """Commanded bend [deg] of child axes ``target`` (..., 3) in the parent frame (straight = −z): acos(−t_z/|t|).

    Args:
        target: child axes (..., 3) in the parent frame, any non-zero length.

    Returns:
        The bend from −z (...) [deg], float64, in [0, 180].
    """
    t = target.double()
    return torch.rad2deg(torch.acos((-t[..., 2] / torch.linalg.vector_norm(t, dim=-1)).clamp(-1.0, 1.0)))


def band_summary(
    err_deg: torch.Tensor,
    label: torch.Tensor,
    prefix: str = "",
    edges: tuple[float, ...] = COLATITUDE_EDGES_DEG,
    bend_deg: Optional[torch.Tensor] = None,
    cap_deg: float = CAP_DEG,
) -> dict[str, float]:
    """Median, p95 and count of the errors per bend band, as ``{prefix}col_<lo>-<hi>/<stat>``, and for the cap
    (``{prefix}cap/``, 0–``cap_deg``) and past it (``{prefix}past_cap/``, 30–40°).

    Args:
        err_deg: (N,) angular errors [deg].
        label: (N, 3) unit labels (child frame, straight = +z).
        prefix: metric name prefix.
        edges: band edges [deg].
        bend_deg: (N,) the bend each row is banded by, e.g. the commanded bend (`commanded_bend_deg`); None:
            the label's colatitude. The label's includes board and base tilt, so with a commanded bend given
            each band also reports ``label_colatitude_median_deg``, the label's angle beside it.
        cap_deg: the cap [deg] of the ``cap`` band (the sweep's own).

    Returns:
        Metric name -> value (NaN statistics for an empty band).
    """
    label_col = colatitude_deg(label.double())
    col = label_col if bend_deg is None else bend_deg.double()
    bands = [(f"col_{lo:g}-{hi:g}", lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
    bands += [("cap", 0.0, cap_deg), ("past_cap", *PAST_CAP_DEG)]
    out: dict[str, float] = {}
    nan = float("nan")
    for name, lo, hi in bands:
        hi_ok = col <= hi if name == "cap" else col < hi  # the cap's own edge belongs to the cap
        mask = (col >= lo) & hi_ok & torch.isfinite(err_deg)
        e = err_deg.detach().double()[mask]
        out[f"{prefix}{name}/n_samples"] = int(e.numel())
        out[f"{prefix}{name}/ang_err_median_deg"] = torch.quantile(e, 0.5).item() if e.numel() else nan
        out[f"{prefix}{name}/ang_err_p95_deg"] = torch.quantile(e, 0.95).item() if e.numel() else nan
        if bend_deg is not None:
            lc = label_col[mask]
            out[f"{prefix}{name}/label_colatitude_median_deg"] = torch.quantile(lc, 0.5).item() if lc.numel() else nan
    return out
