"""Biot–Savart field of a thin-wire polyline, exact for each straight segment (finite wire), in torch.

For a straight segment from ``a`` to ``b`` carrying current ``I`` (from ``a`` to ``b``) the field at ``p`` is

    B = μ0 I / (4π) · (r1 × r2) (|r1| + |r2|) / (|r1| |r2| (|r1| |r2| + r1·r2)),   r1 = p − a, r2 = p − b,

the closed form of the line integral μ0 I/(4π) ∫ dl × (p − l) / |p − l|³ over the segment. The cross product
is evaluated as ``(b − a) × r1`` (identical, but without the cancellation of two long, nearly parallel
vectors far from the wire). Points on a segment (where the field is singular) get a zero contribution from
it, as in magpylib. Used for the PCB coil of seed 002, Sec. III-A.
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from flexlearn.errors import ArgumentError

MU0 = 1.25663706212e-6
"""Vacuum permeability μ0 [T·m/A] (CODATA 2018)."""

_PAIRS_PER_CHUNK = 1 << 17


def biot_savart_polyline(
    vertices: torch.Tensor, points: torch.Tensor, current: Union[float, torch.Tensor] = 1.0, chunk: Optional[int] = None
) -> torch.Tensor:
    """Magnetic flux density [T] of a polyline current at ``points``.

    Args:
        vertices: (M, 3) polyline vertices [m]; the current flows from ``vertices[0]`` to ``vertices[-1]``.
        points: (..., 3) field points [m].
        current: current [A], a float or a 0-d tensor (differentiable).
        chunk: points per chunk (memory ≈ chunk·(M−1) numbers per temporary); the default keeps about
            2^17 point–segment pairs per chunk, which stays in cache and is fastest on CPU.

    Returns:
        (..., 3) flux density [T], in the dtype/device of ``points`` and ``vertices`` (promoted).
        Differentiable with respect to ``vertices``, ``points`` and ``current``.

    Raises:
        ArgumentError: ``vertices`` is not a polyline (M >= 2, 3) or ``points`` do not end in a dimension of 3
            (also a ``ValueError``).
    """
    if vertices.ndim != 2 or vertices.shape[-1] != 3 or vertices.shape[0] < 2:
        raise ArgumentError(f"vertices must have shape (M>=2, 3), got {tuple(vertices.shape)}")
    if points.shape[-1] != 3:
        raise ArgumentError(f"points must have shape (..., 3), got {tuple(points.shape)}")
    dtype = torch.promote_types(vertices.dtype, points.dtype)
    vertices = vertices.to(dtype)
    flat = points.to(dtype).reshape(-1, 3)
    a = vertices[:-1]  # (S, 3) segment starts
    ax, ay, az = a.unbind(-1)
    sx, sy, sz = (vertices[1:] - a).unbind(-1)  # (S,) segment vectors b − a
    if chunk is None:
        chunk = max(1, _PAIRS_PER_CHUNK // a.shape[0])
    eps = 64.0 * torch.finfo(dtype).eps
    parts = []
    for s in range(0, flat.shape[0], chunk):
        p = flat[s : s + chunk]
        x1, y1, z1 = p[:, 0:1] - ax, p[:, 1:2] - ay, p[:, 2:3] - az  # r1 = p − a, (c, S) each
        x2, y2, z2 = x1 - sx, y1 - sy, z1 - sz  # r2 = p − b
        n1 = torch.sqrt(x1 * x1 + y1 * y1 + z1 * z1)
        n2 = torch.sqrt(x2 * x2 + y2 * y2 + z2 * z2)
        n12 = n1 * n2
        n12_dot = n12 + x1 * x2 + y1 * y2 + z1 * z2  # |r1||r2|(1 + cos γ) ≥ 0
        ok = n12_dot > eps * n12  # γ → π: p on the segment
        coef = torch.where(ok, (n1 + n2) / torch.where(ok, n12 * n12_dot, torch.ones_like(n12)), torch.zeros_like(n12))
        # (b − a) × (p − a) = r1 × r2, written without the cancellation of two long, nearly parallel vectors
        parts.append(
            torch.stack(
                [
                    ((sy * z1 - sz * y1) * coef).sum(1),
                    ((sz * x1 - sx * z1) * coef).sum(1),
                    ((sx * y1 - sy * x1) * coef).sum(1),
                ],
                dim=-1,
            )
        )
    field = torch.cat(parts, dim=0) if parts else flat.new_zeros((0, 3))
    scale = MU0 / (4.0 * torch.pi)
    return (scale * current * field).reshape(points.shape[:-1] + (3,))
