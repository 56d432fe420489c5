"""A sweep run again in its own directory keeps what it finished (``hydra.sweep.dir=<the sweep's directory>``).

An interrupted multirun prints the command that reruns it: the same arguments with ``hydra.sweep.dir`` set to its
directory (`sweep_rerun_command`). Each job then finds its directory as the earlier run left it, read from the
job's ``status.json`` (`flexlearn.apps.run_status`):

* ``ok`` for the same overrides: the job is not run again; its recorded result (the value the sweeper gets) is
  returned and one line says so (`kept_result`);
* ``interrupted``, or ``running`` (killed), for the same overrides, and the job's ``last.ckpt`` exists (a training
  job stopped after an epoch): it continues from there, ``ckpt_path`` set, in the same run directory
  (`continued_checkpoint`);
* anything else (other overrides, an error, no status): the job runs as new.

A job's overrides are Hydra's ``overrides.task`` (the sweep's parameters with the command's own overrides); a grid
sweep numbers its jobs the same way each time, so a job meets its own directory.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

__all__ = [
    "continued_checkpoint",
    "earlier_status",
    "job_overrides",
    "kept_result",
    "last_checkpoint",
    "recorded_result",
    "sweep_rerun_command",
]


def job_overrides() -> list[str]:
    """The overrides of this Hydra job (``hydra.overrides.task``); [] outside a Hydra run."""
    from hydra.core.hydra_config import HydraConfig  # loaded already by every app that gets here

    if not HydraConfig.initialized():
        return []
    return [str(o) for o in HydraConfig.get().overrides.task]


def earlier_status(status_file: Path) -> Optional[dict[str, Any]]:
    """The status an earlier run wrote (``status.json``), or None when there is none or it cannot be read.

    Args:
        status_file: the job's ``status.json``.

    Returns:
        Its record, or None.
    """
    try:
        record = json.loads(status_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


INF = "inf"
"""How ``status.json`` keeps a result of +inf (a diverged job's value; strict JSON has no infinity)."""


def recorded_result(result: Any) -> tuple[bool, Any]:
    """(whether a job's result can be kept in ``status.json`` and given back to a sweeper, the value kept): None
    or a finite number as it is, +inf as `INF`; anything else (NaN, −inf, a bool, an object) is not kept.

    Args:
        result: what the task function returned.

    Returns:
        (kept, the JSON value).
    """
    if result is None:
        return True, None
    if not isinstance(result, (int, float)) or isinstance(result, bool):
        return False, None
    if result == math.inf:
        return True, INF
    return (True, result) if math.isfinite(result) else (False, None)


def _same_job(record: Optional[dict[str, Any]], overrides: list[str]) -> bool:
    return record is not None and record.get("overrides") == overrides


def kept_result(record: Optional[dict[str, Any]], overrides: list[str]) -> tuple[bool, Any]:
    """(True, the result) when the earlier run of this job ended ``ok`` with the same overrides and a recorded
    result; (False, None) otherwise.

    Args:
        record: the job's earlier status (`earlier_status`).
        overrides: this job's overrides.

    Returns:
        Whether to keep the job, and its result (a number or None; `INF` read back as +inf).
    """
    if not _same_job(record, overrides) or record is None or record.get("status") != "ok" or "result" not in record:
        return False, None
    result = record["result"]
    if result == INF:
        return True, math.inf
    return (True, result) if recorded_result(result)[0] else (False, None)


def last_checkpoint(cfg: DictConfig) -> Optional[Path]:
    """``<paths.checkpoint_dir>/last.ckpt`` of a job's config, if written (None otherwise).

    Args:
        cfg: the job's config (its ``paths.checkpoint_dir``; Hydra's job state set).

    Returns:
        The path of ``last.ckpt``, or None.
    """
    try:
        folder = OmegaConf.select(cfg, "paths.checkpoint_dir")
    except Exception:  # an interpolation that cannot resolve here (a config without paths): nothing to resume
        return None
    last = Path(str(folder)) / "last.ckpt" if folder else None
    return last if last is not None and last.is_file() else None


def continued_checkpoint(cfg: DictConfig, record: Optional[dict[str, Any]], overrides: list[str]) -> Optional[Path]:
    """The ``last.ckpt`` this job continues from: the earlier run of it with the same overrides stopped
    (``interrupted``) or was killed (``running``) after writing one, and nothing else names a checkpoint.

    Args:
        cfg: the job's config (a training config has ``ckpt_path``).
        record: the job's earlier status.
        overrides: this job's overrides.

    Returns:
        The checkpoint, or None (the job runs as new).
    """
    if not _same_job(record, overrides) or record is None or record.get("status") not in ("interrupted", "running"):
        return None
    if "ckpt_path" not in cfg or cfg.get("ckpt_path"):
        return None
    return last_checkpoint(cfg)


def sweep_rerun_command(app: str, sweep_dir: str | Path) -> str:
    """The line that reruns an interrupted sweep in its directory: the command's own arguments, with
    ``hydra.sweep.dir`` set to ``sweep_dir``.

    Args:
        app: the command's name.
        sweep_dir: the sweep's directory.

    Returns:
        ``rerun the sweep (its finished jobs are kept, an interrupted one continues): <app> ... hydra.sweep.dir=<>``.
    """
    args = [a for a in sys.argv[1:] if a.split("=", 1)[0].lstrip("+~") != "hydra.sweep.dir"]
    words = [app, *args, f"hydra.sweep.dir={sweep_dir}"]
    return "rerun the sweep (its finished jobs are kept, an interrupted one continues): " + " ".join(
        shlex.quote(w) for w in words
    )
