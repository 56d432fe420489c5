"""Background jobs of the test session: mypy over flexlearn/ (pyproject.toml's [tool.mypy]) with a private cache,
and the compile of the LSE and pose kernels into numba's on-disk cache."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass
class BackgroundJob:
    process: subprocess.Popen
    cache: Optional[Path]

    def result(self, timeout: float = 900.0) -> tuple[int, str]:
        """(exit status, stdout + stderr) once mypy has finished."""
        out, _ = self.process.communicate(timeout=timeout)
        return self.process.returncode, out

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        if self.cache is not None:
            shutil.rmtree(self.cache, ignore_errors=True)


def start_type_check(repo: Path) -> BackgroundJob:
    cache = Path(tempfile.mkdtemp(prefix="flexlearn-mypy-"))   # a clean run every time, no developer cache shared
    process = subprocess.Popen([sys.executable, "-m", "mypy", "--cache-dir", str(cache)], cwd=repo,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return BackgroundJob(process, cache)


def start_kernel_warmup(repo: Path, groups: str) -> BackgroundJob:
    """`flexlearn-warmup --only <groups>` in the background, groups in the order given (output discarded; a test
    that needs a kernel before it is cached compiles it itself, as without this job)."""
    process = subprocess.Popen([sys.executable, "-m", "flexlearn.apps.warmup", "--only", groups], cwd=repo,
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True)
    return BackgroundJob(process, None)
