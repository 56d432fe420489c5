"""Model files are code: exports carry a manifest, loaders verify it, `.pt2` archives that would unpickle (or
otherwise run) their content are refused, exports are byte-reproducible and written all-or-nothing, and
bundle / arm-controller settings are range-checked before anything is written."""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import zipfile
from pathlib import Path

import pytest
import torch

from flexlearn.errors import ConfigError, FlexlearnError
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.pikit.manifest import UntrustedArtifactError, manifest_path, manifest_record


class _Exploit:
    """Unpickling this runs a shell command that writes ``pwned.txt`` into the working directory."""

    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


@pytest.fixture(scope="module")
def small_model():
    torch.manual_seed(0)
    return DirectionMLP(hidden=(8, 8)).eval()


EXAMPLE = torch.randn(4, 3, generator=torch.Generator().manual_seed(0)) * 1e-4


def _export(kind: str, model: torch.nn.Module, path: Path) -> Path:
    """Export ``model`` as ``kind`` (torchscript, program, bundle, arm_controller) to ``path``."""
    from flexlearn.runtime import deploy, export

    if kind == "torchscript":
        return export.export_torchscript(model, path, {"note": "t"})
    if kind == "program":
        return export.export_program(model, EXAMPLE, path, {"note": "t"})
    if kind == "bundle":
        return deploy.export_bundle(deploy.build_bundle(model, 3), path, {"note": "t"})
    from flexlearn.runtime.arm.config import ArmControllerConfig
    from flexlearn.runtime.arm.controller import ArmController
    from flexlearn.runtime.arm.export import export_arm_controller

    cfg = ArmControllerConfig(variant="rigid")
    return export_arm_controller(ArmController.build(cfg), path, cfg)


def _loader(kind: str):
    from flexlearn.runtime import deploy, export
    from flexlearn.runtime.arm.export import load_arm_controller

    return {
        "torchscript": export.load_torchscript,
        "program": export.load_program,
        "bundle": deploy.load_bundle,
        "arm_controller": load_arm_controller,
    }[kind]


def _suffix(kind: str) -> str:
    return ".pt2" if kind == "program" else ".pt"


KINDS = ["torchscript", "program", "bundle", "arm_controller"]


# ---------------------------------------------------------------------------------------- manifests (defect 2)
@pytest.mark.parametrize("kind", KINDS)
def test_export_writes_a_manifest_and_loader_verifies_it(kind, small_model, tmp_path):
    path = _export(kind, small_model, tmp_path / f"m{_suffix(kind)}")
    side = manifest_path(path)
    assert side.is_file(), "every export writes <file>.manifest.json"
    record = json.loads(side.read_text())
    assert record["file"] == path.name and record["kind"] == kind
    assert record["torch_version"] == torch.__version__ and record["flexlearn_version"]
    assert record["bytes"] == path.stat().st_size
    module, meta = _loader(kind)(path)
    assert module is not None and isinstance(meta, dict)
    # tampered: one byte changed inside the archive
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(UntrustedArtifactError, match="does not match"):
        _loader(kind)(path)


@pytest.mark.parametrize("kind", KINDS)
def test_missing_manifest_is_refused_and_opt_out_loads(kind, small_model, tmp_path):
    path = _export(kind, small_model, tmp_path / f"m{_suffix(kind)}")
    manifest_path(path).unlink()
    with pytest.raises(UntrustedArtifactError, match="no manifest"):
        _loader(kind)(path)
    module, meta = _loader(kind)(path, trust_unverified=True)
    assert module is not None and meta


def test_foreign_torchscript_is_not_loaded(tmp_path, monkeypatch):
    """A TorchScript file flexlearn did not export (no manifest) is refused before torch.jit.load runs."""
    from flexlearn.runtime.export import load_torchscript

    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(torch.jit, "load", lambda *a, **k: calls.append(a))
    foreign = tmp_path / "foreign.pt"
    foreign.write_bytes(b"PK\x03\x04 not really a model")
    with pytest.raises(UntrustedArtifactError, match="foreign.pt"):
        load_torchscript(foreign)
    assert calls == []


# ------------------------------------------------------------------------------------- crafted .pt2 (defect 1)
def _rewrite(data: bytes, edit) -> bytes:
    """Copy a zip archive, passing each (name, bytes) through ``edit`` (which may return extra entries)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            for name, payload in edit(info.filename, src.read(info.filename)):
                dst.writestr(name, payload)
    return out.getvalue()


def _pickle_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _craft(kind: str, data: bytes) -> bytes:
    if kind == "pickled_weight":
        cfg_name = next(
            n for n in zipfile.ZipFile(io.BytesIO(data)).namelist() if n.endswith("model_weights_config.json")
        )
        cfg = json.loads(zipfile.ZipFile(io.BytesIO(data)).read(cfg_name))
        first = sorted(cfg["config"])[0]
        cfg["config"][first]["use_pickle"] = True
        weight = cfg_name.rsplit("/", 1)[0] + "/" + cfg["config"][first]["path_name"]
        return _rewrite(
            data,
            lambda n, p: [
                (n, json.dumps(cfg).encode() if n == cfg_name else _pickle_bytes(_Exploit()) if n == weight else p)
            ],
        )
    if kind == "pickled_sample_inputs":
        return _rewrite(data, lambda n, p: [(n, _pickle_bytes((_Exploit(),)) if "sample_inputs" in n else p)])
    if kind == "sympy_expression":
        evil = "__import__('os').system('echo pwned > pwned.txt')"
        return _rewrite(
            data,
            lambda n, p: [
                (
                    n,
                    p.replace(b"Symbol('s", evil.encode() + b" + Symbol('s", 1)
                    if n.endswith("models/model.json")
                    else p,
                )
            ],
        )
    if kind == "opaque_constant":  # torch.export.load pickle.loads() constants named opaque_obj_*
        zf = zipfile.ZipFile(io.BytesIO(data))
        weights = json.loads(zf.read(next(n for n in zf.namelist() if n.endswith("model_weights_config.json"))))
        meta = dict(
            next(iter(weights["config"].values()))["tensor_meta"], dtype=1, sizes=[{"as_int": 1}], requires_grad=False
        )

        def edit(n, p):
            if n.endswith("model_constants_config.json"):
                cfg = {
                    "config": {
                        "c": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": False, "tensor_meta": meta}
                    }
                }
                root = n.rsplit("/", 1)[0]
                return [(n, json.dumps(cfg).encode()), (root + "/opaque_obj_0", pickle.dumps(_Exploit()))]
            return [(n, p)]

        return _rewrite(data, edit)
    if kind == "foreign_target":
        return _rewrite(
            data,
            lambda n, p: [
                (
                    n,
                    p.replace(b'"torch.ops.aten.linear.default"', b'"torch.serialization.os.system"', 1)
                    if n.endswith("models/model.json")
                    else p,
                )
            ],
        )
    assert kind == "shared_library"
    return _rewrite(
        data,
        lambda n, p: (
            [(n, p)]
            + (
                [(n.split("/")[0] + "/data/aotinductor/model/evil.so", b"\x7fELF")]
                if n.endswith("archive_format")
                else []
            )
        ),
    )


@pytest.mark.parametrize(
    "kind",
    [
        "pickled_weight",
        "pickled_sample_inputs",
        "sympy_expression",
        "opaque_constant",
        "foreign_target",
        "shared_library",
    ],
)
def test_crafted_pt2_is_refused_without_running_it(kind, small_model, tmp_path, monkeypatch):
    """A .pt2 that torch.export.load would unpickle (or eval, or dlopen) is refused, even with a valid manifest
    and even with trust_unverified=True; nothing of it runs."""
    from flexlearn.runtime.export import load_program

    monkeypatch.chdir(tmp_path)
    good = _export("program", small_model, tmp_path / "good.pt2")
    evil = tmp_path / "evil.pt2"
    evil.write_bytes(_craft(kind, good.read_bytes()))
    manifest_path(evil).write_text(json.dumps(manifest_record(evil, "program")))  # a matching manifest
    reason = {
        "pickled_weight": "use_pickle",
        "pickled_sample_inputs": "weights-only",
        "sympy_expression": "expr_str",
        "opaque_constant": "opaque_obj",
        "foreign_target": "target",
        "shared_library": "aotinductor",
    }[kind]
    with pytest.raises(UntrustedArtifactError, match=rf"evil\.pt2.*{reason}"):
        load_program(evil)
    with pytest.raises(UntrustedArtifactError, match=rf"evil\.pt2.*{reason}"):
        load_program(evil, trust_unverified=True)
    assert not (tmp_path / "pwned.txt").exists()


def test_clean_program_still_loads_and_matches(small_model, tmp_path):
    from flexlearn.runtime.export import load_program

    path = _export("program", small_model, tmp_path / "m.pt2")
    module, meta = load_program(path)
    assert meta["note"] == "t"
    x = torch.randn(7, 3) * 1e-4
    torch.testing.assert_close(module(x), small_model(x))


# ---------------------------------------------------------------------------------- reproducibility (defect 3)
@pytest.mark.parametrize("kind", ["program", "bundle", "arm_controller"])
def test_two_exports_are_byte_identical_and_name_no_temporary(kind, small_model, tmp_path):
    """Frozen TorchScript is compared across processes in tests/training/test_export_eval.py.

    (Freezing numbers its types per process.)
    """
    a = _export(kind, small_model, tmp_path / f"a{_suffix(kind)}").read_bytes()
    b = _export(kind, small_model, tmp_path / f"a{_suffix(kind)}").read_bytes()
    assert a == b
    roots = {n.split("/")[0] for n in zipfile.ZipFile(io.BytesIO(a)).namelist()}
    assert roots == {"archive"}
    assert b".tmp-" not in a


def test_torchscript_names_no_temporary(small_model, tmp_path):
    data = _export("torchscript", small_model, tmp_path / "a.pt").read_bytes()
    assert {n.split("/")[0] for n in zipfile.ZipFile(io.BytesIO(data)).namelist()} == {"archive"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt", "a.pt.manifest.json"]


# ------------------------------------------------------------------------- range checks at export (defect 5)
@pytest.mark.parametrize(
    "block,key,value",
    [
        ("controller", "kp", -1e9),
        ("controller", "v_max", -1.0),
        ("controller", "a_max", 0.0),
        ("controller", "tau_d", 0.0),
        ("controller", "ki", math.nan),
        ("controller", "kd", math.inf),
        ("controller", "settle", -2.0),
        ("controller", "i_band", -0.01),
        ("controller", "reject_above", -1.0),
        ("controller", "target", math.nan),
        ("controller", "kp", "fast"),
        ("estimator", "p0", -1.0),
        ("estimator", "sigma_m", 0.0),
        ("estimator", "twist_damping", 2.0),
        ("estimator", "min_fresh", 0),
        ("estimator", "full_scale", -1.0),
        ("estimator", "gate", -3.0),
        ("estimator", "fix_timeout", 0.0),
        ("estimator", "stale_after", math.nan),
        ("estimator", "settle", -0.1),
        ("controller", "clock_jump", 0.0),
        ("estimator", "clock_confirm", 1),
    ],
)
def test_bundle_settings_are_range_checked(block, key, value, small_model, tmp_path):
    from flexlearn.runtime.deploy import BundleOptions, export_deploy_bundle

    with pytest.raises(ConfigError, match=rf"config 'bundle\.{block}\.{key}' = "):
        export_deploy_bundle(small_model, tmp_path / "b.pt", BundleOptions(n_segments=3, **{block: {key: value}}))
    assert list(tmp_path.iterdir()) == []


def test_kp_and_v_max_out_of_range_do_not_export(small_model, tmp_path):
    from flexlearn.runtime.deploy import BundleOptions, export_deploy_bundle

    with pytest.raises(ConfigError, match=r"bundle\.controller\.(kp|v_max)"):
        export_deploy_bundle(
            small_model, tmp_path / "b.pt", BundleOptions(n_segments=3, controller={"kp": -1e9, "v_max": -1})
        )


@pytest.mark.parametrize(
    "key,value",
    [("theta0", (math.nan, 0.0)), ("thetaf", (0.0, math.inf)), ("gravity", math.nan), ("duration", math.inf)],
)
def test_arm_controller_settings_are_range_checked(key, value, tmp_path):
    from flexlearn.runtime.arm.export import export_arm_controller_from_config

    with pytest.raises(ConfigError, match=rf"config 'arm_controller\.{key}' = "):
        export_arm_controller_from_config(
            {key: list(value) if isinstance(value, tuple) else value}, tmp_path / "arm.pt"
        )
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------- calibration (defect 6)
@pytest.mark.parametrize(
    "content,match",
    [
        (None, "not found"),
        ("{not json", "not valid JSON"),
        ("[1, 2, 3]", "JSON object"),
        (json.dumps({"W": [[1.0, 0.0, 0.0]] * 3}), r"'W'.*shape"),
        (json.dumps({"W": [[[1.0, 0.0], [0.0, 1.0]]] * 3}), r"'W'.*shape"),
        (json.dumps({"W": [[[1, 0, 0], [0, 1, 0], [0, 0, "x"]]] * 3}), "'W'"),
        (json.dumps({"offset": [[0.0, 0.0]] * 3}), r"'offset'.*shape"),
        (json.dumps({"W": [[[float("nan"), 0, 0], [0, 1, 0], [0, 0, 1]]] * 3}), "finite"),
    ],
)
def test_bad_calibration_file_is_named(content, match, small_model, tmp_path):
    from flexlearn.runtime.deploy import BundleOptions, export_deploy_bundle

    cal = tmp_path / "cal.json"
    if content is not None:
        cal.write_text(content)
    out = tmp_path / "out"
    with pytest.raises(FlexlearnError, match=match) as info:
        export_deploy_bundle(small_model, out / "b.pt", BundleOptions(n_segments=3, calibration=cal))
    assert "cal.json" in str(info.value) and "\n" not in str(info.value)
    assert not out.exists()


# ----------------------------------------------------------------------- all-or-nothing writes (defects 4, 7)
def test_failed_set_write_leaves_the_old_files(tmp_path, monkeypatch):
    from flexlearn.runtime import export

    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    export.write_artifacts([export.Artifact(a, b"old a", "x"), export.Artifact(b, b"old b", "x")])
    old = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real_replace = os.replace

    def failing_replace(src, dst):
        if Path(dst) == b:
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(FlexlearnError, match="disk full"):
        export.write_artifacts([export.Artifact(a, b"new a", "x"), export.Artifact(b, b"new b", "x")])
    with pytest.raises(FlexlearnError, match="disk full"):  # new files: none is left behind
        export.write_artifacts([export.Artifact(tmp_path / "c.bin", b"c", "x"), export.Artifact(b, b"new b", "x")])
    monkeypatch.setattr(os, "replace", real_replace)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == old


def test_output_that_is_a_file_is_refused(small_model, tmp_path):
    from flexlearn.runtime.export import export_torchscript

    blocker = tmp_path / "out"
    blocker.write_bytes(b"keep me")
    with pytest.raises(FlexlearnError, match="out"):
        export_torchscript(small_model, blocker / "m.pt", {})
    assert blocker.read_bytes() == b"keep me"
    (tmp_path / "dir.pt").mkdir()
    with pytest.raises(FlexlearnError, match="dir.pt"):
        export_torchscript(small_model, tmp_path / "dir.pt", {})


def test_a_users_file_of_an_export_name_is_kept(small_model, tmp_path):
    """``flexlearn-export out_dir=<a folder of the user's>`` replaced a file of the user's own named
    direction_model.pt; a file without a manifest beside it is now refused and kept, while an earlier export (its
    manifest beside it) is replaced as before."""
    from flexlearn.runtime.export import export_torchscript

    mine = tmp_path / "direction_model.pt"
    mine.write_bytes(b"my own model")
    with pytest.raises(FlexlearnError, match="did not export"):
        export_torchscript(small_model, mine, {})
    assert mine.read_bytes() == b"my own model" and not manifest_path(mine).exists()
    mine.unlink()
    export_torchscript(small_model, mine, {})
    first = mine.read_bytes()
    export_torchscript(small_model, mine, {"note": "again"})  # our own earlier export: replaced
    assert mine.read_bytes() != first and manifest_path(mine).is_file()


HASH_SEED_EXPORT = """
import sys, torch
from flexlearn.models.direction_mlp import DirectionMLP
from flexlearn.runtime.deploy import build_bundle, export_bundle
torch.manual_seed(0)
export_bundle(build_bundle(DirectionMLP(hidden=(8, 8)).eval(), 3), sys.argv[1], {"note": "t"})
"""


@pytest.mark.slow  # ≈ 18 s (two processes): CI runs it in its second step
def test_bundle_bytes_do_not_depend_on_the_hash_seed(tmp_path):
    """Scripting lists a module's constants in set order, i.e. by the process's string hash seed."""
    import subprocess
    import sys

    out = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        path = tmp_path / f"b{seed}.pt"
        subprocess.run([sys.executable, "-c", HASH_SEED_EXPORT, str(path)], check=True, env=env, timeout=300)
        out.append(path.read_bytes())
    assert out[0] == out[1] == out[2]
