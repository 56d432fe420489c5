"""External loads on a Cosserat rod: gravity, point forces, permanent magnets (seed 001, Sec. 4.3,
Remark 1).

The interface is :class:`RodLoad` (a ``typing.Protocol``; :class:`Load` is the base class that gives its
defaults): ``apply(ctx, R, p, t) -> (force, torque)`` with world-frame node forces (B, N+1, 3) [N] and
body-frame node torques (B, N+1, 3) [N m] (either may be None) evaluated at the configuration
(R (B, N+1, 3, 3), p (B, N+1, 3)) and time t [s]. ``ctx`` is the rod's
:class:`~flexlearn.physics.cosserat.context.RodContext` (node masses ``ctx.mass``, node lengths
``ctx.node_lengths``, element rest lengths ``ctx.rest_lengths``, stiffnesses, …). Loads that carry mass
(magnets) report it through ``point_masses(n_nodes)``; the simulation adds it to the lumped node mass (seed 001,
Remark 1: a magnet at the tip adds its whole mass to the tip node) before gravity is evaluated.
``velocity_dependent()`` True declares a load that also reads the node velocities (contact with friction,
:mod:`flexlearn.physics.cosserat.contact`): it implements ``apply_moving(ctx, R, p, v, t)``, which the integrator
calls instead (:func:`load_forces`).
``constant_world_force()`` True declares that ``apply`` returns a world force independent of state and time and
no torque: such a load runs in the fused kernel (:mod:`flexlearn.physics.cosserat.compiled.lgvi`, which
evaluates it once at t = 0).

A load with an energy (for ``record_energy``) also implements :class:`PotentialLoad`:
``potential(ctx, R, p, t) -> (B,)`` [J], one signature for every load, whatever it reads;
:func:`potential_loads` selects those loads and checks the signature once, so that an error raised inside a
potential propagates to the caller.

Magnet (dipole) loads, seed 001, Sec. 4.3: torque ``τ = m × B`` and force ``F = ∇(m·B)`` with the world
moment ``m = R m_body`` of the node that carries the magnet; in the body frame ``τ_body = m_body × Rᵀ B``.
"""

from __future__ import annotations

import inspect
import math
from typing import List, Optional, Protocol, Sequence, Tuple, Union, cast, runtime_checkable

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.fields import Field, as_field

ArrayLike = Union[float, Sequence[float], Tensor]
MU0 = 4e-7 * math.pi * 1.00000000055
"""Vacuum permeability [T m/A] (CODATA 2018)."""


def magnet_moment(remanence: float, volume: float) -> float:
    """Dipole moment magnitude ``|m| = B_r V / μ0`` [A m²] of a uniformly magnetised magnet.

    Seed 001, Sec. 4.3 gives ``B_r ∈ [1.32, 1.37] mT`` for N45: a unit typo, N45 has B_r ≈ 1.32–1.37 **T**;
    with V = 4π mm³ (D = 2 mm, H = 4 mm) this gives |m| ≈ 1.35e-2 A m².

    Args:
        remanence: Remanent flux density B_r [T].
        volume: Magnet volume V [m³].

    Returns:
        Dipole moment magnitude [A·m²].

    Raises:
        ConfigError: If ``volume`` is not positive.
    """
    check(volume > 0, "magnet.volume", volume, "must be > 0 [m^3]")
    return remanence * volume / MU0


def cylinder_magnet(
    diameter: float, height: float, remanence: float = 1.345, density: float = 7500.0
) -> Tuple[float, float]:
    """``(|m| [A m²], mass [kg])`` of a cylindrical magnet; N45 remanence and NdFeB density by default.

    Args:
        diameter: Magnet diameter [m].
        height: Magnet height [m].
        remanence: Remanent flux density B_r [T].
        density: Magnet density [kg/m³].

    Returns:
        Tuple ``(|m| [A·m²], mass [kg])``.
    """
    v = math.pi * diameter**2 / 4.0 * height
    return magnet_moment(remanence, v), density * v


def _batched(v: ArrayLike, name: str) -> Tensor:
    t = torch.as_tensor(v, dtype=torch.float64)
    if not isinstance(v, Tensor):
        t = t.clone()
    check(t.shape[-1:] == (3,), name, tuple(t.shape), "expected shape (3,) or (B, 3)")
    return t


Forces = Tuple[Optional[Tensor], Optional[Tensor]]
"""``(force (B, N+1, 3) world [N] or None, torque (B, N+1, 3) body [N m] or None)`` of a load."""
PointMass = Tuple[int, Tensor, Tensor]
"""``(node, mass [kg] () or (B,), principal inertia [kg m²] (3,) or (B, 3))`` a load adds to a node."""


@runtime_checkable
class RodLoad(Protocol):
    """What :meth:`CosseratRod.simulate <flexlearn.physics.cosserat.rod.CosseratRod.simulate>` needs of a
    load (see the module docstring for shapes and units)."""

    def apply(self, ctx: RodContext, R: Tensor, p: Tensor, t: float) -> Forces:
        """World node forces and body node torques of the load at a state.

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            The :data:`Forces` ``(force, torque)``, each (B, N+1, 3) or None.
        """
        ...

    def point_masses(self, n_nodes: int) -> List[PointMass]:
        """The masses and inertias the load adds to nodes.

        Args:
            n_nodes: Number of nodes N+1 of the rod (resolves negative node indices).

        Returns:
            List of :data:`PointMass`.
        """
        ...

    def constant_world_force(self) -> bool: ...


@runtime_checkable
class PotentialLoad(RodLoad, Protocol):
    """A load with a potential energy ``V(R, p, t)`` [J] per rod (B,), added to the recorded energy."""

    def potential(self, ctx: RodContext, R: Tensor, p: Tensor, t: float) -> Tensor:
        """Potential energy of the load at a state.

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            Energy [J] per rod, shape (B,).
        """
        ...


def load_forces(load: RodLoad, ctx: RodContext, R: Tensor, p: Tensor, v: Tensor, t: float) -> Forces:
    """The forces of one load at a state: ``apply_moving`` for a load that reads velocities, else ``apply``.

    Args:
        load: the load.
        ctx: The rod's context.
        R: Node rotations, shape (B, N+1, 3, 3).
        p: Node positions [m], shape (B, N+1, 3).
        v: Node velocities [m/s], shape (B, N+1, 3).
        t: Time [s].

    Returns:
        The :data:`Forces` ``(force, torque)``.
    """
    moving = getattr(load, "velocity_dependent", None)
    if moving is not None and moving():
        return cast(Forces, load.apply_moving(ctx, R, p, v, t))  # type: ignore[attr-defined]
    return load.apply(ctx, R, p, t)


def potential_loads(loads: Sequence[RodLoad]) -> List[PotentialLoad]:
    """The loads that have a ``potential``, each checked to take ``(ctx, R, p, t)``: a ConfigError naming
    the load otherwise (checked here, once, so that a TypeError raised inside a potential is not mistaken
    for a signature mismatch and reaches the caller).

    Args:
        loads: The loads of a run.

    Returns:
        The loads with a ``potential``, in their order.

    Raises:
        ConfigError: If a ``potential`` does not take ``(ctx, R, p, t)``.
    """
    out: List[PotentialLoad] = []
    for i, ld in enumerate(loads):
        if not callable(getattr(ld, "potential", None)):
            continue
        signature = inspect.signature(cast(PotentialLoad, ld).potential)
        try:
            signature.bind(None, None, None, 0.0)
            ok = True
        except TypeError:
            ok = False
        check(ok, f"loads[{i}].potential", f"{type(ld).__name__}.potential{signature}", "must take (ctx, R, p, t)")
        out.append(cast(PotentialLoad, ld))
    return out


class Load(torch.nn.Module):
    """Base class of loads: the :class:`RodLoad` defaults (no point mass, not a constant world force).
    A subclass implements ``apply`` and, when it has an energy, ``potential`` (:class:`PotentialLoad`).

    ``apply`` shadows :meth:`torch.nn.Module.apply` (``module.apply(fn)``): do not call that on a module
    that holds loads as submodules."""

    def point_masses(self, n_nodes: int) -> List[PointMass]:
        """No point masses (the default).

        Args:
            n_nodes: Number of nodes N+1 of the rod.

        Returns:
            An empty list.
        """
        return []

    def constant_world_force(self) -> bool:
        """True when ``apply`` returns a world force independent of state and time and no torque (such
        loads run in the fused kernel, :mod:`flexlearn.physics.cosserat.compiled.lgvi`)."""
        return False

    def velocity_dependent(self) -> bool:
        """True when the load reads the node velocities (contact with friction): the integrator then calls
        ``apply_moving(ctx, R, p, v, t)`` instead of ``apply`` (:func:`load_forces`)."""
        return False

    def apply(self, ctx: RodContext, R: Tensor, p: Tensor, t: float) -> Forces:  # type: ignore[override]
        """Nodal forces and torques of the load (the subclass's one required method).

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            The :data:`Forces` ``(force, torque)``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement apply(ctx, R, p, t)")  # pragma: no cover


class Gravity(Load):
    """Uniform gravity ``g`` [m/s²] (3,) or (B, 3) on every node mass (rod + point masses + magnets).

    Seed 001, eq. (1) writes the potential ``∫ F^c · P ds`` with ``F^c = M g_down``; the force on node a
    is ``m_a g``. The seed's tables list F^c 1000× the value ``M g`` (see the package docstring).
    """

    g: Tensor

    def __init__(self, g: ArrayLike = (0.0, 0.0, -9.81)):
        super().__init__()
        self.register_buffer("g", _batched(g, "Gravity.g"))

    def constant_world_force(self) -> bool:
        return True

    def apply(self, ctx, R, p, t):
        """Node forces ``m_a g``, no torque.

        Args:
            ctx: The rod's context.
            R: Node rotations (unused), shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s] (unused).

        Returns:
            ``(force [N] (B, N+1, 3), None)``.
        """
        g = self.g.to(p)
        if g.dim() == 1:
            f = ctx.mass.unsqueeze(-1) * g
        else:
            f = ctx.mass.unsqueeze(-1) * g.unsqueeze(-2)
        return f, None

    def potential(self, ctx: RodContext, R: Tensor, p: Tensor, t: float) -> Tensor:
        """``V = −Σ_a m_a g · p_a`` [J] (B,) (R and t are not read).

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            Energy [J], shape (B,).
        """
        g = self.g.to(p)
        g = g if g.dim() == 1 else g.unsqueeze(-2)
        return -(ctx.mass.unsqueeze(-1) * g * p).sum((-1, -2))


class PointForce(Load):
    """A world-frame force [N] (3,) or (B, 3) at ``node`` (-1: tip), constant or ``fn(t)``."""

    force: Tensor

    def __init__(self, node: int, force):
        super().__init__()
        self.node = int(node)
        self.fn = force if callable(force) else None
        if self.fn is None:
            self.register_buffer("force", _batched(force, "PointForce.force"))

    def constant_world_force(self) -> bool:
        return self.fn is None

    def apply(self, ctx, R, p, t):
        """The force at its node, zero elsewhere; no torque.

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            ``(force [N] (B, N+1, 3), None)``.
        """
        node = self.node % p.shape[-2]
        f = self.fn(t) if self.fn is not None else self.force
        f = torch.as_tensor(f).to(p)
        out = torch.zeros_like(p)
        idx = torch.tensor([node], device=p.device)
        src = f.expand(p.shape[:-2] + (3,)).unsqueeze(-2)
        return out.index_add(-2, idx, src), None


class PointMoment(Load):
    """A moment [N m] (3,) or (B, 3) at ``node`` (-1: tip), constant or ``fn(t)``: dead (fixed in the world,
    ``frame='world'``, the default) or a follower (fixed in the node's body frame, ``frame='body'``). Applied as
    the body torque ``Rᵀ M`` (world) or ``M`` (body). A pure end moment M bends a clamped rod into an arc of
    tip angle ``M L / EI`` (both kinds, for a moment normal to the plane of bending)."""

    moment: Tensor

    def __init__(self, node: int, moment, frame: str = "world"):
        super().__init__()
        check(frame in ("world", "body"), "PointMoment.frame", frame, "must be 'world' or 'body'")
        self.node, self.frame = int(node), frame
        self.fn = moment if callable(moment) else None
        if self.fn is None:
            self.register_buffer("moment", _batched(moment, "PointMoment.moment"))

    def extra_repr(self) -> str:
        """The node, the frame and the moment (for messages)."""
        m = "fn(t)" if self.fn is not None else str([round(float(x), 9) for x in self.moment.reshape(-1)[:3]])
        return f"node={self.node}, frame={self.frame!r}, moment={m} N m"

    def apply(self, ctx, R, p, t):
        """The moment at its node as a body torque; no force.

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            ``(None, torque [N·m] (B, N+1, 3))``.
        """
        node = self.node % p.shape[-2]
        m = self.fn(t) if self.fn is not None else self.moment
        m = torch.as_tensor(m).to(p).expand(p.shape[:-2] + (3,))
        if self.frame == "world":
            m = (R[..., node, :, :].transpose(-1, -2) @ m.unsqueeze(-1)).squeeze(-1)
        idx = torch.tensor([node], device=p.device)
        return None, torch.zeros_like(p).index_add(-2, idx, m.unsqueeze(-2))


class EmbeddedMagnet(Load):
    """A permanent magnet rigidly attached to the cross-section of ``node`` (-1: tip).

    Args:
        node: node index (0 … N; negative counts from the tip).
        moment_body: dipole moment in the node's body frame [A m²], (3,) or (B, 3).
        field: a :class:`~flexlearn.physics.cosserat.fields.Field`, a constant (3,) vector [T] or a
            callable ``B(x, t)``.
        mass: magnet mass [kg] added to the node (seed 001, Remark 1).
        inertia: principal rotational inertia (3,) [kg m²] added to the node (default 0).
    """

    moment_body: Tensor
    mass: Tensor
    inertia: Tensor

    def __init__(
        self, node: int, moment_body: ArrayLike, field, mass: float = 0.0, inertia: ArrayLike = (0.0, 0.0, 0.0)
    ):
        super().__init__()
        check(mass >= 0 and math.isfinite(mass), "EmbeddedMagnet.mass", mass, "must be finite and >= 0 [kg]")
        self.node = int(node)
        self.field: Field = as_field(field)
        self.register_buffer("moment_body", _batched(moment_body, "EmbeddedMagnet.moment_body"))
        self.register_buffer("mass", torch.as_tensor(mass, dtype=torch.float64).clone())
        self.register_buffer("inertia", _batched(inertia, "EmbeddedMagnet.inertia"))

    def point_masses(self, n_nodes: int):
        """The magnet's mass and inertia at its node.

        Args:
            n_nodes: Number of nodes N+1 of the rod (resolves a negative ``node``).

        Returns:
            One :data:`PointMass`.
        """
        return [(self.node % n_nodes, self.mass, self.inertia)]

    def apply(self, ctx, R, p, t):
        """Body torque ``m_body × Rᵀ B`` and, in a non-uniform field, the world force ``∇(m·B)``.

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            ``(force [N] or None, torque [N·m])``, (B, N+1, 3) each.
        """
        n = p.shape[-2]
        node = self.node % n
        Rn = R[..., node, :, :]  # (B, 3, 3)
        x = p[..., node, :]  # (B, 3)
        b = self.field(x, t)  # (B, 3)
        m_b = self.moment_body.to(p).expand(x.shape)
        b_body = (Rn.transpose(-1, -2) @ b.unsqueeze(-1)).squeeze(-1)
        tau = torch.linalg.cross(m_b, b_body)  # body-frame torque m_b × Rᵀ B
        idx = torch.tensor([node], device=p.device)
        tau_full = torch.zeros_like(p).index_add(-2, idx, tau.unsqueeze(-2))
        if self.field.uniform:
            return None, tau_full
        m_w = (Rn @ m_b.unsqueeze(-1)).squeeze(-1)
        grad = self.field.gradient(x, t)  # (B, 3, 3): dB_i/dx_j
        force = (grad.transpose(-1, -2) @ m_w.unsqueeze(-1)).squeeze(-1)  # ∇(m·B) with m held fixed
        f_full = torch.zeros_like(p).index_add(-2, idx, force.unsqueeze(-2))
        return f_full, tau_full

    def potential(self, ctx, R: Tensor, p: Tensor, t: float) -> Tensor:
        """Magnetic energy ``-m·B`` (only a potential for a static field).

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            t: Time [s].

        Returns:
            Energy [J], shape (B,).
        """
        node = self.node % p.shape[-2]
        m_w = (R[..., node, :, :] @ self.moment_body.to(p).expand(p[..., node, :].shape).unsqueeze(-1)).squeeze(-1)
        return -(m_w * self.field(p[..., node, :], t)).sum(-1)


class TipMagnet(EmbeddedMagnet):
    """A magnet at the tip node (seed 001, Secs. 4.2–4.3): ``EmbeddedMagnet(-1, ...)``."""

    def __init__(self, moment_body: ArrayLike, field, mass: float = 0.0, inertia: ArrayLike = (0.0, 0.0, 0.0)):
        super().__init__(-1, moment_body, field, mass=mass, inertia=inertia)
