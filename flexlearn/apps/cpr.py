"""`flexlearn-cpr`: seed 003's Experiments I and II in simulation for a continuum parallel robot
(``conf/cpr.yaml`` + the robot group ``conf/cpr/``): warm-started LSE statics along the actuation path of
eq. (39), optionally the shooting baseline at the same points; writes ``experiments.json``,
``trajectory.png`` and ``shapes_exp{1,2}.png`` into the run directory.

    flexlearn-cpr cpr.rod.n_elements=8 substeps=12 shooting_steps=null
"""
from __future__ import annotations

import json

from omegaconf import DictConfig

from flexlearn.apps._runner import hydra_app, readable_errors
from flexlearn.config import check


@hydra_app("flexlearn-cpr", "cpr")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-cpr"):
        import torch

        from flexlearn.physics.lse import CPRModel
        from flexlearn.physics.lse.experiments import run_experiments, summary, write_outputs

        check(isinstance(cfg.substeps, int) and cfg.substeps >= 1, "substeps", cfg.substeps, "must be an int >= 1")
        check(isinstance(cfg.n_phases, int) and cfg.n_phases >= 1, "n_phases", cfg.n_phases, "must be an int >= 1")
        steps = cfg.shooting_steps
        check(steps is None or (isinstance(steps, int) and steps >= 4), "shooting_steps", steps,
              "must be null or an int >= 4")
        check(isinstance(cfg.threads, int) and not isinstance(cfg.threads, bool) and cfg.threads >= 1, "threads",
              cfg.threads, "must be an int >= 1")
        torch.set_num_threads(cfg.threads)
        model = CPRModel.from_config(cfg.cpr)
        result, shapes = run_experiments(model, cfg.substeps, steps, cfg.n_phases)
        paths = write_outputs(cfg.output_dir, result, shapes)
    print(json.dumps(dict(summary(result), files=[str(p) for p in paths])))


if __name__ == "__main__":
    main()
