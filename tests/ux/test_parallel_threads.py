"""hydra/launcher=local_parallel: each job limits torch and OpenMP to cores // n_jobs threads."""

from __future__ import annotations

import os

import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import open_dict


def _hydra(overrides: list[str], mode: RunMode) -> None:
    import flexlearn.apps.runner as runner

    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=runner.CONF_DIR):
        cfg = compose("train", overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.mode = mode
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)


def test_threads_limited_in_a_local_parallel_job_only(monkeypatch):
    from flexlearn.apps.runner import threads_per_parallel_job

    before = torch.get_num_threads()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
        monkeypatch.setenv(var, os.environ.get(var, ""))  # restored after the test
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    try:
        _hydra(["hydra/launcher=local_parallel"], RunMode.RUN)
        assert threads_per_parallel_job() is None  # a single run: nothing changed
        _hydra(["hydra/launcher=local_parallel", "hydra.launcher.n_jobs=4"], RunMode.MULTIRUN)
        assert threads_per_parallel_job() == 2
        assert torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
        _hydra([], RunMode.MULTIRUN)  # the basic launcher runs jobs one after another: nothing changed
        torch.set_num_threads(before)
        assert threads_per_parallel_job() is None and torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)
        HydraConfig.instance().cfg = None  # later tests must not see a multirun job
        GlobalHydra.instance().clear()
