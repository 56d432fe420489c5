"""``status.json`` in every command's run directory: how the run ended, for people and for scripts.

``{"status": "ok" | "interrupted" | "error" | "failed", "command": [...], "started": ..., "ended": ...}`` plus,
when interrupted, the signal, where it stopped (``stopped_in``: the work under way, with its count of items
or its elapsed time, `flexlearn.progress.open_stage`) and the command that resumes or reruns it; on an error (exit
status 2) the one-line message; on a bug (``failed``) the exception. Written atomically (strict JSON) when the
command's task ends, whatever the way; a command killed with SIGKILL leaves ``status: running``, written when it
started, so a run that never ended is told apart from one that ended well. Each record holds the job's
overrides and, when it ended ok, the task's result: a sweep run again in its directory keeps its finished jobs
and continues its interrupted one (`run_with_status`, `flexlearn.sweeps.rerun`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from omegaconf import DictConfig, open_dict

from flexlearn.apps.interrupts import BEFORE_HARD_EXIT, KEPT, STAGE_PROBES, rerun_command
from flexlearn.atomic import signals_deferred, write_json_atomic
from flexlearn.config import in_multirun, job_label
from flexlearn.errors import Interrupted
from flexlearn.progress import open_stage, stage_text
from flexlearn.sweeps import rerun

STATUS_FILE = "status.json"
STAGE_PROBES.append(open_stage)  # an interruption records the open progress bar's work (``stopped_in``)


class CommandError(SystemExit):
    """Exit status 2 after a refused input, carrying the one-line message the command printed."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _run_dir() -> Optional[Path]:
    """The Hydra run (or sweep job) directory of the command, None outside a Hydra run."""
    from hydra.core.hydra_config import HydraConfig  # loaded already by every app that gets here

    if not HydraConfig.initialized():
        return None
    out = HydraConfig.get().runtime.output_dir
    return Path(out) if out else None


def _write(run_dir: Path, record: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a status that cannot be written must not hide the run's own outcome
        write_json_atomic(run_dir / STATUS_FILE, record)


def run_with_status(app: str, task: Callable[[DictConfig], Any], cfg: DictConfig) -> Any:
    """Run a command's task under `recorded_status`; in a sweep run again in its directory, keep or continue the
    job as `flexlearn.sweeps.rerun` says, and make an interruption name the command that reruns the sweep.

    Args:
        app: the command's name.
        task: the command's task function.
        cfg: the composed config of the run (or job).

    Returns:
        The task's result (a kept job's recorded one).
    """
    run_dir, overrides = _run_dir(), rerun.job_overrides()
    sweep_dir = _sweep_dir() if in_multirun() else None
    earlier = rerun.earlier_status(run_dir / STATUS_FILE) if run_dir is not None and sweep_dir is not None else None
    keep, result = rerun.kept_result(earlier, overrides)
    if keep:
        print(
            f"[{job_label()}] kept: it ended ok in an earlier run of this sweep ({run_dir}); not run again", flush=True
        )
        return result
    ckpt = rerun.continued_checkpoint(cfg, earlier, overrides)
    if ckpt is not None:
        print(f"[{job_label()}] continues from {ckpt}, where an earlier run of this sweep stopped", flush=True)
        with open_dict(cfg):
            cfg.ckpt_path = str(ckpt)
    with recorded_status(app, overrides) as record:
        try:
            result = task(cfg)
        except Interrupted as exc:
            if sweep_dir is not None:
                exc.resume = rerun.sweep_rerun_command(app, sweep_dir)
            raise
        kept, value = rerun.recorded_result(result)
        if kept:
            record["result"] = value
        return result


def _sweep_dir() -> Optional[str]:
    """``hydra.sweep.dir`` of this multirun job (None outside one)."""
    from hydra.core.hydra_config import HydraConfig  # loaded already by every app that gets here

    return str(HydraConfig.get().sweep.dir) if HydraConfig.initialized() else None


@contextlib.contextmanager
def recorded_status(app: str, overrides: Optional[list[str]] = None) -> Iterator[dict[str, Any]]:
    """Write ``status.json`` in the run directory when the body starts (``running``) and when it ends.

    An interruption's message gains the status file's path, so the line a user sees names the run directory.

    Args:
        app: the command's name (its line and the rerun command start with it).
        overrides: the job's overrides, recorded so that a rerun of its sweep knows the job
            (`flexlearn.sweeps.rerun`).

    Yields:
        The record written at the end: the body may add to it (the task's ``result``).
    """
    run_dir = _run_dir()
    record: dict[str, Any] = {"status": "running", "command": [app, *sys.argv[1:]], "started": _now()}
    if overrides is not None:
        record["overrides"] = overrides
    if run_dir is None:
        yield record
        return

    def interrupted(exc: Interrupted) -> None:
        kept = exc.detail or KEPT
        record.update(status="interrupted", signal=exc.signal_name, detail=kept, resume=rerun_command(app, exc))
        if exc.stage is not None:
            record["stopped_in"] = exc.stage
            kept = f"{stage_text(exc.stage)}: {kept}"
        exc.detail = f"{kept}; status in {run_dir / STATUS_FILE}"

    def hard_exit(exc: Interrupted) -> None:  # a signal inside an import: the process ends without unwinding
        interrupted(exc)
        record["ended"] = _now()
        _write(run_dir, record)

    BEFORE_HARD_EXIT.append(hard_exit)
    try:
        _write(run_dir, record)
        yield record
    except Interrupted as exc:
        interrupted(exc)
        raise
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        record.update(status="ok" if code == 0 else "error", exit_status=code)
        if isinstance(exc, CommandError):
            record["error"] = exc.message
        raise
    except BaseException as exc:
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    else:
        record["status"] = "ok"
    finally:
        BEFORE_HARD_EXIT.remove(hard_exit)
        record["ended"] = _now()
        try:
            with signals_deferred():  # the status is written whole; a signal meanwhile is raised after it
                _write(run_dir, record)
        except Interrupted as late:  # it came as the run was ending: the status written says how it ended
            late.detail = f"the run had ended ({record['status']}): status in {run_dir / STATUS_FILE}"
            raise
