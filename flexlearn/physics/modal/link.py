"""Euler–Bernoulli flexible link, clamped at the joint, with a tip payload (seed 000, §III-A).

The elastic deflection ``w(ξ, t)`` of a link of length ``L`` obeys (seed 000, eq. (7))

    ρA ẅ + EI w'''' = f(ξ, t)

with the boundary conditions (seed 000, eq. (8), extended by a rotary inertia ``J`` of the payload)

    w(0) = 0,   w'(0) = 0,   EI w''(L) = −J ẅ'(L),   EI w'''(L) = M ẅ(L).

For harmonic motion ``w = Φ(ξ) e^{iωt}``, ``β⁴ = ρA ω²/EI``, and in the non-dimensional variables
``λ = βL``, ``s = ξ/L``, ``μ = M/(ρA L)``, ``ȷ = J/(ρA L³)``, the tip conditions read

    Φ_ss(1) − ȷ λ⁴ Φ_s(1) = 0,      Φ_sss(1) + μ λ⁴ Φ(1) = 0.

With the clamped form ``Φ = A (cosh λs − cos λs) + B (sinh λs − sin λs)`` (the ``C₂, C₄`` part of
seed 000, eq. (10); ``C₁ = C₃ = 0`` by the clamp) the tip conditions give a 2×2 system whose
determinant is the frequency equation (checked symbolically)

    D(λ) = 2[1 + cos λ cosh λ + μλ (cos λ sinh λ − sin λ cosh λ)
             − ȷλ³ (sin λ cosh λ + cos λ sinh λ) + μȷλ⁴ (1 − cos λ cosh λ)] = 0.

It is evaluated as ``F = D/(2 cosh λ)`` (each term O(1), no cancellation for large λ; the 2×2
determinant divided by cosh² λ would lose e^λ·eps to cancellation):

    F(λ) = sech λ + cos λ + μλ (cos λ tanh λ − sin λ) − ȷλ³ (sin λ + cos λ tanh λ)
           + μȷλ⁴ (sech λ − cos λ),

which reduces to ``1 + cos λ cosh λ = 0`` for a bare cantilever (λ₁..₄ = 1.875104, 4.694091,
7.854757, 10.995541). Then ``ω_n = λ_n² sqrt(EI/(ρA L⁴))``.

Mode shapes are evaluated in the exponential form
``Φ = ½(1−σ) e^{λs} + ½(1+σ) e^{−λs} − cos λs + σ sin λs`` with ``σ = −B/A`` and ``1 − σ`` computed
without cancellation, so higher modes stay accurate to machine precision (the textbook
``cosh − σ sinh`` form loses ``e^{λ}·eps``). They are normalised so that the mass-weighted Gram matrix

    G_ij = ∫₀ᴸ ρA Φ_i Φ_j dξ + M Φ_i(L) Φ_j(L) + J Φ'_i(L) Φ'_j(L)  =  δ_ij,

i.e. Φ has units kg^(-1/2) and the modal coordinates η have units kg^(1/2) m. The sign convention is
``Φ''(0) > 0``.

Differentiability: roots are found without gradient (bracketing + bisection, vectorised) and then
re-attached by the implicit function theorem, ``λ ← λ* − F(λ*, p)/∂_λF(λ*, p)|detached``, whose
value is λ* and whose gradient is ``−∂_pF/∂_λF``. All other quantities are plain autograd.

Seed discrepancies (seed 000, §III-A): eq. (8) omits the payload's rotary inertia (included here, as
the issue asks, with ``J = 0`` recovering the seed); eq. (10) keeps four constants C₁..C₄ where the
clamp forces ``C₁ = C₃ = 0``; the frequency equation and the normalisation (eqs. (11)–(14)) are missing
from the machine-typeset text and are derived here from the principle.
"""

from __future__ import annotations

import math
from typing import Optional, Union

import numpy as np
import torch
from torch import Tensor, nn
from torch.autograd.forward_ad import unpack_dual

from flexlearn.errors import ArgumentError, ConfigError

Number = Union[float, int, Tensor]

__all__ = ["FlexibleLink", "frequency_function", "cantilever_roots"]

_GL_CACHE: dict = {}


def _gauss_legendre(panels: int, order: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """Composite Gauss–Legendre nodes and weights on [0, 1] (panels × order points)."""
    key = (panels, order)
    if key not in _GL_CACHE:
        x, w = np.polynomial.legendre.leggauss(order)
        h = 1.0 / panels
        nodes = np.concatenate([(i + 0.5 * (x + 1.0)) * h for i in range(panels)])
        weights = np.concatenate([0.5 * w * h for _ in range(panels)])
        _GL_CACHE[key] = (nodes, weights)
    nodes, weights = _GL_CACHE[key]
    return (torch.as_tensor(nodes, dtype=dtype, device=device), torch.as_tensor(weights, dtype=dtype, device=device))


def _entries(lam: Tensor, mu: Tensor, jr: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The 2×2 tip-condition matrix divided by cosh λ (see module docstring)."""
    e2 = torch.exp(-2.0 * lam)
    sech = 2.0 * torch.exp(-lam) / (1.0 + e2)
    th = (1.0 - e2) / (1.0 + e2)
    c, s = torch.cos(lam), torch.sin(lam)
    l3 = lam * lam * lam
    a11 = (1.0 + c * sech) - jr * l3 * (th + s * sech)
    a12 = (th + s * sech) - jr * l3 * (1.0 - c * sech)
    a21 = (th - s * sech) + mu * lam * (1.0 - c * sech)
    a22 = (1.0 + c * sech) + mu * lam * (th - s * sech)
    return a11, a12, a21, a22


def frequency_function(lam: Tensor, mu: Tensor, jr: Tensor) -> Tensor:
    """Frequency function ``F(λ; μ, ȷ)`` (dimensionless; roots are βₙL), seed 000, §III-A.

    ``λ``, ``μ = M/(ρA L)``, ``ȷ = J/(ρA L³)`` broadcast. ``F(0) = 2 > 0``.

    Args:
        lam: λ (dimensionless).
        mu: tip-mass ratio ``μ = M/(ρA L)``.
        jr: tip-inertia ratio ``ȷ = J/(ρA L³)``.

    Returns:
        ``F(λ; μ, ȷ)``, the broadcast shape.
    """
    e2 = torch.exp(-2.0 * lam)
    sech = 2.0 * torch.exp(-lam) / (1.0 + e2)
    th = (1.0 - e2) / (1.0 + e2)
    c, s = torch.cos(lam), torch.sin(lam)
    l3 = lam * lam * lam
    return sech + c + mu * lam * (c * th - s) - jr * l3 * (s + c * th) + mu * jr * l3 * lam * (sech - c)


def _sigma_terms(lam: Tensor, mu: Tensor, jr: Tensor) -> tuple[Tensor, Tensor]:
    """``σ = −B/A`` and ``1 − σ`` (the latter without cancellation), from the better-conditioned row."""
    a11, a12, a21, a22 = _entries(lam, mu, jr)
    e2 = torch.exp(-2.0 * lam)
    sech = 2.0 * torch.exp(-lam) / (1.0 + e2)
    one_m_th = 2.0 * e2 / (1.0 + e2)
    c, s = torch.cos(lam), torch.sin(lam)
    l3 = lam * lam * lam
    # row 2: σ = a21/a22 ;  a22 − a21 = (1 − tanh) + sech (c + s) + μλ (tanh − 1 + sech (c − s) ... )
    d2 = one_m_th + sech * (c + s) + mu * lam * (-one_m_th - s * sech + c * sech)
    # row 1: σ = a11/a12 ;  a12 − a11
    d1 = -one_m_th + sech * (s - c) - jr * l3 * (one_m_th - sech * (c + s))
    use2 = a22.abs() >= a12.abs()
    sigma = torch.where(
        use2, a21 / torch.where(use2, a22, torch.ones_like(a22)), a11 / torch.where(use2, torch.ones_like(a12), a12)
    )
    one_m = torch.where(
        use2, d2 / torch.where(use2, a22, torch.ones_like(a22)), d1 / torch.where(use2, torch.ones_like(a12), a12)
    )
    return sigma, one_m


def _shape_u(u: Tensor, lam: Tensor, sigma: Tensor, one_m: Tensor, derivative: int) -> Tensor:
    """d^k/du^k of the un-normalised mode ``Φ(u)``, ``u = λ s`` ∈ [0, λ]."""
    ep = 0.5 * one_m * torch.exp(u)  # bounded: (1−σ) = O(e^{−λ})
    em = 0.5 * (2.0 - one_m) * torch.exp(-u)
    c, s = torch.cos(u), torch.sin(u)
    if derivative == 0:
        return ep + em - c + sigma * s
    if derivative == 1:
        return ep - em + s + sigma * c
    if derivative == 2:
        return ep + em + c - sigma * s
    if derivative == 3:
        return ep - em - s - sigma * c
    raise ArgumentError(f"mode shape 'derivative' = {derivative}: must be 0, 1, 2 or 3")


def cantilever_roots(n: int) -> list[float]:
    """Reference βₙL of a bare cantilever (1 + cos λ cosh λ = 0), asymptote (2n−1)π/2 beyond 4.

    Args:
        n: number of roots.

    Returns:
        The first ``n`` values βₙL (dimensionless).
    """
    table = [1.8751040687119611, 4.6940911329739179, 7.8547574382376126, 10.995540734875467]
    return [table[i] if i < 4 else (2 * i + 1) * math.pi / 2 for i in range(n)]


def _has_tangent(t: Tensor) -> bool:
    """True for a forward-mode dual tensor (its tangent must also pass through the implicit root rule)."""
    return unpack_dual(t).tangent is not None


def _as_buffer(x: Number, name: str, dtype: torch.dtype) -> Tensor:
    t = torch.as_tensor(x, dtype=dtype)
    if t.is_floating_point() is False:
        t = t.to(dtype)
    return t


class FlexibleLink(nn.Module):
    """Euler–Bernoulli link clamped at the joint with tip mass and rotary inertia (seed 000, §III-A).

    Args (float or tensors broadcasting to a common ``batch_shape``; stored as float64 buffers):
        EI: flexural rigidity [N m²] (> 0).
        rho_A: mass per unit length [kg/m] (> 0).
        length: link length L [m] (> 0).
        tip_mass: payload mass M_p [kg] (≥ 0), seed eq. (8).
        tip_inertia: payload rotary inertia J about the tip [kg m²] (≥ 0); 0 in the seed.
        dtype: buffer dtype (float64 default).

    Non-positive or non-finite parameters raise :class:`ConfigError` naming the parameter.
    """

    EI: Tensor
    rho_A: Tensor
    length: Tensor
    tip_mass: Tensor
    tip_inertia: Tensor

    def __init__(
        self,
        EI: Number,
        rho_A: Number,
        length: Number,
        tip_mass: Number = 0.0,
        tip_inertia: Number = 0.0,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        vals = {"EI": EI, "rho_A": rho_A, "length": length, "tip_mass": tip_mass, "tip_inertia": tip_inertia}
        tens = {k: _as_buffer(v, k, dtype) for k, v in vals.items()}
        for k, t in tens.items():
            tt = t.detach()
            if not bool(torch.isfinite(tt).all()):
                raise ConfigError(f"FlexibleLink '{k}' = {tt.tolist()}: must be finite")
            if k in ("EI", "rho_A", "length") and not bool((tt > 0).all()):
                raise ConfigError(f"FlexibleLink '{k}' = {tt.tolist()}: must be > 0")
            if k in ("tip_mass", "tip_inertia") and not bool((tt >= 0).all()):
                raise ConfigError(f"FlexibleLink '{k}' = {tt.tolist()}: must be >= 0")
        shape = torch.broadcast_shapes(*[t.shape for t in tens.values()])
        for k, t in tens.items():
            # keep the autograd graph of tensor inputs (expand is differentiable)
            self.register_buffer(k, t.expand(shape) if t.requires_grad else t.expand(shape).clone())

    # -- dimensionless groups ------------------------------------------------------------------
    @property
    def batch_shape(self) -> torch.Size:
        return self.EI.shape

    def mass_ratio(self) -> Tensor:
        """μ = M_p/(ρA L) (batch_shape)."""
        return self.tip_mass / (self.rho_A * self.length)

    def inertia_ratio(self) -> Tensor:
        """ȷ = J/(ρA L³) (batch_shape)."""
        return self.tip_inertia / (self.rho_A * self.length**3)

    # -- roots and frequencies -----------------------------------------------------------------
    def roots(self, n: int, points_per_pi: int = 48) -> Tensor:
        """First ``n`` roots ``βₙL`` (dimensionless) of the frequency equation, shape (*batch, n).

        Bracketed on a grid of ``points_per_pi`` points per π (each interval of length π holds at most
        one root beyond the first), refined by 60 bisections and re-attached to the graph of μ, ȷ by the
        implicit function theorem.

        Args:
            n: number of roots, ≥ 1.
            points_per_pi: grid points per π of the bracketing grid.

        Returns:
            The roots (*batch, n).

        Raises:
            ConfigError: if ``n < 1``, or if fewer than ``n`` roots lie below ``(n + 2)π`` (only possible for
                pathological parameters).
        """
        if n < 1:
            raise ConfigError(f"FlexibleLink.roots 'n' = {n}: must be >= 1")
        mu = self.mass_ratio()
        jr = self.inertia_ratio()
        with torch.no_grad():
            mu0, j0 = mu.detach().unsqueeze(-1), jr.detach().unsqueeze(-1)
            lam_max = (n + 2) * math.pi
            G = int(points_per_pi * (n + 2)) + 1
            grid = torch.linspace(1e-3, lam_max, G, dtype=mu.dtype, device=mu.device)
            F = frequency_function(grid, mu0, j0)  # (*b, G)
            change = (F[..., :-1] * F[..., 1:]) <= 0
            count = change.sum(-1)
            if bool((count < n).any()):
                bad = int((count < n).nonzero()[0][0]) if count.dim() > 0 else 0
                raise ConfigError(
                    f"FlexibleLink: only {int(count.reshape(-1).min())} frequency roots below {lam_max:.3g} "
                    f"(need {n}); check parameters (first bad batch index {bad})"
                )
            # index of the k-th sign change: cumulative count
            csum = torch.cumsum(change.to(torch.int64), -1)
            ks = torch.arange(1, n + 1, device=mu.device)
            # first index where csum == k
            idx = torch.searchsorted(csum.contiguous(), ks.expand(*csum.shape[:-1], n).contiguous())
            lo = grid[idx]
            hi = grid[idx + 1]
            flo = frequency_function(lo, mu0, j0)
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                fm = frequency_function(mid, mu0, j0)
                left = (flo * fm) <= 0
                hi = torch.where(left, mid, hi)
                lo = torch.where(left, lo, mid)
                flo = torch.where(left, flo, fm)
            lam0 = 0.5 * (lo + hi)
        if not (mu.requires_grad or jr.requires_grad or _has_tangent(mu) or _has_tangent(jr)):
            return lam0
        # implicit function theorem: value λ*, gradient −F_p / F_λ
        lam_req = lam0.clone().requires_grad_(True)
        with torch.enable_grad():
            Fl = frequency_function(lam_req, mu0, j0)
            dF = torch.autograd.grad(Fl.sum(), lam_req)[0]
        Fp = frequency_function(lam0, mu.unsqueeze(-1), jr.unsqueeze(-1))
        return lam0 - Fp / dF.detach()

    def beta(self, n: int) -> Tensor:
        """Wavenumbers βₙ = λₙ/L [1/m], shape (*batch, n).

        Args:
            n: number of modes.

        Returns:
            βₙ (*batch, n) [1/m].
        """
        return self.roots(n) / self.length.unsqueeze(-1)

    def angular_frequencies(self, n: int, roots: Optional[Tensor] = None) -> Tensor:
        """ωₙ = λₙ² sqrt(EI/(ρA L⁴)) [rad/s], shape (*batch, n).

        Args:
            n: number of modes.
            roots: the roots λₙ (*batch, n) from :meth:`roots`, computed when None.

        Returns:
            ωₙ (*batch, n) [rad/s].
        """
        lam = self.roots(n) if roots is None else roots
        scale = torch.sqrt(self.EI / (self.rho_A * self.length**4)).unsqueeze(-1)
        return lam * lam * scale

    def natural_frequencies(self, n: int, roots: Optional[Tensor] = None) -> Tensor:
        """fₙ = ωₙ/2π [Hz], shape (*batch, n).

        Args:
            n: number of modes.
            roots: the roots λₙ (*batch, n) from :meth:`roots`, computed when None.

        Returns:
            fₙ (*batch, n) [Hz].
        """
        return self.angular_frequencies(n, roots) / (2.0 * math.pi)

    # -- mode shapes ---------------------------------------------------------------------------
    def _norms(self, lam: Tensor, sigma: Tensor, one_m: Tensor) -> Tensor:
        """Sqrt of the mass-weighted modal mass of the un-normalised modes (*batch, n) [kg^(1/2)]."""
        s, w = _gauss_legendre(16, 24, lam.dtype, lam.device)
        u = lam.unsqueeze(-2) * s.unsqueeze(-1)  # (*b, Q, n)
        phi = _shape_u(u, lam.unsqueeze(-2), sigma.unsqueeze(-2), one_m.unsqueeze(-2), 0)
        integral = (w.unsqueeze(-1) * phi * phi).sum(-2)  # ∫₀¹ Φ² ds
        L = self.length.unsqueeze(-1)
        tip = _shape_u(lam, lam, sigma, one_m, 0)
        tip_slope = _shape_u(lam, lam, sigma, one_m, 1) * lam / L  # dΦ/dξ at L
        m2 = (
            self.rho_A.unsqueeze(-1) * L * integral
            + self.tip_mass.unsqueeze(-1) * tip * tip
            + self.tip_inertia.unsqueeze(-1) * tip_slope * tip_slope
        )
        return torch.sqrt(m2)

    def modal_data(self, n: int) -> dict:
        """Roots, σ, 1−σ and normalisation of the first ``n`` modes (reuse across evaluations).

        Args:
            n: number of modes.

        Returns:
            ``{"roots", "sigma", "one_minus_sigma", "norm"}``, each (*batch, n); the input ``data`` of
            :meth:`mode_shapes`, :meth:`tip_values` and :meth:`participation`.
        """
        lam = self.roots(n)
        mu = self.mass_ratio().unsqueeze(-1)
        jr = self.inertia_ratio().unsqueeze(-1)
        sigma, one_m = _sigma_terms(lam, mu, jr)
        norm = self._norms(lam, sigma, one_m)
        return {"roots": lam, "sigma": sigma, "one_minus_sigma": one_m, "norm": norm}

    def mode_shapes(self, xi: Tensor, n: int, derivative: int = 0, data: Optional[dict] = None) -> Tensor:
        """Mass-normalised mode shapes ``d^k Φⱼ/dξ^k (ξ)``, seed 000, eq. (10).

        Args:
            xi: positions along the link [m], shape (P,) or (*batch, P); values in [0, L].
            n: number of modes.
            derivative: k ∈ {0, 1, 2, 3} (Φ, Φ′ [1/m], Φ″ [1/m²], Φ‴ [1/m³], all × kg^(−1/2)).
            data: optional result of :meth:`modal_data` (avoids recomputing roots).

        Returns:
            (*batch, P, n) float64.
        """
        if derivative not in (0, 1, 2, 3):
            raise ConfigError(f"FlexibleLink.mode_shapes 'derivative' = {derivative}: must be 0, 1, 2 or 3")
        d = self.modal_data(n) if data is None else data
        lam, sigma, one_m, norm = d["roots"], d["sigma"], d["one_minus_sigma"], d["norm"]
        xi = torch.as_tensor(xi, dtype=lam.dtype, device=lam.device)
        L = self.length.reshape(self.length.shape + (1, 1))
        s = xi.unsqueeze(-1) / L  # (*b, P, 1)
        u = s * lam.unsqueeze(-2)
        phi = _shape_u(u, lam.unsqueeze(-2), sigma.unsqueeze(-2), one_m.unsqueeze(-2), derivative)
        scale = (lam.unsqueeze(-2) / L) ** derivative
        return phi * scale / norm.unsqueeze(-2)

    def tip_values(self, n: int, data: Optional[dict] = None) -> dict:
        """Φⱼ(L), Φ′ⱼ(L), Φ″ⱼ(0) (each (*batch, n)): tip deflection, tip slope and base curvature rows.

        Args:
            n: number of modes.
            data: :meth:`modal_data` of ``n`` modes, computed when None.

        Returns:
            ``{"tip", "tip_slope", "base_curvature"}``, each (*batch, n).
        """
        d = self.modal_data(n) if data is None else data
        L = self.length.unsqueeze(-1)
        tip = self.mode_shapes(L, n, 0, d).squeeze(-2)
        slope = self.mode_shapes(L, n, 1, d).squeeze(-2)
        zero = torch.zeros_like(L)
        curv0 = self.mode_shapes(zero, n, 2, d).squeeze(-2)
        return {"tip": tip, "tip_slope": slope, "base_curvature": curv0}

    def participation(self, n: int, data: Optional[dict] = None) -> Tensor:
        """Base-rotation participation Γⱼ = ∫ρA ξ Φⱼ dξ + M L Φⱼ(L) + J Φ′ⱼ(L) [kg^(1/2) m], (*batch, n).

        With ``y = ξθ + w`` the projected modal equations are ``η̈ⱼ + 2ζωⱼη̇ⱼ + ωⱼ²ηⱼ = −Γⱼ θ̈``
        (seed 000, §III-B/§VI-A: the modal equations forced by the rotating base).

        Args:
            n: number of modes.
            data: :meth:`modal_data` of ``n`` modes, computed when None.

        Returns:
            Γⱼ (*batch, n) [kg^(1/2) m].
        """
        d = self.modal_data(n) if data is None else data
        L = self.length.unsqueeze(-1)
        s, w = _gauss_legendre(16, 24, d["roots"].dtype, d["roots"].device)
        xi = s * L  # (*b, Q)
        phi = self.mode_shapes(xi, n, 0, d)  # (*b, Q, n)
        integral = (w.unsqueeze(-1) * xi.unsqueeze(-1) * phi).sum(-2) * L
        tv = self.tip_values(n, d)
        return (
            self.rho_A.unsqueeze(-1) * integral
            + self.tip_mass.unsqueeze(-1) * L * tv["tip"]
            + self.tip_inertia.unsqueeze(-1) * tv["tip_slope"]
        )

    def gram(self, n: int, quad_points: int = 400) -> Tensor:
        """Mass-weighted Gram matrix of the normalised modes (*batch, n, n) (should be identity).

        Args:
            n: number of modes.
            quad_points: Gauss–Legendre points of the quadrature over the link.

        Returns:
            ``∫ρA Φᵢ Φⱼ dξ + M Φᵢ(L) Φⱼ(L) + J Φ′ᵢ(L) Φ′ⱼ(L)`` (*batch, n, n).
        """
        x, w = np.polynomial.legendre.leggauss(quad_points)
        d = self.modal_data(n)
        dt = d["roots"].dtype
        L = self.length.unsqueeze(-1)
        s = torch.as_tensor(0.5 * (x + 1.0), dtype=dt)
        wt = torch.as_tensor(0.5 * w, dtype=dt)
        phi = self.mode_shapes(s * L, n, 0, d)
        G = torch.einsum("...q,...qi,...qj->...ij", wt.expand(phi.shape[:-1]), phi, phi)
        G = G * (self.rho_A * self.length).reshape(self.length.shape + (1, 1))
        tv = self.tip_values(n, d)
        G = G + self.tip_mass.reshape(self.length.shape + (1, 1)) * tv["tip"].unsqueeze(-1) * tv["tip"].unsqueeze(-2)
        G = G + self.tip_inertia.reshape(self.length.shape + (1, 1)) * (
            tv["tip_slope"].unsqueeze(-1) * tv["tip_slope"].unsqueeze(-2)
        )
        return G
