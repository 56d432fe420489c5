"""`flexlearn-simulate`: write a simulated sweep-rig recording as raw streams.

The sweep's memory is estimated before anything is allocated (`flexlearn.jobs.runs.check_sweep_memory`): a pose
count or sensor rate the machine cannot hold is refused with the estimate (exit status 2). Interrupted (Ctrl-C,
SIGTERM), it writes nothing: a previous recording at ``output`` stays as it was.
"""

from __future__ import annotations

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors, use_progress
from flexlearn.config import from_dict
from flexlearn.jobs.runs import check_sweep_memory
from flexlearn.progress import ticker


@hydra_app("flexlearn-simulate", "simulate")
def main(cfg: DictConfig) -> None:
    """Simulate the sweep of ``cfg.sim`` and save its raw streams at ``cfg.output``; print the path.

    Args:
        cfg: the composed config (flexlearn/conf/simulate.yaml with the command's overrides).
    """
    with readable_errors("flexlearn-simulate"):
        use_progress(cfg)
        from flexlearn.sim.rig import RigConfig, simulate_sweep  # heavy import off the start-up path (torch)

        rig = from_dict(RigConfig, cfg.sim, "sim")
        check_sweep_memory(rig, "sim")
        with ticker(f"simulating {rig.n_poses} poses"):
            sweep = simulate_sweep(rig)
        with ticker(f"writing {cfg.output}"):
            path = sweep.save(cfg.output)
    print(path)


if __name__ == "__main__":
    main()
