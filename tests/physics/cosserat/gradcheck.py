"""Shared check: autograd gradients of a scalar simulation output against central differences."""

from __future__ import annotations

from typing import Callable

import pytest
import torch


def assert_gradients_match_central_differences(
    run: Callable[[dict], torch.Tensor], params: dict[str, torch.Tensor], rel: float = 1e-4, rel_step: float = 1e-5
) -> None:
    """D run(params) / d params[k] by autograd equals (run(k + ε) − run(k − ε)) / 2ε, ε = rel_step·params[k], for every
    scalar parameter k, to ``rel`` relative (absolute floor 1e-9·|run|)."""
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    out = run(leaves)
    grads = torch.autograd.grad(out, list(leaves.values()))
    for (k, v), g in zip(params.items(), grads):
        eps = rel_step * float(v)
        hi = {kk: (vv + eps if kk == k else vv) for kk, vv in params.items()}
        lo = {kk: (vv - eps if kk == k else vv) for kk, vv in params.items()}
        with torch.no_grad():
            fd = (run(hi) - run(lo)) / (2 * eps)
        assert float(g) == pytest.approx(float(fd), rel=rel, abs=1e-9 * abs(float(out.detach()))), k
