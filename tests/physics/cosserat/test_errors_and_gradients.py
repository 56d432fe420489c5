"""Bad input fails with errors naming node and step; gradients agree with finite differences."""

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.physics.cosserat import (
    Clamp,
    CosseratRod,
    Damping,
    Gravity,
    IntegrationError,
    Material,
    RodState,
    RotatingField,
    SimulationOptions,
    TipMagnet,
)
from tests.physics.cosserat.gradcheck import assert_gradients_match_central_differences


def test_time_step_beyond_stability_names_step_and_node():
    rod = CosseratRod.circular(0.1, 1e-3, Material(7800.0, 2e11, 0.3), 10)
    base = Clamp.horizontal()
    dt = 3.0 * float(rod.stable_dt())
    with pytest.raises(IntegrationError) as info:
        rod.simulate(2000 * dt, dt, loads=[Gravity()], base=base)
    err = info.value
    assert "step" in str(err) and "node" in str(err)
    assert 0 <= err.node <= 10 and err.step >= 0
    assert isinstance(err.state, RodState)
    assert bool(torch.isfinite(err.state.positions).all())
    assert err.trajectory is None or bool(torch.isfinite(err.trajectory.positions).all())


def test_newton_failure_names_node_and_step():
    rod = CosseratRod.circular(0.1, 1e-3, Material(1000.0, 1e6, 0.3), 4)
    init = rod.straight_state()
    init.angular_velocities[0, 3] = torch.tensor([1e7, 0.0, 0.0])  # |h ω| ≫ 1 at node 3
    with pytest.raises(IntegrationError) as info:
        rod.simulate(1e-5, 1e-5, initial=init)
    assert info.value.node == 3 and info.value.step == 0
    assert "Newton" in str(info.value) and "node 3" in str(info.value)


@pytest.mark.parametrize(
    "kwargs, key",
    [
        (dict(youngs_modulus=-1.0), "youngs_modulus"),
        (dict(radius=0.0), "radius"),
        (dict(poisson_ratio=0.7), "poisson_ratio"),
        (dict(density=float("nan")), "density"),
        (dict(n_elements=0), "n_elements"),
    ],
)
def test_non_physical_parameters_are_rejected(kwargs, key):
    args = dict(length=0.1, radius=1e-3, density=1000.0, youngs_modulus=1e6, poisson_ratio=0.3, n_elements=4)
    args.update(kwargs)
    with pytest.raises(ConfigError, match=key):
        material = Material(args.pop("density"), args.pop("youngs_modulus"), args.pop("poisson_ratio"))
        CosseratRod.circular(material=material, **args)


def test_batched_bad_parameter_names_its_index():
    with pytest.raises(ConfigError, match=r"youngs_modulus\[1\]"):
        CosseratRod.circular(0.1, 1e-3, Material(1000.0, torch.tensor([1e6, -2.0]), 0.3), 4)


def test_bad_time_step_is_rejected():
    rod = CosseratRod.circular(0.1, 1e-3, Material(1000.0, 1e6, 0.3), 4)
    with pytest.raises(ConfigError, match="dt"):
        rod.simulate(0.1, -1e-4)


def _tip(rod, dt, steps, loads, damping):
    return rod.simulate(
        steps * dt,
        dt,
        loads=loads,
        damping=damping,
        base=Clamp.horizontal(),
        options=SimulationOptions(record_every=10**9),
    ).positions[-1, -1]


def test_gradients_match_finite_differences():
    """d(tip)/d(E, ρ, α, magnet moment, field amplitude) over a short horizon vs central differences."""
    L, r, N = 0.05, 2e-3, 5
    params = dict(
        E=torch.tensor(4e5),
        rho=torch.tensor(1100.0),
        alpha=torch.tensor(3.0),
        m=torch.tensor(0.01),
        b=torch.tensor(0.01),
    )

    def run(p):
        rod = CosseratRod.circular(L, r, Material(1.0, 1.0, 0.45), N)
        rod.youngs_modulus = p["E"]
        rod.shear_modulus = p["E"] / 2.9
        rod.density = p["rho"]
        field = RotatingField(p["b"], 5.0, axes=((0, 0, 1), (1, 0, 0)))
        mag = TipMagnet(torch.stack([p["m"] * 0, p["m"] * 0, p["m"]]), field, mass=1e-4)
        mag.field.amplitude = p["b"]
        mag.moment_body = torch.stack([p["m"] * 0, p["m"] * 0, p["m"]])
        return _tip(rod, 2e-5, 60, [Gravity(), mag], Damping(alpha=p["alpha"])).sum()

    assert_gradients_match_central_differences(run, params)
