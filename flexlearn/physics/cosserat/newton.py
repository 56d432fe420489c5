"""The Cayley–Newton solve (and its globalised fallback) that advances the node rotations of the LGVI (seed 001, eq.
(13); Lee, Leok & McClamroch 2007, Sec. 3.3): the start and stopping rule of the rod integrator around the one
Newton iteration :func:`flexlearn.lie.cayley.so3_cayley_lgvi_newton` (the numba kernel's scalar copy,
:func:`flexlearn.physics.cosserat.compiled.cayley.cayley_newton`, is tested against it)."""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from flexlearn.lie.cayley import so3_cayley_lgvi, so3_cayley_lgvi_newton


def cayley_newton(u: Tensor, jd: Tensor, j_diag: Tensor, tol: float, iters: int) -> Tuple[Tensor, Tensor]:
    """Newton on the Cayley map for ``(cay(f) J_d − J_d cay(f)ᵀ)ᵛ = u`` at every node at once.

    Starts from the linearisation ``f₀ = (2J)⁻¹ u`` and stops when every Newton update
    |δ| ≤ tol · max(|u|, 1e-3) (the residual after it is O(|δ|²)), after at most ``iters`` updates.
    Unlike :func:`flexlearn.lie.so3_cayley_lgvi_solve`, the convergence measure is returned so that a failed
    solve is reported (node and step) instead of passed on.

    Args:
        u: (B, n, 3) normalised ``h u / tr J``.
        jd: (B, n, 3, 3) normalised J_d.
        j_diag: (B, n, 3) normalised diagonal of J.
        tol: relative tolerance of the last update.
        iters: the most Newton updates.

    Returns:
        ``(f, |δ_last|)``: the Cayley coordinates (B, n, 3) and the size of the last update (B, n).
    """
    thr = tol * u.norm(dim=-1).clamp_min(1e-3)
    return so3_cayley_lgvi_newton(u, jd, u / (2.0 * j_diag), thr, iters, True)


def cayley_newton_fixed(u: Tensor, jd: Tensor, j_diag: Tensor, iters: int) -> Tuple[Tensor, Tensor]:
    """:func:`cayley_newton` with a fixed number of iterations (no data-dependent branch: compilable).

    Args:
        u: (B, n, 3) normalised ``h u / tr J``.
        jd: (B, n, 3, 3) normalised J_d.
        j_diag: (B, n, 3) normalised diagonal of J.
        iters: the number of Newton updates.

    Returns:
        ``(f, |δ_last|)`` as :func:`cayley_newton`.
    """
    return so3_cayley_lgvi_newton(u, jd, u / (2.0 * j_diag), u.new_zeros(u.shape[:-1]), iters, False)


def cayley_newton_globalised(
    u: Tensor, jd: Tensor, j_diag: Tensor, tol: float, iters: int, max_halvings: int = 30
) -> Tuple[Tensor, Tensor, int]:
    """Newton on the Cayley map with a backtracking line search, per node: the fallback of
    :func:`cayley_newton` where the plain iteration did not converge.

    The update ``δ = (∂g/∂f)⁻¹ (g(f) − u)`` of :func:`~flexlearn.lie.cayley.so3_cayley_lgvi` is taken as
    ``f ← f − t δ`` with the largest ``t = 2⁻ʲ`` that lowers the residual norm ``|g(f) − u|`` by the Armijo
    factor ``1 − 10⁻⁴ t``; converged where a full step (t = 1) satisfies |δ| ≤ tol · max(|u|, 1e-3) or the
    residual is at round-off (≤ 1e-14 · max(|u|, 1e-3)). The
    equation has a solution only while the node turns by less than a quarter turn per step (for an isotropic
    J: ``|u| ≤ 1`` in these normalised units, ``sin φ = |u|``): beyond that the residual stalls and the last
    update stays large, which the caller reports.

    Args:
        u: (B, n, 3) normalised ``h u / tr J``.
        jd: (B, n, 3, 3) normalised J_d.
        j_diag: (B, n, 3) normalised diagonal of J.
        tol: relative tolerance of the last full update.
        iters: the most Newton updates.
        max_halvings: the most step halvings of one line search.

    Returns:
        ``(f, |δ_last|, halvings)``: the Cayley coordinates (B, n, 3), the size of the last full update where
        it was accepted (B, n; +inf where the last step was shortened) and the step halvings in all.
    """
    thr = tol * u.norm(dim=-1).clamp_min(1e-3)
    floor = 1e-14 * u.norm(dim=-1).clamp_min(1e-3)  # residual at round-off: solved
    f = u / (2.0 * j_diag)
    g, dg = so3_cayley_lgvi(f, jd)
    norm = (g - u).norm(dim=-1)
    last = torch.full_like(norm, float("inf"))
    halvings = 0
    for _ in range(iters):
        delta = torch.linalg.solve(dg, (g - u).unsqueeze(-1)).squeeze(-1)
        t = torch.ones_like(norm)
        todo = torch.ones_like(norm, dtype=torch.bool)
        for _ in range(max_halvings + 1):
            g_try, _ = so3_cayley_lgvi(f - t.unsqueeze(-1) * delta, jd)
            n_try = (g_try - u).norm(dim=-1)
            ok = torch.isfinite(n_try) & ((n_try <= (1.0 - 1e-4 * t) * norm) | (n_try <= floor))
            todo = todo & ~ok
            if not bool(todo.any()):
                break
            halvings += int(todo.sum())
            t = torch.where(todo, 0.5 * t, t)
        t = torch.where(todo, torch.zeros_like(t), t)  # no decrease found: the node keeps its f
        f = f - t.unsqueeze(-1) * delta
        full = delta.norm(dim=-1)
        last = torch.where(t == 1.0, full, torch.where(todo, last, torch.full_like(full, float("inf"))))
        g, dg = so3_cayley_lgvi(f, jd)
        norm = (g - u).norm(dim=-1)
        last = torch.where(norm <= floor, torch.zeros_like(last), last)
        if bool((last <= thr).all()) or bool(todo.all()):
            break
    return f, last, halvings
