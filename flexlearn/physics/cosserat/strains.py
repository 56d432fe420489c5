"""The element strains of the discrete Cosserat rod (seed 001, eqs. (5)–(7)), computed in one place.

For element i between nodes i and i+1 (rest length l_i, chord ``e_i = p_{i+1} − p_i``):

    x_{L,i} = R_iᵀ e_i,   x_{R,i} = R_{i+1}ᵀ e_i                                   (chord in the node frames)
    Γ_i = ½ (x_{L,i} + x_{R,i}) / l_i − E3                  (``midpoint``: shear/extension at the mid frame)
    Γ_{i,L} = x_{L,i} / l_i − E3,  Γ_{i,R} = x_{R,i} / l_i − E3   (seed eq. (6), ``strain='nodes'``)
    Q_i = R_iᵀ R_{i+1},   f_i = cay⁻¹(Q_i),   ψ_i = 2 f_i,   κ_i = ψ_i / l_i        (bending/torsion)

(``cay`` of :mod:`flexlearn.lie.cayley`; the reasons for the mid frame are in :mod:`.rod`.) Used by
:func:`~flexlearn.physics.cosserat.elastic.internal_forces`,
:func:`~flexlearn.physics.cosserat.elastic.elastic_energy` and
:class:`~flexlearn.physics.cosserat.damping.Damping`; the numba kernel
(:func:`flexlearn.physics.cosserat.compiled.common.element_strain`) evaluates the same expressions per element and is
tested equal to :func:`strains` to round-off (tests/physics/cosserat/test_strains.py).

Shapes: R (B, N+1, 3, 3) body → world, p (B, N+1, 3) [m], l (B, N) [m], E3 (3,); every strain (B, N, 3).
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor

from flexlearn.lie import so3_cayley_inv

__all__ = ["Strains", "strains"]


class Strains(NamedTuple):
    """Element strains (B, N, 3) and relative rotations (B, N, 3, 3) of :func:`strains`."""

    xL: Tensor  # R_iᵀ e_i [m]
    xR: Tensor  # R_{i+1}ᵀ e_i [m]
    gL: Tensor  # Γ seen from node i [-]: the mid-frame Γ_i (midpoint) or Γ_{i,L} (nodes)
    gR: Tensor  # Γ seen from node i+1 [-]: the same tensor as gL (midpoint) or Γ_{i,R} (nodes)
    f: Tensor  # cay⁻¹(Q_i) [-]; ψ_i = 2 f, κ_i = 2 f / l_i [1/m]
    Q: Tensor  # R_iᵀ R_{i+1} (B, N, 3, 3)


def strains(R: Tensor, p: Tensor, l: Tensor, e3: Tensor, midpoint: bool) -> Strains:
    """Strains of every element (module docstring): ``midpoint`` selects Γ at the mid frame (else seed eq. (6)'s
    node strains); l (B, N) are the rest lengths [m], e3 the body tangent E3.

    Args:
        R: Node rotations (body → world), shape (B, N+1, 3, 3).
        p: Node positions [m], shape (B, N+1, 3).
        l: Element rest lengths [m], shape (B, N).
        e3: Body tangent E3, shape (3,).
        midpoint: True for Γ at the mid frame, False for the node strains of seed eq. (6).

    Returns:
        The :class:`Strains`.
    """
    RT = R.transpose(-1, -2)
    e = p[:, 1:] - p[:, :-1]  # (B, N, 3)
    ll = l.unsqueeze(-1)
    xL = (RT[:, :-1] @ e.unsqueeze(-1)).squeeze(-1)
    xR = (RT[:, 1:] @ e.unsqueeze(-1)).squeeze(-1)
    if midpoint:
        gL = 0.5 * (xL + xR) / ll - e3
        gR = gL
    else:
        gL = xL / ll - e3
        gR = xR / ll - e3
    Q = RT[:, :-1] @ R[:, 1:]
    return Strains(xL, xR, gL, gR, so3_cayley_inv(Q), Q)
