"""Background jobs of the test session (started by tests/conftest.py): mypy over flexlearn/ (pyproject.toml's
[tool.mypy]) with a private cache, and the compile of the numba kernel groups into numba's on-disk cache."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# mypy's output and exit status go to files in a directory that every test process can read (xdist's workers run
# the test that collects them, the scheduling process starts the check): the status file appears last, atomically.
_WRAP = """
import os, subprocess, sys
jobs, cache = sys.argv[1], sys.argv[2]
with open(os.path.join(jobs, "mypy.out"), "w") as out:
    command = [sys.executable, "-m", "mypy", "--cache-dir", cache]
    code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode
with open(os.path.join(jobs, "mypy.rc.part"), "w") as f:
    f.write(str(code))
os.replace(os.path.join(jobs, "mypy.rc.part"), os.path.join(jobs, "mypy.rc"))
"""


@dataclass
class BackgroundJob:
    process: subprocess.Popen
    cache: Optional[Path]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        if self.cache is not None:
            shutil.rmtree(self.cache, ignore_errors=True)


@dataclass
class TypeCheckResult:
    """The outcome of the type check that :func:`start_type_check` started with this ``jobs`` directory (possibly
    in another process); starts one here if none was."""

    jobs: Path
    repo: Path

    def result(self, timeout: float = 900.0) -> tuple[int, str]:
        """(exit status, stdout + stderr) once mypy has finished."""
        if not (self.jobs / "mypy.started").exists():
            start_type_check(self.repo, self.jobs)
        rc, t0 = self.jobs / "mypy.rc", time.monotonic()
        while not rc.exists():
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"no type-check result in {self.jobs} after {timeout:.0f} s")
            time.sleep(0.5)
        return int(rc.read_text()), (self.jobs / "mypy.out").read_text()


def start_type_check(repo: Path, jobs: Path) -> BackgroundJob:
    """Mypy over flexlearn/ in the background; :class:`TypeCheckResult` (``jobs``) reads its outcome."""
    cache = Path(tempfile.mkdtemp(prefix="flexlearn-mypy-"))  # a clean run every time, no developer cache shared
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / "mypy.started").touch()
    process = subprocess.Popen(
        [sys.executable, "-c", _WRAP, str(jobs), str(cache)],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    return BackgroundJob(process, cache)


def start_kernel_warmup(repo: Path, groups: str) -> BackgroundJob:
    """`flexlearn-warmup --only <groups>` in the background, groups in the order given (output discarded; a test
    that needs a kernel before it is cached compiles it itself, as without this job)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "flexlearn.apps.warmup", "--only", groups],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return BackgroundJob(process, None)
