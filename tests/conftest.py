"""Shared fixtures: composed Hydra configs on tiny simulated sweeps, with one cache per test session."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = REPO / "flexlearn" / "conf"

# One intra-op thread: the tests' tensors are small, and the background jobs below keep the other core busy, where
# OpenMP threads waiting at barriers for a busy core cost more than they save (the CLI tests set OMP_NUM_THREADS=1
# for the same reason). Tests of threading set their own counts.
torch.set_num_threads(1)


def compose_config(
    root: Path, cache_dir: Path, config_name: str = "train", overrides: list[str] | None = None, out: str = "out"
):
    """Compose conf/<config_name> with ``overrides``; every path points inside ``root``; HydraConfig set."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = compose(config_name=config_name, return_hydra_config=True, overrides=overrides or [])
    out_dir = root / out
    with open_dict(cfg):
        cfg.paths.root_dir = str(root)
        cfg.paths.output_dir = str(out_dir)
        cfg.paths.cache_dir = str(cache_dir)
        if "checkpoint_dir" in cfg.paths:
            cfg.paths.checkpoint_dir = str(out_dir / "checkpoints")
        cfg.hydra.runtime.output_dir = str(out_dir)
        cfg.hydra.job.num = 0
    HydraConfig().set_config(cfg)
    GlobalHydra.instance().clear()
    return cfg


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def compose_cfg(tmp_path, cache_dir):
    """compose_cfg(config_name, overrides, out) -> DictConfig rooted in this test's tmp_path."""

    def _compose(config_name: str = "train", overrides: list[str] | None = None, out: str = "out"):
        return compose_config(tmp_path, cache_dir, config_name, overrides, out)

    return _compose


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, cache_dir) -> dict:
    """One short training run on a small sweep, shared by the evaluation and export tests."""
    from flexlearn.jobs.train import train

    root = tmp_path_factory.mktemp("trained")
    cfg = compose_config(
        root, cache_dir, "train", ["data.sim.n_poses=600", "trainer.max_epochs=3", "data.batch_size=64"]
    )
    metrics = train(cfg)
    return {"cfg": cfg, "metrics": metrics, "root": root}


@pytest.fixture
def one_torch_thread():
    """One intra-op torch thread for the test (restored after): for tests of tiny tensors, where OpenMP
    barriers between threads on a loaded machine cost more than the work (10–50× slower solves)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# The suite runs on two pytest-xdist workers (pyproject.toml's addopts), beside two background jobs started once, by
# the process that schedules the tests (or by the only process, with `-n 0` or without xdist): the library type check
# (tests/test_types.py, ≈ 45 s of one core reading torch's stubs; its output goes to a file that the test reads,
# in whichever worker it runs) and the compile of every numba kernel group into numba's on-disk cache
# (`flexlearn-warmup --only attitude,cosserat,lse,pose`: ≈ 15 + 45 + 30 + 140 s on an empty cache). The tests of
# those kernels run last, in the order the warm-up compiles them, so that they load the cached kernels instead of
# compiling them in a worker (a test that gets there first compiles what it needs itself, as without this job).
JOBS_DIR_ENV = "FLEXLEARN_TEST_JOBS_DIR"
WARMUP_GROUPS = "attitude,cosserat,lse,pose"
KERNEL_TESTS = (
    ("tests/sensing/test_attitude", "tests/runtime/test_raw_imu.py"),
    ("tests/physics/cosserat/", "tests/identify/test_cosserat.py", "tests/safety/test_app_limits.py"),
    (
        "tests/physics/lse/",
        "tests/identify/test_lse.py",
        "tests/identify/test_problem_protocol.py",
        "tests/docs/test_extending.py",
        "tests/viz/test_cpr_figure.py",
    ),
    ("tests/physics/lse/test_lse_pose",),
)


def _repo_path(item: pytest.Item) -> str:
    """The test's file relative to the repository, with forward slashes (as in KERNEL_TESTS and xdist's node ids)."""
    return Path(str(item.path)).relative_to(REPO).as_posix()


def _kernel_rank(item: pytest.Item) -> int:
    """0 for a test of no numba kernel, else 1 + the index of the last KERNEL_TESTS tier its file belongs to."""
    path = _repo_path(item)
    tiers = [i + 1 for i, prefixes in enumerate(KERNEL_TESTS) if path.startswith(prefixes)]
    return max(tiers, default=0)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_kernel_rank)  # stable: collection order within a tier


def _schedules(config: pytest.Config) -> bool:
    """True in the process that schedules the tests: xdist's controller, or the only process without workers."""
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if _schedules(config) and JOBS_DIR_ENV not in os.environ:  # the workers inherit the environment
        os.environ[JOBS_DIR_ENV] = config.stash[JOBS_DIR] = tempfile.mkdtemp(prefix="flexlearn-test-jobs-")


def _start_jobs(config: pytest.Config, paths: set[str]) -> None:
    from tests.background_jobs import start_kernel_warmup, start_type_check

    jobs = Path(os.environ[JOBS_DIR_ENV])
    if any(p.endswith("test_types.py") for p in paths):
        config.stash[TYPE_CHECK] = start_type_check(REPO, jobs)
    if any(p.startswith(tuple(prefix for tier in KERNEL_TESTS for prefix in tier)) for p in paths):
        config.stash[KERNEL_WARMUP] = start_kernel_warmup(REPO, WARMUP_GROUPS)


def pytest_collection_finish(session: pytest.Session) -> None:
    if _schedules(session.config) and not _xdist_workers(session.config):
        _start_jobs(session.config, {_repo_path(item) for item in session.items})


def _xdist_workers(config: pytest.Config) -> int:
    return int(getattr(config.option, "numprocesses", 0) or 0) if config.pluginmanager.hasplugin("xdist") else 0


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """In xdist's controller, once the first worker has collected: start the background jobs for its tests."""
    config = node.config
    if TYPE_CHECK not in config.stash and KERNEL_WARMUP not in config.stash:
        _start_jobs(config, {nodeid.split("::")[0] for nodeid in ids})


def pytest_sessionfinish(session: pytest.Session) -> None:
    for key in (TYPE_CHECK, KERNEL_WARMUP):
        job = session.config.stash.get(key, None)
        if job is not None:
            job.stop()
    jobs = session.config.stash.get(JOBS_DIR, None)
    if jobs is not None:
        shutil.rmtree(jobs, ignore_errors=True)


JOBS_DIR = pytest.StashKey[str]()
KERNEL_WARMUP = pytest.StashKey["object"]()
TYPE_CHECK = pytest.StashKey["object"]()


@pytest.fixture(scope="session")
def type_check(pytestconfig: pytest.Config):
    """The background type check started at collection (`tests/background_jobs.py`), or a fresh one."""
    from tests.background_jobs import TypeCheckResult

    return TypeCheckResult(Path(os.environ.get(JOBS_DIR_ENV) or tempfile.mkdtemp(prefix="flexlearn-test-jobs-")), REPO)
