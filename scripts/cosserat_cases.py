"""Cases and solver runners shared by scripts/bench_cosserat.py: the dynamic cantilever and the thin rod,
flexlearn's rod (stability by bisection, timing, error against the Euler–Bernoulli solutions) and PyElastica's
(PositionVerlet, when installed). See scripts/bench_cosserat.py for the cases' definitions."""

from __future__ import annotations

import contextlib
import io
import math
import statistics
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))

from flexlearn.physics.cosserat import (  # noqa: E402
    Clamp,
    CosseratRod,
    Gravity,
    IntegrationError,
    Material,
    SimulationOptions,
)
from flexlearn.physics.cosserat.analytic import (  # noqa: E402
    cantilever_beta_l,
    cantilever_frequencies,
    cantilever_mode_shape,
    zero_crossing_frequency,
)

CASES = {
    "cantilever": dict(L=1.0, r=0.02, E=1e5, rho=2000.0, nu=0.5, N=20, gravity=False),
    "thin_rod": dict(L=0.3, r=0.5e-3, E=1.13e10, rho=7800.0, nu=0.3, N=20, gravity=True),
}


def eb_tip_step_response(c, t, n_modes=30):
    """Euler–Bernoulli cantilever, uniform load q = ρAg switched on at t = 0 from rest: tip deflection
    Σ aₙ φₙ(L)(1 − cos ωₙ t), aₙ = q∫φₙ / (ρA ωₙ² ∫φₙ²); mode shapes in an overflow-free form."""
    L, r, E, rho = c["L"], c["r"], c["E"], c["rho"]
    A, I = math.pi * r**2, math.pi * r**4 / 4
    x = np.linspace(0, L, 40001)
    out = 0.0
    for bl in cantilever_beta_l(n_modes):
        b = bl / L
        den = math.sinh(bl) + math.sin(bl)
        one_minus_sigma = (-math.exp(-bl) + math.sin(bl) - math.cos(bl)) / den
        sigma = 1.0 - one_minus_sigma
        # cosh − σ sinh = ((1 − σ) e^{bx} + (1 + σ) e^{−bx}) / 2, with (1 − σ) e^{bx} kept finite
        grow = one_minus_sigma * np.exp(b * x - bl) * math.exp(bl) if bl < 700 else 0.0
        phi = 0.5 * (grow + (1 + sigma) * np.exp(-b * x)) - np.cos(b * x) + sigma * np.sin(b * x)
        w = bl**2 * math.sqrt(E * I / (rho * A * L**4))
        a = rho * A * 9.81 * np.trapezoid(phi, x) / (rho * A * w**2 * np.trapezoid(phi**2, x))
        out += a * phi[-1] * (1 - math.cos(w * t))
    return out


# ------------------------------------------------------------------ flexlearn
def flex_rod(c, rotary="section", batch=None):
    r = c["r"] if batch is None else torch.full((batch,), c["r"])
    return CosseratRod.circular(c["L"], r, Material(c["rho"], c["E"], c["nu"]), c["N"], rotary_inertia=rotary)


BACKEND = {"name": "auto"}


def flex_probe_state(rod, base, seed=0):
    st = rod.straight_state(base)
    g = torch.Generator().manual_seed(seed)
    st.velocities[:, 1:] = 1e-4 * torch.randn(st.velocities[:, 1:].shape, generator=g, dtype=torch.float64)
    return st


def flex_stable(c, rod, dt, steps):
    base = Clamp.horizontal()
    try:
        tr = rod.simulate(
            steps * dt,
            dt,
            initial=flex_probe_state(rod, base),
            base=base,
            loads=[Gravity()] if c["gravity"] else [],
            options=SimulationOptions(record_every=10**9, backend=BACKEND["name"]),
        )
    except IntegrationError:
        return False
    p = tr.positions[-1]
    return (
        bool(torch.isfinite(p).all())
        and float((p[..., 0] - torch.linspace(0, c["L"], c["N"] + 1, dtype=p.dtype)).abs().max()) < 0.1 * c["L"]
    )


def bisect(stable, lo, hi, iters):
    """Largest stable dt in [lo, hi] (lo stable, hi unstable assumed / checked), geometric bisection."""
    while not stable(lo):
        hi, lo = lo, lo / 4
    while stable(hi):
        lo, hi = hi, hi * 4
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        if stable(mid):
            lo = mid
        else:
            hi = mid
    return lo


def timed(fn, repeats):
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def flex_case(name, c, args, rotary="section", compile_step=False):
    rod = flex_rod(c, rotary)
    guess = float(rod.stable_dt())
    dtmax = bisect(lambda dt: flex_stable(c, rod, dt, args.probe_steps), guess / 2, guess * 2, args.bisect_iters)
    dt = 0.9 * dtmax
    base = Clamp.horizontal()
    loads = [Gravity()] if c["gravity"] else []
    st = rod.straight_state(base)
    n = max(1, int(round(c["timing_sim_s"] / dt)))
    backend = "torch" if compile_step else BACKEND["name"]
    rod.simulate(
        2 * dt,
        dt,
        base=base,
        loads=loads,
        options=SimulationOptions(record_every=10**9, compile=compile_step, backend=backend),
    )  # compile once (numba JIT / torch.compile)
    res = {
        "max_stable_dt_s": dtmax,
        "dt_used_s": dt,
        "n_elements": c["N"],
        "backend": backend,
        "_steps": n,
        "_run": lambda: rod.simulate(
            n * dt,
            dt,
            initial=st,
            base=base,
            loads=loads,
            options=SimulationOptions(record_every=10**9, compile=compile_step, backend=backend),
        ),
    }
    if compile_step or args.skip_errors:
        return res
    res["error"] = flex_error(name, c, rod, dt, base)
    return res


def flex_error(name, c, rod, dt, base):
    L, r, E, rho, N = c["L"], c["r"], c["E"], c["rho"], c["N"]
    if name == "cantilever":
        w1 = float(cantilever_frequencies(L, E, math.pi * r**4 / 4, rho, math.pi * r**2, 1)[0])
        st = rod.straight_state(base)
        s = np.linspace(0, L, N + 1)
        st.velocities[0, :, 2] = torch.from_numpy(1e-4 * w1 * cantilever_mode_shape(s, L, 1))
        every = max(1, int(2 * math.pi / w1 / dt / 2000))
        tr = rod.simulate(
            1.08 * 2 * math.pi / w1,
            dt,
            initial=st,
            base=base,
            options=SimulationOptions(record_every=every, backend=BACKEND["name"]),
        )
        w = zero_crossing_frequency(tr.positions[:, -1, 2].numpy(), every * dt, center=False)
        return abs(w / w1 - 1.0)
    t_h = c["horizon"]
    tr = rod.simulate(
        t_h, dt, base=base, loads=[Gravity()], options=SimulationOptions(record_every=10**9, backend=BACKEND["name"])
    )
    ref = eb_tip_step_response(c, float(tr.times[-1]))
    return abs(-float(tr.positions[-1, -1, 2]) - ref) / abs(ref)


# ------------------------------------------------------------------ PyElastica
def pye_available():
    try:
        import elastica  # noqa: F401  (optional: the bench extra)

        return True
    except Exception:
        return False


def pye_build(c, gravity):
    import elastica as ea  # optional: the bench extra

    class Sim(ea.BaseSystemCollection, ea.Constraints, ea.Forcing, ea.CallBacks):
        pass

    sim = Sim()
    rod = ea.CosseratRod.straight_rod(
        c["N"],
        np.zeros(3),
        np.array([1.0, 0.0, 0.0]),
        np.array([0.0, 0.0, 1.0]),
        c["L"],
        c["r"],
        c["rho"],
        youngs_modulus=c["E"],
        shear_modulus=c["E"] / (2 * (1 + c["nu"])),
    )
    sim.append(rod)
    sim.constrain(rod).using(ea.OneEndFixedBC, constrained_position_idx=(0,), constrained_director_idx=(0,))
    if gravity:
        sim.add_forcing_to(rod).using(ea.GravityForces, acc_gravity=np.array([0.0, 0.0, -9.81]))
    sim.finalize()
    return sim, rod


def pye_run(sim, dt, steps, t0=0.0):
    import elastica as ea  # optional: the bench extra

    stepper = ea.PositionVerlet()
    with contextlib.redirect_stdout(io.StringIO()):  # it prints the final time: keep stdout JSON
        ea.integrate(stepper, sim, steps * dt, steps, restart_time=t0, progress_bar=False)


def pye_stable(c, dt, steps):
    sim, rod = pye_build(c, c["gravity"])
    g = np.random.default_rng(0)
    rod.velocity_collection[:, 1:] += 1e-4 * g.standard_normal(rod.velocity_collection[:, 1:].shape)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            pye_run(sim, dt, steps)
        except Exception:
            return False
    p = rod.position_collection
    return bool(np.isfinite(p).all()) and float(np.abs(p[0] - np.linspace(0, c["L"], c["N"] + 1)).max()) < 0.1 * c["L"]


def pye_case(name, c, args):
    sim, _ = pye_build(c, c["gravity"])
    pye_run(sim, 1e-7, 10)  # numba JIT warm-up, not timed
    G = c["E"] / (2 * (1 + c["nu"]))
    guess = 0.5 * c["r"] / math.sqrt(G / c["rho"])
    dtmax = bisect(lambda dt: pye_stable(c, dt, args.probe_steps), guess / 2, guess * 2, args.bisect_iters)
    dt = 0.9 * dtmax
    n = max(1, int(round(c["timing_sim_s"] / dt)))

    def run():
        s, _ = pye_build(c, c["gravity"])
        pye_run(s, dt, n)

    res = {"max_stable_dt_s": dtmax, "dt_used_s": dt, "n_elements": c["N"], "_steps": n, "_run": run}
    if args.skip_errors:
        return res
    L, r, E, rho, N = c["L"], c["r"], c["E"], c["rho"], c["N"]
    if name == "cantilever":
        w1 = float(cantilever_frequencies(L, E, math.pi * r**4 / 4, rho, math.pi * r**2, 1)[0])
        sim, rod = pye_build(c, False)
        s = np.linspace(0, L, N + 1)
        rod.velocity_collection[2] = 1e-4 * w1 * cantilever_mode_shape(s, L, 1)
        every = max(1, int(2 * math.pi / w1 / dt / 2000))
        n_rec = int(1.08 * 2 * math.pi / w1 / (every * dt))
        z = [float(rod.position_collection[2, -1])]
        for k in range(n_rec):
            pye_run(sim, dt, every, t0=k * every * dt)
            z.append(float(rod.position_collection[2, -1]))
        w = zero_crossing_frequency(np.array(z), every * dt, center=False)
        res["error"] = abs(w / w1 - 1.0)
    else:
        sim, rod = pye_build(c, True)
        steps = int(round(c["horizon"] / dt))
        pye_run(sim, dt, steps)
        ref = eb_tip_step_response(c, steps * dt)
        res["error"] = abs(-float(rod.position_collection[2, -1]) - ref) / abs(ref)
    return res
