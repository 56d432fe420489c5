"""R(q) v as a quadratic form in the quaternion q: the fast path of the fused estimator (`fusion.estimator`).

R(q) v is quadratic in q = (w, x, y, z), so for fixed vectors v_k there are matrices T_k (3, 16) with
R(q) v_k = T_k vec(q qᵀ) / |q|² (for unit q the division is dropped). The estimator precomputes G_k = C_k T_k once
per magnetic correction and then needs one batched (3 × 16) product per module and attitude sweep.
TorchScript-compatible (the estimator calls `quadratic_map` from its scripted methods). Also the quaternion steps
that the estimator and its graph version share: the check and normalisation of the reference quaternions, the
module directions, the angular travel and the relative rotation at coil activation.
"""

from __future__ import annotations

from typing import List, Tuple

import torch
from torch import Tensor

from flexlearn.lie import quat_to_matrix


def qrot(q: Tensor, p: Tensor) -> Tensor:
    """R(q) p (…, 3) for quaternions (…, 4), not necessarily unit (quadratic in q: |q|² R(q/|q|) p).

    Args:
        q: quaternions (…, 4), (w, x, y, z).
        p: vectors (…, 3).

    Returns:
        ``|q|² R(q/|q|) p`` (…, 3).
    """
    w = q[..., :1]
    v = q[..., 1:]
    n2 = (q * q).sum(-1, keepdim=True)
    tt = 2.0 * torch.linalg.cross(v, p)
    return n2 * p - 2.0 * (v * v).sum(-1, keepdim=True) * p + 2.0 * v * (v * p).sum(-1, keepdim=True) + w * tt


def quadratic_map(v: Tensor) -> Tensor:
    """T (M, 3, 16) with R(q) v_k = T_k vec(q qᵀ) for every quaternion q (4,) and vectors v (M, 3) (float64).

    Evaluates the quadratic form on the basis products e_a e_bᵀ (polarisation for a ≠ b), symmetric in (a, b).

    Args:
        v: the vectors (M, 3) float64.

    Returns:
        T (M, 3, 16) float64.
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

    Args:
        quats: reference quaternions (N, 4).
        fallback: quaternions (N, 4) for the rows that are not usable.

    Returns:
        ``(q (N, 4) float64 normalised, ok (N,) bool)``.
    """
    q = quats.to(torch.float64)
    nrm = (q * q).sum(-1)
    ok = torch.isfinite(nrm) & (nrm > 0.25) & (nrm < 4.0)
    return torch.where(ok.unsqueeze(-1), q / nrm.clamp_min(1e-12).sqrt().unsqueeze(-1), fallback), ok


# ------------------------------------------------------------------------------------------------------------------
# Pure steps that the scripted estimator (`flexlearn.runtime.fusion.estimator.FusedEstimator`) and its branch-free
# export twin (`flexlearn.runtime.fusion.graph.FusedEstimatorGraph`) both run: one owner each.


def module_directions(gain: Tensor, q: Tensor) -> Tensor:
    """û_k = G_k vec(q_k q_kᵀ) of every module k (seed 002, III-B3/B4 fast path: G_k = C_k T_k).

    Args:
        gain: G (M, 3, 16), the bias-corrected quadratic maps.
        q: module quaternions (M, 4) (w, x, y, z), unit (or |q|² within 1e-3 of 1, used unnormalised).

    Returns:
        û (M, 3).
    """
    m = q.shape[0]
    return torch.bmm(gain, (q.unsqueeze(-1) * q.unsqueeze(-2)).reshape(m, 16, 1)).squeeze(-1)


def angular_travel(q_from: Tensor, q_to: Tensor) -> Tensor:
    """Rotation angle [rad] of every module from ``q_from`` to ``q_to`` (M, 4), not necessarily unit: 2 acos |⟨q̂, q̂′⟩|.

    Args:
        q_from: quaternions (M, 4) at the previous coil activation.
        q_to: quaternions (M, 4) now.

    Returns:
        Δφ (M,) [rad] in [0, π].
    """
    dot = torch.abs((q_from * q_to).sum(-1)) * torch.rsqrt((q_from * q_from).sum(-1) * (q_to * q_to).sum(-1))
    return 2.0 * torch.acos(dot.clamp(max=1.0))


def body_relative_rotation(r0t: Tensor, q: Tensor) -> Tensor:
    """R_k = R(q_k⁰)ᵀ R(q_k) (reference "body", seed 002 III-B3 as the estimator uses it).

    Args:
        r0t: R(q_k⁰)ᵀ (3, 3).
        q: the module's quaternion (4,), not necessarily unit.

    Returns:
        R_k (3, 3).
    """
    return torch.matmul(r0t, quat_to_matrix(q / torch.linalg.vector_norm(q)))
