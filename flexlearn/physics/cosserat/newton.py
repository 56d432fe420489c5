"""The Cayley–Newton solve that advances the node rotations of the LGVI (seed 001, eq. (13); Lee, Leok &
McClamroch 2007, Sec. 3.3): the start and stopping rule of the rod integrator around the one Newton iteration
:func:`flexlearn.lie.cayley.so3_cayley_lgvi_newton` (the numba kernel's scalar copy,
:func:`flexlearn.physics.cosserat.compiled.lgvi._cayley_newton`, is tested against it)."""

from __future__ import annotations

from typing import Tuple

from torch import Tensor

from flexlearn.lie.cayley import so3_cayley_lgvi_newton


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
