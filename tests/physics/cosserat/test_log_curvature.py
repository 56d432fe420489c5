"""The log-map curvature (``curvature='log'``, flexlearn.physics.cosserat.strains.log_curvature): its Jacobian
against autograd and across the series' switch, a uniformly twisted and a uniformly bent rod carry exactly
G J Φ / L and E I κ at 0.75 rad per element (the Cayley curvature tan(θ/2) / (θ/2) more), and the fused kernel runs
it as the tensor path does."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from flexlearn.lie import so3_cayley_inv
from flexlearn.physics.cosserat import Clamp, CosseratRod, Gravity, Material, PointForce, RodState
from flexlearn.physics.cosserat.compiled import lgvi
from flexlearn.physics.cosserat.damping import Damping
from flexlearn.physics.cosserat.simulation import SimulationOptions
from flexlearn.physics.cosserat.strains import log_curvature
from tests.physics.cosserat.same_runs import assert_same_runs

HORIZONTAL = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)


def _rotation(axis, angle):
    a = torch.tensor(axis, dtype=torch.float64)
    k = torch.tensor([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]], dtype=torch.float64)
    return torch.eye(3, dtype=torch.float64) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def test_log_curvature_is_the_rotation_vector_with_its_jacobian():
    """ψ = θ a for Q = rotation by θ about a (0.1 to 3 rad); P = ∂ψ/∂(2f) equals autograd's Jacobian on both sides
    of the series' switch (|f|² = 1e-6)."""
    for angle in (0.1, 0.78, 2.0, 3.0):
        axis = torch.tensor([0.3, -0.5, 0.8], dtype=torch.float64)
        axis = axis / axis.norm()
        f = so3_cayley_inv(_rotation(axis.tolist(), angle).unsqueeze(0))
        psi, _ = log_curvature(f)
        assert torch.allclose(psi[0], angle * axis, atol=1e-12)
    for t in (1e-4, 9.99e-4, 1.001e-3, 0.05, 1.5):
        f = (t * torch.tensor([0.6, 0.0, 0.8], dtype=torch.float64)).requires_grad_(True)
        jac = torch.autograd.functional.jacobian(lambda x: log_curvature(x)[0], f)
        _, P = log_curvature(f.detach())
        assert torch.allclose(P, 0.5 * jac, rtol=1e-9, atol=1e-12), t


CAYLEY_EXCESS = 2 * math.tan(0.375) * (1 + math.tan(0.375) ** 2) / 0.75 - 1.0
"""The Cayley curvature's torque at 0.75 rad per element over the exact one: ∂/∂θ of ½ l C (2 tan(θ/2) / l)²."""


@pytest.mark.parametrize("curvature, excess", [("log", 0.0), ("cayley", CAYLEY_EXCESS)])
def test_a_uniform_twist_and_bend_carry_the_exact_moment_at_large_angles_per_element(curvature, excess):
    """Four elements (L = 0.4 m), each turned by 0.75 rad about the rod's axis (a twist Φ = 3 rad, straight) or
    across it (an arc of 3 rad, geodesic strain): the end nodes carry G J Φ / L and E I κ to 1e-12 with the log
    curvature, 21 % more with the Cayley curvature (2 tan(θ/2)(1 + tan²(θ/2)) / θ)."""
    rod = CosseratRod.circular(0.4, 0.01, Material(1000.0, 1e6, 0.3), 4, curvature=curvature, strain="geodesic")
    stiffness = rod.context().bend_stiffness[0, 0]
    twist = torch.stack([_rotation((0.0, 0.0, 1.0), 0.75 * k) for k in range(5)]).unsqueeze(0)
    straight = rod.straight_state()
    arc = rod.arc_state(3.0, (0.0, 1.0, 0.0))
    for (R, p), axis in (((twist, straight.positions), 2), ((arc.rotations, arc.positions), 1)):
        _, tau = rod.internal_forces(R, p)
        moment = float(stiffness[axis]) * 0.75 / 0.1
        for node, sign in ((0, 1.0), (-1, -1.0)):
            assert float(tau[0, node, axis]) / (sign * moment) - 1.0 == pytest.approx(excess, abs=1e-12)


@pytest.mark.skipif(not lgvi.HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("scheme", ["lgvi", "implicit"])
def test_the_kernel_runs_the_log_curvature_as_the_tensor_path_does(scheme):
    """A clamped rod, pre-twisted and bent, released under gravity and a tip force (300 steps, the geodesic strain):
    the kernel's positions, rotations, reactions and final velocities equal the tensor path's to round-off."""
    rod = CosseratRod.circular(0.3, 3e-3, Material(1000.0, 2e6, 0.4), 10, strain="geodesic", curvature="log")
    st = rod.arc_state(0.8, (0.0, 1.0, 0.0), Clamp.horizontal())
    twist = torch.stack([_rotation((0.0, 0.0, 1.0), 0.3 * k) for k in range(11)]).unsqueeze(0)
    start = RodState(st.positions, st.rotations @ twist, torch.zeros_like(st.positions), torch.zeros_like(st.positions))
    base = Clamp(start.positions[0, 0], start.rotations[0, 0])
    dt = 0.5 * float(rod.stable_dt()) if scheme == "lgvi" else 2e-4
    options = SimulationOptions(scheme=scheme, record_every=50, implicit_dissipation=0.05)
    runs = {
        backend: rod.simulate(300 * dt, dt, loads=[Gravity(), PointForce(-1, (0.0, 0.0, 2e-3))],
                              damping=Damping(alpha=5.0), initial=start, base=base,
                              options=dataclasses.replace(options, backend=backend))
        for backend in ("numba", "torch")
    }  # fmt: skip
    assert_same_runs(runs["numba"], runs["torch"])


def test_a_bad_curvature_is_refused_by_name():
    from flexlearn.errors import ConfigError

    with pytest.raises(ConfigError, match="curvature"):
        CosseratRod.circular(0.4, 0.01, Material(1000.0, 1e6, 0.3), 4, curvature="exp")
    with pytest.raises(ConfigError, match="curvature"):
        CosseratRod.circular(0.4, 0.01, Material(1000.0, 1e6, 0.3), 4, curvature=None)
