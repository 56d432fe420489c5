"""Angular error between predicted and reference unit directions, and its summary statistics."""
from __future__ import annotations

import torch


def angular_error_deg(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Angle [deg] between directions ``pred`` and ``target``, shapes (..., 3) -> (...).

    Computed as atan2(|p x t|, p . t), which stays accurate for small angles (acos of the dot product
    loses half the digits there). Inputs need not be unit length.
    """
    cross = torch.linalg.vector_norm(torch.cross(pred, target, dim=-1), dim=-1)
    dot = (pred * target).sum(dim=-1)
    return torch.rad2deg(torch.atan2(cross, dot))


def angular_error_summary(err_deg: torch.Tensor, prefix: str = "") -> dict[str, float]:
    """Mean, median, RMS and 95th percentile of angular errors [deg] as ``{prefix}ang_err_<stat>_deg``.

    Non-finite errors are counted under ``{prefix}n_nonfinite`` and excluded from the statistics;
    an empty input gives NaN statistics.
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
    return out
