"""Deformation reconstruction from IMU slopes (seed 000, §III-C, eqs. (9) and (18)).

Given relative slopes ``y_s = ψ_s − ψ_r`` (rad) of S slope IMUs with respect to the reference IMU, the
modal coordinates are the (optionally Tikhonov-regularised) least-squares solution of ``O η = y``
(seed 000, eq. (18)):

    η = (OᵀO + γ I)⁻¹ Oᵀ y        (γ = 0: ordinary least squares / exact for S = m),

and the deflection follows from the modal expansion (seed 000, eq. (9)) ``w(ξ) = Σⱼ Φⱼ(ξ) ηⱼ``; the
outputs used downstream are the tip deflection ``w(L)`` [m], tip slope ``w′(L)`` [rad] (kinematics,
§IV) and the base curvature ``w″(0)`` [1/m] (controller, §V). The rigid link angle follows as
``φ = ψ_r − w′(l_r)``.

:class:`ModalReconstructor` is a TorchScript-able ``nn.Module`` whose rows are buffers (float64).
"""

from typing import Optional, Sequence

import torch
from torch import Tensor, nn

from flexlearn.config import check
from flexlearn.physics.modal.link import FlexibleLink
from flexlearn.physics.modal.slope_observability import observability, slope_matrix

__all__ = ["ModalReconstructor"]


class ModalReconstructor(nn.Module):
    """Linear map from relative IMU slopes to modal coordinates and derived link quantities.

    Buffers: ``gain`` (n, S) = (OᵀO + γI)⁻¹Oᵀ; ``tip_row``, ``tip_slope_row``, ``base_curvature_row``,
    ``ref_slope_row`` (n,); ``grid`` (P,) [m] and ``grid_rows`` (P, n) for w(ξ) on a fixed grid.
    """

    # buffers (runtime annotations, no ``from __future__ import annotations``: TorchScript reads them)
    gain: Tensor
    tip_row: Tensor
    tip_slope_row: Tensor
    base_curvature_row: Tensor
    ref_slope_row: Tensor
    grid: Tensor
    grid_rows: Tensor

    def __init__(
        self,
        gain: Tensor,
        tip_row: Tensor,
        tip_slope_row: Tensor,
        base_curvature_row: Tensor,
        ref_slope_row: Tensor,
        grid: Tensor,
        grid_rows: Tensor,
    ) -> None:
        super().__init__()
        self.register_buffer("gain", gain)
        self.register_buffer("tip_row", tip_row)
        self.register_buffer("tip_slope_row", tip_slope_row)
        self.register_buffer("base_curvature_row", base_curvature_row)
        self.register_buffer("ref_slope_row", ref_slope_row)
        self.register_buffer("grid", grid)
        self.register_buffer("grid_rows", grid_rows)

    @classmethod
    def from_link(
        cls,
        link: FlexibleLink,
        positions: Sequence[float],
        n: int,
        reference: Optional[float] = None,
        regularization: float = 0.0,
        grid_points: int = 51,
    ) -> "ModalReconstructor":
        """Build from a scalar link, S slope-IMU positions [m], m modes, reference-IMU position [m].

        Args:
            link: the scalar :class:`FlexibleLink`.
            positions: the S slope-IMU positions along the link [m], S ≥ n.
            n: number of modes m.
            reference: the reference-IMU position [m]; None: no reference row is subtracted from O (the
                reference row is taken at position 0).
            regularization: Tikhonov weight γ ≥ 0 of the least-squares gain ``(OᵀO + γ I)⁻¹ Oᵀ``.
            grid_points: points of the deflection grid over [0, L].

        Returns:
            The reconstructor.

        Raises:
            ConfigError: if the placement is not observable and γ = 0, γ < 0, the link is not scalar, or there
                are fewer than n slope IMUs.
        """
        check(regularization >= 0, "reconstruction.regularization", regularization, "must be >= 0")
        check(link.length.numel() == 1, "reconstruction.link", tuple(link.length.shape), "must be a scalar link")
        check(
            len(positions) >= n,
            "reconstruction.positions",
            list(positions),
            f"need at least {n} slope IMUs for {n} modes (plus one reference IMU)",
        )
        with torch.no_grad():
            d = link.modal_data(n)
            O = slope_matrix(link, positions, n, reference, d).reshape(len(positions), n)
            if regularization == 0.0:
                obs = observability(link, positions, n, reference)
                check(
                    bool(obs["observable"]),
                    "reconstruction.positions",
                    list(positions),
                    f"slope matrix has rank {int(obs['rank'])} < {n} modes (IMU at the clamp, "
                    f"duplicate or nodal positions)",
                )
            A = O.T @ O + regularization * torch.eye(n, dtype=O.dtype)
            gain = torch.linalg.solve(A, O.T)
            tv = link.tip_values(n, d)
            L = float(link.length)
            ref = 0.0 if reference is None else float(reference)
            ref_row = link.mode_shapes(torch.tensor([ref], dtype=O.dtype), n, 1, d).reshape(n)
            grid = torch.linspace(0.0, L, grid_points, dtype=O.dtype)
            rows = link.mode_shapes(grid, n, 0, d).reshape(grid_points, n)
        return cls(
            gain, tv["tip"].reshape(n), tv["tip_slope"].reshape(n), tv["base_curvature"].reshape(n), ref_row, grid, rows
        )

    def forward(self, rel_slopes: Tensor) -> Tensor:
        """Modal coordinates η (..., n) [kg^(1/2) m] from relative slopes ψ_s − ψ_r (..., S) [rad].

        Args:
            rel_slopes: relative slopes ψ_s − ψ_r (..., S) [rad].

        Returns:
            η (..., n) [kg^(1/2) m].
        """
        return torch.matmul(rel_slopes, self.gain.t())

    @torch.jit.export
    def tip_deflection(self, eta: Tensor) -> Tensor:
        """w(L) (...) [m].

        Args:
            eta: modal coordinates η (..., n) [kg^(1/2) m].

        Returns:
            w(L) (...) [m].
        """
        return torch.matmul(eta, self.tip_row)

    @torch.jit.export
    def tip_slope(self, eta: Tensor) -> Tensor:
        """w′(L) (...) [rad].

        Args:
            eta: modal coordinates η (..., n) [kg^(1/2) m].

        Returns:
            w′(L) (...) [rad].
        """
        return torch.matmul(eta, self.tip_slope_row)

    @torch.jit.export
    def base_curvature(self, eta: Tensor) -> Tensor:
        """w″(0) (...) [1/m].

        Args:
            eta: modal coordinates η (..., n) [kg^(1/2) m].

        Returns:
            w″(0) (...) [1/m].
        """
        return torch.matmul(eta, self.base_curvature_row)

    @torch.jit.export
    def reference_slope(self, eta: Tensor) -> Tensor:
        """w′(l_r) (...) [rad]: subtract from the reference IMU angle to get the rigid link angle.

        Args:
            eta: modal coordinates η (..., n) [kg^(1/2) m].

        Returns:
            w′(l_r) (...) [rad].
        """
        return torch.matmul(eta, self.ref_slope_row)

    @torch.jit.export
    def deflection(self, eta: Tensor) -> Tensor:
        """w(ξ) on ``grid`` (..., P) [m].

        Args:
            eta: modal coordinates η (..., n) [kg^(1/2) m].

        Returns:
            w at the ``grid`` points (..., P) [m].
        """
        return torch.matmul(eta, self.grid_rows.t())
