"""Closed-form 3×3 solve and the batched Newton iteration on the Cayley map that advances the node
rotations of the LGVI (seed 001, eq. (13); Lee, Leok & McClamroch 2007, Sec. 3.3)."""
from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from flexlearn.lie import so3_cayley_lgvi


def _solve3(A: Tensor, b: Tensor) -> Tensor:
    """``A⁻¹ b`` for (..., 3, 3) A by the adjugate (rows a_i: ``A⁻¹ = [a1×a2, a2×a0, a0×a1] / det``).
    Much cheaper than ``torch.linalg.solve`` for many tiny systems on CPU (no LAPACK dispatch)."""
    a0, a1, a2 = A[..., 0, :], A[..., 1, :], A[..., 2, :]
    c0 = torch.linalg.cross(a1, a2)
    c1 = torch.linalg.cross(a2, a0)
    c2 = torch.linalg.cross(a0, a1)
    det = (a0 * c0).sum(-1, keepdim=True)
    return (b[..., 0:1] * c0 + b[..., 1:2] * c1 + b[..., 2:3] * c2) / det


def _cayley_newton(u: Tensor, jd: Tensor, j_diag: Tensor, tol: float, iters: int) -> Tuple[Tensor, Tensor]:
    """Newton on the Cayley map for ``(cay(f) J_d − J_d cay(f)ᵀ)ᵛ = u`` at every node at once (seed 001,
    eq. (13); Lee, Leok & McClamroch 2007, Sec. 3.3). Residual and Jacobian from
    :func:`flexlearn.lie.so3_cayley_lgvi`; start from the linearisation ``f₀ = (2J)⁻¹ u`` (J diagonal).
    Stops when every Newton update |δ| ≤ tol · max(|u|, 1e-3) (the residual after it is O(|δ|²)).
    Returns ``(f, |δ_last|)``: unlike :func:`flexlearn.lie.so3_cayley_lgvi_solve`, the convergence measure
    is returned so that a failed solve is reported (node and step) instead of passed on."""
    f = u / (2.0 * j_diag)
    thr = tol * u.norm(dim=-1).clamp_min(1e-3)
    step = torch.full_like(thr, float("inf"))
    for _ in range(iters):
        g, dg = so3_cayley_lgvi(f, jd)
        delta = _solve3(dg, g - u)
        f = f - delta
        step = delta.norm(dim=-1)
        if not bool((~(step <= thr)).any()):
            break
    return f, step


def _cayley_newton_fixed(u: Tensor, jd: Tensor, j_diag: Tensor, iters: int) -> Tuple[Tensor, Tensor]:
    """:func:`_cayley_newton` with a fixed number of iterations (no data-dependent branch: compilable)."""
    f = u / (2.0 * j_diag)
    step = torch.zeros_like(u[..., 0])
    for _ in range(iters):
        g, dg = so3_cayley_lgvi(f, jd)
        delta = _solve3(dg, g - u)
        f = f - delta
        step = delta.norm(dim=-1)
    return f, step
