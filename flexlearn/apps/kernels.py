"""The numba kernel groups of the package, how to compile each ahead of use, and the notice an app prints
before a first (cache-cold) compile.

numba compiles a kernel on its first call with given argument types and caches the machine code on disk
(``cache=True``, in the module's ``__pycache__``); the next process loads it in well under a second. A group's
warm-up drives the same public entry point a run uses (``CPRModel.solve``, ``CosseratRod.simulate``,
``run_filter``) on a tiny problem with the run's argument types, so it compiles exactly the specialisations a
run loads. The kernel modules of a group are found by their source (a ``.py`` file of the package that contains
``@njit`` and is loaded by the package), so a kernel file added later is covered without an edit here.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np
from omegaconf import OmegaConf

from flexlearn.config import to_plain_dict
from flexlearn.numba_cache import cold_modules
from flexlearn.progress import ticker

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _warm_lse() -> None:
    """A 2-rod-element CPR of the default robot: a cold solve and a warm-started one, without and with the
    pulley load (the two experiments of flexlearn-cpr)."""
    # heavy imports off the start-up path (torch, numba)
    import torch

    from flexlearn.physics.lse import CPRModel
    from flexlearn.physics.lse.compiled.prebuild import prebuild

    prebuild()  # the solver's large kernels, on two processes when there are two CPUs
    cfg = to_plain_dict(OmegaConf.load(PACKAGE_DIR / "conf" / "cpr" / "default.yaml"), "cpr")
    cfg.setdefault("rod", {})["n_elements"] = 2
    model = CPRModel.from_config(cfg)
    theta = torch.zeros(int(cfg["geometry"]["n_motors"]), dtype=torch.float64)
    for pulley in (False, True):
        loads = model.default_loads(pulley)
        eq = model.solve(theta, loads)
        model.solve(theta + 1e-3, loads, init=eq)


def _warm_pose() -> None:
    """The inverse statics of the continuous Stewart-Gough robot (conf/cpr/csg.yaml) with 2 elements per rod: a
    cold solve, a warm-started one, a path and a batch (every entry point of `PoseStatics`)."""
    from flexlearn.physics.lse import CPRModel  # heavy import off the start-up path (torch, numba)

    cfg = to_plain_dict(OmegaConf.load(PACKAGE_DIR / "conf" / "cpr" / "csg.yaml"), "cpr")
    cfg.setdefault("rod", {})["n_elements"] = 2
    ps = CPRModel.from_config(cfg).pose_statics()
    poses = np.tile(np.eye(4), (3, 1, 1))
    poses[:, :3, 3] = [[0.0, 0.0, 0.4], [0.0, 0.001, 0.401], [0.0, 0.002, 0.402]]
    start = ps.solve(poses[0])
    ps.solve(poses[1], start)
    ps.solve_path(poses[1:], start)
    ps.solve_batch(poses[1:], start)


def _warm_cosserat() -> None:
    """Ten steps of flexlearn-cosserat's default experiment on the fused kernel."""
    # heavy imports off the start-up path (torch, numba)
    from flexlearn.physics.cosserat.experiments import load_experiment
    from flexlearn.physics.cosserat.tip_output import run_experiment

    exp = load_experiment(OmegaConf.load(PACKAGE_DIR / "conf" / "cosserat" / "pdms_tipmagnet.yaml"), "cosserat")
    run_experiment(exp, max_duration=10 * exp.dt, backend="numba")


def _warm_attitude() -> None:
    """The offline attitude filter on 20 samples, without and with a magnetometer."""
    from flexlearn.sensing.attitude.offline import run_filter  # heavy import off the start-up path (numba)

    gyr = np.zeros((20, 3))
    acc = np.tile([0.0, 0.0, 9.81], (20, 1))
    mag = np.tile([2e-5, 0.0, -4e-5], (20, 1))
    run_filter(gyr, acc, 100.0)
    run_filter(gyr, acc, 100.0, mag=mag)


@dataclass(frozen=True)
class KernelGroup:
    """One package of numba kernels: where they live, what uses them, how long a cold compile takes (seconds,
    on an empty cache on a 2-core workstation; lse: 13–24 s on two processes (compiled/prebuild.py), ≈ 25 s on
    one, measured back to back by scripts/bench_lse_compile.py; pose: ≈ 140 s after lse, idle; cosserat /
    attitude: 85 / 29 s at a load of ~6, about half when idle) and how to compile them."""

    name: str
    package: str
    entry: str  # the module a run imports to use the kernels
    used_by: str
    estimate_s: float
    warm: Callable[[], None]

    def modules(self) -> list[ModuleType]:
        """The group's kernel modules that its package loads, in its subpackages too (a kernel file nothing imports
        is left out)."""
        importlib.import_module(self.entry)
        root = PACKAGE_DIR.joinpath(*self.package.split(".")[1:])
        files = sorted(p for p in root.rglob("*.py") if "@njit" in p.read_text(encoding="utf-8"))
        names = [".".join([self.package, *p.relative_to(root).with_suffix("").parts]) for p in files]
        return [sys.modules[n] for n in names if n in sys.modules]

    def _record(self) -> Path:
        return PACKAGE_DIR.joinpath(*self.package.split(".")[1:], "__pycache__", f"{self.name}.warm-modules.json")

    def cold(self) -> list[str]:
        """The group's modules that compile on first use (empty: all cached). After a warm-up only the modules it
        compiled count (`remember_warm`): a kernel module the runs never call would otherwise stay cold forever."""
        modules = self.modules()
        try:
            used = set(json.loads(self._record().read_text()))
            modules = [m for m in modules if m.__name__ in used] or modules
        except (OSError, ValueError, TypeError):
            pass
        return cold_modules(modules)

    def remember_warm(self) -> None:
        """Record which of the group's modules are cached now (after ``warm``); never raises."""
        modules = self.modules()
        cold = set(cold_modules(modules))
        try:
            self._record().parent.mkdir(exist_ok=True)
            self._record().write_text(json.dumps([m.__name__ for m in modules if m.__name__ not in cold]))
        except OSError:
            pass


GROUPS = {
    "lse": KernelGroup(
        "lse",
        "flexlearn.physics.lse",
        "flexlearn.physics.lse",
        "flexlearn-cpr (forward statics without gradients)",
        20.0,
        _warm_lse,
    ),
    "pose": KernelGroup(
        "pose",
        "flexlearn.physics.lse.length_actuated",
        "flexlearn.physics.lse.length_actuated.batch",
        "inverse statics to a platform pose (CPRModel.pose_statics, scripts/bench_csg.py)",
        140.0,
        _warm_pose,
    ),
    "cosserat": KernelGroup(
        "cosserat",
        "flexlearn.physics.cosserat",
        "flexlearn.physics.cosserat",
        "flexlearn-cosserat (the fused step loop)",
        45.0,
        _warm_cosserat,
    ),
    "attitude": KernelGroup(
        "attitude",
        "flexlearn.sensing",
        "flexlearn.sensing.attitude.offline",
        "the offline attitude filter (run_filter)",
        15.0,
        _warm_attitude,
    ),
}


def compile_ahead(app: str, group_name: str) -> None:
    """If the group's kernels are not cached yet: one line on stderr saying so, with the estimate, then compile
    them under a progress bar (flexlearn.progress), so the run that follows loads them. Cached: nothing.

    Args:
        app: the command's name, which starts the notice lines.
        group_name: the kernel group, a key of `GROUPS` (lse, pose, cosserat, attitude).
    """
    group = GROUPS[group_name]
    cold = group.cold()
    if not cold:
        return
    print(
        f"{app}: compiling the {group.name} numba kernels for the first time (about {group.estimate_s:.0f} s on "
        f"2 cores; cached for later runs; 'flexlearn-warmup' compiles every kernel ahead)",
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    with ticker(f"compiling {group.name} kernels", group.estimate_s):
        group.warm()
    group.remember_warm()
    print(f"{app}: compiled in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
