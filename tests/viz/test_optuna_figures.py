"""Optuna sweep figures (flexlearn-aggregate on a multirun with optimization_results.yaml)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SWEEPER = {
    "direction": "minimize",
    "study_name": "direction_mlp",
    "sampler": {"n_startup_trials": 8},
    "params": {
        "task.lr": "tag(log, interval(3e-4, 1e-2))",
        "data.batch_size": "choice(128, 256, 512)",
        "model.activation": "choice(silu, tanh, gelu)",
    },
}


def make_study(root: Path, n: int = 16, seed: int = 3, search_space: bool = True) -> Path:
    """``n`` jobs whose metric depends strongly on lr, weakly on the activation, not on the batch size;
    job 5 diverged (its metrics.json says diverged). ``search_space=False``: hydra.yaml without the sweeper's
    params (the importances then use η², without importing Optuna)."""
    sweeper = SWEEPER if search_space else {k: v for k, v in SWEEPER.items() if k != "params"}
    rnd = random.Random(seed)
    for i in range(n):
        lr = math.exp(rnd.uniform(math.log(3e-4), math.log(1e-2)))
        act, bs = rnd.choice(["silu", "tanh", "gelu"]), rnd.choice([128, 256, 512])
        err = 0.3 + 2 * abs(math.log10(lr / 3e-3)) + (0.05 if act == "tanh" else 0.0) + rnd.gauss(0, 0.01)
        d = root / str(i) / ".hydra"
        d.mkdir(parents=True)
        (d / "overrides.yaml").write_text(f"- task.lr={lr}\n- data.batch_size={bs}\n- model.activation={act}\n")
        (d / "config.yaml").write_text("optimized_metric: val/ang_err_median_deg\n")
        (d / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"sweeper": sweeper}}))
        metrics = {"status": "diverged"} if i == 5 else {"status": "ok", "val/ang_err_median_deg": err}
        (root / str(i) / "metrics.json").write_text(json.dumps(metrics))
    (root / "optimization_results.yaml").write_text("name: optuna\nbest_value: 0.3\n")
    return root


def test_history_and_importance_figures_from_a_study(tmp_path):
    import matplotlib.image

    from flexlearn.sweeps.aggregate import aggregate_multirun
    from flexlearn.viz.optuna_figures import write_optuna_figures

    root = make_study(tmp_path / "study", search_space=False)
    res = aggregate_multirun(root)
    paths = write_optuna_figures(root, res["rows"], res["y"], root)
    assert [p.name for p in paths] == ["optuna_history.png", "optuna_importance.png"]
    for p in paths:
        assert matplotlib.image.imread(p).shape[0] > 250


@pytest.mark.slow  # imports Optuna (~8 s) and fits its random forest
def test_optuna_importances_rank_the_learning_rate_first(tmp_path):
    pytest.importorskip("optuna")
    pytest.importorskip("sklearn")
    from flexlearn.sweeps.aggregate import aggregate_multirun
    from flexlearn.viz.optuna_figures import optuna_importances

    res = aggregate_multirun(make_study(tmp_path / "study", n=20))
    imp, method = optuna_importances(res["rows"], res["y"], SWEEPER["params"], "minimize")
    assert method.startswith("Optuna") and max(imp, key=imp.get) == "task.lr" and imp["task.lr"] > 0.5


def test_eta_squared_finds_the_parameter_that_matters():
    from flexlearn.viz.optuna_figures import eta_squared

    rnd = random.Random(0)
    trials = [{"a": rnd.uniform(0, 1), "b": rnd.choice(["x", "y"]), "m": 0.0} for _ in range(40)]
    for t in trials:
        t["m"] = 5 * t["a"] + rnd.gauss(0, 0.05)
    trials.append({"a": 0.5, "b": "x", "m": float("inf")})  # a diverged trial is left out
    w = eta_squared(trials, "m", ["a", "b"])
    assert w["a"] > 0.9 and abs(sum(w.values()) - 1) < 1e-12


def test_aggregate_app_writes_the_optuna_figures(tmp_path):
    root = make_study(tmp_path / "study", n=6, search_space=False)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "flexlearn.apps.aggregate", f"dir={root}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "optuna_history.png" in proc.stdout and (root / "optuna_importance.png").is_file()
