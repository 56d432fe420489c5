"""`flexlearn-cosserat`: simulate a Cosserat-rod experiment and write its tip trajectory and the rod over time.

The experiment is ``conf/cosserat/<name>.yaml`` (seed 001 Tables 3–7); the run writes its tip trajectory (JSON, CSV,
PNG) and the whole rod over time as a playable MCAP file (``<name>.mcap``: the centreline and the base and tip
frames in Foxglove's schemas; ``mcap=false`` leaves it out) into the run directory. A first run compiles the fused
numba kernel (one notice with an estimate; ``flexlearn-warmup`` does it ahead); a terminal shows the elapsed time
while the rod is simulated.

    flexlearn-cosserat cosserat=pdms_rotating max_duration=0.5
"""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig

from flexlearn.apps.kernels import compile_ahead
from flexlearn.apps.runner import hydra_app, readable_errors, use_progress
from flexlearn.config import check
from flexlearn.progress import ticker
from flexlearn.replay.to_mcap import trajectory_to_mcap


@hydra_app("flexlearn-cosserat", "cosserat")
def main(cfg: DictConfig) -> None:
    """Simulate the configured experiment and write its tip trajectory (module docstring).

    Args:
        cfg: the composed config (flexlearn/conf/cosserat.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-cosserat"):
        use_progress(cfg)
        from flexlearn.physics.cosserat.experiments import load_experiment  # heavy (torch): after Hydra parsed
        from flexlearn.physics.cosserat.tip_output import run_experiment, write_tip_trajectory  # heavy (torch)

        exp = load_experiment(cfg.cosserat, "cosserat")
        check(cfg.backend in ("auto", "torch", "numba"), "backend", cfg.backend, "auto | torch | numba")
        formats = [str(f) for f in cfg.formats] if cfg.formats is not None else []
        max_duration = None if cfg.max_duration is None else float(cfg.max_duration)
        check(
            isinstance(cfg.max_steps, int) and cfg.max_steps >= 1, "max_steps", cfg.max_steps, "must be an integer >= 1"
        )
        if cfg.backend != "torch":
            compile_ahead("flexlearn-cosserat", "cosserat")
        with ticker(f"flexlearn-cosserat: simulating {exp.name}") as bar:
            tr, info = run_experiment(
                exp,
                max_duration,
                cfg.backend,
                cfg.max_steps,
                announce=lambda line: bar.write(f"flexlearn-cosserat: {line}"),
            )
        paths = write_tip_trajectory(cfg.output_dir, tr, exp, info, formats)
        if cfg.mcap:
            paths.append(write_rod_mcap(cfg.output_dir, tr, exp.name))
    print(json.dumps(dict(info, files=[str(p) for p in paths])))


def write_rod_mcap(out_dir, tr, name: str):
    """The recorded rod (positions (T, N+1, 3) [m], rotations) as ``<out_dir>/<name>.mcap``; returns the path.

    Args:
        out_dir: the directory to write into.
        tr: the simulated trajectory (``times`` [s], ``positions`` [m], ``rotations``).
        name: the file's stem and the MCAP topic prefix (the experiment's name).

    Returns:
        The path of the MCAP file.
    """
    pos, rot = tr.positions.detach().cpu().numpy(), tr.rotations.detach().cpu().numpy()
    return trajectory_to_mcap(Path(out_dir) / f"{name}.mcap", tr.times.tolist(), pos, rot, name)


if __name__ == "__main__":
    main()
