"""Physics-informed direction model: the module's joint identified through the coil's Biot–Savart field.

Forward model (seed 002, III-A/B1; the joint of `flexlearn.sim.rig`, parent frame z up, straight child e = −ẑ):
the label ℓ (parent axis in the accelerometer frame) gives the joint's parent axis v = H ℓ in the child board frame
(H = exp([h]×), the sensor's tilt on its disk) and the direction u = F v, F = diag(1, 1, −1) (no twist); with
R = exp(rotation_between(e, u)) the sensor sits at p = (0, 0, −(a + δa)) + (b + δb) u + R (s₀ + δs), the placed coil
gives B(p) = R_c B₀(R_cᵀ(p − c)), R_c = exp([t_x, t_y, 0]×), and the calibrated reading is x ∝ G Rᵀ B(p)
(G = exp([g]×): what remains of the sensor's rotation after W, magnetometer axes included).

`CoilDirectionModel.identify` fits θ = (g, h, δb, δa, δs, c, t) — 16 parameters — to a module's stationary poses
by L-BFGS on Σ ∠(x̂(ℓ_n; θ), x_n)² / σ² + Σ (θ_k / σ_k)², with the priors σ_k the module tolerances
(`flexlearn.sim.rig_config.ModuleTolerances`, docs/modules.md). `CoilDirectionModel.forward` inverts the model
per fix: the parent axis v (2 tangent parameters about straight) that minimises ∠(x̂(v), x), L-BFGS from
``init`` (e.g. the calibrated MLP's answer) or from straight. The model knows the field's physics, so it does not
stop at the trained cap; in simulation the coil model is the simulator's own (exact up to the tolerances it
identifies), on hardware its mismatch is what a learned residual would take.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from flexlearn.lie import rotation_between, so3_exp
from flexlearn.sensing.coil import PlanarCoil
from flexlearn.sim.rig_config import JointGeometry, ModuleTolerances

__all__ = ["CoilDirectionModel"]

_FLIP = torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
_E = torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64)


def angle_between(a: Tensor, b: Tensor) -> Tensor:
    """The angle between vectors ``a`` and ``b`` [rad], in [0, π]: atan2(‖a × b‖, a·b), accurate near 0 and π.

    Args:
        a: (..., 3) vectors (any length).
        b: (..., 3) vectors, broadcast against ``a``.

    Returns:
        (...) angles [rad].
    """
    return torch.atan2(torch.linalg.vector_norm(torch.linalg.cross(a, b, dim=-1), dim=-1), (a * b).sum(-1))


class CoilDirectionModel(torch.nn.Module):
    """Identified joint + coil of one module; ``forward(x)`` → parent axis (N, 3) in the accelerometer frame."""

    # buffers: magnetometer offset s0 (3,) [m], prior σ (16,) and the identified parameters θ (16,)
    s0: Tensor
    prior: Tensor
    theta: Tensor

    def __init__(
        self,
        geometry: Optional[JointGeometry] = None,
        tolerances: Optional[ModuleTolerances] = None,
        coil: Optional[PlanarCoil] = None,
        mount_prior: float = math.radians(1.5),
    ) -> None:
        super().__init__()
        g, tol = geometry or JointGeometry(), tolerances or ModuleTolerances()
        self.coil = coil or PlanarCoil()
        self.a, self.b = g.platform_offset + g.pivot_to_next, g.pivot_radius
        self.register_buffer("s0", torch.tensor(g.magnetometer_offset, dtype=torch.float64))
        sigma = [mount_prior] * 6 + [
            tol.pivot_radius,
            tol.joint_length,
            *tol.sensor_offset,
            *tol.coil_offset,
            tol.coil_tilt,
            tol.coil_tilt,
        ]
        self.register_buffer("prior", torch.tensor(sigma, dtype=torch.float64).clamp_min(1e-9))
        self.register_buffer("theta", torch.zeros(16, dtype=torch.float64))

    def field_direction(self, v: Tensor, theta: Optional[Tensor] = None) -> Tensor:
        """Unit calibrated field x̂ (N, 3) for joint parent axes v (N, 3) in the child board frame.

        Args:
            v: joint parent axes (N, 3) in the child board frame (any nonzero length).
            theta: the 16 parameters θ = (g, h, δb, δa, δs, c, t); None: the identified ``self.theta``.

        Returns:
            x̂ (N, 3), unit.
        """
        th = self.theta if theta is None else theta
        g, _, db, da, ds, c, t = th[:3], th[3:6], th[6], th[7], th[8:11], th[11:14], th[14:16]
        u = _FLIP * v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)
        r = so3_exp(rotation_between(_E.expand_as(u), u))
        pos = (
            torch.stack([torch.zeros_like(da), torch.zeros_like(da), -(self.a + da)])
            + (self.b + db) * u
            + r @ (self.s0 + ds)
        )
        rc = so3_exp(torch.cat([t, t.new_zeros(1)]))
        b = self.coil.field((pos - c) @ rc) @ rc.T
        x = (b.unsqueeze(-2) @ r).squeeze(-2) @ so3_exp(g).T
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)

    def identify(
        self, delta_b: Any, label: Any, sigma_fix: float = math.radians(0.3), iters: int = 100
    ) -> dict[str, Any]:
        """Fit θ to stationary poses by L-BFGS (see the module docstring); returns the fit report.

        Args:
            delta_b: calibrated fields ΔB (N, 3).
            label: the poses' labels ℓ (N, 3).
            sigma_fix: per-fix angle noise σ [rad] of the fit's objective.
            iters: the most L-BFGS iterations.

        Returns:
            ``{"n_poses", "median_residual_deg_before", "median_residual_deg_after" [deg], "theta"}``.
        """
        x = torch.as_tensor(np.asarray(delta_b), dtype=torch.float64)
        lab = torch.as_tensor(np.asarray(label), dtype=torch.float64)
        x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        theta = torch.zeros(16, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS(
            [theta], lr=1.0, max_iter=iters, tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe"
        )

        def residual(th: Tensor) -> Tensor:
            v = lab @ so3_exp(th[3:6]).T
            return angle_between(self.field_direction(v, th), x)

        def closure() -> Tensor:
            opt.zero_grad()
            loss = 0.5 * (residual(theta) ** 2).sum() / sigma_fix**2 + 0.5 * ((theta / self.prior) ** 2).sum()
            loss.backward()
            return loss

        with torch.enable_grad():
            before = float(residual(torch.zeros(16, dtype=torch.float64)).detach().median())
            opt.step(closure)
        self.theta.copy_(theta.detach())
        after = residual(self.theta).detach()
        return {
            "n_poses": int(x.shape[0]),
            "median_residual_deg_before": math.degrees(before),
            "median_residual_deg_after": math.degrees(float(after.median())),
            "theta": self.theta.tolist(),
        }

    def forward(self, delta_b: Tensor, init: Optional[Tensor] = None, iters: int = 30) -> Tensor:
        """Parent axes ℓ (N, 3) in the accelerometer frame that explain the calibrated fields ``delta_b`` (N, 3).

        Args:
            delta_b: calibrated fields (N, 3).
            init: start parent axes (N, 3) in the accelerometer frame (e.g. the calibrated MLP's answer);
                None: straight.
            iters: the most L-BFGS iterations.

        Returns:
            ℓ (N, 3), unit, float64.
        """
        x = delta_b.to(torch.float64)
        x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        h = so3_exp(self.theta[3:6])
        v0 = (
            (init.to(torch.float64) @ h.T) if init is not None else _FLIP.abs().new_tensor([0.0, 0.0, 1.0]).expand_as(x)
        )
        pq = (v0[:, :2] / v0[:, 2:3]).clone().requires_grad_(True)  # tangent-plane parameters of v
        opt = torch.optim.LBFGS(
            [pq], lr=1.0, max_iter=iters, tolerance_grad=1e-12, tolerance_change=1e-16, line_search_fn="strong_wolfe"
        )

        def closure() -> Tensor:
            opt.zero_grad()
            v = torch.cat([pq, torch.ones_like(pq[:, :1])], dim=-1)
            loss = (angle_between(self.field_direction(v), x) ** 2).sum()
            loss.backward()
            return loss

        with torch.enable_grad():
            opt.step(closure)
        v = torch.cat([pq.detach(), torch.ones_like(pq[:, :1])], dim=-1)
        v = v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)
        return v @ h  # ℓ = Hᵀ v
