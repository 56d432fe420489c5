"""Contact with rigid obstacles: a rod resting on a plane, a cylinder and a sphere carries its weight in contact
forces (the penetration per node is its load over the stiffness); Coulomb friction holds a rod on a slope steeper
than its friction angle and lets it slide at g (sin α − μ cos α) on a steeper one."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.cosserat import (
    CosseratRod,
    CylinderContact,
    Damping,
    Gravity,
    Material,
    PlaneContact,
    Polyline,
    SimulationOptions,
    SphereContact,
    contact_forces,
)

L, R_ROD, G = 0.2, 2e-3, 9.81
MAT = Material(density=1000.0, youngs_modulus=1e6, poisson_ratio=0.5)
K, C = 200.0, 0.2  # N/m and N s/m per node: ~10 µm under a node's weight, about critically damped


@pytest.fixture(scope="module")
def rod():
    return CosseratRod.circular(L, R_ROD, MAT, 10)


def _lying(rod, z: float, along=(1.0, 0.0, 0.0)):
    a = torch.tensor(along, dtype=torch.float64)
    start = torch.tensor([0.0, 0.0, z], dtype=torch.float64) - 0.5 * L * a
    line = Polyline([start.tolist(), (start + L * a).tolist()], normal=(0.0, 0.0, 1.0) if along[2] == 0 else (1, 0, 0))
    return line.state(rod)


def _run(rod, contact, duration, gravity=(0.0, 0.0, -G), z=R_ROD, alpha=20.0):
    opts = SimulationOptions(scheme="implicit", backend="torch", record_every=50)
    return rod.simulate(
        duration,
        5e-4,
        loads=[Gravity(gravity), contact],
        damping=Damping(alpha=alpha),
        initial=_lying(rod, z),
        base="free",
        options=opts,
    )


def _weight(rod) -> float:
    return (
        float(rod.node_masses().sum()) * G if hasattr(rod, "node_masses") else MAT.density * math.pi * R_ROD**2 * L * G
    )


def test_a_rod_resting_on_a_plane_carries_its_weight_in_contact_forces(rod):
    plane = PlaneContact((0, 0, 0), (0, 0, 1), rod_radius=R_ROD, stiffness=K, damping=C)
    tr = _run(rod, plane, 0.3)
    p = tr.positions[-1].unsqueeze(0)
    normal, friction, depth = contact_forces(plane, p, torch.zeros_like(p))
    weight = MAT.density * math.pi * R_ROD**2 * L * G
    assert float(normal[..., 2].sum()) == pytest.approx(weight, rel=1e-3)  # at rest: the plane carries it all
    assert float(friction.abs().max()) == 0.0  # no friction coefficient
    node_weight = normal[0, :, 2] / K  # each node's penetration is its load over the stiffness
    assert torch.allclose(depth[0], node_weight, rtol=1e-9, atol=1e-15)
    assert float(depth.max()) < 2e-5 and float(tr.positions[-1, :, 2].min()) > R_ROD - 2e-5


@pytest.mark.parametrize("mu, slides", [(0.5, False), (0.1, True)])
def test_coulomb_friction_holds_or_lets_slide_on_a_slope(rod, mu, slides):
    """Sliding: the centre accelerates at g (sin α − μ cos α). Held: the regularised friction law's creep speed,
    ε s / sqrt(1 − s²) with s = tan α / μ the share of the friction cone used (module docstring of `contact`)."""
    alpha, eps = 0.3, 2e-3  # slope [rad] (tan α = 0.309); ε above h μ g = 2.5e-3 / 1.0: the explicit bound
    g = (G * math.sin(alpha), 0.0, -G * math.cos(alpha))  # a level plane under tilted gravity: an incline
    plane = PlaneContact((0, 0, 0), (0, 0, 1), rod_radius=R_ROD, stiffness=K, damping=C, friction=mu, slip_velocity=eps)
    tr = _run(rod, plane, 0.4, gravity=g, alpha=0.0)
    x = tr.positions[:, :, 0].mean(-1)
    t = tr.times
    i1 = int(torch.searchsorted(t, torch.tensor(0.1, dtype=t.dtype)))  # after the contact forces have built up
    dx, dt = float(x[-1] - x[i1]), float(t[-1] - t[i1])
    v1 = float((x[i1 + 1] - x[i1 - 1]) / (t[i1 + 1] - t[i1 - 1]))
    if slides:
        a = G * (math.sin(alpha) - mu * math.cos(alpha))
        assert dx == pytest.approx(v1 * dt + 0.5 * a * dt * dt, rel=0.02)
    else:
        share = math.tan(alpha) / mu
        assert dx / dt == pytest.approx(eps * share / math.sqrt(1 - share**2), rel=0.05)


def test_a_rod_across_a_cylinder_and_on_a_sphere_rests_on_them(rod):
    weight = MAT.density * math.pi * R_ROD**2 * L * G
    for obstacle, z in (
        (CylinderContact((0, 0, -0.05), (0, 1, 0), 0.05, length=0.1, rod_radius=R_ROD, stiffness=K, damping=C), 0.0),
        (SphereContact((0, 0, -0.05), 0.05, rod_radius=R_ROD, stiffness=K, damping=C), 0.0),
    ):
        tr = _run(rod, obstacle, 0.4, z=z + R_ROD, alpha=40.0)
        p = tr.positions[-1].unsqueeze(0)
        v = torch.zeros_like(p)
        normal, _, depth = contact_forces(obstacle, p, v)
        # momentum balance at rest: the vertical contact forces carry the weight (the rod drapes, free ends)
        assert float(normal[..., 2].sum()) == pytest.approx(weight, rel=0.02), type(obstacle).__name__
        assert float(depth.max()) < 1e-4


def test_obstacle_geometry_and_its_checks():
    cyl = CylinderContact((0, 0, 0), (0, 0, 2), 0.1, length=1.0, rod_radius=0.01, stiffness=1.0)
    d, n = cyl.surface(torch.tensor([[0.3, 0.0, 0.2], [0.0, 0.3, 0.7]], dtype=torch.float64))
    assert float(d[0]) == pytest.approx(0.2) and torch.allclose(n[0], torch.tensor([1.0, 0, 0], dtype=torch.float64))
    assert math.isinf(float(d[1]))  # beyond the end face: no contact
    sph = SphereContact((1, 0, 0), 0.5, rod_radius=0.01, stiffness=1.0)
    d, n = sph.surface(torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64))
    assert float(d[0]) == pytest.approx(1.5) and torch.allclose(n[0], torch.tensor([0.0, 0, 1], dtype=torch.float64))
    with pytest.raises(ConfigError, match="PlaneContact.stiffness"):
        PlaneContact((0, 0, 0), (0, 0, 1), rod_radius=0.01, stiffness=-1.0)
    with pytest.raises(ConfigError, match="PlaneContact.normal"):
        PlaneContact((0, 0, 0), (0, 0, 0), rod_radius=0.01, stiffness=1.0)
    with pytest.raises(ConfigError, match="CylinderContact.radius"):
        CylinderContact((0, 0, 0), (0, 0, 1), 0.0, rod_radius=0.01, stiffness=1.0)
