"""The implicit Cosserat step (flexlearn.physics.cosserat.implicit): its stiffness is the Gauss–Newton Hessian
of the elastic energy, the numba kernel runs the torch reference's equations, it is stable and accurate at
steps far beyond the LGVI's limit (a thin stiff polymer rod), keeps the momenta, does not gain energy,
converges at second order and is differentiable."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from flexlearn.errors import ConfigError
from flexlearn.lie import so3_exp
from flexlearn.physics.cosserat import (
    FREE,
    Clamp,
    CosseratRod,
    Damping,
    EmbeddedMagnet,
    Gravity,
    IntegrationError,
    Material,
    PointForce,
    RodState,
    RotatingField,
    SimulationOptions,
    TipMagnet,
)
from flexlearn.physics.cosserat.analytic import zero_crossing_frequency
from flexlearn.physics.cosserat.compiled import implicit as fused_implicit
from flexlearn.physics.cosserat.compiled.common import model_code
from flexlearn.physics.cosserat.implicit import (
    ForceFilter,
    accuracy_dt,
    filter_forces,
    frequency_error,
    tangent_stiffness,
)
from flexlearn.physics.cosserat.strains import log_curvature, strains
from flexlearn.physics.cosserat.supports import base_clamp_projector
from tests.physics.cosserat.gradcheck import assert_gradients_match_central_differences


def _random_state(rod, seed, rot=0.3, pos=0.01):
    gen = torch.Generator().manual_seed(seed)
    st = rod.straight_state()
    B, n = rod.batch_size, rod.n_nodes
    R = st.rotations @ so3_exp(rot * torch.randn(B, n, 3, generator=gen))
    return R, st.positions + pos * torch.randn(B, n, 3, generator=gen), gen


def _polymer_rod(n_elements=20):
    """Issue 21: r = 1 mm, E = 2 GPa, L = 0.2 m (ρ = 1200 kg/m³, ν = 0.4)."""
    return CosseratRod.circular(0.2, 1e-3, Material(1200.0, 2e9, 0.4), n_elements)


@pytest.mark.parametrize("curvature", ["cayley", "log"])
@pytest.mark.parametrize("strain", ["midpoint", "geodesic", "nodes"])
def test_stiffness_is_the_gauss_newton_hessian(strain, curvature):
    """K = Jᵀ C J with J the autograd Jacobian of the strains (√-weighted) in (η, δp); at rest, where the
    strains vanish, K is the full Hessian of the energy."""
    rod = CosseratRod.circular(0.3, 0.01, Material(1000.0, 1e6, 0.3), 4, strain=strain, curvature=curvature)
    R0, p0, _ = _random_state(rod, 0)
    ctx = rod.context()
    l = ctx.rest_lengths[0].unsqueeze(-1)

    def weighted_strains(x, R, p):
        x = x.reshape(1, 5, 6)
        s = strains(R @ so3_exp(x[..., :3]), p + x[..., 3:], ctx.rest_lengths, ctx.e3, ctx.midpoint, ctx.geodesic)
        if ctx.midpoint:
            g = s.gL * (l * ctx.shear_stiffness[0]).sqrt()
        else:
            g = torch.cat([s.gL, s.gR]) * (0.5 * l * ctx.shear_stiffness[0]).sqrt()
        psi = log_curvature(s.f)[0] if curvature == "log" else 2 * s.f
        return torch.cat([g.reshape(-1), ((psi / l) * (l * ctx.bend_stiffness[0]).sqrt()).reshape(-1)])

    jac = torch.autograd.functional.jacobian(lambda x: weighted_strains(x, R0, p0), torch.zeros(30))
    K = tangent_stiffness(ctx, R0, p0)[0]
    assert float((K - jac.T @ jac).abs().max()) < 1e-12 * float(K.abs().max())
    st = rod.straight_state()
    hess = torch.autograd.functional.hessian(
        lambda x: rod.potential_energy(
            st.rotations @ so3_exp(x.reshape(1, 5, 6)[..., :3]), st.positions + x.reshape(1, 5, 6)[..., 3:], ctx
        )[0],
        torch.zeros(30),
    )
    K0 = tangent_stiffness(ctx, st.rotations, st.positions)[0]
    assert float((K0 - hess).abs().max()) < 1e-9 * float(K0.abs().max())


@pytest.mark.parametrize("curvature", ["cayley", "log"])
@pytest.mark.parametrize("damping_c", [0.0, 3e-6])
@pytest.mark.parametrize("clamped", [True, False])
@pytest.mark.parametrize("strain", ["midpoint", "geodesic", "nodes"])
def test_kernel_filter_equals_the_dense_reference(clamped, strain, damping_c, curvature):
    """The block-Cholesky solve of the kernel (with and without the numerical damping of eq. (4)) equals
    torch.linalg.solve on the dense matrix to round-off."""
    material = Material(1200.0, 2e9, 0.4)
    rod = CosseratRod.circular(0.2, torch.tensor([1e-3, 2e-3]), material, 7, strain=strain, curvature=curvature)
    R, p, gen = _random_state(rod, 1)
    ctx = rod.context()
    f = torch.randn(2, 8, 3, generator=gen)
    tau = 1e-3 * torch.randn(2, 8, 3, generator=gen)
    v = torch.randn(2, 8, 3, generator=gen)
    pi = ctx.inertia * torch.randn(2, 8, 3, generator=gen)
    bh2 = 0.25 * 1e-4**2 + 0.5 * 1e-4 * damping_c
    fr, tr = filter_forces(
        ctx,
        R,
        p,
        f,
        tau,
        ForceFilter(bh2, base_clamp_projector(8) if clamped else None, damping_c),
        (v, pi / ctx.inertia),
    )
    n = 8
    for b in range(2):
        fk, tk = f[b].numpy().copy(), tau[b].numpy().copy()
        ok = fused_implicit.filter_forces(
            R.numpy(),
            p.numpy(),
            ctx.shear_stiffness.numpy(),
            ctx.bend_stiffness.numpy(),
            ctx.rest_lengths.numpy(),
            ctx.mass.numpy(),
            ctx.inertia.numpy(),
            model_code(strain, curvature),
            bh2,
            base_clamp_projector(8).diagonal(dim1=-2, dim2=-1).numpy() if clamped else np.zeros((8, 6)),
            b,
            fk,
            tk,
            np.empty((n, 6, 6)),
            np.empty((n, 6, 6)),
            np.empty((n, 6)),
            np.empty((6, 12)),
            np.empty((12, 12)),
            damping_c,
            v.numpy(),
            pi.numpy(),
            np.zeros((2, 7)),  # the lumped mass: no element coupling
            np.zeros((1, 1, 3, 3)),  # no contacts
        )
        assert ok
        assert np.abs(fk - fr[b].numpy()).max() < 1e-10 * np.abs(fr[b].numpy()).max()
        assert np.abs(tk - tr[b].numpy()).max() < 1e-10 * np.abs(tr[b].numpy()).max()
    if clamped:  # the clamped node is not a degree of freedom
        assert torch.equal(fr[:, 0], f[:, 0]) and torch.equal(tr[:, 0], tau[:, 0])


def _close(a, b, scale):
    assert a.positions.shape == b.positions.shape and torch.equal(a.times, b.times)
    assert float((a.positions - b.positions).abs().max()) < 1e-10 * scale
    assert float((a.rotations - b.rotations).abs().max()) < 1e-10
    for x, y in ((a.final.velocities, b.final.velocities), (a.final.angular_velocities, b.final.angular_velocities)):
        assert float((x - y).abs().max()) <= 1e-8 * max(float(y.abs().max()), 1e-12)


def test_kernel_matches_tensor_path_with_magnets_damping_and_a_batch():
    """Both backends of the implicit step at 20× the LGVI's stability estimate: a batch under gravity and a
    tip force (horizontal clamp, numerical damping ζ = 0.05); magnets in a rotating field with damping from a
    moving initial state
    (β = 0.3: at ¼ the explicit magnet torque makes this step unstable, implicit.DEFAULT_BETA)."""
    rod = CosseratRod.rectangular(
        0.2, torch.tensor([4e-3, 3e-3]), 2e-3, Material(1100.0, torch.tensor([3e6, 5e6]), 0.45), 8
    )
    dt = 20 * float(rod.stable_dt().min())
    kw = dict(loads=[Gravity(), PointForce(-1, (0.0, 1e-3, 0.0))], base=Clamp.horizontal())
    opts = dict(record_every=7, scheme="implicit", implicit_dissipation=0.05)
    _close(
        rod.simulate(30 * dt, dt, options=SimulationOptions(backend="numba", **opts), **kw),
        rod.simulate(30 * dt, dt, options=SimulationOptions(backend="torch", **opts), **kw),
        0.2,
    )
    rod = CosseratRod.circular(0.06, 2e-3, Material(1101.0, 3.65e5, 0.5), 8)
    field = RotatingField(0.0145, 3.0, axes=((0.0, 1.0, 0.0), (0.0, 0.0, 1.0)), offset=(0.0, 7.75e-3, 0.0), ramp=0.01)
    loads = [
        Gravity((0.0, -9.81, 0.0)),
        TipMagnet((0.0, 0.0, 0.0135), field, mass=9.6e-5),
        EmbeddedMagnet(5, (0.0, 0.0, -0.01), field, mass=5e-5),
    ]
    init = rod.straight_state()
    init.velocities[0, 1:, 1] = 0.01
    init.angular_velocities[0, 1:, 0] = 0.3
    dt = 20 * float(rod.stable_dt())
    kw = dict(loads=loads, damping=Damping(alpha=3.0, translational=1e-3), initial=init)
    opts = dict(record_every=9, scheme="implicit", implicit_beta=0.3)  # β > ¼: margin for the explicit magnet torque
    a = rod.simulate(40 * dt, dt, options=SimulationOptions(backend="numba", **opts), **kw)
    assert float((a.positions[-1] - a.positions[0]).abs().max()) > 1e-4
    _close(a, rod.simulate(40 * dt, dt, options=SimulationOptions(backend="torch", **opts), **kw), 0.06)


def test_polymer_rod_runs_where_the_lgvi_refuses_and_agrees_with_it():
    """Issue 21: at 20 elements the LGVI fails at dt = 5e-6 s (stable ≈ 1.2e-6 s); the implicit step runs
    it and much larger steps. Tip deflection under gravity over 60 ms against the LGVI at 1e-6 s: the error
    shrinks as dt² and stays below 1e-3 of the deflection at the step of ``accurate_dt(1e-4)``."""
    rod = _polymer_rod()
    base = Clamp.horizontal()
    assert 1.0e-6 < float(rod.stable_dt()) < 1.4e-6
    with pytest.raises(IntegrationError):
        rod.simulate(2e-3, 5e-6, loads=[Gravity()], base=base)
    T = 0.06
    ref = rod.simulate(T, 1e-6, loads=[Gravity()], base=base, options=SimulationOptions(record_every=1000)).positions[
        :, -1, 2
    ]
    h_acc = rod.accurate_dt(1e-4, 4, base)
    assert h_acc > 50 * float(rod.stable_dt())
    errs = {}
    for dt in (5e-6, 2e-5, 1e-4):
        z = rod.simulate(
            T,
            dt,
            loads=[Gravity()],
            base=base,
            options=SimulationOptions(scheme="implicit", record_every=int(round(1e-3 / dt))),
        ).positions[:, -1, 2]
        errs[dt] = float((z - ref).abs().max() / ref.abs().max())
    assert errs[1e-4] < 1e-3 and errs[5e-6] < 1e-5, errs
    assert 8.0 < errs[1e-4] / errs[2e-5] < 40.0, errs  # second order: 25 for a clean dt²


def test_free_rod_keeps_both_momenta():
    """Translations and rigid rotations are null vectors of the Gauss–Newton K: the filtered forces have the
    same resultant and moment, so both momenta stay constant to round-off at 10× the LGVI limit."""
    rod = CosseratRod.circular(0.3, 5e-3, Material(1200.0, 2e6, 0.4), 6)
    st = rod.arc_state(0.3, (0.0, 1.0, 0.0))  # pre-bent, spinning and drifting
    gen = torch.Generator().manual_seed(3)
    omega = torch.tensor([0.5, -1.0, 2.0])
    v = torch.linalg.cross(omega.expand(1, 7, 3), st.positions) + 0.05 * torch.randn(1, 7, 3, generator=gen)
    w = (st.rotations.transpose(-1, -2) @ omega.reshape(3, 1)).squeeze(-1) + 0.5 * torch.randn(1, 7, 3, generator=gen)
    init = RodState(st.positions, st.rotations, v, w)
    dt = 10 * float(rod.stable_dt())
    tr = rod.simulate(
        1000 * dt,
        dt,
        initial=init,
        base=FREE,
        options=SimulationOptions(record_every=10**9, scheme="implicit", backend="numba"),
    )
    lin0, ang0 = rod.momenta(init)
    lin1, ang1 = rod.momenta(tr.final)
    assert float((lin1 - lin0).abs().max()) < 1e-11 * float(lin0.abs().max())
    assert float((ang1 - ang0).abs().max()) < 1e-11 * float(ang0.abs().max())


def _energy_curve(rod, init, base, dt, points, every, zeta=0.0):
    """(times, total energy) of the final states of runs of every, 2·every, … steps (numba path)."""
    ts, es = [0.0], [float(rod.kinetic_energy(init) + rod.potential_energy(init.rotations, init.positions))]
    for k in range(1, points + 1):
        options = SimulationOptions(record_every=10**9, scheme="implicit", backend="numba", implicit_dissipation=zeta)
        fin = rod.simulate(k * every * dt, dt, initial=init, base=base, options=options).final
        ts.append(fin.time)
        es.append(float(rod.kinetic_energy(fin) + rod.potential_energy(fin.rotations, fin.positions)))
    return torch.tensor(ts), torch.tensor(es)


def test_energy_is_conserved_and_damping_dissipates_at_its_rate():
    """A clamped rod released from an arc at 30× the LGVI limit, 1200 steps (≈ 5 periods of mode 1).

    Nearly linear (0.01 rad): the physical energy (velocities of eq. (3)) stays within 5e-4 of its initial value
    and does not drift. The error is a bounded beat of the modes the step does not resolve, and its size depends on
    where they fall against the step: 0.6e-4–4e-4 over shear coefficients 0.85–1 at 20–30× the limit (1200 and
    2400 steps measured), 0.6e-4 for k = 1 and 3.5e-4 for this section's default k = 0.925.
    With mass-proportional damping α the tip (mode 1) decays as exp(−α t/2) (rate within 5 %). (Damping is
    explicit: modes the step does not resolve are damped less; bent by 0.5 rad the energy error grows at
    this step: docs/cosserat.md, limits of the implicit step.)
    """
    rod = CosseratRod.circular(0.3, 0.01, Material(1000.0, 1e6, 0.3), 5)
    base = Clamp.horizontal()
    dt = 30 * float(rod.stable_dt())
    init = rod.arc_state(0.01, (0, 1, 0), base)
    t, e = _energy_curve(rod, init, base, dt, 24, 50)
    rel = (e - e[0]) / e[0]
    assert float(rel.abs().max()) < 5e-4  # over the whole run: no growth beyond 5e-4
    half = len(rel) // 2
    assert float(rel[half:].abs().max()) < 1.5 * float(rel[:half].abs().max())  # a beat, not a drift
    alpha = 1.0  # mode 1 decays as exp(−α t / 2)
    z = rod.simulate(
        1200 * dt,
        dt,
        initial=init,
        base=base,
        damping=Damping(alpha=alpha),
        options=SimulationOptions(scheme="implicit"),
    ).positions[:, -1, 2]
    period = int(round(2 * math.pi / float(rod.linear_frequencies(base)[0]) / dt))
    amp = z[: (len(z) // period) * period].abs().reshape(-1, period).max(-1).values  # per-period peak
    rate = -2.0 * math.log(float(amp[-1] / amp[0])) / ((len(amp) - 1) * period * dt)
    assert len(amp) >= 4 and rate == pytest.approx(alpha, rel=0.05)


def test_numerical_damping_removes_unresolved_modes_and_keeps_large_bends_stable():
    """A rod pre-bent by 1.2 rad at 10× the LGVI limit: at ζ = 0 the unresolved modes (at the edge of
    stability, explicit geometric stiffness) blow up within 100 steps; with ζ = 0.05 (eq. (4)) it runs 1000
    steps, and its energy never grows. Mode 1's damping ratio ζhω/2 stays small: after one period its tip
    amplitude is within 2 % of the undamped (ζ = 0) linear run."""
    rod = CosseratRod.circular(0.3, 0.01, Material(1000.0, 1e6, 0.3), 5)
    base = Clamp.horizontal()
    dt = 10 * float(rod.stable_dt())
    init = rod.arc_state(1.2, (0, 1, 0), base)
    with pytest.raises(IntegrationError):
        rod.simulate(
            100 * dt, dt, initial=init, base=base, options=SimulationOptions(scheme="implicit", record_every=10**9)
        )
    t, e = _energy_curve(rod, init, base, dt, 10, 100, zeta=0.05)
    assert bool((e[1:] <= e[:-1] * (1 + 1e-9)).all()) and float(e[-1]) < float(e[0])
    small = rod.arc_state(0.01, (0, 1, 0), base)
    period = 2 * math.pi / float(rod.linear_frequencies(base)[0])
    n = int(round(period / dt))
    z0, z1 = (
        rod.simulate(
            n * dt,
            dt,
            initial=small,
            base=base,
            options=SimulationOptions(scheme="implicit", implicit_dissipation=zeta, record_every=n),
        ).positions[-1, -1, 2]
        for zeta in (0.0, 0.05)
    )
    assert abs(float(z1 / z0) - 1) < 0.02


def test_accuracy_dt_is_the_step_of_the_stated_frequency_error():
    """``accuracy_dt`` inverts the exact frequency error of the scheme; the measured first-mode frequency of
    the 20-element cantilever at that step deviates from the small-step one by that error (within 20 %)."""
    for rtol in (1e-4, 1e-3, 1e-2):
        assert frequency_error(accuracy_dt(10.0, rtol) * 10.0) == pytest.approx(-rtol, rel=1e-9)
    assert accuracy_dt(1.0, 1e-4, beta=0.25) == pytest.approx(math.sqrt(12e-4), rel=1e-3)

    rod = CosseratRod.circular(1.0, 0.02, Material(2000.0, 1e5, 0.3), 10)
    base = Clamp.horizontal()
    init = rod.arc_state(0.02, (0, 1, 0), base)
    w = float(rod.linear_frequencies(base)[0])
    freqs = {}
    for rtol in (1e-2, 1e-6):
        dt = accuracy_dt(w, rtol)
        z = rod.simulate(
            6 * 2 * math.pi / w, dt, initial=init, base=base, options=SimulationOptions(scheme="implicit")
        ).positions[:, -1, 2]
        freqs[rtol] = zero_crossing_frequency(z.numpy(), dt)
    assert freqs[1e-2] / freqs[1e-6] - 1 == pytest.approx(-1e-2, rel=0.2)


def test_gradients_through_the_implicit_step_match_finite_differences():
    """d(tip)/d(E, ρ, α) through 15 implicit steps at ≈ 20× the LGVI limit vs central differences."""
    params = dict(E=torch.tensor(4e5), rho=torch.tensor(1100.0), alpha=torch.tensor(3.0))

    def run(p):
        rod = CosseratRod.circular(0.05, 2e-3, Material(1.0, 1.0, 0.45), 5)
        rod.youngs_modulus = p["E"]
        rod.shear_modulus = p["E"] / 2.9
        rod.density = p["rho"]
        dt = 2e-4
        return (
            rod.simulate(
                15 * dt,
                dt,
                loads=[Gravity()],
                damping=Damping(alpha=p["alpha"]),
                base=Clamp.horizontal(),
                options=SimulationOptions(record_every=10**9, scheme="implicit"),
            )
            .positions[-1, -1]
            .sum()
        )

    assert_gradients_match_central_differences(run, params)


def test_bad_scheme_options_are_rejected():
    rod = CosseratRod.circular(0.1, 1e-3, Material(1000.0, 1e6, 0.3), 4)
    with pytest.raises(ConfigError, match="implicit_dissipation"):
        rod.simulate(1e-4, 1e-5, options=SimulationOptions(scheme="implicit", implicit_dissipation=-0.1))
    with pytest.raises(ConfigError, match="scheme"):
        rod.simulate(1e-4, 1e-5, options=SimulationOptions(scheme="rk4"))
    with pytest.raises(ConfigError, match="implicit_beta"):
        rod.simulate(1e-4, 1e-5, options=SimulationOptions(scheme="implicit", implicit_beta=0.1))
    with pytest.raises(ValueError, match="rtol"):
        accuracy_dt(10.0, 0.5)


def test_bench_stiff_rod_overrides_are_parsed_and_bad_ones_refused_by_name():
    """scripts/bench_cosserat.py ``--stiff-rod KEY=VALUE``: another rod for the implicit-step comparison; an unknown
    key, a non-number or a value out of range stops the bench with the key named."""
    root = Path(__file__).resolve().parents[3]
    spec = importlib.util.spec_from_file_location("bench_cosserat", root / "scripts" / "bench_cosserat.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.stiff_overrides(["r=0.5e-3", "E=5e10", "nu=0.33"]) == {"r": 5e-4, "E": 5e10, "nu": 0.33}
    assert bench.stiff_overrides([]) == {}
    for bad, named in (
        (["Q=1"], "'Q=1'"),
        (["r"], "'r'"),
        (["E=abc"], "E: 'abc'"),
        (["L=-1"], "L=-1"),
        (["nu=0.5"], "nu=0.5"),
        (["rho=nan"], "rho=nan"),
    ):
        with pytest.raises(SystemExit, match=named):
            bench.stiff_overrides(bad)
