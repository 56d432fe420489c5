"""The SLURM launcher of flexlearn's sweeps (``hydra/launcher=slurm``): submitit's launcher, answering like a local one.

`SlurmLauncher` is hydra-submitit-launcher's, with three changes:

- **Quiet waiting.** Job states come from ``sacct`` where the cluster keeps accounting, else from ``squeue``
  (`QueueStates`); no warning per poll. One line is printed when the counts of pending, running and finished
  jobs change (``slurm array 42: 4 jobs: 1 pending, 2 running, 1 finished``).
- **Failed jobs named.** A job that ends without a result (exit status ≠ 0, cancelled, out of memory or time,
  node failure) is reported on one line with its SLURM state, its log file (``<sweep dir>/.submitit/<id>/…_log.err``)
  and the last line of that log; the sweeper receives it as a failed job (`SlurmJobFailed`; Optuna records a
  failed trial, a grid sweep stops after the batch with that line).
- **Requeue resumes.** On SLURM's warning signal before the time limit (``--signal``, sent ``signal_delay_s``
  seconds ahead) or on preemption, submitit calls `SlurmLauncher.checkpoint`, which records the job's
  ``last.ckpt`` (``paths.checkpoint_dir``; written at the end of every epoch) and requeues the job; the requeued
  job runs in the same directory with ``ckpt_path`` set to it, so training continues from the last finished epoch
  into one run (the job's ``overrides.yaml`` is unchanged). A job with no ``last.ckpt`` yet starts again. A job
  that SLURM requeues by itself (``scontrol requeue``, preemption with ``PreemptMode=REQUEUE``: SIGTERM first, on
  which training stops at the end of its epoch) resumes from its ``last.ckpt`` too (``SLURM_RESTART_COUNT`` > 0).
"""

from __future__ import annotations

import copy
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides, run_job, setup_globals
from hydra_plugins.hydra_submitit_launcher import submitit_launcher
from omegaconf import DictConfig, OmegaConf, open_dict

from flexlearn.errors import DataError, Interrupted
from flexlearn.sweeps.aggregate import print_sweep_summary
from flexlearn.sweeps.rerun import last_checkpoint as job_last_checkpoint

__all__ = ["QueueStates", "SlurmJobFailed", "SlurmLauncher", "failure_line"]

log = logging.getLogger(__name__)

# States of a job that may still run (submitit's list, plus SLURM's transitional states).
ACTIVE = {
    "PENDING",
    "RUNNING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "CONFIGURING",
    "COMPLETING",
    "SUSPENDED",
    "RESIZING",
    "PREEMPTED",
    "SIGNALING",
    "STAGE_OUT",
    "READY",
}
GONE = "GONE"  # the state of a job the scheduler no longer lists (finished longer than MinJobAge ago)
RESULT_GRACE_S = 15.0  # how long a finished job's result file may take to appear (shared file systems)


class SlurmJobFailed(DataError):
    """A SLURM job of a sweep ended without a result (the message names its state and log file)."""


class QueueStates:
    """States of SLURM jobs by id (``123`` or array task ``123_4``): ``sacct`` while it answers, else ``squeue``
    (a cluster without accounting: ``Slurm accounting storage is disabled``), switched once and silently."""

    def __init__(self) -> None:
        self.use_sacct = True

    def states(self, job_ids: Sequence[str]) -> dict[str, str]:
        """The state of every job in ``job_ids`` (``GONE`` for one the scheduler no longer lists).

        Args:
            job_ids: the job ids (``123`` or ``123_4``).

        Returns:
            {job id: upper-case SLURM state}.
        """
        if not job_ids:
            return {}
        mains = sorted({j.split("_")[0] for j in job_ids})
        out = None
        if self.use_sacct:
            out = _run(["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(mains)])
            if out is None:
                self.use_sacct = False
                log.debug("no SLURM accounting here: job states from squeue")
        if out is None:
            out = _run(["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T", "-j", ",".join(mains)]) or ""
        found: dict[str, str] = {}
        for line in out.splitlines():
            jid, _, state = line.partition("|")
            if jid and "." not in jid:
                found[jid.strip()] = (state.split() or ["UNKNOWN"])[0].upper()
        return {j: found.get(j, GONE) for j in job_ids}


def _run(command: list[str]) -> Optional[str]:
    """Stdout of ``command``; None when it fails (``squeue -j`` of jobs all gone fails too: then empty)."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return "" if "Invalid job id" in proc.stderr else None
    return proc.stdout


def failure_line(job: Any, num: int, overrides: Sequence[str], state: str) -> str:
    """One line for a job that ended without a result: its number, overrides, SLURM id and state, log file and
    the log's last line.

    Args:
        job: the submitit job.
        num: the job's number in the sweep.
        overrides: the job's overrides.
        state: its last SLURM state.

    Returns:
        The line.
    """
    err = Path(job.paths.stderr)
    last = ""
    if err.is_file():
        lines = [ln.strip() for ln in err.read_text(errors="replace").splitlines() if ln.strip()]
        own = [ln for ln in lines if not ln.startswith(("srun:", "slurmstepd:"))]  # the job's, not SLURM's
        last = f"; last line: {(own or lines)[-1][:300]}" if lines else ""
    shown = " ".join(filter_overrides(list(overrides))) or "no overrides"
    return f"job #{num} ({shown}) failed: SLURM job {job.job_id} ended {state} without a result; log: {err}{last}"


class SlurmLauncher(submitit_launcher.SlurmLauncher):
    """hydra-submitit-launcher's SLURM launcher, quiet while waiting, naming failed jobs, resuming requeued ones."""

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self.resume_from: dict[int, str] = {}  # job number -> last.ckpt, set when the job is requeued
        self.running_config: Optional[DictConfig] = None

    def __call__(
        self,
        sweep_overrides: list[str],
        job_dir_key: str,
        job_num: int,
        job_id: str,
        singleton_state: dict[type, Singleton],
    ) -> JobReturn:
        """Run one job of the sweep on a compute node (submitit calls it); a requeued job resumes from its
        recorded ``last.ckpt``."""
        import submitit  # on the compute node only: plugin discovery stays fast

        assert self.hydra_context is not None and self.config is not None and self.task_function is not None
        Singleton.set_state(singleton_state)
        setup_globals()
        sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, sweep_overrides)
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = submitit.JobEnvironment().job_id
            sweep_config.hydra.job.num = job_num
        resume = self.resume_from.get(job_num)
        if not resume and int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0:
            # requeued by SLURM itself (preemption, node failure) after the job stopped at an epoch's end
            found = last_checkpoint(sweep_config, before_run=True)
            resume = str(found) if found is not None else None
        if resume and "ckpt_path" in sweep_config and Path(resume).is_file():
            log.warning("requeued job #%d resumes from %s", job_num, resume)
            with open_dict(sweep_config):
                sweep_config.ckpt_path = resume
        self.running_config = sweep_config
        return run_job(
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=sweep_config,
            job_dir_key=job_dir_key,
            job_subdir_key="hydra.sweep.subdir",
        )

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Called by submitit on the warning signal or preemption: the same job again, resuming from the running
        job's ``last.ckpt`` when it has one.

        Args:
            *args: the arguments of the job's `__call__` (the third is the job number).
            **kwargs: its keyword arguments, passed on.

        Returns:
            submitit's ``DelayedSubmission`` of a copy of this launcher with the same arguments.
        """
        import submitit  # on the compute node only: plugin discovery stays fast

        job_num = int(args[2])
        last = last_checkpoint(self.running_config) if self.running_config is not None else None
        again = copy.copy(self)
        again.running_config = None
        again.resume_from = dict(self.resume_from)
        if last is not None:
            again.resume_from[job_num] = str(last)
            log.warning("job #%d is requeued; it resumes from %s", job_num, last)
        else:
            log.warning("job #%d is requeued; no last.ckpt yet, it starts again", job_num)
        return submitit.helpers.DelayedSubmission(again, *args, **kwargs)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Submit the jobs as one SLURM array, wait quietly, return their results (failed ones named).

        Args:
            job_overrides: each job's overrides.
            initial_job_idx: the number of the first job.

        Returns:
            One `JobReturn` per job, in order (``FAILED`` with a `SlurmJobFailed` for a job without a result).
        """
        import submitit  # lazy: plugin discovery stays fast

        assert self.config is not None
        app = f"flexlearn-{self.config.hydra.job.name}"
        missing = [c for c in ("sbatch", "srun", "squeue") if shutil.which(c) is None]
        if missing:
            print(
                f"{app}: error: hydra/launcher=slurm needs SLURM's {', '.join(missing)} on PATH (not found): start "
                "the sweep on the cluster's login node",
                file=sys.stderr,
            )
            sys.exit(2)
        params = dict(self.params)
        executor = submitit.AutoExecutor(
            cluster="slurm", folder=params.pop("submitit_folder"), slurm_max_num_timeout=params.pop("max_num_timeout")
        )
        base = set(OmegaConf.structured(submitit_launcher.BaseQueueConf).keys())
        executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        job_params = [
            (list(overrides), "hydra.sweep.dir", initial_job_idx + i, f"job_id_for_{initial_job_idx + i}")
            for i, overrides in enumerate(job_overrides)
        ]
        for p in job_params:
            log.info("\t#%d : %s", p[2], " ".join(filter_overrides(p[0])))
        state = Singleton.get_state()
        try:
            jobs = executor.map_array(self, *zip(*[(*p, state) for p in job_params]))
        except (OSError, subprocess.SubprocessError, submitit.core.utils.FailedJobError) as exc:
            print(
                f"flexlearn-{self.config.hydra.job.name}: error: {submission_error(exc, self.params)}", file=sys.stderr
            )
            sys.exit(2)
        log.info(
            "slurm: %d jobs submitted as array %s; logs in %s",
            len(jobs),
            jobs[0].job_id.split("_")[0],
            Path(str(jobs[0].paths.folder)).parent,
        )
        try:
            final = wait_quietly(jobs)
        except (Interrupted, KeyboardInterrupt) as exc:
            array = jobs[0].job_id.split("_")[0]
            detail = f"the jobs of SLURM array {array} go on (stop them: scancel {array})"
            later = f"summarise them once they end: flexlearn-aggregate dir={sweep_dir}"
            if isinstance(exc, Interrupted):  # the app prints one line with these and exits 128 + signal
                exc.detail, exc.resume = detail, later
                raise
            print(f"flexlearn-{self.config.hydra.job.name}: interrupted: {detail}; {later}", file=sys.stderr)
            sys.exit(130)
        returns = [_job_return(job, p[0], p[2], final[job.job_id]) for job, p in zip(jobs, job_params)]
        failed = [r for r in returns if r.status == JobStatus.FAILED]
        if failed and "optuna" not in str(self.config.hydra.sweeper.get("_target_", "")).lower():
            stop_grid_sweep(sweep_dir, failed, len(returns), self.config.hydra.job.name)
        return returns


# sbatch's words for a setting -> the launcher key that sets it
SETTING_WORDS = {
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "memory": "mem_gb",
    "time limit": "timeout_min",
    "gres": "gpus_per_node",
    "gpu": "gpus_per_node",
    "cpu": "cpus_per_task",
    "node": "nodes",
}


def submission_error(exc: BaseException, params: dict[str, Any]) -> str:
    """One line for a sweep SLURM did not accept: sbatch missing, or sbatch's own error with the launcher setting
    (``hydra.launcher.<key>`` and its value) it names.

    Args:
        exc: what the submission raised.
        params: the launcher's settings.

    Returns:
        The line, without the ``<app>: error:`` prefix.
    """
    if isinstance(exc, FileNotFoundError):
        return "hydra/launcher=slurm needs SLURM's sbatch on PATH (not found): start the sweep on a login node"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    fatal = [ln for ln in lines if "fatal" in ln] or [ln for ln in lines if "error" in ln.lower()] or lines
    said = fatal[-1] if fatal else repr(exc)
    said = re.sub(r"^sbatch: (fatal|error): ", "", said)
    key = next((k for word, k in SETTING_WORDS.items() if word in said.lower()), None)
    setting = f"config 'hydra.launcher.{key}' = {params.get(key)!r}: " if key else ""
    return f"{setting}sbatch refused the jobs: {said}"


def last_checkpoint(cfg: DictConfig, before_run: bool = False) -> Optional[Path]:
    """``<paths.checkpoint_dir>/last.ckpt`` of a job's config, if written (None otherwise). ``before_run``: the job
    has not started yet, so its output directory (``hydra.sweep.dir/subdir``) is set here as Hydra's job would.

    Args:
        cfg: the job's config (its ``paths.checkpoint_dir``).
        before_run: whether the job has not started yet.

    Returns:
        The path of ``last.ckpt``, or None.
    """
    if before_run:
        try:
            from hydra.core.hydra_config import HydraConfig  # Hydra's job state, set as run_job would set it

            with open_dict(cfg):
                out = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
                cfg.hydra.runtime.output_dir = str(out.absolute())
            HydraConfig.instance().set_config(cfg)
        except Exception:  # an interpolation that cannot resolve here (a config without paths): nothing to resume
            return None
    return job_last_checkpoint(cfg)


def wait_quietly(jobs: Sequence[Any], states: Optional[QueueStates] = None) -> dict[str, str]:
    """Wait until every job has its result file or has ended; one log line whenever the counts change.

    Polls every 1 s at first, then every elapsed/10 s up to 30 s. Returns each job's last SLURM state
    (``DONE`` for a job whose result file exists).

    Args:
        jobs: the submitit jobs of the array.
        states: where the states come from (None: a new `QueueStates`).

    Returns:
        {job id: last state}.
    """
    states = states or QueueStates()
    final: dict[str, str] = {}
    ended_at: dict[str, float] = {}
    start, last_line = time.monotonic(), ""
    main_id = jobs[0].job_id.split("_")[0] if jobs else "?"
    while True:
        now = time.monotonic()
        for job in jobs:
            if job.job_id not in final and Path(job.paths.result_pickle).exists():
                final[job.job_id] = "DONE"
        open_ids = [j.job_id for j in jobs if j.job_id not in final]
        current = states.states(open_ids)
        for jid, st in current.items():
            if st not in ACTIVE:
                ended_at.setdefault(jid, now)
                if now - ended_at[jid] >= RESULT_GRACE_S or st != "COMPLETED":
                    final[jid] = st
            else:
                ended_at.pop(jid, None)
        counts = {"pending": 0, "running": 0}
        for jid in open_ids:
            if jid not in final:
                counts["pending" if current.get(jid) in ("PENDING", "REQUEUED", "REQUEUE_HOLD") else "running"] += 1
        line = f"slurm array {main_id}: {len(jobs)} jobs: {counts['pending']} pending, {counts['running']} running, "
        line += f"{len(final)} finished"
        if line != last_line:
            log.info(line)
            last_line = line
        if len(final) == len(jobs):
            return final
        time.sleep(min(30.0, max(1.0, (now - start) / 10)))


def stop_grid_sweep(sweep_dir: Path, failed: Sequence[JobReturn], n_jobs: int, app: str) -> None:
    """End a grid sweep with failed jobs as a local one ends (exit status 2, one line), after its summary: a grid
    sweeper would raise the first failure with a stack trace; an Optuna study records failed trials and goes on.

    Args:
        sweep_dir: the sweep directory.
        failed: the failed jobs' returns.
        n_jobs: the number of jobs in the sweep.
        app: the command's name without ``flexlearn-`` (the Hydra job name).
    """
    print_sweep_summary(sweep_dir)
    first = failed[0]._return_value
    more = f" ({len(failed) - 1} more above)" if len(failed) > 1 else ""
    print(f"flexlearn-{app}: error: {len(failed)} of {n_jobs} jobs failed: {first}{more}", file=sys.stderr)
    sys.exit(2)


def raised_line(message: str) -> str:
    """The exception line of submitit's ``FailedJobError`` message (the last ``module.SomeError: …`` line of the
    trace it quotes between two rules of dashes, else its last line), at most 300 characters.

    Args:
        message: the error's message.

    Returns:
        The line.
    """
    parts = re.split(r"^-{10,}$", message, flags=re.M)
    trace = parts[1] if len(parts) >= 3 else message
    lines = [ln.strip() for ln in trace.splitlines() if ln.strip()]
    raised = [ln for ln in lines if re.match(r"^([a-z_][a-z0-9_]*\.)*[A-Z]\w*: ", ln)]
    return ((raised or lines)[-1] if lines else "no message")[:300]


def _job_return(job: Any, overrides: list[str], num: int, state: str) -> JobReturn:
    """The job's `JobReturn` from its result file; a `SlurmJobFailed` one (logged) when it has none."""
    if state == "DONE":
        try:
            return job.results()[0]
        except Exception as exc:  # submitit's FailedJobError: an error outside Hydra's job (reported, not raised)
            error = SlurmJobFailed(
                f"job #{num} failed in SLURM job {job.job_id}: {raised_line(str(exc))}; log: {job.paths.stderr}"
            )
    else:
        error = SlurmJobFailed(failure_line(job, num, overrides, state))
    log.error("%s", error)
    return JobReturn(overrides=list(overrides), task_name="slurm", status=JobStatus.FAILED, _return_value=error)
