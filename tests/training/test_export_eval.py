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
from flexlearn.jobs.evaluate import evaluate_checkpoint
from flexlearn.jobs.export import export_checkpoint
from flexlearn.runtime.export import load_torchscript
from flexlearn.tasks.checkpoints import load_direction_model

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
    subprocess.run(
        [
            sys.executable,
            "-c",
            PLAIN_TORCH_LOADER,
            paths["torchscript"],
            paths["program"],
            str(tmp_path / "x.pt"),
            str(tmp_path / "y.pt"),
        ],
        check=True,
        cwd=tmp_path,
        env=env,
    )
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
    assert metrics["test/ang_err_median_deg"] == pytest.approx(
        trained_run["metrics"]["test/ang_err_median_deg"], rel=1e-4
    )
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
    torch.save(
        {"state_dict": {}, "hyper_parameters": {"model": {}}, "payload": _Exploit()},
        evil,
        pickle_protocol=pickle.HIGHEST_PROTOCOL,
    )
    with pytest.raises(CheckpointError, match="evil.ckpt"):
        load_direction_model(evil)
    assert not (tmp_path / "pwned.txt").exists()


def test_export_app_writes_the_robot_bundle(trained_run, compose_cfg):
    from flexlearn.jobs.export import export_robot_bundle
    from flexlearn.runtime.deploy import load_bundle

    cfg = compose_cfg(
        "export",
        [
            f"ckpt_path={trained_run['metrics']['best_ckpt']}",
            "bundle.enabled=true",
            "bundle.n_segments=8",
            "bundle.calibration=identity",
        ],
    )
    path = export_robot_bundle(cfg.ckpt_path, cfg.out_dir, cfg.bundle)
    module, meta = load_bundle(path)
    assert meta["n_segments"] == 8 and meta["length_m"] == pytest.approx(0.029)
    assert meta["checkpoint"] == str(cfg.ckpt_path)
    assert module.n_segments == 8


def test_export_app_rejects_a_bad_bundle_option(trained_run, compose_cfg):
    from flexlearn.errors import ConfigError
    from flexlearn.jobs.export import export_robot_bundle

    cfg = compose_cfg(
        "export",
        [f"ckpt_path={trained_run['metrics']['best_ckpt']}", "bundle.n_segments=0", "bundle.calibration=identity"],
    )
    with pytest.raises(ConfigError, match="n_segments"):
        export_robot_bundle(cfg.ckpt_path, cfg.out_dir, cfg.bundle)


# ------------------------------------------------------------------ hostile-user defects of flexlearn-export
def _cli_export(tmp_path, *overrides):
    """Run `flexlearn-export` in a fresh process (its own hydra run folder); returns the CompletedProcess."""
    hydra_dir = tmp_path / f"hydra{len(list(tmp_path.glob('hydra*')))}"
    return subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.export", *overrides, f"hydra.run.dir={hydra_dir}"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def cli_exports(trained_run, tmp_path_factory):
    """The same export run twice into one folder, then a failing export (unknown controller key) into it."""
    tmp = tmp_path_factory.mktemp("cli_export")
    out = tmp / "out"
    args = [
        f"ckpt_path={trained_run['metrics']['best_ckpt']}",
        f"out_dir={out}",
        "bundle.enabled=true",
        "bundle.n_segments=4",
        "bundle.calibration=identity",
    ]
    runs, snaps = [], []
    for extra in ([], ["json=true"], ["+bundle.controller.not_a_key=1"]):  # the second prints JSON
        runs.append(_cli_export(tmp, *args, *extra))
        snaps.append(_snapshot(out))
    return runs, snaps


def test_export_ends_with_what_it_wrote_the_next_step_and_the_directory(cli_exports):
    runs, _ = cli_exports
    lines = runs[0].stdout.strip().splitlines()
    out = Path(json.loads(runs[1].stdout)["bundle"]).parent
    assert lines[0].startswith("flexlearn-export: 3 outputs written") and lines[-2:] == ["run directory:", str(out)]
    for what, name in (
        ("torchscript", "direction_model.pt"),
        ("program", "direction_model.pt2"),
        ("bundle", "robot_bundle.pt"),
    ):
        assert f"  {what}: {out / name}" in lines
    assert any(line.startswith("next: python scripts/pi_runner.py " + str(out / "robot_bundle.pt")) for line in lines)


def test_standalone_export_carries_the_training_runs_metrics(cli_exports, trained_run):
    """flexlearn-export on its own finds the run through the checkpoint folder's run.json: the model file's
    metadata holds the run's test metrics, as the pipeline's export does."""
    runs, _ = cli_exports
    _, meta = load_torchscript(json.loads(runs[1].stdout)["torchscript"])
    want = trained_run["metrics"]["test/ang_err_median_deg"]
    assert meta["training_metrics"]["test/ang_err_median_deg"] == pytest.approx(want, rel=1e-12)


def test_reexport_is_byte_identical_and_has_manifests(cli_exports):
    """Defect 3: the archives were saved under a temporary name that became their root folder."""
    runs, snaps = cli_exports
    assert runs[0].returncode == 0 and runs[1].returncode == 0, runs[0].stderr[-2000:] + runs[1].stderr[-2000:]
    assert sorted(snaps[0]) == sorted(
        ["direction_model.pt", "direction_model.pt2", "robot_bundle.pt"]
        + [f"{n}.manifest.json" for n in ("direction_model.pt", "direction_model.pt2", "robot_bundle.pt")]
    )
    for name in snaps[0]:
        assert snaps[0][name] == snaps[1][name], name
    import zipfile

    for name in ("direction_model.pt", "direction_model.pt2", "robot_bundle.pt"):
        assert {
            n.split("/")[0]
            for n in zipfile.ZipFile(
                Path(
                    json.loads(runs[1].stdout)[
                        {
                            "direction_model.pt": "torchscript",
                            "direction_model.pt2": "program",
                            "robot_bundle.pt": "bundle",
                        }[name]
                    ]
                )
            ).namelist()
        } == {"archive"}


def test_failed_export_leaves_the_previous_files(cli_exports):
    """Defect 4: a bad bundle option used to fail after .pt/.pt2 had been replaced (a mixed set)."""
    runs, snaps = cli_exports
    assert runs[2].returncode == 2 and "not_a_key" in runs[2].stderr
    assert len(runs[2].stderr.strip().splitlines()) == 1 and "Traceback" not in runs[2].stderr
    assert snaps[2] == snaps[1]


@pytest.mark.parametrize("case", ["missing_calibration", "out_dir_is_a_file", "arm_out_dir_is_a_file", "negative_gain"])
def test_cli_export_errors_are_one_line(case, trained_run, tmp_path):
    """Defects 5, 6, 7: out-of-range controller settings exported (exit 0); a missing calibration file and an
    output folder that is a file ended in a traceback."""
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"keep me")
    out = blocker if case.endswith("out_dir_is_a_file") else tmp_path / "out"
    extra = {
        "missing_calibration": ["bundle.calibration=/no/such.json"],
        "out_dir_is_a_file": [],
        "arm_out_dir_is_a_file": ["target=arm_controller"],
        "negative_gain": ["+bundle.controller.kp=-1e9", "+bundle.controller.v_max=-1", "bundle.calibration=identity"],
    }[case]
    ckpt = [] if case.startswith("arm") else [f"ckpt_path={trained_run['metrics']['best_ckpt']}"]  # not read there
    r = _cli_export(tmp_path, *ckpt, f"out_dir={out}", "bundle.enabled=true", *extra)
    assert r.returncode == 2, r.stderr[-2000:]
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("flexlearn-export: error:")
    assert {
        "missing_calibration": "/no/such.json",
        "out_dir_is_a_file": str(blocker),
        "arm_out_dir_is_a_file": str(blocker),
        "negative_gain": "bundle.controller.kp",
    }[case] in r.stderr
    assert blocker.read_bytes() == b"keep me" and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "bad",
    [["+bundle.controller.kp=-1e9"], ["bundle.calibration=CAL"], ["+bundle.estimator.p0=-1"], ["bundle.n_segments=0"]],
)
def test_failed_bundle_export_writes_nothing(bad, trained_run, compose_cfg, tmp_path):
    """In-process: validation happens before any file is written, with or without earlier files there."""
    from flexlearn.errors import ConfigError
    from flexlearn.jobs.export import export_from_config

    ckpt = f"ckpt_path={trained_run['metrics']['best_ckpt']}"
    out = tmp_path / "out"
    export_from_config(
        compose_cfg("export", [ckpt, f"out_dir={out}", "bundle.enabled=true", "bundle.calibration=identity"])
    )
    before = _snapshot(out)
    assert len(before) == 6
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps([1, 2, 3]))
    bad = [b.replace("CAL", str(cal)) for b in bad]
    identity = [] if any(b.startswith("bundle.calibration") for b in bad) else ["bundle.calibration=identity"]
    with pytest.raises(ConfigError, match=r"bundle|cal\.json"):
        export_from_config(
            compose_cfg(
                "export", [ckpt, f"out_dir={out}", "bundle.enabled=true", "bundle.length=0.03", *identity, *bad]
            )
        )
    assert _snapshot(out) == before


def test_exported_files_carry_manifests_that_loaders_check(exported):
    from flexlearn.runtime.export import load_program
    from flexlearn.runtime.pikit.manifest import UntrustedArtifactError, manifest_path

    _, paths, _ = exported
    for kind in ("torchscript", "program"):
        record = json.loads(manifest_path(paths[kind]).read_text())
        assert record["kind"] == kind and record["file"] == Path(paths[kind]).name
    module, meta = load_program(paths["program"])
    assert meta["model"] == "DirectionMLP" and module(torch.zeros(2, 3)).shape == (2, 3)
    copy = Path(paths["torchscript"]).with_name("copy.pt")
    copy.write_bytes(Path(paths["torchscript"]).read_bytes())
    with pytest.raises(UntrustedArtifactError, match="copy.pt"):
        load_torchscript(copy)
    assert load_torchscript(copy, trust_unverified=True)[1]["model"] == "DirectionMLP"


def test_evaluation_bands_follow_the_commanded_bend(trained_run, compose_cfg):
    cfg = compose_cfg("eval", [f"ckpt_path={trained_run['metrics']['best_ckpt']}"])
    metrics = evaluate_checkpoint(cfg.ckpt_path, cfg)
    assert metrics["bands_by"] == "commanded bend" and metrics["cap_deg"] == pytest.approx(29.5)
    # Every pose of the sweep was commanded within its 29.5° cap: all of them are scored in the cap band, though
    # the labels (board and base tilt included) reach past it.
    assert metrics["test/cap/n_samples"] == metrics["test/n_samples"]
    assert metrics["test/past_cap/n_samples"] == 0
    assert 0 < metrics["test/cap/label_colatitude_median_deg"] < 29.5


def test_a_relative_dataset_path_resolves_from_any_directory(tmp_path, monkeypatch):
    from flexlearn.errors import ConfigError
    from flexlearn.jobs.evaluate import resolve_dataset_path

    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "ds.parquet").write_bytes(b"x")
    ckpt = project / "logs" / "train" / "runs" / "r1" / "checkpoints" / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert resolve_dataset_path("data/ds.parquet", ckpt) == project / "data" / "ds.parquet"
    with pytest.raises(ConfigError, match=r"'data/other.parquet', is not found .*pass dataset_path=<file>"):
        resolve_dataset_path("data/other.parquet", ckpt)
    with pytest.raises(ConfigError, match=r"records no dataset; pass dataset_path=<file>"):
        resolve_dataset_path(None, ckpt)


def test_cli_eval_from_another_directory(trained_run, tmp_path):
    best = trained_run["metrics"]["best_ckpt"]
    ckpt = torch.load(best, weights_only=True, map_location="cpu")
    from flexlearn.tasks.checkpoints import CHECKPOINT_INFO_KEY

    assert Path(ckpt[CHECKPOINT_INFO_KEY]["dataset_path"]).is_absolute()
    ckpt[CHECKPOINT_INFO_KEY]["dataset_path"] = "gone/dataset.parquet"
    torch.save(ckpt, tmp_path / "moved.ckpt")
    script = Path(sys.executable).with_name("flexlearn-eval")
    env = dict(os.environ, FLEXLEARN_ROOT=str(tmp_path), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [str(script), f"ckpt_path={tmp_path / 'moved.ckpt'}"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "gone/dataset.parquet" in proc.stderr and "dataset_path=" in proc.stderr
    proc = subprocess.run([str(script), f"ckpt_path={best}"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
