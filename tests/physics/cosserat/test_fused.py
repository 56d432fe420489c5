"""The fused numba kernel runs the same discrete equations as the tensor path: trajectories and final states
agree to round-off; it keeps the momenta of a free rod; failures and ineligible runs go to the tensor path."""

import math

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from flexlearn.errors import ConfigError
from flexlearn.lie import so3_exp
from flexlearn.physics.cosserat import (
    FREE,
    Clamp,
    CosseratRod,
    Damping,
    EmbeddedMagnet,
    Gravity,
    HelmholtzField,
    IntegrationError,
    Material,
    PointForce,
    RodState,
    RotatingField,
    SimulationOptions,
    TipMagnet,
    UniformField,
)
from flexlearn.physics.cosserat.compiled import lgvi as fused
from flexlearn.physics.cosserat.simulation import RodSetup


def test_numba_is_installed():
    """Numba is a core dependency: without it the fused loop (and these tests) would silently not run."""
    assert fused.HAVE_NUMBA


def _both(rod, duration, dt, record_every=1, **kw):
    a = rod.simulate(duration, dt, options=SimulationOptions(backend="numba", record_every=record_every), **kw)
    b = rod.simulate(duration, dt, options=SimulationOptions(backend="torch", record_every=record_every), **kw)
    return a, b


def _close(a, b, scale):
    # times bitwise: both backends record the same Python float expression k * h (outside the kernels)
    assert a.positions.shape == b.positions.shape and torch.equal(a.times, b.times)
    assert float((a.positions - b.positions).abs().max()) < 1e-10 * scale
    assert float((a.rotations - b.rotations).abs().max()) < 1e-10
    for x, y in (
        (a.final.positions, b.final.positions),
        (a.final.rotations, b.final.rotations),
        (a.final.velocities, b.final.velocities),
        (a.final.angular_velocities, b.final.angular_velocities),
    ):
        assert float((x - y).abs().max()) <= 1e-8 * max(float(y.abs().max()), 1e-12)


@pytest.mark.parametrize("strain", ["midpoint", "geodesic", "nodes"])
def test_clamped_batch_under_gravity_matches_tensor_path(strain):
    """A batch of two different rods, horizontal clamp, gravity and a tip force, recorded every 7 steps
    of 300 (so the last step is recorded separately)."""
    rod = CosseratRod.rectangular(
        0.2,
        torch.tensor([4e-3, 3e-3]),
        2e-3,
        Material(1100.0, torch.tensor([3e6, 5e6]), 0.45),
        8,
        strain=strain,
        rotary_inertia="segment",
    )
    loads = [Gravity(), PointForce(-1, (0.0, 1e-3, 0.0))]
    dt = 0.5 * float(rod.stable_dt().min())
    a, b = _both(rod, 300 * dt, dt, loads=loads, base=Clamp.horizontal(), record_every=7)
    assert a.positions.shape[0] == len(range(0, 301, 7)) + 1
    _close(a, b, 0.2)


def test_damping_and_magnets_in_a_rotating_field_match_tensor_path():
    """Rayleigh and viscous damping, per-node capacities, a tip magnet and an embedded one (opposite
    moments) following a ramped rotating field, gravity; initial velocities (the half-kick start)."""
    rod = CosseratRod.circular(0.06, 2e-3, Material(1101.0, 3.65e5, 0.5), 8, rotary_inertia="segment")
    field = RotatingField(0.0145, 3.0, axes=((0.0, 1.0, 0.0), (0.0, 0.0, 1.0)), offset=(0.0, 7.75e-3, 0.0), ramp=0.01)
    loads = [
        Gravity((0.0, -9.81, 0.0)),
        TipMagnet((0.0, 0.0, 0.0135), field, mass=9.6e-5),
        EmbeddedMagnet(5, (0.0, 0.0, -0.01), field, mass=5e-5),
    ]
    damp = Damping(alpha=3.0, translational=1e-3, rotational=1e-7, node_coefficients=torch.full((9, 3), 1e-4))
    init = rod.straight_state()
    init.velocities[0, 1:, 1] = 0.01
    init.angular_velocities[0, 1:, 0] = 0.3
    dt = 0.5 * float(rod.stable_dt())
    a, b = _both(rod, 400 * dt, dt, loads=loads, damping=damp, initial=init, record_every=25)
    assert float((a.positions[-1] - a.positions[0]).abs().max()) > 1e-4  # it moved
    _close(a, b, 0.06)


def test_free_rod_from_a_random_state_matches_and_keeps_momenta():
    """Free rod, random rotations and velocities: the kernel matches the tensor path over 200 steps and
    conserves linear and angular momentum to round-off over 10⁴ steps."""
    gen = torch.Generator().manual_seed(3)
    rod = CosseratRod.circular(0.3, 5e-3, Material(1200.0, 2e6, 0.4), 6)
    st = rod.straight_state()
    R = st.rotations @ so3_exp(0.2 * torch.randn(1, 7, 3, generator=gen))
    init = RodState(
        st.positions + 0.003 * torch.randn(1, 7, 3, generator=gen),
        R,
        0.05 * torch.randn(1, 7, 3, generator=gen),
        2.0 * torch.randn(1, 7, 3, generator=gen),
    )
    dt = 0.5 * float(rod.stable_dt())
    a, b = _both(rod, 200 * dt, dt, initial=init, base=FREE, record_every=50)
    _close(a, b, 0.3)
    tr = rod.simulate(
        10_000 * dt, dt, initial=init, base=FREE, options=SimulationOptions(record_every=10**9, backend="numba")
    )
    lin0, ang0 = rod.momenta(init)
    lin1, ang1 = rod.momenta(tr.final)
    assert float((lin1 - lin0).abs().max()) < 1e-12 * float(lin0.abs().max())
    assert float((ang1 - ang0).abs().max()) < 1e-12 * float(ang0.abs().max())


def test_failing_step_reports_through_the_tensor_path():
    """backend='auto': a step that fails in the kernel is rerun on the tensor path, whose error carries the state
    before it; backend='numba' raises the kernel's failure at once (the same step and node, no state)."""
    rod = CosseratRod.circular(0.1, 1e-3, Material(7800.0, 2e11, 0.3), 10)
    dt = 3.0 * float(rod.stable_dt())
    errors = {}
    for backend in ("auto", "numba"):
        with pytest.raises(IntegrationError) as info:
            rod.simulate(
                2000 * dt, dt, loads=[Gravity()], base=Clamp.horizontal(), options=SimulationOptions(backend=backend)
            )
        errors[backend] = info.value
    assert isinstance(errors["auto"].state, RodState) and 0 <= errors["auto"].node <= 10
    assert errors["numba"].state is None and "fused kernel" in str(errors["numba"])
    assert (errors["numba"].step, errors["numba"].node) == (errors["auto"].step, errors["auto"].node)


def test_ineligible_runs_use_the_tensor_path():
    rod = CosseratRod.circular(0.1, 1e-3, Material(1000.0, 1e6, 0.3), 4)
    with pytest.raises(ConfigError, match="backend"):
        rod.simulate(1e-4, 1e-5, damping=Damping(beta=1e-3), options=SimulationOptions(backend="numba"))
    with pytest.raises(ConfigError, match="backend"):
        rod.simulate(1e-4, 1e-5, options=SimulationOptions(backend="gpu"))
    e = torch.tensor(1e6, requires_grad=True)
    r2 = CosseratRod.circular(0.1, 1e-3, Material(1000.0, e, 0.3), 4)
    assert fused.eligible(r2, RodSetup(loads=[Gravity()], base=Clamp()), SimulationOptions()) != ""
    tip = r2.simulate(20 * 1e-5, 1e-5, loads=[Gravity((0.0, -9.81, 0.0))]).positions[-1, -1, 1]
    (g,) = torch.autograd.grad(tip, e)  # auto → tensor path: differentiable
    assert math.isfinite(float(g)) and float(g) != 0.0


def test_field_samples_equal_pointwise_values():

    x = torch.zeros(2, 3)
    ts = [0.0, 0.003, 0.007, 0.02, 0.5]
    for f in (
        RotatingField(0.0145, 3.0, offset=(0.0, 7.75e-3, 0.0), ramp=0.01, phase=0.3),
        UniformField(torch.tensor([[0.0, 1e-3, 2e-3], [1e-3, 0.0, 0.0]])),
        HelmholtzField(currents=lambda t: (1.0 + t, 0.5 - t)),
    ):
        a = f.samples(x, ts)
        b = torch.stack([f(x, t) for t in ts])
        assert a.shape == (5, 2, 3) and float((a - b).abs().max()) <= 1e-15 * max(float(b.abs().max()), 1e-30)


def test_forward_mode_tangents_use_the_tensor_path():
    """A dual (forward-mode) Young's modulus is not visible through requires_grad; auto must still pick the
    tensor path, or the tangent would silently be dropped."""
    dt, steps = 1e-5, 20
    with fwAD.dual_level():
        e = fwAD.make_dual(torch.tensor(1e6, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
        rod = CosseratRod.circular(0.1, 1e-3, Material(1000.0, e, 0.3), 4)
        assert "forward-mode" in fused.eligible(rod, RodSetup(loads=[Gravity()], base=Clamp()), SimulationOptions())
        tip = rod.simulate(steps * dt, dt, loads=[Gravity((0.0, -9.81, 0.0))]).positions[-1, -1, 1]
        tangent = fwAD.unpack_dual(tip).tangent
    assert tangent is not None and math.isfinite(float(tangent)) and float(tangent) != 0.0
