"""The rod-load, damping and observer protocols: every library class satisfies its protocol, a potential has
one signature (checked once, with an error naming the load), and a TypeError raised inside a potential
reaches the caller instead of being taken for a signature mismatch."""

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.cosserat import (
    Clamp,
    CosseratRod,
    Damping,
    DampingEstimator,
    EmbeddedMagnet,
    Gravity,
    Material,
    PointForce,
    SimulationOptions,
    TipMagnet,
)
from flexlearn.physics.cosserat.compiled import lgvi as fused
from flexlearn.physics.cosserat.damping import DampingModel, RodObserver
from flexlearn.physics.cosserat.loads import Load, PotentialLoad, RodLoad, potential_loads
from flexlearn.physics.cosserat.simulation import RodSetup


def _rod():
    return CosseratRod.circular(0.05, 1e-3, Material(1100.0, 1e6, 0.5), 3)


def test_library_classes_satisfy_their_protocols():
    g, mag = Gravity(), TipMagnet((0.0, 0.0, 1e-3), (0.0, 0.01, 0.0))
    for ld in (g, PointForce(-1, (0.0, 0.0, 1e-3)), mag, EmbeddedMagnet(1, (1e-3, 0.0, 0.0), (0.0, 0.0, 0.01))):
        assert isinstance(ld, RodLoad)
    assert isinstance(g, PotentialLoad) and isinstance(mag, PotentialLoad)
    assert not isinstance(PointForce(-1, (0.0, 0.0, 1e-3)), PotentialLoad)
    assert isinstance(Damping(alpha=1.0), DampingModel)
    assert isinstance(DampingEstimator(torch.zeros(3, 4, 3)), RodObserver)


def test_gravity_potential_is_minus_the_work_of_its_force():
    rod = _rod()
    st = rod.arc_state(0.3, (1, 0, 0))
    ctx = rod.context([Gravity()])
    p = st.positions.clone().requires_grad_(True)
    f, _ = Gravity().apply(ctx, st.rotations, p, 0.0)
    (g,) = torch.autograd.grad(Gravity().potential(ctx, st.rotations, p, 0.0).sum(), p)
    assert torch.allclose(f, -g, atol=1e-15)


class _BrokenPotential(Load):
    """A constant tip force whose potential has a bug that raises TypeError."""

    def apply(self, ctx, R, p, t):
        f = torch.zeros_like(p)
        f[..., -1, 2] = 1e-3
        return f, None

    def potential(self, ctx, R, p, t):
        raise TypeError("a bug inside the potential")


class _OldSignature(_BrokenPotential):
    def potential(self, ctx, p):  # the two-argument form is no longer accepted
        return -1e-3 * p[..., -1, 2]


def test_type_error_inside_a_potential_propagates():
    # (the former dispatch caught it and called potential(ctx, p), which hid it behind another TypeError)
    with pytest.raises(TypeError, match="a bug inside the potential"):
        _rod().simulate(
            1e-5, 1e-6, loads=[_BrokenPotential()], base=Clamp(), options=SimulationOptions(record_energy=True)
        )


def test_potential_with_a_wrong_signature_is_named():
    with pytest.raises(ConfigError, match=r"loads\[1\]\.potential.*_OldSignature.*\(ctx, R, p, t\)"):
        potential_loads([Gravity(), _OldSignature()])
    # without an energy record the potential is never called, so the signature is not checked
    _rod().simulate(1e-5, 1e-6, loads=[_OldSignature()], base=Clamp(), options=SimulationOptions(backend="torch"))


def test_energy_of_gravity_and_magnet_through_the_one_signature():
    rod = _rod()
    loads = [Gravity(), TipMagnet((0.0, 0.0, 1e-3), (0.0, 0.01, 0.0))]
    tr = rod.simulate(
        2e-4, 1e-6, loads=loads, base=Clamp(), options=SimulationOptions(record_every=50, record_energy=True)
    )
    e = tr.energy
    assert torch.isfinite(e).all()
    assert float((e - e[0]).abs().max()) < 1e-3 * float(e.abs().max() + 1e-12)


def test_fused_kernel_refuses_another_damping_model_by_name():
    class MyDamping(Damping):
        pass

    rod = _rod()
    why = fused.eligible(rod, RodSetup([Gravity()], MyDamping(alpha=1.0), base=Clamp()), SimulationOptions())
    assert why == "damping model MyDamping runs on the tensor path"
    assert fused.eligible(rod, RodSetup([Gravity()], Damping(alpha=1.0), base=Clamp()), SimulationOptions()) == ""
