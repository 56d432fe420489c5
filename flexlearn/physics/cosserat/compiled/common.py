"""What the compiled (numba) Cosserat kernels share: numba's decorator (:mod:`flexlearn.optional_numba`) and the
element strains in scalars (:func:`element_strain`, the expressions of
:func:`flexlearn.physics.cosserat.strains.strains`, tested equal to them in tests/physics/cosserat/test_strains.py).
Used by :mod:`flexlearn.physics.cosserat.compiled.lgvi` (the step loop) and
:mod:`flexlearn.physics.cosserat.compiled.implicit` (the force filter of the implicit step)."""

from __future__ import annotations

from flexlearn.optional_numba import HAVE_NUMBA, njit

__all__ = ["HAVE_NUMBA", "element_strain", "njit"]


@njit(cache=True, inline="always", error_model="numpy")
def element_strain(R, p, l, midpoint, b, i):
    """Strains of element i of rod b: the expressions of :func:`flexlearn.physics.cosserat.strains.strains`
    in scalars (tested equal to round-off). Returns ``(xL, xR, Γ_L, Γ_R, f = cay⁻¹(Q))`` as 15 scalars
    (3 each), then ``tr Q`` and ``1/l_i``.

    Args:
        R: Node rotations, shape (B, n, 3, 3).
        p: Node positions [m], shape (B, n, 3).
        l: Element rest lengths [m], shape (B, N).
        midpoint: True for the mid-frame shear strain, False for the node strains (seed 001, eq. (6)).
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
    if midpoint:
        gL0 = 0.5 * (xL0 + xR0) * il
        gL1 = 0.5 * (xL1 + xR1) * il
        gL2 = 0.5 * (xL2 + xR2) * il - 1.0
        gR0, gR1, gR2 = gL0, gL1, gL2
    else:
        gL0, gL1, gL2 = xL0 * il, xL1 * il, xL2 * il - 1.0
        gR0, gR1, gR2 = xR0 * il, xR1 * il, xR2 * il - 1.0
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
    return xL0, xL1, xL2, xR0, xR1, xR2, gL0, gL1, gL2, gR0, gR1, gR2, f0, f1, f2, tr, il
