"""Outputs of the planar flexible arm plant (`flexlearn.physics.arm.lagrangian.FlexibleArmPlant`, a mixin).

From the generalised coordinates ``q = [θ (n), η (Σ m_i)]`` (B, N) [rad, kg^(1/2) m] and their rates:
tip deflection ``w_i(L_i) = Φ_i(L_i)·η_i`` [m], tip slope ``w_i′(L_i)`` [rad], base curvature ``w_i″(0)``
[1/m], the end-effector pose (x, y, angle) [m, m, rad], and noise-free IMU frames in the link frame (x joint
axis, y along, z normal; seed 000, §II): specific force ``R(ψ)ᵀ(p̈ − g)`` [m/s²] and gyro ``(ψ̇, 0, 0)``
[rad/s], ψ = φ_i + w_i′(ξ) the IMU's absolute inclination, with

    p̈ = b̈ + R(φ)(−φ̇²ξ − φ̈w − 2φ̇ẇ, φ̈ξ − φ̇²w + ẅ)

in each link's base frame (checked against nested forward-mode autodiff, :meth:`ArmOutputsMixin.imu_autodiff`).
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import Tensor
from torch.func import jvp

from flexlearn.physics.modal.link import FlexibleLink

__all__ = ["ArmOutputsMixin"]

f64 = torch.float64


class ArmOutputsMixin:
    """Tip quantities, end-effector pose and IMU readings of `FlexibleArmPlant` (uses its sizes and buffers)."""

    # the plant's sizes (set by `FlexibleArmPlant.__init__`), declared here for the type checker: joints n,
    # modes per link m, gravity g [m/s²], the η slice (start, stop) of each link in q, link lengths [m], and the
    # clamped links of the assumed modes. Buffers tip{i}, tipslope{i}, curv0_{i} (m_i,) are read by getattr.
    n: int
    m: list[int]
    g: float
    slices: list[tuple[int, int]]
    lengths: list[float]
    links: list[FlexibleLink]

    def modal_coordinates(self, q: Tensor, i: int) -> Tensor:
        """Link i's modal coordinates η_i (B, m_i) of q (B, N).

        Args:
            q: generalised coordinates (B, N).
            i: the link's index.
        """
        a, b = self.slices[i]
        return q[..., a:b]

    def tip_quantities(self, q: Tensor) -> dict:
        """Tip deflection, tip slope and base curvature of each link of the truth state.

        Args:
            q: generalised coordinates (B, N).

        Returns:
            ``{"tip": w_i(L_i) [m], "tip_slope": w_i′(L_i) [rad], "base_curvature": w_i″(0) [1/m]}``, each (B, n).
        """
        out: dict[str, list[Tensor]] = {"tip": [], "tip_slope": [], "base_curvature": []}
        for i in range(self.n):
            eta = self.modal_coordinates(q, i)
            out["tip"].append(eta @ getattr(self, f"tip{i}"))
            out["tip_slope"].append(eta @ getattr(self, f"tipslope{i}"))
            out["base_curvature"].append(eta @ getattr(self, f"curv0_{i}"))
        return {k: torch.stack(v, -1) for k, v in out.items()}

    def ee_pose(self, q: Tensor) -> Tensor:
        """End-effector pose: the deformed tip of the last link.

        Args:
            q: generalised coordinates (B, N).

        Returns:
            (x, y, angle) (B, 3) [m, m, rad].
        """
        tq = self.tip_quantities(q)
        phi = torch.cumsum(q[:, : self.n], -1) + torch.cumsum(tq["tip_slope"], -1) - tq["tip_slope"]
        c, s = torch.cos(phi), torch.sin(phi)
        L = torch.tensor(self.lengths, dtype=q.dtype)
        x = (c * L - s * tq["tip"]).sum(-1)
        y = (s * L + c * tq["tip"]).sum(-1)
        return torch.stack([x, y, phi[:, -1] + tq["tip_slope"][:, -1]], -1)

    def imu_rows(self, imu_positions: Sequence[Sequence[float]]) -> list:
        """Mode-shape rows (Φ, Φ′) at the IMU positions of each link.

        Args:
            imu_positions: per link, the IMU positions along it [m].

        Returns:
            Per link, (Φ, Φ′) at its IMUs, each (S_i, m_i).
        """
        rows = []
        for i, pos in enumerate(imu_positions):
            xi = torch.tensor(list(pos), dtype=f64)
            rows.append((self.links[i].mode_shapes(xi, self.m[i], 0), self.links[i].mode_shapes(xi, self.m[i], 1)))
        return rows

    def _imu_pose(self, q: Tensor, rows: list, xis: list) -> tuple[Tensor, Tensor]:
        """Q (B, N) → IMU positions (B, S, 2) [m] and absolute inclinations (B, S) [rad]."""
        bx = torch.zeros_like(q[:, 0])
        by = torch.zeros_like(q[:, 0])
        phi = q[:, 0]
        P, A = [], []
        for i in range(self.n):
            if i > 0:
                phi = phi + q[:, i]
            eta = self.modal_coordinates(q, i)
            R0, R1 = rows[i]
            w, sl = eta @ R0.t(), eta @ R1.t()
            c, s = torch.cos(phi).unsqueeze(-1), torch.sin(phi).unsqueeze(-1)
            P.append(torch.stack([bx.unsqueeze(-1) + c * xis[i] - s * w, by.unsqueeze(-1) + s * xis[i] + c * w], -1))
            A.append(phi.unsqueeze(-1) + sl)
            L = self.lengths[i]
            wt = eta @ getattr(self, f"tip{i}")
            bx, by = bx + c[:, 0] * L - s[:, 0] * wt, by + s[:, 0] * L + c[:, 0] * wt
            phi = phi + eta @ getattr(self, f"tipslope{i}")
        return torch.cat(P, 1), torch.cat(A, 1)

    def imu(
        self, q: Tensor, qd: Tensor, qdd: Tensor, imu_positions: Sequence[Sequence[float]], rows: Optional[list] = None
    ) -> tuple[Tensor, Tensor]:
        """Noise-free IMU frames in the link frame (x joint axis, y along, z normal; seed 000, §II).

        Specific force ``R(ψ)ᵀ(p̈ − g)`` (B, S, 3) [m/s²] and gyro ``(ψ̇, 0, 0)`` (B, S, 3) [rad/s];
        ψ = φ_i + w_i′(ξ) the IMU's absolute inclination. IMUs ordered link by link.

        ``p̈`` by planar rigid-body kinematics in the link's base frame, exact for the model's geometry:
        ``p̈ = b̈ + R(φ)(−φ̇²ξ − φ̈w − 2φ̇ẇ, φ̈ξ − φ̇²w + ẅ)`` (checked against nested forward-mode autodiff
        of :meth:`_imu_pose` in the tests).

        Args:
            q: generalised coordinates (B, N).
            qd: their rates (B, N).
            qdd: their accelerations (B, N).
            imu_positions: per link, the IMU positions along it [m].
            rows: :meth:`imu_rows` of ``imu_positions``, computed when None.

        Returns:
            ``(acc, gyr)``, each (B, S, 3).
        """
        rows = self.imu_rows(imu_positions) if rows is None else rows
        z = torch.zeros_like(q[:, 0])
        ax, ay = z, z  # base acceleration (world)
        phi, phid, phidd = q[:, 0], qd[:, 0], qdd[:, 0]
        ang_parts: list[Tensor] = []
        rate_parts: list[Tensor] = []
        FX: list[Tensor] = []
        FY: list[Tensor] = []
        for i in range(self.n):
            if i > 0:
                phi, phid, phidd = phi + q[:, i], phid + qd[:, i], phidd + qdd[:, i]
            a, b = self.slices[i]
            eta, etad, etadd = q[:, a:b], qd[:, a:b], qdd[:, a:b]
            xi = torch.cat(
                [torch.tensor(list(imu_positions[i]), dtype=q.dtype), torch.tensor([self.lengths[i]], dtype=q.dtype)]
            )
            R0 = torch.cat([rows[i][0], getattr(self, f"tip{i}").unsqueeze(0)], 0)
            R1 = torch.cat([rows[i][1], getattr(self, f"tipslope{i}").unsqueeze(0)], 0)
            w, wd, wdd = eta @ R0.t(), etad @ R0.t(), etadd @ R0.t()
            sl, sld, sldd = eta @ R1.t(), etad @ R1.t(), etadd @ R1.t()
            p1, p2, p3 = phi.unsqueeze(-1), phid.unsqueeze(-1), phidd.unsqueeze(-1)
            lx = -p2 * p2 * xi - p3 * w - 2.0 * p2 * wd
            ly = p3 * xi - p2 * p2 * w + wdd
            c, s = torch.cos(p1), torch.sin(p1)
            gx = ax.unsqueeze(-1) + c * lx - s * ly
            gy = ay.unsqueeze(-1) + s * lx + c * ly
            ang_parts.append(p1 + sl[:, :-1])
            rate_parts.append(p2 + sld[:, :-1])
            FX.append(gx[:, :-1])
            FY.append(gy[:, :-1])
            ax, ay = gx[:, -1], gy[:, -1]
            phi, phid, phidd = phi + sl[:, -1], phid + sld[:, -1], phidd + sldd[:, -1]
        A, Ad = torch.cat(ang_parts, 1), torch.cat(rate_parts, 1)
        fx, fy_w = torch.cat(FX, 1), torch.cat(FY, 1) + self.g
        c, s = torch.cos(A), torch.sin(A)
        acc = torch.stack([torch.zeros_like(A), c * fx + s * fy_w, -s * fx + c * fy_w], -1)
        gyr = torch.stack([Ad, torch.zeros_like(A), torch.zeros_like(A)], -1)
        return acc, gyr

    def imu_autodiff(
        self, q: Tensor, qd: Tensor, qdd: Tensor, imu_positions: Sequence[Sequence[float]]
    ) -> tuple[Tensor, Tensor]:
        """Reference for :meth:`imu`: the same readings with p̈ and ψ̇ by nested forward-mode autodiff.

        ``jvp`` of the velocity ``jvp`` of the IMU poses. Slow; for tests.

        Args:
            q: generalised coordinates (B, N).
            qd: their rates (B, N).
            qdd: their accelerations (B, N).
            imu_positions: per link, the IMU positions along it [m].

        Returns:
            ``(acc, gyr)``, each (B, S, 3) [m/s², rad/s].
        """
        rows = self.imu_rows(imu_positions)
        xis = [torch.tensor(list(p), dtype=f64) for p in imu_positions]
        pose = lambda z: self._imu_pose(z, rows, xis)  # noqa: E731

        def vel(z, zd):
            """Velocity of the IMU poses: the ``jvp`` of the pose at z along zd.

            Args:
                z: generalised coordinates (B, N).
                zd: their rates (B, N).

            Returns:
                The pose's time derivative.
            """
            return jvp(pose, (z,), (zd,))[1][0]

        (_, A), (_, Ad) = jvp(pose, (q,), (qd,))[:2]  # (outputs, tangents); no aux
        _, Pdd = jvp(vel, (q, qd), (qd, qdd))[:2]
        fx, fy_w = Pdd[..., 0], Pdd[..., 1] + self.g
        c, s = torch.cos(A), torch.sin(A)
        acc = torch.stack([torch.zeros_like(A), c * fx + s * fy_w, -s * fx + c * fy_w], -1)
        gyr = torch.stack([Ad, torch.zeros_like(A), torch.zeros_like(A)], -1)
        return acc, gyr
