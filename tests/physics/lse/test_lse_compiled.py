"""Compiled (numba) element kernels: equal to the torch kernels to round-off, and the solver on them."""

from __future__ import annotations

import os

import pytest
import torch

from flexlearn.lie import se3_exp
from flexlearn.physics.lse import CPRModel, Loads, actuation_path
from flexlearn.physics.lse.compiled.elements import element_residual_nb, element_tangent_nb
from flexlearn.physics.lse.compiled.linalg import HAVE_NUMBA
from flexlearn.physics.lse.fused import element_residual, element_tangent_fused

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
DT = torch.float64


def test_compiled_kernels_equal_torch_kernels():
    gen = torch.Generator().manual_seed(3)
    e = 40
    ga = se3_exp(torch.randn(e, 6, dtype=DT, generator=gen))
    # relative rotations from 0 (series branches) to ~1.5 rad (closed forms)
    rel = torch.randn(e, 6, dtype=DT, generator=gen) * torch.linspace(0.0, 0.8, e, dtype=DT)[:, None]
    gb = ga @ se3_exp(rel)
    beta = 0.5 * torch.randn(e, 6, dtype=DT, generator=gen)
    h = torch.full((e,), 0.04, dtype=DT)
    k = torch.rand(e, 6, dtype=DT, generator=gen) + 0.5
    xi0 = torch.tensor([0.1, 0.0, 0.0, 0.0, 0.0, 1.0], dtype=DT).expand(e, 6)
    re, cache = element_residual(ga, gb, beta, h, k, xi0)
    hm = element_tangent_fused(cache, beta)
    args = [t.contiguous().numpy() for t in (ga, gb, beta, h, k, xi0)]
    rn = torch.from_numpy(element_residual_nb(*args))
    hn = torch.from_numpy(element_tangent_nb(*args))
    torch.testing.assert_close(rn, re, rtol=0, atol=1e-13 * float(re.abs().max()))
    torch.testing.assert_close(hn, hm, rtol=0, atol=1e-13 * float(hm.abs().max()))


def test_closed_form_strain_map_inverse_equals_the_numerical_inverse():
    """A⁻¹ of A = hI - h³/12 ad_β in closed form against numpy's inverse, from tiny to large element slopes."""
    import numpy as np

    from flexlearn.physics.lse.compiled.elements import _strain_map_inv_into

    rng = np.random.default_rng(7)
    binv, tmp, ainv = np.empty((3, 3)), np.empty((3, 3)), np.empty((6, 6))
    for scale in (0.0, 1e-6, 1.0, 50.0, 5e3):
        for h in (1e-3, 0.04, 0.5):
            beta = scale * rng.standard_normal(6)
            c = h**3 / 12.0
            amat = h * np.eye(6)
            w, v = beta[:3], beta[3:]
            hat = lambda x: np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])  # noqa: E731
            amat[:3, :3] -= c * hat(w)
            amat[3:, 3:] -= c * hat(w)
            amat[3:, :3] -= c * hat(v)
            _strain_map_inv_into(beta, h, c, ainv, binv, tmp)
            ref = np.linalg.inv(amat)
            assert np.abs(ainv - ref).max() <= 1e-12 * np.abs(ref).max(), (scale, h)
            assert np.abs(ainv @ amat - np.eye(6)).max() <= 1e-12


def test_six_by_six_inverse_of_a_singular_matrix_is_nan_not_an_exception():
    import numpy as np
    from numba import njit

    from flexlearn.physics.lse.compiled.linalg import inv6_into

    @njit
    def inv(m, out):
        inv6_into(m, out)

    out = np.empty((6, 6))
    good = np.eye(6) + 0.1 * np.arange(36.0).reshape(6, 6) / 36.0
    inv(good.copy(), out)
    assert np.allclose(out @ good, np.eye(6), atol=1e-12)
    singular = good.copy()
    singular[:, 3] = 0.0
    inv(singular, out)
    assert np.isnan(out).all()


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba missing")
def test_kernel_without_python_entry_point_refuses_a_python_call():
    """`njit_inner` kernels have no CPython wrapper: a Python call raised a segmentation fault; it raises TypeError
    naming the kernel, and compiled callers still reach it."""
    import numpy as np

    from flexlearn.physics.lse.compiled.elements import coefficients_into, element_into

    for kernel, args in ((coefficients_into, (0.1, np.empty(6))), (element_into, ())):
        with pytest.raises(TypeError, match=kernel.py_func.__qualname__ + " is a compiled kernel"):
            kernel(*args)
    ga = np.eye(4)[None]
    gb = np.eye(4)[None].copy()
    gb[0, 2, 3] = 0.1
    out = element_residual_nb(
        ga, gb, np.zeros((1, 6)), np.full(1, 0.1), np.ones((1, 6)), np.array([[0.0, 0, 0, 0, 0, 1]])
    )
    assert np.isfinite(out).all()


def test_kernels_run_as_plain_python_with_the_jit_disabled():
    """NUMBA_DISABLE_JIT=1 (stepping through the kernels in a debugger): every kernel is a plain function, the
    module imports and the element kernels run."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from flexlearn.physics.lse.compiled.elements import element_into, element_residual_nb\n"
        "assert not hasattr(element_into, 'py_func')\n"
        "gb = np.eye(4)[None].copy(); gb[0, 2, 3] = 0.1\n"
        "out = element_residual_nb(np.eye(4)[None], gb, np.zeros((1, 6)), np.full(1, 0.1), np.ones((1, 6)),\n"
        "                          np.array([[0.0, 0, 0, 0, 0, 1]]))\n"
        "assert np.isfinite(out).all()\n"
    )
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize("pulley", [False, True])
def test_numba_solver_matches_torch_solver_along_path(pulley):
    model = CPRModel.from_config()
    loads = model.default_loads(pulley)
    # warm-started steps small enough for plain Newton (no continuation): on diverging trial iterations
    # (coarse steps) round-off changes where the growth test fires, and with it the iteration count
    _, dense, _ = actuation_path(3, 12)
    runs = {}
    for kernels in ("fused", "numba"):
        model.kernels = kernels
        eq = model.solve(torch.zeros(3, dtype=DT), loads)
        out = []
        for th in dense:
            eq = model.solve(th, loads, init=eq)
            out.append(eq)
        runs[kernels] = out
    tol = 1e-8  # model.solve's default tolerance on the scaled residual norm
    for a, b in zip(runs["fused"], runs["numba"]):
        # the iteration count is decided by `residual > tol` on residuals that the two kernels compute to
        # round-off (measured: they differ by up to ~1e-9 near the round-off floor): equal unless a residual
        # of this solve lies within that band of tol (measured: 1.04e-8 at one step with pulley), where one more
        # or one fewer Newton step moves the solution by ~1e-13, far inside the tolerances below
        same_path = a.iterations == b.iterations
        if not same_path:
            near = [x for x in list(a.residual_log) + list(b.residual_log) if abs(x - tol) <= 0.3 * tol]
            assert abs(a.iterations - b.iterations) == 1 and near, (a.iterations, b.iterations)
        torch.testing.assert_close(b.g_ee, a.g_ee, rtol=0, atol=1e-10)
        torch.testing.assert_close(b.nodes, a.nodes, rtol=0, atol=1e-10)
        # slopes β [1/m²]: the same relative accuracy on their scale
        torch.testing.assert_close(b.beta, a.beta, rtol=0, atol=1e-10 * max(1.0, float(a.beta.abs().max())))
        # the warm-start predictor's sensitivity dq/dθ from the last factorisation (with one Newton step more
        # or fewer, that factorisation is at another iterate: measured 3e-6 relative, so only on the same path)
        if same_path:
            for sa, sb in zip(a.sensitivity, b.sensitivity):
                torch.testing.assert_close(sb, sa, rtol=0, atol=1e-8 * float(sa.abs().max()))


def test_numba_kernels_keep_implicit_gradients():
    model = CPRModel.from_config()
    th0 = torch.tensor([-0.05, -0.1, -0.02], dtype=DT)
    grads = {}
    for kernels in ("fused", "numba"):
        model.kernels = kernels
        th = th0.clone().requires_grad_(True)
        tension = model.pulley_tension.clone().requires_grad_(True)
        eq = model.solve(th, Loads(pulley_position=model.pulley_position, pulley_tension=tension))
        grads[kernels] = torch.autograd.grad(eq.position.sum(), (th, tension))
    for a, b in zip(grads["fused"], grads["numba"]):
        assert torch.isfinite(b).all() and float(b.abs().max()) > 0
        torch.testing.assert_close(b, a, rtol=1e-8, atol=1e-12)
