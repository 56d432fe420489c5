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

__all__ = ["BestRunReport"]


class BestRunReport(Callback):
    """Hydra callback: after a multirun, summarise its directory and print the best run (`best_run_lines`)."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Summarise ``hydra.sweep.dir``; print the lines; a sweep that cannot be summarised gets one warning.

        Args:
            config: the multirun's composed config (its ``hydra.sweep.dir``).
            **kwargs: further arguments Hydra passes (not read).
        """
        print_sweep_summary(Path(str(config.hydra.sweep.dir)))
