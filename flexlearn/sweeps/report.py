"""The end of every multirun: the sweep summarised and its best run named (a Hydra callback).

`BestRunReport` is listed under ``hydra.callbacks`` (conf/hydra/default.yaml), so it runs after every sweep —
grid or Optuna, local, joblib or SLURM — in the process that launched it: it writes the summary of
`flexlearn.sweeps.aggregate.aggregate_multirun` into the sweep directory and prints the best run's directory,
checkpoint and metrics. A sweep it cannot summarise (no finished job) gets one line saying why; it never fails
the sweep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from flexlearn.sweeps.aggregate import print_sweep_summary

__all__ = ["BestRunReport", "SLURM_LAUNCHER"]

# The name conf/hydra/launcher/slurm.yaml gives flexlearn.sweeps.slurm.SlurmLauncher: Hydra instantiates launchers
# only by a name in its plugin namespace (hydra_plugins.*); BestRunReport.on_multirun_start registers it under it.
SLURM_LAUNCHER = "hydra_plugins.flexlearn_slurm.SlurmLauncher"


class BestRunReport(Callback):
    """Hydra callback: after a multirun, summarise its directory and print the best run (`best_run_lines`); before
    it, make flexlearn's SLURM launcher known to Hydra when the sweep uses it."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Register `flexlearn.sweeps.slurm.SlurmLauncher` as ``SLURM_LAUNCHER`` when ``hydra.launcher`` names it.

        Args:
            config: the multirun's composed config (its ``hydra.launcher``).
            **kwargs: further arguments Hydra passes (not read).
        """
        if str(config.hydra.launcher.get("_target_", "")) != SLURM_LAUNCHER:
            return
        from hydra.core.plugins import Plugins

        # an optional dependency (hydra-submitit-launcher), imported only for a SLURM sweep
        from flexlearn.sweeps.slurm import SlurmLauncher

        Plugins.instance().class_name_to_class[SLURM_LAUNCHER] = SlurmLauncher

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Summarise ``hydra.sweep.dir``; print the lines; a sweep that cannot be summarised gets one warning.

        Args:
            config: the multirun's composed config (its ``hydra.sweep.dir``).
            **kwargs: further arguments Hydra passes (not read).
        """
        print_sweep_summary(Path(str(config.hydra.sweep.dir)))
