"""Shared fixtures for the Lie group tests: angle grids, random samplers, mpmath references."""

from __future__ import annotations

import math

import mpmath
import torch

from flexlearn.lie.thresholds import series_threshold

mpmath.mp.dps = 32

DTYPES = [torch.float64, torch.float32]
EPS = {torch.float64: 2.220446049250313e-16, torch.float32: 1.1920928955078125e-07}
SERIES = ["sinc", "sinc3", "cosc2", "sinc5", "cotc", "atan2_ratio"]


def thresholds(dtype: torch.dtype) -> list[float]:
    """The θ (not θ²) of every series threshold of ``dtype`` that is below π."""
    x = torch.zeros((), dtype=dtype)
    out = [math.sqrt(series_threshold(x, n)) for n in SERIES]
    return [t for t in out if t < math.pi]


def angle_grid(dtype: torch.dtype) -> list[float]:
    """0, tiny angles, every threshold ± 1e-4 relative, 1, and angles at and just below π."""
    grid = [0.0, 1e-9, 1e-6, 1e-4, 1e-2, 1.0, 2.0, math.pi - 1e-3, math.pi - 1e-7, math.pi]
    for t in thresholds(dtype):
        grid += [t * (1 - 1e-4), t, t * (1 + 1e-4)]
    return sorted(grid)


def unit_vectors(n: int, dim: int = 3, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(n, dim, generator=g, dtype=torch.float64)
    return (v / v.norm(dim=-1, keepdim=True)).to(dtype)


def rotvecs_on_grid(dtype: torch.dtype, n_axes: int = 4, seed: int = 0) -> torch.Tensor:
    """(len(grid) * n_axes, 3) rotation vectors with every angle of the grid on random axes."""
    axes = unit_vectors(n_axes, seed=seed)
    angles = torch.tensor(angle_grid(dtype), dtype=torch.float64)
    return (angles[:, None, None] * axes[None]).reshape(-1, 3).to(dtype)


def random_rotvecs(n: int, max_angle: float = math.pi, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ang = torch.rand(n, 1, generator=g, dtype=torch.float64) * max_angle
    return (unit_vectors(n, seed=seed + 1) * ang).to(dtype)


def random_twists(n: int, max_angle: float = 3.0, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 7)
    v = torch.randn(n, 3, generator=g, dtype=torch.float64)
    return torch.cat([random_rotvecs(n, max_angle, seed).double(), v], -1).to(dtype)


# ---------------------------------------------------------------- mpmath references (independent)
def mp_vec(x) -> mpmath.matrix:
    return mpmath.matrix([mpmath.mpf(float(a)) for a in x.reshape(-1).tolist()])


def mp_hat(w) -> mpmath.matrix:
    return mpmath.matrix([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])


def mp_se3_hat(xi) -> mpmath.matrix:
    m = mpmath.zeros(4, 4)
    W = mp_hat(xi[0:3])
    for i in range(3):
        for j in range(3):
            m[i, j] = W[i, j]
        m[i, 3] = xi[3 + i]
    return m


def mp_so3_exp(w) -> mpmath.matrix:
    """Matrix exponential (mpmath.expm, Padé with scaling: independent of Rodrigues)."""
    return mpmath.expm(mp_hat(w))


def mp_se3_exp(xi) -> mpmath.matrix:
    return mpmath.expm(mp_se3_hat(xi))


def mp_to_torch(m: mpmath.matrix, dtype=torch.float64) -> torch.Tensor:
    return torch.tensor([[float(m[i, j]) for j in range(m.cols)] for i in range(m.rows)], dtype=dtype)


def mp_ad(xi) -> mpmath.matrix:
    m = mpmath.zeros(6, 6)
    W = mp_hat(xi[0:3])
    V = mp_hat(xi[3:6])
    for i in range(3):
        for j in range(3):
            m[i, j] = W[i, j]
            m[3 + i, 3 + j] = W[i, j]
            m[3 + i, j] = V[i, j]
    return m


def mp_dexp(ad, terms: int = 60) -> mpmath.matrix:
    """Left Jacobian Σ_j ad^j / (j+1)! (seed 003, App. B) by direct summation."""
    n = ad.rows
    out = mpmath.eye(n)
    p = mpmath.eye(n)
    for j in range(1, terms):
        p = p * ad
        term = p / mpmath.factorial(j + 1)
        out += term
        if mpmath.mnorm(term, 1) < mpmath.mpf(10) ** -34:
            break
    return out
