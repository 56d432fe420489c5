"""flexlearn-calibrate: a new module's calibration file, its round trip through the exporter and the bundle, the
refusals (too few poses, another model, schema or module count), and held-out modules in training and eval."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from flexlearn.errors import ConfigError, DataError
from flexlearn.sim.rig import simulate_sweep


@pytest.fixture(scope="module")
def module_sweeps(tmp_path_factory):
    """Raw sweeps of two modules the trained model never saw (module seeds 31, 32)."""
    root = tmp_path_factory.mktemp("modules")
    paths = []
    for seed in (31, 32):
        simulate_sweep({"n_poses": 150, "seed": seed}).save(root / f"m{seed}")
        paths.append(str(root / f"m{seed}"))
    return paths


@pytest.fixture(scope="module")
def calibration(trained_run, module_sweeps, tmp_path_factory):
    from omegaconf import OmegaConf

    from flexlearn.apps.runner import CONF_DIR
    from flexlearn.jobs.calibrate import calibrate

    ckpt = trained_run["metrics"]["best_ckpt"]
    root = tmp_path_factory.mktemp("calibrate")
    cfg = OmegaConf.load(f"{CONF_DIR}/calibrate.yaml")  # the app's defaults, without Hydra's groups
    del cfg["defaults"]
    cfg.merge_with({"ckpt_path": ckpt, "inputs": module_sweeps, "output": str(root / "cal.json")})
    summary = calibrate(cfg)
    return ckpt, root / "cal.json", summary


def test_calibration_round_trip_through_export_and_bundle(calibration, compose_cfg, tmp_path):
    from flexlearn.jobs.export import export_from_config
    from flexlearn.runtime.bundle_inputs import model_fingerprint
    from flexlearn.runtime.deploy import load_bundle
    from flexlearn.tasks.checkpoints import load_direction_model

    ckpt, path, summary = calibration
    doc = json.loads(path.read_text())
    model, _ = load_direction_model(ckpt)
    assert doc["schema"] == "flexlearn-calibration/1" and doc["n_modules"] == 2 == summary["n_modules"]
    assert doc["model_fingerprint"] == model_fingerprint(model)
    assert [m["module_seed"] for m in doc["modules"]] == [31, 32]
    assert all(m["fit"]["n_poses"] <= 50 and m["tumble"]["coverage"] >= 0.7 for m in doc["modules"])
    out = tmp_path / "export"
    export_from_config(
        compose_cfg(
            "export",
            [
                f"ckpt_path={ckpt}",
                f"out_dir={out}",
                "bundle.enabled=true",
                "bundle.n_segments=2",
                f"bundle.calibration={path}",
            ],
        )
    )
    module, meta = load_bundle(out / "robot_bundle.pt")
    aw = np.asarray(doc["A"]) @ np.asarray(doc["W"])
    assert np.allclose(meta["calibration"]["aw"], aw, atol=1e-12)
    assert np.allclose(module.estimator.aw.numpy(), aw, atol=1e-12)
    assert meta["model_fingerprint"] == doc["model_fingerprint"]


@pytest.mark.parametrize(
    "change,match",
    [
        ({"n_modules": 3}, "n_modules"),
        ({"schema": "other/2"}, "schema"),
        ({"model_fingerprint": "0" * 64}, "another direction model"),
    ],
)
def test_exporter_refuses_a_calibration_of_another_model_schema_or_module_count(
    calibration, compose_cfg, tmp_path, change, match
):
    from flexlearn.jobs.export import export_from_config

    ckpt, path, _ = calibration
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    out = tmp_path / "export"
    with pytest.raises(ConfigError, match=match):
        export_from_config(
            compose_cfg(
                "export",
                [
                    f"ckpt_path={ckpt}",
                    f"out_dir={out}",
                    "bundle.enabled=true",
                    "bundle.n_segments=2",
                    f"bundle.calibration={bad}",
                ],
            )
        )
    assert not out.exists()


def test_a_bundle_without_calibration_needs_identity_explicitly(trained_run, compose_cfg, tmp_path):
    from flexlearn.jobs.export import export_from_config

    ckpt = f"ckpt_path={trained_run['metrics']['best_ckpt']}"
    with pytest.raises(ConfigError, match="bundle.calibration=identity"):
        export_from_config(compose_cfg("export", [ckpt, f"out_dir={tmp_path / 'a'}", "bundle.enabled=true"]))
    paths = export_from_config(
        compose_cfg("export", [ckpt, f"out_dir={tmp_path / 'b'}", "bundle.enabled=true", "bundle.calibration=identity"])
    )
    assert "bundle" in paths


def test_too_few_poses_are_refused_naming_them(trained_run, module_sweeps, compose_cfg, tmp_path):
    from flexlearn.jobs.calibrate import calibrate

    cfg = compose_cfg(
        "calibrate",
        [
            f"ckpt_path={trained_run['metrics']['best_ckpt']}",
            f"inputs={module_sweeps[0]}",
            "n_poses=6",
            f"output={tmp_path / 'cal.json'}",
        ],
    )
    with pytest.raises(DataError, match=r"6 stationary poses covering \d+% of the cap; at least 12"):
        calibrate(cfg)
    assert not (tmp_path / "cal.json").exists()


def test_processing_overrides_for_dataset_inputs_are_refused(trained_run, module_sweeps, compose_cfg, tmp_path):
    """``+processing.…`` with processed dataset inputs was ignored without a word (only raw sweeps are processed
    here); it is refused, naming the key and what to do, before anything is written."""
    from flexlearn.data.process import process_sweep
    from flexlearn.jobs.calibrate import calibrate
    from flexlearn.sensing.streams import RawSweep

    ds = tmp_path / "m.parquet"
    process_sweep(RawSweep.load(module_sweeps[0])).dataset.save(ds)
    cfg = compose_cfg(
        "calibrate",
        [
            f"ckpt_path={trained_run['metrics']['best_ckpt']}",
            f"inputs={ds}",
            "+processing.settle_time=0.02",
            f"output={tmp_path / 'cal.json'}",
        ],
    )
    with pytest.raises(ConfigError, match="processing.*only read for raw sweep inputs"):
        calibrate(cfg)
    assert not (tmp_path / "cal.json").exists()


def test_calibrate_app_error_is_one_line(trained_run, module_sweeps, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "flexlearn.apps.calibrate",
            f"ckpt_path={trained_run['metrics']['best_ckpt']}",
            f"inputs={module_sweeps[0]}",
            "n_poses=80",
            f"output={tmp_path / 'c.json'}",
            f"hydra.run.dir={tmp_path / 'h'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and r.stderr.startswith("flexlearn-calibrate: error:") and "n_poses" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_calibrate_app_ends_with_each_module_the_export_and_the_directory(trained_run, module_sweeps, tmp_path):
    """The summary names the file, each module's residual and tumble coverage, the export command that takes the
    file, and the directory last; json=true prints the same summary as JSON instead."""
    base = [
        sys.executable,
        "-m",
        "flexlearn.apps.calibrate",
        f"ckpt_path={trained_run['metrics']['best_ckpt']}",
        f"inputs=[{module_sweeps[0]},{module_sweeps[1]}]",
        "n_poses=50",
        f"hydra.run.dir={tmp_path / 'h'}",
    ]
    out = tmp_path / "cal" / "c.json"
    r = subprocess.run([*base, f"output={out}"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == f"flexlearn-calibrate: 2 module(s) calibrated -> {out}"
    for i in (1, 2):
        assert any(
            re.match(rf"  module {i}: median residual [0-9.e+-]+° after the fit, tumble coverage", ln) for ln in lines
        )
    assert f"bundle.enabled=true bundle.calibration={out}" in lines[-3] and lines[-3].startswith(
        "next: flexlearn-export"
    )
    assert lines[-2:] == ["run directory:", str(out.parent)]
    j = subprocess.run([*base, f"output={tmp_path / 'c2.json'}", "json=true"], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)  # fmt: skip
    assert j.returncode == 0 and json.loads(j.stdout)["n_modules"] == 2, j.stderr[-2000:]


@pytest.mark.slow
def test_held_out_modules_after_calibration(compose_cfg, tmp_path):
    """A model trained on module 0 scores modules 41 and 42 (never seen) far better after 50-pose calibration; the
    run's metrics.json carries test/… and test_module/… per colatitude band, and flexlearn-eval's
    calibration.n_poses gives the same kind of figure for a module's dataset."""
    from flexlearn.jobs.evaluate import evaluate_checkpoint
    from flexlearn.jobs.train import train
    from flexlearn.jobs.transfer import held_out_datasets

    cfg = compose_cfg(
        "train",
        [
            "data.sim.n_poses=3000",
            "trainer.max_epochs=20",
            "transfer.module_seeds=[41,42]",
            "transfer.sweep_poses=1500",
            "logger=none",
            "callbacks=none",
        ],
    )
    m = train(cfg)
    cal, raw = m["test_module/cap/ang_err_median_deg"], m["test_module_uncalibrated/cap/ang_err_median_deg"]
    assert cal < 1.0 and cal < 0.5 * raw, (cal, raw)
    assert m["test_module/past_cap/n_samples"] > 50 and "test/col_20-29.5/ang_err_p95_deg" in m
    assert set(m["figures_test_module"]) == {"error_histogram", "error_polar_map"}
    path = held_out_datasets(cfg)[1][1]
    ev = [
        evaluate_checkpoint(
            m["last_ckpt"],
            compose_cfg(
                "eval",
                [f"ckpt_path='{m['last_ckpt']}'", f"dataset_path={path}", f"calibration.n_poses={k}"],
                out=f"ev{k}",
            ),
        )
        for k in (0, 50)
    ]
    assert ev[1]["test/cap/ang_err_median_deg"] < 0.5 * ev[0]["test/cap/ang_err_median_deg"]
    assert ev[1]["calibration"]["fit"]["n_poses"] == 50


def test_pi_runner_takes_the_calibration_file_and_refuses_another_module_count(calibration, compose_cfg, tmp_path):
    import importlib.util
    from pathlib import Path

    from flexlearn.jobs.export import export_from_config

    ckpt, path, _ = calibration
    spec = importlib.util.spec_from_file_location(
        "pi_runner_cal", str(Path(__file__).resolve().parents[2] / "scripts" / "pi_runner.py")
    )
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    doc = json.loads(path.read_text())
    for n, ok in ((2, True), (3, False)):
        out = tmp_path / f"n{n}"
        export_from_config(
            compose_cfg(
                "export",
                [
                    f"ckpt_path={ckpt}",
                    f"out_dir={out}",
                    "bundle.enabled=true",
                    f"bundle.n_segments={n}",
                    "bundle.calibration=identity",
                ],
            )
        )
        bundle, meta, n_seg = runner.load_checked(str(out / "robot_bundle.pt"))
        if ok:
            runner.apply_calibration(bundle, meta, n_seg, str(path))
            assert np.allclose(bundle.estimator.aw.numpy(), np.asarray(doc["A"]) @ np.asarray(doc["W"]), atol=1e-12)
        else:
            with pytest.raises(runner.RunnerError, match="n_modules"):
                runner.apply_calibration(bundle, meta, n_seg, str(path))


def test_a_module_in_another_field_convention_is_refused(trained_run, module_sweeps, compose_cfg, tmp_path):
    """The model learned tumble-corrected fields (W applied); an uncorrected module would silently be off."""
    from flexlearn.jobs.calibrate import calibrate

    cfg = compose_cfg(
        "calibrate",
        [
            f"ckpt_path={trained_run['metrics']['best_ckpt']}",
            f"inputs={module_sweeps[0]}",
            "+processing.soft_iron=none",
            "require_tumble=false",
            f"output={tmp_path / 'cal.json'}",
        ],
    )
    with pytest.raises(DataError, match=r"trained on tumble-corrected fields.*processing.soft_iron=tumble"):
        calibrate(cfg)


def test_a_fit_the_exporter_would_refuse_is_refused_before_writing(trained_run, module_sweeps, tmp_path):
    """An untrained model (its weights reset) makes the 8-parameter alignment fit land on a map that is no
    plausible alignment; writing it would give a file the exporter and the Pi runner then refuse. It is refused
    here, naming the module's recording and the way out, and nothing is written; a rotation fit is written."""
    import torch
    from omegaconf import OmegaConf

    from flexlearn.apps.runner import CONF_DIR
    from flexlearn.jobs.calibrate import calibrate
    from flexlearn.runtime.bundle_inputs import load_calibration

    ckpt = torch.load(trained_run["metrics"]["best_ckpt"], map_location="cpu", weights_only=True)
    gen = torch.Generator().manual_seed(3)
    ckpt["state_dict"] = {k: torch.randn(v.shape, generator=gen) * 0.3 for k, v in ckpt["state_dict"].items()}
    untrained = tmp_path / "untrained.ckpt"
    torch.save(ckpt, untrained)
    cfg = OmegaConf.load(f"{CONF_DIR}/calibrate.yaml")
    del cfg["defaults"]
    out = tmp_path / "cal.json"
    cfg.merge_with({"ckpt_path": str(untrained), "inputs": module_sweeps[:1], "output": str(out)})
    with pytest.raises(DataError, match=r"m31: fitted calibration: field 'A' of receiver 1 .*kind=rotation"):
        calibrate(cfg)
    assert not out.exists()
    cfg.kind = "rotation"
    calibrate(cfg)
    load_calibration(out, 1)  # what is written loads
