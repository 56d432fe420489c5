"""Calibration files are checked for physics, not only shape: W symmetric positive definite with det 1 and bounded
eigenvalues, A a proper rotation (or the declared stretch), bounded offsets — refused with one line by the exporter
and by the Pi runner."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from flexlearn.errors import FlexlearnError
from flexlearn.runtime.bundle_inputs import load_calibration
from flexlearn.runtime.deploy import build_bundle, export_bundle
from flexlearn.runtime.pikit.calibration_file import CALIBRATION_SCHEMA, CalibrationFileError, check_physics
from flexlearn.runtime.pikit.manifest import manifest_path, manifest_record

ROOT = Path(__file__).resolve().parents[2]
N = 3
R = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # 90° about z
SQUASH = np.diag([2.0, 0.5, 1.0])  # det 1, symmetric positive definite

BAD = [
    ("W", -np.eye(3), "not positive definite"),  # a mirror of every axis, det −1
    ("W", np.diag([1.0, 1.0, -1.0]), "not positive definite"),  # a mirror of one axis
    ("W", 1e200 * np.eye(3), "entries up to 1e\\+200"),
    ("W", 2.0 * np.eye(3), "det 8"),
    ("W", np.array([[1.0, 0.2, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), "not symmetric"),
    ("W", np.diag([20.0, 0.25, 0.2]), "eigenvalues outside"),
    ("A", -R, "det -1"),
    ("A", 1.1 * R, "not a rotation"),
    ("offset", np.array([0.5, 0.0, 0.0]), "exceeds 0.01 T"),
]


def _cal(field=None, value=None, **extra) -> dict:
    cal = {"W": [SQUASH.tolist()] * N, "A": [R.tolist()] * N, "offset": [[1e-5, 0.0, 0.0]] * N, **extra}
    if field is not None:
        cal[field] = [np.asarray(value).tolist()] + cal[field][1:]
    return cal


def test_fitted_matrices_pass_and_the_stretch_is_opt_in():
    check_physics(_cal())
    w, a, _ = load_calibration(_cal(), N)
    assert np.allclose(w.numpy(), SQUASH) and np.allclose(a.numpy(), R)
    stretched = _cal("A", R @ np.diag([1.5, 1.0, 0.8]))
    with pytest.raises(CalibrationFileError, match="not a rotation"):
        check_physics(stretched)
    check_physics(stretched, stretch=True)
    load_calibration({**stretched, "alignment": "stretch"}, N)
    with pytest.raises(FlexlearnError, match="'alignment'"):
        load_calibration({**stretched, "alignment": "shear"}, N)
    with pytest.raises(CalibrationFileError, match="singular values"):
        check_physics(_cal("A", 3.0 * R), stretch=True)


@pytest.mark.parametrize("field,value,match", BAD)
def test_the_exporter_refuses_unphysical_matrices(tmp_path, field, value, match):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(_cal(field, value)))
    with pytest.raises(FlexlearnError, match=match) as info:
        load_calibration(str(path), N)
    text = str(info.value)
    assert "\n" not in text and "cal.json" in text and f"'{field}'" in text and "receiver 1" in text


def _runner():
    spec = importlib.util.spec_from_file_location("pi_runner_physics", ROOT / "scripts" / "pi_runner.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("field,value,match", [BAD[0], BAD[2], BAD[6]])
def test_the_pi_runner_refuses_them_with_one_line(tmp_path, capsys, field, value, match):
    from flexlearn.models.direction_mlp import DirectionMLP

    bundle = tmp_path / "b.pt"
    export_bundle(build_bundle(DirectionMLP(hidden=(8,)), N), bundle)
    manifest_path(bundle).write_text(json.dumps(manifest_record(bundle, "torchscript")))
    cal = tmp_path / "cal.json"
    cal.write_text(
        json.dumps({"schema": CALIBRATION_SCHEMA, "model_fingerprint": None, "n_modules": N, **_cal(field, value)})
    )
    log = tmp_path / "f.jsonl"
    log.write_text("")
    rc = _runner().main([str(bundle), "--log", str(log), "--calibration", str(cal), "--no-warmup"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "cal.json" in err[0] and f"'{field}'" in err[0], err
    assert __import__("re").search(match, err[0]), err
