"""Dissipation for the Cosserat LGVI: viscous/Rayleigh damping for simulation (enters the discrete
Lagrange–d'Alembert principle, seed 001, eq. (8), as a non-conservative force), and the seed's
distributed damping-estimation filters (seed 001, Sec. 3.2, eqs. (17)–(21)).

Interfaces (``typing.Protocol``): :class:`DampingModel`, what the integrator asks of a damping model
(:class:`Damping` implements it), and :class:`RodObserver`, what it asks of an observer run alongside the
model (:class:`DampingEstimator`). Both receive the rod's
:class:`~flexlearn.physics.cosserat.context.RodContext` as ``ctx``. The fused kernel runs :class:`Damping`
without ``beta`` only; any other damping model runs on the tensor path
(:func:`flexlearn.physics.cosserat.compiled.lgvi.eligible` says so).
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.physics.cosserat.context import RodContext
from flexlearn.physics.cosserat.strains import strains

Number = Union[float, Sequence[float], Tensor]
StressRates = Tuple[Optional[Tuple[Tensor, Tensor]], Optional[Tensor]]
"""``((dn_L, dn_R) (B, N, 3) [N] or None, dm (B, N, 3) [N m] or None)``: damping stress and moment added to
``C1 Γ`` (seen from either node) and ``C2 κ`` in the internal forces
(:func:`flexlearn.physics.cosserat.elastic.internal_forces`)."""


@runtime_checkable
class DampingModel(Protocol):
    """What the integrator asks of a damping model, per step k (states ``R`` (B, N+1, 3, 3), ``p`` (B, N+1, 3)):
    ``reset`` once at the initial state; ``external`` the world node force and body torque (B, N+1, 3) from
    the node velocities ``v`` [m/s] and angular velocities ``w`` [rad/s] (B, N+1, 3); ``internal`` the
    damping stress and moment (:data:`StressRates`) for step ``h`` [s]; ``advance`` after the step k → k+1
    with the state k+1."""

    def reset(self, rod: Any, ctx: RodContext, R: Tensor, p: Tensor) -> None:
        """Prepare for a run at the initial state.

        Args:
            rod: The simulated rod.
            ctx: The rod's context.
            R: Initial node rotations, shape (B, N+1, 3, 3).
            p: Initial node positions [m], shape (B, N+1, 3).
        """
        ...

    def external(self, ctx: RodContext, v: Tensor, w: Tensor) -> Tuple[Tensor, Tensor]:
        """Damping force and torque from the node velocities.

        Args:
            ctx: The rod's context.
            v: Node velocities [m/s], shape (B, N+1, 3).
            w: Node angular velocities [rad/s] (body frame), shape (B, N+1, 3).

        Returns:
            World node force [N] and body torque [N·m], shape (B, N+1, 3) each.
        """
        ...

    def internal(self, ctx: RodContext, R: Tensor, p: Tensor, h: float) -> StressRates:
        """Damping stress and moment of the elements at a state.

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            h: Time step [s].

        Returns:
            The :data:`StressRates`.
        """
        ...

    def advance(self, ctx: RodContext, R: Tensor, p: Tensor) -> None:
        """Bookkeeping after the step k → k+1.

        Args:
            ctx: The rod's context.
            R: Node rotations of state k+1, shape (B, N+1, 3, 3).
            p: Node positions [m] of state k+1, shape (B, N+1, 3).
        """
        ...


@runtime_checkable
class RodObserver(Protocol):
    """An observer run alongside the model (``simulate(..., observer=...)``): at step k it sees the state
    ``p``, the half-step velocity ``v`` (B, N+1, 3), the undamped node force ``f`` [N], the node masses
    ``mass`` (B, N+1) [kg] and the step ``h`` [s], and returns a world force (B, N+1, 3) [N] to apply."""

    def update(self, k: int, p: Tensor, v: Tensor, f: Tensor, mass: Tensor, h: float) -> Tensor:
        """Observe step k and return the force to apply.

        Args:
            k: Step index.
            p: Node positions [m], shape (B, N+1, 3).
            v: Half-step node velocities [m/s], shape (B, N+1, 3).
            f: Undamped node forces [N], shape (B, N+1, 3).
            mass: Node masses [kg], shape (B, N+1).
            h: Time step [s].

        Returns:
            World node force [N], shape (B, N+1, 3).
        """
        ...


def _nonneg(v: Number, name: str) -> Tensor:
    t = torch.as_tensor(v, dtype=torch.float64)
    if not isinstance(v, Tensor):
        t = t.clone()
    for i, x in enumerate(t.detach().reshape(-1).tolist()):
        check(math.isfinite(x) and x >= 0, name if t.dim() == 0 else f"{name}[{i}]", x, "must be finite and >= 0")
    return t


class Damping(torch.nn.Module):
    """Viscous and Rayleigh damping (buffers, differentiable).

    * ``alpha`` [1/s]: mass-proportional (Rayleigh) damping, node force ``−α m_a v_a`` and body torque
      ``−α J_a ω_a``; every mode decays at the rate α/2.
    * ``beta`` [s]: stiffness-proportional (Rayleigh, Kelvin–Voigt) damping, the stress resultants gain
      ``β C1 Γ̇`` and ``β C2 κ̇`` (strain rates by backward difference over one step).
    * ``translational`` [N s/m²], ``rotational`` [N m s]: viscous drag per unit length, node force
      ``−c_t l_a v_a`` and torque ``−c_r l_a ω_a`` (e.g. air drag, the seed's "external dissipation").
    * ``node_coefficients`` (B, N+1, 3) or (N+1, 3) [N s/m]: a per-node, per-axis damping capacity K,
      world force ``−K ∘ v`` — the seed's dissipation model ``𝓕 = K ∘ Δt⁻¹ (p^j − p^{j−1})`` (eq. (17)).

    Velocities are taken at the last half step (explicit in the leapfrog), which is first-order in the
    damping and stable for ``α h < 2`` and ``β ω_max < 1`` roughly.
    Each ``B``-batched value may be (B,) (one per rod).
    """

    alpha: Tensor
    beta: Tensor
    translational: Tensor
    rotational: Tensor
    node_coefficients: Optional[Tensor]

    def __init__(
        self,
        alpha: Number = 0.0,
        beta: Number = 0.0,
        translational: Number = 0.0,
        rotational: Number = 0.0,
        node_coefficients: Optional[Tensor] = None,
    ):
        super().__init__()
        self.register_buffer("alpha", _nonneg(alpha, "Damping.alpha"))
        self.register_buffer("beta", _nonneg(beta, "Damping.beta"))
        self.register_buffer("translational", _nonneg(translational, "Damping.translational"))
        self.register_buffer("rotational", _nonneg(rotational, "Damping.rotational"))
        self.register_buffer(
            "node_coefficients",
            None if node_coefficients is None else _nonneg(node_coefficients, "Damping.node_coefficients"),
        )
        self._prev: Optional[Tuple[Tensor, Tensor, Tensor]] = None
        self._cur: Optional[Tuple[Tensor, Tensor, Tensor]] = None

    @staticmethod
    def _col(x: Tensor, like: Tensor) -> Tensor:
        x = x.to(like)
        return x.reshape(-1, 1, 1) if x.dim() == 1 else x

    def reset(self, rod: Any, ctx: RodContext, R: Tensor, p: Tensor) -> None:
        """At the initial state (R, p): its strains become the previous strains of the rates (``beta`` only).

        Args:
            rod: The simulated rod (unused).
            ctx: The rod's context.
            R: Initial node rotations, shape (B, N+1, 3, 3).
            p: Initial node positions [m], shape (B, N+1, 3).
        """
        self._prev = self._strains(ctx, R, p) if self.has_beta() else None

    def has_beta(self) -> bool:
        """True when the stiffness-proportional part ``beta`` is non-zero (or being identified)."""
        return self.beta.requires_grad or bool((self.beta != 0).any())

    @staticmethod
    def _strains(ctx: RodContext, R: Tensor, p: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """``(x_L / l, x_R / l, κ)`` (B, N, 3) of :func:`~flexlearn.physics.cosserat.strains.strains`: Γ + E3 seen
        from either node (E3 drops out of the rates) and the curvature κ = 2 cay⁻¹(Q) / l [1/m]. Both strain
        models use these node strains (the mid-frame one only the first, see :meth:`internal`)."""
        s = strains(R, p, ctx.rest_lengths, ctx.e3, ctx.midpoint)
        l = ctx.rest_lengths.unsqueeze(-1)
        return s.xL / l, s.xR / l, 2.0 * s.f / l

    def internal(self, ctx: RodContext, R: Tensor, p: Tensor, h: float) -> StressRates:
        """The Kelvin–Voigt stress ``β C1 Γ̇`` and moment ``β C2 κ̇`` (backward differences over ``h`` [s]).

        Args:
            ctx: The rod's context.
            R: Node rotations, shape (B, N+1, 3, 3).
            p: Node positions [m], shape (B, N+1, 3).
            h: Time step [s].

        Returns:
            ``((dn_L, dn_R), dm)`` (B, N, 3) [N], [N·m]; ``(None, None)`` without ``beta``.
        """
        if self._prev is None:
            return None, None
        gL, gR, kap = self._strains(ctx, R, p)
        pL, pR, pk = self._prev
        self._cur = (gL, gR, kap)
        b = self._col(self.beta, gL) / h
        c1 = ctx.shear_stiffness
        return (b * c1 * (gL - pL), b * c1 * (gR - pR)), b * ctx.bend_stiffness * (kap - pk)

    def advance(self, ctx: RodContext, R: Tensor, p: Tensor) -> None:
        """After the step k → k+1: the strains of state k become the previous strains.

        Args:
            ctx: The rod's context (unused).
            R: Node rotations of state k+1 (unused).
            p: Node positions of state k+1 (unused).
        """
        if self._prev is not None and self._cur is not None:
            self._prev = self._cur

    def external(self, ctx: RodContext, v: Tensor, w: Tensor) -> Tuple[Tensor, Tensor]:
        """World node force and body torque (B, N+1, 3) of the mass-proportional, viscous and per-node terms.

        Args:
            ctx: The rod's context.
            v: Node velocities [m/s], shape (B, N+1, 3).
            w: Node angular velocities [rad/s] (body frame), shape (B, N+1, 3).

        Returns:
            Tuple ``(force [N], torque [N·m])``.
        """
        a = self._col(self.alpha, v)
        ct = self._col(self.translational, v)
        cr = self._col(self.rotational, v)
        la = ctx.node_lengths.unsqueeze(-1)
        f = -(a * ctx.mass.unsqueeze(-1) + ct * la) * v
        t = -(a * ctx.inertia + cr * la) * w
        if self.node_coefficients is not None:
            f = f - self.node_coefficients.to(v) * v
        return f, t


class DampingEstimator:
    """Distributed damping-estimation filters (seed 001, Sec. 3.2, eqs. (17)–(21)), one per node,
    running alongside the model as an observer: pass it as ``rod.simulate(..., observer=est)``.

    Per node a the translational update (seed eqs. (14)–(16), corrected) is
    ``p^{k+1} = p^k + h v^{k−½} + h²/m_a f_a(q^k) − h²/m_a K_a ∘ v^{k−½}`` with the unknown damping
    capacity K_a ∈ R³ (world axes; the seed's ``G`` rotates it into the body frame, ``O⁻¹``, which makes no
    difference for an isotropic K). The pointwise cost (eq. (19)) ``½ eᵀ R e + ½ Kᵀ W K`` on the next
    output error, with the output predicted to first order (eq. (20)): ``Ŷ^{k+1} ≈ Ŷ^k + Z + A K`` with
    ``Z = h v + h² f/m`` (the undamped increment) and ``A = ∂p^{k+1}/∂K = −h²/m diag(v)``, and the
    measurement extrapolated as ``Ỹ^{k+1} ≈ Ỹ^k + d``, ``d = Ỹ^k − Ỹ^{k−1}``, is minimised by (eq. (21))

        K̂ = −(Aᵀ R A + W)⁻¹ Aᵀ R (Z + e − d),   e = Ŷ^k − Ỹ^k.

    Seed discrepancy: eq. (21) lacks this leading minus sign (setting the gradient of (19) to zero gives
    it); and R, W are unit-dependent — the seed's R = 10⁴–10⁵ I, W = 0.1 I are in its g-mm-s units where
    A is far larger than in SI. With R = r I and W = w I diagonal, K̂ is computed per component.

    Args:
        measured: (T, N+1, 3) or (T, B, N+1, 3) measured node positions at the simulation steps; NaN marks a
            node/time without measurement (K̂ keeps its previous value there).
        r, w: scalar weights R = r I, W = w I (w ≥ 0, r > 0).
        nodes: optional list of node indices that carry a filter (default all but the clamped base).
    Attributes after the run: ``history`` (T, B, N+1, 3) of K̂ [N s/m].
    """

    def __init__(self, measured: Tensor, r: float = 1.0, w: float = 0.0, nodes: Optional[Sequence[int]] = None):
        check(r > 0, "DampingEstimator.r", r, "must be > 0")
        check(w >= 0, "DampingEstimator.w", w, "must be >= 0")
        self.measured = torch.as_tensor(measured).to(torch.float64)
        if self.measured.dim() == 3:
            self.measured = self.measured.unsqueeze(1)
        self.r, self.w = float(r), float(w)
        self.nodes = None if nodes is None else list(nodes)
        self.k_hat: Optional[Tensor] = None
        self.history: List[Tensor] = []

    def update(self, k: int, p: Tensor, v: Tensor, f: Tensor, mass: Tensor, h: float) -> Tensor:
        """K̂ for step k from the observer state (p̂^k, v^{k−½}) and its undamped force f^k; returns the
        damping force ``−K̂ ∘ v`` to apply in the step k → k+1.

        Args:
            k: Step index (the row of ``measured``).
            p: Observer node positions [m], shape (B, N+1, 3).
            v: Half-step node velocities [m/s], shape (B, N+1, 3).
            f: Undamped node forces [N], shape (B, N+1, 3).
            mass: Node masses [kg], shape (B, N+1).
            h: Time step [s].

        Returns:
            Damping world force [N], shape (B, N+1, 3).
        """
        if self.k_hat is None:
            self.k_hat = torch.zeros_like(p)
        T = self.measured.shape[0]
        if 1 <= k < T:
            m = mass.unsqueeze(-1)
            y, y_prev = self.measured[k].to(p), self.measured[k - 1].to(p)
            z = h * v + h * h * f / m  # undamped increment Z
            a = -h * h * v / m  # ∂p^{k+1}/∂K (diagonal)
            e = p - y
            d = y - y_prev
            k_new = -(a * self.r * (z + e - d)) / (a * a * self.r + self.w).clamp_min(1e-300)
            ok = torch.isfinite(k_new) & (a.abs() > 0)
            if self.nodes is not None:
                mask = torch.zeros_like(ok)
                mask[:, self.nodes] = True
                ok = ok & mask
            self.k_hat = torch.where(ok, k_new, self.k_hat)
        self.history.append(self.k_hat.detach().clone())
        return -self.k_hat * v
