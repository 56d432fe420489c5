"""A step load at the implicit scheme's accurate step: a tip moment applied at once (PointMoment) either
converges to the pure-bending arc M L / EI or fails with a message naming the load and the remedy; the
globalised Cayley–Newton fallback."""

from __future__ import annotations

import math

import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.lie.cayley import so3_cayley_lgvi
from flexlearn.physics.cosserat import (
    CosseratRod,
    Damping,
    IntegrationError,
    Material,
    PointMoment,
    SimulationOptions,
)
from flexlearn.physics.cosserat.newton import cayley_newton, cayley_newton_globalised

L, R, E = 0.5, 1e-3, 70e9  # a thin aluminium rod: the accurate step is ~1000x its explicit stable step
EI = E * math.pi * R**4 / 4


@pytest.fixture(scope="module")
def rod():
    return CosseratRod.circular(L, R, Material(density=2700, youngs_modulus=E, poisson_ratio=0.3), 8)


def tip_angle(tr) -> float:
    r = tr.rotations[-1, -1]
    return math.atan2(float(r[2, 1]), float(r[1, 1]))


SILICONE = dict(length=0.3, radius=5e-3, youngs_modulus=3e6, density=1100.0, poisson_ratio=0.45, n_elements=20)


def silicone_rod() -> CosseratRod:
    """A soft silicone rod (0.3 m, r 5 mm, E 3 MPa) of 20 elements: its accurate step is ~30x its stable step."""
    s = SILICONE
    material = Material(density=s["density"], youngs_modulus=s["youngs_modulus"], poisson_ratio=s["poisson_ratio"])
    return CosseratRod.circular(s["length"], s["radius"], material, s["n_elements"])


@pytest.mark.parametrize(
    "frame,which",
    [
        ("world", "aluminium"),
        ("body", "aluminium"),
        ("world", "silicone"),
    ],
)
def test_a_step_tip_moment_at_the_accurate_step_settles_on_the_arc(rod, frame, which):
    if which == "silicone":
        rod, length, ei = silicone_rod(), SILICONE["length"], SILICONE["youngs_modulus"] * math.pi * 5e-3**4 / 4
    else:
        length, ei = L, EI
    dt = rod.accurate_dt()
    assert dt > 25 * float(rod.stable_dt())
    w1 = float(rod.linear_frequencies()[0])
    moment = PointMoment(-1, (1.0 * ei / length, 0.0, 0.0), frame=frame)  # arc of 1 rad
    # β = 0.3: stable under the geometric stiffness the filter leaves explicit; ζ = 0.05: the modes the step
    # does not resolve (which the filtered damping barely reaches) settle too
    opts = SimulationOptions(
        scheme="implicit", implicit_beta=0.3, implicit_dissipation=0.05, backend="torch", record_every=25
    )
    tr = rod.simulate(10 / w1, dt, loads=[moment], damping=Damping(alpha=2 * w1), options=opts)
    assert tip_angle(tr) == pytest.approx(1.0, rel=0.01)
    r = tr.rotations[-4:, -1]
    assert float(torch.atan2(r[:, 2, 1], r[:, 1, 1]).std()) < 1e-3  # settled, not caught mid-swing


def test_a_step_load_that_fails_names_the_load_and_the_remedy(rod):
    dt = rod.accurate_dt()
    moment = PointMoment(-1, (2.0 * EI / L, 0.0, 0.0))
    opts = SimulationOptions(scheme="implicit", backend="torch", record_every=50)
    with pytest.raises(IntegrationError) as info:
        rod.simulate(0.1, dt, loads=[moment], options=opts)
    msg = str(info.value)
    assert "PointMoment(node=-1, frame='world', moment=[" in msg
    assert "implicit_beta=0.3" in msg and "reduce dt" in msg and "ramp the load" in msg
    assert "\n" not in msg


def test_point_moment_checks_its_arguments():
    with pytest.raises(ConfigError, match="PointMoment.frame"):
        PointMoment(-1, (0.0, 0.0, 1.0), frame="tip")
    with pytest.raises(ConfigError, match="PointMoment.moment"):
        PointMoment(-1, (0.0, 1.0))


def test_the_globalised_newton_solves_where_a_solution_exists_and_reports_where_none_does():
    g = torch.Generator().manual_seed(3)
    j = torch.tensor([0.75, 0.75, 1.5], dtype=torch.float64).expand(1, 400, 3)  # normalised: tr J = 3
    jd = torch.diag_embed(0.5 * j.sum(-1, keepdim=True) - j)
    u = torch.randn(1, 400, 3, generator=g, dtype=torch.float64)
    u = u / u.norm(dim=-1, keepdim=True) * 1.4 * torch.rand(1, 400, 1, generator=g, dtype=torch.float64)
    thr = 1e-12 * u.norm(dim=-1).clamp_min(1e-3)
    _, plain = cayley_newton(u, jd, j, 1e-12, 20)
    f, last, _ = cayley_newton_globalised(u, jd, j, 1e-12, 40)
    solved = last <= thr
    assert bool((solved == (plain <= thr)).all())  # the same nodes converge (none is lost by the line search)
    assert 0 < int(solved.sum()) < 400  # some |u| are beyond a quarter turn per step: no solution there
    gf, _ = so3_cayley_lgvi(f, jd)
    assert float((gf - u).norm(dim=-1)[solved].max()) < 1e-13
