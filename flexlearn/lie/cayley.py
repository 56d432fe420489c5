"""Cayley maps on SO(3) and SE(3), their derivatives and the LGVI implicit rotation update.

Convention (Lee, Leok, McClamroch, "Lie group variational integrators for the full body problem",
CMAME 196 (2007), eq. (40); seed 001, Sec. 3.1.1): ``cay(f) = (I + f^)(I - f^)⁻¹``, a rotation by
``2 atan(|f|)`` about f, so ``cay(f) ≈ exp(2 f)`` to second order. Closed forms (no branches):

* ``cay(f) = I + 2/(1 + |f|²) (f^ + (f^)²)``
* ``cay⁻¹(R) = (R - Rᵀ)ᵛ / (1 + tr R)``  (singular at rotations by π, where |f| → ∞)

Seed discrepancy: seed 001 writes ``Cay⁻¹(R) = 2 (R - I)(R + I)⁻¹``, which is the inverse of the
*scaled* map ``(I + ψ^/2)(I - ψ^/2)⁻¹``, not of the ``(I + ψ^)/(I - ψ^)`` it states. In this module's
terms, the seed's ψ is ``2 so3_cayley_inv(R)`` and its Cay is ``so3_cayley(ψ / 2)``.

Shapes: f (..., 3) → (..., 3, 3); SE(3) twists ξ = [ω; v] (..., 6) → (..., 4, 4).
"""

from typing import Tuple

import torch
from torch import Tensor

from flexlearn.lie.se3 import se3_from_entries
from flexlearn.lie.so3 import so3_hat, so3_quadratic, so3_quadratic_apply, so3_quadratic_entries, so3_vee
from flexlearn.lie.tensor_checks import blocks6, entries, solve3, sqnorm


def _outer(f: Tensor) -> Tensor:
    return f.unsqueeze(-1) * f.unsqueeze(-2)


def so3_cayley(f: Tensor) -> Tensor:
    """``cay(f) = (I + f^)(I - f^)⁻¹ = I + 2/(1 + |f|²) (f^ + (f^)²)`` (..., 3, 3).

    Args:
        f: Cayley vector (..., 3); ``cay(f)`` rotates by ``2 atan(|f|)`` about f.

    Returns:
        The rotation matrix ``cay(f)`` (..., 3, 3).
    """
    s = sqnorm(f)
    k = 2.0 / (1.0 + s)
    return so3_quadratic(f, k, k, s)


def so3_cayley_inv(R: Tensor) -> Tensor:
    """``cay⁻¹(R) = (R - Rᵀ)ᵛ / (1 + tr R)`` (..., 3); rotation angle must be < π.

    Args:
        R: rotation matrices (..., 3, 3), rotation angle < π.

    Returns:
        The Cayley vector f (..., 3).
    """
    tr = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    return so3_vee(R - R.transpose(-1, -2)) / (1.0 + tr).unsqueeze(-1)


def so3_cayley_jacobian(f: Tensor) -> Tensor:
    """Right-trivialised derivative ``J(f) = 2/(1 + |f|²) (I - f^)`` (..., 3, 3).

    ``cay(f + δ) = cay(f) exp((J(f) δ)^) + O(δ²)``, i.e. ``cay(f)ᵀ d cay = (J df)^``. Derivation:
    ``cay(f)⁻¹ d cay = 2 (I + f^)⁻¹ df^ (I - f^)⁻¹`` and ``M u^ Mᵀ = det(M) (M⁻ᵀ u)^``.
    The left-trivialised one is ``J(-f) = 2/(1 + |f|²)(I + f^)``.

    Args:
        f: Cayley vector (..., 3).

    Returns:
        ``J(f)`` (..., 3, 3).
    """
    k = (2.0 / (1.0 + sqnorm(f)))[..., None, None]
    eye = torch.eye(3, dtype=f.dtype, device=f.device)
    return k * (eye - so3_hat(f))


def so3_cayley_jacobian_inv(f: Tensor) -> Tensor:
    """Inverse of :func:`so3_cayley_jacobian`: ``(I + f^ + f fᵀ) / 2`` (..., 3, 3).

    Args:
        f: Cayley vector (..., 3).

    Returns:
        ``J(f)⁻¹`` (..., 3, 3).
    """
    eye = torch.eye(3, dtype=f.dtype, device=f.device)
    return 0.5 * (eye + so3_hat(f) + _outer(f))


def so3_cayley_lgvi(f: Tensor, inertia: Tensor) -> Tuple[Tensor, Tensor]:
    """``g(f) = (F J_d - J_d Fᵀ)ᵛ`` with ``F = cay(f)``, and its 3×3 Jacobian ``∂g/∂f``.

    The implicit LGVI rotation update (seed 001, eq. (13); Lee et al. 2007, Sec. 3.3) is ``g(f) = u``
    for known u and nonstandard inertia ``J_d = ½ tr(J) I - J`` (..., 3, 3), symmetric. With
    ``J = tr(J_d) I - J_d``: ``g(f) = 2/(1 + |f|²) (J f + (J_d f) × f)`` and
    ``∂g/∂f = 2/(1 + |f|²) (J - f^ J_d + (J_d f)^) - 4/(1 + |f|²)² (J f + (J_d f) × f) fᵀ``.

    Args:
        f: Cayley vector (..., 3).
        inertia: nonstandard inertia ``J_d`` (..., 3, 3), symmetric.

    Returns:
        ``(g (..., 3), dg (..., 3, 3))``.
    """
    tr = inertia[..., 0, 0] + inertia[..., 1, 1] + inertia[..., 2, 2]
    eye = torch.eye(3, dtype=f.dtype, device=f.device)
    Jm = tr[..., None, None] * eye - inertia
    jdf = (inertia @ f.unsqueeze(-1)).squeeze(-1)
    h = (Jm @ f.unsqueeze(-1)).squeeze(-1) + torch.linalg.cross(jdf, f.expand(jdf.shape))
    k = 2.0 / (1.0 + sqnorm(f))
    dh = Jm - so3_hat(f) @ inertia + so3_hat(jdf)
    g = k.unsqueeze(-1) * h
    dg = k[..., None, None] * dh - (k * k)[..., None, None] * h.unsqueeze(-1) * f.unsqueeze(-2)
    return g, dg


def so3_cayley_lgvi_newton(
    u: Tensor, inertia: Tensor, f: Tensor, thr: Tensor, iters: int, stop: bool
) -> Tuple[Tensor, Tensor]:
    """The Newton iteration of the implicit LGVI rotation update ``(cay(f) J_d - J_d cay(f)ᵀ)ᵛ = u`` for f.

    The one implementation behind :func:`so3_cayley_lgvi_solve` and the rod integrator
    (:mod:`flexlearn.physics.cosserat.newton`; seed 001, eq. (13); Lee, Leok & McClamroch 2007, Sec. 3.3):
    from the start ``f`` (..., 3), ``f ← f - δ`` with ``δ = (∂g/∂f)⁻¹ (g(f) - u)`` (:func:`so3_cayley_lgvi`,
    3×3 solves by the adjugate) for ``iters`` steps; with ``stop``, fewer once every update satisfies
    ``|δ| ≤ thr`` (the residual after it is O(|δ|²)); without, a fixed count (no data-dependent branch:
    compilable).

    Args:
        u: right-hand side (..., 3).
        inertia: nonstandard inertia J_d (..., 3, 3).
        f: start of the iteration (..., 3).
        thr: stopping threshold on ``|δ|`` (...) [units of f].
        iters: number of Newton steps (the most, with ``stop``).
        stop: stop early once every ``|δ| ≤ thr``; without, a fixed count.

    Returns:
        ``(f, |δ_last|)`` (...), the last update's norm (+inf for ``iters = 0`` with ``stop``, 0 without) to
        report a failed solve.
    """
    step = torch.full_like(thr, float("inf")) if stop else torch.zeros_like(thr)
    for _ in range(iters):
        g, dg = so3_cayley_lgvi(f, inertia)
        delta = solve3(dg, g - u)
        f = f - delta
        step = torch.linalg.vector_norm(delta, dim=-1)
        if stop and bool((step <= thr).all()):
            break
    return f, step


def so3_cayley_lgvi_solve(u: Tensor, inertia: Tensor, iters: int = 20, tol: float = 1e-14) -> Tensor:
    """Newton solve of ``(cay(f) J_d - J_d cay(f)ᵀ)ᵛ = u`` for f (..., 3).

    Starts from the linearisation ``f₀ = (2 J)⁻¹ u`` (J = tr(J_d) I - J_d) and runs
    :func:`so3_cayley_lgvi_newton` for at most ``iters`` steps, stopping once every Newton update is at most
    ``tol`` (the residual is then O(tol²); use ~1e-6 relative scale in float32).
    A function loaded with ``torch.jit.load`` loses its default arguments: pass ``iters`` and ``tol``.

    Args:
        u: right-hand side (..., 3).
        inertia: nonstandard inertia J_d (..., 3, 3).
        iters: the most Newton steps.
        tol: stop once every Newton update is at most this [units of f].

    Returns:
        f (..., 3).
    """
    tr = inertia[..., 0, 0] + inertia[..., 1, 1] + inertia[..., 2, 2]
    eye = torch.eye(3, dtype=u.dtype, device=u.device)
    Jm = tr[..., None, None] * eye - inertia
    f = torch.linalg.solve(2.0 * Jm, u.unsqueeze(-1)).squeeze(-1)
    f, _ = so3_cayley_lgvi_newton(u, inertia, f, torch.full_like(f[..., 0], tol), iters, True)
    return f


def se3_cayley(xi: Tensor) -> Tensor:
    """``cay(ξ^) = (I + ξ^)(I - ξ^)⁻¹ = [[cay(ω), 2 (I - ω^)⁻¹ v], [0, 1]]`` (..., 4, 4).

    ``2 (I - ω^)⁻¹ v = 2/(1 + |ω|²) (I + ω^ + ω ωᵀ) v = 2v + k (ω × v + ω × (ω × v))``, k = 2/(1 + |ω|²).

    Args:
        xi: Cayley coordinates ξ = [ω; v] (..., 6), angular part first.

    Returns:
        The pose ``cay(ξ^)`` (..., 4, 4).
    """
    omega = xi[..., :3]
    s = sqnorm(omega)
    k = 2.0 / (1.0 + s)
    v = xi[..., 3:]
    p = so3_quadratic_apply(omega, k, k, v)
    vs = v.unbind(-1)
    return se3_from_entries(so3_quadratic_entries(omega, k, k, s, True), [p[0] + vs[0], p[1] + vs[1], p[2] + vs[2]])


def se3_cayley_inv(T: Tensor) -> Tensor:
    """Inverse of :func:`se3_cayley`: ``ω = cay⁻¹(R)``, ``v = ½ (I - ω^) p`` (..., 6).

    Args:
        T: poses (..., 4, 4), rotation angle < π.

    Returns:
        The Cayley coordinates ξ = [ω; v] (..., 6).
    """
    omega = so3_cayley_inv(T[..., :3, :3])
    s = sqnorm(omega)
    v = so3_quadratic_apply(omega, torch.full_like(s, -1.0), torch.zeros_like(s), T[..., :3, 3])
    return torch.stack(list(omega.unbind(-1)) + [0.5 * v[0], 0.5 * v[1], 0.5 * v[2]], -1)


def se3_cayley_jacobian(xi: Tensor) -> Tensor:
    """Right-trivialised derivative (..., 6, 6): ``cay(ξ + δ) = cay(ξ) exp((J(ξ) δ)^) + O(δ²)``.

    ``J = [[J_R(ω), 0], [-v^ J_R(ω), 2 (I + ω^)⁻¹]]`` with J_R = :func:`so3_cayley_jacobian` and
    ``2 (I + ω^)⁻¹ = k (I - ω^ + ω ωᵀ) = 2 I - k ω^ + k (ω^)²``, k = 2/(1 + |ω|²); from
    ``cay⁻¹ d cay = 2 (I + ξ^)⁻¹ dξ^ (I - ξ^)⁻¹``.

    Args:
        xi: Cayley coordinates ξ = [ω; v] (..., 6), angular part first.

    Returns:
        ``J(ξ)`` (..., 6, 6).
    """
    omega = xi[..., :3]
    s = sqnorm(omega)
    k = 2.0 / (1.0 + s)
    jr = so3_cayley_jacobian(omega)
    lower = -so3_hat(xi[..., 3:]) @ jr
    right = [2.0 * e for e in so3_quadratic_entries(omega, -0.5 * k, 0.5 * k, s, True)]
    return blocks6(entries(jr), entries(lower), right, False)
