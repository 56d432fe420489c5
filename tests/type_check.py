"""mypy over flexlearn/ (pyproject.toml's [tool.mypy]) run as a background process with a private cache."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class TypeCheck:
    process: subprocess.Popen
    cache: Path

    def result(self, timeout: float = 900.0) -> tuple[int, str]:
        """(exit status, stdout + stderr) once mypy has finished."""
        out, _ = self.process.communicate(timeout=timeout)
        return self.process.returncode, out

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        shutil.rmtree(self.cache, ignore_errors=True)


def start_type_check(repo: Path) -> TypeCheck:
    cache = Path(tempfile.mkdtemp(prefix="flexlearn-mypy-"))   # a clean run every time, no developer cache shared
    process = subprocess.Popen([sys.executable, "-m", "mypy", "--cache-dir", str(cache)], cwd=repo,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return TypeCheck(process, cache)
