"""Shared fixtures: composed Hydra configs on tiny simulated sweeps, with one cache per test session."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = REPO / "flexlearn" / "conf"

# One intra-op thread: the tests' tensors are small, and the background jobs below keep the other core busy, where
# OpenMP threads waiting at barriers for a busy core cost more than they save (the CLI tests set OMP_NUM_THREADS=1
# for the same reason). Tests of threading set their own counts.
torch.set_num_threads(1)


def compose_config(root: Path, cache_dir: Path, config_name: str = "train", overrides: list[str] | None = None,
                   out: str = "out"):
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
    cfg = compose_config(root, cache_dir, "train",
                         ["data.sim.n_poses=600", "trainer.max_epochs=3", "data.batch_size=64"])
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


# Two background jobs on the core the mostly single-threaded tests leave free, started as soon as the tests that
# need them are selected: the library type check (tests/test_types.py, ≈ 45 s of one core reading torch's
# stubs; the test collects its output) and the compile of the LSE kernels (≈ 50 s on an empty cache) and then of the
# inverse-statics pose kernels (≈ 140 s; `flexlearn-warmup --only lse,pose`). numba caches them on disk, so the
# LSE and pose tests load them instead. The two early tests that would otherwise be the first to compile the LSE
# kernels (the docs' CPR example and the identification Jacobian test) run last, once the cache holds them.
RUN_LAST = ("tests/docs/test_extending.py", "tests/identify/test_lse.py")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    last = [item for item in items if str(item.path).endswith(RUN_LAST)]
    if last:
        items[:] = [item for item in items if item not in last] + last


def pytest_collection_finish(session: pytest.Session) -> None:
    from tests.background_jobs import start_kernel_warmup, start_type_check
    paths = {str(item.path) for item in session.items}
    if any(p.endswith("test_types.py") for p in paths):
        session.config.stash[TYPE_CHECK] = start_type_check(REPO)
    if any("/physics/lse/" in p or p.endswith(RUN_LAST) for p in paths):
        session.config.stash[KERNEL_WARMUP] = start_kernel_warmup(REPO, "lse,pose")


def pytest_sessionfinish(session: pytest.Session) -> None:
    for key in (TYPE_CHECK, KERNEL_WARMUP):
        job = session.config.stash.get(key, None)
        if job is not None:
            job.stop()


KERNEL_WARMUP = pytest.StashKey["object"]()
TYPE_CHECK = pytest.StashKey["object"]()


@pytest.fixture(scope="session")
def type_check(pytestconfig: pytest.Config):
    """The background type check started at collection (`tests/background_jobs.py`), or a fresh one."""
    from tests.background_jobs import start_type_check
    check = pytestconfig.stash.get(TYPE_CHECK, None)
    return check if check is not None else start_type_check(REPO)
