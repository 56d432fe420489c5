"""flexlearn's Hydra plugins: the SLURM launcher (`hydra_plugins.flexlearn_slurm.slurm_launcher`).

Hydra finds launchers only in its plugin namespace package ``hydra_plugins``; this package puts flexlearn's there,
so ``hydra/launcher=slurm`` works in any Hydra app of this environment, whatever its callbacks.
"""
