"""Launcher configs: the SLURM (submitit) setup composes and is accepted by submitit, without a cluster."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[2] / "flexlearn" / "conf"


def _hydra_cfg(overrides):
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose("train", overrides=overrides, return_hydra_config=True)


def test_slurm_launcher_config_is_accepted_by_submitit(tmp_path, monkeypatch):
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from submitit.slurm.slurm import SlurmExecutor

    monkeypatch.setattr(SlurmExecutor, "affinity", classmethod(lambda cls: 1))  # pretend `srun` exists

    cfg = _hydra_cfg(
        [
            "hydra/launcher=slurm",
            "hydra.launcher.partition=cpu",
            "experiment=identify_lse_sim",
            f"hydra.sweep.dir={tmp_path}",
        ]
    )
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert launcher.pop("_target_") == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher["submitit_folder"] == f"{tmp_path}/.submitit/%j"
    # what SlurmLauncher does before submitting: build the executor, map the parameters onto it
    folder = launcher.pop("submitit_folder")
    executor = submitit.AutoExecutor(
        folder=folder, cluster="slurm", slurm_max_num_timeout=launcher.pop("max_num_timeout")
    )
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in launcher.items()})
    params = executor._executor.parameters  # unknown or misspelt keys would have raised above
    assert params["partition"] == "cpu" and params["cpus_per_task"] == 4 and params["time"] == 120
    assert params["setup"] == ["export OMP_NUM_THREADS=4"]
    sbatch = executor._executor._make_submission_file_text("python -m flexlearn.apps.train", "0")
    for line in (
        "#SBATCH --partition=cpu",
        "#SBATCH --time=120",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=16GB",
        "#SBATCH --ntasks-per-node=1",
        "export OMP_NUM_THREADS=4",
    ):
        assert line in sbatch, sbatch


def test_local_parallel_launcher_is_joblib_with_two_jobs():
    cfg = _hydra_cfg(["hydra/launcher=local_parallel"])
    assert cfg.hydra.launcher._target_.endswith("JoblibLauncher") and cfg.hydra.launcher.n_jobs == 2
