"""What the compiled (numba) Cosserat kernels share: numba's decorator (:mod:`flexlearn.optional_numba`) and the
element strains in scalars (:func:`element_strain`, the expressions of
:func:`flexlearn.physics.cosserat.strains.strains`, tested equal to them in tests/physics/cosserat/test_strains.py),
with the geodesic mid frame's ``A(f)``, ``J`` and ``Jᵀ n`` (:func:`geodesic_apply`, :func:`geodesic_jacobian`,
:func:`geodesic_pullback`).
The strain model and curvature measure are passed as ``strain_code`` (:func:`model_code`).
Used by :mod:`flexlearn.physics.cosserat.compiled.lgvi` (the step loop) and
:mod:`flexlearn.physics.cosserat.compiled.implicit` (the force filter of the implicit step)."""

from __future__ import annotations

import numpy as np

from flexlearn.optional_numba import HAVE_NUMBA, njit

__all__ = [
    "HAVE_NUMBA",
    "LOG_CURVATURE",
    "STRAIN_CODES",
    "element_strain",
    "geodesic_apply",
    "geodesic_factor",
    "geodesic_jacobian",
    "geodesic_pullback",
    "log_curvature_apply",
    "log_curvature_factors",
    "model_code",
    "njit",
]

STRAIN_CODES = {"nodes": 0, "midpoint": 1, "geodesic": 2}
"""The kernels' ``strain_code`` of each strain model of :class:`~flexlearn.physics.cosserat.rod.CosseratRod`."""

LOG_CURVATURE = 4
"""Added to ``strain_code`` for the log-map curvature (``curvature='log'``); ``strain_code & 3`` is the strain model."""


def model_code(strain: str, curvature: str) -> int:
    """The kernels' ``strain_code`` of a rod's strain model and curvature measure.

    Args:
        strain: ``'nodes'``, ``'midpoint'`` or ``'geodesic'``.
        curvature: ``'cayley'`` or ``'log'``.

    Returns:
        :data:`STRAIN_CODES` of ``strain``, plus :data:`LOG_CURVATURE` for ``'log'``.
    """
    return STRAIN_CODES[strain] + (LOG_CURVATURE if curvature == "log" else 0)


@njit(cache=True, inline="always", error_model="numpy")
def log_curvature_factors(f0, f1, f2):
    """``(α, α'/t)`` of :func:`flexlearn.physics.cosserat.strains.log_curvature` (ψ = α 2 f, ∂ψ/∂(2f) = α I +
    (α'/t) f fᵀ, t = |f|; series below t = 1e-3).

    Args:
        f0: Cayley coordinate f_x [-].
        f1: f_y [-].
        f2: f_z [-].

    Returns:
        The two scalars.
    """
    t2 = f0 * f0 + f1 * f1 + f2 * f2
    t = np.sqrt(t2)
    if t < 1e-3:
        return 1.0 - t2 / 3.0 + t2 * t2 / 5.0, -2.0 / 3.0 + 0.8 * t2
    at = np.arctan(t)
    return at / t, (t / (1.0 + t2) - at) / (t2 * t)


@njit(cache=True, inline="always", error_model="numpy")
def log_curvature_apply(f0, f1, f2, x0, x1, x2):
    """``P x`` with P = ∂ψ/∂(2f) = α I + (α'/t) f fᵀ of the log curvature (:func:`log_curvature_factors`).

    Args:
        f0: Cayley coordinate f_x [-].
        f1: f_y [-].
        f2: f_z [-].
        x0: x_x, the vector P acts on.
        x1: x_y.
        x2: x_z.

    Returns:
        The three components of P x.
    """
    alpha, slope = log_curvature_factors(f0, f1, f2)
    fx = slope * (f0 * x0 + f1 * x1 + f2 * x2)
    return alpha * x0 + fx * f0, alpha * x1 + fx * f1, alpha * x2 + fx * f2


@njit(cache=True, inline="always", error_model="numpy")
def geodesic_factor(f):
    """``(s, c, dc/ds)`` of ``A(f) = I + c(s) (s I − f fᵀ)`` at ``s = |f|²`` (scalar
    :func:`flexlearn.physics.cosserat.strains.geodesic_scale`).

    Args:
        f: Cayley coordinates f = cay⁻¹(Q) of the element, a 3-tuple [-].

    Returns:
        The three scalars.
    """
    s = f[0] * f[0] + f[1] * f[1] + f[2] * f[2]
    root = np.sqrt(1.0 + s)
    c = 1.0 / (1.0 + root)
    return s, c, -0.5 * c * c / root


@njit(cache=True, inline="always", error_model="numpy")
def geodesic_apply(f, v):
    """``A(f) v = v + c (s v − f (f·v))`` (scalar :func:`flexlearn.physics.cosserat.strains.geodesic_apply`).

    Args:
        f: Cayley coordinates of the element, a 3-tuple [-].
        v: The vector in the linear-mean frame, a 3-tuple.

    Returns:
        ``A(f) v``, a 3-tuple.
    """
    s, c, _ = geodesic_factor(f)
    fv = f[0] * v[0] + f[1] * v[1] + f[2] * v[2]
    return v[0] + c * (s * v[0] - f[0] * fv), v[1] + c * (s * v[1] - f[1] * fv), v[2] + c * (s * v[2] - f[2] * fv)


@njit(cache=True, inline="always", error_model="numpy")
def geodesic_jacobian(f, g):
    """``J = ∂(A(f) g)/∂f`` as three row 3-tuples (scalar
    :func:`flexlearn.physics.cosserat.strains.geodesic_jacobian`).

    Args:
        f: Cayley coordinates of the element, a 3-tuple [-].
        g: The linear-mean strain vector ``½ (x_L + x_R) / l``, a 3-tuple.

    Returns:
        ``(J[0], J[1], J[2])``, each a 3-tuple.
    """
    s, c, dc = geodesic_factor(f)
    fg = f[0] * g[0] + f[1] * g[1] + f[2] * g[2]
    k0, k1, k2 = 2.0 * dc * (s * g[0] - f[0] * fg), 2.0 * dc * (s * g[1] - f[1] * fg), 2.0 * dc * (s * g[2] - f[2] * fg)
    return (
        (k0 * f[0] + c * (g[0] * f[0] - fg), k0 * f[1] + c * (2.0 * g[0] * f[1] - f[0] * g[1]),
         k0 * f[2] + c * (2.0 * g[0] * f[2] - f[0] * g[2])),
        (k1 * f[0] + c * (2.0 * g[1] * f[0] - f[1] * g[0]), k1 * f[1] + c * (g[1] * f[1] - fg),
         k1 * f[2] + c * (2.0 * g[1] * f[2] - f[1] * g[2])),
        (k2 * f[0] + c * (2.0 * g[2] * f[0] - f[2] * g[0]), k2 * f[1] + c * (2.0 * g[2] * f[1] - f[2] * g[1]),
         k2 * f[2] + c * (g[2] * f[2] - fg)),
    )  # fmt: skip


@njit(cache=True, inline="always", error_model="numpy")
def geodesic_pullback(f, g, n):
    """``Jᵀ n`` of :func:`geodesic_jacobian` (scalar :func:`flexlearn.physics.cosserat.strains.geodesic_pullback`).

    Args:
        f: Cayley coordinates of the element, a 3-tuple [-].
        g: The linear-mean strain vector ``½ (x_L + x_R) / l``, a 3-tuple.
        n: The stress conjugate to ``A(f) g`` [N], a 3-tuple.

    Returns:
        ``Jᵀ n`` [N], a 3-tuple.
    """
    j0, j1, j2 = geodesic_jacobian(f, g)
    return (
        j0[0] * n[0] + j1[0] * n[1] + j2[0] * n[2],
        j0[1] * n[0] + j1[1] * n[1] + j2[1] * n[2],
        j0[2] * n[0] + j1[2] * n[1] + j2[2] * n[2],
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
    strain = strain_code & 3
    if strain > 0:
        gL0, gL1, gL2 = 0.5 * (xL0 + xR0) * il, 0.5 * (xL1 + xR1) * il, 0.5 * (xL2 + xR2) * il
        if strain == 2:
            gL0, gL1, gL2 = geodesic_apply((f0, f1, f2), (gL0, gL1, gL2))
        gL2 -= 1.0
        gR0, gR1, gR2 = gL0, gL1, gL2
    else:
        gL0, gL1, gL2 = xL0 * il, xL1 * il, xL2 * il - 1.0
        gR0, gR1, gR2 = xR0 * il, xR1 * il, xR2 * il - 1.0
    return xL0, xL1, xL2, xR0, xR1, xR2, gL0, gL1, gL2, gR0, gR1, gR2, f0, f1, f2, tr, il
