"""The Cayley–Newton solve of the compiled LGVI step in scalar form (numba): the node rotation f of
``(cay(f) J_d − J_d cay(f)ᵀ)ᵛ = u`` (seed 001, eq. (10); :func:`flexlearn.lie.so3_cayley_lgvi`), for a diagonal
J_d = diag(d) and J = diag(j).

`cayley_newton` takes chord iterations, then full Newton, then Newton with a line search
(`cayley_newton_globalised`, the scalar form of the tensor path's fallback
:func:`flexlearn.physics.cosserat.newton.cayley_newton_globalised`); `newton_update` is one Newton update.
Called, inlined, by the step loop of :mod:`flexlearn.physics.cosserat.compiled.lgvi`; tested against the torch
solves in tests/physics/cosserat/test_strains.py. Arguments are floats: u (N m s), d and j (kg m²).
"""

from __future__ import annotations

import numpy as np

from flexlearn.physics.cosserat.compiled.common import njit

__all__ = ["CHORD_ITERS", "MAX_HALVINGS", "cayley_newton", "newton_update", "cayley_newton_globalised"]

CHORD_ITERS = 4
"""Chord iterations (Jacobian at f = 0) before full Newton."""
MAX_HALVINGS = 20
"""Step halvings of one line search of the globalised Newton (as the tensor path's fallback)."""


@njit(cache=True, inline="always", error_model="numpy")
def cayley_newton(u0, u1, u2, d0, d1, d2, j0, j1, j2, tol, iters):
    """Newton on the Cayley map for ``(cay(f) J_d − J_d cay(f)ᵀ)ᵛ = u`` with diagonal J_d = diag(d),
    J = diag(j) (the residual and Jacobian of :func:`flexlearn.lie.so3_cayley_lgvi`, the stopping rule of
    :func:`flexlearn.physics.cosserat.newton.cayley_newton`: the last update ≤ tol · max(|u|, 1e-3)): the scalar
    form of :func:`flexlearn.lie.cayley.so3_cayley_lgvi_newton`, tested equal to it to the solve's tolerance
    (tests/physics/cosserat/test_strains.py). A few chord iterations first; full Newton from the linear start
    if they do not converge; Newton with a line search (:func:`cayley_newton_globalised`, as the tensor path's
    fallback) if that does not either.

    Args:
        u0: the right-hand side u (N m s), component 0.
        u1: the right-hand side u (N m s), component 1.
        u2: the right-hand side u (N m s), component 2.
        d0: the diagonal of J_d (kg m²), component 0.
        d1: the diagonal of J_d (kg m²), component 1.
        d2: the diagonal of J_d (kg m²), component 2.
        j0: the diagonal of J (kg m²), component 0.
        j1: the diagonal of J (kg m²), component 1.
        j2: the diagonal of J (kg m²), component 2.
        tol: relative tolerance of the last update.
        iters: iterations of full Newton (the line search gets twice as many).

    Returns:
        (f0, f1, f2, converged).
    """
    i0, i1, i2 = 0.5 / j0, 0.5 / j1, 0.5 / j2
    f0, f1, f2 = u0 * i0, u1 * i1, u2 * i2
    uu = u0 * u0 + u1 * u1 + u2 * u2
    thr2 = tol * tol * (uu if uu > 1e-6 else 1e-6)  # squared: no square roots in the loop
    # chord iterations with the Jacobian at f = 0 (2 J, diagonal): ~6× cheaper per iteration, linear rate
    # O(|f|), so for the small rotations of a stable step they reach the tolerance in 1–3 iterations
    c0, c1, c2 = f0, f1, f2
    for _ in range(CHORD_ITERS):
        a0, a1, a2 = d0 * c0, d1 * c1, d2 * c2
        k = 2.0 / (1.0 + c0 * c0 + c1 * c1 + c2 * c2)
        g0 = (k * (j0 * c0 + a1 * c2 - a2 * c1) - u0) * i0
        g1 = (k * (j1 * c1 + a2 * c0 - a0 * c2) - u1) * i1
        g2 = (k * (j2 * c2 + a0 * c1 - a1 * c0) - u2) * i2
        c0, c1, c2 = c0 - g0, c1 - g1, c2 - g2
        if g0 * g0 + g1 * g1 + g2 * g2 <= thr2:
            return c0, c1, c2, True
    # otherwise full Newton from the linear start; where that does not converge, Newton with a line search
    thr = np.sqrt(thr2)
    for _ in range(iters):
        g0, g1, g2, _r = newton_update(f0, f1, f2, d0, d1, d2, j0, j1, j2, u0, u1, u2)
        f0, f1, f2 = f0 - g0, f1 - g1, f2 - g2
        if np.sqrt(g0 * g0 + g1 * g1 + g2 * g2) <= thr:
            return f0, f1, f2, True
    return cayley_newton_globalised(u0, u1, u2, d0, d1, d2, j0, j1, j2, thr, 2 * iters)


@njit(cache=True, inline="always", error_model="numpy")
def newton_update(f0, f1, f2, d0, d1, d2, j0, j1, j2, u0, u1, u2):
    """The Newton update δ = (∂g/∂f)⁻¹ (g(f) − u) at f (residual and Jacobian of
    :func:`flexlearn.lie.so3_cayley_lgvi`, diagonal J_d = diag(d), J = diag(j)) and the residual norm |g(f) − u|.

    Args:
        f0: the current f, component 0.
        f1: the current f, component 1.
        f2: the current f, component 2.
        d0: the diagonal of J_d (kg m²), component 0.
        d1: the diagonal of J_d (kg m²), component 1.
        d2: the diagonal of J_d (kg m²), component 2.
        j0: the diagonal of J (kg m²), component 0.
        j1: the diagonal of J (kg m²), component 1.
        j2: the diagonal of J (kg m²), component 2.
        u0: the right-hand side u (N m s), component 0.
        u1: the right-hand side u (N m s), component 1.
        u2: the right-hand side u (N m s), component 2.

    Returns:
        (δ0, δ1, δ2, |g(f) − u|).
    """
    a0, a1, a2 = d0 * f0, d1 * f1, d2 * f2  # J_d f
    h0 = j0 * f0 + a1 * f2 - a2 * f1  # J f + (J_d f) × f
    h1 = j1 * f1 + a2 * f0 - a0 * f2
    h2 = j2 * f2 + a0 * f1 - a1 * f0
    k = 2.0 / (1.0 + f0 * f0 + f1 * f1 + f2 * f2)
    kk = k * k
    # dh = diag(j) − f^ diag(d) + (J_d f)^ ;  dg = k dh − k² h fᵀ
    m00 = k * j0 - kk * h0 * f0
    m01 = k * (f2 * d1 - a2) - kk * h0 * f1
    m02 = k * (-f1 * d2 + a1) - kk * h0 * f2
    m10 = k * (-f2 * d0 + a2) - kk * h1 * f0
    m11 = k * j1 - kk * h1 * f1
    m12 = k * (f0 * d2 - a0) - kk * h1 * f2
    m20 = k * (f1 * d0 - a1) - kk * h2 * f0
    m21 = k * (-f0 * d1 + a0) - kk * h2 * f1
    m22 = k * j2 - kk * h2 * f2
    r0, r1, r2 = k * h0 - u0, k * h1 - u1, k * h2 - u2
    # δ = dg⁻¹ r by the adjugate (rows a_i: columns of the inverse are a1×a2, a2×a0, a0×a1)
    c00, c01, c02 = m11 * m22 - m12 * m21, m12 * m20 - m10 * m22, m10 * m21 - m11 * m20
    c10, c11, c12 = m21 * m02 - m22 * m01, m22 * m00 - m20 * m02, m20 * m01 - m21 * m00
    c20, c21, c22 = m01 * m12 - m02 * m11, m02 * m10 - m00 * m12, m00 * m11 - m01 * m10
    det = m00 * c00 + m01 * c01 + m02 * c02
    g0 = (r0 * c00 + r1 * c10 + r2 * c20) / det
    g1 = (r0 * c01 + r1 * c11 + r2 * c21) / det
    g2 = (r0 * c02 + r1 * c12 + r2 * c22) / det
    return g0, g1, g2, np.sqrt(r0 * r0 + r1 * r1 + r2 * r2)


@njit(cache=True, error_model="numpy")
def cayley_newton_globalised(u0, u1, u2, d0, d1, d2, j0, j1, j2, thr, iters):
    """Newton with a backtracking line search from the linear start: the scalar form of
    :func:`flexlearn.physics.cosserat.newton.cayley_newton_globalised` (the same Armijo factor 1 − 10⁻⁴ t, at most
    :data:`MAX_HALVINGS` halvings; converged where a full step's update is ≤ ``thr`` or the residual is at
    round-off).

    Args:
        u0: the right-hand side u (N m s), component 0.
        u1: the right-hand side u (N m s), component 1.
        u2: the right-hand side u (N m s), component 2.
        d0: the diagonal of J_d (kg m²), component 0.
        d1: the diagonal of J_d (kg m²), component 1.
        d2: the diagonal of J_d (kg m²), component 2.
        j0: the diagonal of J (kg m²), component 0.
        j1: the diagonal of J (kg m²), component 1.
        j2: the diagonal of J (kg m²), component 2.
        thr: absolute tolerance of a full step's update.
        iters: Newton iterations.

    Returns:
        (f0, f1, f2, converged).
    """
    uu = np.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
    floor = 1e-14 * (uu if uu > 1e-3 else 1e-3)
    f0, f1, f2 = 0.5 * u0 / j0, 0.5 * u1 / j1, 0.5 * u2 / j2
    for _ in range(iters):
        g0, g1, g2, norm = newton_update(f0, f1, f2, d0, d1, d2, j0, j1, j2, u0, u1, u2)
        if norm <= floor:
            return f0, f1, f2, True
        t = 1.0
        accepted = False
        for _ in range(MAX_HALVINGS + 1):
            x0, x1, x2 = f0 - t * g0, f1 - t * g1, f2 - t * g2
            _a, _b, _c, n_try = newton_update(x0, x1, x2, d0, d1, d2, j0, j1, j2, u0, u1, u2)
            if np.isfinite(n_try) and (n_try <= (1.0 - 1e-4 * t) * norm or n_try <= floor):
                accepted = True
                break
            t *= 0.5
        if not accepted:  # no decrease along the Newton direction: no solution near (beyond a quarter turn)
            return f0, f1, f2, False
        f0, f1, f2 = x0, x1, x2
        if t == 1.0 and np.sqrt(g0 * g0 + g1 * g1 + g2 * g2) <= thr:
            return f0, f1, f2, True
    return f0, f1, f2, False
