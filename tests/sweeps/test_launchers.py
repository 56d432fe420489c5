"""Launcher configs: the SLURM (submitit) setup composes and is accepted by submitit, without a cluster."""

from __future__ import annotations

import subprocess
import sys
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
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as SubmititSlurmLauncher

    from flexlearn.sweeps.slurm import SlurmLauncher

    target = launcher.pop("_target_")
    found = {f"{c.__module__}.{c.__name__}": c for c in Plugins.instance().discover(Launcher)}  # Hydra's own scan
    assert target in found and issubclass(found[target], SlurmLauncher), sorted(found)
    # by name: Hydra's plugin scan re-executes plugin modules that are already imported, so with the checkout first
    # on sys.path (`python -m pytest` from it) the submitit class flexlearn's derives from is an earlier copy
    submitit_name = f"{SubmititSlurmLauncher.__module__}.{SubmititSlurmLauncher.__qualname__}"
    assert submitit_name in {f"{c.__module__}.{c.__qualname__}" for c in SlurmLauncher.__mro__}
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
    assert "account" not in params and "qos" not in params  # null: the cluster's defaults
    assert "gpus_per_node" not in params  # no GRES request: fits a cluster without GPUs
    assert params["setup"] == ["export OMP_NUM_THREADS=4"]
    sbatch = executor._executor._make_submission_file_text("python -m flexlearn.apps.train", "0")
    for line in (
        "#SBATCH --partition=cpu",
        "#SBATCH --time=120",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=16GB",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --signal=USR2@120",
        "export OMP_NUM_THREADS=4",
    ):
        assert line in sbatch, sbatch


def test_local_parallel_launcher_is_joblib_with_two_jobs():
    cfg = _hydra_cfg(["hydra/launcher=local_parallel"])
    assert cfg.hydra.launcher._target_.endswith("JoblibLauncher") and cfg.hydra.launcher.n_jobs == 2


def test_slurm_launcher_without_slurm_is_one_line(tmp_path):
    """On a machine without SLURM's commands the sweep stops at once: exit 2, one line, no stack trace."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), PATH=str(Path(sys.executable).parent))
    env.pop("SLURM_CONF", None)
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.train", "-m", "hydra/launcher=slurm", "task.lr=1e-3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "flexlearn-train: error: hydra/launcher=slurm needs SLURM's sbatch, srun, squeue on PATH (not found)"
        )
    )


class _FakeJob:
    def __init__(self, folder: Path, job_id: str) -> None:
        from submitit.core.utils import JobPaths

        self.job_id, self.paths = job_id, JobPaths(folder / job_id, job_id, 0)


class _FakeStates:
    """Scripted scheduler answers: one dict of states per poll."""

    def __init__(self, polls):
        self.polls, self.calls = list(polls), 0

    def states(self, ids):
        answer = self.polls[min(self.calls, len(self.polls) - 1)]
        self.calls += 1
        return {j: answer.get(j, "GONE") for j in ids}


def test_waiting_logs_one_line_per_change_and_ends_on_every_final_state(tmp_path, monkeypatch, caplog):
    import logging

    from flexlearn.sweeps import slurm

    monkeypatch.setattr(slurm.time, "sleep", lambda s: None)
    jobs = [_FakeJob(tmp_path, f"7_{i}") for i in range(3)]
    jobs[0].paths.result_pickle.parent.mkdir(parents=True)
    polls = [
        {"7_0": "PENDING", "7_1": "PENDING", "7_2": "PENDING"},
        {"7_0": "RUNNING", "7_1": "RUNNING", "7_2": "PENDING"},
        {"7_0": "RUNNING", "7_1": "RUNNING", "7_2": "PENDING"},  # no change: no line
        {"7_0": "RUNNING", "7_1": "FAILED", "7_2": "RUNNING"},
        {"7_0": "RUNNING", "7_2": "RUNNING"},  # job 0 writes its result file meanwhile
        {"7_0": "COMPLETED"},  # job 2 is gone from the queue without a result: ended
    ]
    fake = _FakeStates(polls)
    original = fake.states

    def states(ids):
        if fake.calls == 4:
            jobs[0].paths.result_pickle.write_bytes(b"")
        return original(ids)

    fake.states = states
    with caplog.at_level(logging.INFO, logger="flexlearn.sweeps.slurm"):
        final = slurm.wait_quietly(jobs, fake)
    assert final == {"7_0": "DONE", "7_1": "FAILED", "7_2": "GONE"}
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "slurm array 7: 3 jobs: 3 pending, 0 running, 0 finished",
        "slurm array 7: 3 jobs: 1 pending, 2 running, 0 finished",
        "slurm array 7: 3 jobs: 0 pending, 2 running, 1 finished",
        "slurm array 7: 3 jobs: 0 pending, 0 running, 3 finished",
    ], lines


def test_queue_states_fall_back_to_squeue_without_accounting(monkeypatch):
    from flexlearn.sweeps import slurm

    calls = []

    def run(command):
        calls.append(command[0])
        if command[0] == "sacct":
            return None  # "Slurm accounting storage is disabled"
        return "12_0|RUNNING\n12_1|PENDING\n12_1.batch|RUNNING\n"

    monkeypatch.setattr(slurm, "_run", run)
    states = slurm.QueueStates()
    assert states.states(["12_0", "12_1", "12_2"]) == {"12_0": "RUNNING", "12_1": "PENDING", "12_2": "GONE"}
    assert states.states(["12_0"]) == {"12_0": "RUNNING"}
    assert calls == ["sacct", "squeue", "squeue"]  # sacct asked once, then never again


def test_a_jobs_python_error_is_reported_by_its_exception_line():
    from flexlearn.sweeps.slurm import raised_line

    message = (
        "Job (task=0) failed during processing with trace:\n----------------------\nTraceback (most recent call "
        'last):\n  File "x.py", line 1\nomegaconf.errors.UnsupportedInterpolationType: Unsupported interpolation '
        "type flexlearn_root\n    full_key: hydra.sweep.dir\n----------------------\nYou can check full logs with "
        "'job.stderr(0)'\n  - /a.err\n  - /a.out"
    )
    assert raised_line(message) == (
        "omegaconf.errors.UnsupportedInterpolationType: Unsupported interpolation type flexlearn_root"
    )
    assert raised_line("sbatch said no") == "sbatch said no"


def test_without_the_sweep_extra_hydras_plugin_scan_stays_silent_and_offers_no_slurm_launcher():
    """hydra_plugins.flexlearn_slurm is imported by every Hydra app's plugin scan: without hydra-submitit-launcher
    (blocked here in a fresh interpreter) it must neither warn nor fail; it offers no launcher then."""
    code = (
        "import sys, warnings\n"
        "sys.modules['hydra_plugins.hydra_submitit_launcher'] = None\n"
        "warnings.simplefilter('error')\n"
        "from hydra.core.plugins import Plugins\n"
        "from hydra.plugins.launcher import Launcher\n"
        "print(sorted(f'{c.__module__}.{c.__name__}' for c in Plugins.instance().discover(Launcher)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert "flexlearn" not in proc.stdout and "BasicLauncher" in proc.stdout, proc.stdout
