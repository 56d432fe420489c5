"""R(q) v as a quadratic form in the quaternion q: the fast path of the fused estimator (`flexlearn.runtime.fusion.estimator`).

R(q) v is quadratic in q = (w, x, y, z), so for fixed vectors v_k there are matrices T_k (3, 16) with
R(q) v_k = T_k vec(q qᵀ) / |q|² (for unit q the division is dropped). The estimator precomputes G_k = C_k T_k once
per magnetic correction and then needs one batched (3 × 16) product per module and attitude sweep.
TorchScript-compatible (the estimator calls `quadratic_map` from its scripted methods). Also the check and
normalisation of the reference quaternions, shared by the estimator and its graph version.
"""
from __future__ import annotations

from typing import List, Tuple

import torch
from torch import Tensor


def qrot(q: Tensor, p: Tensor) -> Tensor:
    """R(q) p (…, 3) for quaternions (…, 4), not necessarily unit (quadratic in q: |q|² R(q/|q|) p)."""
    w = q[..., :1]
    v = q[..., 1:]
    n2 = (q * q).sum(-1, keepdim=True)
    tt = 2.0 * torch.linalg.cross(v, p)
    return n2 * p - 2.0 * (v * v).sum(-1, keepdim=True) * p + 2.0 * v * (v * p).sum(-1, keepdim=True) \
        + w * tt


def quadratic_map(v: Tensor) -> Tensor:
    """T (M, 3, 16) with R(q) v_k = T_k vec(q qᵀ) for every quaternion q (4,) and vectors v (M, 3) (float64).

    Evaluates the quadratic form on the basis products e_a e_bᵀ (polarisation for a ≠ b), symmetric in (a, b).
    """
    m = v.shape[0]
    basis = torch.eye(4, dtype=torch.float64).unsqueeze(0).expand(m, 4, 4)
    cols: List[Tensor] = []
    for a in range(4):
        row: List[Tensor] = []
        for b in range(4):
            if a == b:
                row.append(qrot(basis[:, a], v))
            else:
                qp = basis[:, a] + basis[:, b]
                qm = basis[:, a] - basis[:, b]
                row.append(0.25 * (qrot(qp, v) - qrot(qm, v)))
        cols.append(torch.stack(row, -1))
    return torch.stack(cols, -2).reshape(m, 3, 16)


def reference_rows(quats: torch.Tensor, fallback: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Usable reference quaternions: (q (N, 4) float64 normalised, ok (N,) bool).

    A row is usable when its squared norm is finite and in (0.25, 4); other rows take ``fallback``'s.
    """
    q = quats.to(torch.float64)
    nrm = (q * q).sum(-1)
    ok = torch.isfinite(nrm) & (nrm > 0.25) & (nrm < 4.0)
    return torch.where(ok.unsqueeze(-1), q / nrm.clamp_min(1e-12).sqrt().unsqueeze(-1), fallback), ok
