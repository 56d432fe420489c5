#!/usr/bin/env python
"""Benchmark flexlearn's Cosserat LGVI and implicit step against PyElastica 1.0 (if installed); print JSON.

Cases:
  cantilever  PyElastica's dynamic cantilever: L = 1 m, r = 0.02 m, E = 1e5 Pa, ρ = 2000 kg/m³, ν = 0.5,
              N = 20; first mode excited by its Euler–Bernoulli shape as initial velocity; error =
              |ω₁/ω₁(EB) − 1| (zero crossings of the tip over one period).
  thin_rod    d = 1 mm, E = 1.13e10 Pa, L = 0.3 m, ρ = 7800 kg/m³ ("steel-like"), ν = 0.3, N = 20,
              horizontal cantilever released from straight under gravity; error = relative tip
              deflection error at t = horizon against the Euler–Bernoulli modal solution (30 modes).
  stiff_rod   a stiff polymer rod (r = 1 mm, E = 2 GPa, L = 0.2 m, ρ = 1200, ν = 0.4), horizontal
              cantilever, gravity on at t = 0, ``--stiff-horizon`` s (default 0.25, ≈ 2.3 periods of mode 1);
              error = max_t |tip(t) − ref(t)| / max_t |ref(t)| (every 1 ms) against a converged reference (the
              LGVI at N = ``--stiff-ref-n`` = 160, dt = half its stability estimate; its uncertainty = the
              same error of N = 80, and the linear Euler–Bernoulli modal solution's difference, are
              reported). PyElastica at N = 20, 0.9 × its largest stable dt; ``flexlearn_lgvi`` the same;
              ``flexlearn_implicit`` (``scheme='implicit'``) at the coarsest (N of ``--match-n``, dt of
              ``--stiff-dts``) whose error is ≤ PyElastica's (the ``ladder`` lists what was tried). Every
              solver is timed over the whole horizon, setup included, round-robin; the headline
              ``implicit_speedup_vs_pyelastica`` is the ratio of simulated seconds per wall second.
              ``--stiff-rod KEY=VALUE ...`` runs the same comparison on another rod (L, r, E, rho, nu; set
              ``--stiff-horizon`` to a similar number of first-mode periods).

For each case and solver: ``max_stable_dt_s`` (largest dt with no blow-up over ``--probe-steps`` steps
from a small random velocity field, by bisection in log dt), ``sim_s_per_wall_s`` at 0.9 × that dt
(median of ``--repeats`` timed runs over the same simulated time ``--timing-sim-s`` for every solver,
setup included, the solvers of a case timed round-robin so that the machine's load falls on all alike) and
``error``. Solvers: ``flexlearn`` (default model), ``flexlearn_segment``
(``rotary_inertia='segment'``), ``flexlearn_matched`` / ``flexlearn_segment_matched`` (the coarsest N of
``--match-n`` whose error is ≤ PyElastica's at N = 20; ``n_elements`` says which), ``flexlearn_compiled``
(timing of the torch.compile'd tensor step, ``--compile``), ``pyelastica`` (PositionVerlet, N = 20;
skipped with a note when not installed). flexlearn runs with ``backend='auto'``: the fused numba kernel
(:mod:`flexlearn.physics.cosserat.compiled.lgvi`) for these conservative runs; ``--backend torch`` times the
tensor path instead. ``<case>.<solver>.speedup_vs_pyelastica`` is the ratio of sim_s_per_wall_s measured
in this run. ``batched.rod_steps_per_s`` for B = 1, 32, 1024 (thin_rod geometry, segment inertia, the
default backend) and ``batched_torch.rod_steps_per_s`` (the differentiable tensor path).
The machine is shared: wall times are medians and still noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

import numpy as np
import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))  # cosserat_cases beside it

from cosserat_cases import (  # noqa: E402
    BACKEND,
    CASES,
    bisect,
    eb_tip_step_response,
    flex_case,
    flex_rod,
    flex_stable,
    pye_available,
    pye_build,
    pye_case,
    pye_run,
    pye_stable,
    timed,
)

from flexlearn.physics.cosserat import (  # noqa: E402
    Clamp,
    CosseratRod,
    Gravity,
    Material,
    SimulationOptions,
)

# ------------------------------------------------------------------ stiff rod: implicit step at matched error
STIFF = dict(L=0.2, r=1e-3, E=2e9, rho=1200.0, nu=0.4, N=20, horizon=0.25, sample=1e-3)
"""The stiff polymer rod (r = 1 mm, E = 2 GPa, L = 0.2 m, ρ = 1200 kg/m³, ν = 0.4): horizontal cantilever,
gravity switched on at t = 0, tip deflection recorded every ``sample`` s over ``horizon`` s (≈ 2.3 periods
of the first mode)."""


_STIFF_KEYS = ("L", "r", "E", "rho", "nu")


def stiff_overrides(items):
    """``--stiff-rod KEY=VALUE ...`` → {key: float}: another rod for the stiff-rod comparison (keys L [m], r [m],
    E [Pa], rho [kg/m³], nu); an unknown key, a value that is not a number or not positive (ν in (0, 0.5)) is
    refused by name."""
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in _STIFF_KEYS:
            raise SystemExit(f"--stiff-rod {item!r}: expected KEY=VALUE with KEY one of {', '.join(_STIFF_KEYS)}")
        try:
            value = float(text)
        except ValueError:
            raise SystemExit(f"--stiff-rod {key}: {text!r} is not a number") from None
        ok = 0.0 < value < 0.5 if key == "nu" else 0.0 < value < math.inf
        if not ok:
            raise SystemExit(f"--stiff-rod {key}={text}: must be {'in (0, 0.5)' if key == 'nu' else 'positive'}")
        out[key] = value
    return out


def stiff_rod(c, N):
    return CosseratRod.circular(c["L"], c["r"], Material(c["rho"], c["E"], c["nu"]), N)


def stiff_flex_tip(c, N, dt, scheme="lgvi"):
    """Tip deflection (T,) [m] every ``sample`` s (``dt`` must divide it)."""
    every = int(round(c["sample"] / dt))
    assert abs(every * dt - c["sample"]) < 1e-9 * c["sample"], (dt, c["sample"])
    tr = stiff_rod(c, N).simulate(
        c["horizon"],
        dt,
        base=Clamp.horizontal(),
        loads=[Gravity()],
        options=SimulationOptions(record_every=every, scheme=scheme, backend=BACKEND["name"]),
    )
    return tr.positions[:, -1, 2].numpy()


def stiff_pye_tip(c, N, dt):
    """PyElastica's tip deflection every ``sample`` s (run in chunks of sample/dt steps)."""
    sim, rod = pye_build(dict(c, N=N), True)
    every = int(round(c["sample"] / dt))
    z = [float(rod.position_collection[2, -1])]
    for k in range(int(round(c["horizon"] / c["sample"]))):
        pye_run(sim, dt, every, t0=k * every * dt)
        z.append(float(rod.position_collection[2, -1]))
    return np.array(z)


def stiff_error(z, ref):
    """max_t |z(t) − z_ref(t)| / max_t |z_ref(t)| over the recorded times."""
    n = min(len(z), len(ref))
    return float(np.abs(z[:n] - ref[:n]).max() / np.abs(ref[:n]).max())


def stiff_reference(c, n_ref):
    """The converged reference: the LGVI (default model) at N = n_ref and N = n_ref/2, dt = half the stability
    estimate rounded to divide ``sample``; returns (z_ref, relative difference of the two = its uncertainty)."""
    out = []
    for N in (n_ref // 2, n_ref):
        dt = c["sample"] / math.ceil(c["sample"] / (0.5 * float(stiff_rod(c, N).stable_dt())))
        out.append(stiff_flex_tip(c, N, dt))
    return out[1], stiff_error(out[0], out[1])


def stiff_divisor_dt(c, dt):
    """The largest step ≤ dt that divides ``sample``."""
    return c["sample"] / math.ceil(c["sample"] / dt - 1e-9)


def stiff_case(args):
    """PyElastica (N = 20, 0.9 × its largest stable dt), the LGVI (same) and the implicit step at the
    coarsest (N, dt) of the ladder whose error against the converged reference is ≤ PyElastica's; each timed
    over the whole horizon (setup included, round-robin)."""
    c = dict(STIFF, **args.stiff_rod, horizon=args.stiff_horizon)
    ref, ref_unc = stiff_reference(c, args.stiff_ref_n)
    eb = np.array([-eb_tip_step_response(c, k * c["sample"]) for k in range(len(ref))])
    res = {
        "_reference": {
            "rod": {k: c[k] for k in _STIFF_KEYS},
            "n_elements": args.stiff_ref_n,
            "uncertainty": ref_unc,
            "euler_bernoulli_linear_difference": stiff_error(eb, ref),
        }
    }
    base = Clamp.horizontal()
    T = c["horizon"]

    def flex_entry(N, dt, scheme, err):
        rod = stiff_rod(c, N)

        def run():
            options = SimulationOptions(record_every=10**9, scheme=scheme, backend=BACKEND["name"])
            return rod.simulate(T, dt, base=base, loads=[Gravity()], options=options)

        return {
            "n_elements": N,
            "dt_used_s": dt,
            "scheme": scheme,
            "error": err,
            "_steps": int(round(T / dt)),
            "_run": run,
        }

    rod = stiff_rod(c, c["N"])
    dt_l = stiff_divisor_dt(
        c,
        0.9
        * bisect(
            lambda dt: flex_stable(dict(c, gravity=True), rod, dt, args.probe_steps),
            0.5 * float(rod.stable_dt()),
            2 * float(rod.stable_dt()),
            args.bisect_iters,
        ),
    )
    res["flexlearn_lgvi"] = flex_entry(c["N"], dt_l, "lgvi", stiff_error(stiff_flex_tip(c, c["N"], dt_l), ref))
    if pye_available():
        G = c["E"] / (2 * (1 + c["nu"]))
        guess = 0.5 * c["r"] / math.sqrt(G / c["rho"])
        pc = dict(c, gravity=True)
        dt_p = stiff_divisor_dt(
            c, 0.9 * bisect(lambda dt: pye_stable(pc, dt, args.probe_steps), guess / 2, guess * 2, args.bisect_iters)
        )
        pye_err = stiff_error(stiff_pye_tip(c, c["N"], dt_p), ref)

        def pye_timed():
            s, _ = pye_build(pc, True)
            pye_run(s, dt_p, int(round(T / dt_p)))

        res["pyelastica"] = {
            "n_elements": c["N"],
            "dt_used_s": dt_p,
            "error": pye_err,
            "_steps": int(round(T / dt_p)),
            "_run": pye_timed,
        }
        target = pye_err
    else:
        target = res["flexlearn_lgvi"]["error"]
    tried = []
    for N in args.match_n:
        for dt in args.stiff_dts:
            dt = stiff_divisor_dt(c, dt)
            err = stiff_error(stiff_flex_tip(c, N, dt, "implicit"), ref)
            tried.append({"n_elements": N, "dt_s": dt, "error": err})
            if err <= target:
                break
        if tried[-1]["error"] <= target:
            break
    best = tried[-1]
    res["flexlearn_implicit"] = flex_entry(best["n_elements"], best["dt_s"], "implicit", best["error"])
    res["flexlearn_implicit"]["matched"] = bool(best["error"] <= target)
    res["flexlearn_implicit"]["ladder"] = tried
    res["flexlearn_implicit"]["accurate_dt_1e-3_s"] = stiff_rod(c, best["n_elements"]).accurate_dt(1e-3, 4, base)
    return res


def stiff_report(report, args):
    """``report['stiff_rod']`` (timed round-robin, speedups of this run) and the headline
    ``report['implicit_speedup_vs_pyelastica']``."""
    res = report["stiff_rod"] = stiff_case(args)
    ref = res.pop("_reference")
    interleaved_timing(res, args.repeats)
    res["reference"] = ref
    pye = res.get("pyelastica")
    for solver, vals in res.items():
        if pye is not None and solver.startswith("flexlearn"):
            vals["speedup_vs_pyelastica"] = vals["sim_s_per_wall_s"] / pye["sim_s_per_wall_s"]
            vals["error_le_pyelastica"] = bool(vals["error"] <= pye["error"])
    if pye is not None:
        report["implicit_speedup_vs_pyelastica"] = res["flexlearn_implicit"]["speedup_vs_pyelastica"]
    print(json.dumps({"stiff_rod": res}), file=sys.stderr, flush=True)


# ------------------------------------------------------------------ batched throughput
def batched(args, backend):
    out = {}
    c = CASES["thin_rod"]
    for B in args.batch_sizes:
        rod = flex_rod(c, "segment", batch=B)
        dt = 0.5 * float(rod.stable_dt().min())
        base = Clamp.horizontal()
        steps = args.batch_steps * (50 if backend == "auto" else 1)
        rod.simulate(
            2 * dt, dt, base=base, loads=[Gravity()], options=SimulationOptions(record_every=10**9, backend=backend)
        )
        wall = timed(
            lambda rod=rod, steps=steps, dt=dt, base=base: rod.simulate(
                steps * dt,
                dt,
                base=base,
                loads=[Gravity()],
                options=SimulationOptions(record_every=10**9, backend=backend),
            ),
            args.repeats,
        )
        out[str(B)] = B * steps / wall
    return out


def interleaved_timing(solvers, repeats):
    """Time every solver's prepared run ``repeats`` times, round-robin (so that the load of the shared
    machine falls on all alike); fills ``sim_s_per_wall_s`` and ``wall_s_per_step`` (medians)."""
    walls = {k: [] for k, v in solvers.items() if "_run" in v}
    keys = list(walls)
    for r in range(repeats):
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:
            walls[k].append(timed(solvers[k]["_run"], 1))
    for k in keys:
        v = solvers[k]
        wall = statistics.median(walls[k])
        v["sim_s_per_wall_s"] = v["_steps"] * v["dt_used_s"] / wall
        v["wall_s_per_step"] = wall / v["_steps"]
        del v["_run"], v["_steps"]


def matched(name, c, args, rotary, target):
    """The coarsest N of ``--match-n`` whose error is ≤ ``target`` (PyElastica's), with its timing."""
    res = None
    for N in args.match_n:
        res = flex_case(name, dict(c, N=N), args, rotary)
        if bool(res["error"] <= target):
            res["matched"] = True
            return res
    res["matched"] = False
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="*", default=list(CASES) + ["stiff_rod"])
    ap.add_argument("--stiff-horizon", type=float, default=STIFF["horizon"], help="stiff_rod: simulated span [s]")
    ap.add_argument("--stiff-ref-n", type=int, default=160, help="stiff_rod: elements of the reference solution")
    ap.add_argument(
        "--stiff-rod",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="stiff_rod: another rod than the default polymer rod (L, r, E, rho, nu in SI units), e.g. r=0.5e-3 E=5e10",
    )
    ap.add_argument(
        "--stiff-dts",
        type=float,
        nargs="+",
        default=[2e-3, 1e-3, 5e-4, 2.5e-4, 1e-4, 5e-5, 2e-5, 1e-5],
        help="stiff_rod: the implicit step's dt ladder, coarsest first [s]",
    )
    ap.add_argument("--probe-steps", type=int, default=1000)
    ap.add_argument("--bisect-iters", type=int, default=6)
    ap.add_argument(
        "--timing-sim-s",
        type=float,
        nargs=2,
        default=[5.0, 0.05],
        metavar=("CANTILEVER", "THIN_ROD"),
        help="simulated seconds timed per run, the same for every solver [s]",
    )
    ap.add_argument("--match-n", type=int, nargs="+", default=[20, 30, 40, 60])
    ap.add_argument("--backend", default="auto", choices=["auto", "torch"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--horizon", type=float, default=0.01, help="thin_rod error horizon [s]")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 1024])
    ap.add_argument("--batch-steps", type=int, default=20)
    ap.add_argument("--skip-errors", action="store_true")
    ap.add_argument("--skip-batched", action="store_true", help="skip the batched throughput runs")
    ap.add_argument(
        "--no-default-model",
        action="store_true",
        help="skip the error run of the default (section) model on thin_rod (very slow)",
    )
    ap.add_argument("--compile", action="store_true", help="also time the torch.compile'd step")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    args.stiff_rod = stiff_overrides(args.stiff_rod)
    torch.set_num_threads(args.threads)
    BACKEND["name"] = args.backend
    report = {"machine_note": "shared 2-core CPU (loaded); medians of noisy wall times", "torch": torch.__version__}
    have_pye = pye_available()
    if not have_pye:
        report["pyelastica"] = "not installed (pip install pyelastica==1.0.0): skipped"
    for name in args.cases:
        if name == "stiff_rod":
            stiff_report(report, args)
            continue
        c = dict(
            CASES[name],
            horizon=args.horizon,
            timing_sim_s=args.timing_sim_s[0] if name == "cantilever" else args.timing_sim_s[1],
        )
        report[name] = {}
        skip = args.skip_errors
        if name == "thin_rod" and args.no_default_model:
            args.skip_errors = True
        report[name]["flexlearn"] = flex_case(name, c, args, "section")
        args.skip_errors = skip
        report[name]["flexlearn_segment"] = flex_case(name, c, args, "segment")
        if args.compile:
            report[name]["flexlearn_compiled"] = flex_case(name, c, args, "segment", compile_step=True)
        if have_pye:
            pye = report[name]["pyelastica"] = pye_case(name, c, args)
            if "error" in pye:
                report[name]["flexlearn_matched"] = matched(name, c, args, "section", pye["error"])
                report[name]["flexlearn_segment_matched"] = matched(name, c, args, "segment", pye["error"])
        interleaved_timing(report[name], args.repeats)
        if have_pye:
            for solver, vals in report[name].items():
                if solver != "pyelastica":
                    vals["speedup_vs_pyelastica"] = vals["sim_s_per_wall_s"] / pye["sim_s_per_wall_s"]
                    if "error" in vals and "error" in pye:
                        vals["error_le_pyelastica"] = bool(vals["error"] <= pye["error"])
        print(json.dumps({name: report[name]}), file=sys.stderr, flush=True)
    if not args.skip_batched:
        report["batched"] = {"rod_steps_per_s": batched(args, args.backend)}
        report["batched_torch"] = {"rod_steps_per_s": batched(args, "torch")}
    flat = {k: report[k] for k in ("implicit_speedup_vs_pyelastica",) if k in report}
    for name in args.cases:
        for solver, vals in report[name].items():
            for k, v in vals.items():
                flat[f"{name}.{solver}.{k}"] = v
    if not args.skip_batched:
        for k, v in report["batched"]["rod_steps_per_s"].items():
            flat[f"batched.rod_steps_per_s.B{k}"] = v
        flat["batched.rod_steps_per_s"] = report["batched"]["rod_steps_per_s"]
        for k, v in report["batched_torch"]["rod_steps_per_s"].items():
            flat[f"batched_torch.rod_steps_per_s.B{k}"] = v
    print(json.dumps(dict(report, flat=flat), indent=2))


if __name__ == "__main__":
    main()
