"""`flexlearn-cosserat`: simulate a Cosserat-rod experiment (``conf/cosserat/<name>.yaml``, seed 001
Tables 3–7) and write its tip trajectory (JSON, CSV, PNG) into the run directory. A first run compiles the
fused numba kernel (one notice with an estimate; ``flexlearn-warmup`` does it ahead); a terminal shows the
elapsed time while the rod is simulated.

    flexlearn-cosserat cosserat=pdms_rotating max_duration=0.5
"""

from __future__ import annotations

import json

from omegaconf import DictConfig

from flexlearn.apps.kernels import compile_ahead
from flexlearn.apps.runner import hydra_app, readable_errors, use_progress
from flexlearn.config import check
from flexlearn.progress import ticker


@hydra_app("flexlearn-cosserat", "cosserat")
def main(cfg: DictConfig) -> None:
    """Simulate the configured experiment and write its tip trajectory (module docstring)."""
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
    print(json.dumps(dict(info, files=[str(p) for p in paths])))


if __name__ == "__main__":
    main()
