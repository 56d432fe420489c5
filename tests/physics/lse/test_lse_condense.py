"""The compiled condensed solve of the CPR Newton system equals a dense solve of the assembled system."""

from __future__ import annotations

import numpy as np
import pytest

from flexlearn.physics.lse.compiled.linalg import HAVE_NUMBA

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")


def _dense(hel, res, res_ee, kee, dz0, rod_motor, n_motors):
    """Assemble K_t (rods' unknowns then the platform twist) and solve for [-r, -∂r/∂θ] densely."""
    r, n = hel.shape[:2]
    ny = 12 * n - 6
    size = r * ny + 6

    def dofs(k, block):  # global indices of node j (0..N) or β_e (block = ("b", e)); None: prescribed base
        if isinstance(block, tuple):
            o = k * ny + 6 * (n - 1) + 6 * block[1]
            return np.arange(o, o + 6)
        if block == 0:
            return None
        if block == n:
            return np.arange(r * ny, size)
        return np.arange(k * ny + 6 * (block - 1), k * ny + 6 * block)

    kt = np.zeros((size, size))
    rhs = np.zeros((size, 1 + n_motors))
    kt[r * ny :, r * ny :] += kee
    rhs[r * ny :, 0] -= res_ee
    for k in range(r):
        rhs[k * ny : (k + 1) * ny, 0] -= res[k, :ny]
        rhs[r * ny :, 0] -= res[k, ny:]
        for e in range(n):
            blocks = [dofs(k, e), dofs(k, e + 1), dofs(k, ("b", e))]
            for bi, rows in enumerate(blocks):
                if rows is None:
                    continue
                for bj, cols in enumerate(blocks):
                    hb = hel[k, e, 6 * bi : 6 * bi + 6, 6 * bj : 6 * bj + 6]
                    if cols is None:  # the base twist moves with its motor: -∂r/∂θ = -H δζ₀
                        if rod_motor[k] >= 0:
                            rhs[rows, 1 + rod_motor[k]] -= hb @ dz0[k]
                        continue
                    kt[np.ix_(rows, cols)] += hb
    x = np.linalg.solve(kt, rhs)
    return x[: r * ny].reshape(r, ny, -1), x[r * ny :]


@pytest.mark.parametrize("n_elements", [1, 2, 4])
def test_condensed_solve_equals_dense_solve(n_elements):
    from flexlearn.physics.lse.compiled.condense import condensed_solve

    rng = np.random.default_rng(n_elements)
    r, n, m = 4, n_elements, 2
    # well-conditioned, non-symmetric element tangents (load stiffness makes K_t non-symmetric)
    hel = rng.normal(size=(r, n, 18, 18)) + 12.0 * np.eye(18)
    res = rng.normal(size=(r, 12 * n))
    res_ee, kee = rng.normal(size=6), rng.normal(size=(6, 6)) + 6.0 * np.eye(6)
    dz0 = rng.normal(size=(r, 6))
    rod_motor = np.array([0, 1, -1, 1], dtype=np.int64)  # rod 2 has a fixed base
    dy, dz = condensed_solve(hel, res, res_ee, kee, dz0, rod_motor, m)
    dy_ref, dz_ref = _dense(hel, res, res_ee, kee, dz0, rod_motor, m)
    np.testing.assert_allclose(dz, dz_ref, rtol=0, atol=1e-12 * np.abs(dz_ref).max())
    np.testing.assert_allclose(dy, dy_ref, rtol=0, atol=1e-12 * np.abs(dy_ref).max())
    assert np.abs(dy_ref[2, :, 1:]).max() > 0  # the fixed rod still moves with the platform
