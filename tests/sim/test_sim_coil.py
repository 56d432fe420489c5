"""PCB coil of seed 002 (Sec. III-A): Biot–Savart against magpylib and analytic fields, winding, resistance."""

from __future__ import annotations

import math

import magpylib
import numpy as np
import pytest
import torch

from flexlearn.config import from_dict
from flexlearn.errors import ConfigError
from flexlearn.sensing.coil import MU0, CoilConfig, PlanarCoil, biot_savart_polyline

DT = torch.float64


def _magpy(vertices: torch.Tensor, points: np.ndarray, current: float) -> np.ndarray:
    src = magpylib.current.Polyline(current=current, vertices=vertices.detach().numpy())
    return np.asarray(src.getB(points))


def test_random_polyline_matches_magpylib() -> None:
    rng = np.random.default_rng(0)
    vertices = torch.from_numpy(rng.normal(0.0, 5e-3, (12, 3)))
    points = rng.normal(0.0, 2e-2, (200, 3))
    ours = biot_savart_polyline(vertices, torch.from_numpy(points), 1.7).numpy()
    ref = _magpy(vertices, points, 1.7)
    scale = np.linalg.norm(ref, axis=-1)
    assert np.all(np.linalg.norm(ours - ref, axis=-1) <= 1e-6 * scale)


def test_coil_field_matches_magpylib_near_and_far() -> None:
    coil = PlanarCoil()
    rng = np.random.default_rng(1)
    points = np.concatenate(
        [
            rng.uniform(-0.03, 0.03, (150, 3)),  # around the board
            rng.uniform(-0.015, 0.015, (50, 3)) + [0.0, 0.0, -0.029],
        ]
    )  # the neighbour
    points = points[np.abs(points[:, 2]) > 1.5e-3]  # off the copper
    ours = coil.field(torch.from_numpy(points), 2.0).numpy()
    ref = _magpy(coil.polyline(), points, 2.0)
    rel = np.linalg.norm(ours - ref, axis=-1) / np.linalg.norm(ref, axis=-1)
    assert rel.max() < 1e-6


def test_circular_loop_on_axis_analytic() -> None:
    a, current, n = 7e-3, 3.0, 20000
    phi = torch.linspace(0.0, 2.0 * math.pi, n + 1, dtype=DT)
    loop = torch.stack([a * torch.cos(phi), a * torch.sin(phi), torch.zeros_like(phi)], dim=-1)
    z = torch.tensor([-0.05, -0.029, -0.003, 0.0, 0.002, 0.02], dtype=DT)
    pts = torch.stack([torch.zeros_like(z), torch.zeros_like(z), z], dim=-1)
    b = biot_savart_polyline(loop, pts, current)
    exact = MU0 * current * a**2 / (2.0 * (a**2 + z**2) ** 1.5)
    torch.testing.assert_close(b[:, 2], exact, rtol=1e-6, atol=0.0)
    assert b[:, :2].abs().max() < 1e-9 * exact.max()


def test_far_field_is_the_dipole_of_the_moment() -> None:
    coil = PlanarCoil()
    m = coil.moment(1.0)
    errors = []
    for scale in (1.0, 4.0):  # the residual is the quadrupole: it falls off as 1/r
        r = scale * torch.tensor([[0.3, -0.2, 0.5], [0.0, 0.0, -0.8], [0.7, 0.1, 0.0]], dtype=DT)
        rn = r.norm(dim=-1, keepdim=True)
        rh = r / rn
        dip = MU0 / (4 * math.pi) * (3 * rh * (rh @ m)[:, None] - m) / rn**3
        errors.append(((coil.field(r) - dip).norm(dim=-1) / dip.norm(dim=-1)).max().item())
    assert errors[0] < 5e-3 and errors[1] < 1.5e-3 and errors[1] < 0.3 * errors[0]


def test_layers_add_and_reversed_layer_cancels() -> None:
    same, rev = PlanarCoil(), PlanarCoil(CoilConfig(winding="reversed"))
    p = torch.tensor([[0.0, 0.0, -0.029], [0.004, -0.003, -0.027]], dtype=DT)
    b_same, b_rev = same.field(p), rev.field(p)
    assert torch.all(b_same[:, 2] > 0)  # counter-clockwise seen from +z: field along +z
    assert torch.all(b_rev.norm(dim=-1) < 0.08 * b_same.norm(dim=-1))
    v = same.polyline()
    half = same.turns * same.points_per_turn + 1
    top = biot_savart_polyline(v[:half], p)
    bottom = biot_savart_polyline(v[half:], p)
    assert torch.all(top[:, 2] > 0) and torch.all(bottom[:, 2] > 0)
    assert torch.all((bottom[:, 2] / top[:, 2] - 1).abs() < 0.2)
    assert same.moment()[2] > 0 and rev.moment()[2].abs() < 0.05 * same.moment()[2]


def test_polyline_shape_via_and_outline() -> None:
    coil = PlanarCoil()
    v = coil.polyline()
    n = coil.turns * coil.points_per_turn
    assert v.shape == (2 * n + 3, 3)
    torch.testing.assert_close(v[n, :2], v[n + 1, :2])  # the centre via is vertical
    assert v[n, 2] - v[n + 1, 2] == pytest.approx(0.8e-3)
    torch.testing.assert_close(v[-2, :2], v[0, :2])  # so is the outer via that closes the circuit
    torch.testing.assert_close(v[-1], v[0])
    # start of the spiral: r(0) = R0 (1 + Σ α_k cos β_k), seed 002 Sec. III-A
    cfg = CoilConfig()
    r0 = cfg.outer_radius * (1 + sum(a * math.cos(b) for a, b in zip(cfg.alpha, cfg.beta)))
    assert float(v[0, :2].norm()) == pytest.approx(r0, rel=1e-12)
    assert float(v[-2, :2].norm()) == pytest.approx(r0, rel=1e-12)  # both leads at the outer edge


def test_resistance_from_trace_length() -> None:
    coil = PlanarCoil()
    r = float(coil.resistance())
    cfg = CoilConfig()
    assert r == pytest.approx(cfg.resistivity * float(coil.trace_length()) / (cfg.trace_width * cfg.copper_thickness))
    assert 1.0 < r < 2.0
    # a circular Archimedean spiral (α = 0): length ≈ 2 layers × 2π Σ mean radius per turn
    circ = PlanarCoil(CoilConfig(alpha=(0.0, 0.0, 0.0), points_per_turn=256))
    n, r0, p = cfg.turns, cfg.outer_radius, cfg.pitch
    expected = 2 * 2 * math.pi * n * (r0 - 0.5 * p * n)
    assert float(circ.trace_length()) == pytest.approx(expected, rel=1e-3)


def test_gradient_wrt_geometry_matches_finite_differences() -> None:
    cfg = CoilConfig(turns=3, points_per_turn=16, outer_radius=8e-3, pitch=1e-3)
    pts = torch.tensor([[0.002, 0.001, -0.02], [0.0, -0.004, 0.015]], dtype=DT)

    def field(r0: torch.Tensor, pitch: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        coil = PlanarCoil(cfg)
        coil.outer_radius, coil.pitch, coil.alpha = r0, pitch, alpha
        return coil.field(pts, 2.0) * 1e6  # µT, well scaled for gradcheck

    args = (
        torch.tensor(8e-3, dtype=DT, requires_grad=True),
        torch.tensor(1e-3, dtype=DT, requires_grad=True),
        torch.tensor(cfg.alpha, dtype=DT, requires_grad=True),
    )
    assert torch.autograd.gradcheck(field, args, eps=1e-8, atol=1e-7, rtol=1e-5)


def test_parameter_buffer_can_be_learned() -> None:
    coil = PlanarCoil()
    assert {"outer_radius", "pitch", "alpha", "beta", "resistivity"} <= set(coil.state_dict())
    coil.pitch = torch.nn.Parameter(coil.pitch.clone())
    coil.field(torch.tensor([0.0, 0.0, -0.029], dtype=DT))[2].backward()
    assert coil.pitch.grad is not None and torch.isfinite(coil.pitch.grad)


def test_points_on_the_wire_and_shapes() -> None:
    v = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], dtype=DT)
    b = biot_savart_polyline(v, torch.tensor([[0.5, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=DT))
    assert torch.all(b == 0)  # exact: on-wire points are masked to 0; collinear ones have an exact zero cross product
    out = biot_savart_polyline(v, torch.zeros(4, 5, 3, dtype=DT) + torch.tensor([0.5, 1.0, 0.0], dtype=DT))
    assert out.shape == (4, 5, 3) and out.dtype == DT


@pytest.mark.parametrize(
    "data, key",
    [
        ({"pitch": -1e-3}, "coil.pitch"),
        ({"winding": "both"}, "coil.winding"),
        ({"pitch": 1e-3, "turns": 19}, "coil.pitch"),
        ({"turnz": 3}, "turnz"),
    ],
)
def test_coil_config_errors_name_the_key(data: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        from_dict(CoilConfig, data)
