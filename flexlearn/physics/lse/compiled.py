"""Compiled (numba) linear-strain-element kernels: residual and exact tangent of all elements in one call each.

The same discrete equations as :func:`flexlearn.physics.lse.fused.element_residual` and
:func:`~flexlearn.physics.lse.fused.element_tangent_fused` (seed 003, eqs. (9), (11), Sec. V-A/V-D; tested
equal to round-off in tests/physics/lse/test_lse_compiled.py), written element by element in scalar code on
float64 numpy arrays, so that one call replaces the few hundred small tensor ops of the torch kernels.
Used by `CPRModel` when ``kernels == "numba"`` and nothing needs gradients (see
:meth:`AssemblyMixin._residual`); ``HAVE_NUMBA`` is False when numba cannot be imported, and the model then
stays on the torch kernels.

Shapes: elements flattened to E: poses ga, gb (E, 4, 4), β, K-diagonal, ξ₀ (E, 6), h (E,). The relative
rotation of an element must stay below π.
"""
from __future__ import annotations

import numpy as np

from flexlearn.physics.lse.fused import _GL_NODES, _GL_WEIGHTS, _SERIES, _THRESHOLDS

try:  # numba is a core dependency; the torch kernels remain the fallback
    from numba import njit
    HAVE_NUMBA = True
except Exception:  # pragma: no cover - exercised only without numba
    HAVE_NUMBA = False

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f

__all__ = ["HAVE_NUMBA", "element_residual_nb", "element_tangent_nb"]

_SER = np.ascontiguousarray(_SERIES)
_THR = np.ascontiguousarray(_THRESHOLDS)
_GT = 0.5 * (_GL_NODES + 1.0)                   # Gauss–Legendre nodes on [0, 1]
_GTW = 0.25 * (_GL_NODES + 1.0) * _GL_WEIGHTS   # t · w on [0, 1]


@njit(cache=True)
def _coefficients(t2):
    """[A, B, C, E, F, D] of θ² (see :func:`flexlearn.physics.lse.fused.coefficients`)."""
    out = np.empty(6)
    th = np.sqrt(t2)
    s, c = 0.0, 1.0
    if t2 >= _THR[0]:  # the smallest threshold: some closed form is used
        s, c = np.sin(th), np.cos(th)
    for i in range(6):
        if t2 < _THR[i]:
            acc = 0.0
            pw = 1.0
            for j in range(_SER.shape[0]):
                acc += pw * _SER[j, i]
                pw *= t2
            out[i] = acc
        else:
            if i == 0:
                out[i] = s / th
            elif i == 1:
                out[i] = (1.0 - c) / t2
            elif i == 2:
                out[i] = (th - s) / (t2 * th)
            elif i == 3:
                out[i] = (t2 + 2.0 * c - 2.0) / (2.0 * t2 * t2)
            elif i == 4:
                out[i] = (2.0 * th - 3.0 * s + th * c) / (2.0 * t2 * t2 * th)
            else:
                out[i] = (1.0 - th * s / (2.0 * (1.0 - c))) / t2
    return out


@njit(cache=True)
def _hat(v):
    m = np.zeros((3, 3))
    m[0, 1], m[0, 2] = -v[2], v[1]
    m[1, 0], m[1, 2] = v[2], -v[0]
    m[2, 0], m[2, 1] = -v[1], v[0]
    return m


@njit(cache=True)
def _cross(a, b):
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


@njit(cache=True)
def _mm(a, b):
    n, k = a.shape
    m = b.shape[1]
    out = np.zeros((n, m))
    for i in range(n):
        for p in range(k):
            aip = a[i, p]
            if aip != 0.0:
                for j in range(m):
                    out[i, j] += aip * b[p, j]
    return out


@njit(cache=True)
def _mv(a, v):
    n, k = a.shape
    out = np.zeros(n)
    for i in range(n):
        acc = 0.0
        for p in range(k):
            acc += a[i, p] * v[p]
        out[i] = acc
    return out


@njit(cache=True)
def _blocks(a, b, c, d):
    m = np.empty((6, 6))
    for i in range(3):
        for j in range(3):
            m[i, j] = a[i, j]
            m[i, j + 3] = b[i, j]
            m[i + 3, j] = c[i, j]
            m[i + 3, j + 3] = d[i, j]
    return m


@njit(cache=True, inline="always")
def _put(dst, r0, c0, src, scale, add):
    """dst[r0:, c0:] (+)= scale · src, explicit loops (numba slice updates allocate)."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            if add:
                dst[r0 + i, c0 + j] += scale * src[i, j]
            else:
                dst[r0 + i, c0 + j] = scale * src[i, j]


@njit(cache=True)
def _ad(x):
    """ad_ξ = [[ω^, 0], [v^, ω^]]."""
    w = _hat(x[:3])
    return _blocks(w, np.zeros((3, 3)), _hat(x[3:]), w)


@njit(cache=True)
def _wbar(w):
    """W̃(w) = [[m^, f^], [f^, 0]] with ad_aᵀ w = W̃(w) a."""
    f = _hat(w[3:])
    return _blocks(_hat(w[:3]), f, f, np.zeros((3, 3)))


@njit(cache=True)
def _q_parts(phi, rho, t2, co):
    """Barfoot's Q(φ, ρ) = hat(k) + S: returns (k (3,), S (3, 3))."""
    c, e, f = co[2], co[3], co[4]
    m = phi[0] * rho[0] + phi[1] * rho[1] + phi[2] * rho[2]
    kv = 0.5 * rho + ((e - c) * m) * phi + e * _cross(phi, _cross(phi, rho))
    s = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            s[i, j] = c * (rho[i] * phi[j] + rho[j] * phi[i]) - 2.0 * f * m * phi[i] * phi[j]
        s[i, i] += 2.0 * m * (f * t2 - c)
    return kv, s


@njit(cache=True)
def _element(ga, gb, beta, h, k, xi0):
    """One element's residual pieces (see :func:`flexlearn.physics.lse.fused.element_residual`)."""
    ra_t = ga[:3, :3].T.copy()
    rr = _mm(ra_t, gb[:3, :3].copy())
    pr = _mv(ra_t, gb[:3, 3] - ga[:3, 3])
    v = 0.5 * np.array([rr[2, 1] - rr[1, 2], rr[0, 2] - rr[2, 0], rr[1, 0] - rr[0, 1]])
    cth = 0.5 * (rr[0, 0] + rr[1, 1] + rr[2, 2] - 1.0)
    s2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2]
    t2 = 0.0
    if s2 > 0:
        theta = np.arctan2(np.sqrt(s2), cth)
        t2 = theta * theta
    co = _coefficients(t2)
    phi = v / co[0]
    d = co[5]
    pxr = _cross(phi, pr)
    rho = pr - 0.5 * pxr + d * _cross(phi, pxr)
    omega = np.concatenate((phi, rho))
    c = h ** 3 / 12.0
    amat = -c * _ad(beta)
    for i in range(6):
        amat[i, i] += h
    ainv = np.linalg.inv(amat)
    xibar = _mv(ainv, omega)
    mu = _mv(ainv.T.copy(), h * k * (xibar - xi0))
    ph = _hat(phi)
    jr3 = np.eye(3) + 0.5 * ph + d * _mm(ph, ph)
    kv, s = _q_parts(phi, rho, t2, co)
    q_r = s - _hat(kv)
    jri = _blocks(jr3, np.zeros((3, 3)), -_mm(_mm(jr3, q_r), jr3), jr3)
    jli = jri - _ad(omega)
    r_b = _mv(jri.T.copy(), mu)
    r_a = -_mv(jli.T.copy(), mu)
    r_beta = c * (k * beta - _mv(_wbar(mu), xibar))
    return rr, pr, phi, rho, t2, ainv, xibar, mu, jri, jli, r_a, r_b, r_beta


@njit(cache=True)
def element_residual_nb(ga, gb, beta, h, k, xi0):
    """Element residuals ``[r_a; r_b; r_β]`` (E, 18) of all elements (seed eq. (11), Sec. V-A)."""
    n_el = ga.shape[0]
    out = np.empty((n_el, 18))
    for e in range(n_el):
        parts = _element(ga[e], gb[e], beta[e], h[e], k[e], xi0[e])
        out[e, :6] = parts[10]
        out[e, 6:12] = parts[11]
        out[e, 12:] = parts[12]
    return out


@njit(cache=True, inline="always")
def _cross_into(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@njit(cache=True, inline="always")
def _hat_into(v, out):
    out[0, 0], out[0, 1], out[0, 2] = 0.0, -v[2], v[1]
    out[1, 0], out[1, 1], out[1, 2] = v[2], 0.0, -v[0]
    out[2, 0], out[2, 1], out[2, 2] = -v[1], v[0], 0.0


@njit(cache=True, inline="always")
def _mm3_acc(a, b, w, out):
    """out += w · a b (3 × 3)."""
    for i in range(3):
        for j in range(3):
            out[i, j] += w * (a[i, 0] * b[0, j] + a[i, 1] * b[1, j] + a[i, 2] * b[2, j])


@njit(cache=True)
def _quadrature_q(phi, rho, t2, r_b):
    """``∫₀¹ t W̃(Ad_{exp(-tΩ)}ᵀ r_b) J_l(tΩ) dt`` (6, 6), 8-point Gauss–Legendre (no allocation per node)."""
    top = np.zeros((3, 3))
    nfj_sum = np.zeros((3, 3))
    u = _cross(phi, rho)
    uu = _cross(phi, u)
    m, f = r_b[:3], r_b[3:]
    ph = _hat(phi)
    ph2 = _mm(ph, ph)
    pr = phi[0] * rho[0] + phi[1] * rho[1] + phi[2] * rho[2]
    pp = phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2]
    p_t = np.empty(3)
    x = np.empty(3)
    px = np.empty(3)
    ppx = np.empty(3)
    nu = np.empty(3)
    pxr = _cross(phi, rho)
    pppr = _cross(phi, pxr)
    kv = np.empty(3)
    jl = np.empty((3, 3))
    ql = np.empty((3, 3))
    nf = np.empty((3, 3))
    nm = np.empty((3, 3))
    for i in range(_GT.shape[0]):
        t = _GT[i]
        w = _GTW[i]
        t2i = t2 * t * t
        co = _coefficients(t2i)
        a, b, c = co[0], co[1], co[2]
        for j in range(3):
            p_t[j] = -t * rho[j] + (b * t * t) * u[j] - (c * t ** 3) * uu[j]
        _cross_into(p_t, f, x)
        for j in range(3):
            x[j] = m[j] - x[j]
        # R_tᵀ y = y + A t φ×y + B t² φ×(φ×y) for y = x (→ ν_m) and y = f (→ ν_f)
        _cross_into(phi, x, px)
        _cross_into(phi, px, ppx)
        for j in range(3):
            nu[j] = x[j] + (a * t) * px[j] + (b * t * t) * ppx[j]
        _hat_into(nu, nm)
        _cross_into(phi, f, px)
        _cross_into(phi, px, ppx)
        for j in range(3):
            nu[j] = f[j] + (a * t) * px[j] + (b * t * t) * ppx[j]
        _hat_into(nu, nf)
        for j in range(3):
            for l in range(3):
                jl[j, l] = (b * t) * ph[j, l] + (c * t * t) * ph2[j, l]
            jl[j, j] += 1.0
        # Barfoot's Q(tφ, tρ) = hat(k) + S (as _q_parts, with the scalings by t written out)
        cq, eq, fq = co[2], co[3], co[4]
        mq = t * t * pr
        for j in range(3):
            kv[j] = 0.5 * t * rho[j] + ((eq - cq) * mq * t) * phi[j] + (eq * t ** 3) * pppr[j]
        _hat_into(kv, ql)
        for j in range(3):
            for l in range(3):
                ql[j, l] += (cq * t * t) * (rho[j] * phi[l] + rho[l] * phi[j]) \
                    - (2.0 * fq * mq * t * t) * phi[j] * phi[l]
            ql[j, j] += 2.0 * mq * (fq * t2i - cq)
        _mm3_acc(nm, jl, w, top)
        _mm3_acc(nf, ql, w, top)
        _mm3_acc(nf, jl, w, nfj_sum)
    return _blocks(top, nfj_sum, nfj_sum, np.zeros((3, 3)))


@njit(cache=True)
def element_tangent_nb(ga, gb, beta, h, k, xi0):
    """Exact element tangents H (E, 18, 18) = ∂[r_a; r_b; r_β]/∂(δζ_a, δζ_b, δβ) (seed Sec. V-D; see
    :func:`flexlearn.physics.lse.fused.element_tangent_fused`)."""
    n_el = ga.shape[0]
    out = np.zeros((n_el, 18, 18))
    for e in range(n_el):
        rr, pr, phi, rho, t2, ainv, xibar, mu, jri, jli, r_a, r_b, r_beta = _element(
            ga[e], gb[e], beta[e], h[e], k[e], xi0[e])
        he = h[e]
        c = he ** 3 / 12.0
        ke = k[e]
        q = _quadrature_q(phi, rho, t2, r_b)
        ainv_t = ainv.T.copy()
        ad_xi = _ad(xibar)
        cat = np.empty((6, 18))
        _put(cat, 0, 0, jli, -1.0, False)
        _put(cat, 0, 6, jri, 1.0, False)
        _put(cat, 0, 12, ad_xi, -c, False)
        b = _mm(ainv, cat)
        wmu = _wbar(mu)
        kb = b.copy()
        for i in range(6):
            for j in range(18):
                kb[i, j] *= he * ke[i]
        d_mu = _mm(ainv_t, kb)
        _put(d_mu, 0, 12, _mm(ainv_t, wmu), c, True)
        inner = d_mu.copy()
        _put(inner, 0, 0, _mm(q, jli), -1.0, True)
        _put(inner, 0, 6, _mm(q, jri), 1.0, True)
        d_rb = _mm(jri.T.copy(), inner)
        x = _mm(_hat(pr), rr)
        z3 = np.zeros((3, 3))
        ad_rel = _blocks(rr, z3, x, rr)
        ad_neg_t = _blocks(rr, x, z3, rr)
        cat2 = np.zeros((6, 18))
        for i in range(6):
            cat2[i, i] = -1.0
        _put(cat2, 0, 6, ad_rel, 1.0, False)
        d_ra = _mm(_wbar(r_a), cat2)
        d_ra2 = _mm(ad_neg_t, d_rb)
        d_rbeta = _mm(ad_xi.T.copy(), d_mu)
        d_rbeta2 = _mm(wmu, b)
        oe = out[e]
        for i in range(6):
            for j in range(18):
                oe[i, j] = -d_ra[i, j] - d_ra2[i, j]
                oe[6 + i, j] = d_rb[i, j]
                oe[12 + i, j] = -c * (d_rbeta[i, j] + d_rbeta2[i, j])
            oe[12 + i, 12 + i] += c * ke[i]
    return out
