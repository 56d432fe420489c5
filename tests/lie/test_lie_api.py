"""Every public function: batch shapes (), (N,), (N, M) and broadcasting equal the per-element loop;
dtype is preserved; torch.jit.script + save + load gives the eager result."""

from __future__ import annotations

import pytest
import torch

import flexlearn.lie as L
from tests.lie.lie_testutil import random_rotvecs, random_twists


def _n(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _make(kind: str, shape: tuple, seed: int, dtype) -> torch.Tensor:
    n = max(_n(shape), 1)
    g = torch.Generator().manual_seed(seed)
    if kind == "rotvec":
        x = random_rotvecs(n, 3.0, seed)
    elif kind == "small":
        x = random_rotvecs(n, 1.0, seed)
    elif kind == "vec3":
        x = torch.randn(n, 3, generator=g, dtype=torch.float64)
    elif kind == "rot":
        x = L.so3_exp(random_rotvecs(n, 3.0, seed))
    elif kind == "skew3":
        x = L.so3_hat(random_rotvecs(n, 3.0, seed))
    elif kind == "quat":
        x = L.quat_normalize(torch.randn(n, 4, generator=g, dtype=torch.float64))
    elif kind == "twist":
        x = random_twists(n, 3.0, seed)
    elif kind == "pose":
        x = L.se3_exp(random_twists(n, 3.0, seed))
    elif kind == "se3mat":
        x = L.se3_hat(random_twists(n, 3.0, seed))
    elif kind == "inertia":
        J = torch.diag(torch.tensor([1.0, 2.0, 2.5], dtype=torch.float64)) + 0.1 * torch.rand(
            n, 3, 3, generator=g, dtype=torch.float64
        )
        J = 0.5 * (J + J.mT)
        x = 0.5 * J.diagonal(dim1=-2, dim2=-1).sum(-1)[..., None, None] * torch.eye(3, dtype=torch.float64) - J
    elif kind == "angle":
        x = (torch.rand(n, 1, generator=g, dtype=torch.float64) - 0.5) * 6.0
    elif kind == "so2mat":
        x = L.so2_exp((torch.rand(n, 1, generator=g, dtype=torch.float64) - 0.5) * 6.0)
    elif kind == "so2hat":
        x = L.so2_hat(torch.randn(n, 1, generator=g, dtype=torch.float64))
    elif kind == "se2twist":
        x = torch.randn(n, 3, generator=g, dtype=torch.float64)
    elif kind == "se2pose":
        x = L.se2_exp(torch.randn(n, 3, generator=g, dtype=torch.float64))
    elif kind == "se2mat":
        x = L.se2_hat(torch.randn(n, 3, generator=g, dtype=torch.float64))
    else:
        raise KeyError(kind)
    return x.reshape(shape + x.shape[1:]).to(dtype)


SIGNATURES: dict[str, tuple[str, ...]] = {
    "matrix_to_quat": ("rot",),
    "quat_canonical": ("quat",),
    "quat_conjugate": ("quat",),
    "quat_exp": ("rotvec",),
    "quat_inverse": ("quat",),
    "quat_log": ("quat",),
    "quat_multiply": ("quat", "quat"),
    "quat_normalize": ("quat",),
    "quat_rotate": ("quat", "vec3"),
    "quat_to_matrix": ("quat",),
    "rotation_between": ("vec3", "vec3"),
    "so3_exp": ("rotvec",),
    "so3_hat": ("rotvec",),
    "so3_hat_sq": ("rotvec",),
    "so3_inverse": ("rot",),
    "so3_log": ("rot",),
    "so3_vee": ("skew3",),
    "so3_left_jacobian": ("rotvec",),
    "so3_left_jacobian_inv": ("rotvec",),
    "so3_right_jacobian": ("rotvec",),
    "so3_right_jacobian_inv": ("rotvec",),
    "so3_jacobians": ("rotvec",),
    "so3_cayley": ("rotvec",),
    "so3_cayley_inv": ("rot",),
    "so3_cayley_jacobian": ("rotvec",),
    "so3_cayley_jacobian_inv": ("rotvec",),
    "so3_cayley_lgvi": ("small", "inertia"),
    "so3_cayley_lgvi_solve": ("small", "inertia"),
    "se3_ad": ("twist",),
    "se3_adjoint": ("pose",),
    "se3_coad": ("twist",),
    "se3_coadjoint": ("pose",),
    "se3_exp": ("twist",),
    "se3_from_rt": ("rot", "vec3"),
    "se3_hat": ("twist",),
    "se3_inverse": ("pose",),
    "se3_log": ("pose",),
    "se3_vee": ("se3mat",),
    "se3_left_jacobian": ("twist",),
    "se3_left_jacobian_inv": ("twist",),
    "se3_right_jacobian": ("twist",),
    "se3_right_jacobian_inv": ("twist",),
    "se3_q_matrix": ("twist",),
    "se3_cayley": ("twist",),
    "se3_cayley_inv": ("pose",),
    "se3_cayley_jacobian": ("twist",),
    "so2_exp": ("angle",),
    "so2_hat": ("angle",),
    "so2_log": ("so2mat",),
    "so2_vee": ("so2hat",),
    "se2_ad": ("se2twist",),
    "se2_adjoint": ("se2pose",),
    "se2_exp": ("se2twist",),
    "se2_hat": ("se2twist",),
    "se2_inverse": ("se2pose",),
    "se2_log": ("se2pose",),
    "se2_vee": ("se2mat",),
}


def _as_tuple(y):
    return y if isinstance(y, tuple) else (y,)


def _close(a, b, ulps, floor=0.0):
    """Equal to ``ulps`` units in the last place of the result's scale (plus an absolute ``floor``).

    A batched and a per-element call may take different SIMD paths (AVX2 vs AVX-512, vectorised loop
    tails), so they agree to a few ulps, not bitwise.
    """
    for x, y in zip(_as_tuple(a), _as_tuple(b)):
        assert x.shape == y.shape
        eps = torch.finfo(y.dtype).eps
        scale = 1.0 + float(y.abs().max()) if y.numel() else 1.0
        torch.testing.assert_close(x, y, rtol=0, atol=ulps * eps * scale + floor)


def test_every_public_function_is_covered():
    assert sorted(SIGNATURES) == sorted(L.__all__)


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_batch_shapes_and_broadcasting_equal_loop(name):
    fn = getattr(L, name)
    kinds = SIGNATURES[name]
    # the iterative Cayley-Newton solve stops at its own tolerance, so per-element runs may take other steps
    floor = {torch.float64: 1e-12, torch.float32: 1e-8} if name == "so3_cayley_lgvi_solve" else None
    for dtype in (torch.float64, torch.float32):
        for shape in [(), (4,), (2, 3)]:
            args = [_make(k, shape, 10 + i, dtype) for i, k in enumerate(kinds)]
            out = fn(*args)
            for o in _as_tuple(out):
                assert o.dtype == dtype
                assert tuple(o.shape[: len(shape)]) == shape
            if shape == ():
                continue
            flat = [a.reshape((-1,) + a.shape[len(shape) :]) for a in args]
            per = [fn(*[a[i] for a in flat]) for i in range(flat[0].shape[0])]
            ref = tuple(
                torch.stack([_as_tuple(p)[j] for p in per]).reshape(_as_tuple(out)[j].shape)
                for j in range(len(_as_tuple(out)))
            )
            _close(out, ref if isinstance(out, tuple) else ref[0], 16, floor[dtype] if floor else 0.0)
    if len(kinds) == 2:
        a = _make(kinds[0], (3, 1), 20, torch.float64)
        b = _make(kinds[1], (4,), 21, torch.float64)
        out = _as_tuple(fn(a, b))
        for i in range(3):
            for j in range(4):
                ref = _as_tuple(fn(a[i, 0], b[j]))
                _close(tuple(o[i, j] for o in out), ref, 16, floor[torch.float64] if floor else 0.0)


def test_script_save_load_equals_eager(tmp_path):
    for name in sorted(SIGNATURES):
        fn = getattr(L, name)
        # as in the batch test: the iterative solve may take other steps when round-off differs
        floor = {torch.float64: 1e-12, torch.float32: 1e-8} if name == "so3_cayley_lgvi_solve" else None
        scripted = torch.jit.script(fn)
        path = tmp_path / f"{name}.pt"
        torch.jit.save(scripted, str(path))
        loaded = torch.jit.load(str(path))
        for dtype in (torch.float64, torch.float32):
            args = [_make(k, (5,), 30 + i, dtype) for i, k in enumerate(SIGNATURES[name])]
            if name == "so3_cayley_lgvi_solve":
                args += [20, 1e-14]  # a loaded free function loses its default arguments
            eager = fn(*args)
            # TorchScript may run other kernels than eager (graph passes, fusion, SIMD width): round-off, not bitwise
            _close(loaded(*args), eager, 16, floor[dtype] if floor else 0.0)
            _close(scripted(*args), eager, 16, floor[dtype] if floor else 0.0)
