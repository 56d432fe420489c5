"""The wheel works on its own: built from the checkout, installed into a fresh virtual environment outside
the repository, its console scripts run from an empty directory (configs found through the package).

The fresh environment borrows the test environment's third-party packages (torch, Lightning, ...) through a
path file, so that only flexlearn itself comes from the wheel and nothing from the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def source_copy(dest: Path) -> Path:
    """The checkout's files (tracked, and untracked ones git does not ignore) copied to ``dest``: the build writes its
    ``build/`` and ``*.egg-info`` there, so that two workers building at once, or a test writing in the checkout
    meanwhile, cannot break each other's build."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    source = source_copy(tmp_path_factory.mktemp("source"))
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """bin/ of a new venv holding the wheel (no deps installed: they come from the test environment)."""
    env_dir = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    wheel = next(dist.glob("flexlearn-*.whl"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # Added after the install, so pip does not see the test environment's own flexlearn; a plain path line
    # comes after the venv's site-packages, and its .pth files (the editable install) are not processed.
    deps = sysconfig.get_paths()["purelib"]
    Path(site, "test_environment.pth").write_text(deps + "\n")
    return env_dir / "bin"


def _run(bin_dir: Path, cwd: Path, *argv: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FLEXLEARN_ROOT", "PYTHONPATH")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1", WANDB_MODE="offline")
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_wheel_and_sdist_hold_the_configs(dist):
    names = zipfile.ZipFile(next(dist.glob("flexlearn-*.whl"))).namelist()
    for cfg in (
        "flexlearn/conf/pipeline.yaml",
        "flexlearn/conf/train.yaml",
        "flexlearn/conf/ingest/rig_ros2.yaml",
        "flexlearn/conf/cpr/default.yaml",
        "flexlearn/conf/hydra/default.yaml",
    ):
        assert cfg in names
    assert next(dist.glob("flexlearn-*.tar.gz")).stat().st_size > 0


def test_installed_package_is_not_the_checkout(installed, tmp_path):
    proc = _run(installed, tmp_path, "python", "-c", "import flexlearn; print(flexlearn.__file__)")
    assert proc.returncode == 0, proc.stderr
    assert not proc.stdout.strip().startswith(str(REPO)), proc.stdout


def test_console_scripts_run_from_an_empty_directory(installed, tmp_path):
    proc = _run(installed, tmp_path, "flexlearn", "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("flexlearn "), proc.stderr
    proc = _run(installed, tmp_path, "flexlearn-train", "--help")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trainer" in proc.stdout


@pytest.mark.slow  # ≈ 25 s: CI runs it in its second step
def test_pipeline_runs_from_an_empty_directory_at_a_small_size(installed, tmp_path):
    proc = _run(
        installed, tmp_path, "flexlearn-pipeline", "data.sim.n_poses=300", "trainer.max_epochs=2", "data.batch_size=64"
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert run_dir.is_relative_to(tmp_path.resolve()) or str(run_dir).startswith(str(tmp_path))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["test/ang_err_median_deg"] > 0
    assert (run_dir / "export" / "direction_model.pt").is_file()
    assert (run_dir / "export" / "direction_model.pt.manifest.json").is_file()
