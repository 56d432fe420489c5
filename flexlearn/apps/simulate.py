"""`flexlearn-simulate`: write a simulated sweep-rig recording as raw streams."""
from __future__ import annotations

from omegaconf import DictConfig

from flexlearn.apps.runner import hydra_app, readable_errors, use_progress
from flexlearn.config import from_dict


@hydra_app("flexlearn-simulate", "simulate")
def main(cfg: DictConfig) -> None:
    with readable_errors("flexlearn-simulate"):
        use_progress(cfg)
        from flexlearn.progress import ticker
        from flexlearn.sim.rig import RigConfig, simulate_sweep

        rig = from_dict(RigConfig, cfg.sim, "sim")
        with ticker(f"simulating {rig.n_poses} poses"):
            sweep = simulate_sweep(rig)
        with ticker(f"writing {cfg.output}"):
            path = sweep.save(cfg.output)
    print(path)


if __name__ == "__main__":
    main()
