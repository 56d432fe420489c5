#!/usr/bin/env python
"""Reproduce seed 000, Figs. 6–8: dominant-mode counts and first four natural frequencies over two
parameter grids, and the payload cases of §VI-B/§VI-C. Prints JSON; writes PNGs.

Scenario (i): EI × ρA at L = 4.5 m, M_p = 20 kg. Scenario (ii): L × M_p at EI = 74300 N m²,
ρA = 5.37 kg/m (seed 000, §VI-A). The seed states δ = 1e-6 only; θ₀, Ω_max, T, ε, α, f_exc, ζ and the grid
ranges are ours and are printed (see :class:`flexlearn.physics.modal.ModeSelectionConfig`).

    python scripts/reproduce_seed000_modes.py [--out-dir outputs/seed000_modes] [--grid 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from flexlearn.atomic import atomic_path, write_json_atomic  # noqa: E402
from flexlearn.physics.modal import FlexibleLink, ModeSelectionConfig, select_modes  # noqa: E402

EI0, RA0, L0, MP0 = 74300.0, 5.37, 4.5, 20.0


def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _figures(ra: dict, rb: dict, EI, rA, L, Mp, out: Path) -> None:
    """Seed Figs. 6 (mode counts by the convergence criterion, as in the seed's figure) and 7–8 (first four
    frequencies) over the EI × ρA and L × M_p grids."""
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    top = int(max(ra["m_conv"].max(), rb["m_conv"].max()))
    cmap = plt.get_cmap("viridis", top)
    bnorm = matplotlib.colors.BoundaryNorm([k + 0.5 for k in range(top + 1)], top)
    ticks = list(range(1, top + 1))
    im = ax[0].pcolormesh(rA.numpy(), EI.numpy(), ra["m_conv"].numpy(), shading="nearest", cmap=cmap, norm=bnorm)
    ax[0].set_yscale("log")
    ax[0].set_xlabel("ρA [kg/m]")
    ax[0].set_ylabel("EI [N m²]")
    ax[0].set_title(f"(a) dominant modes, L = {L0} m, M_p = {MP0} kg")
    fig.colorbar(im, ax=ax[0], ticks=ticks)
    im = ax[1].pcolormesh(Mp.numpy(), L.numpy(), rb["m_conv"].numpy(), shading="nearest", cmap=cmap, norm=bnorm)
    ax[1].set_xlabel("M_p [kg]")
    ax[1].set_ylabel("L [m]")
    ax[1].set_title(f"(b) dominant modes, EI = {EI0:g} N m², ρA = {RA0} kg/m")
    fig.colorbar(im, ax=ax[1], ticks=ticks)
    _save(fig, out / "fig6_mode_count.png")

    for name, res, X, Y, xl, yl, logy in (
        ("fig7_frequencies_EI_rhoA.png", ra, rA, EI, "ρA [kg/m]", "EI [N m²]", True),
        ("fig8_frequencies_L_Mp.png", rb, Mp, L, "M_p [kg]", "L [m]", False),
    ):
        fig, ax = plt.subplots(1, 4, figsize=(18, 4))
        for k in range(4):
            im = ax[k].pcolormesh(
                X.numpy(),
                Y.numpy(),
                res["frequencies_hz"][..., k].numpy(),
                shading="nearest",
                cmap="magma",
                norm=matplotlib.colors.LogNorm(),
            )
            if logy:
                ax[k].set_yscale("log")
            ax[k].set_xlabel(xl)
            ax[k].set_ylabel(yl)
            ax[k].set_title(f"f_{k + 1} [Hz]")
            fig.colorbar(im, ax=ax[k])
        _save(fig, out / name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default="outputs/seed000_modes")
    ap.add_argument("--grid", type=int, default=50)
    a = ap.parse_args()
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    cfg = ModeSelectionConfig()
    n = a.grid
    EI = torch.logspace(4, 6, n, dtype=torch.float64)
    rA = torch.linspace(1.0, 20.0, n, dtype=torch.float64)
    L = torch.linspace(1.0, 8.0, n, dtype=torch.float64)
    Mp = torch.linspace(0.0, 60.0, n, dtype=torch.float64)
    t0 = time.perf_counter()
    ra = select_modes(FlexibleLink(EI[:, None], rA[None, :], L0, MP0), cfg)
    t1 = time.perf_counter()
    rb = select_modes(FlexibleLink(EI0, RA0, L[:, None], Mp[None, :]), cfg)
    t2 = time.perf_counter()

    _figures(ra, rb, EI, rA, L, Mp, out)

    cases = {
        "SLFM 4.5 m, 20 kg": (4.5, 20.0),
        "SLFM 4.5 m, 40 kg": (4.5, 40.0),
        "DLFM link 1, 4.5 m, 30 kg": (4.5, 30.0),
        "DLFM link 2, 3.55 m, 10 kg": (3.55, 10.0),
    }
    lk = FlexibleLink(
        EI0,
        RA0,
        torch.tensor([c[0] for c in cases.values()], dtype=torch.float64),
        torch.tensor([c[1] for c in cases.values()], dtype=torch.float64),
    )
    rc = select_modes(lk, cfg)
    seed_says = {
        "SLFM 4.5 m, 20 kg": 2,
        "SLFM 4.5 m, 40 kg": 1,
        "DLFM link 1, 4.5 m, 30 kg": 1,
        "DLFM link 2, 3.55 m, 10 kg": 2,
    }
    case_out = {}
    for i, k in enumerate(cases):
        case_out[k] = {
            "m_conv": int(rc["m_conv"][i]),
            "m_bw": int(rc["m_bw"][i]),
            "m": int(rc["m"][i]),
            "seed": seed_says[k],
            "max_C_k": [float(x) for x in rc["c_max"][i]],
            "frequencies_hz": [round(float(x), 4) for x in rc["frequencies_hz"][i][:4]],
        }
    result = {
        "config": dataclasses.asdict(cfg) | {"f_exc_used_hz": cfg.excitation_hz},
        "grids": {
            "EI_Nm2": [float(EI[0]), float(EI[-1]), "log", n],
            "rhoA_kg_m": [float(rA[0]), float(rA[-1]), n],
            "L_m": [float(L[0]), float(L[-1]), n],
            "Mp_kg": [float(Mp[0]), float(Mp[-1]), n],
        },
        "time_s": {"EI_x_rhoA": t1 - t0, "L_x_Mp": t2 - t1},
        "mode_count_histogram": {
            "EI_x_rhoA": torch.bincount(ra["m"].flatten()).tolist(),
            "L_x_Mp": torch.bincount(rb["m"].flatten()).tolist(),
        },
        "saturated_fraction": {
            "EI_x_rhoA": float(ra["saturated"].double().mean()),
            "L_x_Mp": float(rb["saturated"].double().mean()),
        },
        "cases": case_out,
        "figures": [
            str(out / f) for f in ("fig6_mode_count.png", "fig7_frequencies_EI_rhoA.png", "fig8_frequencies_L_Mp.png")
        ],
    }
    write_json_atomic(out / "modes.json", result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
