"""SE(3): 4×4 poses, twists ξ = [ω; v] (angular first, rad and m), adjoints, exp/log, inverse.

Shapes: twists (..., 6), poses (..., 4, 4), adjoint matrices (..., 6, 6); batch dims broadcast.
Adjoint matrices follow seed 003, App. A: ``ad_ξ = [[ω^, 0], [v^, ω^]]``, ``Ad_g = [[R, 0], [p^R, R]]``.
"""

from typing import List

import torch
from torch import Tensor

from flexlearn.lie.series import cosc, cotc, sinc, sinc3
from flexlearn.lie.so3 import so3_hat_entries, so3_log, so3_quadratic_apply, so3_quadratic_entries
from flexlearn.lie.tensor_checks import blocks6, cross3, entries, from_entries, sqnorm


def se3_from_entries(r: List[Tensor], p: List[Tensor]) -> Tensor:
    """Pose ``[[R, p], [0, 1]]`` (..., 4, 4) from the entries of R and p; shared by exp, inverse and the Cayley map.

    Args:
        r: nine tensors (...), the row-major entries of the rotation R.
        p: three tensors (...), the translation components [m].

    Returns:
        The pose (..., 4, 4).
    """
    o = torch.zeros_like(r[0])
    return from_entries(
        [r[0], r[1], r[2], p[0], r[3], r[4], r[5], p[1], r[6], r[7], r[8], p[2], o, o, o, torch.ones_like(o)], 4, 4
    )


def se3_from_rt(R: Tensor, p: Tensor) -> Tensor:
    """Pose (..., 4, 4) from a rotation (..., 3, 3) and a translation (..., 3) (broadcast).

    Args:
        R: rotation (..., 3, 3).
        p: translation (..., 3).

    Returns:
        The pose ``[[R, p], [0, 1]]`` (..., 4, 4).
    """
    return se3_from_entries(entries(R), list(p.unbind(-1)))


def se3_hat(xi: Tensor) -> Tensor:
    """``ξ^ = [[ω^, v], [0, 0]]`` (..., 4, 4).

    Args:
        xi: twist ξ = [ω; v] (..., 6), angular part first.

    Returns:
        ``ξ^`` (..., 4, 4).
    """
    w = so3_hat_entries(xi[..., :3])
    a, b, c = xi[..., 3], xi[..., 4], xi[..., 5]
    o = w[0]
    return from_entries([w[0], w[1], w[2], a, w[3], w[4], w[5], b, w[6], w[7], w[8], c, o, o, o, o], 4, 4)


def se3_vee(X: Tensor) -> Tensor:
    """Inverse of :func:`se3_hat`: ``[ω; v]`` (..., 6).

    Args:
        X: Lie algebra matrices (..., 4, 4), of the form of :func:`se3_hat`.

    Returns:
        ξ = [ω; v] (..., 6).
    """
    return torch.stack([X[..., 2, 1], X[..., 0, 2], X[..., 1, 0], X[..., 0, 3], X[..., 1, 3], X[..., 2, 3]], -1)


def se3_exp(xi: Tensor) -> Tensor:
    """``exp(ξ^) = [[exp(ω^), J_l(ω) v], [0, 1]]`` (Sola et al. eqs. (172)-(174); Barfoot (7.83)).

    R = I + A ω^ + B (ω^)², V = J_l(ω) = I + B ω^ + C (ω^)²; coefficients shared.

    Args:
        xi: twist ξ = [ω; v] (..., 6) [rad, m].

    Returns:
        The pose ``exp(ξ^)`` (..., 4, 4).
    """
    omega = xi[..., :3]
    t2 = sqnorm(omega)
    b = cosc(t2)
    r = so3_quadratic_entries(omega, sinc(t2), b, t2, True)
    p = so3_quadratic_apply(omega, b, sinc3(t2), xi[..., 3:])
    return se3_from_entries(r, p)


def se3_log(T: Tensor) -> Tensor:
    """``ξ = [ω; J_l⁻¹(ω) p]`` (..., 6) with ``ω = so3_log(R)``, ‖ω‖ ≤ π (Sola et al. eq. (173)).

    ``J_l⁻¹(ω) = I - ½ ω^ + D(θ) (ω^)²`` applied to p directly (two cross products).

    Args:
        T: poses (..., 4, 4), translation [m].

    Returns:
        ξ = [ω; v] (..., 6) [rad, m], ‖ω‖ ≤ π.
    """
    omega = so3_log(T[..., :3, :3])
    t2 = sqnorm(omega)
    v = so3_quadratic_apply(omega, torch.full_like(t2, -0.5), cotc(t2), T[..., :3, 3])
    return torch.stack(list(omega.unbind(-1)) + v, -1)


def se3_inverse(T: Tensor) -> Tensor:
    """``T⁻¹ = [[Rᵀ, -Rᵀ p], [0, 1]]`` (..., 4, 4).

    Args:
        T: poses (..., 4, 4).

    Returns:
        ``T⁻¹`` (..., 4, 4).
    """
    e = entries(T)
    rt = [e[0], e[4], e[8], e[1], e[5], e[9], e[2], e[6], e[10]]
    px, py, pz = e[3], e[7], e[11]
    p = [
        -(rt[0] * px + rt[1] * py + rt[2] * pz),
        -(rt[3] * px + rt[4] * py + rt[5] * pz),
        -(rt[6] * px + rt[7] * py + rt[8] * pz),
    ]
    return se3_from_entries(rt, p)


def _r_and_phat_r(T: Tensor) -> List[List[Tensor]]:
    """Entries of R and of p^ R (column j of p^ R is p × R[:, j])."""
    e = entries(T)
    r = [e[0], e[1], e[2], e[4], e[5], e[6], e[8], e[9], e[10]]
    px, py, pz = e[3], e[7], e[11]
    cols = [cross3([px, py, pz], [r[j], r[3 + j], r[6 + j]]) for j in range(3)]
    c0, c1, c2 = cols[0], cols[1], cols[2]
    pr = [c0[0], c1[0], c2[0], c0[1], c1[1], c2[1], c0[2], c1[2], c2[2]]  # entry (i, j) = cols[j][i]
    return [r, pr]


def se3_adjoint(T: Tensor) -> Tensor:
    """``Ad_T = [[R, 0], [p^ R, R]]`` (..., 6, 6): ``Ad_T ξ = (T ξ^ T⁻¹)ᵛ`` (seed 003, App. A).

    Args:
        T: poses (..., 4, 4).

    Returns:
        ``Ad_T`` (..., 6, 6).
    """
    r, pr = _r_and_phat_r(T)
    return blocks6(r, pr, r, False)


def se3_coadjoint(T: Tensor) -> Tensor:
    """``Ad_T⁻ᵀ = [[R, p^ R], [0, R]]`` (..., 6, 6): maps wrenches [moment; force] from frame T.

    ``⟨Ad_T⁻ᵀ w, Ad_T ξ⟩ = ⟨w, ξ⟩``; a body wrench w_b acting at T is ``Ad_T⁻ᵀ w_b`` in the base frame.

    Args:
        T: poses (..., 4, 4).

    Returns:
        ``Ad_T⁻ᵀ`` (..., 6, 6).
    """
    r, pr = _r_and_phat_r(T)
    return blocks6(r, pr, r, True)


def se3_ad(xi: Tensor) -> Tensor:
    """``ad_ξ = [[ω^, 0], [v^, ω^]]`` (..., 6, 6): ``ad_ξ η = [ξ, η]`` (seed 003, App. A).

    Args:
        xi: twist ξ = [ω; v] (..., 6), angular part first.

    Returns:
        ``ad_ξ`` (..., 6, 6).
    """
    w = so3_hat_entries(xi[..., :3])
    return blocks6(w, so3_hat_entries(xi[..., 3:]), w, False)


def se3_coad(xi: Tensor) -> Tensor:
    """``ad*_ξ = -ad_ξᵀ = [[ω^, v^], [0, ω^]]`` (..., 6, 6), the coadjoint action on wrenches.

    Coadjoint representation (``⟨ad*_ξ w, η⟩ = -⟨w, ad_ξ η⟩``), the sign of the Cosserat
    equilibrium written as ``Λ' = ad*_ξ Λ - F`` (Renda et al.'s convention); ``se3_ad(ξ).mT`` is the
    other common one.

    Args:
        xi: twist ξ = [ω; v] (..., 6), angular part first.

    Returns:
        ``ad*_ξ`` (..., 6, 6).
    """
    w = so3_hat_entries(xi[..., :3])
    return blocks6(w, so3_hat_entries(xi[..., 3:]), w, True)
