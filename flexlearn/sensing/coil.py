"""Two-layer planar PCB coil of seed 002 (Sec. III-A): geometry, resistance and Biot–Savart field.

The trace outline is the seed's r(φ) = R0 [1 + Σ_{k=1..3} α_k cos(kφ + β_k)], α = (0.085, 0.100, 0.050),
β = (0.5, 0.2, −0.4) rad. Successive turns use a constant pitch p: the radius envelope decreases by p per
turn, r(φ) = (R0 − p φ / 2π) [1 + Σ α_k cos(kφ + β_k)] (the seed only says "constant pitch"; this is our
reading). The top layer spirals in counter-clockwise (seen from +z) for N turns, a via at the centre goes
through the board, and the bottom layer spirals out while still circulating counter-clockwise, so both layers
add ("additively wound"); a via at the outer end closes the circuit to the paired supply leads.
``winding="reversed"`` retraces the top spiral backwards on the bottom layer: the
current circulates the other way and the two layers (nearly) cancel — the classic layout mistake.

Coordinates: the coil frame has its origin at the board centre, z along the board normal; the top copper is at
z = +h/2 and the bottom copper at z = −h/2 for a board of thickness h. All lengths in metres.

Defaults (our choice; the seed gives only ~19 turns/layer, 10 mil traces, 2 oz copper, 0.8 mm FR4, "near
1 Ω"): R0 = 10 mm, pitch 0.43 mm, 19 turns → inner envelope 1.83 mm; the outline spans 0.83–1.22 × the
envelope, so the outer edge reaches 12.2 mm (fits a 50 mm module disk). The pitch is the smallest that keeps a radial
≈4 mil (0.10 mm) clearance between the 10 mil (0.254 mm) traces where the outline factor is smallest (0.834 ×
0.43 mm = 0.359 mm ≥ 0.356 mm); the 0.35 mm one might guess would leave 0.04 mm there. Resistance from the
trace length (2 × ≈0.72 m), width, thickness 2 oz = 69.6 µm and ρ_Cu = 1.72e-8 Ω·m: ≈1.40 Ω, somewhat above
the seed's "near 1 Ω" — 19 turns of 10 mil trace only reach 1 Ω for a mean turn radius of ≈4 mm. 100 µT at the
neighbour (29 mm) then needs ≈2.8 A (≈3.9 V across the coil; 3.3 V gives ≈85 µT, consistent with the seed's
"a 40 ms pulse at 3.3 V produces approximately 100 µT").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Union

import torch

from flexlearn.config import check, check_positive
from flexlearn.sensing.biot_savart import MU0, biot_savart_polyline

__all__ = ["CoilConfig", "CoilModel", "PlanarCoil", "spiral_polyline", "lead_polyline", "biot_savart_polyline", "MU0"]

COPPER_RESISTIVITY = 1.72e-8
"""Resistivity of annealed copper at 20 °C [Ω·m]."""
OZ_COPPER = 34.8e-6
"""Thickness of 1 oz/ft² copper foil [m]."""


@dataclass
class CoilConfig:
    """Geometry and material of the PCB coil (SI units).

    Attributes:
        outer_radius: R0, envelope radius at the start of the spiral [m].
        pitch: radial decrease of the envelope per turn [m].
        turns: turns per layer.
        alpha: outline harmonic amplitudes α_k (dimensionless), seed 002 Sec. III-A.
        beta: outline harmonic phases β_k [rad].
        board_thickness: FR4 thickness h = distance between the two copper layers [m].
        copper_thickness: copper foil thickness [m] (2 oz).
        trace_width: trace width [m] (10 mil).
        resistivity: copper resistivity [Ω·m].
        points_per_turn: polyline vertices per turn (discretisation of the trace).
        winding: "same" (layers add) or "reversed" (bottom layer circulates the other way).
        lead_length, lead_separation: the supply leads as a pair of straight traces leaving the outer via
            radially (along the start of the top spiral, φ = 0) for ``lead_length`` [m], ``lead_separation``
            [m] apart in the board plane and closed at their far end (`lead_polyline`). Their fields cancel only
            to first order: the pair is a line dipole, B ≈ μ0 I s / (2π d²) at distance d. 0 (the default):
            not modelled, as in `spiral_polyline`.
    """

    outer_radius: float = 10.0e-3
    pitch: float = 0.43e-3
    turns: int = 19
    alpha: tuple[float, float, float] = (0.085, 0.100, 0.050)
    beta: tuple[float, float, float] = (0.5, 0.2, -0.4)
    board_thickness: float = 0.8e-3
    copper_thickness: float = 2 * OZ_COPPER
    trace_width: float = 0.254e-3
    resistivity: float = COPPER_RESISTIVITY
    points_per_turn: int = 48
    winding: str = "same"
    lead_length: float = 0.0
    lead_separation: float = 0.0

    def validate(self, where: str = "coil") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        check_positive(
            self, where, "outer_radius", "pitch", "board_thickness", "copper_thickness", "trace_width", "resistivity"
        )
        check(self.turns >= 1, f"{where}.turns", self.turns, "must be >= 1")
        check(self.points_per_turn >= 8, f"{where}.points_per_turn", self.points_per_turn, "must be >= 8")
        check(
            self.outer_radius - self.pitch * self.turns > 0,
            f"{where}.pitch",
            self.pitch,
            f"spiral of {self.turns} turns would cross the centre (outer_radius {self.outer_radius})",
        )
        check(
            sum(abs(a) for a in self.alpha) < 1,
            f"{where}.alpha",
            self.alpha,
            "sum of |alpha_k| must be < 1 (positive radius)",
        )
        check(self.winding in ("same", "reversed"), f"{where}.winding", self.winding, "must be 'same' or 'reversed'")
        check(
            0.0 <= self.lead_length <= 0.2 and 0.0 <= self.lead_separation <= 5e-3,
            f"{where}.lead_length/lead_separation",
            (self.lead_length, self.lead_separation),
            "must be in [0, 0.2] m and [0, 5e-3] m",
        )


def lead_polyline(start: torch.Tensor, length: float, separation: float) -> torch.Tensor:
    """Closed rectangle (5, 3) [m] of the supply-lead pair.

    Out along +r̂ from ``start`` (the outer via, in the board plane) on one side, back on the other, ``separation``
    apart (current out on the +φ̂ side).

    Args:
        start: the outer via (3,) [m].
        length: lead length [m].
        separation: distance between the two leads [m].

    Returns:
        The closed rectangle's vertices (5, 3) [m].
    """
    r = start.clone()
    r[2] = 0.0
    r = r / torch.linalg.vector_norm(r)
    side = torch.stack([-r[1], r[0], r.new_zeros(())]) * (0.5 * separation)
    a, b = start + side, start + side + length * r
    return torch.stack([a, b, b - 2 * side, a - 2 * side, a])


def spiral_polyline(
    outer_radius: torch.Tensor,
    pitch: torch.Tensor,
    alpha: torch.Tensor,
    beta: torch.Tensor,
    board_thickness: torch.Tensor,
    turns: int,
    points_per_turn: int,
    winding: str = "same",
) -> torch.Tensor:
    """Vertices (M, 3) [m] of the closed two-layer coil circuit, M = 2·turns·points_per_turn + 3.

    Top layer (z = +h/2): φ ∈ [0, 2πN], r = (R0 − pφ/2π)·s(φ), s(φ) = 1 + Σ α_k cos(kφ + β_k) (seed 002,
    Sec. III-A). Via to z = −h/2 at φ = 2πN. Bottom layer, parameter t ∈ [0, 2πN]: radius (R0 − p(2πN − t)/2π)
    at angle +t ("same": still counter-clockwise, spiralling out) or at angle −t ("reversed"). The bottom
    layer ends under the start of the top layer; a second via returns there to the top layer, where the two
    supply leads leave side by side (their fields cancel to first order; `lead_polyline` adds them). The circuit
    is therefore closed (``v[-1] == v[0]``): an open polyline would leave a spurious 1/r² field of the missing
    return path. The current flows along the vertices. Differentiable with respect to every tensor argument;
    dtype/device follow ``outer_radius``.

    Args:
        outer_radius: R0 [m].
        pitch: p, radial pitch per turn [m].
        alpha: shape amplitudes α_k (K,) [-].
        beta: shape phases β_k (K,) [rad].
        board_thickness: h [m].
        turns: N, turns per layer.
        points_per_turn: vertices per turn.
        winding: "same" or "reversed" (the bottom layer's direction).

    Returns:
        The vertices (M, 3) [m].
    """
    n = turns * points_per_turn
    total = 2.0 * math.pi * turns
    t = torch.linspace(0.0, total, n + 1, dtype=outer_radius.dtype, device=outer_radius.device)
    k = torch.arange(1, alpha.shape[-1] + 1, dtype=t.dtype, device=t.device)

    def shape(angle: torch.Tensor) -> torch.Tensor:
        return 1.0 + (alpha * torch.cos(angle[:, None] * k + beta)).sum(-1)

    def layer(angle: torch.Tensor, envelope: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Vertices (n + 1, 3) of one layer: radius ``envelope · s(angle)`` at ``angle``, height z.

        Args:
            angle: angles (n + 1,) [rad].
            envelope: radii before the shape factor (n + 1,) [m].
            z: layer height () [m].

        Returns:
            The vertices (n + 1, 3) [m].
        """
        r = envelope * shape(angle)
        return torch.stack([r * torch.cos(angle), r * torch.sin(angle), z.expand_as(r)], dim=-1)

    half = 0.5 * board_thickness
    top = layer(t, outer_radius - pitch * t / (2.0 * math.pi), half)
    env_bottom = outer_radius - pitch * (total - t) / (2.0 * math.pi)
    bottom_angle = total + t if winding == "same" else total - t
    bottom = layer(bottom_angle, env_bottom, -half)
    return torch.cat([top, bottom, top[:1]], dim=0)


class CoilModel(Protocol):
    """What a coil model offers (`PlanarCoil`, or the rig's `flexlearn.sim.rig.coil.StackedCoil`): its field
    [T] (..., 3) at points (..., 3) [m] of the coil frame for a current [A], trace length [m], resistance [Ω] and
    dipole moment [A·m²]."""

    def field(self, points: torch.Tensor, current: Union[float, torch.Tensor] = 1.0) -> torch.Tensor:
        """Flux density of the coil.

        Args:
            points: field points (..., 3) [m] in the coil frame.
            current: coil current [A].

        Returns:
            B (..., 3) [T].
        """
        ...

    def trace_length(self) -> torch.Tensor: ...

    def resistance(self) -> torch.Tensor: ...

    def moment(self, current: Union[float, torch.Tensor] = 1.0) -> torch.Tensor:
        """Magnetic dipole moment of the coil.

        Args:
            current: coil current [A].

        Returns:
            m (3,) [A·m²] in the coil frame.
        """
        ...


class PlanarCoil(torch.nn.Module):
    """The PCB coil as a module; geometric and material parameters are float64 buffers (SI units).

    Buffers: ``outer_radius`` [m], ``pitch`` [m], ``alpha`` (3,), ``beta`` (3,) [rad], ``board_thickness`` [m],
    ``copper_thickness`` [m], ``trace_width`` [m], ``resistivity`` [Ω·m]. Any of them can be replaced by a
    ``torch.nn.Parameter`` for identification; ``polyline``, ``field`` and ``resistance`` are differentiable.
    """

    outer_radius: torch.Tensor
    pitch: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor
    board_thickness: torch.Tensor
    copper_thickness: torch.Tensor
    trace_width: torch.Tensor
    resistivity: torch.Tensor

    def __init__(self, cfg: CoilConfig | None = None, dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        cfg = CoilConfig() if cfg is None else cfg
        cfg.validate()
        self.turns = int(cfg.turns)
        self.points_per_turn = int(cfg.points_per_turn)
        self.winding = cfg.winding
        self.lead_length, self.lead_separation = float(cfg.lead_length), float(cfg.lead_separation)
        for name in ("outer_radius", "pitch", "board_thickness", "copper_thickness", "trace_width", "resistivity"):
            self.register_buffer(name, torch.tensor(float(getattr(cfg, name)), dtype=dtype))
        self.register_buffer("alpha", torch.tensor(cfg.alpha, dtype=dtype))
        self.register_buffer("beta", torch.tensor(cfg.beta, dtype=dtype))

    def polyline(self) -> torch.Tensor:
        """(M, 3) vertices [m] of the trace in the coil frame, in current direction (see `spiral_polyline`)."""
        return spiral_polyline(
            self.outer_radius,
            self.pitch,
            self.alpha,
            self.beta,
            self.board_thickness,
            self.turns,
            self.points_per_turn,
            self.winding,
        )

    def trace_length(self) -> torch.Tensor:
        """Copper trace length [m] of both layers (polyline length without the two vias through the board)."""
        v = self.polyline()
        n = self.turns * self.points_per_turn
        seg = torch.linalg.vector_norm(v[1:] - v[:-1], dim=-1)
        return seg[:n].sum() + seg[n + 1 : 2 * n + 1].sum()

    def resistance(self) -> torch.Tensor:
        """DC resistance R = ρ L / (w t) [Ω] of the trace (via and leads neglected)."""
        return self.resistivity * self.trace_length() / (self.trace_width * self.copper_thickness)

    def moment(self, current: Union[float, torch.Tensor] = 1.0) -> torch.Tensor:
        """Magnetic dipole moment m = (I/2) ∮ r × dl [A·m²], (3,), in the coil frame.

        Args:
            current: coil current [A].

        Returns:
            m (3,) [A·m²] in the coil frame (the trace polyline only, without the supply leads).
        """
        v = self.polyline()
        return 0.5 * current * torch.linalg.cross(v[:-1], v[1:], dim=-1).sum(0)

    def field(self, points: torch.Tensor, current: Union[float, torch.Tensor] = 1.0) -> torch.Tensor:
        """Flux density [T] at ``points`` (..., 3) [m] in the coil frame, for ``current`` [A]; (..., 3).

        Includes the supply-lead pair when ``lead_length`` and ``lead_separation`` are set (`lead_polyline`).

        Args:
            points: field points (..., 3) [m] in the coil frame.
            current: coil current [A].

        Returns:
            B (..., 3) [T].
        """
        v = self.polyline()
        b = biot_savart_polyline(v, points, current)
        if self.lead_length > 0 and self.lead_separation > 0:
            b = b + biot_savart_polyline(
                lead_polyline(v[0], self.lead_length, self.lead_separation).to(v.dtype), points, current
            )
        return b
