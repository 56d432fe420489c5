"""One definition of the element strains and of the Cayley–Newton solve: the torch callers use
flexlearn.physics.cosserat.strains.strains and flexlearn.lie.cayley.so3_cayley_lgvi_newton; the numba kernel's
scalar versions equal them to round-off on random states."""

from __future__ import annotations

import pytest
import torch

from flexlearn.lie import so3_cayley_inv, so3_cayley_lgvi, so3_exp
from flexlearn.physics.cosserat import CosseratRod, Damping, Material
from flexlearn.physics.cosserat.compiled import cayley
from flexlearn.physics.cosserat.compiled import lgvi as fused
from flexlearn.physics.cosserat.compiled.common import STRAIN_CODES, element_strain
from flexlearn.physics.cosserat.elastic import internal_forces
from flexlearn.physics.cosserat.newton import cayley_newton, cayley_newton_fixed, cayley_newton_globalised
from flexlearn.physics.cosserat.strains import strains

DT = torch.float64
pytestmark = pytest.mark.skipif(not fused.HAVE_NUMBA, reason="numba not installed")


def _random_state(b: int, n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    s = torch.linspace(0.0, 0.3, n, dtype=DT)
    p = torch.stack(
        [
            0.004 * torch.randn(b, n, generator=gen, dtype=DT),
            0.004 * torch.randn(b, n, generator=gen, dtype=DT),
            s.expand(b, n),
        ],
        -1,
    )
    R = so3_exp(0.4 * torch.randn(b, n, 3, generator=gen, dtype=DT))
    l = torch.full((b, n - 1), 0.3 / (n - 1), dtype=DT) * (1.0 + 0.1 * torch.rand(b, n - 1, generator=gen, dtype=DT))
    return R, p, l


@pytest.mark.parametrize("model", ["midpoint", "geodesic", "nodes"])
def test_numba_element_strains_equal_torch_strains(model):
    R, p, l = _random_state(3, 9, 7)
    e3 = torch.tensor([0.0, 0.0, 1.0], dtype=DT)
    ref = strains(R, p, l, e3, model != "nodes", model == "geodesic")
    Rn, pn, ln = R.numpy(), p.numpy(), l.numpy()
    code = STRAIN_CODES[model]
    rows = [[element_strain(Rn, pn, ln, code, b, i) for i in range(l.shape[1])] for b in range(3)]
    nb = torch.tensor(rows, dtype=DT)  # (B, N, 17)
    tr = ref.Q.diagonal(dim1=-2, dim2=-1).sum(-1)
    for k, want in enumerate((ref.xL, ref.xR, ref.gL, ref.gR, ref.f)):
        got = nb[..., 3 * k : 3 * k + 3]
        # round-off: the kernel multiplies by 1/l and 1/(1 + tr Q) where the torch path divides
        torch.testing.assert_close(got, want, rtol=0, atol=8 * 2.2e-16 * (1.0 + float(want.abs().max())))
    torch.testing.assert_close(nb[..., 15], tr, rtol=0, atol=1e-15)
    torch.testing.assert_close(nb[..., 16], 1.0 / l, rtol=1e-15, atol=0)


def test_torch_callers_use_the_strains():
    """Energy, internal forces and damping strains are the functions of strains() they document."""
    rod = CosseratRod.circular(0.3, 5e-3, Material(1200.0, 2e6, 0.4), 8)
    R, p, _ = _random_state(1, 9, 3)
    ctx = rod.context()
    s = strains(R, p, ctx.rest_lengths, ctx.e3, True)
    l = ctx.rest_lengths.unsqueeze(-1)
    c1, c2 = ctx.shear_stiffness, ctx.bend_stiffness
    v = (0.5 * l * s.gL * c1 * s.gL + 0.5 * (2.0 * s.f) * c2 * (2.0 * s.f) / l).sum((-1, -2))
    torch.testing.assert_close(rod.potential_energy(R, p, ctx), v, rtol=1e-15, atol=0)
    _, _, gL, gR, f, Q = internal_forces(ctx, R, p)
    assert torch.equal(gL, s.gL) and torch.equal(gR, s.gR) and torch.equal(f, s.f) and torch.equal(Q, s.Q)
    torch.testing.assert_close(f, so3_cayley_inv(R[:, :-1].mT @ R[:, 1:]), rtol=0, atol=0)
    dl, dr, kap = Damping._strains(ctx, R, p)
    assert torch.equal(dl, s.xL / l) and torch.equal(dr, s.xR / l) and torch.equal(kap, 2.0 * s.f / l)


def test_numba_cayley_newton_equals_the_lie_newton():
    """The kernel's chord + Newton iteration and the torch one (flexlearn.lie.cayley.so3_cayley_lgvi_newton)
    solve the same equation to the same tolerance: both solutions agree to that tolerance and satisfy it."""
    gen = torch.Generator().manual_seed(5)
    n = 200
    jdiag = torch.rand(n, 3, generator=gen, dtype=DT) + 0.5
    jdiag = jdiag / jdiag.sum(-1, keepdim=True)  # normalised J (tr = 1)
    jd = 0.5 * jdiag.sum(-1, keepdim=True) - jdiag  # normalised J_d
    # |u| from the chord regime (small) to full Newton (|u| = 0.1; for |u| ≳ 0.4 a solution need not exist)
    u = torch.randn(n, 3, generator=gen, dtype=DT) * torch.logspace(-6, -1, n, dtype=DT)[:, None]
    tol = 1e-13
    f_t, step = cayley_newton(u[None], torch.diag_embed(jd)[None], jdiag[None], tol, 30)
    f_t = f_t[0]
    assert bool((step <= tol * u.norm(dim=-1).clamp_min(1e-3)).all())
    f_n = torch.tensor(
        [cayley.cayley_newton(*u[i].tolist(), *jd[i].tolist(), *jdiag[i].tolist(), tol, 30)[:3] for i in range(n)],
        dtype=DT,
    )
    ok = [cayley.cayley_newton(*u[i].tolist(), *jd[i].tolist(), *jdiag[i].tolist(), tol, 30)[3] for i in range(n)]
    assert all(ok)
    scale = u.norm(dim=-1, keepdim=True).clamp_min(1e-3)
    assert float(((f_n - f_t).abs() / scale).max()) <= 10 * tol
    g, _ = so3_cayley_lgvi(f_n, torch.diag_embed(jd))
    assert float(((g - u).abs() / scale).max()) <= 10 * tol


def test_numba_cayley_newton_solves_where_the_globalised_torch_newton_does():
    """|u| up to 1.4 (a quarter turn per step is |u| = 1 for an isotropic J): the kernel's solve (chord, Newton,
    then Newton with a line search) converges exactly where the tensor path's globalised Newton does, to the same
    solution, and reports no convergence where there is no solution."""
    gen = torch.Generator().manual_seed(7)
    n = 300
    jdiag = torch.rand(n, 3, generator=gen, dtype=DT) + 0.5
    jdiag = jdiag / jdiag.sum(-1, keepdim=True)
    jd = 0.5 * jdiag.sum(-1, keepdim=True) - jdiag
    u = torch.randn(n, 3, generator=gen, dtype=DT)
    u = (
        u
        / u.norm(dim=-1, keepdim=True)
        * 1.4
        * torch.rand(n, 1, generator=gen, dtype=DT)
        * jdiag.max(-1).values[:, None]
    )
    tol = 1e-12
    f_t, last, _ = cayley_newton_globalised(u[None], torch.diag_embed(jd)[None], jdiag[None], tol, 40)
    solved_t = (last[0] <= tol * u.norm(dim=-1).clamp_min(1e-3)).tolist()
    runs = [cayley.cayley_newton(*u[i].tolist(), *jd[i].tolist(), *jdiag[i].tolist(), tol, 20) for i in range(n)]
    solved_n = [r[3] for r in runs]
    assert solved_n == solved_t
    assert 0 < sum(solved_n) < n
    f_n = torch.tensor([r[:3] for r in runs], dtype=DT)
    keep = torch.tensor(solved_n)
    scale = u.norm(dim=-1, keepdim=True).clamp_min(1e-3)
    assert float(((f_n - f_t[0]).abs() / scale)[keep].max()) <= 1e-10
    g, _ = so3_cayley_lgvi(f_n, torch.diag_embed(jd))
    assert float(((g - u).abs() / scale)[keep].max()) <= 1e-10


def test_fixed_newton_is_the_same_iteration():
    gen = torch.Generator().manual_seed(2)
    u = 0.2 * torch.randn(2, 5, 3, generator=gen, dtype=DT)
    jdiag = torch.rand(2, 5, 3, generator=gen, dtype=DT) + 0.5
    jd = torch.diag_embed(0.5 * jdiag.sum(-1, keepdim=True) - jdiag)
    f_a, s_a = cayley_newton(u, jd, jdiag, 0.0, 3)  # tol 0: never stops early
    f_b, s_b = cayley_newton_fixed(u, jd, jdiag, 3)
    assert torch.equal(f_a, f_b) and torch.equal(s_a, s_b)
