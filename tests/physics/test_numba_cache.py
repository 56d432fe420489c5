"""numba's on-disk cache of functions that call functions of another file is refreshed when that file changes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from flexlearn.numba_cache import refresh_numba_cache

pytest.importorskip("numba")

KERNEL = """
from numba import njit
@njit(cache=True)
def value():
    return {value}
"""
CALLER = """
from pathlib import Path
from flexlearn.numba_cache import refresh_numba_cache
refresh_numba_cache(Path(__file__).parent, ("kernel", "caller"), "demo")
from numba import njit
from kernel import value
@njit(cache=True)
def twice():
    return 2.0 * value()
"""


def _run(tmp_path, env: dict) -> float:
    code = "import sys; sys.path.insert(0, sys.argv[1]); import caller; print(caller.twice())"
    (tmp_path / "caller.py").write_text(textwrap.dedent(CALLER))
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout.strip())


@pytest.mark.parametrize("cache_dir", [False, True], ids=["in-tree cache", "NUMBA_CACHE_DIR"])
def test_editing_a_called_kernel_reaches_the_cached_caller(tmp_path, cache_dir):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    src = tmp_path / "src"
    src.mkdir()
    if cache_dir:  # numba then caches under this directory, not in src/__pycache__
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")
    (src / "kernel.py").write_text(KERNEL.format(value=1.0))
    # exact: 2·1 and 2·5 are small integers, exact in float64 and in their printed form
    assert _run(src, env) == 2.0
    assert any((tmp_path / "numba-cache").rglob("caller.*.nbi")) == cache_dir
    # numba alone would load the caller's cached machine code (its own file did not change) and print 2.0
    (src / "kernel.py").write_text(KERNEL.format(value=5.0))
    assert _run(src, env) == 10.0


def test_refresh_removes_only_the_group_and_only_on_change(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)  # the files below sit in numba's default __pycache__
    for name in ("a", "b", "other"):
        (tmp_path / f"{name}.py").write_text(f"# {name}\n")
    assert not refresh_numba_cache(tmp_path, ("a", "b"), "g")  # first stamp, nothing cached yet
    cache = tmp_path / "__pycache__"
    files = [cache / "a.f-3.py311.nbi", cache / "b.g-7.py311.nbc", cache / "other.h-1.py311.nbi"]
    for f in files:
        f.write_text("x")
    assert not refresh_numba_cache(tmp_path, ("a", "b"), "g")  # unchanged sources: cache kept
    assert all(f.exists() for f in files)
    (tmp_path / "a.py").write_text("# a edited\n")
    assert refresh_numba_cache(tmp_path, ("a", "b"), "g")
    assert [f.exists() for f in files] == [False, False, True]


def test_a_layered_group_follows_its_dependency_but_not_the_reverse(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    """The pose kernels call the forward kernels: an edit to a forward file drops both groups' cache; an edit to a
    pose file drops only the pose group's (the forward kernels never call it, so their cache stays valid)."""
    for name in ("low", "high"):
        (tmp_path / f"{name}.py").write_text(f"# {name}\n")
    cache = tmp_path / "__pycache__"

    def refresh():
        return (
            refresh_numba_cache(tmp_path, ("low",), "lower"),
            refresh_numba_cache(tmp_path, ("high",), "upper", depends=("low",)),
        )

    refresh()
    low, high = cache / "low.f-1.py311.nbi", cache / "high.g-2.py311.nbc"

    def cached():
        low.write_text("x")
        high.write_text("x")

    cached()
    assert refresh() == (False, False) and low.exists() and high.exists()
    (tmp_path / "high.py").write_text("# high edited\n")
    assert refresh() == (False, True)
    assert low.exists() and not high.exists()
    cached()
    (tmp_path / "low.py").write_text("# low edited\n")
    assert refresh() == (True, True)
    assert not low.exists() and not high.exists()


def test_the_lse_groups_cover_the_pose_kernels_on_top_of_the_forward_ones():
    from pathlib import Path

    from flexlearn.physics.lse.compiled import elements as compiled

    assert not set(compiled.POSE_CACHE_SOURCES) & set(compiled.CACHE_SOURCES)
    # every pose module with compiled kernels, so that editing any of them refreshes the pose cache
    here = Path(compiled.__file__).parent
    pose_dir = here.parent / "length_actuated"
    with_kernels = {f"../length_actuated/{f.stem}" for f in pose_dir.glob("*.py") if "@njit" in f.read_text()}
    assert (
        with_kernels
        == set(compiled.POSE_CACHE_SOURCES)
        >= {
            "../length_actuated/kernels",
            "../length_actuated/geometry",
            "../length_actuated/condense",
            "../length_actuated/work",
        }
    )
    # and every forward kernel module of compiled/ is in the forward group
    forward = {f.stem for f in here.glob("*.py") if "@njit" in f.read_text()}
    assert forward <= set(compiled.CACHE_SOURCES)


def test_the_cosserat_group_covers_every_file_with_compiled_kernels():
    """The fused step calls the contact kernels too: a compiled file missing from the group kept its callers' stale
    machine code after an edit (seen: an edit to compiled/contact.py left the runs bit-identical until the cache
    files were deleted)."""
    from pathlib import Path

    from flexlearn.physics.cosserat import compiled

    here = Path(compiled.__file__).parent
    with_kernels = {f.stem for f in here.glob("*.py") if "@njit" in f.read_text()}
    expected = {"common", "cayley", "contact", "coupled", "implicit", "lgvi"}
    assert with_kernels == set(compiled.KERNEL_SOURCES) >= expected
