"""flexlearn-warmup and the first-compile notice: which numba kernel modules are cold, compiling ahead, and the
one-line notice (with its estimate) an app prints before a cold compile."""

from __future__ import annotations

import json
import types

import pytest

pytest.importorskip("numba")


def _module_with_kernel(tmp_path, name: str):
    """A fresh module file with one cached njit function (cache files in tmp_path/__pycache__)."""
    import importlib.util

    src = tmp_path / f"{name}.py"
    src.write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n")
    spec = importlib.util.spec_from_file_location(name, src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cold_modules_sees_a_kernel_compile_and_get_cached(tmp_path):
    from flexlearn.numba_cache import cold_modules

    mod = _module_with_kernel(tmp_path, "kernel_probe_a")
    assert cold_modules([mod]) == ["kernel_probe_a"]
    assert mod.twice(3) == 6  # compiles and writes the cache
    assert cold_modules([mod]) == []
    assert cold_modules([types.ModuleType("no_kernels")]) == []  # a module without kernels is never cold


def test_warmup_lists_and_compiles_groups(capsys, monkeypatch, tmp_path):
    from flexlearn.apps import kernels as _kernels
    from flexlearn.apps import warmup

    monkeypatch.setattr(_kernels.KernelGroup, "_record", lambda self: tmp_path / f"{self.name}.json")
    calls = []
    group = _kernels.KernelGroup(
        "probe", "flexlearn.sensing", "flexlearn.sensing.attitude.offline", "a test", 1.0, lambda: calls.append("warm")
    )
    monkeypatch.setattr(_kernels, "GROUPS", {"probe": group})
    monkeypatch.setattr(warmup, "GROUP_NAMES", ("probe",))
    assert warmup.main(["--list"]) == 0 and calls == []
    assert warmup.main(["--only", "probe"]) == 0 and calls == ["warm"]
    out = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(out[-1])
    assert summary["probe"]["seconds"] >= 0 and "probe" in out[-2]
    assert warmup.main(["--only", "nope"]) == 2
    assert "unknown group 'nope'" in capsys.readouterr().err


def test_warmup_groups_name_every_kernel_module_the_package_loads():
    """Each group finds its kernel modules from the sources (a kernel file added later is covered)."""
    from flexlearn.apps.kernels import GROUPS
    from flexlearn.apps.warmup import GROUP_NAMES

    assert set(GROUPS) == set(GROUP_NAMES) == {"lse", "pose", "cosserat", "attitude"}
    names = {g: [m.__name__ for m in GROUPS[g].modules()] for g in GROUPS}
    assert names["pose"] and all(n.startswith("flexlearn.physics.lse.length_actuated.") for n in names["pose"])
    # in a fresh process (here other tests may have imported them): the batch kernels are in the pose group
    import subprocess
    import sys

    code = "from flexlearn.apps.kernels import GROUPS; print(' '.join(m.__name__ for m in GROUPS['pose'].modules()))"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert {"flexlearn.physics.lse.length_actuated.batch", "flexlearn.physics.lse.length_actuated.fit"} <= set(fresh)
    assert "flexlearn.sensing.attitude.kernels" in names["attitude"]
    assert any(n.startswith("flexlearn.physics.lse.compiled.elements") for n in names["lse"])
    assert "flexlearn.physics.cosserat.compiled.lgvi" in names["cosserat"]


def test_notice_before_a_cold_compile(capsys, monkeypatch, tmp_path):
    from flexlearn.apps import kernels as _kernels

    monkeypatch.setattr(_kernels.KernelGroup, "_record", lambda self: tmp_path / f"{self.name}.json")
    calls = []
    cold = [["m"]]
    group = _kernels.KernelGroup(
        "probe", "flexlearn.sensing", "flexlearn.sensing.attitude.offline", "a test", 42.0, lambda: calls.append("warm")
    )
    monkeypatch.setattr(group.__class__, "cold", lambda self: cold[0])
    monkeypatch.setitem(_kernels.GROUPS, "probe", group)
    _kernels.compile_ahead("flexlearn-test", "probe")
    err = capsys.readouterr().err
    assert "first time" in err and "about 42 s" in err and "flexlearn-warmup" in err and calls == ["warm"]
    cold[0] = []
    _kernels.compile_ahead("flexlearn-test", "probe")  # cached: silent, nothing compiled
    assert capsys.readouterr().err == "" and calls == ["warm"]


def test_a_kernel_module_the_runs_never_call_does_not_stay_cold(tmp_path, monkeypatch):
    """After a warm-up only the modules it compiled count: an unused kernel file gives no false notice."""
    from flexlearn.apps import kernels as _kernels

    used = _module_with_kernel(tmp_path, "kernel_probe_used")
    unused = _module_with_kernel(tmp_path, "kernel_probe_idle")
    group = _kernels.KernelGroup(
        "probe2", "flexlearn.sensing", "flexlearn.sensing.attitude.offline", "a test", 1.0, lambda: used.twice(2)
    )
    monkeypatch.setattr(_kernels.KernelGroup, "modules", lambda self: [used, unused])
    monkeypatch.setattr(_kernels.KernelGroup, "_record", lambda self: tmp_path / "probe2.json")
    assert group.cold() == ["kernel_probe_used", "kernel_probe_idle"]  # nothing recorded yet: all count
    group.warm()
    group.remember_warm()
    assert group.cold() == []
