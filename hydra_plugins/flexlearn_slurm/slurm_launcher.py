"""The launcher of ``hydra/launcher=slurm`` under the name Hydra instantiates it by.

Hydra scans ``hydra_plugins.*`` at start-up and knows each launcher by ``<module>.<class>``; the launcher itself is
`flexlearn.sweeps.slurm.SlurmLauncher`. Without the ``sweep`` extra (hydra-submitit-launcher) this module defines
no launcher, so the scan stays silent and only a SLURM sweep is refused (its config group is then missing).
"""

from __future__ import annotations

try:
    from flexlearn.sweeps.slurm import SlurmLauncher as _SlurmLauncher
except ImportError:  # hydra-submitit-launcher not installed: no SLURM launcher to offer
    __all__: list[str] = []
else:
    __all__ = ["SlurmLauncher"]

    class SlurmLauncher(_SlurmLauncher):
        """`flexlearn.sweeps.slurm.SlurmLauncher`, named in Hydra's plugin namespace."""
