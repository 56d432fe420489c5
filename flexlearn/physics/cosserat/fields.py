"""Magnetic flux-density fields B(x, t) for magnetically actuated rods (seed 001, Sec. 4.3).

A field is a callable ``field(x, t) -> B`` with ``x`` (..., 3) world positions [m], ``t`` a float [s] and
``B`` (..., 3) [T], plus ``gradient(x, t) -> (..., 3, 3)`` with ``G[..., i, j] = ∂B_i/∂x_j``, used for the
magnet force ``F = ∇(m·B) = Gᵀ m`` (seed 001, Sec. 4.3). Fields whose ``uniform`` attribute is ``True``
have zero gradient and the force computation is skipped. Any plain Python callable ``B(x, t)`` can be
wrapped in :class:`CallableField`; its gradient is taken by autograd unless given.

Field parameters are buffers (float64), so that an identification can turn e.g. the amplitude of a
:class:`RotatingField` into a ``Parameter``.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from flexlearn.config import check
from flexlearn.sensing.biot_savart import MU0, biot_savart_polyline

ArrayLike = Union[float, Sequence[float], Tensor]


def _vec(v: ArrayLike, name: str, dtype=torch.float64) -> Tensor:
    t = torch.as_tensor(v, dtype=dtype).clone()
    check(t.shape[-1:] == (3,), name, tuple(t.shape), "expected shape (3,) or (B, 3)")
    check(bool(torch.isfinite(t).all()), name, t.tolist(), "must be finite")
    return t


def _autograd_gradient(fn: Callable[[Tensor, float], Tensor], x: Tensor, t: float) -> Tensor:
    """``∂B_i/∂x_j`` (..., 3, 3) of ``fn`` by autograd (x is treated as a fresh leaf)."""
    with torch.enable_grad():
        xx = x.detach().requires_grad_(True)
        b = fn(xx, t)
        rows = [
            torch.autograd.grad(
                b[..., i].sum(), xx, create_graph=torch.is_grad_enabled(), retain_graph=True, allow_unused=True
            )[0]
            for i in range(3)
        ]
    rows = [torch.zeros_like(x) if r is None else r for r in rows]
    return torch.stack(rows, -2)


class Field(torch.nn.Module):
    """Base class: subclasses implement :meth:`forward`; :meth:`gradient` defaults to autograd."""

    uniform: bool = False

    def forward(self, x: Tensor, t: float) -> Tensor:  # pragma: no cover - abstract
        """Flux density at the points ``x`` and time ``t``.

        Args:
            x: World positions [m], shape (..., 3).
            t: Time [s].

        Returns:
            Flux density B [T], shape (..., 3).
        """
        raise NotImplementedError

    def samples(self, x: Tensor, times: Sequence[float]) -> Tensor:
        """(T, B, 3) field at the points ``x`` (B, 3) for each time [T]; subclasses vectorise over time.

        Args:
            x: World positions [m], shape (B, 3).
            times: Sample times [s].

        Returns:
            Flux densities [T], shape (T, B, 3).
        """
        return torch.stack([self(x, float(t)) for t in times])

    def gradient(self, x: Tensor, t: float) -> Tensor:
        """Field gradient ``G[..., i, j] = ∂B_i/∂x_j``: zero when ``uniform``, else by autograd.

        Args:
            x: World positions [m], shape (..., 3).
            t: Time [s].

        Returns:
            Gradient [T/m], shape (..., 3, 3).
        """
        if self.uniform:
            return torch.zeros(x.shape + (3,), dtype=x.dtype, device=x.device)
        return _autograd_gradient(self.forward, x, t)


class UniformField(Field):
    """Constant, spatially uniform field ``B`` (3,) or (B, 3) [T] (one per rod of the batch)."""

    uniform = True
    flux_density: Tensor  # buffer (3,) or (B, 3) [T]

    def __init__(self, flux_density: ArrayLike):
        super().__init__()
        self.register_buffer("flux_density", _vec(flux_density, "UniformField.flux_density"))

    def samples(self, x: Tensor, times: Sequence[float]) -> Tensor:
        """(T, B, 3) constant field at the points ``x`` for each time [T].

        Args:
            x: World positions [m], shape (B, 3) (only the shape is used).
            times: Sample times [s].

        Returns:
            Flux densities [T], shape (T, B, 3).
        """
        return self(x, 0.0).unsqueeze(0).expand(len(times), *x.shape)

    def forward(self, x: Tensor, t: float) -> Tensor:
        """The constant flux density, broadcast to the points ``x``.

        Args:
            x: World positions [m], shape (..., 3) (only the shape is used).
            t: Time [s] (unused).

        Returns:
            Flux density B [T], shape (..., 3).
        """
        b = self.flux_density.to(x)
        while b.dim() < x.dim():
            b = b.unsqueeze(-2)
        return b.expand(x.shape)


class RotatingField(Field):
    """Uniform field rotating in the plane spanned by ``axes = (u, v)`` plus a static ``offset`` [T].

    ``B(t) = offset + amplitude (cos(2π f t + phase) u + sin(2π f t + phase) v)``. Seed 001, Sec. 4.3: a
    static 7.75 mT field compensates gravity, then a 14.5 mT field rotates in the E2E3 plane.
    ``ramp`` [s] > 0 multiplies the rotating part by ``min(t/ramp, 1)`` (a smooth start).
    """

    uniform = True
    # buffers: amplitude [T] and frequency [Hz] () or (B,); u, v, offset (3,) ([T] for the offset)
    amplitude: Tensor
    frequency: Tensor
    u: Tensor
    v: Tensor
    offset: Tensor

    def __init__(
        self,
        amplitude: float,
        frequency: float,
        axes: Tuple[ArrayLike, ArrayLike] = ((0, 1, 0), (0, 0, 1)),
        offset: ArrayLike = (0.0, 0.0, 0.0),
        phase: float = 0.0,
        ramp: float = 0.0,
    ):
        super().__init__()
        check(
            math.isfinite(float(torch.as_tensor(amplitude).detach())),
            "RotatingField.amplitude",
            amplitude,
            "must be finite",
        )
        check(
            math.isfinite(float(torch.as_tensor(frequency).detach())),
            "RotatingField.frequency",
            frequency,
            "must be finite [Hz]",
        )
        check(float(ramp) >= 0.0, "RotatingField.ramp", ramp, "must be >= 0 [s]")
        self.register_buffer("amplitude", torch.as_tensor(amplitude, dtype=torch.float64).clone())
        self.register_buffer("frequency", torch.as_tensor(frequency, dtype=torch.float64).clone())
        self.register_buffer("u", _vec(axes[0], "RotatingField.axes[0]"))
        self.register_buffer("v", _vec(axes[1], "RotatingField.axes[1]"))
        self.register_buffer("offset", _vec(offset, "RotatingField.offset"))
        self.phase = float(phase)
        self.ramp = float(ramp)

    def value(self, t: float) -> Tensor:
        """The uniform field ``B(t)`` (ramped rotating part plus offset).

        Args:
            t: Time [s].

        Returns:
            Flux density [T], shape (3,), or (B, 3) for batched amplitude or frequency.
        """
        ang = 2.0 * math.pi * self.frequency * t + self.phase
        scale = min(t / self.ramp, 1.0) if self.ramp > 0 else 1.0
        amp = self.amplitude * scale
        a = amp.unsqueeze(-1) if amp.dim() > 0 else amp
        c = torch.cos(ang)
        s = torch.sin(ang)
        c = c.unsqueeze(-1) if c.dim() > 0 else c
        s = s.unsqueeze(-1) if s.dim() > 0 else s
        return self.offset + a * (c * self.u + s * self.v)

    def samples(self, x: Tensor, times: Sequence[float]) -> Tensor:
        """(T, B, 3) field for all ``times`` at once (uniform in space: ``x`` gives only the shape).

        Args:
            x: World positions [m], shape (B, 3).
            times: Sample times [s].

        Returns:
            Flux densities [T], shape (T, B, 3).
        """
        t = torch.as_tensor(list(times), dtype=torch.float64)
        ang = 2.0 * math.pi * self.frequency.reshape(-1, 1) * t + self.phase  # (1 or B, T)
        scale = (t / self.ramp).clamp(max=1.0) if self.ramp > 0 else torch.ones_like(t)
        amp = (self.amplitude.reshape(-1, 1) * scale).unsqueeze(-1)
        b = self.offset + amp * (torch.cos(ang).unsqueeze(-1) * self.u + torch.sin(ang).unsqueeze(-1) * self.v)
        return b.transpose(0, 1).to(x).expand(len(t), x.shape[0], 3)

    def forward(self, x: Tensor, t: float) -> Tensor:
        """The uniform field at time ``t``, broadcast to the points ``x``.

        Args:
            x: World positions [m], shape (..., 3) (only the shape is used).
            t: Time [s].

        Returns:
            Flux density B [T], shape (..., 3).
        """
        b = self.value(t).to(x)
        while b.dim() < x.dim():
            b = b.unsqueeze(-2)
        return b.expand(x.shape)


def _loop_polyline(center: Tensor, normal: int, radius: float, n: int = 64) -> Tensor:
    ang = torch.linspace(0.0, 2.0 * math.pi, n + 1, dtype=torch.float64)
    a, b = [(normal + 1) % 3, (normal + 2) % 3]
    pts = torch.zeros(n + 1, 3, dtype=torch.float64)
    pts[:, a] = radius * torch.cos(ang)
    pts[:, b] = radius * torch.sin(ang)
    return pts + center


class HelmholtzField(Field):
    """Two nested Helmholtz pairs (seed 001, Sec. 4.3, Fig. 12): the outer pair along ``axes[0]`` (E1 by
    default), the inner, smaller pair along ``axes[1]`` (E2), centred at ``center``.

    ``currents(t) -> (I_outer, I_inner)`` [A] (a callable or a constant pair). ``model='ideal'`` uses the
    field at the centre of an ideal pair, ``B = (4/5)^{3/2} μ0 n I / R`` along the pair's axis, uniform
    (zero gradient); ``model='biot_savart'`` sums the exact fields of the four thin circular loops
    (``flexlearn.sensing.biot_savart``, 64-gon loops, each pair spaced by its radius), whose gradient
    gives the magnet force. ``from_flux_densities`` builds the currents that give wanted central fields.
    """

    center: Tensor  # buffer (3,) [m]
    loops: Tensor  # buffer (4, 65, 3) [m] of the loop polylines, ``model='biot_savart'`` only

    def __init__(
        self,
        radii: Tuple[float, float] = (0.10, 0.07),
        turns: Tuple[int, int] = (200, 200),
        currents: Union[Callable[[float], Tuple[float, float]], Tuple[float, float]] = (0.0, 0.0),
        axes: Tuple[int, int] = (0, 1),
        center: ArrayLike = (0.0, 0.0, 0.0),
        model: str = "ideal",
    ):
        super().__init__()
        check(model in ("ideal", "biot_savart"), "HelmholtzField.model", model, "must be 'ideal' or 'biot_savart'")
        for i, r in enumerate(radii):
            check(float(r) > 0, f"HelmholtzField.radii[{i}]", r, "must be > 0 [m]")
        self.radii = tuple(float(r) for r in radii)
        self.turns = tuple(int(n) for n in turns)
        self.axes = tuple(int(a) for a in axes)
        self.model = model
        self.uniform = model == "ideal"
        self._currents = currents
        self.register_buffer("center", _vec(center, "HelmholtzField.center"))
        if model == "biot_savart":
            loops = []
            for r, ax in zip(self.radii, self.axes):
                for sgn in (-0.5, 0.5):
                    c = self.center.clone()
                    c[ax] = c[ax] + sgn * r
                    loops.append(_loop_polyline(c, ax, r))
            self.register_buffer("loops", torch.stack(loops))

    @staticmethod
    def gain(radius: float, turns: int) -> float:
        """Central flux density per ampere of an ideal Helmholtz pair [T/A].

        Args:
            radius: Coil radius R [m].
            turns: Number of turns n per coil.

        Returns:
            Gain ``(4/5)^{3/2} μ0 n / R`` [T/A].
        """
        return (4.0 / 5.0) ** 1.5 * MU0 * turns / radius

    @classmethod
    def from_flux_densities(
        cls, b_outer: Union[float, Callable[[float], float]], b_inner: Union[float, Callable[[float], float]], **kw
    ) -> "HelmholtzField":
        """A field whose ideal central flux densities are the given ones.

        Args:
            b_outer: Central flux density [T] of the outer pair, a constant or a function of time [s].
            b_inner: Central flux density [T] of the inner pair, a constant or a function of time [s].
            **kw: Further :class:`HelmholtzField` arguments (``radii``, ``turns``, ``axes``, ``center``, ``model``).

        Returns:
            The :class:`HelmholtzField` with the matching currents.
        """
        radii = kw.get("radii", (0.10, 0.07))
        turns = kw.get("turns", (200, 200))
        g0, g1 = cls.gain(radii[0], turns[0]), cls.gain(radii[1], turns[1])
        f0 = b_outer if callable(b_outer) else (lambda t, b=b_outer: b)
        f1 = b_inner if callable(b_inner) else (lambda t, b=b_inner: b)
        return cls(currents=lambda t: (f0(t) / g0, f1(t) / g1), **kw)

    def currents(self, t: float) -> Tuple[float, float]:
        """The coil currents at time ``t``.

        Args:
            t: Time [s].

        Returns:
            ``(I_outer, I_inner)`` [A].
        """
        c = self._currents(t) if callable(self._currents) else self._currents
        return float(c[0]), float(c[1])

    def forward(self, x: Tensor, t: float) -> Tensor:
        """Flux density of the two pairs at the points ``x``.

        Args:
            x: World positions [m], shape (..., 3).
            t: Time [s].

        Returns:
            Flux density B [T], shape (..., 3).
        """
        i0, i1 = self.currents(t)
        if self.model == "ideal":
            b = torch.zeros(3, dtype=x.dtype, device=x.device)
            b[self.axes[0]] = self.gain(self.radii[0], self.turns[0]) * i0
            b[self.axes[1]] = b[self.axes[1]] + self.gain(self.radii[1], self.turns[1]) * i1
            return b.expand(x.shape)
        out = torch.zeros_like(x)
        for k, cur in enumerate((i0, i0, i1, i1)):
            n = self.turns[k // 2]
            out = out + biot_savart_polyline(self.loops[k].to(x), x, current=cur * n)
        return out


class CallableField(Field):
    """Wrap any ``fn(x, t) -> B`` [T]; ``gradient_fn(x, t) -> ∂B_i/∂x_j`` or autograd of ``fn``."""

    def __init__(
        self,
        fn: Callable[[Tensor, float], Tensor],
        gradient_fn: Optional[Callable[[Tensor, float], Tensor]] = None,
        uniform: bool = False,
    ):
        super().__init__()
        self.fn = fn
        self.gradient_fn = gradient_fn
        self.uniform = uniform

    def forward(self, x: Tensor, t: float) -> Tensor:
        """``fn(x, t)``.

        Args:
            x: World positions [m], shape (..., 3).
            t: Time [s].

        Returns:
            Flux density B [T], shape (..., 3).
        """
        return self.fn(x, t)

    def gradient(self, x: Tensor, t: float) -> Tensor:
        """``gradient_fn(x, t)`` when given, else the base class's gradient.

        Args:
            x: World positions [m], shape (..., 3).
            t: Time [s].

        Returns:
            Gradient ``∂B_i/∂x_j`` [T/m], shape (..., 3, 3).
        """
        if self.gradient_fn is not None:
            return self.gradient_fn(x, t)
        return super().gradient(x, t)


def as_field(field) -> Field:
    """Accept a :class:`Field`, a constant vector (uniform field) or a callable ``B(x, t)``.

    Args:
        field: A :class:`Field`, a callable ``B(x, t)``, or a flux density [T] of shape (3,) or (B, 3).

    Returns:
        The :class:`Field`.
    """
    if isinstance(field, Field):
        return field
    if callable(field):
        return CallableField(field)
    return UniformField(field)
