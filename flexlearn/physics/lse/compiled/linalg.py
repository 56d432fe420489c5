"""Small compiled (numba) building blocks of the LSE kernels: the ``njit`` decorators (plain Python without numba)
and allocation-free 3 × 3 / 6 × 6 / pose products, hat maps, adjoints and copies.

Kernels that only other kernels call are compiled with :func:`njit_inner` (no Python or C wrappers; see the
compile-cost note of :mod:`flexlearn.physics.lse.compiled.newton`). The kernels import these helpers from here;
the forward cache fingerprint of :mod:`flexlearn.physics.lse.compiled.elements` (``CACHE_SOURCES``) covers this
file, so an edit here recompiles every kernel that inlines them.
"""

from __future__ import annotations

import numpy as np

from flexlearn.optional_numba import HAVE_NUMBA, njit  # noqa: F401 - the kernels import njit from here

if HAVE_NUMBA:
    from numba import njit as _numba_njit
    from numba.core.registry import CPUDispatcher

    class KernelOnlyDispatcher(CPUDispatcher):
        """A dispatcher compiled without its CPython wrapper (:func:`njit_inner`): numba would call the missing
        entry point and crash the interpreter, so a call from Python raises instead."""

        def __call__(self, *args, **kwargs):
            name = f"{self.py_func.__module__}.{self.py_func.__qualname__}"
            raise TypeError(
                f"{name} is a compiled kernel that only other compiled kernels call: it has no "
                "Python entry point; use the module's Python-facing function, or run with "
                "NUMBA_DISABLE_JIT=1 to step through it as plain Python"
            )


def _kernel_only(dispatcher):
    """The dispatcher, its Python calls refused (:class:`KernelOnlyDispatcher`); under ``NUMBA_DISABLE_JIT=1``
    numba returns the plain function, which is returned as it is."""
    if isinstance(dispatcher, CPUDispatcher):
        dispatcher.__class__ = KernelOnlyDispatcher
    return dispatcher


def njit_inner(f):
    """``njit(cache=True)`` for a kernel that only kernels call: without the CPython and C wrappers (argument
    unboxing compiled per type, never used); a call from Python raises TypeError. Without numba: ``f``.

    Args:
        f: The Python function to compile.

    Returns:
        The kernel-only dispatcher, or ``f``.
    """
    if not HAVE_NUMBA:
        return f
    return _kernel_only(_numba_njit(cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)(f))


def njit_leaf(f):
    """``njit(cache=True)`` without numba's reference counting (``_nrt=False``), for a kernel that allocates
    nothing, returns no array and calls nothing that returns one (an array it received would never be released);
    nor may it assign an array to a slice (numba needs the runtime for that: use :func:`copy1`/:func:`copy2`).
    Each array view such a kernel takes (``parts[5][r, e]``, ``w33[0]``, ``mu[:3]``) would otherwise cost an
    atomic increment and decrement of the parent's count: with counting, those were ≈ 20 % of the time of a CSG
    pose solve (perf, ``NRT_incref``/``NRT_decref``). The arrays it is given stay owned by its caller. Without
    numba: ``f``.

    Args:
        f: The Python function to compile.

    Returns:
        The compiled dispatcher, or ``f``.
    """
    return _numba_njit(cache=True, _nrt=False)(f) if HAVE_NUMBA else f


def njit_inner_leaf(f):
    """:func:`njit_leaf` without the CPython and C wrappers (as :func:`njit_inner`).

    Args:
        f: The Python function to compile.

    Returns:
        The kernel-only dispatcher, or ``f``.
    """
    if not HAVE_NUMBA:
        return f
    return _kernel_only(_numba_njit(cache=True, _nrt=False, no_cpython_wrapper=True, no_cfunc_wrapper=True)(f))


@njit_inner
def matmul(a, b):
    """The product a b (n, m) of a (n, k) and b (k, m), allocated (zero entries of ``a`` skipped).

    Args:
        a: Left matrix (n, k).
        b: Right matrix (k, m).

    Returns:
        The new array (n, m).
    """
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


@njit_inner
def pose_mul_into(a, b, out):
    """Out = a b for poses (4, 4) (``out`` must not alias ``a`` or ``b``). No allocation.

    Args:
        a: Left pose (4, 4).
        b: Right pose (4, 4).
        out: Output pose (4, 4), written.
    """
    for i in range(3):
        for j in range(4):
            out[i, j] = a[i, 0] * b[0, j] + a[i, 1] * b[1, j] + a[i, 2] * b[2, j] + (a[i, 3] if j == 3 else 0.0)
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0


@njit_inner
def rot_t_mv_into(g, v, out):
    """Out (3,) = Rᵀ v, R = g[:3, :3] of a pose or rotation ``g``; v (3,). No allocation.

    Args:
        g: Pose (4, 4) or rotation (3, 3).
        v: Vector (3,).
        out: Output vector (3,), written.
    """
    for i in range(3):
        out[i] = g[0, i] * v[0] + g[1, i] * v[1] + g[2, i] * v[2]


@njit_inner
def matvec(a, v):
    """The product a v (n,) of a (n, k) and v (k,), allocated.

    Args:
        a: Matrix (n, k).
        v: Vector (k,).

    Returns:
        The new vector (n,).
    """
    n, k = a.shape
    out = np.zeros(n)
    for i in range(n):
        acc = 0.0
        for p in range(k):
            acc += a[i, p] * v[p]
        out[i] = acc
    return out


@njit_inner
def inv6_into(m, out):
    """Inverse of the (6, 6) matrix ``m`` into ``out`` by Gauss–Jordan elimination with partial pivoting
    (``m`` is overwritten; no LAPACK call: ≈ 5× cheaper than ``np.linalg.inv`` at this size). A singular
    matrix (an exactly zero pivot) gives NaN entries.

    Args:
        m: Matrix (6, 6) to invert; destroyed.
        out: Output inverse (6, 6), written.
    """
    for i in range(6):
        for j in range(6):
            out[i, j] = 1.0 if i == j else 0.0
    for col in range(6):
        piv = col
        big = abs(m[col, col])
        for i in range(col + 1, 6):
            if abs(m[i, col]) > big:
                big, piv = abs(m[i, col]), i
        if piv != col:
            for j in range(6):
                m[col, j], m[piv, j] = m[piv, j], m[col, j]
                out[col, j], out[piv, j] = out[piv, j], out[col, j]
        if m[col, col] == 0.0:  # singular: NaN, not numba's ZeroDivisionError (error_model "python")
            for i in range(6):
                for j in range(6):
                    out[i, j] = np.nan
            return
        d = 1.0 / m[col, col]
        for j in range(6):
            m[col, j] *= d
            out[col, j] *= d
        for i in range(6):
            if i != col:
                f = m[i, col]
                if f != 0.0:
                    for j in range(6):
                        m[i, j] -= f * m[col, j]
                        out[i, j] -= f * out[col, j]


@njit_inner
def gemm(a, b, out, sign, add):
    """Out (=|+=) sign · a @ b for 2-D arrays or views (explicit loops: no temporaries).

    Args:
        a: Left matrix (n, k).
        b: Right matrix (k, m).
        out: Output (n, m), written or accumulated into.
        sign: Scalar factor of the product.
        add: Accumulate into ``out`` (True) or overwrite it (False).
    """
    n, k = a.shape
    m = b.shape[1]
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for p in range(k):
                acc += a[i, p] * b[p, j]
            if add:
                out[i, j] += sign * acc
            else:
                out[i, j] = sign * acc


@njit_inner
def gemm6(a, b, out, sign, add, trans=False):
    """Out (=|+=) sign · op(a) @ b, op(a) = a, or aᵀ when ``trans``, with inner dimension 6 (unrolled: ≈ 3× faster
    than :func:`gemm`).

    Args:
        a: Left matrix (n, 6), or (6, n) when ``trans``.
        b: Right matrix (6, m).
        out: Output (n, m), written or accumulated into.
        sign: Scalar factor of the product.
        add: Accumulate into ``out`` (True) or overwrite it (False).
        trans: Use aᵀ instead of a.
    """
    for i in range(a.shape[1] if trans else a.shape[0]):
        if trans:
            a0, a1, a2, a3, a4, a5 = a[0, i], a[1, i], a[2, i], a[3, i], a[4, i], a[5, i]
        else:
            a0, a1, a2, a3, a4, a5 = a[i, 0], a[i, 1], a[i, 2], a[i, 3], a[i, 4], a[i, 5]
        for j in range(b.shape[1]):
            acc = a0 * b[0, j] + a1 * b[1, j] + a2 * b[2, j] + a3 * b[3, j] + a4 * b[4, j] + a5 * b[5, j]
            if add:
                out[i, j] += sign * acc
            else:
                out[i, j] = sign * acc


@njit_inner
def copy1(src, dst):
    """``dst[:] = src`` (1-D) as a loop: an array assigned to a slice links numba's shape-mismatch error (a few
    thousand LLVM instructions of message formatting) into the kernel and every caller.

    Args:
        src: Source (n,).
        dst: Destination (at least n,), written.
    """
    for i in range(src.shape[0]):
        dst[i] = src[i]


@njit_inner
def copy2(src, dst):
    """``dst[:, :] = src`` for 2-D arrays of one shape, as a loop (see :func:`copy1`).

    Args:
        src: Source (n, m).
        dst: Destination (n, m), written.
    """
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


@njit_inner
def cross_into(a, b, out):
    """Out (3,) = a × b for a, b (3,) (``out`` must not alias them). No allocation.

    Args:
        a: Left vector (3,).
        b: Right vector (3,).
        out: Output vector (3,), written.
    """
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@njit_inner
def hat_into(v, out):
    """Out (3, 3) = v^, the skew matrix with v^ u = v × u, of v (3,). No allocation.

    Args:
        v: Vector (3,).
        out: Output skew matrix (3, 3), written.
    """
    out[0, 0], out[0, 1], out[0, 2] = 0.0, -v[2], v[1]
    out[1, 0], out[1, 1], out[1, 2] = v[2], 0.0, -v[0]
    out[2, 0], out[2, 1], out[2, 2] = -v[1], v[0], 0.0


@njit_inner
def ad_into(x, out):
    """ad_ξ = [[ω^, 0], [v^, ω^]] (6, 6) of ξ = [ω; v].

    Args:
        x: Twist ξ = [ω; v] (6,).
        out: Output (6, 6), written.
    """
    out[:3, 3:] = 0.0
    hat_into(x[:3], out[:3, :3])
    hat_into(x[:3], out[3:, 3:])
    hat_into(x[3:], out[3:, :3])


@njit_inner
def wbar_into(w, out):
    """W̃(w) = [[m^, f^], [f^, 0]] (6, 6) with ad_aᵀ w = W̃(w) a, w = [m; f].

    Args:
        w: Wrench [m; f] (6,).
        out: Output (6, 6), written.
    """
    out[3:, 3:] = 0.0
    hat_into(w[:3], out[:3, :3])
    hat_into(w[3:], out[:3, 3:])
    hat_into(w[3:], out[3:, :3])


@njit_inner
def mm3_acc(a, b, w, out):
    """Out += w · a b (3 × 3).

    Args:
        a: Left matrix (3, 3).
        b: Right matrix (3, 3).
        w: Scalar weight.
        out: Accumulator (3, 3), added to.
    """
    for i in range(3):
        for j in range(3):
            out[i, j] += w * (a[i, 0] * b[0, j] + a[i, 1] * b[1, j] + a[i, 2] * b[2, j])
