"""`flexlearn-cpr`: seed 003's Experiments I and II in simulation for a continuum parallel robot.

The robot is ``conf/cpr.yaml`` + the robot group ``conf/cpr/``: warm-started LSE statics along the actuation path of
eq. (39), optionally the shooting baseline at the same points; writes ``experiments.json``,
``trajectory.png`` (LSE and the shooting baseline, the pulley's pull; :mod:`flexlearn.viz.cpr_figures`) and
``shapes_exp{1,2}.png`` into the run directory, and the robot over each experiment's samples as a playable
``shapes_exp{1,2}.mcap`` (one frame per second, one backbone per rod and the platform; ``mcap=false`` leaves them
out). A first run compiles the numba kernels (one notice with an
estimate; ``flexlearn-warmup`` does it ahead); a progress bar counts the solves on a terminal (plain lines in a
log). It ends with a short summary and the run directory as the last line; ``json=true`` prints the result as one
JSON line instead (for scripts).

    flexlearn-cpr cpr.rod.n_elements=8 substeps=12 shooting_steps=null
"""

from __future__ import annotations

import json

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors, use_progress
from flexlearn.config import check, check_memory


@hydra_app("flexlearn-cpr", "cpr")
def main(cfg: DictConfig) -> None:
    """flexlearn-cpr: the seed's experiments I and II (forward statics along the actuation path), outputs to disk.

    Args:
        cfg: the composed config (flexlearn/conf/cpr.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-cpr"):
        # the imports below are heavy (torch, numba kernels, matplotlib): kept off the CLI start-up (--help)
        import torch  # lazy: heavy (see above)

        from flexlearn.apps.kernels import compile_ahead  # lazy: heavy (see above)
        from flexlearn.physics.lse import CPRModel  # lazy: heavy (see above)
        from flexlearn.physics.lse.experiments import (  # lazy: heavy (see above)
            run_experiments,
            summary,
            summary_lines,
            write_outputs,
        )
        from flexlearn.physics.lse.inverse import actuation_path  # lazy: heavy (see above)
        from flexlearn.progress import Bar  # lazy: heavy (see above)
        from flexlearn.viz.cpr_figures import write_trajectory_figure  # lazy: heavy (see above)

        use_progress(cfg)
        check(isinstance(cfg.substeps, int) and cfg.substeps >= 1, "substeps", cfg.substeps, "must be an int >= 1")
        check(isinstance(cfg.n_phases, int) and cfg.n_phases >= 1, "n_phases", cfg.n_phases, "must be an int >= 1")
        steps = cfg.shooting_steps
        check(
            steps is None or (isinstance(steps, int) and steps >= 4),
            "shooting_steps",
            steps,
            "must be null or an int >= 4",
        )
        check(
            isinstance(cfg.threads, int) and not isinstance(cfg.threads, bool) and cfg.threads >= 1,
            "threads",
            cfg.threads,
            "must be an int >= 1",
        )
        torch.set_num_threads(cfg.threads)
        model = CPRModel.from_config(cfg.cpr)
        compile_ahead("flexlearn-cpr", "lse")
        path_bytes = 16.0 * cfg.n_phases * max(cfg.substeps, 1) * model.n_rods * (model.n_elements + 1) * 12
        check_memory("n_phases × substeps", f"{cfg.n_phases} × {cfg.substeps}", path_bytes, "the path's shapes")
        n_points = len(actuation_path(cfg.n_phases, cfg.substeps)[1])
        total = 2 * n_points * (1 if steps is None else 2)  # two experiments; LSE (and shooting) per point
        with Bar(total, "flexlearn-cpr: LSE" + ("" if steps is None else " + shooting") + " solves", "solve") as bar:
            result, shapes = run_experiments(model, cfg.substeps, steps, cfg.n_phases, step=bar.update)
        paths = write_outputs(cfg.output_dir, result, shapes)
        write_trajectory_figure(result, paths[0])  # trajectory.png with the shooting baseline and the pulley
        if cfg.get("mcap", True):
            paths += write_shape_recordings(cfg.output_dir, result, shapes)
    if cfg.get("json", False):
        print(json.dumps(dict(summary(result), files=[str(p) for p in paths])))
        return
    print("\n".join(summary_lines(result, paths)))
    print("run directory:")
    print(cfg.output_dir, flush=True)


def write_shape_recordings(out_dir: str, result: dict, shapes: dict) -> list:
    """Each experiment's robot shapes as ``<out_dir>/shapes_exp{1,2}.mcap``: sample k at t = k s, with its
    end-effector position [m] on ``/cpr_exp{1,2}/sample``.

    Args:
        out_dir: the run directory.
        result: the experiments' results (their ``ee_positions_m``).
        shapes: per experiment, the rods' centrelines of each sample ((R, P, 3) [m]).

    Returns:
        The paths written.
    """
    from pathlib import Path  # lazy: with the heavy imports of the command

    from flexlearn.replay.to_mcap import shapes_to_mcap  # lazy: see above

    paths = []
    for name, tag in (("experiment_I", "exp1"), ("experiment_II", "exp2")):
        ee = result[name]["ee_positions_m"]
        values = [{"sample": k + 1, "ee_position_m": list(ee[k])} for k in range(len(shapes[name]))]
        paths.append(shapes_to_mcap(Path(out_dir) / f"shapes_{tag}.mcap", shapes[name], f"cpr_{tag}", 1.0, values))
    return paths


if __name__ == "__main__":
    main()
