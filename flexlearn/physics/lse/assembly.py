"""Assembly of the CPR statics residual and tangent by virtual work (seed 003, Sec. V-A to V-D).

A mixin of `CPRModel`: external loads on the nodes and the platform (dead world-frame wrenches, lumped
gravity, the constant-tension pulley with its load stiffness), the rod-local residual (R, 12N) and tangent
(R, 12N, 12N) from the element kernels of :mod:`flexlearn.physics.lse.fused` (or the reference ones of
:mod:`flexlearn.physics.lse.element`), and ∂r/∂θ for the warm-start predictor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional, Union

import numpy as np
import torch
from torch import Tensor

from flexlearn.physics.lse.compiled.elements import element_residual_nb, element_tangent_nb
from flexlearn.physics.lse.compiled.linalg import HAVE_NUMBA
from flexlearn.physics.lse.element import ElementState, element_forces, element_tangent
from flexlearn.physics.lse.fused import ElementCache, element_residual, element_tangent_fused, hat
from flexlearn.physics.lse.state import Loads, motor_twist

__all__ = ["AssemblyMixin", "ResidualParts"]


class ResidualParts(NamedTuple):
    """What :meth:`AssemblyMixin.residual` computed that :meth:`AssemblyMixin.tangent` reuses at the same state.

    ``cache``: the element kernels' input or cache (numba arrays, `ElementCache` or `ElementState`, by
    ``elements``); ``beta`` (R, N, 6); ``nodes`` (R, N+1, 4, 4) [m]; ``mb``, ``fb`` (R, N+1, 3): the dead nodal
    moments [N m] and forces [N] in the node frames; ``me``, ``fe`` (3,): the platform's in its frame; ``pul``: the
    pulley force and its stiffness, or None; ``g_ee`` (4, 4) [m].
    """

    cache: Union[tuple, ElementCache, ElementState]
    beta: Tensor
    nodes: Tensor
    mb: Tensor
    fb: Tensor
    me: Tensor
    fe: Tensor
    pul: Optional[tuple]
    g_ee: Tensor


class AssemblyMixin:
    """Residual and tangent of `CPRModel` (uses its buffers and projections). ``elements`` picks the element
    kernels: ``"numba"`` (:mod:`flexlearn.physics.lse.compiled.elements`, where nothing needs gradients; else as
    ``"fused"``), ``"fused"`` (:mod:`flexlearn.physics.lse.fused`) or ``"reference"`` (element.py); same values
    to round-off (the choice of :func:`flexlearn.physics.lse.backend.plan`)."""

    # the model's sizes and buffers (float64, set by `CPRModel.__init__`; shapes and units there), declared
    # here for the type checker
    n_rods: int
    n_elements: int
    n_y: int  # rod-local unknowns besides the platform twist: 12N - 6
    motor_axis: Tensor
    motor_pivot: Tensor
    rod_motor: Tensor
    base_pose0: Tensor
    tip_local: Tensor
    lengths: Tensor
    youngs_modulus: Tensor
    shear_modulus: Tensor
    area: Tensor
    i1: Tensor
    i2: Tensor
    torsion: Tensor
    density: Tensor
    xi0: Tensor
    gravity: Tensor
    platform_mass: Tensor
    motor_limits: Tensor
    proj: Tensor
    proj_nodes: Tensor
    proj_t: Tensor
    proj_cat_t: Tensor
    proj_cat: Tensor
    proj_nodes_cat_t: Tensor

    if TYPE_CHECKING:  # kinematics of `CPRModel` used here

        def all_nodes(self, theta: Tensor, g_ee: Tensor, g_int: Tensor) -> Tensor: ...

        def stiffness(self) -> Tensor: ...

        def element_lengths(self) -> Tensor: ...

    def node_loads(self, nodes: Tensor, loads: Loads) -> Tensor:
        """World [moment; force] on every node (R, N+1, 6): gravity lumped (½ ρ A h per element end) + dead.

        Args:
            nodes: All nodal poses (R, N+1, 4, 4) [m]; sets the dtype and device.
            loads: The external loads (gravity and ``node_wrenches`` are used).

        Returns:
            World [moment [N·m]; force [N]] (R, N+1, 6) on every node.
        """
        r, n = self.n_rods, self.n_elements
        w = nodes.new_zeros(r, n + 1, 6)
        if loads.gravity:
            m_el = self.density * self.area * self.lengths / n  # (R,)
            lump = torch.full((n + 1,), 1.0, dtype=nodes.dtype)
            lump[0] = 0.5
            lump[-1] = 0.5
            f = (m_el[:, None] * lump[None, :])[..., None] * (loads.gravity_scale * self.gravity)
            w = w + torch.cat([torch.zeros_like(f), f], -1)
        if loads.node_wrenches is not None:
            w = w + loads.node_wrenches.to(w.dtype)
        return w

    def platform_load(self, g_ee: Tensor, loads: Loads) -> Tensor:
        """World [moment; force] (6,) on the platform origin, without the pulley.

        Args:
            g_ee: Platform pose (4, 4); sets the dtype.
            loads: The external loads (gravity and ``ee_wrench`` are used; the pulley is not).

        Returns:
            World [moment [N·m]; force [N]] (6,) on the platform origin.
        """
        w = g_ee.new_zeros(6)
        if loads.gravity:
            w = w + torch.cat([g_ee.new_zeros(3), loads.gravity_scale * self.platform_mass * self.gravity])
        if loads.ee_wrench is not None:
            w = w + loads.ee_wrench.to(w.dtype)
        return w

    def _pulley_force(self, g_ee: Tensor, loads: Loads) -> Optional[tuple[Tensor, Tensor]]:
        if loads.pulley_position is None or loads.pulley_tension is None:
            return None
        d = loads.pulley_position.to(g_ee.dtype) - g_ee[:3, 3]
        dist = torch.linalg.vector_norm(d)
        u = d / dist
        tension = loads.pulley_tension.to(g_ee.dtype)
        f = tension * u
        df_dp = (tension / dist) * (u[:, None] * u[None, :] - torch.eye(3, dtype=g_ee.dtype))
        return f, df_dp

    def assemble(
        self,
        theta: Tensor,
        g_ee: Tensor,
        g_int: Tensor,
        beta: Tensor,
        loads: Loads,
        tangent: bool,
        elements: str = "fused",
    ):
        """Rod-local residuals (R, 12N), rod-local tangents (R, 12N, 12N) or None, platform terms (6,), (6, 6).

        Residual by virtual work: ``r = Σ P_{k,e}ᵀ r_{k,e} - Σ D_iᵀ F_i`` (seed Sec. V-A/V-B/V-C) with F_i the
        body wrench of the external loads; tangent ``K_t = Σ P_{k,e}ᵀ H_{k,e} P_{k,e}`` + load stiffness
        (seed Sec. V-D). See :meth:`residual` and :meth:`tangent` (the two halves).

        Args:
            theta: Motor angles (M,) [rad].
            g_ee: Platform pose (4, 4) [m].
            g_int: Interior node poses (R, N-1, 4, 4) [m].
            beta: Element strain forces (R, N, 6).
            loads: The external loads.
            tangent: Whether the tangents are assembled too.
            elements: Element kernels: "fused", "numba" or the reference ("lie").
        """
        res, res_ee, ctx = self.residual(theta, g_ee, g_int, beta, loads, elements)
        if not tangent:
            return res, None, res_ee, None
        kt, kee, _ = self.tangent(ctx)
        return res, kt, res_ee, kee

    def residual(self, theta: Tensor, g_ee: Tensor, g_int: Tensor, beta: Tensor, loads: Loads, elements: str = "fused"):
        """Residual half of :meth:`assemble`: ``(res (R, 12N), res_ee (6,), ctx)``; ctx feeds :meth:`tangent`.

        Args:
            theta: Motor angles (M,) [rad].
            g_ee: Platform pose (4, 4) [m].
            g_int: Interior node poses (R, N-1, 4, 4) [m].
            beta: Element strain forces (R, N, 6).
            loads: The external loads.
            elements: Element kernels: "fused", "numba" or the reference ("lie").
        """
        r, n = self.n_rods, self.n_elements
        nodes = self.all_nodes(theta, g_ee, g_int)
        k = self.stiffness()[:, None, :].expand(r, n, 6)
        xi0 = self.xi0[:, None, :].expand(r, n, 6)
        # the tangent's input: the numba kernels' arrays, the fused kernels' cache or the reference state
        cache: tuple[np.ndarray, ...] | ElementCache | ElementState
        if (
            elements == "numba"
            and HAVE_NUMBA
            and not (nodes.requires_grad or beta.requires_grad or k.requires_grad or xi0.requires_grad)
        ):
            # compiled kernels (flexlearn.physics.lse.compiled.elements): the inputs kept as the tangent's "cache"
            cache = tuple(
                t.detach().reshape((r * n,) + t.shape[2:]).contiguous().numpy()
                for t in (nodes[:, :-1], nodes[:, 1:], beta, self.element_lengths(), k, xi0)
            )
            re = torch.from_numpy(element_residual_nb(*cache)).reshape(r, n, 18)
        elif elements in ("fused", "numba"):
            re, cache = element_residual(
                nodes[:, :-1], nodes[:, 1:], beta, self.element_lengths(), k, xi0
            )  # (R, N, 18)
        else:  # the reference element functions (flexlearn.lie kernels), same values to round-off
            state = element_forces(nodes[:, :-1], nodes[:, 1:], beta, self.element_lengths(), k, xi0)
            re = torch.cat([state.r_a, state.r_b, state.r_beta], -1)
            cache = state
        # dead nodal loads: body wrench [Rᵀ m; Rᵀ f]
        wn = self.node_loads(nodes, loads)
        rot_t = nodes[..., :3, :3].transpose(-1, -2)
        mb = (rot_t @ wn[..., :3, None]).squeeze(-1)
        fb = (rot_t @ wn[..., 3:, None]).squeeze(-1)
        res = (self.proj_cat_t @ re.reshape(r, 18 * n, 1)).squeeze(-1) - (
            self.proj_nodes_cat_t @ torch.cat([mb, fb], -1).reshape(r, 6 * n + 6, 1)
        ).squeeze(-1)
        # platform loads
        we = self.platform_load(g_ee, loads)
        re_t = g_ee[:3, :3].transpose(-1, -2)
        me = re_t @ we[:3]
        fe = re_t @ we[3:]
        pul = self._pulley_force(g_ee, loads)
        if pul is not None:
            fe = fe + re_t @ pul[0]
        res_ee = -torch.cat([me, fe])
        return res, res_ee, ResidualParts(cache, beta, nodes, mb, fb, me, fe, pul, g_ee)

    def tangent(self, ctx: ResidualParts):
        """Tangent half of :meth:`assemble`: ``(K_t (R, 12N, 12N), K_ee (6, 6), ∂r/∂θ (R, 12N, M))``.

        ∂r/∂θ (the motors move the base nodes, ``δζ_{k,0} = Ad_{g_{k,0}⁻¹} S_m δθ_m``) feeds the tangent
        predictor of warm starts (:meth:`solve`).

        Args:
            ctx: The third result of :meth:`residual` at the same state.
        """
        cache, beta, nodes, mb, fb, me, fe, pul, g_ee = ctx
        r, n = self.n_rods, self.n_elements
        if isinstance(cache, ElementCache):  # elements "fused" (or "numba" where gradients are needed)
            hmat = element_tangent_fused(cache, beta)  # (R, N, 18, 18)
        elif isinstance(cache, ElementState):  # the reference element functions
            hmat = element_tangent(cache, beta, self.element_lengths(), self.stiffness()[:, None, :].expand_as(beta))
        else:  # the numba kernels' input arrays
            hmat = torch.from_numpy(element_tangent_nb(*cache)).reshape(r, n, 18, 18)
        # load stiffness of the dead nodal loads (node j = 1..N): added to element j-1's (ζ_b, ζ_b) block
        z = torch.zeros_like(mb[:, 1:, :, None].expand(r, n, 3, 3))
        kn = -torch.cat([torch.cat([hat(mb[:, 1:]), z], -1), torch.cat([hat(fb[:, 1:]), z], -1)], -2)  # (R, N, 6, 6)
        hmat = hmat + torch.nn.functional.pad(kn, (6, 6, 6, 6))
        x = (self.proj_t @ hmat).permute(0, 2, 1, 3).reshape(r, 12 * n, 18 * n)
        kt = x @ self.proj_cat  # (R, 12N, 12N)
        z33 = torch.zeros(3, 3, dtype=g_ee.dtype)
        kee = -torch.cat([torch.cat([hat(me), z33], -1), torch.cat([hat(fe), z33], -1)], -2)
        if pul is not None:
            re_t = g_ee[:3, :3].transpose(-1, -2)
            kee = kee.clone()
            kee[3:, 3:] = kee[3:, 3:] - re_t @ pul[1] @ g_ee[:3, :3]
        m = self.motor_axis.shape[0]
        drdth = kt.new_zeros(r, 12 * n, m)
        if m > 0:
            s = motor_twist(self.motor_axis, self.motor_pivot)[self.rod_motor.clamp_min(0)]  # (R, 6) world
            rb = nodes[:, 0, :3, :3].transpose(-1, -2)
            pb = nodes[:, 0, :3, 3]
            dz0 = torch.cat(
                [
                    (rb @ s[:, :3, None]).squeeze(-1),
                    (rb @ (s[:, 3:] - torch.linalg.cross(pb, s[:, :3]))[..., None]).squeeze(-1),
                ],
                -1,
            )
            col = x[..., :6] @ dz0[..., None]  # (R, 12N, 1): element 0, ζ_a
            onehot = torch.nn.functional.one_hot(self.rod_motor.clamp_min(0), m).to(kt.dtype)
            onehot = onehot * (self.rod_motor >= 0).to(kt.dtype)[:, None]
            drdth = col * onehot[:, None, :]
        return kt, kee, drdth
