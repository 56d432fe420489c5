"""What the compiled (numba) Cosserat kernels share: numba's decorator (:mod:`flexlearn.optional_numba`) and the
element strains in scalars (:func:`element_strain`, the expressions of
:func:`flexlearn.physics.cosserat.strains.strains`, tested equal to them in tests/physics/cosserat/test_strains.py),
with the geodesic mid frame's ``A(f)`` and ``Jᵀ n`` (:func:`geodesic_apply`, :func:`geodesic_pullback`).
The strain model is passed as ``strain_code`` (:data:`STRAIN_CODES`).
Used by :mod:`flexlearn.physics.cosserat.compiled.lgvi` (the step loop) and
:mod:`flexlearn.physics.cosserat.compiled.implicit` (the force filter of the implicit step)."""

from __future__ import annotations

import numpy as np

from flexlearn.optional_numba import HAVE_NUMBA, njit

__all__ = [
    "HAVE_NUMBA",
    "STRAIN_CODES",
    "element_strain",
    "geodesic_apply",
    "geodesic_factor",
    "geodesic_pullback",
    "njit",
]

STRAIN_CODES = {"nodes": 0, "midpoint": 1, "geodesic": 2}
"""The kernels' ``strain_code`` of each strain model of :class:`~flexlearn.physics.cosserat.rod.CosseratRod`."""


@njit(cache=True, inline="always", error_model="numpy")
def geodesic_factor(f0, f1, f2):
    """``(s, c, dc/ds)`` of ``A(f) = I + c(s) (s I − f fᵀ)`` at ``s = |f|²`` (scalar
    :func:`flexlearn.physics.cosserat.strains.geodesic_scale`)."""
    s = f0 * f0 + f1 * f1 + f2 * f2
    root = np.sqrt(1.0 + s)
    c = 1.0 / (1.0 + root)
    return s, c, -0.5 * c * c / root


@njit(cache=True, inline="always", error_model="numpy")
def geodesic_apply(f0, f1, f2, v0, v1, v2):
    """``A(f) v = v + c (s v − f (f·v))`` (scalar :func:`flexlearn.physics.cosserat.strains.geodesic_apply`)."""
    s, c, _ = geodesic_factor(f0, f1, f2)
    fv = f0 * v0 + f1 * v1 + f2 * v2
    return v0 + c * (s * v0 - f0 * fv), v1 + c * (s * v1 - f1 * fv), v2 + c * (s * v2 - f2 * fv)


@njit(cache=True, inline="always", error_model="numpy")
def geodesic_pullback(f0, f1, f2, g0, g1, g2, n0, n1, n2):
    """``Jᵀ n``, ``J = ∂(A(f) g)/∂f`` (scalar :func:`flexlearn.physics.cosserat.strains.geodesic_pullback`)."""
    s, c, dc = geodesic_factor(f0, f1, f2)
    fg, gn, fn = f0 * g0 + f1 * g1 + f2 * g2, g0 * n0 + g1 * n1 + g2 * n2, f0 * n0 + f1 * n1 + f2 * n2
    k = 2.0 * dc * (s * gn - fg * fn)
    return (
        k * f0 + c * (2.0 * gn * f0 - fg * n0 - fn * g0),
        k * f1 + c * (2.0 * gn * f1 - fg * n1 - fn * g1),
        k * f2 + c * (2.0 * gn * f2 - fg * n2 - fn * g2),
    )


@njit(cache=True, inline="always", error_model="numpy")
def element_strain(R, p, l, strain_code, b, i):
    """Strains of element i of rod b: the expressions of :func:`flexlearn.physics.cosserat.strains.strains`
    in scalars (tested equal to round-off). Returns ``(xL, xR, Γ_L, Γ_R, f = cay⁻¹(Q))`` as 15 scalars
    (3 each), then ``tr Q`` and ``1/l_i``.

    Args:
        R: Node rotations, shape (B, n, 3, 3).
        p: Node positions [m], shape (B, n, 3).
        l: Element rest lengths [m], shape (B, N).
        strain_code: 0 for the node strains (seed 001, eq. (6)), 1 for the mid-frame shear strain, 2 for the
            geodesic mid frame's (:data:`STRAIN_CODES`).
        b: Rod index in the batch.
        i: Element index.

    Returns:
        The 17 scalars described above.
    """
    e0 = p[b, i + 1, 0] - p[b, i, 0]
    e1 = p[b, i + 1, 1] - p[b, i, 1]
    e2 = p[b, i + 1, 2] - p[b, i, 2]
    # xL = R_iᵀ e, xR = R_{i+1}ᵀ e
    xL0 = R[b, i, 0, 0] * e0 + R[b, i, 1, 0] * e1 + R[b, i, 2, 0] * e2
    xL1 = R[b, i, 0, 1] * e0 + R[b, i, 1, 1] * e1 + R[b, i, 2, 1] * e2
    xL2 = R[b, i, 0, 2] * e0 + R[b, i, 1, 2] * e1 + R[b, i, 2, 2] * e2
    xR0 = R[b, i + 1, 0, 0] * e0 + R[b, i + 1, 1, 0] * e1 + R[b, i + 1, 2, 0] * e2
    xR1 = R[b, i + 1, 0, 1] * e0 + R[b, i + 1, 1, 1] * e1 + R[b, i + 1, 2, 1] * e2
    xR2 = R[b, i + 1, 0, 2] * e0 + R[b, i + 1, 1, 2] * e1 + R[b, i + 1, 2, 2] * e2
    il = 1.0 / l[b, i]  # reciprocals: divisions dominate the cost of this loop
    # Q = R_iᵀ R_{i+1}; needed: trace and the skew part
    q00 = R[b, i, 0, 0] * R[b, i + 1, 0, 0] + R[b, i, 1, 0] * R[b, i + 1, 1, 0] + R[b, i, 2, 0] * R[b, i + 1, 2, 0]
    q11 = R[b, i, 0, 1] * R[b, i + 1, 0, 1] + R[b, i, 1, 1] * R[b, i + 1, 1, 1] + R[b, i, 2, 1] * R[b, i + 1, 2, 1]
    q22 = R[b, i, 0, 2] * R[b, i + 1, 0, 2] + R[b, i, 1, 2] * R[b, i + 1, 1, 2] + R[b, i, 2, 2] * R[b, i + 1, 2, 2]
    q21 = R[b, i, 0, 2] * R[b, i + 1, 0, 1] + R[b, i, 1, 2] * R[b, i + 1, 1, 1] + R[b, i, 2, 2] * R[b, i + 1, 2, 1]
    q12 = R[b, i, 0, 1] * R[b, i + 1, 0, 2] + R[b, i, 1, 1] * R[b, i + 1, 1, 2] + R[b, i, 2, 1] * R[b, i + 1, 2, 2]
    q02 = R[b, i, 0, 0] * R[b, i + 1, 0, 2] + R[b, i, 1, 0] * R[b, i + 1, 1, 2] + R[b, i, 2, 0] * R[b, i + 1, 2, 2]
    q20 = R[b, i, 0, 2] * R[b, i + 1, 0, 0] + R[b, i, 1, 2] * R[b, i + 1, 1, 0] + R[b, i, 2, 2] * R[b, i + 1, 2, 0]
    q10 = R[b, i, 0, 1] * R[b, i + 1, 0, 0] + R[b, i, 1, 1] * R[b, i + 1, 1, 0] + R[b, i, 2, 1] * R[b, i + 1, 2, 0]
    q01 = R[b, i, 0, 0] * R[b, i + 1, 0, 1] + R[b, i, 1, 0] * R[b, i + 1, 1, 1] + R[b, i, 2, 0] * R[b, i + 1, 2, 1]
    tr = q00 + q11 + q22
    iden = 1.0 / (1.0 + tr)
    f0, f1, f2 = (q21 - q12) * iden, (q02 - q20) * iden, (q10 - q01) * iden  # cay⁻¹(Q)
    if strain_code > 0:
        gL0, gL1, gL2 = 0.5 * (xL0 + xR0) * il, 0.5 * (xL1 + xR1) * il, 0.5 * (xL2 + xR2) * il
        if strain_code == 2:
            gL0, gL1, gL2 = geodesic_apply(f0, f1, f2, gL0, gL1, gL2)
        gL2 -= 1.0
        gR0, gR1, gR2 = gL0, gL1, gL2
    else:
        gL0, gL1, gL2 = xL0 * il, xL1 * il, xL2 * il - 1.0
        gR0, gR1, gR2 = xR0 * il, xR1 * il, xR2 * il - 1.0
    return xL0, xL1, xL2, xR0, xR1, xR2, gL0, gL1, gL2, gR0, gR1, gR2, f0, f1, f2, tr, il
