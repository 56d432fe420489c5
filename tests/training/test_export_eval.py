"""Export parity (TorchScript and torch.export, loaded without flexlearn), evaluation, checkpoint faults."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from flexlearn.errors import CheckpointError
from flexlearn.runtime.export import load_torchscript
from flexlearn.tasks.checkpoints import load_direction_model
from flexlearn.jobs.export import export_checkpoint
from flexlearn.tasks.training import evaluate_checkpoint

PLAIN_TORCH_LOADER = textwrap.dedent("""
    import sys, json
    sys.modules["flexlearn"] = None          # make sure nothing of flexlearn can be imported
    try:
        import flexlearn  # noqa: F401
        raise SystemExit("flexlearn was importable")
    except ImportError:
        pass
    import torch
    x = torch.load(sys.argv[3], weights_only=True)
    extra = {"metadata.json": ""}
    ts = torch.jit.load(sys.argv[1], _extra_files=extra)
    program = torch.export.load(sys.argv[2]).module()
    torch.save({"ts": ts(x), "pt2": program(x), "meta": extra["metadata.json"]}, sys.argv[4])
""")


@pytest.fixture(scope="module")
def exported(trained_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    paths = export_checkpoint(trained_run["metrics"]["best_ckpt"], out, trained_run["metrics"], trained_run["cfg"])
    return trained_run, paths, out


def test_export_loads_with_plain_torch_and_matches_checkpoint(exported, tmp_path):
    run, paths, _ = exported
    model, _ = load_direction_model(run["metrics"]["best_ckpt"])
    x = torch.randn(257, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float32) * 1e-4
    torch.save(x, tmp_path / "x.pt")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    subprocess.run([sys.executable, "-c", PLAIN_TORCH_LOADER, paths["torchscript"], paths["program"],
                    str(tmp_path / "x.pt"), str(tmp_path / "y.pt")], check=True, cwd=tmp_path, env=env)
    got = torch.load(tmp_path / "y.pt", weights_only=True)
    with torch.no_grad():
        want = model(x)
    torch.testing.assert_close(got["ts"], want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got["pt2"], want, rtol=1e-5, atol=1e-6)
    meta = json.loads(got["meta"])
    assert meta["input"]["units"] == "T" and meta["input"]["shape"] == "(..., 3)"
    assert meta["dataset_schema_version"] >= 1 and meta["flexlearn_version"]
    assert "test/ang_err_median_deg" in meta["training_metrics"]
    assert meta["config"]["model"]["hidden"]


def test_exported_torchscript_is_frozen_and_batches(exported):
    _, paths, _ = exported
    module, meta = load_torchscript(paths["torchscript"])
    assert meta["model"] == "DirectionMLP"
    y = module(torch.randn(2, 5, 3) * 1e-4)
    assert y.shape == (2, 5, 3)
    torch.testing.assert_close(torch.linalg.vector_norm(y, dim=-1), torch.ones(2, 5))


def test_evaluate_checkpoint_writes_metrics_and_figures(trained_run, compose_cfg):
    cfg = compose_cfg("eval", [f"ckpt_path={trained_run['metrics']['best_ckpt']}"])
    metrics = evaluate_checkpoint(cfg.ckpt_path, cfg)
    # The evaluation of the best checkpoint reproduces the training run's test metrics.
    assert metrics["test/ang_err_median_deg"] == pytest.approx(trained_run["metrics"]["test/ang_err_median_deg"],
                                                               rel=1e-4)
    for name in ("error_polar_map", "error_histogram", "training_curves"):
        assert Path(metrics["figures"][name]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_direction_model(tmp_path / "nope.ckpt")


def test_corrupt_checkpoint_is_named_and_left_untouched(trained_run, tmp_path):
    good = Path(trained_run["metrics"]["best_ckpt"]).read_bytes()
    bad = tmp_path / "truncated.ckpt"
    bad.write_bytes(good[: len(good) // 2])
    with pytest.raises(CheckpointError, match="truncated.ckpt"):
        load_direction_model(bad)
    assert bad.read_bytes() == good[: len(good) // 2]


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


def test_checkpoint_with_pickled_code_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"model": {}}, "payload": _Exploit()}, evil,
               pickle_protocol=pickle.HIGHEST_PROTOCOL)
    with pytest.raises(CheckpointError, match="evil.ckpt"):
        load_direction_model(evil)
    assert not (tmp_path / "pwned.txt").exists()


def test_export_app_writes_the_robot_bundle(trained_run, compose_cfg):
    from flexlearn.runtime.deploy import load_bundle
    from flexlearn.jobs.export import export_robot_bundle

    cfg = compose_cfg("export", [f"ckpt_path={trained_run['metrics']['best_ckpt']}", "bundle.enabled=true",
                                 "bundle.n_segments=8"])
    path = export_robot_bundle(cfg.ckpt_path, cfg.out_dir, cfg.bundle)
    module, meta = load_bundle(path)
    assert meta["n_segments"] == 8 and meta["length_m"] == pytest.approx(0.029)
    assert meta["checkpoint"] == str(cfg.ckpt_path)
    assert module.n_segments == 8


def test_export_app_rejects_a_bad_bundle_option(trained_run, compose_cfg):
    from flexlearn.errors import ConfigError
    from flexlearn.jobs.export import export_robot_bundle

    cfg = compose_cfg("export", [f"ckpt_path={trained_run['metrics']['best_ckpt']}", "bundle.n_segments=0"])
    with pytest.raises(ConfigError, match="n_segments"):
        export_robot_bundle(cfg.ckpt_path, cfg.out_dir, cfg.bundle)
