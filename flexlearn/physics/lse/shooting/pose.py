"""Shooting baseline for the inverse pose statics of a length-actuated CPR (the reference of `pose_statics`).

The classic formulation (Till, Aloi & Rucker, IJRR 2019, the CSG example): every rod is integrated from its
fixed base with the Cosserat ODE ``p' = R v, R' = R u^, n' = 0, m' = -p' × n`` (``v = e₃ + K_se⁻¹ Rᵀ n``,
``u = K_bt⁻¹ Rᵀ m``; no distributed load) by RK4; unknowns per rod: the base force n₀ (3), the base moment m₀
(3, in the base frame; its axial component fixed at 0 when the platform attachment may twist) and the length L; residual
per rod: tip position (3) and tip axis direction (2: x, y of ``R_tipᵀ`` against the attachment frame, the rotation
about the axis left free) or full orientation (3), plus the platform wrench balance (6). Newton with a
forward-difference Jacobian (all perturbations integrated in one vectorised RK4 sweep). numpy, float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from flexlearn.physics.lse.errors import ShootingError

__all__ = ["PoseShot", "ShootingSettings", "shoot_pose"]


def _rk4_rods(p0, r0, n0, m0, lengths, kd, steps):
    """Integrate rods (B,) from base positions p0 (B, 3), rotations r0 (B, 3, 3), world force/moment n0, m0 (B, 3)
    over lengths (B,) with ``steps`` RK4 steps; kd (B, 6) = [EI₁, EI₂, GJ, GA, GA, EA]. Returns tip p, R, n, m."""
    kbt, kse = kd[:, :3], kd[:, 3:]

    def f(p, rm, n, m):
        v = np.einsum("bji,bj->bi", rm, n) / kse
        v[:, 2] += 1.0
        u = np.einsum("bji,bj->bi", rm, m) / kbt
        ps = np.einsum("bij,bj->bi", rm, v)
        uh = np.zeros(u.shape + (3,))
        uh[:, 0, 1], uh[:, 0, 2], uh[:, 1, 2] = -u[:, 2], u[:, 1], -u[:, 0]
        uh[:, 1, 0], uh[:, 2, 0], uh[:, 2, 1] = u[:, 2], -u[:, 1], u[:, 0]
        return ps, rm @ uh, -np.cross(ps, n)

    p, rm, m = p0.copy(), r0.copy(), m0.copy()
    ds = (lengths / steps)[:, None]
    for _ in range(steps):
        k1 = f(p, rm, n0, m)
        k2 = f(p + ds / 2 * k1[0], rm + ds[..., None] / 2 * k1[1], n0, m + ds / 2 * k1[2])
        k3 = f(p + ds / 2 * k2[0], rm + ds[..., None] / 2 * k2[1], n0, m + ds / 2 * k2[2])
        k4 = f(p + ds * k3[0], rm + ds[..., None] * k3[1], n0, m + ds * k3[2])
        p = p + ds / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        rm = rm + ds[..., None] / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        m = m + ds / 6 * (k1[2] + 2 * k2[2] + 2 * k3[2] + k4[2])
    return p, rm, n0, m


def _residual(x, base, attach_world, platform_pos, kd, steps, twist_free):
    """Residuals (B, 36) of unknown vectors x (B, 36) = [n₀ (3), m₀ (2 or 3) per rod …, L (6)]."""
    nb = x.shape[0]
    nm = 2 if twist_free else 3
    per = 3 + nm
    xr = x[:, : 6 * per].reshape(nb, 6, per)
    n0 = xr[..., :3]
    m0 = np.zeros((nb, 6, 3))
    m0[..., :nm] = xr[..., 3:]
    m0 = np.einsum("kij,bkj->bki", base[:, :3, :3], m0)  # given in the base frame (axial: its z)
    lengths = x[:, 6 * per :]

    def rep(a):
        return np.broadcast_to(a, (nb,) + a.shape).reshape((-1,) + a.shape[1:])

    p, rm, n, m = _rk4_rods(
        rep(base[:, :3, 3]),
        rep(base[:, :3, :3]),
        n0.reshape(-1, 3),
        m0.reshape(-1, 3),
        lengths.reshape(-1),
        rep(kd),
        steps,
    )
    p, rm, n, m = p.reshape(nb, 6, 3), rm.reshape(nb, 6, 3, 3), n.reshape(nb, 6, 3), m.reshape(nb, 6, 3)
    target = attach_world
    pos = p - target[None, :, :3, 3]
    # orientation error: inv_hat(R_d ᵀ R - Rᵀ R_d) / 2 in the attachment frame
    rel = np.einsum("kji,bkjl->bkil", target[..., :3, :3], rm)
    err = (
        0.5
        * np.stack(
            [rel[..., 2, 1] - rel[..., 1, 2], rel[..., 0, 2] - rel[..., 2, 0], rel[..., 1, 0] - rel[..., 0, 1]], -1
        )[..., :nm]
    )
    arm = target[None, :, :3, 3] - platform_pos
    force = -n.sum(1)
    moment = -(m + np.cross(np.broadcast_to(arm, n.shape), n)).sum(1)
    return np.concatenate([np.concatenate([pos, err], -1).reshape(nb, -1), force, moment], -1)


@dataclass(frozen=True)
class ShootingSettings:
    """Options of :func:`shoot_pose`.

    Args:
        twist_free: The platform attachments turn freely about the rod axis (the base moment's axial component is
            fixed at 0 and the tip's rotation about the axis is left free).
        steps: RK4 steps per rod.
        tol: Newton stops when the residual's sum of squares is ≤ this (mixed units: m², rad², N², (N·m)²).
        max_iter: Newton iterations before :class:`~flexlearn.physics.lse.errors.ShootingError`.
        fd: Relative forward-difference step of the Jacobian (times max(1, |x_i|)).
    """

    twist_free: bool = True
    steps: int = 39
    tol: float = 1e-20
    max_iter: int = 50
    fd: float = 1e-7


class PoseShot(NamedTuple):
    """A solved inverse pose by shooting: the unknowns x (36,) ([n₀, m₀ per rod, L]), the rod lengths (6,) [m] and
    the Newton iterations taken."""

    x: np.ndarray
    lengths: np.ndarray
    iterations: int


def shoot_pose(base, attach, g_ee, kd, x0=None, settings: ShootingSettings = ShootingSettings()) -> PoseShot:
    """Rod lengths and base wrenches of the six rods for the platform pose ``g_ee`` (4, 4).

    Newton with a forward-difference Jacobian until the residual's sum of squares ≤ ``settings.tol``.

    Args:
        base: (6, 4, 4) rod base poses (rod along body z).
        attach: (6, 4, 4) attachment frames in the platform frame.
        g_ee: (4, 4) platform pose.
        kd: (6, 6) section stiffness [EI₁, EI₂, GJ, GA, GA, EA] per rod.
        x0: (36,) a start ([n₀, m₀ per rod, L]; default: zero wrenches, straight lengths).
        settings: :class:`ShootingSettings`.

    Returns:
        :class:`PoseShot` (x (36,), lengths (6,), iterations).

    Raises:
        ShootingError: No solution within ``settings.max_iter`` iterations.
    """
    twist_free, max_iter = settings.twist_free, settings.max_iter
    attach_world = g_ee[None] @ attach
    if x0 is None:
        nm = 2 if twist_free else 3
        lengths = np.linalg.norm(attach_world[:, :3, 3] - base[:, :3, 3], axis=1)
        x0 = np.concatenate([np.zeros(6 * (3 + nm)), lengths])
    x = np.array(x0, dtype=np.float64)
    args = (base, attach_world, g_ee[:3, 3], kd, settings.steps, twist_free)
    for it in range(max_iter + 1):
        r = _residual(x[None], *args)[0]
        if float(r @ r) <= settings.tol:
            return PoseShot(x, x[-6:].copy(), it)
        if it == max_iter:
            break
        h = settings.fd * np.maximum(1.0, np.abs(x))
        xs = x[None] + np.diag(h)
        jac = ((_residual(xs, *args) - r[None]) / h[:, None]).T
        x = x - np.linalg.lstsq(jac, r, rcond=None)[0]
    raise ShootingError("inverse pose shooting did not converge", float(np.linalg.norm(r)), max_iter)
